// Package state keeps a node's state directory (netspec's --state-dir,
// /var/lib/netspec by default): the DNS zones (dns/<zone>.zone), the
// service environment files (env/<namespace>.env) and the pods'
// resolv.conf files (resolv/<namespace>.conf), as render.Files names them,
// and the record of the last applied plan (plan.json and plan.log).
//
// What is on disk, and why:
//
//   - the zone files, for any authoritative server (CoreDNS file, BIND,
//     Knot) that serves the node's names from them, and the env and
//     resolv.conf files, for the loaders that give pods their service
//     variables and resolver settings: all are read by other programs, so
//     all always hold the last applied plan, each
//     written whole (a reader must see a complete file) and only when its
//     content changed;
//   - the record of the last applied plan, for the node itself: `netspec
//     plan` compares a tree with it, and apply (or a daemon starting)
//     deletes the conntrack entries of UDP endpoints that left since. It is
//     plan.json, a whole plan, plus plan.log, the changes applied since
//     (record.go): a daemon's reload appends its change, a few kilobytes,
//     instead of rewriting the whole plan (27 MB at 10,000 Services).
//
// Only files of those kinds are netspec's: a file is one when its path,
// relative to the dir, is plan.json, plan.log, dns/<name>.zone,
// env/<name>.env or resolv/<name>.conf, where <name> is a plain file name not starting with a
// dot, and it is a regular file. Everything else in the dir (other files,
// subdirectories, symbolic links) is never modified or removed.
//
// # Crash safety
//
// A write never leaves a half-written file of netspec's kinds behind: each
// file is written to a temporary file in the same directory (a name
// starting with ".netspec-tmp-", which is no kind of netspec's), synced,
// and renamed over the old one, and then the directory is synced. rename(2)
// within one file system replaces the name atomically, so a reader (the DNS
// server, a pod's env loader) sees the old file or the new one and never a
// mix, and after a power loss the name points at a complete file: the data
// was synced before the rename, and the directory after it. plan.log is
// the one file appended to: a record counts only when whole (length and
// checksum), so a torn append is no record (see record.go).
//
// A write is made in two steps. First every file to write (and a whole
// plan.json) is written to its temporary file and synced, one file at a
// time, and no name in the dir changes (PrepareRecord). Then the
// temporary files are renamed into place, each followed by a sync of its
// directory, the stale files are removed and the record is written, in
// the order below (Commit); or they are removed and the dir is as it was
// (Abort). ApplyRecord makes both steps at once; an applier
// prepares the write while the kernel takes the plan, and commits it only
// once the kernel holds the plan, so that no reader ever sees the files of
// a plan the kernel refused.
//
// The record (plan.json, or a record appended to plan.log) is written (or
// removed) last, after every zone and env file is in place and durable,
// and stale files are removed before it too. So the record always names a
// plan that was completely applied: after a crash in the middle of
// ApplyRecord the dir holds the old record with a mix of old and new
// zone and env files, each of them complete. The next apply converges; it
// compares file contents, not the record, so it rewrites exactly what is
// still different, and a zone written just before the crash keeps the
// serial it got (its content equals the rendered one). Temporary files a
// crash left behind (any number, when it came between the two steps) are
// removed by the next write (ApplyRecord, PrepareRecord) or
// Cleanup, which hold the lock, so never while a write is pending. (A Dir
// takes a file it found equal before as unchanged without reading it
// again while it is given the same bytes and the file's stat is as it was:
// see known.go, and Forget.)
//
// ApplyRecord and Cleanup hold an exclusive flock(2) on the dir while they
// run, and a prepared write from PrepareRecord to its Commit or Abort;
// PlanFiles and LastPlan a shared one. So two appliers on one
// node do not interleave.
//
// # Zone serials
//
// See serial.go: a zone whose records changed gets the previous serial + 1
// (skipping 0); a zone whose records are the same, compared as data with
// the SOA serial aside, is not rewritten and keeps its serial. So serials
// never go backwards on a node in RFC 1982 serial arithmetic.
package state

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"netspec.dev/netspec/internal/atomicfile"
	"netspec.dev/netspec/render"
)

// PlanFile is the path of the last applied plan in the dir: the whole
// plan, or the base that LogFile's deltas apply to (see record.go).
const PlanFile = "plan.json"

