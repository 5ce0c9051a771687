package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// query asks the watcher's status socket, as netspec status does.
func (r *running) query(t *testing.T) *Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	st, err := QueryStatus(ctx, r.StatusSocket())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// statusUntil waits until the status the socket serves satisfies cond.
func (r *running) statusUntil(t *testing.T, what string, cond func(*Status) bool) *Status {
	t.Helper()
	var st *Status
	waitFor(t, what, func() (bool, string) {
		st = r.query(t)
		return cond(st), fmt.Sprintf("%+v last sync %+v tree %+v", st, st.LastSync, st.TreeState)
	})
	return st
}

// revisionMetric returns the revision labels of netspec_applied_revision_info.
func revisionMetric(t *testing.T, w *Watcher) []string {
	t.Helper()
	var out []string
	for _, m := range metricSeries(t, w, "netspec_applied_revision_info") {
		if m.GetGauge().GetValue() != 1 {
			t.Errorf("netspec_applied_revision_info = %v, want 1", m.GetGauge().GetValue())
		}
		for _, l := range m.GetLabel() {
			out = append(out, l.GetValue())
		}
	}
	return out
}

// fullSyncs is how many full syncs (the first, SIGHUP, resyncs) w made.
func fullSyncs(t *testing.T, w *Watcher) uint64 {
	t.Helper()
	for _, m := range metricSeries(t, w, "netspec_sync_duration_seconds") {
		for _, l := range m.GetLabel() {
			if l.GetName() == "kind" && l.GetValue() == "full" {
				return m.GetHistogram().GetSampleCount()
			}
		}
	}
	return 0
}

// metricSeries returns the series of the metric name that w exports now.
func metricSeries(t *testing.T, w *Watcher, name string) []*dto.Metric {
	t.Helper()
	mfs, err := w.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()
		}
	}
	return nil
}

func TestStatusFollowsSyncs(t *testing.T) {
	tree := basicTree(t)
	r := start(t, tree, Options{Dataplane: DataplaneNone, Resync: -1})
	r.idle(t)

	fi, err := os.Stat(r.StatusSocket())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Errorf("status socket mode %s, want a socket, 0600", fi.Mode())
	}
	if r.StatusSocket() != filepath.Join(r.stateDir, SocketName) {
		t.Errorf("status socket %s, want in the state dir", r.StatusSocket())
	}

	st := r.query(t)
	if st.Node != "node-1" || st.Dataplane != DataplaneNone || st.PID != os.Getpid() {
		t.Errorf("status names node %q, dataplane %q, pid %d", st.Node, st.Dataplane, st.PID)
	}
	if ls := st.LastSync; ls == nil || ls.Reason != "start" || ls.Kind != "full" || ls.Result != ResultApplied || ls.Error != "" {
		t.Errorf("first sync: %+v, want start, full, applied", ls)
	}
	if !st.TreeState.Valid || st.TreeState.Errors != 0 {
		t.Errorf("tree state %+v, want valid", st.TreeState)
	}
	if st.Revision == nil || st.Revision.Source != RevisionContent || !strings.HasPrefix(st.Revision.ID, "sha256:") {
		t.Fatalf("revision %+v, want a content hash", st.Revision)
	}
	first := *st.Revision
	if got := revisionMetric(t, r.Watcher); len(got) != 1 || got[0] != first.ID {
		t.Errorf("netspec_applied_revision_info revisions %q, want [%s]", got, first.ID)
	}
	if st.HealthChecks != nil {
		t.Errorf("health checks %+v under --dataplane none, want none", st.HealthChecks)
	}

	// Invalid: the first error shows, nothing is applied, the revision
	// stays.
	atomicWrite(t, filepath.Join(tree, "web/service.yaml"), webService("70000"))
	st = r.statusUntil(t, "the tree invalid", func(s *Status) bool { return !s.TreeState.Valid })
	if !strings.Contains(st.TreeState.FirstError, "web/service.yaml:") || st.TreeState.Errors == 0 {
		t.Errorf("tree state %+v, want the first error in web/service.yaml", st.TreeState)
	}
	if ls := st.LastSync; ls.Reason != "change" || ls.Result != ResultInvalid || ls.Kind != "" {
		t.Errorf("sync of an invalid tree: %+v, want change, invalid, no kind", ls)
	}
	if *st.Revision != first {
		t.Errorf("an invalid tree moved the revision: %+v, was %+v", st.Revision, first)
	}

	// Valid again, with another port: applied by difference, a new
	// revision, and only its series in the metric.
	atomicWrite(t, filepath.Join(tree, "web/service.yaml"), webService("8080"))
	st = r.statusUntil(t, "the tree valid again", func(s *Status) bool { return s.TreeState.Valid })
	if ls := st.LastSync; ls.Reason != "change" || ls.Kind != "partial" || ls.Result != ResultApplied {
		t.Errorf("sync of the fix: %+v, want change, partial, applied", ls)
	}
	if st.Revision.ID == first.ID || st.Revision.Since.Before(first.Since) {
		t.Errorf("revision %+v after an edit, was %+v", st.Revision, first)
	}
	if got := revisionMetric(t, r.Watcher); len(got) != 1 || got[0] != st.Revision.ID {
		t.Errorf("netspec_applied_revision_info revisions %q, want [%s] alone", got, st.Revision.ID)
	}

	// A comment: the plan is the same, the revision is not.
	second := *st.Revision
	appendFile(t, filepath.Join(tree, "web/service.yaml"), "# a comment\n")
	st = r.statusUntil(t, "the comment's revision", func(s *Status) bool { return s.Revision.ID != second.ID })
	if ls := st.LastSync; ls.Result != ResultUnchanged {
		t.Errorf("sync of a comment: %+v, want unchanged", ls)
	}

	// SIGHUP: a full sync.
	r.Reload()
	st = r.statusUntil(t, "a reload", func(s *Status) bool { return s.LastSync.Reason == "reload" })
	if ls := st.LastSync; ls.Kind != "full" || ls.Result != ResultApplied {
		t.Errorf("reload: %+v, want full, applied", ls)
	}
}

