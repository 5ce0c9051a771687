package state

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestKnownRandomEdits applies random file sets to a dir whose files are
// also changed by hand between the steps (replaced, rewritten in place
// with another size or the same size and another mtime, removed), giving
// an unchanged file the ID it had, as a daemon does (render.FilesMemo). At every step the dir that remembers what it found
// must plan and apply what a fresh Dir plans for the same files, and
// leave the dir as a fresh Dir would find it: holding every file.
func TestKnownRandomEdits(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	path := t.TempDir()
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	// The files' times are always old enough to be remembered.
	d.now = func() time.Time { return time.Now().Add(time.Hour) }

	zone := func(v int) []byte {
		return fmt.Appendf(nil, "$ORIGIN x.\n@\t5\tIN\tSOA\tns.x. h.x. %d 7200 1800 86400 5\na\t5\tIN\tA\t10.0.0.%d\n", v+1, v)
	}
	paths := []string{"dns/a.zone", "dns/b.zone", "env/a.env", "env/b.env", "resolv/a.conf"}
	render := func(p string, v int) []byte {
		if filepath.Dir(p) == "dns" {
			return zone(v)
		}
		return fmt.Appendf(nil, "%s version %d\n", p, v)
	}
	files := map[string]File{}
	version := map[string]int{}
	var lastID uint64
	file := func(b []byte) File {
		lastID++
		return File{ID: lastID, Bytes: func() []byte { return b }}
	}
	full := fullOf("{}\n")
	remembered := 0
	for step := range 600 {
		// The next files: most as they were (the same ID), some
		// changed, equal with a new ID, added or dropped.
		next := maps.Clone(files)
		for range r.IntN(3) {
			p := paths[r.IntN(len(paths))]
			switch r.IntN(4) {
			case 0:
				version[p] = r.IntN(4)
				next[p] = file(render(p, version[p]))
			case 1:
				if f, ok := next[p]; ok {
					next[p] = file(f.Bytes())
				}
			case 2:
				delete(next, p)
			case 3:
				if _, ok := next[p]; !ok {
					next[p] = file(render(p, version[p]))
				}
			}
		}
		files = next
		// Changes by hand.
		for range r.IntN(2) {
			p := paths[r.IntN(len(paths))]
			abs := filepath.Join(path, p)
			if _, err := os.Stat(abs); err != nil {
				continue
			}
			switch r.IntN(4) {
			case 0: // replaced (a new inode), maybe with equal content
				old, _ := os.ReadFile(abs)
				if r.IntN(2) == 0 {
					old = append(old, "; by hand\n"...)
				}
				tmp := abs + ".hand"
				if err := os.WriteFile(tmp, old, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(tmp, abs); err != nil {
					t.Fatal(err)
				}
			case 1: // rewritten in place, another size
				old, _ := os.ReadFile(abs)
				if err := os.WriteFile(abs, append(old, "; by hand\n"...), 0o644); err != nil {
					t.Fatal(err)
				}
			case 2: // rewritten in place, the same size, another mtime
				old, _ := os.ReadFile(abs)
				fi, _ := os.Stat(abs)
				if len(old) > 1 {
					old[len(old)-2] ^= 1 // a digit stays a digit
				}
				if err := os.WriteFile(abs, old, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Chtimes(abs, fi.ModTime(), fi.ModTime().Add(-time.Minute)); err != nil {
					t.Fatal(err)
				}
			case 3:
				if err := os.Remove(abs); err != nil {
					t.Fatal(err)
				}
			}
		}

		for p, f := range files {
			if d.unchanged(p, f.ID) {
				remembered++
			}
		}
		fresh, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		want, err := fresh.PlanFiles(files)
		if err != nil {
			t.Fatal(err)
		}
		got, err := d.PlanFiles(files)
		if err != nil {
			t.Fatal(err)
		}
		if !equalChanges(got, want) {
			t.Fatalf("step %d: PlanFiles %+v, a fresh Dir's %+v", step, got, want)
		}
		done, err := d.ApplyRecord(files, nil, full)
		if err != nil {
			t.Fatal(err)
		}
		noRecord := func(s []string) []string { return slices.DeleteFunc(s, func(p string) bool { return p == PlanFile }) }
		done.Added, done.Changed = noRecord(done.Added), noRecord(done.Changed)
		if !equalChanges(done, want) {
			t.Fatalf("step %d: ApplyRecord %+v, a fresh Dir plans %+v", step, done, want)
		}
		fresh, _ = Open(path)
		if after, err := fresh.PlanFiles(files); err != nil || !after.Empty() {
			t.Fatalf("step %d: after ApplyRecord a fresh Dir plans %+v, %v", step, after, err)
		}
	}
	if remembered == 0 {
		t.Error("no file was ever taken as unchanged without reading it")
	}
}

func equalChanges(a, b Changes) bool {
	return slices.Equal(a.Added, b.Added) && slices.Equal(a.Changed, b.Changed) && slices.Equal(a.Removed, b.Removed)
}

// TestKnownRacyAndForget: a file whose times are recent is not remembered
// (a change in the same timestamp tick would keep its stat), a remembered
// file's bytes are not asked for, and Forget makes the next diff read
// every file.
func TestKnownRacyAndForget(t *testing.T) {
	d := openTemp(t)
	files := map[string]File{"env/a.env": {ID: 7, Bytes: func() []byte { return []byte("A=1\n") }}}
	for range 2 {
		if _, err := d.ApplyRecord(files, nil, fullOf("{}\n")); err != nil {
			t.Fatal(err)
		}
	}
	if len(d.known) != 0 {
		t.Errorf("a file written just now is remembered: %v", slices.Collect(maps.Keys(d.known)))
	}
	d.now = func() time.Time { return time.Now().Add(time.Hour) }
	if _, err := d.PlanFiles(files); err != nil {
		t.Fatal(err)
	}
	if !d.unchanged("env/a.env", 7) {
		t.Fatal("an old file found equal is not remembered")
	}
	asked := 0
	counted := map[string]File{"env/a.env": {ID: 7, Bytes: func() []byte { asked++; return []byte("A=1\n") }}}
	if ch, err := d.PlanFiles(counted); err != nil || !ch.Empty() || asked != 0 {
		t.Errorf("a remembered file: PlanFiles %+v, %v, its bytes asked for %d times; want no change, not asked", ch, err, asked)
	}
	if d.unchanged("env/a.env", 8) {
		t.Error("equal bytes of another ID taken as the same")
	}
	if d.unchanged("env/a.env", 0) {
		t.Error("ID 0 taken as the same")
	}
	d.Forget()
	if d.unchanged("env/a.env", 7) {
		t.Error("remembered after Forget")
	}
}
