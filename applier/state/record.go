package state

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"netspec.dev/netspec/internal/atomicfile"
)

// The applied plan's record.
//
// The dir records the last applied plan in two files: plan.json, a whole
// plan (the base), and plan.log, the changes applied since, one record
// each (ApplyRecord). A daemon's reload thus writes a few kilobytes — the
// change — not the whole plan (27 MB at 10,000 Services). The log is
// bound to its base: its first line holds the SHA-256 of the plan.json it
// applies to, and a log whose base is not the dir's plan.json is stale and
// ignored. When the log outgrows a quarter of plan.json (or the dir is not
// as this Dir last left it: another process wrote it), the whole plan is
// written as plan.json and the log removed.
//
// plan.log:
//
//	netspec plan.log 1 <sha256 of plan.json, hex>
//	delta <seq> <length> <sha256 of the payload, hex>
//	<payload: length bytes>
//	delta <seq+1> …
//
// A record counts only when it is whole: its header, all its bytes, and
// their checksum. A crash while one is appended leaves a torn tail, which
// readers ignore and the next ApplyRecord replaces (it writes the whole
// plan when the log is not as it left it). So, as with plan.json alone,
// the record always names a plan that was completely applied: a record is
// appended (and synced) after every zone and env file of its plan is in
// place.

const (
	logMagic = "netspec plan.log 1 "
	// minLogLimit is the least the log may grow to before the whole plan
	// is written again: for a small plan, a quarter of it is tiny.
	minLogLimit = 64 << 10
)

// planRecord is the dir's record as a Dir last read or wrote it.
type planRecord struct {
	base, log fileID
	baseSum   [sha256.Size]byte
	seq       int // records in the log
}

// fileID tells whether a file was changed: a rename over it, a write, an
// append or a touch changes it (see known.go). exists is false for a file
// that is missing or not a regular file.
type fileID struct {
	exists       bool
	dev, ino     uint64
	size         int64
	mtime, ctime syscall.Timespec
}

