// Package vmtest boots a real Debian Linux kernel with IPVS under qemu
// (software emulation, TCG) and runs a static Go test binary inside it.
//
// The host kernel of the developers' and CI's machines has no IPVS, so the
// IPVS data plane cannot be tested there. vmtest fetches Debian's cloud
// kernel package (once, into a cache), packs a small initramfs with busybox,
// the netfilter/IPVS/veth modules, optional host tools such as ip(8) and
// nft(8) with their shared libraries, and the test binary, boots it, and
// reads the verdict that the VM's /init prints on the serial console.
//
// A host test drives the VM; the test that runs inside is an ordinary test
// of some package, skipped unless InVM:
//
//	func TestIPVS(t *testing.T) {
//		env := vmtest.Require(t)
//		bin := vmtest.BuildTestBinary(t, "netspec.dev/netspec/applier/ipvs")
//		env.Run(t, vmtest.Options{
//			Binary:       bin,
//			Args:         []string{"-test.run", "^TestInVM", "-test.v"},
//			HostBinaries: []string{"/usr/sbin/ip", "/usr/sbin/nft"},
//		})
//	}
//
//	func TestInVMServices(t *testing.T) {
//		if !vmtest.InVM() {
//			t.Skip("runs only inside the vmtest VM")
//		}
//		// ... talk to IPVS over netlink ...
//	}
//
// A boot costs some 3-5 s of host CPU under emulation. To pay it once for
// several suites, Options.Suites lists test binary runs that one VM makes
// one after another, each in its own directory with its own environment
// and with a verdict of its own; RunSuites returns each suite's verdict,
// console and CPU time, and Result.Check fails a test with the console of
// its suite:
//
//	for _, r := range env.RunSuites(t, vmtest.Options{Suites: []vmtest.Suite{
//		{Name: "apply", Binary: bin, Args: []string{"-test.run", "^TestInVMApply$"}},
//		{Name: "traffic", Binary: other, Args: []string{"-test.run", "^TestTraffic$/^ipvs/"}},
//	}}) {
//		t.Run(r.Name, func(t *testing.T) { r.Check(t) })
//	}
//
// Run and RunSuites log the host CPU qemu used, in all, to the first
// suite's start (the boot) and during each suite.
//
// Environment variables:
//
//	NETSPEC_VMTEST_REQUIRE=1   fail instead of skipping when the VM cannot run (CI)
//	NETSPEC_VMTEST_CACHE=DIR   cache directory (default: os.UserCacheDir()/netspec-vmtest)
//	NETSPEC_VMTEST_QEMU=PATH   qemu-system-x86_64 to use (default: from PATH)
//	NETSPEC_VMTEST_BUSYBOX=PATH static busybox to use (default: /bin/busybox, then PATH)
//	NETSPEC_VMTEST_KERNEL_PACKAGE=NAME  Debian meta package whose kernel is booted
//	                           (default: linux-image-cloud-amd64)
//
// Setting NETSPEC_VMTEST_QEMU or NETSPEC_VMTEST_BUSYBOX to a path that does
// not exist simulates a machine without the packages: the tests then skip.
//
// Host packages: qemu-system-x86 and busybox-static (plus apt-get, dpkg and
// ldd, which every Debian has; iproute2 and nftables for HostBinaries).
package vmtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// InstallHint is the command that installs what vmtest needs on a Debian
// host. Skip and failure messages quote it so that whoever reads them knows
// exactly what to do.
const InstallHint = "apt-get update && apt-get install -y qemu-system-x86 busybox-static"

// ResultMarker starts the line that the VM's /init prints when the test
// binaries have ended: "NETSPEC-VMTEST-RESULT: PASS run=ID" when each
// exited with status 0, "NETSPEC-VMTEST-RESULT: FAIL exit=N run=ID" with
// the status of the first that did not (or "FAIL modprobe=M" and the like
// when the VM could not be set up). Each suite's run ends with a line of
// its own, "NETSPEC-VMTEST-RESULT: PASS run=ID.N" and the like. ID is
// random for each VM, so output of a test binary cannot fake a verdict.
const ResultMarker = "NETSPEC-VMTEST-RESULT:"

