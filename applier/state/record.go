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
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
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

// fileID tells whether a file was changed: a rename over it, a write
// or an append changes it.
type fileID struct {
	exists     bool
	dev, ino   uint64
	size       int64
	mtimeNanos int64
}

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
	return fileID{exists: true, dev: uint64(st.Dev), ino: st.Ino, size: fi.Size(), mtimeNanos: fi.ModTime().UnixNano()}, nil
}

// LastPlan returns the dir's record of the last applied plan: the content
// of plan.json and the payloads of plan.log's whole records that apply to
// it, in order; nil and no error when the dir has no plan.json.
func (d *Dir) LastPlan() (base []byte, deltas [][]byte, err error) {
	ok, err := d.exists()
	if err != nil || !ok {
		return nil, nil, err
	}
	unlock, err := d.lock(syscall.LOCK_SH)
	if err != nil {
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
	rec := &planRecord{base: baseID, baseSum: sha256.Sum256(base)}
	log, err := d.readHeld(LogFile)
	if err != nil {
		return nil, nil, err
	}
	var good int64
	if log != nil {
		deltas, good = parseLog(log, rec.baseSum)
	}
	rec.seq = len(deltas)
	rec.log = logID
	if logID.exists && good != logID.size {
		// Stale or torn: not the log ApplyRecord may append to.
		rec.log.size = -1
	}
	d.rec = rec
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

// PlanFiles is Plan for ApplyRecord: files are the zone and env files
// alone, and the record is not compared (the caller knows whether its
// plan is the one recorded).
func (d *Dir) PlanFiles(files map[string]File) (Changes, error) {
	ok, err := d.exists()
	if err != nil {
		return Changes{}, err
	}
	if ok {
		unlock, err := d.lock(syscall.LOCK_SH)
		if err != nil {
			return Changes{}, err
		}
		defer unlock()
	}
	ch, _, err := d.diff(files, true)
	return ch, err
}

// ApplyRecord makes the dir hold files (the zone and env files alone, as
// Apply does with them) and then records the applied plan: delta, the
// change from the plan the dir records, is appended to plan.log when the
// record is as this Dir last read or wrote it (LastPlan, ApplyRecord) and
// the log stays under a quarter of plan.json; otherwise full — which
// writes the whole plan to its writer — is written as plan.json and the
// log removed. delta nil means the plan did not change: nothing is written
// unless the record is not known to be the caller's, which then writes
// full. plan.json is reported added or changed when the record changes.
// full writes into plan.json's temporary file as it renders, so that the
// whole plan (27 MB at 10,000 Services) is never held.
func (d *Dir) ApplyRecord(files map[string]File, delta []byte, full func(io.Writer) error) (Changes, error) {
	unlock, err := d.beginWrite()
	if err != nil {
		return Changes{}, err
	}
	defer unlock()
	plan, want, err := d.diff(files, true)
	if err != nil {
		return Changes{}, err
	}
	done, err := d.applyFiles(plan, want)
	if err == nil {
		err = d.writeRecord(&done, delta, full)
	}
	slices.Sort(done.Added)
	slices.Sort(done.Changed)
	slices.Sort(done.Removed)
	return done, err
}

// writeRecord records the plan (see ApplyRecord), last.
func (d *Dir) writeRecord(done *Changes, delta []byte, full func(io.Writer) error) error {
	rec := d.rec
	d.rec = nil // until the record is written
	baseID, err := d.statID(PlanFile)
	if err != nil {
		return err
	}
	logID, err := d.statID(LogFile)
	if err != nil {
		return err
	}
	known := rec != nil && baseID.exists && baseID == rec.base && logID == rec.log
	if known && delta == nil {
		d.rec = rec
		return nil
	}
	limit := max(rec.baseSizeOr(0)/4, minLogLimit)
	if known && logID.size+int64(len(delta))+128 <= limit {
		if err := d.appendLog(rec, logID, delta); err != nil {
			return err
		}
		done.Changed = append(done.Changed, PlanFile)
		return nil
	}
	// The whole plan: plan.json, then the log goes (see Apply).
	t, err := d.createTemp(PlanFile)
	if err != nil {
		return err
	}
	h := sha256.New()
	w := bufio.NewWriterSize(io.MultiWriter(t, h), 256<<10)
	if err = full(w); err == nil {
		err = w.Flush()
	}
	if err != nil {
		t.abort()
		if t.err != nil {
			return d.errorf("write %s: %w", PlanFile, t.err)
		}
		return err
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	same := false
	if baseID.exists {
		if known {
			same = sum == rec.baseSum
		} else {
			old, err := d.sumHeld(PlanFile)
			if err != nil {
				t.abort()
				return err
			}
			same = old == sum
		}
	}
	if same {
		t.abort()
	} else if err := t.commit(); err != nil {
		return err
	}
	if logID.exists {
		if err := d.remove(LogFile); err != nil {
			return err
		}
		if err := syncDir(d.path); err != nil {
			return d.errorf("sync %s: %w", d.path, err)
		}
	}
	switch {
	case !baseID.exists:
		done.Added = append(done.Added, PlanFile)
	case !same || logID.exists:
		done.Changed = append(done.Changed, PlanFile)
	}
	if baseID, err = d.statID(PlanFile); err != nil {
		return err
	}
	d.rec = &planRecord{base: baseID, baseSum: sum}
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

func (r *planRecord) baseSizeOr(def int64) int64 {
	if r == nil {
		return def
	}
	return r.base.size
}

// appendLog appends payload to plan.log as record rec.seq+1 and syncs it;
// the first record creates the log (atomically, with its header).
func (d *Dir) appendLog(rec *planRecord, logID fileID, payload []byte) error {
	sum := sha256.Sum256(payload)
	entry := fmt.Appendf(nil, "delta %d %d %s\n", rec.seq+1, len(payload), hex.EncodeToString(sum[:]))
	entry = append(entry, payload...)
	if !logID.exists {
		header := logMagic + hex.EncodeToString(rec.baseSum[:]) + "\n"
		if err := d.write(LogFile, append([]byte(header), entry...)); err != nil {
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
