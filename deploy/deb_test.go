package deploy

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// debArch is GOARCH's Debian name, as scripts/build-deb maps it.
var debArch = map[string]string{
	"amd64": "amd64", "arm64": "arm64", "386": "i386", "arm": "armhf",
	"ppc64le": "ppc64el", "s390x": "s390x", "riscv64": "riscv64",
}

// TestDebianPackage builds the package with scripts/build-deb, reads its
// contents and control fields, installs it into a throwaway root with dpkg
// (the host's dpkg database must not change), runs the installed binary,
// then removes and purges it there. A second build must give the same bytes.
func TestDebianPackage(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped with -short: builds netspec and a Debian package")
	}
	for _, tool := range []string{"dpkg-deb", "dpkg", "md5sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIPPED: %s not found (on Debian it is in the essential package dpkg): the Debian package is not built or checked", tool)
		}
	}
	// go test puts its toolchain's go first in PATH; the script uses it.
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("scripts/build-deb needs the go command: %v", err)
	}
	arch, ok := debArch[runtime.GOARCH]
	if !ok {
		t.Skipf("SKIPPED: scripts/build-deb has no Debian architecture for GOARCH=%s in this test's table", runtime.GOARCH)
	}
	hostBefore := hostDpkg(t)
	defer func() {
		if after := hostDpkg(t); after != hostBefore {
			t.Errorf("the host's dpkg database changed:\nbefore %s\nafter  %s", hostBefore, after)
		}
	}()

	tmp := t.TempDir()
	// The second build, for the reproducibility check at the end, runs
	// beside the first one and the checks (each build is mostly a link
	// and an xz compression, on one CPU); the cleanup waits for it before
	// tmp goes.
	var again buildResult
	var wg sync.WaitGroup
	wg.Go(func() { again = buildDeb(filepath.Join(tmp, "again")) })
	t.Cleanup(wg.Wait)
	first := buildDeb(filepath.Join(tmp, "dist"))
	if first.err != nil {
		t.Fatal(first.err)
	}
	deb := first.deb

	// The control fields.
	fields := map[string]string{}
	for _, line := range strings.Split(run(t, "dpkg-deb", "-f", deb), "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok && !strings.HasPrefix(line, " ") {
			fields[k] = v
		}
	}
	version := fields["Version"]
	if want := "netspec_" + version + "_" + arch + ".deb"; filepath.Base(deb) != want {
		t.Errorf("package file %s, want %s", filepath.Base(deb), want)
	}
	if !regexp.MustCompile(`^[0-9][A-Za-z0-9.+~]*$`).MatchString(version) {
		t.Errorf("Version %q: not a Debian native version", version)
	}
	for k, want := range map[string]string{"Package": "netspec", "Architecture": arch, "Section": "net", "Priority": "optional"} {
		if fields[k] != want {
			t.Errorf("control field %s = %q, want %q", k, fields[k], want)
		}
	}
	for _, k := range []string{"Maintainer", "Description", "Installed-Size"} {
		if fields[k] == "" {
			t.Errorf("no control field %s", k)
		}
	}
	// No Depends: the binary is static, so it needs no libc, and it
	// talks netlink, so it needs no nft or ipvsadm.
	for _, k := range []string{"Depends", "Pre-Depends"} {
		if v, ok := fields[k]; ok {
			t.Errorf("control field %s: %q, want none", k, v)
		}
	}

	// The files, their modes and owners.
	want := map[string]string{
		"./":                        "drwxr-xr-x",
		"./etc/":                    "drwxr-xr-x",
		"./etc/default/":            "drwxr-xr-x",
		"./etc/default/netspec":     "-rw-r--r--",
		"./usr/":                    "drwxr-xr-x",
		"./usr/bin/":                "drwxr-xr-x",
		"./usr/bin/netspec":         "-rwxr-xr-x",
		"./usr/lib/":                "drwxr-xr-x",
		"./usr/lib/systemd/":        "drwxr-xr-x",
		"./usr/lib/systemd/system/": "drwxr-xr-x",
		"./usr/lib/systemd/system/netspec.service": "-rw-r--r--",
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(run(t, "dpkg-deb", "-c", deb)), "\n") {
		f := strings.Fields(line) // mode owner size date time path
		if len(f) != 6 {
			t.Fatalf("dpkg-deb -c: cannot read %q", line)
		}
		if f[1] != "root/root" {
			t.Errorf("%s: owner %s, want root/root", f[5], f[1])
		}
		got[f[5]] = f[0]
	}
	for path, mode := range want {
		if got[path] != mode {
			t.Errorf("%s: mode %q, want %q", path, got[path], mode)
		}
	}
	for path := range got {
		if _, ok := want[path]; !ok {
			t.Errorf("%s: not expected in the package", path)
		}
	}

	// The control archive: the conffile, the maintainer scripts' guard.
	control := filepath.Join(tmp, "control")
	run(t, "dpkg-deb", "--control", deb, control)
	if b := readFile(t, filepath.Join(control, "conffiles")); b != "/etc/default/netspec\n" {
		t.Errorf("conffiles = %q, want /etc/default/netspec alone", b)
	}
	for _, script := range []string{"postinst", "prerm", "postrm"} {
		p := filepath.Join(control, script)
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: %v, want an executable script", script, err)
			continue
		}
		if b := readFile(t, p); !strings.Contains(b, `[ -z "${DPKG_ROOT:-}" ] && [ -d /run/systemd/system ]`) {
			t.Errorf("%s: does not leave systemd alone in an install into another root:\n%s", script, b)
		}
		run(t, "sh", "-n", p)
	}
	if b := readFile(t, filepath.Join(control, "md5sums")); !strings.Contains(b, "  usr/bin/netspec\n") || strings.Contains(b, "etc/default") {
		t.Errorf("md5sums = %q, want the binary and the unit, not the conffile", b)
	}

	// Install into a throwaway root. dpkg --root runs the maintainer
	// scripts chrooted into it, which has no /bin/sh: they run unchrooted
	// instead, with DPKG_ROOT set, which makes them do nothing.
	root := filepath.Join(tmp, "root")
	admin := filepath.Join(root, "var/lib/dpkg")
	for _, d := range []string{"info", "updates", "triggers"} {
		if err := os.MkdirAll(filepath.Join(admin, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"status", "available"} {
		if err := os.WriteFile(filepath.Join(admin, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dpkg := func(args ...string) string {
		return run(t, "dpkg", append([]string{"--root=" + root, "--force-not-root", "--force-script-chrootless", "--log=/dev/null"}, args...)...)
	}
	dpkg("--install", deb)
	if s := dpkg("--status", "netspec"); !strings.Contains(s, "Status: install ok installed\n") || !strings.Contains(s, "\nConffiles:\n /etc/default/netspec ") {
		t.Errorf("dpkg --status after the install:\n%s", s)
	}
	if out := dpkg("--verify", "netspec"); out != "" {
		t.Errorf("dpkg --verify: %s", out)
	}
	for path, mode := range map[string]fs.FileMode{
		"usr/bin/netspec":                        0o755,
		"usr/lib/systemd/system/netspec.service": 0o644,
		"etc/default/netspec":                    0o644,
	} {
		fi, err := os.Stat(filepath.Join(root, path))
		if err != nil {
			t.Errorf("installed: %v", err)
		} else if fi.Mode() != mode {
			t.Errorf("installed %s: mode %v, want %v", path, fi.Mode(), mode)
		}
	}
	bin := filepath.Join(root, "usr/bin/netspec")
	if out := run(t, bin, "version"); !strings.HasPrefix(out, "netspec ") {
		t.Errorf("netspec version = %q, want netspec VERSION ...", out)
	}
	if f, err := elf.Open(bin); err != nil {
		t.Error(err)
	} else {
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s has an ELF interpreter: not a static binary, so the package would need Depends: libc6", bin)
			}
		}
		f.Close()
	}

	unit := readFile(t, filepath.Join(root, "usr/lib/systemd/system/netspec.service"))
	for _, line := range []string{
		"EnvironmentFile=-/etc/default/netspec",
		"ExecStart=/usr/bin/netspec watch ${NETSPEC_TREE} --node ${NETSPEC_NODE} ",
	} {
		if !strings.Contains(unit, "\n"+line) {
			t.Errorf("installed unit: no line starting %q:\n%s", line, unit)
		}
	}
	if strings.Contains(unit, "/usr/local/bin") {
		t.Errorf("installed unit names /usr/local/bin:\n%s", unit)
	}
	// The default file changes nothing: every variable keeps the unit's
	// default until the admin uncomments it; what it documents is
	// netspec's variables.
	defaults := readFile(t, filepath.Join(root, "etc/default/netspec"))
	for _, line := range strings.Split(defaults, "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			t.Errorf("/etc/default/netspec: %q is not commented out", line)
		}
	}
	for _, v := range []string{"#NETSPEC_TREE=", "#NETSPEC_NODE=", "#NETSPEC_ARGS="} {
		if !strings.Contains(defaults, "\n"+v) {
			t.Errorf("/etc/default/netspec does not show %s", v)
		}
		if !strings.Contains(unit, "${"+strings.TrimSuffix(v[1:], "=")+"}") && !strings.Contains(unit, "$"+strings.TrimSuffix(v[1:], "=")) {
			t.Errorf("the unit does not use %s", v[1:])
		}
	}

	// Remove keeps the edited conffile; purge removes it.
	conffile := filepath.Join(root, "etc/default/netspec")
	if err := os.WriteFile(conffile, []byte(defaults+"NETSPEC_TREE=/srv/tree\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dpkg("--remove", "netspec")
	if _, err := os.Stat(bin); !os.IsNotExist(err) {
		t.Errorf("after dpkg --remove, %s: %v, want it gone", bin, err)
	}
	if b := readFile(t, conffile); !strings.HasSuffix(b, "NETSPEC_TREE=/srv/tree\n") {
		t.Errorf("after dpkg --remove, the edited conffile is %q", b)
	}
	dpkg("--purge", "netspec")
	if _, err := os.Stat(conffile); !os.IsNotExist(err) {
		t.Errorf("after dpkg --purge, %s: %v, want it gone", conffile, err)
	}

	// Reproducible: a second build gives the same bytes.
	wg.Wait()
	if again.err != nil {
		t.Fatal(again.err)
	}
	if a, b := fileHash(t, deb), fileHash(t, again.deb); a != b {
		t.Errorf("two builds differ: %s %s, %s %s", deb, a, again.deb, b)
	}
}

// buildResult is what buildDeb made: the package's path, or why not.
type buildResult struct {
	deb string
	err error
}

// buildDeb runs scripts/build-deb -o out for GOARCH and checks that it
// printed the path of a package in out. It may run on any goroutine.
func buildDeb(out string) buildResult {
	cmd := exec.Command("../scripts/build-deb", "-o", out)
	cmd.Env = append(os.Environ(), "GOARCH="+runtime.GOARCH)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		return buildResult{err: fmt.Errorf("scripts/build-deb -o %s: %v\n%s", out, err, stderr.Bytes())}
	}
	deb := strings.TrimSpace(string(stdout))
	if filepath.Dir(deb) != out {
		return buildResult{err: fmt.Errorf("scripts/build-deb printed %q, want a file in %s", deb, out)}
	}
	return buildResult{deb: deb}
}

// hostDpkg sums up the host's dpkg database: its status file's hash and
// modification time, and its info directory's.
func hostDpkg(t *testing.T) string {
	t.Helper()
	var parts []string
	for _, p := range []string{"/var/lib/dpkg/status", "/var/lib/dpkg/info", "/var/lib/dpkg/available"} {
		fi, err := os.Stat(p)
		if err != nil {
			parts = append(parts, p+": "+err.Error())
			continue
		}
		s := p + " " + fi.ModTime().String()
		if !fi.IsDir() {
			s += " " + fileHash(t, p)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func fileHash(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// run runs a command and returns its standard output; a failure fails the
// test with its standard error.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return string(out)
}
