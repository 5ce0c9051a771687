package state

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"

	"github.com/miekg/dns"
)

// Zone serials.
//
// The renderer writes a zone's SOA serial as a hash of the zone's records
// (compiler/dns.go): it changes whenever the content does, but it is not
// monotonic, and secondaries and caches that compare serials (RFC 1982
// serial arithmetic) would take a smaller one for an older zone. The state
// dir therefore rewrites the serial of each zone before comparing or
// writing it, by this rule (nextSerial):
//
//   - no file of the zone in the dir: the rendered serial is kept;
//   - the file in the dir has the zone's records, the SOA serial aside:
//     the file stays as it is, serial included, and the zone is unchanged;
//   - otherwise: the file's serial + 1, modulo 2^32, skipping 0 (so
//     4294967295 is followed by 1, an increment of 2).
//
// Records are compared as data, as miekg/dns's zone parser reads them:
// owner name (in any case), class, type, TTL and data, in the file's
// order. Comments, spacing, directives and how a name or a number is
// spelled are not records. A file the parser cannot read, or with other
// than one SOA, is an error that names it: the dir cannot know its serial.
//
// Each step adds 1 or 2, far below the 2^31-1 RFC 1982 allows, so every new
// serial is greater than the previous one in serial arithmetic, including
// across the wrap at 2^32; 0 is skipped because some software reads it as
// "unset", and the renderer never writes it either. The rule depends only
// on the old file and the new rendered zone, never on the clock.
//
// The serial is not remembered anywhere else: after Cleanup, or if the
// state dir is lost, a zone starts again at its rendered serial.

// soaSerial is where a rendered zone's SOA serial is: data[start:end].
type soaSerial struct {
	value      uint32
	start, end int
}

// renderedSerial finds the SOA serial of a zone as render.ZoneFile writes
// it: the SOA is its first record, alone on one line, after comments,
// blank lines, $ORIGIN and $TTL. The parser reads the record; the line
// only tells where its serial is written, which the SOA's seven fields of
// data, last on the line, say: the fifth from the end. The other records
// are not read here (see sameRecords).
func renderedSerial(data []byte, origin string) (soaSerial, error) {
	zp := newZoneParser(data, origin)
	rr, ok := zp.Next()
	if err := zp.Err(); err != nil {
		return soaSerial{}, err
	}
	soa, isSOA := rr.(*dns.SOA)
	if !ok || !isSOA {
		return soaSerial{}, errors.New("no SOA record first")
	}
	start, line := firstRecordLine(data)
	f := fieldsAt(line)
	if bytes.ContainsAny(line, "();\"\\") || len(f) < 8 || !bytes.EqualFold(line[f[len(f)-8][0]:f[len(f)-8][1]], []byte("SOA")) {
		return soaSerial{}, fmt.Errorf("SOA record at byte %d is not alone on its line", start)
	}
	s := soaSerial{value: soa.Serial, start: start + f[len(f)-5][0], end: start + f[len(f)-5][1]}
	if string(data[s.start:s.end]) != strconv.FormatUint(uint64(s.value), 10) {
		return soaSerial{}, fmt.Errorf("SOA serial at byte %d is not written as a plain decimal", s.start)
	}
	return s, nil
}

// firstRecordLine is the first line of data that is not blank, a comment
// or a directive, without its newline, and where it starts.
func firstRecordLine(data []byte) (int, []byte) {
	for at := 0; at < len(data); {
		line, _, _ := bytes.Cut(data[at:], []byte("\n"))
		t := bytes.TrimSpace(line)
		if len(t) > 0 && t[0] != ';' && t[0] != '$' {
			return at, line
		}
		at += len(line) + 1
	}
	return len(data), nil
}

// fieldsAt is where the blank-separated fields of line are: [start, end).
func fieldsAt(line []byte) [][2]int {
	var f [][2]int
	start := -1
	for i := 0; i <= len(line); i++ {
		blank := i == len(line) || line[i] == ' ' || line[i] == '\t' || line[i] == '\r'
		switch {
		case blank && start >= 0:
			f, start = append(f, [2]int{start, i}), -1
		case !blank && start < 0:
			start = i
		}
	}
	return f
}

// withSerial returns data with its SOA serial (at s) replaced by v.
func withSerial(data []byte, s soaSerial, v uint32) []byte {
	out := make([]byte, 0, len(data)+10)
	out = append(out, data[:s.start]...)
	out = strconv.AppendUint(out, uint64(v), 10)
	return append(out, data[s.end:]...)
}

// nextSerial is the serial after old: old+1, skipping 0.
func nextSerial(old uint32) uint32 {
	n := old + 1
	if n == 0 {
		n = 1
	}
	return n
}

