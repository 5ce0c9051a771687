package state

import (
	"strings"
	"time"
)

// What a Dir knows of the zone, env and resolv.conf files it holds.
//
// A daemon's reload gives the dir, for every file whose input did not
// change, the ID of the content it gave last time (File; render.FilesMemo),
// which at 10,000 Services is nearly all of 6 MB of files. A Dir
// remembers, for each file it found holding the content of a File, that
// File's ID and the file's stat: device, inode, size, modification and
// change times. When it is given the same ID again and the file's stat is
// as it was, the file still holds what it held then, and diff takes it as
// unchanged without rendering or reading it: the file stage of a reload
// costs what changed, and no one keeps the files' bytes between reloads.
// A file written, renamed over, truncated, appended to or touched by
// anyone changes its stat (a rename gives a new inode; a write a new
// change time, which no one can set back) and is read again.
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

// knownFile is what a Dir remembers of a file it found holding the
// content of a File: the File's ID and the file's stat.
type knownFile struct {
	id uint64
	st fileID
}

// unchanged tells whether rel holds what it held when the dir found it
// holding the content named id: id is that ID (not 0) and the file's stat
// is as it was.
func (d *Dir) unchanged(rel string, id uint64) bool {
	k, ok := d.known[rel]
	if !ok || id == 0 || k.id != id {
		return false
	}
	st, err := d.statID(rel)
	return err == nil && st == k.st
}

// confirm remembers that rel, stat'ed as st before it was read, held the
// content named id (see unchanged), unless id is 0, st is unknown (not
// exists) or its times are too recent to tell a later change
// (racyMargin). Only the zone, env and resolv.conf files are remembered,
// never the record.
func (d *Dir) confirm(rel string, id uint64, st fileID) {
	delete(d.known, rel)
	if id == 0 || !st.exists || !strings.Contains(rel, "/") {
		return
	}
	limit := d.now().Add(-racyMargin)
	if time.Unix(st.mtime.Unix()).After(limit) || time.Unix(st.ctime.Unix()).After(limit) {
		return
	}
	if d.known == nil {
		d.known = make(map[string]knownFile)
	}
	d.known[rel] = knownFile{id: id, st: st}
}

// Forget makes the next Plan, Apply or ApplyRecord read every file of
// the dir back, as a fresh Dir does: what it remembers of the files it
// found unchanged is forgotten (a daemon's full sync and resync, which
// repair files changed by hand with their stat kept).
func (d *Dir) Forget() { d.known = nil }

// keepKnown forgets the files that are no longer wanted.
func (d *Dir) keepKnown(want map[string]File) {
	for p := range d.known {
		if _, ok := want[p]; !ok {
			delete(d.known, p)
		}
	}
}
