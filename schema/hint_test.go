package schema

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// countWalks counts the directories Load lists from now on: none when it
// took Options.Changed.
func countWalks(t *testing.T) *atomic.Int64 {
	t.Helper()
	var n atomic.Int64
	orig := readDir
	readDir = func(name string) ([]os.DirEntry, error) {
		n.Add(1)
		return orig(name)
	}
	t.Cleanup(func() { readDir = orig })
	return &n
}

// hintTree writes a tree without symlinks: YAML and JSON files (one with
// a diagnostic) in nested directories, a CUE package, files the loader
// skips, and waits until they are older than testMargin.
func hintTree(t *testing.T) string {
	t.Helper()
	root := writeTree(t, map[string]string{
		"a.yaml":          svcYAML("aa"),
		"b.yaml":          svcYAML("bb"),
		"j.json":          `{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "jj"}, "spec": {"ports": [{"port": 80}]}}`,
		"sub/c.yaml":      svcYAML("cc") + "  typo: 1\n",
		"sub/deep/d.yml":  svcYAML("dd"),
		"p/x.cue":         memoCUE,
		"p/y.cue":         "package p\n\nb: {apiVersion: \"v1\", kind: \"Pod\", metadata: name: \"pb\", spec: {}}\n",
		"README.md":       "not a spec file\n",
		".hidden/h.yaml":  svcYAML("hh"),
		"sub/.swp.yaml":   svcYAML("swp"),
		"p/ignored.cuex":  "x",
		"sub/deep/e.YAML": svcYAML("ee"),
	})
	settle()
	return root
}

// paths makes the slash paths rels below root absolute, as a watcher
// names them.
func paths(root string, rels ...string) []string {
	out := make([]string, len(rels))
	for i, r := range rels {
		out[i] = filepath.Join(root, filepath.FromSlash(r))
	}
	return out
}

// wantSame checks that tr equals a Load of its root without cache or memo,
// the positions it would locate with included, and that the memo holds
// exactly the tree's files.
func wantSame(t *testing.T, tr *Tree, stats *StatCache) {
	t.Helper()
	fresh := loadTree(t, tr.Root, Options{})
	if got, want := snapshot(t, tr), snapshot(t, fresh); got != want {
		t.Fatalf("result differs from a fresh Load:\n%s", lineDiff(strings.Split(want, "\n"), strings.Split(got, "\n")))
	}
	if !maps.Equal(tr.fileHashes(), fresh.fileHashes()) {
		t.Errorf("content hashes differ from a fresh Load's:\n got %v\nwant %v", slices.Sorted(maps.Keys(tr.fileHashes())), slices.Sorted(maps.Keys(fresh.fileHashes())))
	}
	if stats != nil {
		other := NewStatCache()
		loadTree(t, tr.Root, Options{Cache: newMapCache(), Stats: other})
		got, want := slices.Sorted(maps.Keys(stats.files)), slices.Sorted(maps.Keys(other.files))
		if !slices.Equal(got, want) {
			t.Errorf("memo of %v, want %v", got, want)
		}
	}
}

// writeNew writes the file rel below root, making its directory.
func writeNew(t *testing.T, root, rel, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(filepath.Join(root, rel)), 0o755); err != nil {
		t.Fatal(err)
	}
	rewrite(t, root, rel, data)
}

func mustRename(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}

func mustRemove(t *testing.T, name string) {
	t.Helper()
	if err := os.RemoveAll(name); err != nil {
		t.Fatal(err)
	}
}

