package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestGitLockWaits: in a git work tree, a change made while git holds
// .git/index.lock is not applied until the lock goes; a lock older than
// a minute is reported as stale and no longer waited for. The status,
// the metrics and the log say so. Needs the git binary, not root.
func TestGitLockWaits(t *testing.T) {
	dir := t.TempDir()
	gitRepo(t, dir)
	tree := filepath.Join(dir, "tree")
	lock := filepath.Join(dir, ".git", gitIndexLock)
	r, log := startGrace(t, tree, -1, nil)
	r.fileHas(t, "env/shop.env", "WEB_PORT_80_TCP=")
	const waits = "reload waits for git's index lock"

	t.Run("held", func(t *testing.T) {
		writeFile(t, lock, "")
		st := r.statusUntil(t, "the git lock held", func(s *Status) bool { return s.GitLock != nil })
		if st.GitLock.Path != lock || st.GitLock.Stale {
			t.Errorf("git lock %+v, want %s, not stale", *st.GitLock, lock)
		}
		log.waitRec(t, 0, "git holds its index lock (a checkout, merge or pull under way): reloads wait for it", "lock", lock)
		if n := r.metric(t, "netspec_git_lock_held"); n != 1 {
			t.Errorf("netspec_git_lock_held = %v, want 1", n)
		}
		n := len(log.with(waits))
		applied := len(log.with("synced"))
		atomicWrite(t, filepath.Join(tree, "web/service.yaml"), webService("8088"))
		log.waitRec(t, n, waits) // the change's reload, waiting
		r.idle(t)
		if got := r.file(t, "env/shop.env"); !strings.Contains(got, "WEB_PORT_80_TCP=") {
			t.Errorf("a change was applied while git held its lock:\n%s", got)
		}
		if got := len(log.with("synced")); got != applied {
			t.Errorf("%d syncs applied while git held its lock", got-applied)
		}
	})
	t.Run("released", func(t *testing.T) {
		if err := os.Remove(lock); err != nil {
			t.Fatal(err)
		}
		r.fileHas(t, "env/shop.env", "WEB_PORT_8088_TCP=")
		log.waitRec(t, 0, "git released its index lock: reloading", "lock", lock)
		r.statusUntil(t, "no git lock", func(s *Status) bool { return s.GitLock == nil })
		if n := r.metric(t, "netspec_git_lock_held"); n != 0 {
			t.Errorf("netspec_git_lock_held = %v, want 0", n)
		}
	})
	t.Run("stale", func(t *testing.T) {
		// Made aside with its time a while back, then renamed into
		// place: one event, of a lock already stale.
		aside := filepath.Join(dir, ".git", "old-lock")
		writeFile(t, aside, "")
		old := time.Now().Add(-2 * GitLockStale)
		if err := os.Chtimes(aside, old, old); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(aside, lock); err != nil {
			t.Fatal(err)
		}
		st := r.statusUntil(t, "a stale git lock", func(s *Status) bool { return s.GitLock != nil && s.GitLock.Stale })
		if st.GitLock.Path != lock {
			t.Errorf("git lock %+v, want %s", *st.GitLock, lock)
		}
		log.waitRec(t, 0, "git's index lock is older than a minute, taken as stale (left by a git that died?): reloading without waiting for it; remove it once no git runs", "lock", lock)
		atomicWrite(t, filepath.Join(tree, "web/service.yaml"), webService("8089"))
		r.fileHas(t, "env/shop.env", "WEB_PORT_8089_TCP=")
		if n := r.metric(t, "netspec_git_lock_stale"); n != 1 {
			t.Errorf("netspec_git_lock_stale = %v, want 1", n)
		}
		if n := r.metric(t, "netspec_git_lock_held"); n != 0 {
			t.Errorf("netspec_git_lock_held = %v with a stale lock, want 0", n)
		}
	})
}
