package state

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// In these tests a plan is a string, and its delta is the whole new
// string: what the record holds is the last delta, or plan.json when the
// log has none.
func recorded(t *testing.T, d *Dir) string {
	t.Helper()
	base, deltas, err := d.LastPlan()
	if err != nil {
		t.Fatal(err)
	}
	if len(deltas) > 0 {
		return string(deltas[len(deltas)-1])
	}
	return string(base)
}

func fullOf(s string) func(io.Writer) error {
	return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
}

// state is a node's files and its plan.
type nodeState struct {
	files map[string]string
	plan  string
}

// states are successive states of a node, each one Service changed: the
// env file of one namespace, the zone at times, the plan always.
func states(n int) []nodeState {
	var out []nodeState
	for i := range n {
		files := map[string]string{
			"dns/cluster.local.zone": string(zone("cluster.local", 0, fmt.Sprintf("web\tA\t10.0.0.%d", i/3))),
			"env/a.env":              "A=1\n",
			"env/b.env":              fmt.Sprintf("B=%d\n", i),
		}
		if i%4 == 3 {
			delete(files, "env/a.env")
		}
		out = append(out, nodeState{files: files, plan: fmt.Sprintf("plan %d %s", i, strings.Repeat("x", 1000))})
	}
	return out
}

// applyState applies st to d by difference with prev ("" for none).
func applyState(d *Dir, prev string, st nodeState) (Changes, error) {
	var delta []byte
	if prev != "" && prev != st.plan {
		delta = []byte(st.plan)
	}
	return d.ApplyRecord(stateFiles(st.files), delta, fullOf(st.plan))
}

// TestApplyRecordWritesOnlyChanged counts what the state dir writes: a
// change writes the files whose content changed and appends one record,
// never plan.json again, until the log outgrows a quarter of it.
func TestApplyRecordWritesOnlyChanged(t *testing.T) {
	d := openTemp(t)
	sts := states(6)
	ch, err := applyState(d, "", sts[0])
	if err != nil {
		t.Fatal(err)
	}
	want := Changes{Added: []string{"dns/cluster.local.zone", "env/a.env", "env/b.env", "plan.json"}}
	if diff := cmp.Diff(want, ch, cmpChanges); diff != "" {
		t.Fatalf("first apply (-want +got):\n%s", diff)
	}
	if w := d.Written(); w.Files != 4 || w.Appends != 0 {
		t.Fatalf("first apply wrote %+v, want the 4 files", w)
	}
	planBefore, _ := os.Stat(filepath.Join(d.Path(), PlanFile))

	for i := 1; i < len(sts); i++ {
		before := d.Written()
		ch, err := applyState(d, sts[i-1].plan, sts[i])
		if err != nil {
			t.Fatal(err)
		}
		w := d.Written()
		var wantWritten []string
		for p, c := range sts[i].files {
			if sts[i-1].files[p] != c {
				wantWritten = append(wantWritten, p)
			}
		}
		files := w.Files - before.Files
		// The first record creates plan.log (a whole-file write).
		if i == 1 {
			files--
		}
		if files != len(wantWritten) {
			t.Errorf("step %d: %d files written, want %d (%v)", i, files, len(wantWritten), wantWritten)
		}
		if i > 1 && w.Appends-before.Appends != 1 {
			t.Errorf("step %d: %d records appended, want 1", i, w.Appends-before.Appends)
		}
		if !slices.Contains(ch.Changed, PlanFile) {
			t.Errorf("step %d: plan.json not reported changed: %+v", i, ch)
		}
		if got := recorded(t, d); got != sts[i].plan {
			t.Errorf("step %d: the record holds %.10q, want %.10q", i, got, sts[i].plan)
		}
		if diff := cmp.Diff(sts[i].files, withoutRecord(tree(t, d.Path()))); diff != "" {
			t.Errorf("step %d: files (-want +got):\n%s", i, diff)
		}
	}
	planAfter, _ := os.Stat(filepath.Join(d.Path(), PlanFile))
	if !os.SameFile(planBefore, planAfter) || !planBefore.ModTime().Equal(planAfter.ModTime()) {
		t.Error("plan.json was rewritten by a change")
	}

	// The same plan again: nothing written.
	before := d.Written()
	last := sts[len(sts)-1]
	if ch, err := applyState(d, last.plan, last); err != nil || !ch.Empty() {
		t.Fatalf("the same state again: %+v, %v", ch, err)
	}
	if d.Written() != before {
		t.Errorf("the same state again wrote %+v", d.Written())
	}
}