// LogFile is the path of the journal of the applied plan's changes since
// PlanFile was written (ApplyRecord).
const LogFile = "plan.log"

const (
	dnsDir    = "dns"
	envDir    = "env"
	resolvDir = "resolv"
	tmpPrefix = ".netspec-tmp-"
	fileMode  = 0o644
	dirMode   = 0o755
)

// Dir is a node's state directory.
type Dir struct {
	path string // absolute
	// rec is the record (plan.json and plan.log) as this Dir last read or
	// wrote it; nil: not known. ApplyRecord appends to the log only when
	// the files still are as it says.
	rec     *planRecord
	written Written
	// known are the zone, env and resolv.conf files as diff last found
	// them equal to what it was given (known.go); now is the clock it
	// reads (time.Now; tests set another).
	known map[string]knownFile
	now   func() time.Time
	// crash, set by tests, simulates a crash: when it returns true at a
	// step (a file about to be renamed into place or removed, a record
	// half appended), the Dir stops there with errCrash, leaving what a
	// crash would.
	crash func(step string) bool
}

var errCrash = errors.New("simulated crash")

// Written counts what a Dir wrote: files written whole (each through a
// temporary file) and records appended to LogFile, and their bytes.
type Written struct {
	Files, Appends int
	Bytes          int64
}

// Written is what the dir wrote since it was opened.
func (d *Dir) Written() Written { return d.written }

// Open opens the state directory at path, creating it (and its parents)
// with mode 0755 when it is missing. A path that exists and is not a
// directory is an error.
func Open(path string) (*Dir, error) {
	return open(path, true)
}

// OpenNoCreate opens the state directory at path as Open does, but leaves
// it missing when it is: commands that promise to change nothing (plan)
// or only to remove netspec's files (cleanup) must not create it. A
// missing dir holds no files for PlanFiles, LastPlan and Cleanup,
// which do not create it either; ApplyRecord creates it.
func OpenNoCreate(path string) (*Dir, error) {
	return open(path, false)
}

func open(path string, create bool) (*Dir, error) {
	if path == "" {
		return nil, errors.New("netspec state dir: no path given")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("netspec state dir %s: %w", path, err)
	}
	fi, err := os.Stat(abs)
	switch {
	case err == nil && !fi.IsDir():
		return nil, fmt.Errorf("netspec state dir %s: exists and is not a directory", abs)
	case errors.Is(err, fs.ErrNotExist):
		if !create {
			break
		}
		if err := mkdir(abs); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, fmt.Errorf("netspec state dir %s: %w%s", abs, err, hint(err))
	}
	return &Dir{path: abs, now: time.Now}, nil
}

// mkdir creates the dir at abs (and its parents) with mode 0755.
func mkdir(abs string) error {
	if err := os.MkdirAll(abs, dirMode); err != nil {
		return fmt.Errorf("netspec state dir %s: cannot create it: %w%s", abs, err, hint(err))
	}
	return nil
}

// lockIfThere takes a flock(2) on the dir as lock does, unless the dir is
// missing (OpenNoCreate may leave it so): then unlock is nil.
func (d *Dir) lockIfThere(how int) (unlock func(), err error) {
	_, err = os.Stat(d.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, d.errorf("%w", err)
	}
	return d.lock(how)
}

// Path is the dir's absolute path.
func (d *Dir) Path() string { return d.path }

// Changes are the files a plan adds, changes and removes in the dir:
// sorted relative slash paths.
type Changes struct {
	Added, Changed, Removed []string
}

// Empty reports whether there is no change.
func (c Changes) Empty() bool {
	return len(c.Added) == 0 && len(c.Changed) == 0 && len(c.Removed) == 0
}

// exts are the file name extensions of the dir's subdirectories.
var exts = map[string]string{dnsDir: ".zone", envDir: ".env", resolvDir: ".conf"}

// IsManaged reports whether rel (a relative slash path) names a file of
// netspec's kinds: plan.json, plan.log, dns/<name>.zone, env/<name>.env or
// resolv/<name>.conf.
func IsManaged(rel string) bool {
	if rel == PlanFile || rel == LogFile {
		return true
	}
	dir, name, ok := strings.Cut(rel, "/")
	if !ok {
		return false
	}
	ext, ok := exts[dir]
	if !ok {
		return false
	}
	base, ok := strings.CutSuffix(name, ext)
	return ok && base != "" && !strings.HasPrefix(name, ".") && !strings.ContainsAny(name, "/\\\x00")
}

