package daemon

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestLockAt: a git index lock is held while younger than GitLockStale,
// stale from then on, and none when absent; a modification time in the
// future counts from now.
func TestLockAt(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		mtime  time.Duration // relative to now; 0 with absent
		absent bool
		want   *GitLockStatus // Path filled in
	}{
		{name: "absent", absent: true},
		{name: "fresh", mtime: -2 * time.Second, want: &GitLockStatus{Since: now.Add(-2 * time.Second)}},
		{name: "just under a minute", mtime: -GitLockStale + time.Millisecond, want: &GitLockStatus{Since: now.Add(-GitLockStale + time.Millisecond)}},
		{name: "a minute old", mtime: -GitLockStale, want: &GitLockStatus{Since: now.Add(-GitLockStale), Stale: true}},
		{name: "in the future", mtime: time.Hour, want: &GitLockStatus{Since: now}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), gitIndexLock)
			if !tt.absent {
				writeFile(t, path, "")
				if err := os.Chtimes(path, now.Add(tt.mtime), now.Add(tt.mtime)); err != nil {
					t.Fatal(err)
				}
			}
			got := lockAt(path, now)
			if tt.want != nil {
				tt.want.Path = path
			}
			switch {
			case got == nil && tt.want == nil:
			case got == nil || tt.want == nil:
				t.Errorf("lockAt = %+v, want %+v", got, tt.want)
			case *got != *tt.want:
				t.Errorf("lockAt = %+v, want %+v", *got, *tt.want)
			}
		})
	}
}

// TestDeferredMerge: the syncs that waited for a git lock run as one, the
// strongest of them, with the first file event's time.
func TestDeferredMerge(t *testing.T) {
	t1 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	t2 := t1.Add(time.Second)
	tests := []struct {
		name      string
		waiting   *deferredSync
		why       syncReason
		since     time.Time
		wantWhy   syncReason
		wantSince time.Time
	}{
		{name: "none waiting", why: syncChange, since: t2, wantWhy: syncChange, wantSince: t2},
		{name: "changes: first event stays", waiting: &deferredSync{why: syncChange, since: t1}, why: syncChange, since: t2, wantWhy: syncChange, wantSince: t1},
		{name: "change after SIGHUP", waiting: &deferredSync{why: syncReload}, why: syncChange, since: t2, wantWhy: syncReload, wantSince: t2},
		{name: "resync outranks SIGHUP", waiting: &deferredSync{why: syncReload, since: t1}, why: syncResync, wantWhy: syncResync, wantSince: t1},
		{name: "SIGHUP under resync", waiting: &deferredSync{why: syncResync}, why: syncReload, wantWhy: syncResync},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			why, since := tt.waiting.merge(tt.why, tt.since)
			if why != tt.wantWhy || !since.Equal(tt.wantSince) {
				t.Errorf("merge = %s, %v; want %s, %v", why, since, tt.wantWhy, tt.wantSince)
			}
		})
	}
}
