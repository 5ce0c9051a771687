package cache

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"netspec.dev/netspec/internal/diag"
	"netspec.dev/netspec/schema"
)

// schemaRacyMargin is schema's racyMargin: a file is recorded in the stat
// index only when its times are older than this before the Load.
const schemaRacyMargin = 2 * time.Second

// waitOld waits until the times of the files below root are older than
// schemaRacyMargin (with 50 ms for the lag of file system timestamps),
// but for those dated in the future.
func waitOld(t *testing.T, root string) {
	t.Helper()
	now := time.Now()
	var newest time.Time
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		for _, ts := range []syscall.Timespec{st.Mtim, st.Ctim} {
			if tm := time.Unix(ts.Unix()); tm.After(newest) && !tm.After(now.Add(time.Second)) {
				newest = tm
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(newest.Add(schemaRacyMargin + 50*time.Millisecond)))
}

// run is one CLI run with the disk cache: open the pack, Load with its
// stat index, save.
func run(t *testing.T, dir, root string) (*schema.Tree, *Disk) {
	t.Helper()
	d := openDisk(t, dir, root)
	tr, err := schema.Load(root, schema.Options{Cache: d, Stats: d.Stats()})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Save(); err != nil {
		t.Fatal(err)
	}
	return tr, d
}

// wantFresh checks that tr equals a Load without cache.
func wantFresh(t *testing.T, tr *schema.Tree) {
	t.Helper()
	fresh, err := schema.Load(tr.Root, schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fresh.Objects, tr.Objects); diff != "" {
		t.Errorf("objects differ from a fresh Load (-fresh +got):\n%s", diff)
	}
	if diff := cmp.Diff(fresh.Ignored, tr.Ignored); diff != "" {
		t.Errorf("ignored objects differ from a fresh Load (-fresh +got):\n%s", diff)
	}
	diags := func(tr *schema.Tree) []string {
		var s []string
		for _, d := range tr.Diags {
			s = append(s, d.String())
		}
		return s
	}
	if diff := cmp.Diff(diags(fresh), diags(tr)); diff != "" {
		t.Errorf("diagnostics differ from a fresh Load (-fresh +got):\n%s", diff)
	}
	if fresh.Files != tr.Files {
		t.Errorf("%d files, a fresh Load %d", tr.Files, fresh.Files)
	}
}

// indexed returns the real paths in the pack's stat index.
func indexed(t *testing.T, d *Disk) []string {
	t.Helper()
	data, err := os.ReadFile(d.Path())
	if err != nil {
		t.Fatal(err)
	}
	_, _, recs, why := parsePack(data, d.salt)
	if why != "" {
		t.Fatalf("pack: %s", why)
	}
	var paths []string
	for _, r := range recs {
		paths = append(paths, r.Path)
	}
	return paths
}

// TestDiskStatIndex: a run after one that saw the files old enough reads
// none of them, and writes no pack; a file rewritten to the same size with
// its mtime set back (touch -d) is read, and read again by the next run,
// because its change was too recent to record. A file dated in the future
// is never recorded, so read by every run, which writes no pack for it.
func TestDiskStatIndex(t *testing.T) {
	dir := t.TempDir()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	svc := func(name string) string {
		return "apiVersion: v1\nkind: Service\nmetadata:\n  name: " + name + "\nspec:\n  ports:\n  - port: 80\n"
	}
	files := map[string]string{
		"a.yaml":     svc("aa"),
		"b.yaml":     svc("bb"),
		"sub/c.yaml": svc("cc") + "  typo: 1\n",
		"p/x.cue":    "package p\n\nx: {apiVersion: \"v1\", kind: \"Service\", metadata: name: \"px\", spec: ports: [{port: 80}]}\n",
		"p/y.cue":    "package p\n\ny: {apiVersion: \"v1\", kind: \"Pod\", metadata: name: \"py\", spec: {}}\n",
	}
	for name, data := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	future := filepath.Join(root, "future.yaml")
	if err := os.WriteFile(future, []byte(svc("ff")), 0o644); err != nil {
		t.Fatal(err)
	}
	if tm := time.Now().Add(time.Hour); os.Chtimes(future, tm, tm) != nil {
		t.Fatal("cannot date future.yaml in the future")
	}

	// A run of recent files reads them all and records none.
	tr, d := run(t, dir, root)
	if tr.Unread != 0 {
		t.Fatalf("first run: Unread %d, want 0", tr.Unread)
	}
	if got := indexed(t, d); len(got) != 0 {
		t.Fatalf("recent files recorded: %v", got)
	}
	waitOld(t, root)
	tr, d = run(t, dir, root)
	if tr.Unread != 0 {
		t.Errorf("second run: Unread %d, want 0 (none recorded)", tr.Unread)
	}
	var want []string
	for name := range files {
		want = append(want, filepath.Join(root, name))
	}
	slices.Sort(want)
	if got := indexed(t, d); !slices.Equal(got, want) {
		t.Fatalf("stat index %v, want %v", got, want)
	}

	// Unchanged: nothing read, the pack not written again.
	before, err := os.Stat(d.Path())
	if err != nil {
		t.Fatal(err)
	}
	tr, _ = run(t, dir, root)
	if tr.Unread != tr.Files-1 || tr.Cached != 5 {
		t.Errorf("unchanged tree: Unread %d of %d files, Cached %d of 5 units; want all but future.yaml unread, all cached", tr.Unread, tr.Files, tr.Cached)
	}
	wantFresh(t, tr)
	if after, err := os.Stat(d.Path()); err != nil || !os.SameFile(before, after) {
		t.Errorf("a run that changed nothing wrote the pack (%v)", err)
	}

	// b.yaml rewritten to the same size, its mtime set back.
	b := filepath.Join(root, "b.yaml")
	old, err := os.Stat(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, []byte(svc("bx")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(b, old.ModTime(), old.ModTime()); err != nil {
		t.Fatal(err)
	}
	if now, err := os.Stat(b); err != nil || now.Size() != old.Size() || !now.ModTime().Equal(old.ModTime()) {
		t.Fatalf("b.yaml not rewritten to the same size and mtime (%v)", err)
	}
	for i := range 2 {
		tr, d = run(t, dir, root)
		if tr.Unread != tr.Files-2 {
			t.Errorf("run %d after b.yaml changed: Unread %d of %d, want all but b.yaml and future.yaml", i+1, tr.Unread, tr.Files)
		}
		if !slices.ContainsFunc(tr.Objects, func(o *schema.Object) bool { return o.Meta().Name == "bx" }) {
			t.Errorf("run %d after b.yaml changed: no Service bx", i+1)
		}
		wantFresh(t, tr)
		if got := indexed(t, d); slices.Contains(got, b) || len(got) != len(want)-1 {
			t.Errorf("run %d after b.yaml changed: stat index %v, want all but b.yaml", i+1, got)
		}
	}
	// Once it is old, it is recorded again.
	waitOld(t, root)
	run(t, dir, root)
	tr, _ = run(t, dir, root)
	if tr.Unread != tr.Files-1 {
		t.Errorf("b.yaml old again: Unread %d of %d, want all but future.yaml", tr.Unread, tr.Files)
	}
	wantFresh(t, tr)

	// --max-file-size smaller than a recorded file: it is read, and is an error.
	d = openDisk(t, dir, root)
	tr, err = schema.Load(root, schema.Options{Cache: d, Stats: d.Stats(), MaxFileSize: int64(len(files["sub/c.yaml"]) - 1)})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(tr.Diags, func(d diag.Diagnostic) bool {
		return strings.HasPrefix(d.String(), "sub/c.yaml: file is larger than")
	}) {
		t.Errorf("smaller limit: diagnostics %v, want sub/c.yaml too large", tr.Diags)
	}
}
