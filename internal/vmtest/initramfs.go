package vmtest

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// cpioWriter writes a cpio archive in the "newc" format (the one the
// kernel unpacks as initramfs): each entry is a 110-byte ASCII header, the
// NUL-terminated name padded to 4 bytes, and the data padded to 4 bytes;
// a "TRAILER!!!" entry ends it. Names are relative ("bin/sh"). It creates
// missing parent directories itself and ignores a second entry for a name
// it already wrote, so the first writer of a path wins.
type cpioWriter struct {
	w    *bufio.Writer
	ino  uint32
	have map[string]bool
}

const (
	cpioDir     = 0o040000
	cpioFile    = 0o100000
	cpioSymlink = 0o120000
	cpioChar    = 0o020000
)

func newCPIOWriter(w io.Writer) *cpioWriter {
	return &cpioWriter{w: bufio.NewWriterSize(w, 1<<20), have: map[string]bool{"": true}}
}

// archiveName turns "/usr/sbin/ip" into "usr/sbin/ip".
func archiveName(p string) (string, error) {
	n := strings.TrimPrefix(path.Clean("/"+p), "/")
	if n == "" {
		return "", fmt.Errorf("bad path %q in the initramfs", p)
	}
	return n, nil
}

func (c *cpioWriter) header(name string, mode uint32, nlink uint32, size int64, rdevMajor, rdevMinor uint32) error {
	if size > 0xffffffff {
		return fmt.Errorf("%s: %d bytes is too large for cpio newc", name, size)
	}
	c.ino++
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, nlink, 0, size, 0, 0, rdevMajor, rdevMinor, len(name)+1, 0)
	if _, err := io.WriteString(c.w, hdr); err != nil {
		return err
	}
	if _, err := io.WriteString(c.w, name+"\x00"); err != nil {
		return err
	}
	return c.pad(int64(len(hdr) + len(name) + 1))
}

func (c *cpioWriter) pad(n int64) error {
	if r := n % 4; r != 0 {
		_, err := c.w.Write(make([]byte, 4-r))
		return err
	}
	return nil
}

// start checks the name, creates its parents and reports whether the entry
// is new.
func (c *cpioWriter) start(p string) (string, bool, error) {
	name, err := archiveName(p)
	if err != nil {
		return "", false, err
	}
	if c.have[name] {
		return name, false, nil
	}
	if err := c.mkdirAll(path.Dir(name)); err != nil {
		return "", false, err
	}
	c.have[name] = true
	return name, true, nil
}

func (c *cpioWriter) mkdirAll(name string) error {
	if name == "." || c.have[name] {
		return nil
	}
	if err := c.mkdirAll(path.Dir(name)); err != nil {
		return err
	}
	c.have[name] = true
	return c.header(name, cpioDir|0o755, 2, 0, 0, 0)
}

// dir adds a directory with permissions perm.
func (c *cpioWriter) dir(p string, perm fs.FileMode) error {
	name, isNew, err := c.start(p)
	if err != nil || !isNew {
		return err
	}
	return c.header(name, cpioDir|uint32(perm.Perm())|stickyBit(perm), 2, 0, 0, 0)
}

func stickyBit(perm fs.FileMode) uint32 {
	if perm&fs.ModeSticky != 0 {
		return 0o1000
	}
	return 0
}

// file adds a regular file with size bytes read from r.
func (c *cpioWriter) file(p string, perm fs.FileMode, size int64, r io.Reader) (bool, error) {
	name, isNew, err := c.start(p)
	if err != nil || !isNew {
		return false, err
	}
	if err := c.header(name, cpioFile|uint32(perm.Perm()), 1, size, 0, 0); err != nil {
		return false, err
	}
	n, err := io.Copy(c.w, io.LimitReader(r, size))
	if err != nil {
		return false, err
	}
	if n != size {
		return false, fmt.Errorf("%s: got %d bytes, want %d", p, n, size)
	}
	return true, c.pad(size)
}

// bytes adds a regular file holding data.
func (c *cpioWriter) bytes(p string, perm fs.FileMode, data []byte) error {
	_, err := c.file(p, perm, int64(len(data)), strings.NewReader(string(data)))
	return err
}