// put writes data as rel's next content into rel's temporary file and
// syncs it; rel itself is not touched until place.
func (w *Prepared) put(rel string, data []byte) error {
	t, err := w.create(rel)
	if err != nil {
		return err
	}
	if _, err := t.Write(data); err != nil {
		t.abort()
		return w.d.errorf("write %s: %w", rel, err)
	}
	return w.finish(t)
}

// create starts rel's temporary file, creating its directory if needed
// (Abort removes it again).
func (w *Prepared) create(rel string) (*tempFile, error) {
	d := w.d
	if w.temps[rel] != nil {
		return nil, d.errorf("write %s: written twice", rel)
	}
	if dir := filepath.Dir(d.abs(rel)); dir != d.path {
		if err := os.Mkdir(dir, dirMode); err == nil {
			w.made = append(w.made, dir)
			if err := atomicfile.SyncDir(d.path); err != nil {
				return nil, d.errorf("sync %s: %w", d.path, err)
			}
		} else if !errors.Is(err, fs.ErrExist) {
			return nil, d.errorf("create %s/: %w", filepath.Base(dir), err)
		}
	}
	f, err := atomicfile.Create(d.abs(rel), tmpPrefix+filepath.Base(rel)+"-", fileMode)
	if err != nil {
		return nil, d.errorf("write %s: %w", rel, err)
	}
	return &tempFile{d: d, rel: rel, f: f}, nil
}

// finish syncs and closes t, which create started, and keeps it for
// place.
func (w *Prepared) finish(t *tempFile) error {
	if err := t.finish(); err != nil {
		return err
	}
	w.temps[t.rel] = t
	return nil
}

// place renames rel's temporary file over rel and syncs its directory.
func (w *Prepared) place(rel string) error {
	t := w.temps[rel]
	if t == nil {
		return w.d.errorf("write %s: no prepared content", rel)
	}
	delete(w.temps, rel)
	return t.place()
}

// commitFiles places the added and changed zone, env and resolv.conf
// files of plan (made by diff with put), then removes its stale ones,
// each durable before it returns; the record is left to the caller.
func (w *Prepared) commitFiles(plan Changes) (Changes, error) {
	d := w.d
	var done Changes
	for _, p := range plan.Added {
		if err := w.place(p); err != nil {
			return done, err
		}
		done.Added = append(done.Added, p)
	}
	for _, p := range plan.Changed {
		if err := w.place(p); err != nil {
			return done, err
		}
		done.Changed = append(done.Changed, p)
	}
	removedDirs := map[string]bool{}
	for _, p := range plan.Removed {
		if err := d.remove(p); err != nil {
			return done, err
		}
		removedDirs[filepath.Dir(d.abs(p))] = true
		done.Removed = append(done.Removed, p)
	}
	for _, dir := range slices.Sorted(maps.Keys(removedDirs)) {
		if err := atomicfile.SyncDir(dir); err != nil {
			return done, d.errorf("sync %s: %w", dir, err)
		}
	}
	return done, nil
}

// Cleanup removes every file of netspec's kinds from the dir, plan.json
// first, then dns/, env/ and resolv/ when they are empty; other files, and the dir
// itself, stay. It returns the relative paths of the files it removed,
// sorted. Zone serials are forgotten with the zones. A missing dir stays
// missing.
func (d *Dir) Cleanup() (removed []string, err error) {
	defer func() { slices.Sort(removed) }()
	unlock, err := d.lockIfThere(syscall.LOCK_EX)
	if err != nil || unlock == nil {
		return nil, err
	}
	defer unlock()
	d.rec = nil
	if err := d.sweepTemp(); err != nil {
		return nil, err
	}
	held, err := d.held()
	if err != nil {
		return nil, err
	}
	paths := slices.Sorted(maps.Keys(held))
	if held[PlanFile] { // first: the dir no longer holds an applied plan
		paths = slices.Insert(slices.DeleteFunc(paths, func(p string) bool { return p == PlanFile }), 0, PlanFile)
	}
	for _, p := range paths {
		if err := d.remove(p); err != nil {
			return removed, err
		}
		removed = append(removed, p)
	}
	for _, sub := range []string{dnsDir, envDir, resolvDir} {
		dir := filepath.Join(d.path, sub)
		if err := atomicfile.SyncDir(dir); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return removed, d.errorf("sync %s: %w", dir, err)
		}
		// Fails when not empty (or not there, or a file): then it stays.
		_ = syscall.Rmdir(dir)
	}
	if err := atomicfile.SyncDir(d.path); err != nil {
		return removed, d.errorf("sync %s: %w", d.path, err)
	}
	return removed, nil
}

