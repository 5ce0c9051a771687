package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// logRec is one record the watcher logged: its level, message and
// attributes as text.
type logRec struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (r logRec) String() string {
	return fmt.Sprintf("%s %q %v", r.level, r.msg, r.attrs)
}

// records is a slog.Handler that keeps every record (and passes it to the
// test's log), for tests of what the watcher logs.
type records struct {
	text slog.Handler
	mu   *sync.Mutex
	recs *[]logRec
}

func newRecords(t *testing.T) *records {
	return &records{
		text: slog.NewTextHandler(tlog{t}, &slog.HandlerOptions{Level: slog.LevelDebug}),
		mu:   new(sync.Mutex), recs: new([]logRec),
	}
}

func (h *records) Enabled(context.Context, slog.Level) bool { return true }
func (h *records) WithAttrs(as []slog.Attr) slog.Handler {
	return &records{text: h.text.WithAttrs(as), mu: h.mu, recs: h.recs}
}
func (h *records) WithGroup(name string) slog.Handler {
	return &records{text: h.text.WithGroup(name), mu: h.mu, recs: h.recs}
}

func (h *records) Handle(ctx context.Context, r slog.Record) error {
	rec := logRec{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	h.mu.Lock()
	*h.recs = append(*h.recs, rec)
	h.mu.Unlock()
	return h.text.Handle(ctx, r)
}

// all returns the records logged so far.
func (h *records) all() []logRec {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]logRec(nil), *h.recs...)
}

// with returns the records so far whose message is msg and whose
// attributes include attrs (key, value pairs).
func (h *records) with(msg string, attrs ...string) []logRec {
	var out []logRec
	for _, r := range h.all() {
		if r.msg != msg {
			continue
		}
		ok := true
		for i := 0; i+1 < len(attrs); i += 2 {
			if r.attrs[attrs[i]] != attrs[i+1] {
				ok = false
			}
		}
		if ok {
			out = append(out, r)
		}
	}
	return out
}

// waitRec waits until more than n records match msg and attrs, and
// returns the last one.
func (h *records) waitRec(t *testing.T, n int, msg string, attrs ...string) logRec {
	t.Helper()
	var got []logRec
	waitFor(t, fmt.Sprintf("a record %q %q", msg, attrs), func() (bool, string) {
		got = h.with(msg, attrs...)
		var b strings.Builder
		for _, r := range h.all() {
			fmt.Fprintln(&b, r)
		}
		return len(got) > n, b.String()
	})
	return got[len(got)-1]
}

// containing returns the records so far whose message contains s.
func (h *records) containing(s string) []logRec {
	var out []logRec
	for _, r := range h.all() {
		if strings.Contains(r.msg, s) {
			out = append(out, r)
		}
	}
	return out
}

// lonelyService has a selector that matches no pod: a warning.
func lonelyService(name string) string {
	return `apiVersion: v1
kind: Service
metadata:
  name: ` + name + `
  namespace: shop
spec:
  selector:
    app: ` + name + `
  ports:
  - port: 80
`
}

// startLogged runs a watcher of tree (DataplaneNone: no root) whose
// records the test reads. It does not wait for the first sync.
func startLogged(t *testing.T, tree string, resync time.Duration) (*running, *records) {
	t.Helper()
	log := newRecords(t)
	stateDir := filepath.Join(t.TempDir(), "state")
	w, err := New(Options{
		Tree: tree, Node: "node-1", StateDir: stateDir, Dataplane: DataplaneNone,
		Debounce: 50 * time.Millisecond, Resync: resync, Logger: slog.New(log),
	})
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, w)
	return &running{Watcher: w, stateDir: stateDir}, log
}

