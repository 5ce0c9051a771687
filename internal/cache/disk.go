package cache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"netspec.dev/netspec/internal/atomicfile"
	"netspec.dev/netspec/schema"
)

// Pack file layout (all integers little-endian):
//
//	magic    [8]byte  "netspec\xca"
//	version  uint32   formatVersion
//	salt     [32]byte binarySalt: the build of netspec that wrote it
//	count    uint32   number of entries
//	bodyLen  uint64   length of the body
//	crc      uint32   CRC-32C of the body
//	body     count × (key [32]byte, uvarint length, encoded UnitResult),
//	         then the stat index: uvarint n, n × (uvarint length, real path,
//	         uvarint device, uvarint inode, varint stat size, varint mtime,
//	         varint ctime, varint length read, sha256 [32]byte), by path
//
// A pack that does not match in every header field, or whose body fails
// the checksum or does not parse, is ignored as a whole.
const (
	packMagic     = "netspec\xca"
	formatVersion = 2 // 2: the stat index
	headerLen     = 8 + 4 + 32 + 4 + 8 + 4
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// DefaultDir returns the directory the CLI keeps its packs in:
// os.UserCacheDir()/netspec, or "" when the user has no cache directory.
func DefaultDir() string {
	d, err := os.UserCacheDir()
	if err != nil || d == "" {
		return ""
	}
	return filepath.Join(d, "netspec")
}

// Disk is a schema.Cache kept in one pack file per tree root. OpenDisk reads
// the pack once; Get decodes an entry on first use; Save writes the entries
// used since OpenDisk (Get hits and Puts), so that the pack holds the
// current tree's results and does not grow; Prune bounds the directory's
// packs of all trees together. It is safe for concurrent use.
//
// The pack also keeps the stat index: the identity and content hash of the
// files that the Load before the pack was written trusted (Stats), so that
// the next run reads only the files whose identity changed since.
type Disk struct {
	path string
	salt [32]byte

	mu      sync.RWMutex
	entries map[schema.Key]*entry
	dirty   bool // a Put happened since the pack was read or written
	clean   bool // the pack on disk holds exactly entries (before any use)

	statIndex []byte              // the stat index as read or last written
	statRecs  []schema.StatRecord // statIndex parsed; nil once Stats took it
	stats     *schema.StatCache   // made by Stats

	// Loaded is the number of entries read from the pack (0 when it was
	// missing or ignored); Ignored says why a pack was not trusted ("" when
	// it was, or when there was none).
	Loaded  int
	Ignored string
}

type entry struct {
	raw  []byte // encoded result; never modified
	used atomic.Bool
	res  atomic.Pointer[schema.UnitResult]
}

// OpenDisk opens the cache of the tree at treeRoot, kept in dir. A missing,
// unreadable, corrupt, truncated or foreign pack (another format version or
// another netspec build) counts as empty. The error is for a cache that
// cannot work at all.
func OpenDisk(dir, treeRoot string) (*Disk, error) {
	if dir == "" {
		return nil, errors.New("cache: no cache directory")
	}
	if _, err := unitCodec(); err != nil {
		return nil, err
	}
	root, err := filepath.Abs(treeRoot)
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	sum := sha256.Sum256([]byte("netspec-tree\x00" + root))
	d := &Disk{
		path:    filepath.Join(dir, hex.EncodeToString(sum[:16])+".pack"),
		salt:    binarySalt(),
		entries: map[schema.Key]*entry{},
	}
	if d.salt == unusableSalt {
		d.Ignored = "cannot identify the running executable"
		return d, nil
	}
	data, err := os.ReadFile(d.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return d, nil
	case err != nil:
		d.Ignored = err.Error()
		return d, nil
	}
	entries, statIndex, recs, why := parsePack(data, d.salt)
	if why != "" {
		d.Ignored = why
		return d, nil
	}
	d.entries = entries
	d.statIndex, d.statRecs = statIndex, recs
	d.Loaded = len(entries)
	d.clean = true
	return d, nil
}

// Path returns the pack file's name.
func (d *Disk) Path() string { return d.path }

// parsePack returns the entries of a pack and its stat index, raw and
// parsed, or why the pack is not to be trusted.
func parsePack(data []byte, salt [32]byte) (entries map[schema.Key]*entry, statIndex []byte, recs []schema.StatRecord, why string) {
	if len(data) < headerLen || string(data[:8]) != packMagic {
		return nil, nil, nil, "not a netspec cache pack"
	}
	le := binary.LittleEndian
	if v := le.Uint32(data[8:]); v != formatVersion {
		return nil, nil, nil, fmt.Sprintf("pack format %d, want %d", v, formatVersion)
	}
	if !bytes.Equal(data[12:44], salt[:]) {
		return nil, nil, nil, "written by another netspec build"
	}
	count := le.Uint32(data[44:])
	bodyLen := le.Uint64(data[48:])
	body := data[headerLen:]
	if bodyLen != uint64(len(body)) {
		return nil, nil, nil, "truncated"
	}
	if crc32.Checksum(body, crcTable) != le.Uint32(data[56:]) {
		return nil, nil, nil, "checksum mismatch"
	}
	if uint64(count) > uint64(len(body))/(32+1) {
		return nil, nil, nil, "corrupt"
	}
	entries = make(map[schema.Key]*entry, count)
	for range count {
		if len(body) < 32 {
			return nil, nil, nil, "corrupt"
		}
		var k schema.Key
		copy(k[:], body)
		body = body[32:]
		n, w := binary.Uvarint(body)
		if w <= 0 || n > uint64(len(body)-w) {
			return nil, nil, nil, "corrupt"
		}
		body = body[w:]
		entries[k] = &entry{raw: body[:n:n]}
		body = body[n:]
	}
	recs, err := decodeStatIndex(body)
	if err != nil {
		return nil, nil, nil, "corrupt"
	}
	return entries, body[:len(body):len(body)], recs, ""
}

// statRecordMin is the fewest bytes a record of the stat index takes.
const statRecordMin = 1 + 1 + 1 + 1 + 1 + 1 + 1 + 32

// appendStatIndex appends the stat index of recs, sorted by path, to buf.
func appendStatIndex(buf []byte, recs []schema.StatRecord) []byte {
	slices.SortFunc(recs, func(a, b schema.StatRecord) int { return strings.Compare(a.Path, b.Path) })
	buf = binary.AppendUvarint(buf, uint64(len(recs)))
	for _, r := range recs {
		buf = binary.AppendUvarint(buf, uint64(len(r.Path)))
		buf = append(buf, r.Path...)
		buf = binary.AppendUvarint(buf, r.Dev)
		buf = binary.AppendUvarint(buf, r.Ino)
		buf = binary.AppendVarint(buf, r.StatSize)
		buf = binary.AppendVarint(buf, r.Mtime)
		buf = binary.AppendVarint(buf, r.Ctime)
		buf = binary.AppendVarint(buf, r.Size)
		buf = append(buf, r.Sum[:]...)
	}
	return buf
}

// decodeStatIndex parses a stat index that takes all of b. The paths
// share b's memory, which must not change afterwards.
func decodeStatIndex(b []byte) (recs []schema.StatRecord, err error) {
	d := &decoder{buf: b}
	defer func() {
		if p := recover(); p != nil {
			recs, err = nil, errCorrupt
		}
	}()
	n := d.uvarint()
	if n > uint64(len(b))/statRecordMin {
		return nil, errCorrupt
	}
	recs = make([]schema.StatRecord, n)
	for i := range recs {
		r := &recs[i]
		r.Path = d.str()
		r.Dev, r.Ino = d.uvarint(), d.uvarint()
		r.StatSize, r.Mtime, r.Ctime, r.Size = d.varint(), d.varint(), d.varint(), d.varint()
		copy(r.Sum[:], d.bytes(32))
		if r.Path == "" || i > 0 && recs[i-1].Path >= r.Path {
			return nil, errCorrupt // sorted, each path once
		}
	}
	if d.pos != len(b) {
		return nil, errCorrupt
	}
	return recs, nil
}

// Stats returns the files' identities recorded in the pack, for
// schema.Options.Stats: a Load with it does not read the files whose
// identity is the one recorded (their results are taken by key, as if
// read), and Save records the identities that Load trusted. Each call
// returns the same StatCache.
func (d *Disk) Stats() *schema.StatCache {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stats == nil {
		d.stats = schema.NewStatCacheFrom(d.statRecs)
		d.statRecs = nil
	}
	return d.stats
}

// Get returns the result stored under key, decoding it on first use. An
// entry that does not decode is a miss.
func (d *Disk) Get(key schema.Key) (*schema.UnitResult, bool) {
	d.mu.RLock()
	e := d.entries[key]
	d.mu.RUnlock()
	if e == nil {
		return nil, false
	}
	r := e.res.Load()
	if r == nil {
		var err error
		if r, err = decodeResult(e.raw); err != nil {
			return nil, false
		}
		if !e.res.CompareAndSwap(nil, r) {
			r = e.res.Load()
		}
	}
	e.used.Store(true)
	return r, true
}

// Put stores r under key. The result is encoded at once, so that what
// Save writes is r as it is now. A result the cache cannot encode is not
// stored.
func (d *Disk) Put(key schema.Key, r *schema.UnitResult) {
	if r == nil {
		return
	}
	raw, err := encodeResult(nil, r)
	if err != nil {
		return
	}
	e := &entry{raw: raw}
	e.used.Store(true)
	d.mu.Lock()
	d.entries[key] = e
	d.dirty = true
	d.mu.Unlock()
}

// Save writes the entries used since OpenDisk (or the last Save) to the
// pack, atomically: a temporary file in the same directory, fsync, rename.
// It writes nothing when the pack already holds exactly those entries,
// but then marks the pack used (its modification time, which Prune goes
// by).
func (d *Disk) Save() error {
	if d.salt == unusableSalt {
		return errors.New("cache: cannot identify the running executable; not saving")
	}
	// The stat index changes with the entries, but not only: a file
	// touched, or read when too recent to trust, changes it alone. (The
	// StatCache is asked without d.mu held: a Load holds its lock while it
	// calls Get.)
	d.mu.Lock()
	stats := d.stats
	d.mu.Unlock()
	var newIndex []byte
	if stats != nil && stats.Changed() {
		newIndex = appendStatIndex(nil, stats.Records())
	}
	d.mu.Lock()
	keys := make([]schema.Key, 0, len(d.entries))
	size := headerLen
	for k, e := range d.entries {
		if e.used.Load() {
			keys = append(keys, k)
			size += 32 + binary.MaxVarintLen64 + len(e.raw)
		}
	}
	if d.clean && !d.dirty && len(keys) == len(d.entries) && newIndex == nil {
		d.mu.Unlock()
		d.touch(time.Now()) // used, for pruning (Prune)
		return nil
	}
	slices.SortFunc(keys, func(a, b schema.Key) int { return bytes.Compare(a[:], b[:]) })
	statIndex := d.statIndex
	if newIndex != nil {
		statIndex = newIndex
	} else if statIndex == nil {
		statIndex = appendStatIndex(nil, nil)
	}
	buf := make([]byte, headerLen, size+len(statIndex))
	for _, k := range keys {
		buf = append(buf, k[:]...)
		raw := d.entries[k].raw
		buf = binary.AppendUvarint(buf, uint64(len(raw)))
		buf = append(buf, raw...)
	}
	buf = append(buf, statIndex...)
	d.statIndex = statIndex
	// Forget what was not used: the pack will not hold it either.
	for k, e := range d.entries {
		if !e.used.Load() {
			delete(d.entries, k)
		}
	}
	d.dirty, d.clean = false, false
	d.mu.Unlock()

	le := binary.LittleEndian
	copy(buf, packMagic)
	le.PutUint32(buf[8:], formatVersion)
	copy(buf[12:44], d.salt[:])
	le.PutUint32(buf[44:], uint32(len(keys)))
	le.PutUint64(buf[48:], uint64(len(buf)-headerLen))
	le.PutUint32(buf[56:], crc32.Checksum(buf[headerLen:], crcTable))
	if err := writeAtomic(d.path, buf); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	d.mu.Lock()
	d.clean = !d.dirty
	d.mu.Unlock()
	return nil
}

// writeAtomic writes data to name atomically (atomicfile.WriteFile), with
// mode 0600 in a 0700 directory.
func writeAtomic(name string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(name, data, 0o600)
}

var _ schema.Cache = (*Disk)(nil)
