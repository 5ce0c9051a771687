package schema

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// nextRun is what a CLI run with a disk cache does with the StatCache of
// the run before: it keeps Records, and the next run starts from them.
func nextRun(t *testing.T, prev *StatCache) *StatCache {
	t.Helper()
	recs := prev.Records()
	if prev.Changed() {
		t.Fatal("Changed after Records")
	}
	return NewStatCacheFrom(recs)
}

// TestStatRecords: the records of one run spare the next run reading the
// files that did not change, and nothing else.
func TestStatRecords(t *testing.T) {
	needMemo(t)
	setMargin(t, testMargin)
	root := memoTree(t)
	cache := newMapCache() // content-keyed, as the disk cache
	first := NewStatCache()
	tr := loadTree(t, root, Options{Cache: cache, Stats: first})
	if !first.Changed() {
		t.Error("Changed false after the first Load")
	}
	second := nextRun(t, first)
	if n := len(second.files); n != tr.Files {
		t.Fatalf("%d records, want the %d files", n, tr.Files)
	}
	reads := countReads(t)
	tr = loadTree(t, root, Options{Cache: cache, Stats: second})
	if reads.Load() != 0 || tr.Unread != tr.Files {
		t.Errorf("unchanged tree: read %d files, Unread %d of %d; want none read", reads.Load(), tr.Unread, tr.Files)
	}
	if second.Changed() {
		t.Error("Changed after a Load that read nothing")
	}
	wantSame(t, tr, second)

	// Without the results, the files are read as without records.
	reads.Store(0)
	tr = loadTree(t, root, Options{Cache: newMapCache(), Stats: nextRun(t, second)})
	if int(reads.Load()) != tr.Files {
		t.Errorf("results gone: read %d of %d files, want all", reads.Load(), tr.Files)
	}
	wantSame(t, tr, nil)

	// A file rewritten to the same size, its mtime set back (touch -d),
	// is read again: its ctime changed.
	third := nextRun(t, second)
	name := filepath.Join(root, "a.yaml")
	before, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	rewrite(t, root, "a.yaml", svcYAML("ab"))
	if err := os.Chtimes(name, before.ModTime(), before.ModTime()); err != nil {
		t.Fatal(err)
	}
	reads.Store(0)
	tr = loadTree(t, root, Options{Cache: cache, Stats: third})
	if reads.Load() != 1 || !third.Changed() {
		t.Errorf("one file rewritten: read %d files, Changed %v; want 1, true", reads.Load(), third.Changed())
	}
	wantSame(t, tr, third)
}