// TestLoadChanged edits a tree after a Load with a StatCache, then loads it
// with the changed paths (Options.Changed): the result equals a fresh
// Load's; the Load reads just what changed and lists no directory, or
// falls back to a walk where the paths do not tell everything.
func TestLoadChanged(t *testing.T) {
	needMemo(t)
	setMargin(t, testMargin)
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, root string) []string
		walk   bool // falls back to a walk
		reads  int
		linked bool // the tree holds a symlink after the change: every Load walks
	}{
		{"nothing", func(*testing.T, string) []string { return []string{} }, false, 0, false},
		{"modified in place", func(t *testing.T, root string) []string {
			rewrite(t, root, "a.yaml", svcYAML("ab"))
			return paths(root, "a.yaml")
		}, false, 1, false},
		{"modified in place, listed twice", func(t *testing.T, root string) []string {
			rewrite(t, root, "sub/c.yaml", svcYAML("cx"))
			return paths(root, "sub/c.yaml", "sub/c.yaml")
		}, false, 1, false},
		{"atomic save (hidden temporary file renamed over)", func(t *testing.T, root string) []string {
			rewrite(t, root, "sub/.c.yaml.swp", svcYAML("renamed"))
			mustRename(t, filepath.Join(root, "sub/.c.yaml.swp"), filepath.Join(root, "sub/c.yaml"))
			return paths(root, "sub/.c.yaml.swp", "sub/c.yaml")
		}, false, 1, false},
		{"atomic save (temporary file with another extension)", func(t *testing.T, root string) []string {
			rewrite(t, root, "a.yaml~", svcYAML("tilde"))
			mustRename(t, filepath.Join(root, "a.yaml~"), filepath.Join(root, "a.yaml"))
			return paths(root, "a.yaml~", "a.yaml")
		}, false, 1, false},
		{"new file", func(t *testing.T, root string) []string {
			rewrite(t, root, "sub/deep/new.json", `{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "nn"}, "spec": {"ports": [{"port": 80}]}}`)
			return paths(root, "sub/deep/new.json")
		}, false, 1, false},
		{"new file first in the walk's order", func(t *testing.T, root string) []string {
			rewrite(t, root, "0.yaml", svcYAML("zero"))
			return paths(root, "0.yaml")
		}, false, 1, false},
		{"new file not a spec file", func(t *testing.T, root string) []string {
			rewrite(t, root, "sub/notes.txt", "x")
			return paths(root, "sub/notes.txt")
		}, false, 0, false},
		{"deleted file", func(t *testing.T, root string) []string {
			mustRemove(t, filepath.Join(root, "b.yaml"))
			return paths(root, "b.yaml")
		}, false, 0, false},
		{"renamed file", func(t *testing.T, root string) []string {
			mustRename(t, filepath.Join(root, "a.yaml"), filepath.Join(root, "sub/z.yaml"))
			return paths(root, "a.yaml", "sub/z.yaml")
		}, false, 1, false},
		{"deleted file that was never a spec file", func(t *testing.T, root string) []string {
			mustRemove(t, filepath.Join(root, "README.md"))
			return paths(root, "README.md", "gone.yaml")
		}, false, 0, false},
		{"hidden file", func(t *testing.T, root string) []string {
			rewrite(t, root, ".hidden/h.yaml", svcYAML("hz"))
			rewrite(t, root, ".new.yaml", svcYAML("hn"))
			return paths(root, ".hidden/h.yaml", ".new.yaml", ".hidden")
		}, false, 0, false},
		{"one file of a CUE package", func(t *testing.T, root string) []string {
			rewrite(t, root, "p/x.cue", strings.Replace(memoCUE, `"pa"`, `"pz"`, 1))
			return paths(root, "p/x.cue")
		}, false, 2, false}, // the package is read whole
		{"new file of a CUE package", func(t *testing.T, root string) []string {
			rewrite(t, root, "p/a.cue", "package p\n\nc: {apiVersion: \"v1\", kind: \"Service\", metadata: name: \"pc\", spec: ports: [{port: 81}]}\n")
			return paths(root, "p/a.cue")
		}, false, 3, false},
		{"file of a CUE package deleted", func(t *testing.T, root string) []string {
			mustRemove(t, filepath.Join(root, "p/y.cue"))
			return paths(root, "p/y.cue")
		}, false, 1, false},
		{"every file of a CUE package deleted", func(t *testing.T, root string) []string {
			mustRemove(t, filepath.Join(root, "p/y.cue"))
			mustRemove(t, filepath.Join(root, "p/x.cue"))
			return paths(root, "p/x.cue", "p/y.cue")
		}, false, 0, false},
		{"new CUE package", func(t *testing.T, root string) []string {
			rewrite(t, root, "sub/q.cue", "package q\n\nq: {apiVersion: \"v1\", kind: \"Service\", metadata: name: \"qq\", spec: ports: [{port: 80}]}\n")
			return paths(root, "sub/q.cue")
		}, false, 1, false},
		{"invalid edit", func(t *testing.T, root string) []string {
			rewrite(t, root, "a.yaml", "kind: Service\nmetadata: {name: web\n")
			rewrite(t, root, "p/y.cue", "package p\n\nb: {\n")
			return paths(root, "a.yaml", "p/y.cue")
		}, false, 3, false},
		{"new file named as a known one but for case", func(t *testing.T, root string) []string {
			rewrite(t, root, "A.yaml", svcYAML("upper"))
			return paths(root, "A.yaml")
		}, true, 1, false},
		{"file in a new directory", func(t *testing.T, root string) []string {
			writeNew(t, root, "new/e.yaml", svcYAML("ne"))
			return paths(root, "new", "new/e.yaml")
		}, true, 1, false},
		{"file in a new directory, the directory not listed", func(t *testing.T, root string) []string {
			writeNew(t, root, "new/e.yaml", svcYAML("ne"))
			return paths(root, "new/e.yaml")
		}, true, 1, false},
		{"directory deleted", func(t *testing.T, root string) []string {
			mustRemove(t, filepath.Join(root, "sub/deep"))
			return paths(root, "sub/deep")
		}, true, 0, false},
		{"file replaced by a symlink", func(t *testing.T, root string) []string {
			mustRemove(t, filepath.Join(root, "a.yaml"))
			if err := os.Symlink(".hidden/h.yaml", filepath.Join(root, "a.yaml")); err != nil {
				t.Fatal(err)
			}
			return paths(root, "a.yaml")
		}, true, 1, true},
		{"file replaced by a directory", func(t *testing.T, root string) []string {
			mustRemove(t, filepath.Join(root, "b.yaml"))
			writeNew(t, root, "b.yaml/f.yaml", svcYAML("ff"))
			return paths(root, "b.yaml")
		}, true, 1, false},
		{"the root listed", func(t *testing.T, root string) []string {
			rewrite(t, root, "a.yaml", svcYAML("ab"))
			return []string{root}
		}, true, 1, false},
		{"a path outside the tree", func(t *testing.T, root string) []string {
			return []string{filepath.Dir(root), filepath.Join(filepath.Dir(root), "x.yaml")}
		}, true, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := hintTree(t)
			opt := Options{Cache: newMapCache(), Stats: NewStatCache()}
			loadTree(t, root, opt)
			opt.Changed = tc.change(t, root)
			walks, reads := countWalks(t), countReads(t)
			tr := loadTree(t, root, opt)
			if walked := walks.Load() > 0; walked != tc.walk {
				t.Errorf("walked the tree: %v, want %v", walked, tc.walk)
			}
			if got := int(reads.Load()); got != tc.reads || tr.Unread != tr.Files-got {
				t.Errorf("read %d files and left %d of %d unread; want %d read, the others unread", got, tr.Unread, tr.Files, tc.reads)
			}
			wantSame(t, tr, opt.Stats)

			// The state kept is the tree's. With nothing changed, the next
			// Load reads again at most the files just read (not trusted
			// yet), and the one after that none.
			settle()
			opt.Changed = []string{}
			for i, most := range []int{tc.reads, 0} {
				walks.Store(0)
				reads.Store(0)
				again := loadTree(t, root, opt)
				if walked := walks.Load() > 0; walked != tc.linked {
					t.Errorf("Load %d with nothing changed walked the tree: %v, want %v", i+2, walked, tc.linked)
				}
				if got := int(reads.Load()); got > most {
					t.Errorf("Load %d with nothing changed read %d files, want at most %d", i+2, got, most)
				}
				wantSame(t, again, opt.Stats)
			}
		})
	}
}