// StartMarker starts the line that /init prints before it runs a suite:
// "NETSPEC-VMTEST-START: NAME run=ID.N" for the Nth suite (from 1); the
// suite's own result line ends in "run=ID.N" too, the VM-wide one in
// "run=ID".
const StartMarker = "NETSPEC-VMTEST-START:"

// InVMEnv is the environment variable that /init sets to "1" for the test
// binary; InVM reports it.
const InVMEnv = "NETSPEC_VMTEST"

// DefaultModules is the space-separated list of kernel modules that Run
// loads, in this order, when Options.Modules is nil: IPVS with every
// scheduler, and what traffic tests need besides (conntrack, NAT,
// nftables with the expressions the nft data plane uses, veth, dummy).
// Dependencies are resolved by modprobe from modules.dep, so order matters
// only for readability. Extend it with
//
//	append(strings.Fields(vmtest.DefaultModules), "sch_netem")
const DefaultModules = "libcrc32c nf_defrag_ipv4 nf_defrag_ipv6 nf_conntrack " +
	"ip_vs ip_vs_rr ip_vs_wrr ip_vs_lc ip_vs_wlc ip_vs_sh ip_vs_dh ip_vs_sed ip_vs_nq ip_vs_mh " +
	"nf_nat nf_tables nft_chain_nat nft_ct nft_nat nft_masq nft_numgen " +
	"nft_fib nft_fib_ipv4 nft_fib_ipv6 nft_fib_inet " +
	"nf_reject_ipv4 nf_reject_ipv6 nft_reject nft_reject_ipv4 nft_reject_ipv6 nft_reject_inet " +
	"nf_conntrack_netlink veth dummy"

// Default values of Options fields left zero.
const (
	// DefaultTimeout bounds a Run whose Options.Timeout is zero: a boot
	// takes about 3 s alone, and a Go test binary runs several times slower
	// under emulation than on the host.
	DefaultTimeout = 120 * time.Second
	// DefaultMemory is the VM's memory in MiB when Options.Memory is zero;
	// the initramfs (some 16 MB with ip, nft and a test binary) lives in it too.
	DefaultMemory = 512
)

// InVM reports whether the code runs inside a vmtest VM (the /init script
// sets NETSPEC_VMTEST=1). Tests meant for the VM skip unless it is true, so
// that the same package's tests pass on the host.
func InVM() bool {
	return os.Getenv(InVMEnv) == "1"
}

// Env is a prepared VM environment: the tools found on the host and a
// kernel with its modules in the cache. Get one from Require; it is safe to
// use from several tests at once.
type Env struct {
	// KernelVersion is the booted kernel's release (uname -r), for example
	// "6.1.0-56-cloud-amd64"; it is resolved from apt at run time.
	KernelVersion string
	// Kernel is the host path of the kernel image (vmlinuz) that Run boots.
	Kernel string
	// Package is the Debian package the kernel comes from.
	Package string

	qemu    string
	busybox string
	modDir  string // <root>/lib/modules/<ver>
	applets []string
	mods    *moduleIndex
}

var (
	envMu    sync.Mutex
	envCache = map[string]*Env{}
)

