package applier_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"netspec.dev/netspec/applier"
)

// TestHandEditRepaired: a zone file changed by hand is written again by
// the next Update (a daemon's reload, with the files' memos) and by the
// next Apply (a full sync), even when the plan did not change.
func TestHandEditRepaired(t *testing.T) {
	tree := t.TempDir()
	copyDir(t, filepath.Join("testdata", "traffic", "common"), tree)
	copyDir(t, filepath.Join("testdata", "traffic", "cluster-ip"), filepath.Join(tree, "cluster-ip"))
	_, p := compileTree(t, tree)
	dir := t.TempDir()
	n, err := applier.Open(applier.Options{StateDir: dir, NoDataplane: true, Incremental: true})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if _, err := n.ApplyStaged(p, nil); err != nil {
		t.Fatal(err)
	}
	zone := filepath.Join(dir, "dns", "cluster.local.zone")
	want, err := os.ReadFile(zone)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name  string
		apply func() (*applier.Result, error)
	}{
		{"update", func() (*applier.Result, error) { return n.UpdateStaged(p, nil) }},
		{"apply", func() (*applier.Result, error) { return n.ApplyStaged(p, nil) }},
	} {
		if err := os.WriteFile(zone, append(slices.Clone(want), "by-hand 5 IN A 10.0.0.1\n"...), 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := step.apply()
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if !slices.Contains(r.Files.Changed, "dns/cluster.local.zone") {
			t.Errorf("%s: changed files %v, want the zone edited by hand", step.name, r.Files.Changed)
		}
		got, err := os.ReadFile(zone)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(got), "by-hand") {
			t.Errorf("%s: the line added by hand is still there:\n%s", step.name, got)
		}
		if pl, err := n.Plan(p); err != nil || !pl.Files.Empty() {
			t.Errorf("%s: then Plan finds %+v, %v; want nothing to do", step.name, pl.Files, err)
		}
		want = got // with the next serial
	}
}