// hostFile adds the host file src (symlinks followed) at p, with its
// permissions, and reports whether it was new.
func (c *cpioWriter) hostFile(p, src string) (bool, error) {
	f, err := os.Open(src)
	if err != nil {
		return false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	if !fi.Mode().IsRegular() {
		return false, fmt.Errorf("%s is not a regular file", src)
	}
	return c.file(p, fi.Mode(), fi.Size(), f)
}

// hostTree adds the host file or directory src at p, recursively; symlinks
// inside a directory stay symlinks.
func (c *cpioWriter) hostTree(p, src string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		_, err := c.hostFile(p, src)
		return err
	}
	return filepath.WalkDir(src, func(hp string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, hp)
		if err != nil {
			return err
		}
		dst := path.Join(p, filepath.ToSlash(rel))
		switch {
		case d.IsDir():
			info, err := d.Info()
			if err != nil {
				return err
			}
			return c.dir(dst, info.Mode())
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(hp)
			if err != nil {
				return err
			}
			return c.symlink(dst, target)
		case d.Type().IsRegular():
			_, err := c.hostFile(dst, hp)
			return err
		}
		return nil // sockets, devices: not copied
	})
}

// symlink adds a symbolic link p -> target.
func (c *cpioWriter) symlink(p, target string) error {
	name, isNew, err := c.start(p)
	if err != nil || !isNew {
		return err
	}
	if err := c.header(name, cpioSymlink|0o777, 1, int64(len(target)), 0, 0); err != nil {
		return err
	}
	if _, err := io.WriteString(c.w, target); err != nil {
		return err
	}
	return c.pad(int64(len(target)))
}

// charDev adds a character device node.
func (c *cpioWriter) charDev(p string, perm fs.FileMode, major, minor uint32) error {
	name, isNew, err := c.start(p)
	if err != nil || !isNew {
		return err
	}
	return c.header(name, cpioChar|uint32(perm.Perm()), 1, 0, major, minor)
}

// close writes the trailer and flushes.
func (c *cpioWriter) close() error {
	if err := c.header("TRAILER!!!", 0, 1, 0, 0, 0); err != nil {
		return err
	}
	return c.w.Flush()
}

// parseLdd reads the output of ldd(1) and returns the absolute paths of the
// shared libraries and the loader. A library ldd could not find is an
// error: the program would not start in the VM.
func parseLdd(out string) ([]string, error) {
	var libs []string
	var notFound []string
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if lib, right, ok := strings.Cut(line, "=>"); ok {
			right = strings.TrimSpace(right)
			if strings.HasPrefix(right, "not found") {
				notFound = append(notFound, strings.TrimSpace(lib))
				continue
			}
			if f := strings.Fields(right); len(f) > 0 && strings.HasPrefix(f[0], "/") {
				libs = append(libs, f[0])
			}
			continue
		}
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "/") {
			libs = append(libs, f[0]) // the loader: "/lib64/ld-linux-x86-64.so.2 (0x...)"
		}
	}
	if len(notFound) > 0 {
		return libs, fmt.Errorf("shared libraries not found: %s", strings.Join(notFound, " "))
	}
	return libs, nil
}

// sharedLibs returns the loader and the shared libraries that the host
// executable bin needs, or nil if it is static.
func sharedLibs(bin string) ([]string, error) {
	interp, err := elfInterp(bin)
	if err != nil || interp == "" {
		return nil, err
	}
	out, err := exec.Command("ldd", bin).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %v: %s", bin, err, out)
	}
	libs, err := parseLdd(string(out))
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %v", bin, err)
	}
	found := false
	for _, l := range libs {
		found = found || l == interp
	}
	if !found {
		libs = append(libs, interp)
	}
	return libs, nil
}

// initramfsSpec is everything that goes into one Run's initramfs.
type initramfsSpec struct {
	busybox      string
	applets      []string // busybox --list-full
	kernelVer    string
	modDir       string // host lib/modules/<ver>
	moduleFiles  []string
	moduleIndex  *moduleIndex
	load         []string // modules to modprobe, in order
	suites       []Suite
	hostBinaries []string
	files        map[string]string
	runID        string
}

// vmBinary is where a test binary lives in the VM.
func vmBinary(host string) string {
	return "/vmtest/" + filepath.Base(host)
}