// withoutRecord is m without plan.json and plan.log, and with the zones'
// serials (which the dir rewrites) set to 0.
func withoutRecord(m map[string]string) map[string]string {
	delete(m, PlanFile)
	delete(m, LogFile)
	for p, c := range m {
		if strings.HasPrefix(p, "dns/") {
			if s, err := renderedSerial([]byte(c), ""); err == nil {
				m[p] = string(withSerial([]byte(c), s, 0))
			}
		}
	}
	return m
}

// TestApplyRecordCompacts: once the log would outgrow a quarter of
// plan.json (at least minLogLimit), the whole plan is written and the log
// removed; the record holds the plan all along.
func TestApplyRecordCompacts(t *testing.T) {
	d := openTemp(t)
	big := strings.Repeat("p", 4*minLogLimit) // a quarter: minLogLimit
	st := nodeState{files: map[string]string{"env/a.env": "A=1\n"}, plan: big + "0"}
	if _, err := applyState(d, "", st); err != nil {
		t.Fatal(err)
	}
	prev := st.plan
	compacted := 0
	for i := 1; i < 200; i++ {
		next := nodeState{files: st.files, plan: fmt.Sprintf("%s%d%s", big[:len(big)/2], i, strings.Repeat("d", 4000))}
		before := d.Written()
		if _, err := d.ApplyRecord(stateFiles(next.files), []byte(next.plan[len(next.plan)-5000:]), fullOf(next.plan)); err != nil {
			t.Fatal(err)
		}
		w := d.Written()
		if w.Files > before.Files && w.Bytes-before.Bytes >= int64(len(next.plan)) {
			compacted++
			if _, err := os.Stat(filepath.Join(d.Path(), LogFile)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("step %d: plan.json written whole, and plan.log stays: %v", i, err)
			}
			if got := recorded(t, d); got != next.plan {
				t.Fatalf("step %d: after compaction the record holds %.20q", i, got)
			}
		}
		fi, err := os.Stat(filepath.Join(d.Path(), LogFile))
		if err == nil && fi.Size() > minLogLimit {
			t.Fatalf("step %d: plan.log has %d bytes, over the limit %d", i, fi.Size(), minLogLimit)
		}
		prev = next.plan
	}
	_ = prev
	if compacted == 0 || compacted > 20 {
		t.Errorf("compacted %d times in 200 changes of about 5 KB with a limit of %d", compacted, minLogLimit)
	}
}

// TestApplyRecordAnotherWriter: when another process wrote the record
// (its own Dir), a Dir does not append to a log it did not leave so: it
// writes the whole plan.
func TestApplyRecordAnotherWriter(t *testing.T) {
	d := openTemp(t)
	sts := states(3)
	if _, err := applyState(d, "", sts[0]); err != nil {
		t.Fatal(err)
	}
	other, err := Open(d.Path())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := other.LastPlan(); err != nil {
		t.Fatal(err)
	}
	if _, err := applyState(other, sts[0].plan, sts[1]); err != nil {
		t.Fatal(err)
	}
	// d believes the dir holds sts[0]: its delta would be wrong.
	before := d.Written()
	if _, err := d.ApplyRecord(stateFiles(sts[2].files), []byte("a delta from sts[0]"), fullOf(sts[2].plan)); err != nil {
		t.Fatal(err)
	}
	if got := recorded(t, d); got != sts[2].plan {
		t.Errorf("the record holds %.10q, want the whole plan %.10q", got, sts[2].plan)
	}
	if d.Written().Appends != before.Appends {
		t.Error("appended to a log another process wrote")
	}
}