// Require returns the VM environment, preparing it on first use: it looks
// for qemu-system-x86_64, a static busybox, apt-get, dpkg and ldd, resolves
// the current Debian cloud kernel with apt-cache, and downloads and unpacks
// it once into the cache (a lock file serializes concurrent test processes).
// When something is missing it calls t.Skip with a message that starts with
// "SKIPPED:" and says what to install — or t.Fatal if NETSPEC_VMTEST_REQUIRE=1,
// so that CI cannot pass by skipping.
func Require(t testing.TB) *Env {
	t.Helper()
	if InVM() {
		unavailable(t, "already inside a vmtest VM (NETSPEC_VMTEST=1); nested VMs are not supported")
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		unavailable(t, "vmtest runs only on linux/amd64 hosts, this is "+runtime.GOOS+"/"+runtime.GOARCH)
	}
	var missing []string
	qemu, err := findQEMU()
	if err != nil {
		missing = append(missing, err.Error())
	}
	busybox, err := findBusybox()
	if err != nil {
		missing = append(missing, err.Error())
	}
	for _, tool := range []string{"apt-get", "apt-cache", "dpkg", "ldd"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool+" not found in PATH (vmtest needs a Debian host)")
		}
	}
	if len(missing) > 0 {
		unavailable(t, strings.Join(missing, "; "))
	}

	cacheDir, err := cacheRoot()
	if err != nil {
		unavailable(t, "no cache directory: "+err.Error())
	}
	meta := kernelMetaPackage()
	key := cacheDir + "\x00" + meta + "\x00" + qemu + "\x00" + busybox

	envMu.Lock()
	defer envMu.Unlock()
	if e := envCache[key]; e != nil {
		return e
	}
	k, err := prepareKernel(t, cacheDir, meta, busybox)
	if err != nil {
		unavailable(t, err.Error())
	}
	applets, err := busyboxApplets(busybox)
	if err != nil {
		unavailable(t, err.Error())
	}
	mods, err := loadModuleIndex(k.modDir)
	if err != nil {
		unavailable(t, err.Error())
	}
	e := &Env{
		KernelVersion: k.version,
		Kernel:        k.vmlinuz,
		Package:       k.pkg,
		qemu:          qemu,
		busybox:       busybox,
		modDir:        k.modDir,
		applets:       applets,
		mods:          mods,
	}
	envCache[key] = e
	return e
}

// unavailable skips (or, with NETSPEC_VMTEST_REQUIRE=1, fails) the test
// loudly, saying why and what to install.
func unavailable(t testing.TB, why string) {
	t.Helper()
	msg := "vmtest cannot boot its IPVS kernel: " + why + "\n" +
		"    To run these tests install the host packages:  " + InstallHint + "\n" +
		"    (CI sets NETSPEC_VMTEST_REQUIRE=1 so that this is a failure there, not a skip.)"
	if os.Getenv("NETSPEC_VMTEST_REQUIRE") == "1" {
		t.Fatal("FAILED (NETSPEC_VMTEST_REQUIRE=1): " + msg)
	}
	t.Skip("SKIPPED: " + msg)
}

func findQEMU() (string, error) {
	if p := os.Getenv("NETSPEC_VMTEST_QEMU"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("qemu-system-x86_64 from NETSPEC_VMTEST_QEMU: %v (package qemu-system-x86)", err)
		}
		return p, nil
	}
	p, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		return "", errors.New("qemu-system-x86_64 not found in PATH (package qemu-system-x86)")
	}
	return p, nil
}

func findBusybox() (string, error) {
	var candidates []string
	if p := os.Getenv("NETSPEC_VMTEST_BUSYBOX"); p != "" {
		candidates = []string{p}
	} else {
		candidates = []string{"/bin/busybox", "/usr/bin/busybox"}
		if p, err := exec.LookPath("busybox"); err == nil {
			candidates = append(candidates, p)
		}
	}
	var errs []string
	for _, p := range candidates {
		if _, err := os.Stat(p); err != nil {
			errs = append(errs, err.Error())
			continue
		}
		interp, err := elfInterp(p)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		if interp != "" {
			errs = append(errs, p+" is dynamically linked")
			continue
		}
		return p, nil
	}
	return "", fmt.Errorf("no static busybox (package busybox-static): %s", strings.Join(errs, "; "))
}

// RunPackage builds the tests of the package with import path pkg
// (BuildTestBinary) and runs them in the VM (Run, with o.Binary set): what
// a host test that proves something against the VM's kernel does. It
// skips or fails as Require does when the VM cannot run.
func RunPackage(t testing.TB, pkg string, o Options) string {
	t.Helper()
	env := Require(t)
	o.Binary = BuildTestBinary(t, pkg)
	return env.Run(t, o)
}