// TestLoadChangedFallsBack: Load walks the tree though told what changed
// when it cannot take the previous walk for it.
func TestLoadChangedFallsBack(t *testing.T) {
	needMemo(t)
	setMargin(t, testMargin)
	t.Run("the tree holds a symlink", func(t *testing.T) {
		root := memoTree(t)
		opt := Options{Cache: newMapCache(), Stats: NewStatCache()}
		loadTree(t, root, opt)
		rewrite(t, root, "a.yaml", svcYAML("ab"))
		opt.Changed = paths(root, "a.yaml")
		walks := countWalks(t)
		tr := loadTree(t, root, opt)
		if walks.Load() == 0 {
			t.Error("did not walk")
		}
		wantSame(t, tr, opt.Stats)
	})
	for _, tc := range []struct {
		name string
		opt  func(Options) Options
	}{
		{"no StatCache", func(o Options) Options { o.Stats = nil; return o }},
		{"no Cache", func(o Options) Options { o.Cache = nil; return o }},
		{"another MaxFileSize", func(o Options) Options { o.MaxFileSize = 1 << 20; return o }},
		{"another StatCache", func(o Options) Options { o.Stats = NewStatCache(); return o }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := hintTree(t)
			opt := Options{Cache: newMapCache(), Stats: NewStatCache()}
			loadTree(t, root, opt)
			rewrite(t, root, "a.yaml", svcYAML("ab"))
			opt.Changed = paths(root, "a.yaml")
			walks := countWalks(t)
			tr := loadTree(t, root, tc.opt(opt))
			if walks.Load() == 0 {
				t.Error("did not walk")
			}
			wantSame(t, tr, nil)
		})
	}
	t.Run("the previous Load failed", func(t *testing.T) {
		root := hintTree(t)
		opt := Options{Cache: newMapCache(), Stats: NewStatCache()}
		loadTree(t, root, opt)
		moved := root + ".moved"
		mustRename(t, root, moved)
		if _, err := Load(root, opt); err == nil {
			t.Fatal("Load of a missing root succeeded")
		}
		mustRename(t, moved, root)
		opt.Changed = []string{}
		walks := countWalks(t)
		tr := loadTree(t, root, opt)
		if walks.Load() == 0 {
			t.Error("did not walk")
		}
		wantSame(t, tr, opt.Stats)
	})
	t.Run("the cache lost the results", func(t *testing.T) {
		root := hintTree(t)
		opt := Options{Cache: newMapCache(), Stats: NewStatCache()}
		first := loadTree(t, root, opt)
		opt.Cache, opt.Changed = newMapCache(), []string{}
		reads := countReads(t)
		tr := loadTree(t, root, opt)
		if int(reads.Load()) != first.Files || tr.Cached != 0 {
			t.Errorf("read %d of %d files, %d cached; want all read", reads.Load(), first.Files, tr.Cached)
		}
		wantSame(t, tr, opt.Stats)
	})
}