// File is what a file of the dir is to hold, as PlanFiles and ApplyRecord
// take it: a render.Text. Bytes gives its content, and is called only
// when the dir must compare or write it. ID, when not 0, names that
// content: two Files with one non-zero ID have the same bytes
// (render.FilesMemo gives a file whose input did not change the ID it
// gave last time). A Dir remembers the ID of a file it found holding its
// content and, while the file's stat stays as it was, takes it as
// unchanged without asking for the bytes or reading the file (known.go).
type File = render.Text

// diff computes the changes files make, and gives put (unless nil:
// PlanFiles) the content of each file that is to be written (zone serials
// rewritten) as soon as it has it, so that no more than one file's bytes
// are held at a time. The record (plan.json, plan.log) is not in files,
// and is neither compared nor removed: ApplyRecord keeps it.
func (d *Dir) diff(files map[string]File, put func(rel string, data []byte) error) (Changes, error) {
	for p := range files {
		if p == LogFile || p == PlanFile {
			return Changes{}, d.errorf("%q is written by ApplyRecord, not given as a file", p)
		}
		if !IsManaged(p) {
			return Changes{}, d.errorf("%q is not a file of the state dir (want %s/<zone>.zone, %s/<namespace>.env or %s/<namespace>.conf)", p, dnsDir, envDir, resolvDir)
		}
	}
	held, err := d.held()
	if err != nil {
		return Changes{}, err
	}
	var ch Changes
	d.keepKnown(files)
	for _, p := range slices.Sorted(maps.Keys(files)) {
		f := files[p]
		if held[p] && d.unchanged(p, f.ID) {
			continue // as it was when last found equal (known.go)
		}
		in, old := f.Bytes(), []byte(nil)
		var st fileID
		if held[p] {
			st, _ = d.statID(p) // before the read: see confirm; unknown on an error
			if old, err = d.readHeld(p); err != nil {
				return Changes{}, err
			}
		}
		if zone, ok := zoneOf(p); ok {
			nb, err := rewriteZone(old, in, zone)
			if err != nil {
				return Changes{}, d.errorf("%s: %w", p, err)
			}
			in = nb
		}
		switch {
		case old == nil:
			ch.Added = append(ch.Added, p)
		case !bytes.Equal(old, in):
			ch.Changed = append(ch.Changed, p)
		default: // equal
			d.confirm(p, f.ID, st)
			continue
		}
		delete(d.known, p)
		if put != nil {
			if err := put(p, in); err != nil {
				return Changes{}, err
			}
		}
	}
	for _, p := range slices.Sorted(maps.Keys(held)) {
		if p == PlanFile || p == LogFile {
			continue
		}
		if _, ok := files[p]; !ok {
			ch.Removed = append(ch.Removed, p)
		}
	}
	return ch, nil
}

// zoneOf is the zone a path of the dir holds: <zone> of dns/<zone>.zone.
func zoneOf(rel string) (string, bool) {
	name, ok := strings.CutPrefix(rel, dnsDir+"/")
	if !ok {
		return "", false
	}
	return strings.TrimSuffix(name, ".zone"), true
}

// held returns the files of netspec's kinds in the dir: regular files
// only.
func (d *Dir) held() (map[string]bool, error) {
	held := map[string]bool{}
	for _, p := range []string{PlanFile, LogFile} {
		fi, err := os.Lstat(d.abs(p))
		switch {
		case err == nil && fi.Mode().IsRegular():
			held[p] = true
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return nil, d.errorf("%s: %w", p, err)
		}
	}
	for _, sub := range []string{dnsDir, envDir, resolvDir} {
		ents, err := os.ReadDir(filepath.Join(d.path, sub))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, d.errorf("list %s/: %w", sub, err)
		}
		for _, e := range ents {
			rel := sub + "/" + e.Name()
			if e.Type().IsRegular() && IsManaged(rel) {
				held[rel] = true
			}
		}
	}
	return held, nil
}

