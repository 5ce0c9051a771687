package schema

import (
	"os"
	"sync"
	"time"
)

// StatCache remembers, from one Load to the next, the identity of each file
// read (device, inode, size, modification and change times) with the hash of
// its content. With it, Load takes the hash of a file whose identity did not
// change from the memo instead of reading the file, so that reloading a large
// tree in which few files changed costs a stat per file. It only helps
// together with Options.Cache, which holds the results the hashes lead to.
//
// A StatCache belongs to one tree; the zero value is empty and ready to use.
// Loads that share it run one at a time (Load holds it for its whole run).
// It holds only the files of the latest Load, so it does not grow over a
// long-running daemon. The memo works on Linux; elsewhere every file is read.
type StatCache struct {
	mu    sync.Mutex
	files map[string]statEntry // by real path (symlinks resolved)
}

// NewStatCache returns an empty StatCache.
func NewStatCache() *StatCache { return &StatCache{} }

// Len returns the number of files remembered, for logs and tests.
func (c *StatCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.files)
}

// fileStat is what identifies a version of a file: any write, rename over,
// chmod or touch changes one of the fields (but see racyMargin). ok is false
// when the system gives no such identity; such files are never memoized.
type fileStat struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64 // ns since the epoch
	ok           bool
}

type statEntry struct {
	fileMeta
	trusted bool // st's times were older than the recording Load's start by racyMargin
}

// racyMargin is how much older than the start of a Load a file's mtime and
// ctime must be for that Load's memo of the file to be trusted later. Like
// git's racily clean index entries: a file written again within the
// granularity of its timestamps, and to the same size, keeps its stat, so a
// memo taken shortly after a write might describe the content before a
// second write. A write that happens after the Load started gets timestamps
// no older than the start minus the file system's lag and granularity, so
// when the recorded times are older than that, any later write shows. Linux
// stamps files from a clock that lags by up to a tick (10 ms at HZ=100), and
// some file systems keep whole seconds (ext4 with 128-byte inodes, HFS+) or
// two (FAT); 2 s covers them all. The cost is small: a file changed within
// 2 s before a Load is read once more by the next one. (Network file systems
// whose server clock lags ours by more than that are not covered.) A
// variable so that tests can change it.
var racyMargin = 2 * time.Second

// lstat returns the identity of the file at name, a real path.
func lstat(name string) fileStat {
	fi, err := os.Lstat(name)
	if err != nil || !fi.Mode().IsRegular() {
		return fileStat{}
	}
	return statOf(fi)
}

// recall fills in the sizes and hashes of u's files from memo, without
// reading them, when every file's identity is unchanged and trusted. It
// reports whether it could.
func (u *unit) recall(memo map[string]statEntry, max int64) bool {
	u.meta = make([]fileMeta, len(u.real))
	for i, name := range u.real {
		e, ok := memo[name]
		if !ok || !e.trusted || e.size > max {
			return false
		}
		if st := lstat(name); !st.ok || st != e.st {
			return false
		}
		u.meta[i] = e.fileMeta
	}
	return true
}

// remember replaces the memo with the files of units, as read or recalled by
// the Load that started at start. Files no longer in the tree are dropped.
func (c *StatCache) remember(units []*unit, start time.Time) {
	limit := start.Add(-racyMargin).UnixNano()
	files := make(map[string]statEntry, len(c.files))
	for _, u := range units {
		for i, name := range u.real {
			if m := u.meta[i]; m.st.ok {
				files[name] = statEntry{m, m.st.mtime < limit && m.st.ctime < limit}
			}
		}
	}
	c.files = files
}
