package vmtest

import (
	"bufio"
	"compress/gzip"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// defaultKernelMeta is the Debian meta package that depends on the current
// cloud kernel: small, with IPVS, netfilter and veth as modules, and with
// the serial console and initramfs support built in.
const defaultKernelMeta = "linux-image-cloud-amd64"

// readyFile marks a complete kernel directory in the cache; it holds the
// kernel release.
const readyFile = "READY"

func kernelMetaPackage() string {
	if p := os.Getenv("NETSPEC_VMTEST_KERNEL_PACKAGE"); p != "" {
		return p
	}
	return defaultKernelMeta
}

// cacheRoot is $NETSPEC_VMTEST_CACHE, or os.UserCacheDir()/netspec-vmtest.
func cacheRoot() (string, error) {
	if d := os.Getenv("NETSPEC_VMTEST_CACHE"); d != "" {
		return filepath.Abs(d)
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "netspec-vmtest"), nil
}

// kernel is an unpacked kernel package in the cache.
type kernel struct {
	pkg     string // linux-image-6.1.0-56-cloud-amd64
	version string // 6.1.0-56-cloud-amd64
	vmlinuz string
	modDir  string // .../lib/modules/<version>, with modules.dep
}

// prepareKernel resolves the kernel package that meta depends on and makes
// sure it is unpacked, with modules.dep, in cacheDir. An exclusive flock on
// cacheDir/lock serializes it between test processes.
func prepareKernel(t testing.TB, cacheDir, meta, busybox string) (*kernel, error) {
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, err
	}
	unlock, err := lockDir(cacheDir)
	if err != nil {
		return nil, err
	}
	defer unlock()

	k, err := fetchKernel(t, cacheDir, meta, busybox)
	if err != nil {
		// Offline, apt lists gone or stale (the mirror dropped the version
		// they name): fall back to what the cache has.
		if k, cerr := newestCachedKernel(cacheDir); cerr == nil {
			t.Logf("vmtest: %v; using the cached %s", err, k.pkg)
			return k, nil
		}
		return nil, fmt.Errorf("%v (has apt-get update been run?)", err)
	}
	return k, nil
}

// fetchKernel returns the kernel that meta depends on now, from the cache
// or downloaded and unpacked into it. The caller holds the lock.
func fetchKernel(t testing.TB, cacheDir, meta, busybox string) (*kernel, error) {
	pkg, err := resolveKernelPackage(meta)
	if err != nil {
		return nil, err
	}
	kdir := filepath.Join(cacheDir, pkg)
	if k, err := readKernelDir(kdir); err == nil {
		return k, nil
	}

	// Leftovers of an interrupted preparation: nobody else holds the lock.
	if stale, _ := filepath.Glob(filepath.Join(cacheDir, "*.tmp-*")); len(stale) > 0 {
		for _, d := range stale {
			os.RemoveAll(d)
		}
	}
	os.RemoveAll(kdir) // incomplete (no READY)
	start := time.Now()
	tmp, err := os.MkdirTemp(cacheDir, pkg+".tmp-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp) // no-op after the rename
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, err
	}
	if err := unpackKernel(tmp, pkg, busybox); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, kdir); err != nil {
		return nil, err
	}
	k, err := readKernelDir(kdir)
	if err != nil {
		return nil, err
	}
	t.Logf("vmtest: prepared %s (kernel %s) in %s in %v", pkg, k.version, kdir, time.Since(start).Round(time.Millisecond))
	pruneKernels(cacheDir, kdir)
	return k, nil
}

// lockDir takes an exclusive flock on dir/lock and returns its release.
func lockDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %v", f.Name(), err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// resolveKernelPackage asks apt which kernel package meta depends on now.
func resolveKernelPackage(meta string) (string, error) {
	out, err := exec.Command("apt-cache", "depends", meta).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("apt-cache depends %s: %v: %s", meta, err, strings.TrimSpace(string(out)))
	}
	pkg, err := parseAptDepends(string(out))
	if err != nil {
		return "", fmt.Errorf("apt-cache depends %s: %v", meta, err)
	}
	return pkg, nil
}

// parseAptDepends picks the kernel image package out of apt-cache depends
// output ("  Depends: linux-image-6.1.0-56-cloud-amd64").
func parseAptDepends(out string) (string, error) {
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		line = strings.TrimPrefix(line, "|")
		dep, ok := strings.CutPrefix(line, "Depends:")
		if !ok {
			continue
		}
		dep = strings.TrimSpace(dep)
		if strings.HasPrefix(dep, "linux-image-") && !strings.HasPrefix(dep, "<") {
			return dep, nil
		}
	}
	return "", fmt.Errorf("no linux-image-* dependency in %q", out)
}