// TestApplyRecordCrash stops ApplyRecord at every step where a crash
// could stop it (a file about to be renamed into place or removed, a
// record half appended) and checks what a restarted node finds: each file
// is whole, old or new; the record names the old plan or the new one, and
// the new one only once every file is new; the next apply converges.
func TestApplyRecordCrash(t *testing.T) {
	sts := states(5)
	// whole: the applier does not know the record (another process wrote
	// it), so plan.json is written whole and the log removed.
	for _, whole := range []bool{false, true} {
		for from := 0; from+1 < len(sts); from++ {
			old, next := sts[from], sts[from+1]
			for k := 1; ; k++ {
				d := openTemp(t)
				// Reach old through the earlier states (so that a log exists).
				prev := ""
				for _, st := range sts[:from+1] {
					if _, err := applyState(d, prev, st); err != nil {
						t.Fatal(err)
					}
					prev = st.plan
				}
				if whole {
					d.rec = nil
				}
				var steps []string
				d.crash = func(step string) bool {
					steps = append(steps, step)
					return len(steps) == k
				}
				_, err := applyState(d, old.plan, next)
				if err == nil {
					if len(steps) >= k {
						t.Fatalf("from %d: crash at step %d (%s) not reported", from, k, steps[k-1])
					}
					t.Logf("whole %v, from %d: crashed at each of %d steps: %v", whole, from, k-1, steps)
					break // no step k: every crash point was tried
				}
				if !errors.Is(err, errCrash) {
					t.Fatal(err)
				}
				step := steps[k-1]

				// A restarted node.
				r, err := Open(d.Path())
				if err != nil {
					t.Fatal(err)
				}
				got := recorded(t, r)
				files := withoutRecord(tree(t, d.Path()))
				for p := range files {
					if strings.Contains(p, tmpPrefix) {
						delete(files, p) // a temporary file: swept by the next apply
					}
				}
				allNew := maps.Equal(files, next.files)
				switch got {
				case old.plan:
				case next.plan:
					if !allNew {
						t.Errorf("from %d, crash at %s: the record names the new plan, but the files are not all new: %v", from, step, files)
					}
				default:
					t.Errorf("from %d, crash at %s: the record holds %.10q, neither plan", from, step, got)
				}
				for p, c := range files {
					if c != old.files[p] && c != next.files[p] {
						t.Errorf("from %d, crash at %s: %s holds neither its old nor its new content: %q", from, step, p, c)
					}
				}
				// The restarted node applies next again: it converges.
				var delta []byte
				if got != next.plan {
					delta = []byte(next.plan)
				}
				if _, err := r.ApplyRecord(stateFiles(next.files), delta, fullOf(next.plan)); err != nil {
					t.Fatal(err)
				}
				if got := recorded(t, r); got != next.plan {
					t.Errorf("from %d, crash at %s: after the next apply the record holds %.10q", from, step, got)
				}
				if diff := cmp.Diff(next.files, withoutRecord(tree(t, d.Path()))); diff != "" {
					t.Errorf("from %d, crash at %s: after the next apply (-want +got):\n%s", from, step, diff)
				}
				checkNoTemp(t, d.Path())
			}
		}
	}
}

