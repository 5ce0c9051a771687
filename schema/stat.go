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
// It also keeps the latest Load's walk of the tree (its files, grouped as
// the loader validates them, with the keys of their results), so that a
// Load told which paths changed (Options.Changed) neither lists the
// directories nor stats the other files.
//
// A StatCache belongs to one tree; the zero value is empty and ready to use.
// Loads that share it run one at a time (Load holds it for its whole run).
// It holds only the files of the latest Load, so it does not grow over a
// long-running daemon. The memo works on Linux; elsewhere every file is read.
type StatCache struct {
	mu    sync.Mutex
	files map[string]statEntry // by real path (symlinks resolved)
	walk  *walkState           // the latest Load's walk, for Options.Changed; nil: none to trust
	spare *validator           // a validator of an earlier Load, to reuse
	// changed: a Load changed what Records returns since NewStatCacheFrom
	// or Records (or may have: it is not cleared when unsure).
	changed bool
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
	// The unit's own record, not a copy: a unit's meta is never written
	// once noted (a Load that reads or recalls the unit makes it anew).
	*fileMeta
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
		u.meta[i] = *e.fileMeta
	}
	return true
}

// remember replaces the memo with the files of units, as read or recalled by
// the Load that started at start; recalled tells that the Load recalled
// every file. Files no longer in the tree are dropped. It also sets each
// unit's known flag (see unit).
func (c *StatCache) remember(units []*unit, start time.Time, recalled bool) {
	limit := start.Add(-racyMargin).UnixNano()
	files := make(map[string]statEntry, len(c.files))
	for _, u := range units {
		note(files, u, limit)
	}
	// Every file recalled was trusted and is noted again as it was: the
	// records are the same unless files left the tree. Else compare them:
	// a file read again because it is too recent to trust (or dated in
	// the future) changes no record.
	if (!recalled || len(files) != len(c.files)) && !sameTrusted(c.files, files) {
		c.changed = true
	}
	c.files = files
}

// sameTrusted reports whether the trusted entries of a and b are the same
// files with the same identities and contents.
func sameTrusted(a, b map[string]statEntry) bool {
	n := 0
	for name, e := range b {
		if !e.trusted {
			continue
		}
		n++
		if o, ok := a[name]; !ok || !o.trusted || *o.fileMeta != *e.fileMeta {
			return false
		}
	}
	for _, e := range a {
		if e.trusted {
			n--
		}
	}
	return n == 0
}

// update changes the memo after a Load told what changed: only the units
// it read or recalled (todo) are noted again, and the files gone are
// forgotten; the other units' entries stand as they were.
func (c *StatCache) update(todo []*unit, gone []string, start time.Time) {
	limit := start.Add(-racyMargin).UnixNano()
	if c.files == nil {
		c.files = map[string]statEntry{}
	}
	if len(todo) > 0 || len(gone) > 0 {
		c.changed = true
	}
	for _, name := range gone {
		delete(c.files, name)
	}
	for _, u := range todo {
		for _, name := range u.real {
			delete(c.files, name)
		}
		note(c.files, u, limit)
	}
}

// note enters u's files into files, trusted when their times are older
// than limit, and sets u.known: its result is keyed and every file's memo
// trusted.
func note(files map[string]statEntry, u *unit, limit int64) {
	known := u.ok && len(u.meta) == len(u.real)
	for i, name := range u.real {
		if i >= len(u.meta) {
			break
		}
		m := &u.meta[i]
		trusted := m.st.ok && m.st.mtime < limit && m.st.ctime < limit
		if m.st.ok {
			files[name] = statEntry{m, trusted}
		}
		known = known && trusted
	}
	u.known = known
}

// StatRecord is what a StatCache knows of a file it trusts: the file's
// identity and its content's length and hash. Records and NewStatCacheFrom
// let a cache keep the memo from one process to the next, so that a CLI
// run with a warm cache reads only the files changed since the run before
// (internal/cache keeps the records in its pack).
type StatRecord struct {
	Path         string // real path, symlinks resolved
	Dev, Ino     uint64
	StatSize     int64 // the size stat told when the file was opened
	Mtime, Ctime int64 // ns since the epoch
	Size         int64 // the length of the content read
	Sum          [32]byte
}

// Records returns the files the StatCache trusts: those of the latest
// Load whose times were older than its start by racyMargin. Their order is
// unspecified. A record stays true for as long as the file's identity does:
// a later write, rename over, chmod or touch changes it.
func (c *StatCache) Records() []StatRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.changed = false
	recs := make([]StatRecord, 0, len(c.files))
	for name, e := range c.files {
		if !e.trusted {
			continue
		}
		st := e.st
		recs = append(recs, StatRecord{Path: name, Dev: st.dev, Ino: st.ino, StatSize: st.size,
			Mtime: st.mtime, Ctime: st.ctime, Size: e.size, Sum: e.sum})
	}
	return recs
}

// Changed reports whether a Load changed the records since
// NewStatCacheFrom made the StatCache or Records last returned them, so
// that a cache that keeps them knows whether to write them again.
func (c *StatCache) Changed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// NewStatCacheFrom returns a StatCache that trusts the files recs describe,
// as Records returned them (from a StatCache of another process): a Load
// with it reads none of those files whose identity is still the same. It
// does not keep recs.
func NewStatCacheFrom(recs []StatRecord) *StatCache {
	c := &StatCache{files: make(map[string]statEntry, len(recs))}
	metas := make([]fileMeta, len(recs))
	for i, r := range recs {
		m := &metas[i]
		*m = fileMeta{size: r.Size, sum: r.Sum, st: fileStat{dev: r.Dev, ino: r.Ino, size: r.StatSize, mtime: r.Mtime, ctime: r.Ctime, ok: true}}
		c.files[r.Path] = statEntry{m, true}
	}
	return c
}
