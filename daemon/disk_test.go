package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"netspec.dev/netspec/applier"
	"netspec.dev/netspec/applier/state"
	"netspec.dev/netspec/internal/gen/gentree"
)

// fileStamp tells whether a file was written: a whole-file write renames
// a new file (a new inode) over it; an append grows it.
type fileStamp struct {
	ino  uint64
	size int64
}

// stamps are the state dir's files, by relative path.
func (r *running) stamps(t *testing.T) map[string]fileStamp {
	t.Helper()
	m := map[string]fileStamp{}
	filepath.WalkDir(r.stateDir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(r.stateDir, p)
		m[filepath.ToSlash(rel)] = fileStamp{ino: fi.Sys().(*syscall.Stat_t).Ino, size: fi.Size()}
		return nil
	})
	return m
}

// written lists the files written (new inode), grown (appended) or
// removed between two stamps, and those added.
func written(before, after map[string]fileStamp) (rewritten, appended, added, removed []string) {
	for p, a := range after {
		b, ok := before[p]
		switch {
		case !ok:
			added = append(added, p)
		case a.ino != b.ino:
			rewritten = append(rewritten, p)
		case a.size != b.size:
			appended = append(appended, p)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			removed = append(removed, p)
		}
	}
	slices.Sort(rewritten)
	slices.Sort(appended)
	slices.Sort(added)
	slices.Sort(removed)
	return
}

// TestDiskWrites: a one-Service edit makes the watcher write the state
// dir's files whose content changed and append one record to plan.log,
// never plan.json; the record read back by a fresh node (as after a
// restart) is the plan the watcher applied; a torn record (a crash while
// appending) is not counted, and the watcher, finding the log not as it
// left it, writes the whole plan again. No root: --dataplane none.
func TestDiskWrites(t *testing.T) {
	cfg := gentree.Config{Services: 40, PodsPerService: 2, Namespaces: 2, Seed: 1}
	tree := filepath.Join(t.TempDir(), "tree")
	if err := gentree.Write(tree, cfg); err != nil {
		t.Fatal(err)
	}
	ed := newEditor(t, tree, cfg)
	r := start(t, tree, Options{Dataplane: DataplaneNone})
	r.idle(t)
	logFile := filepath.Join(r.stateDir, state.LogFile)

	// edit saves service i with from → to, and waits until the watcher has
	// recorded it (the record is the last thing a reload writes).
	edit := func(i int, from, to string) (rewritten, appended, added, removed []string) {
		t.Helper()
		before := r.stamps(t)
		rename, _ := ed.toggle(t, i, from, to)
		if err := rename(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the reload's record", func() (bool, string) {
			now := r.stamps(t)
			return now[state.LogFile] != before[state.LogFile] || now[state.PlanFile] != before[state.PlanFile], ""
		})
		r.idle(t)
		return written(before, r.stamps(t))
	}
	// recorded checks that a fresh node reads back the plan the watcher
	// applied last.
	recorded := func(step string) {
		t.Helper()
		r.idle(t)
		n, err := applier.Open(applier.Options{StateDir: r.stateDir, NoDataplane: true, NoCreateStateDir: true})
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		defer n.Close()
		res, err := n.Plan(r.good)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if res.Last == nil || !res.Last.Equal(r.good) || !res.Files.Empty() {
			t.Errorf("%s: the state dir does not record the plan the watcher applied: files %+v", step, res.Files)
		}
	}
	recorded("first sync")

	// Endpoints only: no zone or env file changes.
	rewritten, appended, added, removed := edit(ed.service(0), "containerPort: 8080", "containerPort: 8081")
	if len(rewritten)+len(removed) > 0 || !slices.Equal(added, []string{state.LogFile}) || len(appended) > 0 {
		t.Errorf("an endpoint change: rewritten %v, appended %v, added %v, removed %v; want plan.log added alone", rewritten, appended, added, removed)
	}
	recorded("endpoint change")
	rewritten, appended, added, removed = edit(ed.service(1), "containerPort: 8080", "containerPort: 8081")
	if len(rewritten)+len(added)+len(removed) > 0 || !slices.Equal(appended, []string{state.LogFile}) {
		t.Errorf("a second endpoint change: rewritten %v, appended %v, added %v, removed %v; want plan.log appended alone", rewritten, appended, added, removed)
	}
	recorded("second endpoint change")

	// The Service's port: its SRV record and its namespace's variables.
	svc := ed.service(2)
	ns := filepath.Dir(gentree.ServiceFile(cfg, svc))
	rewritten, appended, added, removed = edit(svc, "    port: 80\n", "    port: 81\n")
	if want := []string{"dns/cluster.local.zone", "env/" + ns + ".env"}; !slices.Equal(rewritten, want) ||
		!slices.Equal(appended, []string{state.LogFile}) || len(added)+len(removed) > 0 {
		t.Errorf("a service port change: rewritten %v, appended %v, added %v, removed %v; want %v rewritten and plan.log appended", rewritten, appended, added, removed, want)
	}
	recorded("service port change")

	// A torn record, as a crash while appending leaves: a fresh node reads
	// the record before it, and the watcher writes the whole plan next.
	log, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(logFile, append(slices.Clone(log), "delta 4 100 0000\n{\"services"...), 0o644); err != nil {
		t.Fatal(err)
	}
	recorded("a torn record after the last")
	rewritten, _, _, removed = edit(ed.service(3), "containerPort: 8080", "containerPort: 8081")
	if !slices.Contains(rewritten, state.PlanFile) || !slices.Contains(removed, state.LogFile) {
		t.Errorf("after a torn record: rewritten %v, removed %v; want plan.json written whole and plan.log removed", rewritten, removed)
	}
	recorded("after the torn record")
}
