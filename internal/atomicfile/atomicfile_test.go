package atomicfile

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// entries lists dir's names, sorted.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestWriteFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		old  string // "" for none
		perm fs.FileMode
	}{
		{name: "new file", old: "", perm: 0o644},
		{name: "replaces", old: "old content", perm: 0o600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			name := filepath.Join(dir, "f.json")
			if tc.old != "" {
				if err := os.WriteFile(name, []byte(tc.old), 0o666); err != nil {
					t.Fatal(err)
				}
			}
			if err := WriteFile(name, []byte("new"), tc.perm); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(name)
			if err != nil || string(b) != "new" {
				t.Fatalf("content %q, %v; want \"new\"", b, err)
			}
			fi, err := os.Stat(name)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != tc.perm {
				t.Errorf("mode %v, want %v", fi.Mode().Perm(), tc.perm)
			}
			if got := entries(t, dir); !slices.Equal(got, []string{"f.json"}) {
				t.Errorf("dir holds %q, want only f.json", got)
			}
		})
	}
}

func TestWriteFileMissingDir(t *testing.T) {
	dir := t.TempDir()
	if err := WriteFile(filepath.Join(dir, "no", "f"), []byte("x"), 0o644); err == nil {
		t.Fatal("WriteFile into a missing directory succeeded")
	}
	if got := entries(t, dir); len(got) != 0 {
		t.Errorf("dir holds %q, want nothing", got)
	}
}

// TestFileSteps: after Finish the name still holds the old content and the
// temporary file the new; Place swaps them; Abort leaves the old.
func TestFileSteps(t *testing.T) {
	for _, tc := range []struct {
		name  string
		abort bool
		want  string
	}{
		{name: "place", abort: false, want: "new"},
		{name: "abort", abort: true, want: "old"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			name := filepath.Join(dir, "zone")
			if err := os.WriteFile(name, []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := Create(name, ".tmp-zone-", 0o640)
			if err != nil {
				t.Fatal(err)
			}
			if base := filepath.Base(f.TempName()); !strings.HasPrefix(base, ".tmp-zone-") {
				t.Errorf("temporary file %s lacks the prefix .tmp-zone-", base)
			}
			if _, err := f.Write([]byte("new")); err != nil {
				t.Fatal(err)
			}
			if err := f.Finish(); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(name); string(b) != "old" {
				t.Errorf("after Finish the name holds %q, want \"old\"", b)
			}
			if b, _ := os.ReadFile(f.TempName()); string(b) != "new" {
				t.Errorf("after Finish the temporary file holds %q, want \"new\"", b)
			}
			if tc.abort {
				f.Abort()
			} else if err := f.Place(); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(name); string(b) != tc.want {
				t.Errorf("name holds %q, want %q", b, tc.want)
			}
			if got := entries(t, dir); !slices.Equal(got, []string{"zone"}) {
				t.Errorf("dir holds %q, want only zone", got)
			}
		})
	}
}

// TestPlaceRenameFails: a rename that fails (the name is a non-empty
// directory) returns the error and removes the temporary file.
func TestPlaceRenameFails(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "d")
	if err := os.MkdirAll(filepath.Join(name, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := Create(name, ".d.tmp-", 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Commit(); err == nil {
		t.Fatal("Commit over a non-empty directory succeeded")
	}
	if got := entries(t, dir); !slices.Equal(got, []string{"d"}) {
		t.Errorf("dir holds %q, want only d", got)
	}
}