// TestLastPlanIgnoresStaleAndTornLogs: a log of another plan.json, and a
// torn last record, do not count.
func TestLastPlanIgnoresStaleAndTornLogs(t *testing.T) {
	d := openTemp(t)
	sts := states(3)
	prev := ""
	for _, st := range sts {
		if _, err := applyState(d, prev, st); err != nil {
			t.Fatal(err)
		}
		prev = st.plan
	}
	logPath := filepath.Join(d.Path(), LogFile)
	log, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	// Torn: every cut inside the last record gives the one before.
	last := strings.LastIndex(string(log), "delta 2 ")
	for cut := last + 1; cut < len(log); cut += 97 {
		if err := os.WriteFile(logPath, log[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		if got := recorded(t, d); got != sts[1].plan {
			t.Fatalf("log cut at %d of %d: the record holds %.10q, want %.10q", cut, len(log), got, sts[1].plan)
		}
	}
	// A bit flipped in the last record's payload.
	flipped := slices.Clone(log)
	flipped[len(flipped)-3] ^= 1
	os.WriteFile(logPath, flipped, 0o644)
	if got := recorded(t, d); got != sts[1].plan {
		t.Errorf("a corrupt last record counted: %.10q", got)
	}
	// Another plan.json: the log is stale.
	os.WriteFile(logPath, log, 0o644)
	os.WriteFile(filepath.Join(d.Path(), PlanFile), []byte("another"), 0o644)
	if got := recorded(t, d); got != "another" {
		t.Errorf("a stale log counted: %.10q", got)
	}
}

// TestApplyRecordFullFails: when the whole plan cannot be written (full
// fails after writing part of it), ApplyRecord returns full's error, the
// record still names the last plan, and no temporary file is left.
func TestApplyRecordFullFails(t *testing.T) {
	d := openTemp(t)
	sts := states(2)
	if _, err := applyState(d, "", sts[0]); err != nil {
		t.Fatal(err)
	}
	errRender := errors.New("render failed")
	half := func(w io.Writer) error {
		io.WriteString(w, sts[1].plan[:500])
		return errRender
	}
	// A new Dir does not know the record: it writes the whole plan.
	other, err := Open(d.Path())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.ApplyRecord(stateFiles(sts[1].files), []byte("delta"), half); !errors.Is(err, errRender) {
		t.Fatalf("ApplyRecord = %v, want %v", err, errRender)
	}
	if got := recorded(t, d); got != sts[0].plan {
		t.Errorf("the record holds %.10q, want the last plan %.10q", got, sts[0].plan)
	}
	ents, err := os.ReadDir(d.Path())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			t.Errorf("temporary file %s left", e.Name())
		}
	}
}

// TestApplyRecordSamePlanUnknownRecord: a Dir that does not know the
// record compares the whole plan with plan.json and, when they are the
// same, writes nothing and reports no change of plan.json.
func TestApplyRecordSamePlanUnknownRecord(t *testing.T) {
	d := openTemp(t)
	st := states(1)[0]
	if _, err := applyState(d, "", st); err != nil {
		t.Fatal(err)
	}
	other, err := Open(d.Path())
	if err != nil {
		t.Fatal(err)
	}
	done, err := other.ApplyRecord(stateFiles(st.files), nil, fullOf(st.plan))
	if err != nil {
		t.Fatal(err)
	}
	if w := other.Written(); w.Files != 0 || w.Bytes != 0 {
		t.Errorf("wrote %+v, want nothing", w)
	}
	if slices.Contains(done.Changed, PlanFile) || slices.Contains(done.Added, PlanFile) {
		t.Errorf("changes %+v name %s", done, PlanFile)
	}
	// A different plan is written (by a Dir that does not know the
	// record either: delta nil says the plan is the one recorded).
	third, err := Open(d.Path())
	if err != nil {
		t.Fatal(err)
	}
	done, err = third.ApplyRecord(stateFiles(st.files), nil, fullOf(st.plan+"!"))
	if err != nil {
		t.Fatal(err)
	}
	if got := recorded(t, d); got != st.plan+"!" || !slices.Contains(done.Changed, PlanFile) {
		t.Errorf("the record holds %.10q…, changes %+v; want the new plan, plan.json changed", got, done)
	}
}