// TestLoadChangedRacy: a file that the StatCache does not trust yet (its
// times within racyMargin of the Load that read it) is read again though
// not listed, as without Options.Changed.
func TestLoadChangedRacy(t *testing.T) {
	needMemo(t)
	setMargin(t, time.Hour) // every file is recent
	root := hintTree(t)
	opt := Options{Cache: newMapCache(), Stats: NewStatCache()}
	loadTree(t, root, opt)
	opt.Changed = []string{}
	walks, reads := countWalks(t), countReads(t)
	tr := loadTree(t, root, opt)
	if walks.Load() != 0 || int(reads.Load()) != tr.Files || tr.Unread != 0 {
		t.Errorf("walked %d directories, read %d of %d files, %d unread; want no walk and every file read", walks.Load(), reads.Load(), tr.Files, tr.Unread)
	}
	wantSame(t, tr, opt.Stats)
}

// TestLoadChangedRootSymlink: a tree whose root is a symlink (git-sync)
// takes the changed paths named through the link or in the real
// directory, and walks again once the link points elsewhere.
func TestLoadChangedRootSymlink(t *testing.T) {
	needMemo(t)
	setMargin(t, testMargin)
	v1 := hintTree(t)
	v2 := hintTree(t)
	rewrite(t, v2, "a.yaml", svcYAML("v2"))
	cur := filepath.Join(t.TempDir(), "current")
	if err := os.Symlink(v1, cur); err != nil {
		t.Fatal(err)
	}
	settle()
	opt := Options{Cache: newMapCache(), Stats: NewStatCache()}
	loadTree(t, cur, opt)
	walks := countWalks(t)
	rewrite(t, v1, "a.yaml", svcYAML("ab"))
	rewrite(t, v1, "b.yaml", svcYAML("bc"))
	opt.Changed = []string{filepath.Join(cur, "a.yaml"), filepath.Join(v1, "b.yaml")}
	tr := loadTree(t, cur, opt)
	if walks.Load() != 0 {
		t.Error("walked the tree")
	}
	wantSame(t, tr, opt.Stats)

	tmp := cur + ".tmp"
	if err := os.Symlink(v2, tmp); err != nil {
		t.Fatal(err)
	}
	mustRename(t, tmp, cur)
	opt.Changed = []string{cur}
	tr = loadTree(t, cur, opt)
	if walks.Load() == 0 {
		t.Error("did not walk the new tree")
	}
	wantSame(t, tr, opt.Stats)
	if !slices.Contains(objectNames(tr), "Service default/v2") {
		t.Errorf("objects %v, want the new tree's", objectNames(tr))
	}
}