// BuildTestBinary compiles the tests of the package with import path pkg
// (for example "netspec.dev/netspec/applier/ipvs") into a static, stripped
// binary, with CGO_ENABLED=0 go test -c, for GOOS=linux GOARCH=amd64, and returns
// its path in a temporary directory that is removed when t ends. The binary
// is what Options.Binary takes.
func BuildTestBinary(t testing.TB, pkg string) string {
	t.Helper()
	goTool, err := findGo()
	if err != nil {
		t.Fatalf("vmtest: %v", err)
	}
	out := filepath.Join(t.TempDir(), path.Base(pkg)+".test")
	// -s -w: no symbol table and no DWARF, which the VM does not need (a
	// panic's trace still names functions and lines); the binary is a
	// third smaller, so is the initramfs, and the link takes less CPU.
	cmd := exec.Command(goTool, "test", "-c", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("vmtest: %s: %v\n%s", strings.Join(cmd.Args, " "), err, b)
	}
	if _, err := os.Stat(out); err != nil {
		t.Fatalf("vmtest: go test -c %s wrote no binary (does the package have tests?): %v", pkg, err)
	}
	if interp, err := elfInterp(out); err != nil || interp != "" {
		t.Fatalf("vmtest: %s is not a static binary (interp %q, err %v)", out, interp, err)
	}
	return out
}

func findGo() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	for _, root := range []string{os.Getenv("GOROOT"), runtime.GOROOT()} {
		if root == "" {
			continue
		}
		p := filepath.Join(root, "bin", "go")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("the go command is neither in PATH nor in GOROOT/bin")
}

// Options says what Run puts into the VM and how long it may take.
type Options struct {
	// Binary is the host path of the test binary to run as the VM's test,
	// normally from BuildTestBinary. A dynamically linked binary gets its
	// shared libraries copied too, but static is what is meant.
	Binary string
	// Args are the binary's arguments, for example
	// {"-test.run", "^TestInVM", "-test.v"}.
	Args []string
	// Env is extra environment for the binary, as KEY=VALUE. The binary
	// always gets NETSPEC_VMTEST=1, PATH, HOME=/root and TMPDIR=/tmp.
	Env []string
	// Dir is the binary's working directory in the VM; default /tmp.
	Dir string
	// Suites, instead of Binary, Args, Env and Dir, are several test
	// binary runs made one after another in one boot (RunSuites): a boot
	// costs some 3-5 s of host CPU, a later run of a test binary little.
	Suites []Suite
	// Modules are the kernel modules loaded with modprobe before the binary
	// starts, in order; nil means DefaultModules. A module built into the
	// kernel is logged and skipped; one the kernel has neither built in nor
	// as a file fails the test before booting.
	Modules []string
	// HostBinaries are host programs copied into the VM at the same paths,
	// with their shared libraries and dynamic loader (found with ldd), for
	// example {"/usr/sbin/ip", "/usr/sbin/nft"}. A name without a slash is
	// looked up in PATH and placed at the path found. They take precedence
	// over busybox applets of the same name.
	HostBinaries []string
	// Files maps paths in the VM to host files or directories (copied
	// recursively) to put into the VM, such as testdata.
	Files map[string]string
	// Timeout bounds the whole boot and every run in it; default
	// DefaultTimeout. qemu is killed when it passes.
	Timeout time.Duration
	// Memory is the VM's memory in MiB; default DefaultMemory.
	Memory int
	// CPUs is the number of virtual CPUs; default 1.
	CPUs int
	// Console, if set, receives the console output as it comes (for example
	// os.Stderr while debugging a hang); Run returns it in any case.
	Console io.Writer
}