// unpackKernel downloads pkg into dir, unpacks it into dir/root,
// decompresses its modules and writes modules.dep.
func unpackKernel(dir, pkg, busybox string) error {
	args := []string{"download", pkg}
	if os.Geteuid() == 0 {
		// apt drops to the _apt user, who may not write to our cache.
		args = append([]string{"-o", "APT::Sandbox::User=root"}, args...)
	}
	cmd := exec.Command("apt-get", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get download %s: %v: %s", pkg, err, strings.TrimSpace(string(out)))
	}
	debs, _ := filepath.Glob(filepath.Join(dir, "*.deb"))
	if len(debs) != 1 {
		return fmt.Errorf("apt-get download %s left %d .deb files", pkg, len(debs))
	}
	root := filepath.Join(dir, "root")
	if out, err := exec.Command("dpkg", "-x", debs[0], root).CombinedOutput(); err != nil {
		return fmt.Errorf("dpkg -x %s: %v: %s", debs[0], err, out)
	}
	os.Remove(debs[0])
	os.RemoveAll(filepath.Join(root, "usr", "share")) // docs

	version, base, err := findKernelRelease(root)
	if err != nil {
		return err
	}
	modDir := filepath.Join(root, base, "lib", "modules", version)
	if err := decompressModules(modDir, busybox); err != nil {
		return err
	}
	if out, err := exec.Command(busybox, "depmod", "-b", filepath.Join(root, base), version).CombinedOutput(); err != nil {
		return fmt.Errorf("busybox depmod: %v: %s", err, out)
	}
	if _, err := os.Stat(filepath.Join(modDir, "modules.dep")); err != nil {
		return fmt.Errorf("busybox depmod wrote no modules.dep: %v", err)
	}
	return os.WriteFile(filepath.Join(dir, readyFile), []byte(version+"\n"), 0o644)
}

// findKernelRelease finds boot/vmlinuz-<version> in an unpacked kernel
// package and where its modules are: base is "" for root/lib/modules
// (Debian 12) or "usr" for root/usr/lib/modules (Debian 13 and later).
func findKernelRelease(root string) (version, base string, err error) {
	imgs, _ := filepath.Glob(filepath.Join(root, "boot", "vmlinuz-*"))
	if len(imgs) != 1 {
		return "", "", fmt.Errorf("kernel package has %d boot/vmlinuz-* images, want 1", len(imgs))
	}
	version = strings.TrimPrefix(filepath.Base(imgs[0]), "vmlinuz-")
	for _, base := range []string{"", "usr"} {
		if fi, err := os.Stat(filepath.Join(root, base, "lib", "modules", version)); err == nil && fi.IsDir() {
			return version, base, nil
		}
	}
	return "", "", fmt.Errorf("kernel package has no lib/modules/%s", version)
}

// readKernelDir reads a complete kernel directory of the cache.
func readKernelDir(kdir string) (*kernel, error) {
	b, err := os.ReadFile(filepath.Join(kdir, readyFile))
	if err != nil {
		return nil, err
	}
	version := strings.TrimSpace(string(b))
	root := filepath.Join(kdir, "root")
	k := &kernel{pkg: filepath.Base(kdir), version: version, vmlinuz: filepath.Join(root, "boot", "vmlinuz-"+version)}
	if _, err := os.Stat(k.vmlinuz); err != nil {
		return nil, err
	}
	for _, base := range []string{"", "usr"} {
		d := filepath.Join(root, base, "lib", "modules", version)
		if _, err := os.Stat(filepath.Join(d, "modules.dep")); err == nil {
			k.modDir = d
			return k, nil
		}
	}
	return nil, fmt.Errorf("%s: no modules.dep", kdir)
}

// newestCachedKernel returns the most recently prepared complete kernel.
func newestCachedKernel(cacheDir string) (*kernel, error) {
	dirs, _ := filepath.Glob(filepath.Join(cacheDir, "linux-image-*"))
	var best *kernel
	var bestTime time.Time
	for _, d := range dirs {
		fi, err := os.Stat(filepath.Join(d, readyFile))
		if err != nil {
			continue
		}
		k, err := readKernelDir(d)
		if err != nil {
			continue
		}
		if best == nil || fi.ModTime().After(bestTime) {
			best, bestTime = k, fi.ModTime()
		}
	}
	if best == nil {
		return nil, errors.New("no kernel in the cache")
	}
	return best, nil
}

// pruneKernels removes kernels other than keep that were prepared more
// than a day ago: apt moved on from them.
func pruneKernels(cacheDir, keep string) {
	dirs, _ := filepath.Glob(filepath.Join(cacheDir, "linux-image-*"))
	for _, d := range dirs {
		if d == keep || strings.Contains(filepath.Base(d), ".tmp-") {
			continue
		}
		if fi, err := os.Stat(filepath.Join(d, readyFile)); err == nil && time.Since(fi.ModTime()) > 24*time.Hour {
			os.RemoveAll(d)
		}
	}
}

