package applier_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"netspec.dev/netspec/applier"
	"netspec.dev/netspec/applier/nft"
	"netspec.dev/netspec/plan"
)

// dirState is everything a state dir holds: each directory (as "d/"),
// regular file (its content) and other entry, by relative slash path.
func dirState(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		switch {
		case rel == ".":
		case e.IsDir():
			m[rel+"/"] = ""
		case e.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			m[rel] = string(b)
		default:
			m[rel] = e.Type().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// splitTemps separates the state dir's temporary files from the rest,
// each under the name it is written for (".netspec-tmp-NAME-RANDOM" in
// NAME's directory).
func splitTemps(t *testing.T, st map[string]string) (temps, rest map[string]string) {
	t.Helper()
	temps, rest = map[string]string{}, map[string]string{}
	for p, c := range st {
		dir, base := filepath.Split(p)
		name, ok := strings.CutPrefix(base, ".netspec-tmp-")
		if !ok {
			rest[p] = c
			continue
		}
		i := strings.LastIndexByte(name, '-')
		if i < 0 {
			t.Fatalf("temporary file %s: no random suffix", p)
		}
		temps[dir+name[:i]] = c
	}
	return temps, rest
}

// waitPrepared, called while the kernel takes a batch, waits for n's
// state dir write prepared beside it (SetPrepared's function sends its
// error to ready) and returns what the dir then holds; without such a
// write, an error and what the dir holds.
func waitPrepared(t *testing.T, n *applier.Node, ready <-chan error, dir string) map[string]string {
	t.Helper()
	if !applier.PreparingBeside(n) {
		t.Error("the batch was sent, but the state dir's write was not started beside it")
	} else if err := <-ready; err != nil {
		t.Errorf("preparing the state dir: %v", err)
	}
	return dirState(t, dir)
}

// besidePlans are three plans of one node: p1, p2 with more Services in
// more namespaces (new zone records and env files), and p1 again.
func besidePlans(t *testing.T) []*plan.Plan {
	tree := t.TempDir()
	copyDir(t, filepath.Join("testdata", "traffic", "common"), tree)
	copyDir(t, filepath.Join("testdata", "traffic", "cluster-ip"), filepath.Join(tree, "cluster-ip"))
	_, p1 := compileTree(t, tree)
	copyDir(t, filepath.Join("testdata", "traffic", "udp"), filepath.Join(tree, "udp"))
	_, p2 := compileTree(t, tree)
	return []*plan.Plan{p1, p2, p1}
}

// fakeNode opens a Node over an nft Fake with a state dir of its own,
// closed when the test ends. *during, when set, is called while the Fake
// takes a batch (the Node's Options.KernelBusy, called once the state
// dir's write has been started beside the batch).
func fakeNode(t *testing.T) (fake *nft.Fake, dir string, n *applier.Node, during *func()) {
	t.Helper()
	fake, dir, during = nft.NewFake(), t.TempDir(), new(func())
	n, err := applier.Open(applier.Options{StateDir: dir, NFTables: fake, KernelBusy: func() {
		if *during != nil {
			(*during)()
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return fake, dir, n, during
}

// TestStateDirBesideBatch: the state dir's files are written to
// temporary files while the kernel takes the nftables batch, their names
// untouched until the kernel holds the plan; then the dir holds exactly
// what a node without a kernel batch writes (the files written once the
// kernel step is over, as before), by Apply and by Update, whether
// plan.json is written whole or the change appended to plan.log.
func TestStateDirBesideBatch(t *testing.T) {
	plans := besidePlans(t)
	for _, update := range []bool{false, true} {
		name := "apply"
		if update {
			name = "update"
		}
		t.Run(name, func(t *testing.T) {
			_, dir, n, during := fakeNode(t)
			// The reference: the same plans, by a node whose state
			// dir is written after its (missing) kernel step.
			refDir := t.TempDir()
			ref, err := applier.Open(applier.Options{StateDir: refDir, NoDataplane: true})
			if err != nil {
				t.Fatal(err)
			}
			defer ref.Close()

			ready := make(chan error, 1)
			applier.SetPrepared(n, func(err error) { ready <- err })
			var before, inBatch map[string]string
			*during = func() {
				// The batch is in the kernel: wait for the state
				// dir's write to be prepared, and look.
				inBatch = waitPrepared(t, n, ready, dir)
			}
			for i, p := range plans {
				before, inBatch = dirState(t, dir), nil
				apply := n.ApplyStaged
				if update {
					apply = n.UpdateStaged
				}
				r, err := apply(p, nil)
				if err != nil {
					t.Fatalf("plan %d: %v", i, err)
				}
				if _, err := ref.ApplyStaged(p, nil); err != nil {
					t.Fatalf("plan %d, reference: %v", i, err)
				}
				if inBatch == nil {
					t.Fatalf("plan %d: no batch was sent", i)
				}
				temps, rest := splitTemps(t, inBatch)
				// Nothing a reader sees changed during the batch,
				// but for a directory made for new files.
				for p := range rest {
					if strings.HasSuffix(p, "/") {
						delete(rest, p)
					}
				}
				want := map[string]string{}
				for p, c := range before {
					if !strings.HasSuffix(p, "/") {
						want[p] = c
					}
				}
				if diff := cmp.Diff(want, rest); diff != "" {
					t.Errorf("plan %d: during the batch, the dir's files changed (-before +during):\n%s", i, diff)
				}
				after := dirState(t, dir)
				// Every file written was prepared during the batch,
				// with the content it has now (plan.log, a record
				// appended, is not prepared).
				written := slices.Concat(r.Files.Added, r.Files.Changed)
				if len(written) == 0 {
					t.Fatalf("plan %d: no file written", i)
				}
				for _, p := range written {
					c, ok := temps[p]
					switch {
					case !ok && p == "plan.json" && after["plan.log"] != before["plan.log"]:
					case !ok:
						t.Errorf("plan %d: %s was written but not prepared during the batch", i, p)
					case c != after[p]:
						t.Errorf("plan %d: %s: prepared %q, then holds %q", i, p, c, after[p])
					}
				}
				for p := range temps {
					if !slices.Contains(written, p) {
						t.Errorf("plan %d: %s prepared but not written", i, p)
					}
				}
				if diff := cmp.Diff(dirState(t, refDir), after); diff != "" {
					t.Errorf("plan %d: the dir differs from the reference (-reference +got):\n%s", i, diff)
				}
			}
		})
	}
}

// TestStateDirKernelRefuses: when the kernel refuses the batch, the
// files prepared meanwhile are removed and the state dir is byte for byte
// as it was: on a first apply (an empty dir stays empty: not even the
// directories made for the files stay) and on a later one (which would
// have added, changed and removed files).
func TestStateDirKernelRefuses(t *testing.T) {
	plans := besidePlans(t)
	for _, first := range []bool{true, false} {
		name := "later"
		if first {
			name = "first"
		}
		t.Run(name, func(t *testing.T) {
			fake, dir, n, during := fakeNode(t)
			p := plans[0]
			if !first {
				if _, err := n.ApplyStaged(plans[0], nil); err != nil {
					t.Fatal(err)
				}
				p = plans[1]
			}
			before := dirState(t, dir)
			var temps map[string]string
			ready := make(chan error, 1)
			applier.SetPrepared(n, func(err error) { ready <- err })
			*during = func() {
				temps, _ = splitTemps(t, waitPrepared(t, n, ready, dir))
			}
			fake.FailNext()
			if _, err := n.ApplyStaged(p, nil); !errors.Is(err, nft.ErrFakeFailure) {
				t.Fatalf("Apply = %v, want the kernel's refusal", err)
			}
			if len(temps) == 0 {
				t.Fatal("no file was prepared during the batch: the test proves nothing")
			}
			if diff := cmp.Diff(before, dirState(t, dir)); diff != "" {
				t.Errorf("after the kernel refused, the dir changed (-before +after):\n%s", diff)
			}
			// The next apply, accepted, writes the plan.
			*during = nil
			applier.SetPrepared(n, nil)
			if _, err := n.ApplyStaged(p, nil); err != nil {
				t.Fatal(err)
			}
			temps, rest := splitTemps(t, dirState(t, dir))
			if len(temps) != 0 {
				t.Errorf("temporary files left: %v", temps)
			}
			if _, ok := rest["plan.json"]; !ok {
				t.Error("no plan.json after the accepted apply")
			}
		})
	}
}

// TestApplyBeside: the work given to ApplyBeside runs once, while the
// kernel takes the batch when one is sent, after the apply when only the
// files change (a node without data plane), and not at all when nothing
// changes; ApplyBeside returns after it.
func TestApplyBeside(t *testing.T) {
	plans := besidePlans(t)
	for _, tc := range []struct {
		name        string
		noDataplane bool
		plans       []*plan.Plan // applied in turn; the work is looked at on the last
		wantRun     bool
		wantInBatch bool // the work had started when the batch was sent
	}{
		{name: "first install", plans: plans[:1], wantRun: true, wantInBatch: true},
		{name: "change", plans: plans[:2], wantRun: true, wantInBatch: true},
		{name: "no change", plans: []*plan.Plan{plans[0], plans[0]}, wantRun: false},
		{name: "files only", noDataplane: true, plans: plans[:2], wantRun: true, wantInBatch: false},
		{name: "files only, no change", noDataplane: true, plans: []*plan.Plan{plans[0], plans[0]}, wantRun: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			started := make(chan struct{})  // closed by the work
			inBatch, beside := false, false // beside: in ApplyBeside
			opts := applier.Options{StateDir: t.TempDir(), NoDataplane: tc.noDataplane}
			if !tc.noDataplane {
				opts.NFTables = nft.NewFake()
				// Called during the batch: the work, started in
				// a goroutine of its own, must start while the
				// kernel is busy.
				opts.KernelBusy = func() {
					if !beside {
						return
					}
					select {
					case <-started:
						inBatch = true
					case <-time.After(10 * time.Second):
					}
				}
			}
			n, err := applier.Open(opts)
			if err != nil {
				t.Fatal(err)
			}
			defer n.Close()
			for i, p := range tc.plans[:len(tc.plans)-1] {
				if _, err := n.ApplyStaged(p, nil); err != nil {
					t.Fatalf("plan %d: %v", i, err)
				}
			}
			runs := 0
			beside = true
			r, err := n.ApplyBeside(tc.plans[len(tc.plans)-1], func() {
				if runs++; runs == 1 {
					close(started)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 1, false: 0}[tc.wantRun]; runs != want {
				t.Errorf("the work ran %d times, want %d (changes: %v)", runs, want, !r.Empty())
			}
			if inBatch != tc.wantInBatch {
				t.Errorf("the work had started when the batch was sent: %v, want %v", inBatch, tc.wantInBatch)
			}
		})
	}
}
