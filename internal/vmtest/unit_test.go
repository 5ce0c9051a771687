package vmtest

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cpioEntry is one entry read back from a newc archive.
type cpioEntry struct {
	name         string
	mode         uint32
	data         string
	rmaj, rminor uint32
}

// readNewc parses a newc archive strictly (magic, 4-byte alignment,
// trailer), independently of the writer.
func readNewc(t *testing.T, b []byte) []cpioEntry {
	t.Helper()
	var out []cpioEntry
	off := 0
	align := func(n int) int { return (n + 3) &^ 3 }
	for {
		if off+110 > len(b) {
			t.Fatalf("truncated header at %d", off)
		}
		h := string(b[off : off+110])
		if h[:6] != "070701" {
			t.Fatalf("bad magic %q at %d", h[:6], off)
		}
		field := func(i int) uint32 {
			v, err := strconv.ParseUint(h[6+8*i:14+8*i], 16, 32)
			if err != nil {
				t.Fatalf("bad header field %d at %d: %v", i, off, err)
			}
			return uint32(v)
		}
		mode, size, rmaj, rmin, namesize := field(1), field(6), field(9), field(10), field(11)
		name := string(b[off+110 : off+110+int(namesize)-1])
		if b[off+110+int(namesize)-1] != 0 {
			t.Fatalf("name %q not NUL-terminated", name)
		}
		off = align(off + 110 + int(namesize))
		data := string(b[off : off+int(size)])
		off = align(off + int(size))
		if name == "TRAILER!!!" {
			if off != len(b) {
				t.Fatalf("%d bytes after the trailer", len(b)-off)
			}
			return out
		}
		out = append(out, cpioEntry{name, mode, data, rmaj, rmin})
	}
}

func TestCPIOWriter(t *testing.T) {
	dir := t.TempDir()
	host := filepath.Join(dir, "hostfile")
	if err := os.WriteFile(host, []byte("abcde"), 0o750); err != nil {
		t.Fatal(err)
	}
	tree := filepath.Join(dir, "tree")
	os.MkdirAll(filepath.Join(tree, "sub"), 0o755)
	os.WriteFile(filepath.Join(tree, "sub", "x"), []byte("xx"), 0o644)
	os.Symlink("sub/x", filepath.Join(tree, "link"))

	var buf bytes.Buffer
	c := newCPIOWriter(&buf)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.dir("tmp", 0o777|fs.ModeSticky))
	must(c.charDev("/dev/console", 0o600, 5, 1))
	_, err := c.hostFile("/usr/sbin/tool", host)
	must(err)
	must(c.bytes("usr/sbin/tool", 0o644, []byte("ignored: first wins")))
	must(c.bytes("init", 0o755, []byte("#!/bin/sh\n")))
	must(c.symlink("bin/sh", "/bin/busybox"))
	must(c.symlink("bin/sh", "/elsewhere")) // ignored: first wins
	must(c.hostTree("/data", tree))
	must(c.close())

	got := readNewc(t, buf.Bytes())
	want := []cpioEntry{
		{name: "tmp", mode: cpioDir | 0o1777},
		{name: "dev", mode: cpioDir | 0o755},
		{name: "dev/console", mode: cpioChar | 0o600, rmaj: 5, rminor: 1},
		{name: "usr", mode: cpioDir | 0o755},
		{name: "usr/sbin", mode: cpioDir | 0o755},
		{name: "usr/sbin/tool", mode: cpioFile | 0o750, data: "abcde"},
		{name: "init", mode: cpioFile | 0o755, data: "#!/bin/sh\n"},
		{name: "bin", mode: cpioDir | 0o755},
		{name: "bin/sh", mode: cpioSymlink | 0o777, data: "/bin/busybox"},
		{name: "data", mode: cpioDir | 0o755},
		{name: "data/link", mode: cpioSymlink | 0o777, data: "sub/x"},
		{name: "data/sub", mode: cpioDir | 0o755},
		{name: "data/sub/x", mode: cpioFile | 0o644, data: "xx"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("archive:\n got %+v\nwant %+v", got, want)
	}

	// Cross-check with a real cpio reader when there is one.
	if bb, err := findBusybox(); err == nil {
		cmd := exec.Command(bb, "cpio", "-t")
		cmd.Stdin = bytes.NewReader(buf.Bytes())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("busybox cpio -t: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "usr/sbin/tool\n") || !strings.Contains(string(out), "data/sub/x\n") {
			t.Errorf("busybox cpio -t:\n%s", out)
		}
	}
}

