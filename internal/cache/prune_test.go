package cache

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// packName is the name of the i-th pack of a test directory.
func packName(i int) string { return strings.Repeat("0", 31) + string(rune('a'+i)) + ".pack" }

func TestPrune(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	type file struct {
		name string
		age  time.Duration
		size int
	}
	for _, tc := range []struct {
		name        string
		files       []file
		keep        string
		maxAge      time.Duration
		maxSize     int64
		wantRemoved []string
	}{
		{
			name:        "within bounds",
			files:       []file{{name: packName(0), age: day, size: 10}, {name: packName(1), age: 2 * day, size: 10}},
			maxAge:      30 * day,
			maxSize:     100,
			wantRemoved: nil,
		},
		{
			name:        "not used for maxAge",
			files:       []file{{name: packName(0), age: 31 * day, size: 10}, {name: packName(1), age: 29 * day, size: 10}},
			maxAge:      30 * day,
			maxSize:     100,
			wantRemoved: []string{packName(0)},
		},
		{
			name: "over maxSize: least recently used first",
			files: []file{
				{name: packName(0), age: 3 * day, size: 40},
				{name: packName(1), age: 1 * day, size: 40},
				{name: packName(2), age: 2 * day, size: 40},
			},
			maxAge:      30 * day,
			maxSize:     80,
			wantRemoved: []string{packName(0)},
		},
		{
			name: "the pack in use stays, however old and big",
			files: []file{
				{name: packName(0), age: 40 * day, size: 200},
				{name: packName(1), age: 1 * day, size: 10},
			},
			keep:        packName(0),
			maxAge:      30 * day,
			maxSize:     100,
			wantRemoved: []string{packName(1)},
		},
		{
			name: "old temporary files go, a Save under way's stays",
			files: []file{
				{name: "." + packName(0) + ".tmp-123", age: 2 * time.Hour, size: 10},
				{name: "." + packName(1) + ".tmp-456", age: time.Minute, size: 10},
			},
			maxAge:      30 * day,
			maxSize:     100,
			wantRemoved: []string{"." + packName(0) + ".tmp-123"},
		},
		{
			name: "other files are not the cache's",
			files: []file{
				{name: "notes.txt", age: 400 * day, size: 1000},
				{name: "0123.pack", age: 400 * day, size: 1000},
				{name: strings.Repeat("G", 32) + ".pack", age: 400 * day, size: 1000},
			},
			maxAge:      30 * day,
			maxSize:     10,
			wantRemoved: nil,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range tc.files {
				name := filepath.Join(dir, f.name)
				if err := os.WriteFile(name, make([]byte, f.size), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Chtimes(name, now.Add(-f.age), now.Add(-f.age)); err != nil {
					t.Fatal(err)
				}
			}
			keep := ""
			if tc.keep != "" {
				keep = filepath.Join(dir, tc.keep)
			}
			removed, err := prune(dir, keep, now, tc.maxAge, tc.maxSize)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range removed {
				got = append(got, filepath.Base(r))
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.wantRemoved, got); diff != "" {
				t.Errorf("removed (-want +got):\n%s", diff)
			}
			for _, f := range tc.files {
				_, err := os.Stat(filepath.Join(dir, f.name))
				if gone := os.IsNotExist(err); gone != slices.Contains(tc.wantRemoved, f.name) {
					t.Errorf("%s: gone %v, err %v", f.name, gone, err)
				}
			}
		})
	}
}

func TestPruneMissingDir(t *testing.T) {
	removed, err := prune(filepath.Join(t.TempDir(), "none"), "", time.Now(), MaxAge, MaxSize)
	if err != nil || removed != nil {
		t.Fatalf("prune of a missing dir: %v, %v; want nothing", removed, err)
	}
}

// A run that uses its pack without rewriting it marks it used, so that
// pruning keeps the packs of trees in use and removes the others; what
// stays gives the results stored, and a pruned tree starts cold.
func TestDiskPruneKeepsUsed(t *testing.T) {
	dir := t.TempDir()
	rootA, rootB := t.TempDir(), t.TempDir()
	for _, root := range []string{rootA, rootB} {
		d := openDisk(t, dir, root)
		d.Put(key(1), sampleResult(1))
		if err := d.Save(); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-MaxAge - 24*time.Hour)
	a, b := openDisk(t, dir, rootA), openDisk(t, dir, rootB)
	for _, p := range []string{a.Path(), b.Path()} {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	// Tree A is validated again: a hit, nothing to rewrite.
	if _, ok := a.Get(key(1)); !ok {
		t.Fatal("miss")
	}
	if err := a.Save(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(a.Path()); err != nil || fi.ModTime().Before(time.Now().Add(-time.Minute)) {
		t.Fatalf("the pack used was not marked used: %v, %v", fi.ModTime(), err)
	}
	removed, err := a.Prune()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{b.Path()}, removed); diff != "" {
		t.Fatalf("removed (-want +got):\n%s", diff)
	}
	if got, ok := openDisk(t, dir, rootA).Get(key(1)); !ok || !cmp.Equal(sampleResult(1), got) {
		t.Fatalf("after pruning, tree A's entry: %v, hit %v; want it as stored", got, ok)
	}
	if d := openDisk(t, dir, rootB); d.Loaded != 0 || d.Ignored != "" {
		t.Fatalf("pruned tree B: Loaded %d, Ignored %q; want a cold start", d.Loaded, d.Ignored)
	}
}
