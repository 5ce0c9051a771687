package daemon

import (
	"os"
	"time"
)

// gitIndexLock is the name of the lock git takes on its index, in the
// git dir, while it rewrites the work tree (checkout, merge, pull, reset)
// and removes once the index says what the files are.
const gitIndexLock = "index.lock"

// GitLockStale is the age past which a git index lock is taken as left
// by a git that died: reported, and no longer waited for.
const GitLockStale = time.Minute

// GitLockStatus is git's index lock on the tree's work tree, in Status:
// while it is held (not stale), reloads wait for it to go.
type GitLockStatus struct {
	Path string `json:"path"`
	// Since is the lock's modification time (when git took it; the
	// time it was seen when that is in the future).
	Since time.Time `json:"since"`
	// Stale tells a lock older than GitLockStale: reloads no longer wait.
	Stale bool `json:"stale"`
}

// lockAt tells whether the lock file at path exists as of now, and how:
// since when, and whether it is stale. An error other than its absence
// counts as no lock: reloads never wait for what cannot be read.
func lockAt(path string, now time.Time) *GitLockStatus {
	fi, err := os.Stat(path)
	if err != nil {
		return nil
	}
	since := fi.ModTime()
	if since.After(now) {
		since = now
	}
	since = since.UTC().Truncate(time.Millisecond)
	return &GitLockStatus{Path: path, Since: since, Stale: now.Sub(since) >= GitLockStale}
}

// gitLocked tells whether a reload must wait for git's index lock at now
// (held: it exists and is not stale), and until when it turns stale. It
// keeps the lock's state in the status and the metrics, and logs each
// lock once: held (info), stale (warning) and released.
func (w *Watcher) gitLocked(now time.Time) (until time.Time, held bool) {
	var l *GitLockStatus
	if w.git.lock != "" {
		l = lockAt(w.git.lock, now)
	}
	was := w.cur.GitLock
	switch {
	case l == nil && was != nil:
		w.log.Info("git released its index lock: reloading", "lock", was.Path)
	case l == nil:
	case l.Stale && (was == nil || !was.Stale || !was.Since.Equal(l.Since)):
		w.log.Warn("git's index lock is older than a minute, taken as stale (left by a git that died?): reloading without waiting for it; remove it once no git runs",
			"lock", l.Path, "since", l.Since)
	case !l.Stale && (was == nil || !was.Since.Equal(l.Since)):
		w.log.Info("git holds its index lock (a checkout, merge or pull under way): reloads wait for it", "lock", l.Path, "since", l.Since)
	}
	if (l == nil) != (was == nil) || l != nil && *l != *was {
		w.cur.GitLock = l
		w.metrics.gitLock(l)
		w.publishStatus()
	}
	if l == nil || l.Stale {
		return time.Time{}, false
	}
	return l.Since.Add(GitLockStale), true
}