func TestParseLdd(t *testing.T) {
	out := `	linux-vdso.so.1 (0x00007fa1185df000)
	libbpf.so.1 => /lib/x86_64-linux-gnu/libbpf.so.1 (0x00007fa11847e000)
	libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007fa118255000)
	/lib64/ld-linux-x86-64.so.2 (0x00007fa1185e1000)
	libmd.so.0 => /lib/x86_64-linux-gnu/libmd.so.0 (0x00007fa118229000)
`
	got, err := parseLdd(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/lib/x86_64-linux-gnu/libbpf.so.1", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/libmd.so.0"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseLdd = %q, want %q", got, want)
	}
	if _, err := parseLdd("\tlibfoo.so.1 => not found\n"); err == nil || !strings.Contains(err.Error(), "libfoo.so.1") {
		t.Errorf("parseLdd of a missing library: err = %v", err)
	}
	if got, err := parseLdd("\tstatically linked\n"); err != nil || len(got) != 0 {
		t.Errorf("parseLdd(static) = %q, %v", got, err)
	}
}

func TestSharedLibsOfHostTool(t *testing.T) {
	if _, err := exec.LookPath("ldd"); err != nil {
		t.Skip("no ldd")
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	interp, err := elfInterp(sh)
	if err != nil || interp == "" {
		t.Skipf("%s is not a dynamic ELF executable (%v)", sh, err)
	}
	libs, err := sharedLibs(sh)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(libs, " "), interp) || !strings.Contains(strings.Join(libs, " "), "libc.so") {
		t.Errorf("sharedLibs(%s) = %q, want the loader %s and libc", sh, libs, interp)
	}
}

func TestParseAptDepends(t *testing.T) {
	got, err := parseAptDepends("linux-image-cloud-amd64\n  Depends: linux-image-6.1.0-56-cloud-amd64\n")
	if err != nil || got != "linux-image-6.1.0-56-cloud-amd64" {
		t.Errorf("parseAptDepends = %q, %v", got, err)
	}
	got, err = parseAptDepends("x\n |Depends: <linux-image-virtual>\n  Depends: linux-image-6.12.1-cloud-amd64\n")
	if err != nil || got != "linux-image-6.12.1-cloud-amd64" {
		t.Errorf("parseAptDepends with alternatives = %q, %v", got, err)
	}
	if _, err := parseAptDepends("N: Unable to locate package linux-image-cloud-amd64\n"); err == nil {
		t.Error("parseAptDepends accepted output without a dependency")
	}
}

func TestModuleIndexResolve(t *testing.T) {
	idx := &moduleIndex{byName: map[string]string{}, deps: map[string][]string{}, builtin: map[string]bool{"crc32c_generic": true}}
	dep := `kernel/lib/libcrc32c.ko:
kernel/net/netfilter/nf_conntrack.ko: kernel/net/ipv4/netfilter/nf_defrag_ipv4.ko kernel/lib/libcrc32c.ko
kernel/net/ipv4/netfilter/nf_defrag_ipv4.ko:
kernel/net/netfilter/ipvs/ip_vs.ko: kernel/net/netfilter/nf_conntrack.ko
kernel/net/netfilter/ipvs/ip_vs_rr.ko: kernel/net/netfilter/ipvs/ip_vs.ko
kernel/drivers/hid/hid-generic.ko:
`
	if err := idx.parseDep(strings.NewReader(dep)); err != nil {
		t.Fatal(err)
	}
	load, files, builtin, missing := idx.resolve([]string{"ip_vs_rr", "crc32c-generic", "hid-generic", "nope"})
	if want := []string{"ip_vs_rr", "hid_generic"}; !reflect.DeepEqual(load, want) {
		t.Errorf("load = %q, want %q", load, want)
	}
	wantFiles := []string{
		"kernel/drivers/hid/hid-generic.ko",
		"kernel/lib/libcrc32c.ko",
		"kernel/net/ipv4/netfilter/nf_defrag_ipv4.ko",
		"kernel/net/netfilter/ipvs/ip_vs.ko",
		"kernel/net/netfilter/ipvs/ip_vs_rr.ko",
		"kernel/net/netfilter/nf_conntrack.ko",
	}
	if !reflect.DeepEqual(files, wantFiles) {
		t.Errorf("files = %q, want %q", files, wantFiles)
	}
	if !reflect.DeepEqual(builtin, []string{"crc32c_generic"}) || !reflect.DeepEqual(missing, []string{"nope"}) {
		t.Errorf("builtin = %q, missing = %q", builtin, missing)
	}
}