// Suite is one run of a test binary in a VM that runs several
// (Options.Suites). Each runs in a subshell of /init, in its own working
// directory with its own environment, and gets a verdict of its own; a
// suite that fails does not stop the next.
type Suite struct {
	// Name names the suite in logs and failures; default the binary's
	// base name.
	Name string
	// Binary, Args, Env and Dir are as in Options. A binary goes into the
	// VM once, however many suites run it; two binaries of the same base
	// name cannot go together.
	Binary string
	Args   []string
	Env    []string
	Dir    string
}

// Result is what became of one suite of a VM.
type Result struct {
	Name string
	// Passed tells that the binary exited with status 0; Verdict is
	// "PASS" or why not ("FAIL exit=1").
	Passed  bool
	Verdict string
	// Console is the suite's part of the console: from the line that
	// starts it to its verdict.
	Console string
	// Wall and CPU are the time the suite took and the host CPU qemu used
	// meanwhile.
	Wall, CPU time.Duration
}

// Check fails t, with the suite's console, unless the suite passed.
func (r *Result) Check(t testing.TB) {
	t.Helper()
	if !r.Passed {
		t.Fatalf("vmtest: suite %s in the VM did not pass: %s\n----- its console -----\n%s\n----- end of console -----", r.Name, r.Verdict, r.Console)
	}
}

// Run boots the VM with a fresh initramfs built in t.TempDir(), runs
// o.Binary in it (or each of o.Suites) and returns the console output
// (carriage returns and terminal control sequences removed).
// It returns only if the binary exited with status 0, as the result line
// of /init shows; if the binary failed, the VM could not be set up, qemu
// ended without a verdict or the timeout passed, it calls t.Fatal with the
// whole console log. qemu is always killed and waited for before Run
// returns.
func (e *Env) Run(t testing.TB, o Options) string {
	t.Helper()
	text, results := e.boot(t, o)
	for i := range results {
		if !results[i].Passed {
			t.Fatalf("vmtest: the VM test did not pass: suite %s: %s\n----- console (kernel %s) -----\n%s\n----- end of console -----", results[i].Name, results[i].Verdict, e.KernelVersion, text)
		}
	}
	return text
}

// RunSuites boots one VM and runs o.Suites in it, one after another, and
// returns what became of each, in order; the caller checks them
// (Result.Check). It calls t.Fatal, with the whole console, only when the
// VM itself failed: it could not be set up, crashed, or ran out of time
// before every suite had its verdict.
func (e *Env) RunSuites(t testing.TB, o Options) []Result {
	t.Helper()
	if len(o.Suites) == 0 {
		t.Fatal("vmtest: RunSuites without Options.Suites")
	}
	_, results := e.boot(t, o)
	return results
}

