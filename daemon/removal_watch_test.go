package daemon

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock that moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// startGrace runs a watcher of tree (DataplaneNone: no root) with the
// removal grace given and, when clock is not nil, that clock for it;
// it waits for the first sync.
func startGrace(t *testing.T, tree string, grace time.Duration, clock *fakeClock) (*running, *records) {
	t.Helper()
	log := newRecords(t)
	stateDir := filepath.Join(t.TempDir(), "state")
	w, err := New(Options{Tree: tree, Node: "node-1", StateDir: stateDir, Dataplane: DataplaneNone,
		Debounce: 50 * time.Millisecond, Resync: -1, RemovalGrace: grace, Logger: slog.New(log)})
	if err != nil {
		t.Fatal(err)
	}
	if clock != nil {
		w.loader.now = clock.Now
	}
	runSynced(t, w, deadline)
	return &running{Watcher: w, stateDir: stateDir}, log
}

// pendingIs tells whether a status has n removals pending (0: none).
func pendingIs(n int) func(*Status) bool {
	return func(s *Status) bool {
		if n == 0 {
			return s.PendingRemoval == nil
		}
		return s.PendingRemoval != nil && s.PendingRemoval.Objects == n
	}
}

// reload asks r for a reload (SIGHUP) and waits until it is done.
func reload(t *testing.T, r *running, log *records) {
	t.Helper()
	n := len(log.with("synced", "reason", "reload"))
	r.Reload()
	log.waitRec(t, n, "synced", "reason", "reload")
	r.idle(t)
}

const cartEnv = "CART_SERVICE_HOST=10.103.99.93"

// TestRemovalGrace: a Service whose file goes stays applied for the
// removal grace, in the state dir, the status and the metrics; its
// return cancels the removal; once the grace has passed (a fake clock),
// a reading removes it. No sleep: the clock is the test's.
func TestRemovalGrace(t *testing.T) {
	tree := basicTree(t)
	clock := &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	const grace = time.Hour // never reached by the real timer during the test
	r, log := startGrace(t, tree, grace, clock)
	r.fileHas(t, "env/shop.env", cartEnv)
	cart := filepath.Join(tree, "cart/service.yaml")
	data, err := os.ReadFile(cart)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("held", func(t *testing.T) {
		if err := os.Remove(cart); err != nil {
			t.Fatal(err)
		}
		st := r.statusUntil(t, "one removal pending", pendingIs(1))
		if want := clock.Now().Add(grace); !st.PendingRemoval.Due.Equal(want) {
			t.Errorf("removal due %v, want %v", st.PendingRemoval.Due, want)
		}
		log.waitRec(t, 0, "objects left the tree: they stay applied for the removal grace, unless they come back", "objects", "Service/shop/cart")
		r.idle(t)
		if got := r.file(t, "env/shop.env"); !strings.Contains(got, cartEnv) {
			t.Errorf("the Service held left the env file:\n%s", got)
		}
		if n := r.metric(t, "netspec_removal_pending_objects"); n != 1 {
			t.Errorf("netspec_removal_pending_objects = %v, want 1", n)
		}
		if n := r.metric(t, "netspec_removal_due_timestamp_seconds"); n != float64(clock.Now().Add(grace).Unix()) {
			t.Errorf("netspec_removal_due_timestamp_seconds = %v, want %d", n, clock.Now().Add(grace).Unix())
		}
	})
	t.Run("cancelled by its return", func(t *testing.T) {
		clock.Add(grace / 2)
		writeFile(t, cart, string(data))
		r.statusUntil(t, "no removal pending", pendingIs(0))
		log.waitRec(t, 0, "removal cancelled: objects back in the tree within the removal grace", "objects", "Service/shop/cart")
		clock.Add(grace) // the first grace's end: nothing to remove
		reload(t, r, log)
		if got := r.file(t, "env/shop.env"); !strings.Contains(got, cartEnv) {
			t.Errorf("a cancelled removal removed the Service:\n%s", got)
		}
		if n := r.metric(t, "netspec_removal_pending_objects"); n != 0 {
			t.Errorf("netspec_removal_pending_objects = %v, want 0", n)
		}
	})
	t.Run("removed once the grace has passed", func(t *testing.T) {
		if err := os.Remove(cart); err != nil {
			t.Fatal(err)
		}
		r.statusUntil(t, "one removal pending", pendingIs(1))
		clock.Add(grace / 2)
		reload(t, r, log) // SIGHUP honours the grace
		if got := r.file(t, "env/shop.env"); !strings.Contains(got, cartEnv) {
			t.Errorf("SIGHUP before the grace's end removed the Service:\n%s", got)
		}
		clock.Add(grace / 2)
		reload(t, r, log)
		r.statusUntil(t, "no removal pending", pendingIs(0))
		r.fileHas(t, "env/shop.env", "WEB_SERVICE_HOST=")
		if got := r.file(t, "env/shop.env"); strings.Contains(got, cartEnv) {
			t.Errorf("the Service is still in the env file after its grace:\n%s", got)
		}
	})
}