// TestRevisionFollowsGit: in a git checkout, the metric and the status
// name the commit applied.
func TestRevisionFollowsGit(t *testing.T) {
	dir := t.TempDir()
	c1 := gitRepo(t, dir)
	tree := filepath.Join(dir, "tree")
	r := start(t, tree, Options{Dataplane: DataplaneNone, Resync: -1})
	r.idle(t)
	if got := revisionMetric(t, r.Watcher); len(got) != 1 || got[0] != c1 {
		t.Fatalf("revisions %q, want [%s]", got, c1)
	}
	if st := r.query(t); st.Revision == nil || st.Revision.ID != c1 || st.Revision.Source != RevisionGit {
		t.Fatalf("status revision %+v, want git %s", st.Revision, c1)
	}

	// An edit, committed: git moves the branch after the files are
	// written; the watcher follows HEAD's files as well as the tree's.
	atomicWrite(t, filepath.Join(tree, "web/service.yaml"), webService("8080"))
	git(t, dir, "commit", "-q", "-am", "web on 8080")
	c2 := git(t, dir, "rev-parse", "HEAD")
	r.statusUntil(t, "the second commit applied", func(s *Status) bool { return s.Revision != nil && s.Revision.ID == c2 })
	if got := revisionMetric(t, r.Watcher); len(got) != 1 || got[0] != c2 {
		t.Errorf("revisions %q after the commit, want [%s] alone", got, c2)
	}

	// A commit that changes no file of the tree, on another branch: HEAD
	// names another ref, which is followed too.
	git(t, dir, "checkout", "-q", "-b", "other")
	git(t, dir, "commit", "-q", "--allow-empty", "-m", "empty")
	c3 := git(t, dir, "rev-parse", "HEAD")
	r.statusUntil(t, "the empty commit on another branch", func(s *Status) bool { return s.Revision.ID == c3 })
	git(t, dir, "commit", "-q", "--allow-empty", "-m", "empty again")
	c4 := git(t, dir, "rev-parse", "HEAD")
	r.statusUntil(t, "the next commit on that branch", func(s *Status) bool { return s.Revision.ID == c4 })

	// Back to the first commit, detached: its files and its commit.
	git(t, dir, "checkout", "-q", "--detach", c1)
	st := r.statusUntil(t, "the first commit again", func(s *Status) bool { return s.Revision.ID == c1 })
	if ls := st.LastSync; ls.Reason != "change" {
		t.Errorf("last sync %+v, want a change", ls)
	}
	if !strings.Contains(r.file(t, "env/shop.env"), "\nWEB_SERVICE_PORT=80\n") {
		t.Errorf("the first commit's files are not applied:\n%s", r.file(t, "env/shop.env"))
	}
	if got := revisionMetric(t, r.Watcher); len(got) != 1 || got[0] != c1 {
		t.Errorf("revisions %q, want [%s] alone", got, c1)
	}
}