// boot builds the initramfs, boots the VM and splits its console by suite.
func (e *Env) boot(t testing.TB, o Options) (string, []Result) {
	t.Helper()
	suites := o.Suites
	switch {
	case len(suites) == 0 && o.Binary == "":
		t.Fatal("vmtest: Options.Binary is empty")
	case len(suites) == 0:
		suites = []Suite{{Binary: o.Binary, Args: o.Args, Env: o.Env, Dir: o.Dir}}
	case o.Binary != "" || o.Args != nil || o.Env != nil || o.Dir != "":
		t.Fatal("vmtest: Options has Suites and also Binary, Args, Env or Dir")
	}
	for i := range suites {
		if suites[i].Binary == "" {
			t.Fatalf("vmtest: suite %d has no Binary", i+1)
		}
		if suites[i].Name == "" {
			suites[i].Name = filepath.Base(suites[i].Binary)
		}
		if suites[i].Dir == "" {
			suites[i].Dir = "/tmp"
		}
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Memory <= 0 {
		o.Memory = DefaultMemory
	}
	if o.CPUs <= 0 {
		o.CPUs = 1
	}
	modules := o.Modules
	if modules == nil {
		modules = strings.Fields(DefaultModules)
	}
	load, files, builtin, missing := e.mods.resolve(modules)
	if len(missing) > 0 {
		t.Fatalf("vmtest: kernel %s has neither built in nor as a module: %s", e.KernelVersion, strings.Join(missing, " "))
	}
	if len(builtin) > 0 {
		t.Logf("vmtest: built into kernel %s, not loaded: %s", e.KernelVersion, strings.Join(builtin, " "))
	}

	var idb [8]byte
	if _, err := rand.Read(idb[:]); err != nil {
		t.Fatal(err)
	}
	runID := hex.EncodeToString(idb[:])

	dir := t.TempDir()
	initrd := filepath.Join(dir, "initramfs.cpio")
	spec := initramfsSpec{
		busybox:      e.busybox,
		applets:      e.applets,
		kernelVer:    e.KernelVersion,
		modDir:       e.modDir,
		moduleFiles:  files,
		moduleIndex:  e.mods,
		load:         load,
		suites:       suites,
		hostBinaries: o.HostBinaries,
		files:        o.Files,
		runID:        runID,
	}
	start := time.Now()
	if err := spec.write(initrd); err != nil {
		t.Fatalf("vmtest: building the initramfs: %v", err)
	}
	built := time.Since(start)
	var size int64
	if fi, err := os.Stat(initrd); err == nil {
		size = fi.Size()
	}

	out, cpu, err := e.qemuRun(initrd, o, runID, len(suites))
	text := cleanConsole(out.String())
	pass, verdict := verdict(text, runID)
	starts, ends := out.marks()
	results := splitSuites(text, runID, suites, starts, ends)
	complete := err == nil && (pass || strings.HasPrefix(verdict, "/init reported FAIL exit="))
	for i := range results {
		complete = complete && results[i].Verdict != ""
	}
	if !complete {
		why := verdict
		if err != nil {
			why = err.Error() + "; " + verdict
		}
		t.Fatalf("vmtest: the VM test did not pass: %s\n----- console (kernel %s) -----\n%s\n----- end of console -----", why, e.KernelVersion, text)
	}
	var times strings.Builder
	if b := starts[0]; b.ok {
		fmt.Fprintf(&times, "; boot to the first suite %v, %v of CPU", b.wall.Round(time.Millisecond), b.cpu.Round(time.Millisecond))
	}
	for _, r := range results {
		if r.Wall > 0 {
			fmt.Fprintf(&times, "; suite %s %v, %v of CPU", r.Name, r.Wall.Round(time.Millisecond), r.CPU.Round(time.Millisecond))
		}
	}
	t.Logf("vmtest: kernel %s, initramfs of %.1f MB built in %v, VM ran %v using %v of host CPU%s; console:\n%s",
		e.KernelVersion, float64(size)/1e6, built.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), cpu.Round(time.Millisecond), times.String(), text)
	return text, results
}

// suiteTag is the tag that the lines starting and ending suite i (from
// 0) of the run runID carry: the VM-wide verdict carries "run=ID", a
// suite's "run=ID.N", N counted from 1.
func suiteTag(runID string, i int) string {
	return "run=" + runID + "." + strconv.Itoa(i+1)
}

// suiteLine tells whether line is the start (StartMarker) or the verdict
// (ResultMarker) of one of n suites of the run runID, and of which.
func suiteLine(line, runID string, n int) (suite int, start, end bool) {
	line = strings.TrimRight(line, "\r\n")
	_, num, ok := strings.Cut(line, " run="+runID+".")
	if !ok {
		return 0, false, false
	}
	i, err := strconv.Atoi(num)
	if err != nil || i < 1 || i > n {
		return 0, false, false
	}
	return i - 1, strings.Contains(line, StartMarker), strings.Contains(line, ResultMarker)
}

