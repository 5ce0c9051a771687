package schema

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"netspec.dev/netspec/internal/diag"
)

// mapCache is a minimal Cache (internal/cache imports this package).
type mapCache struct {
	mu sync.Mutex
	m  map[Key]*UnitResult
}

func newMapCache() *mapCache { return &mapCache{m: map[Key]*UnitResult{}} }

func (c *mapCache) Get(k Key) (*UnitResult, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.m[k]
	return r, ok
}

func (c *mapCache) Put(k Key, r *UnitResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[k] = r
}

// countReads counts the spec files Load opens from now on.
func countReads(t *testing.T) *atomic.Int64 {
	t.Helper()
	var n atomic.Int64
	readHook = func(string) { n.Add(1) }
	t.Cleanup(func() { readHook = nil })
	return &n
}

// setMargin sets racyMargin for the test.
func setMargin(t *testing.T, d time.Duration) {
	t.Helper()
	orig := racyMargin
	racyMargin = d
	t.Cleanup(func() { racyMargin = orig })
}

// testMargin is the racyMargin of the tests that need old files.
const testMargin = 50 * time.Millisecond

// settle waits until the files written so far are older than testMargin.
func settle() { time.Sleep(testMargin + 20*time.Millisecond) }

func needMemo(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the StatCache memoizes only on Linux")
	}
}

