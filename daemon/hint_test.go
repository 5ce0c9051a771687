package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
)

// msgLog is a slog.Handler that passes records to a test's log and
// counts their messages.
type msgLog struct {
	slog.Handler
	mu   *sync.Mutex
	seen map[string]int
}

func newMsgLog(t *testing.T) *msgLog {
	return &msgLog{
		Handler: slog.NewTextHandler(tlog{t}, &slog.HandlerOptions{Level: slog.LevelDebug}),
		mu:      new(sync.Mutex), seen: map[string]int{},
	}
}

func (h *msgLog) Handle(ctx context.Context, r slog.Record) error {
	h.mu.Lock()
	h.seen[r.Message]++
	h.mu.Unlock()
	return h.Handler.Handle(ctx, r)
}

func (h *msgLog) WithAttrs(as []slog.Attr) slog.Handler {
	return &msgLog{Handler: h.Handler.WithAttrs(as), mu: h.mu, seen: h.seen}
}

func (h *msgLog) WithGroup(name string) slog.Handler {
	return &msgLog{Handler: h.Handler.WithGroup(name), mu: h.mu, seen: h.seen}
}

// count is how many records with message msg were logged so far.
func (h *msgLog) count(msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seen[msg]
}

// TestHintedReload: a reload for files created, saved or deleted in the
// tree's directories reads just those files (no rescan of the tree), and
// picks up a new file and a deleted one; a new directory still rescans.
func TestHintedReload(t *testing.T) {
	tree := basicTree(t)
	stateDir := filepath.Join(t.TempDir(), "state")
	log := newMsgLog(t)
	w, err := New(Options{
		Tree: tree, Node: "node-1", StateDir: stateDir, Dataplane: DataplaneNone,
		Debounce: 50 * time.Millisecond, Resync: -1, Logger: slog.New(log),
	})
	if err != nil {
		t.Fatal(err)
	}
	runSynced(t, w, deadline)
	r := &running{Watcher: w, stateDir: stateDir}
	r.fileHas(t, "env/shop.env", "CART_PORT_80_TCP=")
	hinted := func(t *testing.T, change func()) {
		t.Helper()
		rescans, reloads := log.count("rescanning the tree"), log.count("reloading the files changed")
		change()
		waitFor(t, "a reload of the files changed", func() (bool, string) {
			return log.count("reloading the files changed") > reloads, ""
		})
		if n := log.count("rescanning the tree"); n != rescans {
			t.Errorf("%d rescans of the tree, want none", n-rescans)
		}
	}

	t.Run("new file in a directory", func(t *testing.T) {
		hinted(t, func() { writeFile(t, filepath.Join(tree, "web/api.yaml"), apiService) })
		r.fileHas(t, "env/shop.env", "API_PORT_8081_TCP=")
	})
	t.Run("file saved", func(t *testing.T) {
		hinted(t, func() {
			atomicWrite(t, filepath.Join(tree, "web/api.yaml"), strings.Replace(apiService, "8081", "8083", 1))
		})
		r.fileHas(t, "env/shop.env", "API_PORT_8083_TCP=")
	})
	t.Run("file deleted", func(t *testing.T) {
		hinted(t, func() {
			if err := os.Remove(filepath.Join(tree, "cart/service.yaml")); err != nil {
				t.Fatal(err)
			}
		})
		waitFor(t, "cart gone from env/shop.env", func() (bool, string) {
			got := r.file(t, "env/shop.env")
			return !strings.Contains(got, "CART_"), got
		})
	})
	t.Run("new directory", func(t *testing.T) {
		rescans := log.count("rescanning the tree")
		writeFile(t, filepath.Join(tree, "cart2/service.yaml"), strings.Replace(apiService, "name: api", "name: cart2", 1))
		r.fileHas(t, "env/shop.env", "CART2_PORT_8081_TCP=")
		if log.count("rescanning the tree") == rescans {
			t.Error("a new directory did not rescan the tree")
		}
		// Watched from now on.
		hinted(t, func() {
			atomicWrite(t, filepath.Join(tree, "cart2/service.yaml"), strings.Replace(apiService, "name: api", "name: cart3", 1))
		})
		r.fileHas(t, "env/shop.env", "CART3_PORT_8081_TCP=")
	})
}

// TestChanges: which events a reload may take as the paths changed, and
// which make it rescan and read the whole tree.
func TestChanges(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "tree/sub/a.yaml"), "x")
	if err := os.Symlink("sub", filepath.Join(root, "tree/link")); err != nil {
		t.Fatal(err)
	}
	tree := filepath.Join(root, "tree")
	watched := scan(tree)
	for _, tc := range []struct {
		name string
		path string
		op   fsnotify.Op
		full bool
	}{
		{"file written", "tree/sub/a.yaml", fsnotify.Write, false},
		{"file created", "tree/sub/a.yaml", fsnotify.Create, false},
		{"file removed", "tree/sub/gone.yaml", fsnotify.Remove, false},
		{"file gone before its create is seen", "tree/sub/gone.yaml", fsnotify.Create, false},
		{"directory created", "tree/sub", fsnotify.Create, true},
		{"symlink created", "tree/link", fsnotify.Create, true},
		{"watched directory removed", "tree/sub", fsnotify.Remove, true},
		{"watched directory renamed", "tree/sub", fsnotify.Rename, true},
		{"the root replaced", "tree", fsnotify.Create, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c changes
			path := filepath.Join(root, filepath.FromSlash(tc.path))
			if !watched.matters(path) {
				t.Fatalf("%s does not matter", path)
			}
			c.add(path, tc.op, watched)
			paths, ok := c.take()
			if ok == tc.full {
				t.Errorf("take: ok %v, want %v", ok, !tc.full)
			}
			if ok && (len(paths) != 1 || paths[0] != path) {
				t.Errorf("paths %q, want %s", paths, path)
			}
			if paths, ok := c.take(); !ok || len(paths) != 0 {
				t.Errorf("after take: %q, %v; want none, ok", paths, ok)
			}
		})
	}
	t.Run("events lost", func(t *testing.T) {
		var c changes
		c.add(filepath.Join(tree, "sub/a.yaml"), fsnotify.Write, watched)
		c.lost()
		if _, ok := c.take(); ok {
			t.Error("ok after events were lost")
		}
	})
	t.Run("too many paths", func(t *testing.T) {
		var c changes
		for i := range maxChanges + 1 {
			c.add(filepath.Join(tree, "sub", strings.Repeat("x", i%50)+string(rune('a'+i/50))+".yaml"), fsnotify.Write, watched)
		}
		if _, ok := c.take(); ok {
			t.Error("ok with more than maxChanges paths")
		}
	})
}