// rewriteZone applies the serial rule to a rendered zone of origin, given
// the file the dir holds (nil when none). It returns the content to write,
// which is old itself when the zone has not changed.
func rewriteZone(old, rendered []byte, origin string) ([]byte, error) {
	ns, err := renderedSerial(rendered, origin)
	if err != nil {
		return nil, fmt.Errorf("rendered zone: %w", err)
	}
	if old == nil {
		return rendered, nil
	}
	if sameButSerial(old, rendered, ns) {
		return old, nil
	}
	same, prev, err := sameRecords(old, rendered, origin)
	if err != nil {
		return nil, err
	}
	if same {
		return old, nil
	}
	return withSerial(rendered, ns, nextSerial(prev)), nil
}

// sameButSerial reports whether old is rendered with another serial
// written in place of its SOA serial at ns: the same bytes before and
// after it, and between them a serial as withSerial writes one (decimal,
// no leading zero, at most 2^32-1). Then old's records are rendered's but
// for the SOA serial: the zone has not changed. This spares the common
// case, an unchanged zone, parsing either zone.
func sameButSerial(old, rendered []byte, ns soaSerial) bool {
	head, tail := rendered[:ns.start], rendered[ns.end:]
	if len(old) < len(head)+len(tail)+1 || !bytes.HasPrefix(old, head) || !bytes.HasSuffix(old, tail) {
		return false
	}
	digits := old[len(head) : len(old)-len(tail)]
	v, err := strconv.ParseUint(string(digits), 10, 32)
	return err == nil && strconv.FormatUint(v, 10) == string(digits)
}

// sameRecords reads the records of old, the zone file in the dir, and of
// rendered, both of origin, side by side, and reports whether they are
// the same records in the same order but for the SOA serial, and old's
// serial. It reads all of old (it must have one SOA) and rendered until
// they differ.
func sameRecords(old, rendered []byte, origin string) (same bool, serial uint32, err error) {
	oz := newZoneReader(old, origin)
	rz := newZoneParser(rendered, origin)
	same = true
	for o, ok := oz.next(); ok; o, ok = oz.next() {
		if same {
			r, ok := rz.Next()
			same = ok && sameRecord(o, r)
		}
	}
	if serial, err = oz.serial(); err != nil {
		return false, 0, fmt.Errorf("zone file in the state dir: %w (fix or remove it to start its serial over)", err)
	}
	if same {
		_, more := rz.Next()
		same = !more
	}
	if err := rz.Err(); err != nil {
		return false, 0, fmt.Errorf("rendered zone: %w", err)
	}
	return same, serial, nil
}

// sameRecord reports whether a and b are the same record, a SOA's serial
// aside: owner name (in any case), class, type, TTL and data.
func sameRecord(a, b dns.RR) bool {
	if sa, ok := a.(*dns.SOA); ok {
		if sb, ok := b.(*dns.SOA); ok && sa.Serial != sb.Serial {
			c := *sb
			c.Serial = sa.Serial
			b = &c
		}
	}
	return a.Header().Ttl == b.Header().Ttl && dns.IsDuplicate(a, b)
}

// newZoneParser reads the master file data of origin as an authoritative
// server loads it; $INCLUDE is refused (it would read other files).
func newZoneParser(data []byte, origin string) *dns.ZoneParser {
	if _, ok := dns.IsDomainName(origin); !ok {
		origin = "" // then the file's own $ORIGIN, or fully qualified names
	}
	return dns.NewZoneParser(bytes.NewReader(data), dns.Fqdn(origin), "")
}

// zoneReader reads a zone file of the dir's, which may have been edited
// by hand, and keeps its SOA serial. It reads at most one record per byte
// of the file and one $GENERATE's worth (65,536) more, so that a file of
// $GENERATE lines cannot make it read billions of records.
type zoneReader struct {
	zp          *dns.ZoneParser
	left        int // records it may still read
	soas        int
	value       uint32 // of the last SOA
	tooManyRecs bool
}

func newZoneReader(data []byte, origin string) *zoneReader {
	return &zoneReader{zp: newZoneParser(data, origin), left: len(data) + 1<<16}
}

// next returns the file's next record; false at its end or on an error
// (serial tells).
func (z *zoneReader) next() (dns.RR, bool) {
	if z.left == 0 {
		z.tooManyRecs = true
		return nil, false
	}
	rr, ok := z.zp.Next()
	if !ok {
		return nil, false
	}
	z.left--
	if soa, isSOA := rr.(*dns.SOA); isSOA {
		z.soas++
		z.value = soa.Serial
	}
	return rr, true
}

// serial is the serial of the file's one SOA, once next has returned
// false: an error when the file cannot be read or has other than one SOA.
func (z *zoneReader) serial() (uint32, error) {
	switch {
	case z.zp.Err() != nil:
		return 0, z.zp.Err()
	case z.tooManyRecs:
		return 0, errors.New("more records than bytes ($GENERATE?)")
	case z.soas == 0:
		return 0, errors.New("no SOA record")
	case z.soas > 1:
		return 0, fmt.Errorf("%d SOA records", z.soas)
	}
	return z.value, nil
}
