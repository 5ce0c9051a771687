package state

import (
	"strings"
	"syscall"
	"time"
)

// What a Dir knows of the zone, env and resolv.conf files it holds.
//
// A daemon's reload gives the dir the very same bytes (same array, same
// length: render.FilesMemo) for every file whose input did not change,
// which at 10,000 Services is nearly all of 6 MB. A Dir remembers, for
// each such file it found equal to what it was given (diff), the bytes it
// was given and the file's stat: device, inode, size, modification and
// change times. When it is given the same bytes again and the file's stat
// is as it was, the file still holds what it held then, and diff takes it
// as unchanged without reading it: the file stage of a reload costs what
// changed. A file written, renamed over, truncated, appended to or
// touched by anyone changes its stat (a rename gives a new inode; a write
// a new change time, which no one can set back) and is read again.
//
// Timestamps have a granularity (a kernel tick, or a second on some file
// systems): a file changed in the same tick as it was read could keep its
// stat. A file is therefore remembered only when its times are older than
// racyMargin, as git does for its index; a file just written is read once
// more at the next diff. Forget makes the next diff read every file (a
// daemon's full sync and resync, which repair what was changed by hand).

// racyMargin is how old a file's times must be for a Dir to remember
// them: far more than any file system's timestamp granularity.
const racyMargin = 2 * time.Second

// knownFile is what a Dir remembers of a file it found equal to in.
type knownFile struct {
	in []byte
	st knownStat
}

// knownStat is what a Dir compares of a file's stat.
type knownStat struct {
	dev, ino     uint64
	size         int64
	mtime, ctime syscall.Timespec
}

// knownStatOf stats rel; ok is false when it is not a regular file or
// cannot be stat'ed (then it is simply read).
func (d *Dir) knownStatOf(rel string) (knownStat, bool) {
	var st syscall.Stat_t
	if err := syscall.Lstat(d.abs(rel), &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return knownStat{}, false
	}
	return knownStat{dev: uint64(st.Dev), ino: st.Ino, size: st.Size, mtime: st.Mtim, ctime: st.Ctim}, true
}

// unchanged tells whether rel holds what it held when the dir found it
// equal to in: the same bytes are given and its stat is as it was.
func (d *Dir) unchanged(rel string, in []byte) bool {
	k, ok := d.known[rel]
	if !ok || len(k.in) != len(in) || len(in) > 0 && &k.in[0] != &in[0] {
		return false
	}
	st, ok := d.knownStatOf(rel)
	return ok && st == k.st
}

// confirm remembers that rel, stat'ed as st before it was read, held what
// in makes it (see unchanged), unless its times are too recent to tell a
// later change (racyMargin). Only the zone, env and resolv.conf files are
// remembered, never the record.
func (d *Dir) confirm(rel string, in []byte, st knownStat) {
	delete(d.known, rel)
	if !strings.Contains(rel, "/") {
		return
	}
	limit := time.Now().Add(-racyMargin)
	if d.now != nil {
		limit = d.now().Add(-racyMargin)
	}
	if time.Unix(st.mtime.Unix()).After(limit) || time.Unix(st.ctime.Unix()).After(limit) {
		return
	}
	if d.known == nil {
		d.known = make(map[string]knownFile)
	}
	d.known[rel] = knownFile{in: in, st: st}
}

// Forget makes the next Plan, Apply or ApplyRecord read every file of
// the dir back, as a fresh Dir does: what it remembers of the files it
// found unchanged is forgotten (a daemon's full sync and resync, which
// repair files changed by hand with their stat kept).
func (d *Dir) Forget() { d.known = nil }

// keepKnown forgets the files that are no longer wanted.
func (d *Dir) keepKnown(want map[string][]byte) {
	for p := range d.known {
		if _, ok := want[p]; !ok {
			delete(d.known, p)
		}
	}
}