func (s *initramfsSpec) write(file string) (err error) {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	c := newCPIOWriter(f)
	for _, d := range []string{"bin", "sbin", "usr/bin", "usr/sbin", "lib", "etc", "proc", "sys", "dev", "run", "root", "var", "vmtest"} {
		if err := c.dir(d, 0o755); err != nil {
			return err
		}
	}
	if err := c.dir("tmp", 0o777|fs.ModeSticky); err != nil {
		return err
	}
	if err := c.symlink("var/run", "/run"); err != nil {
		return err
	}
	// The kernel opens /dev/console for /init before anything is mounted.
	if err := c.charDev("dev/console", 0o600, 5, 1); err != nil {
		return err
	}
	if err := c.charDev("dev/null", 0o666, 1, 3); err != nil {
		return err
	}
	if _, err := c.hostFile("bin/busybox", s.busybox); err != nil {
		return err
	}
	init, err := s.initScript()
	if err != nil {
		return err
	}
	if err := c.bytes("init", 0o755, []byte(init)); err != nil {
		return err
	}

	// Executables with their libraries: the test binary, then host tools.
	dynamic := false
	hostNames := map[string]bool{}
	type exe struct{ host, vm string }
	var exes []exe
	testBins := map[string]string{} // VM path -> host path
	for _, su := range s.suites {
		vm := vmBinary(su.Binary)
		if h, ok := testBins[vm]; ok {
			if h != su.Binary {
				return fmt.Errorf("test binaries %s and %s have the same name", h, su.Binary)
			}
			continue
		}
		testBins[vm] = su.Binary
		exes = append(exes, exe{su.Binary, vm})
	}
	for _, hb := range s.hostBinaries {
		p := hb
		if !strings.Contains(p, "/") {
			if p, err = exec.LookPath(hb); err != nil {
				return fmt.Errorf("host binary %s: %v", hb, err)
			}
		}
		if p, err = filepath.Abs(p); err != nil {
			return err
		}
		exes = append(exes, exe{p, p})
		hostNames[filepath.Base(p)] = true
	}
	for _, e := range exes {
		if _, err := c.hostFile(e.vm, e.host); err != nil {
			return fmt.Errorf("copying %s: %v", e.host, err)
		}
		libs, err := sharedLibs(e.host)
		if err != nil {
			return err
		}
		for _, l := range libs {
			dynamic = true
			if _, err := c.hostFile(l, l); err != nil {
				return fmt.Errorf("copying %s (needed by %s): %v", l, e.host, err)
			}
		}
	}

	// Caller's files.
	dsts := make([]string, 0, len(s.files))
	for d := range s.files {
		dsts = append(dsts, d)
	}
	sort.Strings(dsts)
	for _, d := range dsts {
		if err := c.hostTree(d, s.files[d]); err != nil {
			return fmt.Errorf("Files[%q]: %v", d, err)
		}
	}

	// A minimal /etc.
	etc := map[string]string{
		"etc/passwd":        "root:x:0:0:root:/root:/bin/sh\n",
		"etc/group":         "root:x:0:\n",
		"etc/hosts":         "127.0.0.1\tlocalhost\n::1\tlocalhost\n",
		"etc/nsswitch.conf": "passwd: files\ngroup: files\nhosts: files\n",
		"etc/hostname":      "netspec-vmtest\n",
	}
	for _, n := range []string{"etc/passwd", "etc/group", "etc/hosts", "etc/nsswitch.conf", "etc/hostname"} {
		if err := c.bytes(n, 0o644, []byte(etc[n])); err != nil {
			return err
		}
	}
	hostEtc := []string{"/etc/protocols", "/etc/services"}
	if dynamic {
		hostEtc = append(hostEtc, "/etc/ld.so.cache")
	}
	for _, p := range hostEtc {
		if _, err := os.Stat(p); err == nil {
			if _, err := c.hostFile(p, p); err != nil {
				return err
			}
		}
	}

	if err := s.writeModules(c); err != nil {
		return err
	}

	// Busybox applets last, so host binaries and files win.
	for _, a := range s.applets {
		if hostNames[path.Base(a)] {
			continue
		}
		if err := c.symlink(a, "/bin/busybox"); err != nil {
			return err
		}
	}
	return c.close()
}