// decompressModules turns every .ko.xz, .ko.zst and .ko.gz under modDir
// into a plain .ko, which busybox depmod and modprobe handle for sure. The
// module signature is inside the compressed data, so it survives.
func decompressModules(modDir, busybox string) error {
	return filepath.WalkDir(modDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		var cmd []string
		name := d.Name()
		switch {
		case strings.HasSuffix(name, ".ko.xz"):
			cmd = []string{busybox, "xz", "-dc", p}
		case strings.HasSuffix(name, ".ko.zst"):
			z, err := exec.LookPath("zstd")
			if err != nil {
				return fmt.Errorf("%s is zstd-compressed and zstd is not installed (apt-get install zstd)", p)
			}
			cmd = []string{z, "-dcq", p}
		case strings.HasSuffix(name, ".ko.gz"):
		default:
			return nil
		}
		dst := p[:strings.LastIndex(p, ".ko.")+len(".ko")]
		out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		defer out.Close()
		if cmd == nil {
			err = gunzipTo(out, p)
		} else {
			var stderr strings.Builder
			c := exec.Command(cmd[0], cmd[1:]...)
			c.Stdout, c.Stderr = out, &stderr
			if cerr := c.Run(); cerr != nil {
				err = fmt.Errorf("%s: %v: %s", strings.Join(cmd, " "), cerr, stderr.String())
			}
		}
		if err == nil {
			err = out.Close()
		}
		if err != nil {
			return err
		}
		return os.Remove(p)
	})
}

func gunzipTo(w io.Writer, p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("%s: %v", p, err)
	}
	if _, err := io.Copy(w, zr); err != nil {
		return fmt.Errorf("%s: %v", p, err)
	}
	return zr.Close()
}

// moduleIndex is what modules.dep, modules.builtin and modules.alias say.
type moduleIndex struct {
	byName  map[string]string   // normalized module name -> path relative to modDir
	deps    map[string][]string // relative path -> relative paths it needs
	builtin map[string]bool     // normalized names of built-in modules
	aliases []string            // "alias PATTERN module" lines
}

// modName turns a module file or module name into the kernel's module name:
// base name without .ko(.xz|.zst|.gz), dashes as underscores.
func modName(s string) string {
	s = filepath.Base(s)
	if i := strings.Index(s, ".ko"); i >= 0 {
		s = s[:i]
	}
	return strings.ReplaceAll(s, "-", "_")
}

func loadModuleIndex(modDir string) (*moduleIndex, error) {
	idx := &moduleIndex{byName: map[string]string{}, deps: map[string][]string{}, builtin: map[string]bool{}}
	f, err := os.Open(filepath.Join(modDir, "modules.dep"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := idx.parseDep(f); err != nil {
		return nil, err
	}
	if b, err := os.ReadFile(filepath.Join(modDir, "modules.builtin")); err == nil {
		for _, l := range strings.Fields(string(b)) {
			idx.builtin[modName(l)] = true
		}
	}
	if b, err := os.ReadFile(filepath.Join(modDir, "modules.alias")); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "alias ") {
				idx.aliases = append(idx.aliases, l)
			}
		}
	}
	return idx, nil
}

// parseDep reads modules.dep lines "kernel/a.ko: kernel/b.ko kernel/c.ko".
func (idx *moduleIndex) parseDep(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		mod, deps, ok := strings.Cut(line, ":")
		if !ok {
			return fmt.Errorf("modules.dep: bad line %q", line)
		}
		mod = strings.TrimSpace(mod)
		idx.byName[modName(mod)] = mod
		idx.deps[mod] = strings.Fields(deps)
	}
	return sc.Err()
}

// resolve sorts the requested modules into those to load (as given), the
// module files they need with all dependencies (sorted), those built into
// the kernel, and those the kernel does not have.
func (idx *moduleIndex) resolve(names []string) (load, files, builtin, missing []string) {
	seen := map[string]bool{}
	var add func(rel string)
	add = func(rel string) {
		if seen[rel] {
			return
		}
		seen[rel] = true
		files = append(files, rel)
		for _, d := range idx.deps[rel] {
			add(d)
		}
	}
	for _, n := range names {
		m := modName(n)
		if rel, ok := idx.byName[m]; ok {
			load = append(load, m)
			add(rel)
		} else if idx.builtin[m] {
			builtin = append(builtin, m)
		} else {
			missing = append(missing, n)
		}
	}
	sort.Strings(files)
	return load, files, builtin, missing
}

// busyboxApplets lists busybox's applets with their install paths
// ("bin/sh", "sbin/ip", ...).
func busyboxApplets(busybox string) ([]string, error) {
	out, err := exec.Command(busybox, "--list-full").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list-full: %v", busybox, err)
	}
	var applets []string
	for _, l := range strings.Fields(string(out)) {
		if l != "" && !strings.Contains(l, "..") {
			applets = append(applets, strings.TrimPrefix(l, "/"))
		}
	}
	if len(applets) == 0 {
		return nil, fmt.Errorf("%s --list-full listed no applets", busybox)
	}
	return applets, nil
}

// elfInterp returns the ELF program interpreter (dynamic loader) of the
// executable p, or "" for a static executable.
func elfInterp(p string) (string, error) {
	f, err := elf.Open(p)
	if err != nil {
		return "", fmt.Errorf("%s: %v", p, err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			b, err := io.ReadAll(prog.Open())
			if err != nil {
				return "", fmt.Errorf("%s: %v", p, err)
			}
			return strings.TrimRight(string(b), "\x00"), nil
		}
	}
	return "", nil
}