// TestLoadChangedSequence edits a tree at random, loading it after each
// edit with the paths changed: each Load equals a fresh one.
func TestLoadChangedSequence(t *testing.T) {
	needMemo(t)
	setMargin(t, testMargin)
	root := hintTree(t)
	opt := Options{Cache: newMapCache(), Stats: NewStatCache()}
	loadTree(t, root, opt)
	rng := rand.New(rand.NewPCG(1, 2))
	dirs := []string{".", "sub", "sub/deep", "p"}
	names := []string{"a.yaml", "b.yaml", "m.json", "x.cue", "y.cue", "z.cue", "n.txt"}
	content := func(dir, name string, n int) string {
		id := fmt.Sprintf("%s-%s-%d", strings.NewReplacer("/", "-", ".", "d").Replace(dir), strings.TrimSuffix(name, filepath.Ext(name)), n)
		switch filepath.Ext(name) {
		case ".cue":
			pkg := "p" + strings.NewReplacer("/", "", ".", "r").Replace(dir)
			if n%7 == 0 {
				return "package " + pkg + "\n\nbad: {\n"
			}
			return fmt.Sprintf("package %s\n\n%s: {apiVersion: \"v1\", kind: \"Service\", metadata: name: %q, spec: ports: [{port: %d}]}\n",
				pkg, strings.TrimSuffix(name, ".cue"), id, 80+n%3)
		case ".json":
			return fmt.Sprintf(`{"apiVersion": "v1", "kind": "Service", "metadata": {"name": %q}, "spec": {"ports": [{"port": 80}]}}`, id)
		}
		if n%5 == 0 {
			return svcYAML(id) + "  typo: 1\n"
		}
		return svcYAML(id)
	}
	walks := countWalks(t)
	for step := range 80 {
		changed := []string{} // not nil: nothing changed, when no edit succeeds
		for range 1 + rng.IntN(3) {
			dir := dirs[rng.IntN(len(dirs))]
			rel := filepath.Join(dir, names[rng.IntN(len(names))])
			p := filepath.Join(root, rel)
			switch op := rng.IntN(4); {
			case op == 0: // delete
				if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
				changed = append(changed, p)
			case op == 1: // rename to another name of the same directory
				to := filepath.Join(root, dir, names[rng.IntN(len(names))])
				if err := os.Rename(p, to); err == nil {
					changed = append(changed, p, to)
				}
			case op == 2: // atomic save
				tmp := filepath.Join(root, dir, ".tmp")
				rewrite(t, root, filepath.Join(dir, ".tmp"), content(dir, filepath.Base(rel), rng.IntN(100)))
				mustRename(t, tmp, p)
				changed = append(changed, tmp, p)
			default: // written in place
				rewrite(t, root, rel, content(dir, filepath.Base(rel), rng.IntN(100)))
				changed = append(changed, p)
			}
		}
		if step%4 == 0 {
			settle() // some files trusted, some not
		}
		opt.Changed = changed
		walks.Store(0)
		tr := loadTree(t, root, opt)
		if walks.Load() != 0 {
			t.Fatalf("step %d walked the tree; changed %q", step, changed)
		}
		wantSame(t, tr, opt.Stats)
	}
}

// TestLoadChangedMany: a tree of more units than a worker takes at once,
// with more workers than cores.
func TestLoadChangedMany(t *testing.T) {
	needMemo(t)
	setMargin(t, testMargin)
	files := map[string]string{}
	for i := range 300 {
		files[fmt.Sprintf("d%d/s%03d.yaml", i%3, i)] = svcYAML(fmt.Sprintf("s%d", i))
	}
	root := writeTree(t, files)
	settle()
	opt := Options{Cache: newMapCache(), Stats: NewStatCache(), Workers: 5}
	first := loadTree(t, root, opt)
	rewrite(t, root, "d0/s000.yaml", svcYAML("changed0"))
	rewrite(t, root, "d2/s299.yaml", svcYAML("changed299"))
	rewrite(t, root, "d1/s100.yaml", svcYAML("x")+"  typo: 1\n")
	rewrite(t, root, "d1/new.yaml", svcYAML("new"))
	mustRemove(t, filepath.Join(root, "d2/s104.yaml"))
	opt.Changed = paths(root, "d0/s000.yaml", "d2/s299.yaml", "d1/s100.yaml", "d1/new.yaml", "d2/s104.yaml")
	walks, reads := countWalks(t), countReads(t)
	tr := loadTree(t, root, opt)
	if walks.Load() != 0 || reads.Load() != 4 || tr.Files != first.Files || tr.Cached != tr.Files-4 {
		t.Errorf("walked %d directories, read %d files, %d of %d cached; want no walk, 4 read, the others cached", walks.Load(), reads.Load(), tr.Cached, tr.Files)
	}
	wantSame(t, tr, opt.Stats)
}