// readHeld reads a file of the dir: nil when it is not there.
func (d *Dir) readHeld(rel string) ([]byte, error) {
	b, err := os.ReadFile(d.abs(rel))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, d.errorf("read %s: %w", rel, err)
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

// tempFile is the temporary file of a write of rel: finish, then place,
// renames it over rel; abort removes it.
type tempFile struct {
	d   *Dir
	rel string
	f   *atomicfile.File
	n   int64 // bytes written
	err error // the first error of Write
}

func (t *tempFile) Write(p []byte) (int, error) {
	n, err := t.f.Write(p)
	t.n += int64(n)
	if err != nil && t.err == nil {
		t.err = err
	}
	return n, err
}

// abort removes the temporary file.
func (t *tempFile) abort() { t.f.Abort() }

// finish gives the temporary file its mode, syncs and closes it: its
// content is durable, and rel still holds what it held. On an error it is
// removed.
func (t *tempFile) finish() error {
	if err := t.f.Finish(); err != nil {
		return t.d.errorf("write %s: %w", t.rel, err)
	}
	return nil
}

// place renames the finished temporary file over rel and syncs the
// directory.
func (t *tempFile) place() error {
	d, rel := t.d, t.rel
	if d.crash != nil && d.crash("write "+rel) {
		return errCrash
	}
	if err := t.f.Place(); err != nil {
		return d.errorf("write %s: %w", rel, err)
	}
	d.written.Files++
	d.written.Bytes += t.n
	return nil
}

// remove removes rel; one already gone is not an error.
func (d *Dir) remove(rel string) error {
	if d.crash != nil && d.crash("remove "+rel) {
		return errCrash
	}
	if err := os.Remove(d.abs(rel)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return d.errorf("remove %s: %w", rel, err)
	}
	return nil
}

// sweepTemp removes the temporary files an interrupted write left.
// beginWrite readies the dir for a write: it is created if missing
// (OpenNoCreate may have left it so), locked for this process alone, and
// swept of the temporary files of a writer that died. The caller calls
// unlock when done.
func (d *Dir) beginWrite() (unlock func(), err error) {
	if err := mkdir(d.path); err != nil {
		return nil, err
	}
	if unlock, err = d.lock(syscall.LOCK_EX); err != nil {
		return nil, err
	}
	if err := d.sweepTemp(); err != nil {
		unlock()
		return nil, err
	}
	return unlock, nil
}

func (d *Dir) sweepTemp() error {
	for _, sub := range []string{".", dnsDir, envDir, resolvDir} {
		dir := filepath.Join(d.path, sub)
		ents, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			continue
		}
		if err != nil {
			return d.errorf("list %s: %w", dir, err)
		}
		for _, e := range ents {
			if e.Type().IsRegular() && strings.HasPrefix(e.Name(), tmpPrefix) {
				if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return d.errorf("remove leftover %s: %w", e.Name(), err)
				}
			}
		}
	}
	return nil
}

// lock takes a flock(2) on the dir and returns its release.
func (d *Dir) lock(how int) (func(), error) {
	f, err := os.Open(d.path)
	if err != nil {
		return nil, d.errorf("open: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, d.errorf("lock: %w", err)
	}
	return func() { f.Close() }, nil // closing releases the lock
}

func (d *Dir) abs(rel string) string { return filepath.Join(d.path, filepath.FromSlash(rel)) }

// errorf is an error about the dir: it names the dir, and says what to
// check when the cause is a permission.
func (d *Dir) errorf(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return fmt.Errorf("netspec state dir %s: %w%s", d.path, err, hint(err))
}

func hint(err error) string {
	switch {
	case errors.Is(err, fs.ErrPermission):
		return " (the applier must be able to write the state dir: check --state-dir, its owner and mode)"
	case errors.Is(err, syscall.EROFS):
		return " (the file system is read-only: choose a writable --state-dir)"
	}
	return ""
}