// statID stats rel, not following a symbolic link.
func (d *Dir) statID(rel string) (fileID, error) {
	fi, err := os.Lstat(d.abs(rel))
	if errors.Is(err, fs.ErrNotExist) {
		return fileID{}, nil
	}
	if err != nil {
		return fileID{}, d.errorf("%s: %w", rel, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.Mode().IsRegular() {
		return fileID{}, nil
	}
	return fileID{exists: true, dev: uint64(st.Dev), ino: st.Ino, size: st.Size, mtime: st.Mtim, ctime: st.Ctim}, nil
}

// LastPlan returns the dir's record of the last applied plan: the content
// of plan.json and the payloads of plan.log's whole records that apply to
// it, in order; nil and no error when the dir has no plan.json.
func (d *Dir) LastPlan() (base []byte, deltas [][]byte, err error) {
	unlock, err := d.lockIfThere(syscall.LOCK_SH)
	if err != nil || unlock == nil {
		return nil, nil, err
	}
	defer unlock()
	baseID, err := d.statID(PlanFile)
	if err != nil {
		return nil, nil, err
	}
	logID, err := d.statID(LogFile)
	if err != nil {
		return nil, nil, err
	}
	base, err = d.readHeld(PlanFile)
	if err != nil || base == nil {
		return nil, nil, err
	}
	log, err := d.readHeld(LogFile)
	if err != nil {
		return nil, nil, err
	}
	sum := sha256.Sum256(base)
	deltas, good := parseLog(log, sum)
	d.rec = &planRecord{base: baseID, log: logID, baseSum: sum, seq: len(deltas)}
	if logID.exists && good != logID.size {
		// Stale or torn: not the log ApplyRecord may append to.
		d.rec.log.size = -1
	}
	return base, deltas, nil
}

// parseLog returns the payloads of the whole records of a log that
// applies to the plan.json of sum, and the length of the log they make up
// (0 when the log is not of that plan.json).
func parseLog(log []byte, sum [sha256.Size]byte) (payloads [][]byte, good int64) {
	header := logMagic + hex.EncodeToString(sum[:]) + "\n"
	if !bytes.HasPrefix(log, []byte(header)) {
		return nil, 0
	}
	at := len(header)
	for seq := 1; ; seq++ {
		nl := bytes.IndexByte(log[at:], '\n')
		if nl < 0 {
			break
		}
		f := strings.Fields(string(log[at : at+nl]))
		if len(f) != 4 || f[0] != "delta" || f[1] != strconv.Itoa(seq) {
			break
		}
		n, err := strconv.Atoi(f[2])
		start := at + nl + 1
		if err != nil || n < 0 || n > len(log)-start {
			break
		}
		payload := log[start : start+n]
		if s := sha256.Sum256(payload); hex.EncodeToString(s[:]) != f[3] {
			break
		}
		payloads = append(payloads, payload)
		at = start + n
	}
	return payloads, int64(at)
}

// PlanFiles compares the files a plan should have — the zone, env and
// resolv.conf files, rendered, as render.Files gives them: relative slash
// paths to content — with what the dir holds, and reports which files
// ApplyRecord would write (new or changed) and remove. It writes nothing.
// A zone is compared by its records, its SOA serial aside, and written
// with its serial rewritten (see serial.go). The record and any other
// path that is not of netspec's kinds (such as render.Files' ruleset) are
// errors.
// The record is not compared: the caller knows whether its plan is the
// one recorded.
func (d *Dir) PlanFiles(files map[string]File) (Changes, error) {
	unlock, err := d.lockIfThere(syscall.LOCK_SH)
	if err != nil {
		return Changes{}, err
	}
	if unlock != nil {
		defer unlock()
	}
	return d.diff(files, nil)
}

// ApplyRecord makes the dir hold files (as for PlanFiles): it writes the
// added and changed files atomically and removes the files of netspec's
// kinds that files does not have, leaving every other file alone. Then it
// records the applied plan: delta, the change from the plan the dir
// records, is appended to plan.log when the record is as this Dir last
// read or wrote it (LastPlan, ApplyRecord) and the log stays under a
// quarter of plan.json; otherwise full — which writes the whole plan to
// its writer — is written as plan.json and the log removed. delta nil means the plan did not change: nothing is written
// unless the record is not known to be the caller's, which then writes
// full. plan.json is reported added or changed when the record changes.
// full writes into plan.json's temporary file as it renders, so that the
// whole plan (27 MB at 10,000 Services) is never held. ApplyRecord is
// PrepareRecord followed by Commit.
func (d *Dir) ApplyRecord(files map[string]File, delta []byte, full func(io.Writer) error) (Changes, error) {
	w, err := d.PrepareRecord(files, delta, full)
	if err != nil {
		return Changes{}, err
	}
	return w.Commit()
}

// Prepared is an ApplyRecord in two steps (PrepareRecord, then Commit or
// Abort), so that its costly part can run while something else is
// waited for: an applier prepares the write while the kernel takes its
// batch, and commits it only once the kernel holds the plan. It holds the
// dir's lock from PrepareRecord to Commit or Abort. Its methods are for
// one goroutine at a time.
//
// put writes each added or changed file to its temporary file, whole and
// synced, and leaves its name alone; once every file is ready,
// commitFiles (and place, for the record) renames them over their names,
// each followed by a sync of its directory, and removes the stale files.
// Nothing a reader sees changes before commitFiles, so the costly part of
// a write (rendering, writing, syncing) can be done before the caller
// knows the write is wanted, and Abort then leaves the dir as it was.
type Prepared struct {
	d      *Dir
	unlock func()               // nil once committed or aborted
	temps  map[string]*tempFile // rel → its temporary file, synced and closed
	made   []string             // subdirectories put created, for Abort
	plan   Changes
	record *recordWrite
}

// PrepareRecord does the part of ApplyRecord (same arguments) that changes
// nothing a reader sees: it locks the dir, sweeps the temporary files of
// a writer that died, compares files with the dir's and writes each one
// to write, and the whole plan when it is to be written, to a temporary
// file, one at a time, each synced. Their names, the stale files and the
// record are left alone until Commit. On an error nothing in the dir has
// changed (the temporary files are removed) and there is nothing to
// commit or abort.
func (d *Dir) PrepareRecord(files map[string]File, delta []byte, full func(io.Writer) error) (*Prepared, error) {
	unlock, err := d.beginWrite()
	if err != nil {
		return nil, err
	}
	w := &Prepared{d: d, unlock: unlock, temps: map[string]*tempFile{}}
	if w.plan, err = d.diff(files, w.put); err == nil {
		w.record, err = w.prepareRecord(delta, full)
	}
	if err != nil {
		w.Abort()
		return nil, err
	}
	return w, nil
}

// Commit completes the write PrepareRecord began, in ApplyRecord's order:
// the prepared files are renamed over their names, added ones first, each
// followed by a sync of its directory, the stale files are removed, and
// then, last, the record is written (see ApplyRecord). It returns what it
// changed, as ApplyRecord does, also on an error (then the changes made
// before it). It releases the dir's lock.
func (w *Prepared) Commit() (_ Changes, err error) {
	if w.unlock == nil {
		return Changes{}, w.d.errorf("commit of a write that was committed or aborted")
	}
	defer func() {
		if errors.Is(err, errCrash) { // a crash leaves what it leaves
			w.temps = nil
		}
		w.Abort()
	}()
	done, err := w.commitFiles(w.plan)
	if err == nil {
		err = w.commitRecord(&done, w.record)
	}
	slices.Sort(done.Added)
	slices.Sort(done.Changed)
	slices.Sort(done.Removed)
	return done, err
}

// Abort gives up a prepared write: the temporary files that were not
// placed are removed, and the subdirectories put created when they are
// still empty, and the dir's lock is released; the dir is as
// PrepareRecord found it. After Commit it only releases what Commit left
// (nothing, unless Commit failed).
func (w *Prepared) Abort() {
	if w.unlock == nil {
		return
	}
	for _, rel := range slices.Sorted(maps.Keys(w.temps)) {
		w.temps[rel].abort()
	}
	clear(w.temps)
	for _, dir := range slices.Backward(w.made) {
		_ = syscall.Rmdir(dir) // fails when a file was placed in it: then it stays
	}
	w.made = nil
	w.unlock()
	w.unlock = nil
}

// recordWrite is how a write records the plan (see ApplyRecord), decided
// and prepared by prepareRecord, done by commitRecord.
type recordWrite struct {
	rec           *planRecord // the Dir's record when prepared
	baseID, logID fileID      // the record's files when prepared
	known         bool        // the record is rec
	// append: delta goes to the log. Otherwise, unless keep (the plan is
	// the one recorded), the whole plan: in its temporary file unless
	// same (it is what plan.json holds), whose SHA-256 is sum.
	append, keep, same bool
	delta              []byte
	sum                [sha256.Size]byte
}

// prepareRecord decides how the plan is recorded (see ApplyRecord) and,
// when it is recorded whole, writes it to plan.json's temporary file.
func (w *Prepared) prepareRecord(delta []byte, full func(io.Writer) error) (*recordWrite, error) {
	d := w.d
	rw := &recordWrite{rec: d.rec, delta: delta}
	rec := rw.rec
	var err error
	if rw.baseID, err = d.statID(PlanFile); err != nil {
		return nil, err
	}
	if rw.logID, err = d.statID(LogFile); err != nil {
		return nil, err
	}
	rw.known = rec != nil && rw.baseID.exists && rw.baseID == rec.base && rw.logID == rec.log
	if rw.known && delta == nil {
		rw.keep = true
		return rw, nil
	}
	limit := int64(minLogLimit)
	if rec != nil {
		limit = max(rec.base.size/4, minLogLimit)
	}
	if rw.known && rw.logID.size+int64(len(delta))+128 <= limit {
		rw.append = true
		return rw, nil
	}
	// The whole plan.
	t, err := w.create(PlanFile)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(t, h), 256<<10)
	if err = full(bw); err == nil {
		err = bw.Flush()
	}
	if err != nil {
		t.abort()
		if t.err != nil {
			return nil, d.errorf("write %s: %w", PlanFile, t.err)
		}
		return nil, err
	}
	h.Sum(rw.sum[:0])
	if rw.baseID.exists {
		if rw.known {
			rw.same = rw.sum == rec.baseSum
		} else {
			old, err := d.sumHeld(PlanFile)
			if err != nil {
				t.abort()
				return nil, err
			}
			rw.same = old == rw.sum
		}
	}
	if rw.same {
		t.abort()
		return rw, nil
	}
	return rw, w.finish(t)
}

// commitRecord records the plan as prepareRecord decided, last.
func (w *Prepared) commitRecord(done *Changes, rw *recordWrite) error {
	d := w.d
	d.rec = nil // until the record is written
	switch {
	case rw.keep:
		d.rec = rw.rec
		return nil
	case rw.append:
		if err := w.appendLog(rw.rec, rw.logID, rw.delta); err != nil {
			return err
		}
		done.Changed = append(done.Changed, PlanFile)
		return nil
	}
	// The whole plan: plan.json, then the log goes: the record is then
	// plan.json alone.
	if !rw.same {
		if err := w.place(PlanFile); err != nil {
			return err
		}
	}
	if rw.logID.exists {
		if err := d.remove(LogFile); err != nil {
			return err
		}
		if err := atomicfile.SyncDir(d.path); err != nil {
			return d.errorf("sync %s: %w", d.path, err)
		}
	}
	switch {
	case !rw.baseID.exists:
		done.Added = append(done.Added, PlanFile)
	case !rw.same || rw.logID.exists:
		done.Changed = append(done.Changed, PlanFile)
	}
	baseID, err := d.statID(PlanFile)
	if err != nil {
		return err
	}
	d.rec = &planRecord{base: baseID, baseSum: rw.sum}
	return nil
}

// sumHeld is the SHA-256 of the file rel, which exists.
func (d *Dir) sumHeld(rel string) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	f, err := os.Open(d.abs(rel))
	if err != nil {
		return sum, d.errorf("read %s: %w", rel, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return sum, d.errorf("read %s: %w", rel, err)
	}
	h.Sum(sum[:0])
	return sum, nil
}

// appendLog appends payload to plan.log as record rec.seq+1 and syncs it;
// the first record creates the log (atomically, with its header).
func (w *Prepared) appendLog(rec *planRecord, logID fileID, payload []byte) error {
	d := w.d
	sum := sha256.Sum256(payload)
	entry := fmt.Appendf(nil, "delta %d %d %s\n", rec.seq+1, len(payload), hex.EncodeToString(sum[:]))
	entry = append(entry, payload...)
	if !logID.exists {
		header := logMagic + hex.EncodeToString(rec.baseSum[:]) + "\n"
		err := w.put(LogFile, append([]byte(header), entry...))
		if err == nil {
			err = w.place(LogFile)
		}
		if err != nil {
			return err
		}
	} else {
		f, err := os.OpenFile(d.abs(LogFile), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return d.errorf("append to %s: %w", LogFile, err)
		}
		if d.crash != nil && d.crash("append "+LogFile) {
			f.Write(entry[:len(entry)/2]) // torn
			f.Close()
			return errCrash
		}
		_, err = f.Write(entry)
		if err == nil {
			err = syscall.Fdatasync(int(f.Fd()))
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return d.errorf("append to %s: %w", LogFile, err)
		}
		d.written.Appends++
		d.written.Bytes += int64(len(entry))
	}
	logID, err := d.statID(LogFile)
	if err != nil {
		return err
	}
	d.rec = &planRecord{base: rec.base, log: logID, baseSum: rec.baseSum, seq: rec.seq + 1}
	return nil
}