// TestStatusSocket: a stale socket is replaced, a live one or another
// file is not, and the socket goes when the watcher stops.
func TestStatusSocket(t *testing.T) {
	tree := basicTree(t)
	state := t.TempDir()
	sock := filepath.Join(state, SocketName)

	// A socket nothing listens on: a daemon that crashed.
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	if _, err := QueryStatus(context.Background(), sock); !errors.Is(err, ErrStaleSocket) {
		t.Fatalf("QueryStatus of a stale socket: %v, want ErrStaleSocket", err)
	}

	w, err := New(Options{Tree: tree, Node: "node-1", Dataplane: DataplaneNone, StateDir: state, Resync: -1, Logger: quietLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	select {
	case <-w.Synced():
	case err := <-done:
		t.Fatalf("Run with a stale socket: %v", err)
	case <-time.After(deadline):
		t.Fatal("no first sync")
	}
	if _, err := QueryStatus(ctx, sock); err != nil {
		t.Fatalf("the stale socket was not replaced: %v", err)
	}

	// A second daemon on the same state dir refuses to start.
	w2, err := New(Options{Tree: tree, Node: "node-1", Dataplane: DataplaneNone, StateDir: state, Resync: -1, Logger: quietLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := w2.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "another netspec watch") {
		t.Errorf("a second watcher of the state dir: %v, want an error", err)
	}
	if _, err := QueryStatus(ctx, sock); err != nil {
		t.Errorf("the second watcher broke the first one's socket: %v", err)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket is still there after Run returned: %v", err)
	}
	if _, err := QueryStatus(context.Background(), sock); !errors.Is(err, ErrNoDaemon) {
		t.Errorf("QueryStatus without a socket: %v, want ErrNoDaemon", err)
	}

	// A file that is not a socket is not removed.
	writeFile(t, sock, "mine\n")
	w3, err := New(Options{Tree: tree, Node: "node-1", Dataplane: DataplaneNone, StateDir: state, Resync: -1, Logger: quietLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := w3.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("Run with a regular file at the socket's path: %v, want an error", err)
	}
	if data, _ := os.ReadFile(sock); string(data) != "mine\n" {
		t.Errorf("the file at the socket's path was changed: %q", data)
	}
}

// quietLogger logs to the test's log.
func quietLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tlog{t}, nil))
}

// TestStatusHealthChecks: the status lists the health check node ports,
// failing to bind while the node's address is missing, then listening.
func TestStatusHealthChecks(t *testing.T) {
	tree := basicTree(t)
	writeFile(t, filepath.Join(tree, "web", "edge.yaml"), edgeService("web"))
	r := start(t, tree, Options{Resync: -1})
	r.idle(t)
	want := HealthCheckStatus{Service: "shop/edge", Port: 31000, LocalEndpoints: 2, Listening: []string{}, Failing: []string{"192.168.10.11"}}
	if st := r.query(t); len(st.HealthChecks) != 1 || fmt.Sprint(st.HealthChecks[0]) != fmt.Sprint(want) {
		t.Errorf("health checks %+v, want [%+v]", st.HealthChecks, want)
	}
	r.ns.AddAddr("lo", "192.168.10.11/32")
	r.Reload()
	want.Listening, want.Failing = []string{"192.168.10.11"}, []string{}
	r.statusUntil(t, "listening", func(s *Status) bool {
		return len(s.HealthChecks) == 1 && fmt.Sprint(s.HealthChecks[0]) == fmt.Sprint(want)
	})
}

// TestStatusLongPath: a state dir too deep for a socket address still
// gets its socket.
func TestStatusLongPath(t *testing.T) {
	state := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	if err := os.MkdirAll(state, 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := New(Options{Tree: basicTree(t), Node: "node-1", Dataplane: DataplaneNone, StateDir: state, Resync: -1, Logger: quietLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.StatusSocket()) <= maxSocketPath {
		t.Fatalf("socket path %s is short enough: the test tests nothing", w.StatusSocket())
	}
	runSynced(t, w, deadline)
	waitFor(t, "the first sync in the status", func() (bool, string) {
		st, err := QueryStatus(context.Background(), w.StatusSocket())
		if err != nil {
			t.Fatal(err)
		}
		return st.LastSync != nil && st.LastSync.Result == ResultApplied, fmt.Sprintf("%+v", st.LastSync)
	})
}

// TestStatusIPVSScheduler: the status names the default IPVS scheduler
// with the ipvs data plane (explain --live checks the kernel's virtual
// servers with it), and none with the others.
func TestStatusIPVSScheduler(t *testing.T) {
	for _, tc := range []struct {
		dataplane, sched, want string
	}{
		{dataplane: DataplaneIPVS, sched: "", want: "rr"},
		{dataplane: DataplaneIPVS, sched: "lc", want: "lc"},
		{dataplane: DataplaneNFTables, sched: "lc", want: ""},
		{dataplane: DataplaneNone, sched: "", want: ""},
	} {
		w, err := New(Options{Tree: basicTree(t), Node: "node-1", Dataplane: tc.dataplane, IPVSScheduler: tc.sched, StateDir: t.TempDir(), Resync: -1, Logger: quietLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		if got := w.status.Load().IPVSScheduler; got != tc.want {
			t.Errorf("dataplane %s, --ipvs-scheduler %q: status names scheduler %q, want %q", tc.dataplane, tc.sched, got, tc.want)
		}
	}
}

// TestRevisionDirty: a tree with changes not committed is not named by
// its commit alone: "<commit>+sha256:<12 hex>" (dirty), which changes with
// the content; committed, the commit again.
func TestRevisionDirty(t *testing.T) {
	dir := t.TempDir()
	c1 := gitRepo(t, dir)
	tree := filepath.Join(dir, "tree")
	r := start(t, tree, Options{Dataplane: DataplaneNone, Resync: -1})
	r.idle(t)
	if st := r.query(t); st.Revision == nil || st.Revision.ID != c1 || st.Revision.Dirty {
		t.Fatalf("status revision %+v, want %s, clean", st.Revision, c1)
	}

	dirty := regexp.MustCompile(`^` + c1 + `\+sha256:[0-9a-f]{12}$`)
	// An edit, not committed.
	atomicWrite(t, filepath.Join(tree, "web/service.yaml"), webService("8080"))
	st := r.statusUntil(t, "a dirty revision", func(s *Status) bool { return s.Revision.ID != c1 })
	if !dirty.MatchString(st.Revision.ID) || !st.Revision.Dirty || st.Revision.Source != RevisionGit {
		t.Fatalf("revision %+v, want %s+sha256:…, dirty", st.Revision, c1)
	}
	first := st.Revision.ID
	if got := revisionMetric(t, r.Watcher); len(got) != 1 || got[0] != first {
		t.Errorf("netspec_applied_revision_info revisions %q, want [%s]", got, first)
	}
	// Another edit: another revision.
	appendFile(t, filepath.Join(tree, "web/service.yaml"), "# a comment\n")
	st = r.statusUntil(t, "another dirty revision", func(s *Status) bool { return s.Revision.ID != first })
	if !dirty.MatchString(st.Revision.ID) {
		t.Errorf("revision %+v, want %s+sha256:…", st.Revision, c1)
	}
	// Staged, not committed: still dirty.
	second := st.Revision.ID
	git(t, dir, "add", "-A")
	// SIGHUP reads the index again (a full sync, counted by kind; git's
	// index lock may reload too, and be the last sync).
	full := fullSyncs(t, r.Watcher)
	r.Reload()
	waitFor(t, "a reload", func() (bool, string) {
		n := fullSyncs(t, r.Watcher)
		return n > full, fmt.Sprint(n)
	})
	r.idle(t)
	st = r.query(t)
	if st.Revision.ID != second {
		t.Errorf("staged changes: revision %+v, want %s", st.Revision, second)
	}
	// Committed: the commit.
	git(t, dir, "commit", "-q", "-m", "web on 8080")
	c2 := git(t, dir, "rev-parse", "HEAD")
	st = r.statusUntil(t, "the commit", func(s *Status) bool { return s.Revision.ID == c2 })
	if st.Revision.Dirty {
		t.Errorf("revision %+v, want clean", st.Revision)
	}
	// An untracked spec file.
	writeFile(t, filepath.Join(tree, "web/extra.yaml"), apiService)
	st = r.statusUntil(t, "an untracked file", func(s *Status) bool { return s.Revision.ID != c2 })
	if !strings.HasPrefix(st.Revision.ID, c2+"+sha256:") || !st.Revision.Dirty {
		t.Errorf("revision %+v, want %s+sha256:…", st.Revision, c2)
	}
	// Gone again: the commit.
	if err := os.Remove(filepath.Join(tree, "web/extra.yaml")); err != nil {
		t.Fatal(err)
	}
	r.statusUntil(t, "the commit again", func(s *Status) bool { return s.Revision.ID == c2 })
	// A tracked spec file deleted, not committed.
	if err := os.Remove(filepath.Join(tree, "cache/pods.yaml")); err != nil {
		t.Fatal(err)
	}
	st = r.statusUntil(t, "a deleted file", func(s *Status) bool { return s.Revision.ID != c2 })
	if !strings.HasPrefix(st.Revision.ID, c2+"+sha256:") || !st.Revision.Dirty {
		t.Errorf("revision %+v, want %s+sha256:…", st.Revision, c2)
	}
}