func TestVerdict(t *testing.T) {
	const id = "0123abcd"
	for _, tc := range []struct {
		console string
		pass    bool
		detail  string
	}{
		{"boot\r\nNETSPEC-VMTEST-RESULT: PASS run=0123abcd\r\n", true, "PASS"},
		{"NETSPEC-VMTEST-RESULT: FAIL exit=1 run=0123abcd\n", false, "/init reported FAIL exit=1"},
		{"NETSPEC-VMTEST-RESULT: FAIL modprobe=ip_vs run=0123abcd\n", false, "/init reported FAIL modprobe=ip_vs"},
		// The test binary printing a verdict without this run's ID does not count.
		{"NETSPEC-VMTEST-RESULT: PASS run=ffff\nNETSPEC-VMTEST-RESULT: PASS\n", false, "no "},
		// Nor does an incomplete line.
		{"NETSPEC-VMTEST-RESULT: PASS run=0123abcd", false, "no "},
		// Kernel noise before the marker on the same line is tolerated.
		{"[ 1.2] x: yNETSPEC-VMTEST-RESULT: PASS run=0123abcd\n", true, "PASS"},
	} {
		pass, detail := verdict(tc.console, id)
		if pass != tc.pass || !strings.HasPrefix(detail, tc.detail) {
			t.Errorf("verdict(%q) = %v, %q; want %v, %q...", tc.console, pass, detail, tc.pass, tc.detail)
		}
	}
}

func TestCleanConsole(t *testing.T) {
	raw := "\x1bc\x1b[?7l\x1b[2J\x1b[0mSeaBIOS\r\nBooting...\r\n\x1bc\x1b[?7l\x1b[2JNETSPEC-VMTEST: up\r\n"
	if got, want := cleanConsole(raw), "SeaBIOS\nBooting...\nNETSPEC-VMTEST: up\n"; got != want {
		t.Errorf("cleanConsole = %q, want %q", got, want)
	}
}

func TestInitScript(t *testing.T) {
	s := &initramfsSpec{
		suites: []Suite{
			{Name: "first", Binary: "/tmp/x/pkg.test", Args: []string{"-test.run", "^TestInVM$", "it's"}, Env: []string{"A=b c", "NETSPEC_IN_VM=1"}, Dir: "/tmp"},
			{Name: "second", Binary: "/tmp/y/other.test", Dir: "/vmtest/d"},
		},
		load:  []string{"ip_vs", "veth"},
		runID: "feed",
	}
	script, err := s.initScript()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"\texport 'A=b c'\n",
		`exec '/vmtest/pkg.test' '-test.run' '^TestInVM$' 'it'\''s' </dev/null`,
		"echo 'NETSPEC-VMTEST-START: first run=feed.1'",
		"echo 'NETSPEC-VMTEST-START: second run=feed.2'",
		"cd '/vmtest/d' || exit 125",
		"NETSPEC-VMTEST-RESULT: FAIL exit=$rc run=feed.2",
		"for m in 'ip_vs' 'veth'; do",
		"NETSPEC-VMTEST-RESULT: $1 run=feed",
	} {
		if !strings.Contains(script, want) {
			t.Errorf("init script lacks %q:\n%s", want, script)
		}
	}
	if sh, err := exec.LookPath("sh"); err == nil {
		cmd := exec.Command(sh, "-n")
		cmd.Stdin = strings.NewReader(script)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("sh -n: %v\n%s\n%s", err, out, script)
		}
	}
	s.suites[1].Env = []string{"not valid=1"}
	if _, err := s.initScript(); err == nil {
		t.Error("initScript accepted a bad Env entry")
	}
	s.suites[1].Env, s.suites[1].Dir = nil, "relative"
	if _, err := s.initScript(); err == nil {
		t.Error("initScript accepted a relative Dir")
	}
}