// TestPrepareRecordAbort: PrepareRecord writes every file to write to a
// temporary file and leaves the names alone, holding the dir's lock;
// Abort removes them and releases the lock, leaving the dir byte for byte
// as it was (directories made for the files included), whether the plan
// would have been appended to plan.log or written whole, and on a first
// write into an empty dir. After it, the write can be done again.
func TestPrepareRecordAbort(t *testing.T) {
	sts := states(3)
	for _, tt := range []struct {
		name  string
		from  int  // states applied before; 0: none
		whole bool // the Dir does not know the record: plan.json is written whole
	}{
		{name: "empty dir"},
		{name: "append", from: 2},
		{name: "whole", from: 2, whole: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := openTemp(t)
			prev := ""
			for _, st := range sts[:tt.from] {
				if _, err := applyState(d, prev, st); err != nil {
					t.Fatal(err)
				}
				prev = st.plan
			}
			if tt.whole {
				d.rec = nil
			}
			next := sts[tt.from]
			next.files = maps.Clone(next.files)
			if tt.from > 0 {
				next.files["env/c.env"] = "C=1\n" // and a new file
			}
			before, written := entries(t, d.Path()), d.Written()
			var delta []byte
			if prev != "" {
				delta = []byte(next.plan)
			}
			w, err := d.PrepareRecord(stateFiles(next.files), delta, fullOf(next.plan))
			if err != nil {
				t.Fatal(err)
			}
			if lockFree(t, d.Path()) {
				t.Error("the dir is not locked while a write is prepared")
			}
			temps := map[string]string{}
			for p, c := range entries(t, d.Path()) {
				if dir, base := path.Split(p); strings.HasPrefix(base, tmpPrefix) {
					name := strings.TrimPrefix(base, tmpPrefix)
					temps[dir+name[:strings.LastIndexByte(name, '-')]] = c
				} else if !strings.HasSuffix(p, "/") && before[p] != c {
					t.Errorf("%s changed by PrepareRecord", p)
				}
			}
			wantTemps := map[string]string{}
			for p, c := range next.files {
				if c != tree(t, d.Path())[p] {
					wantTemps[p] = c
				}
			}
			if tt.from == 0 || tt.whole {
				wantTemps[PlanFile] = next.plan
			}
			if diff := cmp.Diff(wantTemps, temps); diff != "" {
				t.Errorf("prepared temporary files (-want +got):\n%s", diff)
			}
			w.Abort()
			if diff := cmp.Diff(before, entries(t, d.Path())); diff != "" {
				t.Errorf("after Abort the dir changed (-before +after):\n%s", diff)
			}
			if !lockFree(t, d.Path()) {
				t.Error("the dir is still locked after Abort")
			}
			if d.Written() != written {
				t.Errorf("Written %+v after Abort, was %+v", d.Written(), written)
			}
			w.Abort() // again: nothing
			if _, err := w.Commit(); err == nil {
				t.Error("Commit after Abort: no error")
			}
			// The same write, done.
			if _, err := d.ApplyRecord(stateFiles(next.files), delta, fullOf(next.plan)); err != nil {
				t.Fatal(err)
			}
			if got := recorded(t, d); got != next.plan {
				t.Errorf("the record holds %.10q, want %.10q", got, next.plan)
			}
			if diff := cmp.Diff(next.files, withoutRecord(tree(t, d.Path()))); diff != "" {
				t.Errorf("files (-want +got):\n%s", diff)
			}
			checkNoTemp(t, d.Path())
		})
	}
}

// entries is tree with the directories (as "name/").
func entries(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := tree(t, dir)
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.IsDir() && p != dir {
			rel, _ := filepath.Rel(dir, p)
			m[filepath.ToSlash(rel)+"/"] = ""
		}
		return nil
	})
	return m
}

// lockFree tells whether no one holds the dir's lock (its flock(2)).
func lockFree(t *testing.T, dir string) bool {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}