// writeModules adds the needed module files and a modules.dep (and
// modules.alias, modules.builtin) limited to them.
func (s *initramfsSpec) writeModules(c *cpioWriter) error {
	base := "lib/modules/" + s.kernelVer
	if err := c.dir(base, 0o755); err != nil {
		return err
	}
	included := map[string]bool{}
	var dep strings.Builder
	for _, rel := range s.moduleFiles {
		if _, err := c.hostFile(base+"/"+rel, filepath.Join(s.modDir, filepath.FromSlash(rel))); err != nil {
			return err
		}
		included[modName(rel)] = true
		fmt.Fprintf(&dep, "%s:", rel)
		for _, d := range s.moduleIndex.deps[rel] {
			fmt.Fprintf(&dep, " %s", d)
		}
		dep.WriteString("\n")
	}
	if err := c.bytes(base+"/modules.dep", 0o644, []byte(dep.String())); err != nil {
		return err
	}
	var alias strings.Builder
	for _, l := range s.moduleIndex.aliases {
		if f := strings.Fields(l); len(f) == 3 && included[modName(f[2])] {
			alias.WriteString(l + "\n")
		}
	}
	if err := c.bytes(base+"/modules.alias", 0o644, []byte(alias.String())); err != nil {
		return err
	}
	if p := filepath.Join(s.modDir, "modules.builtin"); fileExists(p) {
		if _, err := c.hostFile(base+"/modules.builtin", p); err != nil {
			return err
		}
	}
	return nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// initScript returns the VM's /init: it mounts the pseudo file systems,
// brings up lo, loads the modules, runs the test binary and prints the
// verdict line, then powers the VM off. Whatever fails before the binary
// runs is reported as a FAIL verdict instead of hanging.
func (s *initramfsSpec) initScript() (string, error) {
	var b strings.Builder
	b.WriteString(`#!/bin/busybox sh
# /init of a netspec vmtest VM, generated by netspec.dev/netspec/internal/vmtest.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root TMPDIR=/tmp TERM=dumb
result() {
	echo
	echo "` + ResultMarker + ` $1 run=` + s.runID + `"
	sync
	poweroff -f
	while :; do sleep 1; done
}
step() {
	"$@" || result "FAIL setup: $*"
}
step mount -t proc proc /proc
step mount -t sysfs sysfs /sys
step mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
step mount -t devpts devpts /dev/pts
step mount -t tmpfs -o mode=1777 tmpfs /dev/shm
step mount -t tmpfs -o mode=0755 tmpfs /run
step mount -t tmpfs -o mode=1777 tmpfs /tmp
mkdir -p /run/netns /run/lock
step ip link set lo up
hostname netspec-vmtest
echo "NETSPEC-VMTEST: kernel $(uname -r), loading modules"
`)
	if len(s.load) > 0 {
		b.WriteString("for m in")
		for _, m := range s.load {
			b.WriteString(" " + shellQuote(m))
		}
		b.WriteString("; do\n\tmodprobe \"$m\" || result \"FAIL modprobe=$m\"\ndone\n")
	}
	b.WriteString("export " + InVMEnv + "=1\nfailed=\n")
	for i, su := range s.suites {
		if err := s.suiteScript(&b, i, su); err != nil {
			return "", err
		}
	}
	b.WriteString("[ -z \"$failed\" ] && result PASS\nresult \"FAIL exit=$failed\"\n")
	return b.String(), nil
}

// suiteScript writes the part of /init that runs suite i: its start line,
// the binary in a subshell with the suite's environment and directory,
// and its verdict line; the first failure's exit status goes to $failed.
func (s *initramfsSpec) suiteScript(b *strings.Builder, i int, su Suite) error {
	if su.Dir == "" || !strings.HasPrefix(su.Dir, "/") {
		return fmt.Errorf("suite %s: Dir must be an absolute path in the VM", su.Name)
	}
	tag := suiteTag(s.runID, i)
	cmd := shellQuote(vmBinary(su.Binary))
	for _, a := range su.Args {
		cmd += " " + shellQuote(a)
	}
	fmt.Fprintf(b, "echo\necho %s\n(\n", shellQuote(StartMarker+" "+su.Name+" "+tag))
	for _, kv := range su.Env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || !envName.MatchString(k) {
			return fmt.Errorf("suite %s: Env entry %q is not NAME=VALUE", su.Name, kv)
		}
		b.WriteString("\texport " + shellQuote(kv) + "\n")
	}
	fmt.Fprintf(b, "\tmkdir -p %[1]s && cd %[1]s || exit 125\n", shellQuote(su.Dir))
	fmt.Fprintf(b, "\techo %s\n", shellQuote("NETSPEC-VMTEST: running "+cmd))
	fmt.Fprintf(b, "\texec %s </dev/null\n)\nrc=$?\necho\n", cmd)
	fmt.Fprintf(b, "if [ \"$rc\" = 0 ]; then echo \"%[1]s PASS %[2]s\"; else echo \"%[1]s FAIL exit=$rc %[2]s\"; [ -n \"$failed\" ] || failed=$rc; fi\n", ResultMarker, tag)
	return nil
}