// TestInitScriptRuns runs the suites part of an init script with the
// host's sh, the test binaries being shell scripts: each suite runs in
// its own directory with its own environment, a failing one does not
// stop the next, and the VM-wide verdict carries the first failure.
func TestInitScriptRuns(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("SKIPPED: no sh")
	}
	dir := t.TempDir()
	bin := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!"+sh+"\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	s := &initramfsSpec{runID: "feed", suites: []Suite{
		{Name: "a", Binary: bin("a.test", `echo "a in $(pwd) X=$X"; exit 3`), Env: []string{"X=1"}, Dir: filepath.Join(dir, "wa")},
		{Name: "b", Binary: bin("b.test", `echo "b in $(pwd) X=$X $1"`), Args: []string{"arg"}, Dir: filepath.Join(dir, "wb")},
		{Name: "c", Binary: bin("c.test", `exit 4`), Dir: dir},
	}}
	script, err := s.initScript()
	if err != nil {
		t.Fatal(err)
	}
	// From the first suite on, with the binaries at their host paths and a
	// result that prints instead of powering off.
	script = script[strings.Index(script, "failed=\n"):]
	for _, su := range s.suites {
		script = strings.ReplaceAll(script, shellQuote(vmBinary(su.Binary)), shellQuote(su.Binary))
	}
	script = "result() { echo; echo \"" + ResultMarker + " $1 run=feed\"; exit 0; }\n" + script
	out, err := exec.Command(sh, "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("sh: %v\n%s", err, out)
	}
	text := string(out)
	if pass, v := verdict(text, "feed"); pass || v != "/init reported FAIL exit=3" {
		t.Errorf("verdict = %v, %q; want the first failure's status 3", pass, v)
	}
	res := splitSuites(text, "feed", s.suites, make([]mark, 3), make([]mark, 3))
	for i, want := range []struct {
		passed  bool
		verdict string
		line    string
	}{
		{verdict: "FAIL exit=3", line: "a in " + filepath.Join(dir, "wa") + " X=1\n"},
		{passed: true, verdict: "PASS", line: "b in " + filepath.Join(dir, "wb") + " X= arg\n"},
		{verdict: "FAIL exit=4"},
	} {
		r := res[i]
		if r.Passed != want.passed || r.Verdict != want.verdict || !strings.Contains(r.Console, want.line) {
			t.Errorf("suite %s: passed %v, verdict %q, console:\n%s\nwant %v, %q, a line %q", r.Name, r.Passed, r.Verdict, r.Console, want.passed, want.verdict, want.line)
		}
	}
	if strings.Contains(res[0].Console, "b in") || strings.Contains(res[1].Console, "a in") {
		t.Errorf("the suites' consoles overlap:\n%s\n----\n%s", res[0].Console, res[1].Console)
	}
}

// TestSplitSuites: a suite's console is from its start line to its
// verdict; a verdict without this VM's ID, or a suite that never started
// or never ended, gives no verdict.
func TestSplitSuites(t *testing.T) {
	suites := []Suite{{Name: "one"}, {Name: "two"}, {Name: "three"}}
	console := "boot\n" +
		StartMarker + " one run=ab.1\nout one\n" + ResultMarker + " PASS run=ff.1\n" + ResultMarker + " PASS run=ab.1\n" +
		"between\n" +
		StartMarker + " two run=ab.2\nout two\n" +
		StartMarker + " three run=ab.3\nout three\n" + ResultMarker + " FAIL exit=2 run=ab.3\n"
	res := splitSuites(console, "ab", suites, make([]mark, 3), make([]mark, 3))
	want := []Result{
		{Name: "one", Passed: true, Verdict: "PASS", Console: StartMarker + " one run=ab.1\nout one\n" + ResultMarker + " PASS run=ff.1\n" + ResultMarker + " PASS run=ab.1\n"},
		{Name: "two", Console: StartMarker + " two run=ab.2\nout two\n"},
		{Name: "three", Verdict: "FAIL exit=2", Console: StartMarker + " three run=ab.3\nout three\n" + ResultMarker + " FAIL exit=2 run=ab.3\n"},
	}
	if !reflect.DeepEqual(res, want) {
		t.Errorf("splitSuites:\n%+v\nwant\n%+v", res, want)
	}
}

// TestProcessCPU reads this process's CPU time, which must grow as it
// spins.
func TestProcessCPU(t *testing.T) {
	before, err := processCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		after, err := processCPU(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if after > before {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processCPU stayed at %v while spinning for 10s", after)
		}
	}
}

