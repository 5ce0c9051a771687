package fleet

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
)

// The wire format. A user message (UDP gossip) is one part of an owner's
// table:
//
//	byte    wireMagic
//	byte    msgPart
//	uvarint len(owner), owner
//	uint64  Version.Gen (big endian)
//	uvarint Version.Seq
//	uvarint index, uvarint parts (index < parts <= maxParts)
//	uvarint n, n × uint64 ID (n <= maxPartIDs)
//
// The push/pull state is every table known, complete:
//
//	byte    wireMagic
//	byte    msgState
//	uvarint count (<= maxTables), then count × (owner, Gen, Seq, n, n × ID)
//
// Nothing else may follow; anything else is malformed and dropped.
const (
	wireMagic = 0xf1
	msgPart   = 1
	msgState  = 2

	// maxPartIDs keeps a part well inside a UDP packet (1,400 bytes less
	// memberlist's headers, the label and encryption): 800 bytes of IDs.
	maxPartIDs = 100
	// maxParts bounds a table: 100,000 failing checks of one owner.
	maxParts = 1000
	// maxName is the longest owner name (a Kubernetes node name is at most
	// 253 bytes).
	maxName = 253
	// maxTables bounds the tables of a push/pull state.
	maxTables = 100000
	// maxPartSize is the largest part message accepted: bigger is
	// oversized and dropped unread.
	maxPartSize = 2 + 2 + maxName + 8 + 10 + 3 + 3 + 2 + 8*maxPartIDs
)

// part is one part of an owner's table.
type part struct {
	owner        string
	v            Version
	index, parts int
	ids          []ID
}

// errMalformed tells that a message could not be read.
var errMalformed = errors.New("malformed message")

// IsMalformed tells whether err is a message that could not be read.
func IsMalformed(err error) bool { return errors.Is(err, errMalformed) }

// encodeParts splits a table into its parts' messages.
func encodeParts(owner string, v Version, ids []ID) [][]byte {
	parts := max(1, (len(ids)+maxPartIDs-1)/maxPartIDs)
	msgs := make([][]byte, 0, parts)
	for i := range parts {
		chunk := ids[min(i*maxPartIDs, len(ids)):min((i+1)*maxPartIDs, len(ids))]
		b := []byte{wireMagic, msgPart}
		b = appendTable(b, owner, v, chunk, func(b []byte) []byte {
			b = binary.AppendUvarint(b, uint64(i))
			return binary.AppendUvarint(b, uint64(parts))
		})
		msgs = append(msgs, b)
	}
	return msgs
}

// appendTable appends owner, version, what mid appends, and the ids.
func appendTable(b []byte, owner string, v Version, ids []ID, mid func([]byte) []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(owner)))
	b = append(b, owner...)
	b = binary.BigEndian.AppendUint64(b, v.Gen)
	b = binary.AppendUvarint(b, v.Seq)
	if mid != nil {
		b = mid(b)
	}
	b = binary.AppendUvarint(b, uint64(len(ids)))
	for _, id := range ids {
		b = binary.BigEndian.AppendUint64(b, uint64(id))
	}
	return b
}

// decodePart reads a part message.
func decodePart(b []byte) (part, error) {
	r := reader{b: b}
	if r.byte() != wireMagic || r.byte() != msgPart {
		return part{}, fmt.Errorf("%w: not a table part", errMalformed)
	}
	var p part
	p.owner, p.v = r.owner()
	p.index, p.parts = int(r.uvarint(maxParts)), int(r.uvarint(maxParts))
	p.ids = r.ids(maxPartIDs)
	if r.err == nil && (p.parts == 0 || p.index >= p.parts) {
		r.err = fmt.Errorf("part %d of %d", p.index, p.parts)
	}
	return p, r.done()
}

// storedTable is a complete table of the push/pull state.
type storedTable struct {
	owner string
	v     Version
	ids   []ID
}