// splitSuites cuts the console into the suites' parts and reads their
// verdicts; starts and ends are the marks the console buffer took of
// each suite's lines.
func splitSuites(text, runID string, suites []Suite, starts, ends []mark) []Result {
	results := make([]Result, len(suites))
	parts := make([]strings.Builder, len(suites))
	cur := -1 // the suite whose part the line is in
	for _, line := range strings.SplitAfter(text, "\n") {
		i, start, end := suiteLine(line, runID, len(suites))
		if start {
			cur = i
		}
		if cur < 0 {
			continue
		}
		parts[cur].WriteString(line)
		if end && i == cur && strings.HasSuffix(line, "\n") {
			if v, ok := findVerdict(line, suiteTag(runID, i)); ok {
				results[i].Verdict, results[i].Passed = v, v == "PASS"
			}
			cur = -1
		}
	}
	for i, s := range suites {
		r := &results[i]
		r.Name, r.Console = s.Name, parts[i].String()
		if starts[i].ok && ends[i].ok {
			r.Wall, r.CPU = ends[i].wall-starts[i].wall, ends[i].cpu-starts[i].cpu
		}
	}
	return results
}

// qemuRun runs qemu until it ends, the timeout passes, or a little
// after the VM-wide verdict appeared, and returns the console and the CPU
// time qemu used (user and system): under emulation that, not the wall
// time, is what a suite costs on a busy machine.
func (e *Env) qemuRun(initrd string, o Options, runID string, suites int) (out *consoleBuffer, cpu time.Duration, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	args := []string{
		"-machine", "accel=tcg",
		"-m", strconv.Itoa(o.Memory),
		"-smp", strconv.Itoa(o.CPUs),
		"-nographic", "-no-reboot", "-nic", "none",
		"-kernel", e.Kernel,
		"-initrd", initrd,
		// no_timer_check: under TCG on a busy host the kernel's IO-APIC
		// timer check can fail and panic ("IO-APIC + timer doesn't work").
		// norandmaps: every process maps its program and libraries at the
		// same addresses, so that TCG reuses the code it translated for
		// the last one (its translations are looked up by virtual address
		// too): an exec of ip(8) costs a third of the host CPU it costs
		// with randomized mappings, and the tests exec ip and nft
		// hundreds of times.
		"-append", "console=ttyS0 quiet panic=-1 no_timer_check norandmaps",
	}
	cmd := exec.CommandContext(ctx, e.qemu, args...)
	cmd.Stdin = nil // /dev/null
	out = newConsoleBuffer(runID, suites, o.Console)
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.WaitDelay = 5 * time.Second
	// qemu dies with the test process: a test binary killed by go test's
	// timeout would otherwise leave it emulating, a CPU's worth, until its
	// own timeout or for good. The kernel sends the signal when the thread
	// that started qemu ends, so that thread stays locked to the goroutine
	// that waits for qemu.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		err := cmd.Start()
		if err == nil {
			out.started(cmd.Process.Pid)
		}
		started <- err
		if err == nil {
			done <- cmd.Wait()
		}
	}()
	if err := <-started; err != nil {
		return out, 0, fmt.Errorf("starting %s: %v", e.qemu, err)
	}
	select {
	case err = <-done:
	case <-out.seen:
		// /init powers off right after the verdict; give it a moment, then kill.
		select {
		case err = <-done:
		case <-time.After(15 * time.Second):
			cancel()
			<-done
			err = nil
		}
	}
	if ps := cmd.ProcessState; ps != nil { // qemu has been waited for
		cpu = ps.UserTime() + ps.SystemTime()
	}
	switch {
	case out.sawVerdict():
		return out, cpu, nil
	case ctx.Err() == context.DeadlineExceeded:
		return out, cpu, fmt.Errorf("timed out after %v (qemu killed)", o.Timeout)
	case err != nil:
		return out, cpu, fmt.Errorf("qemu: %v", err)
	}
	return out, cpu, errors.New("qemu exited without a verdict")
}

// mark is when a line of the console came: the wall time since qemu
// started and the host CPU qemu had used by then.
type mark struct {
	ok        bool
	wall, cpu time.Duration
}