// TestStatRecordsRacy: a file whose times were within racyMargin of the
// start of the Load that read it is not recorded, so the next run reads it
// again though its stat is the same: on a file system of coarse timestamps
// a second write within the same tick, to the same size, keeps the stat.
func TestStatRecordsRacy(t *testing.T) {
	needMemo(t)
	setMargin(t, testMargin)
	root := memoTree(t) // old files
	rewrite(t, root, "a.yaml", svcYAML("aa"))
	cache := newMapCache()
	first := NewStatCache()
	loadTree(t, root, Options{Cache: cache, Stats: first}) // a.yaml is recent
	// Written again, to the same size; forge what a coarse file system
	// shows: the stat the Load took.
	real, err := filepath.EvalSymlinks(filepath.Join(root, "a.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rewrite(t, root, "a.yaml", svcYAML("ab"))
	e, ok := first.files[real]
	if !ok || e.trusted {
		t.Fatalf("memo of a.yaml: %+v, %v; want an untrusted one", e, ok)
	}
	e.st = lstat(real)
	first.files[real] = e
	second := nextRun(t, first)
	if _, ok := second.files[real]; ok {
		t.Fatal("a.yaml recorded though recent")
	}
	reads := countReads(t)
	tr := loadTree(t, root, Options{Cache: cache, Stats: second})
	if reads.Load() != 1 {
		t.Errorf("read %d files, want a.yaml alone", reads.Load())
	}
	if names := strings.Join(objectNames(tr), ","); !strings.Contains(names, "/ab,") {
		t.Errorf("objects %s, want the second write's Service ab", names)
	}
	wantSame(t, tr, second)
}

// TestStatRecordsRandomEdits edits a tree at random between runs, each run
// starting from the records of the one before (as CLI runs with a disk
// cache do): each Load equals a fresh one, and once the tree is left alone
// (and old), a run reads nothing.
func TestStatRecordsRandomEdits(t *testing.T) {
	needMemo(t)
	setMargin(t, testMargin)
	root := memoTree(t)
	cache := newMapCache()
	stats := NewStatCache()
	loadTree(t, root, Options{Cache: cache, Stats: stats})
	rng := rand.New(rand.NewPCG(3, 4))
	names := []string{"a.yaml", "b.yaml", "sub/c.yaml", "sub/d.yaml", "p/x.cue", "p/y.cue"}
	content := func(name string, n int) string {
		if strings.HasSuffix(name, ".cue") {
			return fmt.Sprintf("package p\n\n%s: {apiVersion: \"v1\", kind: \"Service\", metadata: name: \"c%02d\", spec: ports: [{port: 80}]}\n",
				strings.TrimSuffix(filepath.Base(name), ".cue"), n)
		}
		return svcYAML(fmt.Sprintf("s%02d", n)) // the same size for every n
	}
	for step := range 60 {
		stats = nextRun(t, stats)
		for range 1 + rng.IntN(2) {
			name := names[rng.IntN(len(names))]
			p := filepath.Join(root, name)
			switch rng.IntN(4) {
			case 0:
				if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
			case 1: // atomic save
				rewrite(t, root, name+".tmp", content(name, rng.IntN(100)))
				mustRename(t, p+".tmp", p)
			default: // in place, the mtime set back when it existed (touch -d)
				before, statErr := os.Stat(p)
				rewrite(t, root, name, content(name, rng.IntN(100)))
				if statErr == nil {
					if err := os.Chtimes(p, before.ModTime(), before.ModTime()); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		if step%3 == 0 {
			settle() // some records trusted, some not
		}
		tr := loadTree(t, root, Options{Cache: cache, Stats: stats})
		wantSame(t, tr, stats)
	}
	settle()
	stats = nextRun(t, stats)
	loadTree(t, root, Options{Cache: cache, Stats: stats})
	reads := countReads(t)
	tr := loadTree(t, root, Options{Cache: cache, Stats: nextRun(t, stats)})
	if reads.Load() != 0 {
		t.Errorf("tree left alone: read %d files, want none", reads.Load())
	}
	wantSame(t, tr, nil)
}

// TestStatRecordsTimes: Records holds a file once its times are older
// than the start of the Load that read it by racyMargin, not before.
func TestStatRecordsTimes(t *testing.T) {
	needMemo(t)
	setMargin(t, time.Hour)
	root := memoTree(t)
	stats := NewStatCache()
	loadTree(t, root, Options{Cache: newMapCache(), Stats: stats})
	if recs := stats.Records(); len(recs) != 0 {
		t.Errorf("%d records of files younger than racyMargin, want none", len(recs))
	}
}

// TestStatRecordsChanged: Changed tells a Load that changed the records
// from one that read only files it could not record (one dated in the
// future here), and from one that read none.
func TestStatRecordsChanged(t *testing.T) {
	needMemo(t)
	setMargin(t, testMargin)
	root := memoTree(t)
	future := filepath.Join(root, "b.yaml")
	if tm := time.Now().Add(time.Hour); os.Chtimes(future, tm, tm) != nil {
		t.Fatal("cannot date b.yaml in the future")
	}
	settle()
	cache := newMapCache()
	stats := NewStatCache()
	loadTree(t, root, Options{Cache: cache, Stats: stats})
	for i, tc := range []struct {
		change  func()
		changed bool
	}{
		{func() {}, false},
		{func() {}, false},
		{func() {
			if err := os.Remove(filepath.Join(root, "sub/c.yaml")); err != nil {
				t.Fatal(err)
			}
		}, true},
		{func() {}, false},
		{func() { rewrite(t, root, "a.yaml", svcYAML("ab")) }, true}, // recorded again once old
		{settle, true},
		{func() {}, false},
	} {
		stats = nextRun(t, stats)
		tc.change()
		reads := countReads(t)
		tr := loadTree(t, root, Options{Cache: cache, Stats: stats})
		if stats.Changed() != tc.changed {
			t.Errorf("run %d: Changed %v, want %v (read %d files)", i+1, stats.Changed(), tc.changed, reads.Load())
		}
		if reads.Load() < 1 {
			t.Errorf("run %d: b.yaml not read", i+1)
		}
		wantSame(t, tr, stats)
	}
}