// snapshot is everything a Tree holds that a caller sees.
func snapshot(t *testing.T, tr *Tree) string {
	t.Helper()
	b, err := json.MarshalIndent(struct {
		O []*Object
		I []Ignored
		S []Skipped
		D []string
		F int
	}{tr.Objects, tr.Ignored, tr.Skipped, diagStrings(tr.Diags), tr.Files}, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// wantFresh checks that tr equals a Load of its root without cache or memo.
func wantFresh(t *testing.T, tr *Tree, opt Options) {
	t.Helper()
	fresh := loadTree(t, tr.Root, Options{MaxFileSize: opt.MaxFileSize})
	if got, want := snapshot(t, tr), snapshot(t, fresh); got != want {
		t.Fatalf("result differs from a fresh Load:\n%s", lineDiff(strings.Split(want, "\n"), strings.Split(got, "\n")))
	}
}

const memoCUE = "package p\n\na: {apiVersion: \"v1\", kind: \"Service\", metadata: name: \"pa\", spec: ports: [{port: 80}]}\n"

// memoTree writes a tree of plain, CUE and symlinked files and waits until
// they are older than testMargin.
func memoTree(t *testing.T) string {
	t.Helper()
	root := writeTree(t, map[string]string{
		"a.yaml":     svcYAML("aa"),
		"b.yaml":     svcYAML("bb"),
		"sub/c.yaml": svcYAML("cc") + "  typo: 1\n",
		"p/x.cue":    memoCUE,
		"p/y.cue":    "package p\n\nb: {apiVersion: \"v1\", kind: \"Pod\", metadata: name: \"pb\", spec: {}}\n",
		".t/v1.yaml": svcYAML("v1"),
		".t/v2.yaml": svcYAML("v2"),
	})
	if err := os.Symlink(".t/v1.yaml", filepath.Join(root, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	settle()
	return root
}

func rewrite(t *testing.T, root, name, data string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(root, name), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestStatCacheChanges loads a tree with a StatCache, changes it, and loads
// it again: the second Load reads just the changed files and equals a fresh
// Load, and the memo holds just the tree's files.
func TestStatCacheChanges(t *testing.T) {
	needMemo(t)
	setMargin(t, testMargin)
	sameFile := func(t *testing.T, root, name string, f func()) {
		t.Helper()
		before, err := os.Stat(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		f()
		after, err := os.Stat(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		if !os.SameFile(before, after) || before.Size() != after.Size() {
			t.Fatalf("%s: not rewritten in place to the same size", name)
		}
	}
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, root string)
		reads  int
	}{
		{"unchanged", func(*testing.T, string) {}, 0},
		{"replaced by rename", func(t *testing.T, root string) {
			rewrite(t, root, "a.yaml.tmp", svcYAML("renamed"))
			if err := os.Rename(filepath.Join(root, "a.yaml.tmp"), filepath.Join(root, "a.yaml")); err != nil {
				t.Fatal(err)
			}
		}, 1},
		{"rewritten in place, same size", func(t *testing.T, root string) {
			sameFile(t, root, "a.yaml", func() { rewrite(t, root, "a.yaml", svcYAML("ab")) })
		}, 1},
		{"rewritten in place, mtime set back", func(t *testing.T, root string) {
			name := filepath.Join(root, "a.yaml")
			before, err := os.Stat(name)
			if err != nil {
				t.Fatal(err)
			}
			sameFile(t, root, "a.yaml", func() { rewrite(t, root, "a.yaml", svcYAML("ab")) })
			if err := os.Chtimes(name, before.ModTime(), before.ModTime()); err != nil {
				t.Fatal(err)
			}
			if after, err := os.Stat(name); err != nil || !after.ModTime().Equal(before.ModTime()) {
				t.Fatalf("mtime not set back: %v", err)
			}
		}, 1},
		{"chmod", func(t *testing.T, root string) {
			if err := os.Chmod(filepath.Join(root, "sub/c.yaml"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, 1},
		{"removed", func(t *testing.T, root string) {
			if err := os.Remove(filepath.Join(root, "b.yaml")); err != nil {
				t.Fatal(err)
			}
		}, 0},
		{"added", func(t *testing.T, root string) { rewrite(t, root, "d.yaml", svcYAML("dd")) }, 1},
		{"one file of a CUE package", func(t *testing.T, root string) {
			rewrite(t, root, "p/x.cue", strings.Replace(memoCUE, `"pa"`, `"pz"`, 1))
		}, 2}, // the package is read whole
		{"symlink retargeted", func(t *testing.T, root string) {
			link := filepath.Join(root, "link.yaml")
			if err := os.Remove(link); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(".t/v2.yaml", link); err != nil {
				t.Fatal(err)
			}
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := memoTree(t)
			opt := Options{Cache: newMapCache(), Stats: NewStatCache()}
			first := loadTree(t, root, opt)
			if first.Unread != 0 || opt.Stats.Len() != first.Files {
				t.Fatalf("first Load: Unread %d, memo of %d files; want 0 and %d", first.Unread, opt.Stats.Len(), first.Files)
			}
			tc.change(t, root)
			reads := countReads(t)
			tr := loadTree(t, root, opt)
			if got := int(reads.Load()); got != tc.reads || tr.Unread != tr.Files-got {
				t.Errorf("second Load read %d files and left %d of %d unread; want %d read, the others unread", got, tr.Unread, tr.Files, tc.reads)
			}
			if opt.Stats.Len() != tr.Files {
				t.Errorf("memo holds %d files, the tree has %d", opt.Stats.Len(), tr.Files)
			}
			wantFresh(t, tr, opt)
		})
	}
}

// TestStatCacheReadsAnyway: when the memo knows every file but the result
// is not at hand, or the limits changed, Load reads and validates as
// without a memo.
func TestStatCacheReadsAnyway(t *testing.T) {
	needMemo(t)
	setMargin(t, testMargin)
	root := memoTree(t)
	for _, tc := range []struct {
		name string
		opt  func(Options) Options
	}{
		{"cache evicted", func(o Options) Options { o.Cache = newMapCache(); return o }},
		{"no cache", func(o Options) Options { o.Cache = nil; return o }},
		{"smaller MaxFileSize", func(o Options) Options { o.MaxFileSize = 40; return o }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opt := Options{Cache: newMapCache(), Stats: NewStatCache()}
			loadTree(t, root, opt)
			reads := countReads(t)
			opt = tc.opt(opt)
			tr := loadTree(t, root, opt)
			if int(reads.Load()) != tr.Files || tr.Unread != 0 || tr.Cached != 0 {
				t.Errorf("read %d of %d files, Unread %d, Cached %d; want all read, none cached", reads.Load(), tr.Files, tr.Unread, tr.Cached)
			}
			wantFresh(t, tr, opt)
		})
	}
}

// TestStatCacheRacy: a file whose times are within racyMargin of the start
// of the Load that memoized it is read again, though its stat matches.
func TestStatCacheRacy(t *testing.T) {
	needMemo(t)
	t.Run("recent files are read again", func(t *testing.T) {
		setMargin(t, time.Hour) // every file is recent
		root := memoTree(t)
		opt := Options{Cache: newMapCache(), Stats: NewStatCache()}
		loadTree(t, root, opt)
		reads := countReads(t)
		tr := loadTree(t, root, opt)
		if int(reads.Load()) != tr.Files || tr.Unread != 0 {
			t.Fatalf("unchanged recent files: read %d of %d, Unread %d; want all read", reads.Load(), tr.Files, tr.Unread)
		}
		// Once the files are old, the Load after the next reads none.
		racyMargin = testMargin
		settle()
		for i, want := range []int{tr.Files, 0} {
			reads.Store(0)
			loadTree(t, root, opt)
			if int(reads.Load()) != want {
				t.Errorf("old files, Load %d: read %d, want %d", i+1, reads.Load(), want)
			}
		}
	})
	// A file written twice within its timestamps' granularity keeps its
	// stat: forge that by giving the memo the stat after the second write.
	for _, tc := range []struct {
		name   string
		margin time.Duration
		stale  bool // whether the second Load keeps the first content
	}{
		{"written again within the margin", time.Hour, false},
		{"written again after the margin (the memo is believed)", testMargin, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setMargin(t, tc.margin)
			root := memoTree(t)
			opt := Options{Cache: newMapCache(), Stats: NewStatCache()}
			loadTree(t, root, opt)
			rewrite(t, root, "a.yaml", svcYAML("ab"))
			real, err := filepath.EvalSymlinks(filepath.Join(root, "a.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			e, ok := opt.Stats.files[real]
			if !ok {
				t.Fatalf("no memo of %s", real)
			}
			e.st = lstat(real)
			opt.Stats.files[real] = e
			tr := loadTree(t, root, opt)
			names := strings.Join(objectNames(tr), ",")
			if stale := strings.Contains(names, "/aa,"); stale != tc.stale {
				t.Errorf("objects %s: first content kept = %v, want %v", names, stale, tc.stale)
			}
			if !tc.stale {
				wantFresh(t, tr, opt)
			}
		})
	}
}

// TestStatCacheLocate: after a Load that read no file, Locate still finds
// the positions the loader reported, as cross-object checks need.
func TestStatCacheLocate(t *testing.T) {
	needMemo(t)
	setMargin(t, testMargin)
	bad := func(name string) string {
		return "apiVersion: v1\nkind: Service\nmetadata: {name: " + name + "}\nspec:\n  ports:\n  - port: 80\n    name: Bad-" + name + "\n"
	}
	root := writeTree(t, map[string]string{
		"one.yaml":   bad("one"),
		"multi.yaml": "# first\n" + bad("m1") + "---\napiVersion: v1\nkind: List\nitems:\n- " + strings.ReplaceAll(strings.TrimSpace(bad("l1")), "\n", "\n  ") + "\n",
		"c/a.cue":    "package c\n\n#T: {apiVersion: \"v1\", kind: \"Service\", metadata: name: string, spec: ports: [{port: 80, name: string}]}\n",
		"c/b.cue":    "package c\n\nsvc: c1: #T & {metadata: name: \"c1\", spec: ports: [{name: \"Bad-c1\"}]}\n",
	})
	settle()
	opt := Options{Cache: newMapCache(), Stats: new(StatCache)} // the zero value works
	loadTree(t, root, opt)
	tr := loadTree(t, root, opt)
	if tr.Unread != tr.Files {
		t.Fatalf("second Load left %d of %d files unread, want all", tr.Unread, tr.Files)
	}
	want := map[string]string{}
	for _, d := range tr.Diags {
		if i := strings.Index(d.Msg, `"Bad-`); i >= 0 {
			want[strings.TrimPrefix(strings.SplitN(d.Msg[i+1:], `"`, 2)[0], "Bad-")] = d.Pos.String()
		}
	}
	p := diag.Path{"spec", "ports", 0, "name"}
	for _, name := range []string{"one", "m1", "l1", "c1"} {
		found := false
		for _, o := range tr.Objects {
			if o.Meta().Name != name {
				continue
			}
			found = true
			if got := tr.Locate(o.Src, p).String(); got != want[name] || !strings.Contains(got, ":") {
				t.Errorf("%s: Locate = %s, the loader said %s", name, got, want[name])
			}
		}
		if !found {
			t.Errorf("no object %s", name)
		}
	}
	// Where a check across objects (a duplicate name) points.
	wantName := map[string]string{"one": "one.yaml:3:18", "m1": "multi.yaml:4:18", "l1": "multi.yaml:15:20", "c1": "c/b.cue:3:32"}
	for _, o := range tr.Objects {
		if w, ok := wantName[o.Meta().Name]; ok {
			if got := tr.Locate(o.Src, diag.Path{"metadata", "name"}).String(); got != w {
				t.Errorf("%s: metadata.name at %s, want %s", o.Meta().Name, got, w)
			}
		}
	}
}

// TestStatCacheIdentity: each part of a file's identity counts. The memo
// is forged to differ from the file in one part only (a rename over the
// file within one timestamp tick would differ in the inode alone).
func TestStatCacheIdentity(t *testing.T) {
	needMemo(t)
	setMargin(t, testMargin)
	// lstat takes every part: two files of one directory share the
	// device, not the inode.
	root := writeTree(t, map[string]string{"x.yaml": "x", "y.yaml": "x"})
	x, y := lstat(filepath.Join(root, "x.yaml")), lstat(filepath.Join(root, "y.yaml"))
	if !x.ok || x.dev != y.dev || x.ino == y.ino || x.size != 1 || x.mtime == 0 || x.ctime == 0 {
		t.Fatalf("lstat: %+v and %+v", x, y)
	}
	for _, tc := range []struct {
		name  string
		forge func(*fileStat)
	}{
		{"device", func(s *fileStat) { s.dev++ }},
		{"inode", func(s *fileStat) { s.ino++ }},
		{"size", func(s *fileStat) { s.size++ }},
		{"mtime", func(s *fileStat) { s.mtime-- }},
		{"ctime", func(s *fileStat) { s.ctime-- }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := memoTree(t)
			opt := Options{Cache: newMapCache(), Stats: NewStatCache()}
			loadTree(t, root, opt)
			real, err := filepath.EvalSymlinks(filepath.Join(root, "a.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			e := opt.Stats.files[real]
			tc.forge(&e.st)
			opt.Stats.files[real] = e
			reads := countReads(t)
			loadTree(t, root, opt)
			if reads.Load() != 1 {
				t.Errorf("read %d files, want a.yaml alone", reads.Load())
			}
		})
	}
}
