package state

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
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
//   - the zone with the serial of the file in the dir is byte for byte that
//     file (only the serial differs, or nothing): the file's serial is kept,
//     and the zone is unchanged;
//   - otherwise: the file's serial + 1, modulo 2^32, skipping 0 (so
//     4294967295 is followed by 1, an increment of 2).
//
// Each step adds 1 or 2, far below the 2^31-1 RFC 1982 allows, so every new
// serial is greater than the previous one in serial arithmetic, including
// across the wrap at 2^32; 0 is skipped because some software reads it as
// "unset", and the renderer never writes it either. The rule depends only
// on the old file and the new rendered zone, never on the clock.
//
// The serial is not remembered anywhere else: after Cleanup, or if the
// state dir is lost, a zone starts again at its rendered serial.

// soaSerial is where a zone's SOA serial is: data[start:end].
type soaSerial struct {
	value      uint32
	start, end int
}

// findSerial parses a zone master file well enough to find the one SOA
// record and its serial. It understands the renderer's format and the
// RFC 1035 syntax around it: comments, $ directives, quoted strings,
// escapes, owner-less lines, optional TTL and class in either order, and
// records spread over lines with parentheses. Anything it cannot read with
// certainty — no SOA, two SOAs, a serial that is not a 32-bit decimal — is
// an error.
func findSerial(data []byte) (soaSerial, error) {
	var found []soaSerial
	err := eachRecord(data, func(owner bool, toks []token) error {
		i := 0
		if owner {
			if t := toks[0]; t.quoted && strings.HasPrefix(t.q, "$") || !t.quoted && data[t.start] == '$' {
				return nil // $ORIGIN, $TTL, $INCLUDE, $GENERATE
			}
			i = 1
		}
		for i < len(toks) && (isTTL(toks[i].text(data)) || isClass(toks[i].text(data))) {
			i++
		}
		if i >= len(toks) || !strings.EqualFold(toks[i].text(data), "SOA") {
			return nil
		}
		if len(toks) < i+4 {
			return fmt.Errorf("SOA record at byte %d has no serial", toks[0].start)
		}
		t := toks[i+3]
		v, err := strconv.ParseUint(t.text(data), 10, 32)
		if err != nil || t.quoted || t.escaped {
			return fmt.Errorf("SOA serial %q at byte %d is not a number from 0 to 4294967295", t.text(data), t.start)
		}
		found = append(found, soaSerial{value: uint32(v), start: t.start, end: t.end})
		return nil
	})
	if err != nil {
		return soaSerial{}, err
	}
	switch len(found) {
	case 0:
		return soaSerial{}, errors.New("no SOA record")
	case 1:
		return found[0], nil
	default:
		return soaSerial{}, fmt.Errorf("%d SOA records", len(found))
	}
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

// rewriteZone applies the serial rule to a rendered zone, given the file
// the dir holds (nil when none). It returns the content to write, which is
// old itself when the zone has not changed.
func rewriteZone(old, rendered []byte) ([]byte, error) {
	ns, err := findSerial(rendered)
	if err != nil {
		return nil, fmt.Errorf("rendered zone: %w", err)
	}
	if old == nil {
		return rendered, nil
	}
	if sameButSerial(old, rendered, ns) {
		return old, nil
	}
	prev, err := findSerial(old)
	if err != nil {
		return nil, fmt.Errorf("zone file in the state dir: %w (fix or remove it to start its serial over)", err)
	}
	if same := withSerial(rendered, ns, prev.value); bytes.Equal(same, old) {
		return old, nil
	}
	return withSerial(rendered, ns, nextSerial(prev.value)), nil
}

// sameButSerial reports whether old is rendered with another serial
// written in place of its SOA serial at ns: the same bytes before and
// after it, and between them a serial as withSerial writes one (decimal,
// no leading zero, at most 2^32-1). Then old's one SOA serial is that
// number (its records are rendered's, token for token), so old is
// withSerial(rendered, ns, that serial): the zone has not changed. This
// spares the common case, an unchanged zone, reading old's records.
func sameButSerial(old, rendered []byte, ns soaSerial) bool {
	head, tail := rendered[:ns.start], rendered[ns.end:]
	if len(old) < len(head)+len(tail)+1 || !bytes.HasPrefix(old, head) || !bytes.HasSuffix(old, tail) {
		return false
	}
	digits := old[len(head) : len(old)-len(tail)]
	v, err := strconv.ParseUint(string(digits), 10, 32)
	return err == nil && strconv.FormatUint(v, 10) == string(digits)
}

// token is one field of a zone file: data[start:end] is where it is,
// quotes included; q is a quoted token's text without its quotes, with
// escapes left as written (text returns either).
type token struct {
	q          string
	start, end int
	quoted     bool
	escaped    bool
}

// text is the token's text: without quotes, escapes left as written.
func (t token) text(data []byte) string {
	if t.quoted {
		return t.q
	}
	return string(data[t.start:t.end])
}

// eachRecord splits a master file into logical records (RFC 1035 §5.1)
// and calls f with each in order: owner tells whether its first token is in
// column 0 (an owner name or a directive), toks are its fields, valid only
// during the call (the next record reuses them). An error of f stops it.
func eachRecord(data []byte, f func(owner bool, toks []token) error) error {
	var (
		toks  []token
		owner bool
		depth int // parentheses
	)
	flush := func() error {
		if len(toks) == 0 {
			return nil
		}
		err := f(owner, toks)
		toks = toks[:0]
		return err
	}
	lineStart := true
	for i := 0; i < len(data); {
		c := data[i]
		if lineStart && depth == 0 {
			if err := flush(); err != nil {
				return err
			}
			owner = c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != ';'
		}
		lineStart = false
		switch {
		case c == '\n':
			lineStart = true
			i++
		case c == ' ' || c == '\t' || c == '\r':
			i++
		case c == ';':
			for i < len(data) && data[i] != '\n' {
				i++
			}
		case c == '(':
			depth++
			i++
		case c == ')':
			if depth == 0 {
				return fmt.Errorf("unbalanced ) at byte %d", i)
			}
			depth--
			i++
		case c == '"':
			start := i
			i++
			var b strings.Builder
			esc := false
			for {
				if i >= len(data) {
					return fmt.Errorf("unterminated quoted string at byte %d", start)
				}
				if data[i] == '\\' && i+1 < len(data) {
					b.WriteByte(data[i])
					b.WriteByte(data[i+1])
					esc = true
					i += 2
					continue
				}
				if data[i] == '"' {
					i++
					break
				}
				b.WriteByte(data[i])
				i++
			}
			toks = append(toks, token{q: b.String(), start: start, end: i, quoted: true, escaped: esc})
		default:
			start := i
			esc := false
			for i < len(data) {
				d := data[i]
				if d == '\\' && i+1 < len(data) {
					esc = true
					i += 2
					continue
				}
				if d == ' ' || d == '\t' || d == '\r' || d == '\n' || d == ';' || d == '(' || d == ')' || d == '"' {
					break
				}
				i++
			}
			toks = append(toks, token{start: start, end: i, escaped: esc})
		}
	}
	if depth != 0 {
		return errors.New("unbalanced ( at end of file")
	}
	return flush()
}

// isTTL reports whether s is a TTL: decimal seconds or BIND units (1h30m).
func isTTL(s string) bool {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i] | 0x20 // lower case letters; digits unchanged
		if !(s[i] >= '0' && s[i] <= '9') && !strings.ContainsRune("smhdw", rune(c)) {
			return false
		}
	}
	return true
}

// isClass reports whether s is a DNS class mnemonic.
func isClass(s string) bool {
	for _, c := range [...]string{"IN", "CH", "CS", "HS"} {
		if strings.EqualFold(s, c) {
			return true
		}
	}
	return len(s) > 5 && strings.EqualFold(s[:5], "CLASS") && isDigits(s[5:])
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