// encodeState encodes complete tables for a push/pull.
func encodeState(tables []storedTable) []byte {
	b := []byte{wireMagic, msgState}
	b = binary.AppendUvarint(b, uint64(len(tables)))
	for _, t := range tables {
		b = appendTable(b, t.owner, t.v, t.ids, nil)
	}
	return b
}

// decodeState reads a push/pull state.
func decodeState(b []byte) ([]storedTable, error) {
	r := reader{b: b}
	if r.byte() != wireMagic || r.byte() != msgState {
		return nil, fmt.Errorf("%w: not a state", errMalformed)
	}
	n := r.uvarint(maxTables)
	var out []storedTable
	for i := uint64(0); i < n && r.err == nil; i++ {
		var t storedTable
		t.owner, t.v = r.owner()
		t.ids = r.ids(maxParts * maxPartIDs)
		out = append(out, t)
	}
	return out, r.done()
}

// reader reads the wire format; the first error sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) byte() byte {
	if r.err != nil || len(r.b) == 0 {
		r.fail("short")
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = errors.New(what)
	}
}

// uvarint reads a uvarint no larger than limit.
func (r *reader) uvarint(limit uint64) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	if v > limit {
		r.err = fmt.Errorf("%d over the limit %d", v, limit)
		return 0
	}
	return v
}

func (r *reader) owner() (string, Version) {
	n := r.uvarint(maxName)
	if r.err == nil && (n == 0 || uint64(len(r.b)) < n+8) {
		r.fail("short owner")
	}
	if r.err != nil {
		return "", Version{}
	}
	name := string(r.b[:n])
	gen := binary.BigEndian.Uint64(r.b[n:])
	r.b = r.b[n+8:]
	return name, Version{Gen: gen, Seq: r.uvarint(1<<63 - 1)}
}

// ids reads a count (no more than limit) and the IDs, checking the
// length before allocating.
func (r *reader) ids(limit uint64) []ID {
	n := r.uvarint(limit)
	if r.err == nil && uint64(len(r.b)) < 8*n {
		r.fail("short ids")
	}
	if r.err != nil {
		return nil
	}
	ids := make([]ID, n)
	for i := range ids {
		ids[i] = ID(binary.BigEndian.Uint64(r.b[8*i:]))
	}
	r.b = r.b[8*n:]
	return ids
}

func (r *reader) done() error {
	if r.err == nil && len(r.b) > 0 {
		r.err = fmt.Errorf("%d bytes after the end", len(r.b))
	}
	if r.err != nil {
		return fmt.Errorf("%w: %v", errMalformed, r.err)
	}
	return nil
}

// Meta is a member's metadata (memberlist's NodeMeta, at most 512 bytes):
// what status --fleet shows of it.
type Meta struct {
	// Revision is the revision of the tree the member applied last
	// (truncated to maxRevision bytes).
	Revision string `json:"rev,omitempty"`
	// Checks and Failing count the checks the member probes and those
	// failing.
	Checks  int `json:"checks,omitempty"`
	Failing int `json:"failing,omitempty"`
	// Leaving tells that the member is leaving on purpose (SIGTERM): when
	// it is gone, it has left rather than died.
	Leaving bool `json:"leaving,omitempty"`
}

// maxRevision bounds Meta.Revision so that the meta fits in 512 bytes.
const maxRevision = 200

func (m Meta) encode() []byte {
	if len(m.Revision) > maxRevision {
		m.Revision = m.Revision[:maxRevision]
	}
	b, _ := json.Marshal(m) // only strings, ints and a bool: cannot fail
	return b
}

// decodeMeta reads a member's meta; a meta that does not read is empty.
func decodeMeta(b []byte) (Meta, error) {
	var m Meta
	if len(b) == 0 {
		return m, nil
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return Meta{}, fmt.Errorf("%w: meta: %v", errMalformed, err)
	}
	return m, nil
}