// consoleBuffer collects the console, marks when each suite's start and
// verdict lines come, and signals seen once a complete VM-wide result line
// of this run has arrived.
type consoleBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	scanned int // bytes of buf up to the end of the last line looked at
	runID   string
	seen    chan struct{}
	closed  bool
	tee     io.Writer

	pid          int // qemu's, once started
	begin        time.Time
	starts, ends []mark // by suite
}

func newConsoleBuffer(runID string, suites int, tee io.Writer) *consoleBuffer {
	return &consoleBuffer{runID: runID, seen: make(chan struct{}), tee: tee,
		starts: make([]mark, suites), ends: make([]mark, suites)}
}

// started records qemu's pid, whose CPU the marks read.
func (c *consoleBuffer) started(pid int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pid, c.begin = pid, time.Now()
}

func (c *consoleBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.Write(p)
	if c.tee != nil {
		c.tee.Write(p) //nolint:errcheck // best effort debugging output
	}
	for {
		rest := c.buf.Bytes()[c.scanned:]
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			break
		}
		c.line(string(rest[:i+1]))
		c.scanned += i + 1
	}
	return len(p), nil
}

// line looks at a complete line of the console.
func (c *consoleBuffer) line(l string) {
	if i, start, end := suiteLine(l, c.runID, len(c.starts)); start || end {
		m := c.mark()
		if start {
			c.starts[i] = m
		} else {
			c.ends[i] = m
		}
		return
	}
	if _, ok := findVerdict(l, "run="+c.runID); ok && !c.closed {
		c.closed = true
		close(c.seen)
	}
}

// mark reads the time and qemu's CPU now.
func (c *consoleBuffer) mark() mark {
	if c.pid == 0 {
		return mark{}
	}
	cpu, err := processCPU(c.pid)
	if err != nil {
		return mark{}
	}
	return mark{ok: true, wall: time.Since(c.begin), cpu: cpu}
}

// marks returns the marks of the suites' start and verdict lines.
func (c *consoleBuffer) marks() (starts, ends []mark) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.starts), slices.Clone(c.ends)
}

// processCPU reads the user and system CPU time of a running process
// from /proc/PID/stat (fields 14 and 15, in clock ticks of 1/100 s, the
// USER_HZ of Linux on amd64).
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')') // the command name may hold spaces
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:])) // from field 3, the state
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad utime %q or stime %q", pid, f[11], f[12])
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

func (c *consoleBuffer) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

func (c *consoleBuffer) sawVerdict() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// ansiEscape matches the terminal control sequences that SeaBIOS and the
// serial console print.
var ansiEscape = regexp.MustCompile(`\x1b(\[[0-9;?]*[ -/]*[@-~]|[@-Z\\-_]|c)`)

// cleanConsole removes carriage returns and terminal control sequences.
func cleanConsole(s string) string {
	return ansiEscape.ReplaceAllString(strings.ReplaceAll(s, "\r", ""), "")
}

// findVerdict returns the last complete result line of the run whose
// "run=ID" tag is runTag.
func findVerdict(console, runTag string) (string, bool) {
	var last string
	found := false
	for len(console) > 0 {
		line, rest, ok := strings.Cut(console, "\n")
		if !ok {
			break // incomplete line
		}
		console = rest
		line = strings.TrimRight(line, "\r")
		i := strings.Index(line, ResultMarker)
		if i < 0 || !strings.HasSuffix(line, " "+runTag) {
			continue
		}
		last, found = strings.TrimSpace(strings.TrimSuffix(line[i+len(ResultMarker):], runTag)), true
	}
	return last, found
}

// verdict says whether the console shows that the test binary of run runID
// exited 0, and otherwise why not.
func verdict(console, runID string) (bool, string) {
	v, ok := findVerdict(console, "run="+runID)
	switch {
	case !ok:
		return false, "no " + ResultMarker + " line on the console (the VM crashed, hung or was killed)"
	case v == "PASS":
		return true, "PASS"
	default:
		return false, "/init reported " + v
	}
}