// TestLoadChangedIgnoreFile: Options.Changed respects the ignore files. A
// changed file that an ignore file leaves out, or inside a directory one
// leaves out, is not read; a change to an ignore file, or to a file the
// loader skips by name, makes the Load walk the tree.
func TestLoadChangedIgnoreFile(t *testing.T) {
	needMemo(t)
	setMargin(t, testMargin)
	tree := func(t *testing.T) string {
		root := writeTree(t, map[string]string{
			"a.yaml":           svcYAML("aa"),
			".netspecignore":   "scratch/\n*.draft.yaml\n",
			"sub/b.yaml":       svcYAML("bb"),
			"sub/x.draft.yaml": "not: [an object",
			"scratch/c.yaml":   "not: [an object",
		})
		settle()
		return root
	}
	t.Run("a left-out file changes", func(t *testing.T) {
		root := tree(t)
		opt := Options{Cache: newMapCache(), Stats: NewStatCache()}
		wantNoDiags(t, loadTree(t, root, opt))
		rewrite(t, root, "sub/x.draft.yaml", "still: [not an object")
		writeNew(t, root, "sub/y.draft.yaml", "new: [not an object")
		rewrite(t, root, "scratch/c.yaml", "more: [garbage")
		writeNew(t, root, "scratch/deeper/d.yaml", "more: [garbage")
		rewrite(t, root, "a.yaml", svcYAML("ab"))
		opt.Changed = paths(root, "sub/x.draft.yaml", "sub/y.draft.yaml", "scratch/c.yaml", "scratch/deeper", "scratch/deeper/d.yaml", "a.yaml")
		walks, reads := countWalks(t), countReads(t)
		tr := loadTree(t, root, opt)
		if walks.Load() != 0 || reads.Load() != 1 {
			t.Errorf("listed %d directories and read %d files; want 0 and 1 (a.yaml)", walks.Load(), reads.Load())
		}
		wantNoDiags(t, tr)
		wantSame(t, tr, opt.Stats)
	})
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, root string) []string
	}{
		{"the ignore file changes", func(t *testing.T, root string) []string {
			rewrite(t, root, ".netspecignore", "scratch/\n")
			return paths(root, ".netspecignore")
		}},
		{"the ignore file goes", func(t *testing.T, root string) []string {
			mustRemove(t, filepath.Join(root, ".netspecignore"))
			return paths(root, ".netspecignore")
		}},
		{"a nested ignore file comes", func(t *testing.T, root string) []string {
			writeNew(t, root, "sub/.netspecignore", "b.yaml\n")
			return paths(root, "sub/.netspecignore")
		}},
		{"a Helm values file comes", func(t *testing.T, root string) []string {
			writeNew(t, root, "sub/values.yaml", "replicas: 1\n")
			return paths(root, "sub/values.yaml")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := tree(t)
			opt := Options{Cache: newMapCache(), Stats: NewStatCache()}
			loadTree(t, root, opt)
			opt.Changed = tc.change(t, root)
			walks := countWalks(t)
			tr := loadTree(t, root, opt)
			if walks.Load() == 0 {
				t.Error("did not walk")
			}
			wantSame(t, tr, opt.Stats)
			// The walk's result is kept: a Load told of no change after it
			// lists nothing and gives the same.
			opt.Changed = []string{}
			walks.Store(0)
			again := loadTree(t, root, opt)
			if walks.Load() != 0 {
				t.Errorf("listed %d directories after the walk", walks.Load())
			}
			wantSame(t, again, opt.Stats)
		})
	}
}