// TestRemovalGraceTimer: with the real clock, a removal held is applied
// by a sync of its own (reason removal) when its grace passes.
func TestRemovalGraceTimer(t *testing.T) {
	tree := basicTree(t)
	r, log := startGrace(t, tree, 300*time.Millisecond, nil)
	r.fileHas(t, "env/shop.env", cartEnv)
	if err := os.Remove(filepath.Join(tree, "cart/service.yaml")); err != nil {
		t.Fatal(err)
	}
	log.waitRec(t, 0, "synced", "reason", "removal", "kind", "partial")
	if len(log.containing("objects left the tree")) == 0 {
		t.Error("the removal was not held before it was applied")
	}
	r.idle(t)
	if got := r.file(t, "env/shop.env"); strings.Contains(got, cartEnv) {
		t.Errorf("the Service is still in the env file after its removal:\n%s", got)
	}
	st := r.query(t)
	if st.PendingRemoval != nil {
		t.Errorf("a removal still pending after it was applied: %+v", *st.PendingRemoval)
	}
}

// TestRemovalGraceNotInvalid: an object held must not make the new tree
// invalid: a Service renamed in place, keeping its node port, would
// clash with its held self; it is removed at once instead, and said so.
func TestRemovalGraceNotInvalid(t *testing.T) {
	tree := basicTree(t)
	r, log := startGrace(t, tree, time.Hour, nil)
	r.fileHas(t, "env/shop.env", cartEnv)
	cart := filepath.Join(tree, "cart/service.yaml")
	data, err := os.ReadFile(cart)
	if err != nil {
		t.Fatal(err)
	}
	atomicWrite(t, cart, strings.Replace(string(data), "name: cart\n", "name: cart2\n", 1))
	r.fileHas(t, "env/shop.env", "CART2_SERVICE_HOST=")
	log.waitRec(t, 0, "objects that left the tree removed at once: with them held, the tree would be invalid", "objects", "Service/shop/cart")
	r.idle(t)
	if got := r.file(t, "env/shop.env"); strings.Contains(got, cartEnv) {
		t.Errorf("the renamed Service's old name is still in the env file:\n%s", got)
	}
	if st := r.query(t); !st.TreeState.Valid || st.PendingRemoval != nil {
		t.Errorf("tree %+v, pending %+v: want valid, none pending", st.TreeState, st.PendingRemoval)
	}
}

// TestSymlinkSwapOneReload: a tree root swapped whole (git-sync's
// symlink to a new checkout) is one reload, whose removals wait as any
// other's: the Service the new checkout lacks is held, the one it
// changes applied at once.
func TestSymlinkSwapOneReload(t *testing.T) {
	dir := t.TempDir()
	copyTree(t, "../examples/basic", filepath.Join(dir, "v1"))
	copyTree(t, "../examples/basic", filepath.Join(dir, "v2"))
	writeFile(t, filepath.Join(dir, "v2/web/service.yaml"), webService("8091"))
	if err := os.Remove(filepath.Join(dir, "v2/cart/service.yaml")); err != nil {
		t.Fatal(err)
	}
	current := filepath.Join(dir, "current")
	if err := os.Symlink("v1", current); err != nil {
		t.Fatal(err)
	}
	r, log := startGrace(t, current, time.Hour, nil)
	r.fileHas(t, "env/shop.env", "WEB_PORT_80_TCP=")
	reloads := func() int { return len(log.with("synced", "reason", "change")) + len(log.with("plan unchanged")) }
	before := reloads()

	if err := os.Symlink("v2", current+".tmp"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(current+".tmp", current); err != nil {
		t.Fatal(err)
	}
	r.fileHas(t, "env/shop.env", "WEB_PORT_8091_TCP=")
	st := r.statusUntil(t, "the cart Service held", pendingIs(1))
	r.idle(t)
	if n := reloads() - before; n != 1 {
		t.Errorf("a symlink swap made %d reloads, want 1", n)
	}
	if got := r.file(t, "env/shop.env"); !strings.Contains(got, cartEnv) {
		t.Errorf("the Service the new checkout lacks left at once:\n%s", got)
	}
	if st.LastSync.Reason != "change" {
		t.Errorf("last sync %+v, want reason change", st.LastSync)
	}
}