// TestSkipWhenMissing checks that Require skips, loudly, when qemu is
// missing, and fails instead with NETSPEC_VMTEST_REQUIRE=1.
func TestSkipWhenMissing(t *testing.T) {
	if InVM() {
		t.Skip("host only")
	}
	t.Setenv("NETSPEC_VMTEST_QEMU", "/nonexistent/qemu-system-x86_64")
	for _, require := range []string{"", "1"} {
		t.Run(fmt.Sprintf("REQUIRE=%q", require), func(t *testing.T) {
			t.Setenv("NETSPEC_VMTEST_REQUIRE", require)
			r := &skipRecorder{fatalRecorder: fatalRecorder{TB: t}}
			done := make(chan struct{})
			go func() {
				defer close(done)
				Require(r)
				r.Fatal("Require returned")
			}()
			<-done
			msg, skipped := r.msg, r.skipped
			if require == "1" {
				if skipped || !strings.HasPrefix(msg, "FAILED (NETSPEC_VMTEST_REQUIRE=1)") {
					t.Errorf("with NETSPEC_VMTEST_REQUIRE=1: skipped=%v msg=%q", skipped, msg)
				}
			} else if !skipped || !strings.HasPrefix(msg, "SKIPPED:") {
				t.Errorf("without NETSPEC_VMTEST_REQUIRE: skipped=%v msg=%q", skipped, msg)
			}
			if !strings.Contains(msg, "apt-get install -y qemu-system-x86 busybox-static") || !strings.Contains(msg, "qemu-system-x86_64") {
				t.Errorf("message does not say what to install: %q", msg)
			}
		})
	}
}

type skipRecorder struct {
	fatalRecorder
	skipped bool
}

func (r *skipRecorder) Skip(args ...any) {
	r.mu.Lock()
	r.skipped = true
	r.mu.Unlock()
	r.Fatal(args...)
}

// TestDecompressModules: .ko.gz always (Go), .ko.xz with busybox and
// .ko.zst with zstd when those are installed, all become plain .ko.
func TestDecompressModules(t *testing.T) {
	dir := t.TempDir()
	want := map[string]string{}
	write := func(name, content string, compress ...string) {
		t.Helper()
		p := filepath.Join(dir, name+".ko")
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(compress[0], append(compress[1:], p)...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", compress, err, out)
		}
		want[name+".ko"] = content
	}
	write("a", "module a", "gzip")
	bb, bbErr := findBusybox()
	if _, err := exec.LookPath("xz"); err == nil && bbErr == nil {
		write("b", "module b", "xz")
	}
	if _, err := exec.LookPath("zstd"); err == nil {
		write("c", "module c", "zstd", "-q", "--rm")
	}
	os.WriteFile(filepath.Join(dir, "plain.ko"), []byte("plain"), 0o644)
	want["plain.ko"] = "plain"
	if err := decompressModules(dir, bb); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	got := map[string]string{}
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		got[e.Name()] = string(b)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("after decompressModules: %q, want %q", got, want)
	}
}

// TestQEMUDiesWithTestProcess: when the process that runs a VM is killed
// (as go test's timeout kills a test binary), qemu is killed too rather
// than left emulating. A child copy of this test binary boots a fake qemu
// (a shell script that writes its pid and sleeps) and is killed; the fake
// must then end.
func TestQEMUDiesWithTestProcess(t *testing.T) {
	if dir := os.Getenv("VMTEST_ORPHAN_DIR"); dir != "" { // the child
		e := &Env{qemu: filepath.Join(dir, "qemu"), Kernel: "/nonexistent"}
		e.qemuRun("/nonexistent", Options{Timeout: time.Minute}, "x", 1)
		return
	}
	if InVM() {
		t.Skip("host only")
	}
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	fake := "#!/bin/sh\necho $$ > " + pidFile + ".tmp && mv " + pidFile + ".tmp " + pidFile + "\nexec sleep 60\n"
	if err := os.WriteFile(filepath.Join(dir, "qemu"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	child := exec.Command(os.Args[0], "-test.run", "^TestQEMUDiesWithTestProcess$")
	child.Env = append(os.Environ(), "VMTEST_ORPHAN_DIR="+dir)
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	var pid int
	for deadline := time.Now().Add(30 * time.Second); pid == 0; time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(pidFile); err == nil {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		if time.Now().After(deadline) {
			t.Fatal("the fake qemu did not start within 30s")
		}
	}
	defer syscall.Kill(pid, syscall.SIGKILL)
	child.Process.Kill()
	child.Wait()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if !running(pid) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fake qemu (pid %d) still runs 30s after its test process was killed", pid)
		}
	}
}

// running reports whether process pid exists and is not a zombie (an
// orphan is reaped by init, maybe late).
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return rest != "" && rest[0] != 'Z' && rest[0] != 'X'
}
