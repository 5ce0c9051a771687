package state

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
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
	m := soaLine.FindSubmatchIndex(line)
	if m == nil || bytes.ContainsAny(line, "();\"\\") {
		return soaSerial{}, fmt.Errorf("SOA record at byte %d is not alone on its line", start)
	}
	s := soaSerial{value: soa.Serial, start: start + m[2], end: start + m[3]}
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

// soaLine is the end of a line that holds an SOA record: the type SOA,
// then its seven fields of data, blank-separated; submatch 1 is the
// serial, the fifth field from the end.
var soaLine = regexp.MustCompile(`(?:^|[ \t\r])(?i:SOA)(?:[ \t\r]+[^ \t\r]+){2}[ \t\r]+([^ \t\r]+)(?:[ \t\r]+[^ \t\r]+){4}[ \t\r]*$`)

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
// they differ. old may have been edited by hand: it is read for at most
// one record per byte of the file and one $GENERATE's worth (65,536)
// more, so that a file of $GENERATE lines cannot make it read billions of
// records.
func sameRecords(old, rendered []byte, origin string) (same bool, serial uint32, err error) {
	oz, rz := newZoneParser(old, origin), newZoneParser(rendered, origin)
	same = true
	soas := 0
	for left := len(old) + 1<<16; ; left-- {
		if left == 0 {
			err = errors.New("more records than bytes ($GENERATE?)")
			break
		}
		o, ok := oz.Next()
		if !ok {
			break
		}
		if soa, isSOA := o.(*dns.SOA); isSOA {
			soas++
			serial = soa.Serial
		}
		if same {
			r, ok := rz.Next()
			same = ok && sameRecord(o, r)
		}
	}
	switch {
	case oz.Err() != nil:
		err = oz.Err()
	case err != nil:
	case soas == 0:
		err = errors.New("no SOA record")
	case soas > 1:
		err = fmt.Errorf("%d SOA records", soas)
	}
	if err != nil {
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