// TestLogWarnings: each distinct warning of the tree is logged once, when
// it appears, not on every reload (file change, SIGHUP, resync) and not
// when an edit only moves it to another line; an invalid tree that is
// valid again says so; SIGHUP is a full sync.
func TestLogWarnings(t *testing.T) {
	tree := basicTree(t)
	writeFile(t, filepath.Join(tree, "lonely/service.yaml"), lonelyService("lonely"))
	r, log := startLogged(t, tree, -1)
	log.waitRec(t, 0, "synced", "reason", "start", "kind", "full")
	const lonely = "lonely/service.yaml:8:5: warning: spec.selector: matches no Pod in namespace shop, so the Service has no endpoints"
	warnings := func() []string {
		var out []string
		for _, rec := range log.with("tree warning") {
			out = append(out, rec.attrs["warning"])
		}
		return out
	}
	if got := warnings(); len(got) != 1 || got[0] != lonely {
		t.Fatalf("warnings logged after the first sync: %q, want [%q]", got, lonely)
	}
	if rec := log.with("tree warning")[0]; rec.level != slog.LevelWarn {
		t.Errorf("tree warning logged at level %s, want WARN", rec.level)
	}

	// Reloads of every kind: the warning is not logged again.
	atomicWrite(t, filepath.Join(tree, "web/service.yaml"), webService("8088"))
	r.fileHas(t, "env/shop.env", "WEB_PORT_8088_TCP=")
	r.idle(t)
	n := len(log.with("synced", "reason", "reload"))
	r.Reload() // SIGHUP
	rec := log.waitRec(t, n, "synced", "reason", "reload")
	if rec.attrs["kind"] != "full" {
		t.Errorf("SIGHUP's sync logged as kind %q, want full: %v", rec.attrs["kind"], rec)
	}
	// An edit that moves the warning to another line (the plan stays).
	n = len(log.with("plan unchanged"))
	atomicWrite(t, filepath.Join(tree, "lonely/service.yaml"), "# moved down a line\n"+lonelyService("lonely"))
	log.waitRec(t, n, "plan unchanged")
	if got := warnings(); len(got) != 1 {
		t.Errorf("after reloads, warnings logged: %q; want the first one only", got)
	}

	// A new warning is logged once; the old one is not logged again.
	writeFile(t, filepath.Join(tree, "lonely/other.yaml"), lonelyService("other"))
	log.waitRec(t, 0, "tree warning", "warning", "lonely/other.yaml:8:5: warning: spec.selector: matches no Pod in namespace shop, so the Service has no endpoints")
	r.idle(t)
	if got := warnings(); len(got) != 2 {
		t.Errorf("after a new warning, warnings logged: %q; want 2", got)
	}

	// Invalid, then valid again: both said, once each.
	if got := log.with("tree valid again"); len(got) != 0 {
		t.Fatalf("'tree valid again' logged for a tree never invalid: %v", got)
	}
	atomicWrite(t, filepath.Join(tree, "web/service.yaml"), webService("70000"))
	rec = log.waitRec(t, 0, "tree invalid, keeping last good state")
	if rec.level != slog.LevelError || rec.attrs["errors"] != "1" {
		t.Errorf("tree invalid record: %v", rec)
	}
	atomicWrite(t, filepath.Join(tree, "web/service.yaml"), webService("8090"))
	rec = log.waitRec(t, 0, "tree valid again")
	if rec.level != slog.LevelInfo || rec.attrs["reason"] != "change" {
		t.Errorf("tree valid again record: %v", rec)
	}
	r.fileHas(t, "env/shop.env", "WEB_PORT_8090_TCP=")
	r.idle(t)
	if got := log.with("tree valid again"); len(got) != 1 {
		t.Errorf("'tree valid again' logged %d times, want once", len(got))
	}
	if got := warnings(); len(got) != 2 {
		t.Errorf("after an invalid tree and its fix, warnings logged: %q; want the same 2", got)
	}
	// A warning that went away and came back is new again.
	if err := os.Remove(filepath.Join(tree, "lonely/other.yaml")); err != nil {
		t.Fatal(err)
	}
	// Its Service goes once the removal grace has passed.
	n = len(log.with("synced", "reason", "removal"))
	log.waitRec(t, n, "synced", "reason", "removal")
	writeFile(t, filepath.Join(tree, "lonely/other.yaml"), lonelyService("other"))
	log.waitRec(t, 1, "tree warning", "warning", "lonely/other.yaml:8:5: warning: spec.selector: matches no Pod in namespace shop, so the Service has no endpoints")
}

// TestLogFirstLoadInvalid: when the first reading of the tree fails there
// is no last good state, and the log does not claim one; once the tree is
// fixed, it says the tree is valid again and syncs.
func TestLogFirstLoadInvalid(t *testing.T) {
	tree := basicTree(t)
	writeFile(t, filepath.Join(tree, "web/service.yaml"), webService("70000"))
	r, log := startLogged(t, tree, -1)
	rec := log.waitRec(t, 0, "tree invalid, nothing applied yet: the kernel and the state dir stay as they are")
	if rec.level != slog.LevelError || rec.attrs["reason"] != "start" {
		t.Errorf("record: %v", rec)
	}
	if got := log.containing("last good state"); len(got) != 0 {
		t.Errorf("claims a last good state it does not have: %v", got)
	}
	if got := log.with("tree error"); len(got) != 0 {
		t.Errorf("the only error, logged with the first line, is logged again: %v", got)
	}
	r.Reload() // still invalid: still no good state
	log.waitRec(t, 0, "tree invalid, nothing applied yet: the kernel and the state dir stay as they are", "reason", "reload")
	if got := log.containing("last good state"); len(got) != 0 {
		t.Errorf("claims a last good state it does not have: %v", got)
	}
	atomicWrite(t, filepath.Join(tree, "web/service.yaml"), webService("8088"))
	select {
	case <-r.Synced():
	case <-time.After(deadline):
		t.Fatal("no sync after the tree was fixed")
	}
	log.waitRec(t, 0, "tree valid again")
	r.fileHas(t, "env/shop.env", "WEB_PORT_8088_TCP=")

	// Now there is a good state to keep.
	atomicWrite(t, filepath.Join(tree, "web/service.yaml"), webService("70000"))
	log.waitRec(t, 0, "tree invalid, keeping last good state")
}

// TestLogResyncFull: the periodic resync reads the whole tree and the
// kernel back, and its record says kind full.
func TestLogResyncFull(t *testing.T) {
	_, log := startLogged(t, basicTree(t), 100*time.Millisecond)
	log.waitRec(t, 0, "synced", "reason", "start", "kind", "full")
	// Logged at debug level when nothing drifted.
	rec := log.waitRec(t, 0, "resynced, no drift", "reason", "resync")
	if rec.attrs["kind"] != "full" {
		t.Errorf("the resync logged as kind %q, want full: %v", rec.attrs["kind"], rec)
	}
	if got := log.with("synced", "kind", "partial"); len(got) != 0 {
		t.Errorf("partial syncs without a file change: %v", got)
	}
}
