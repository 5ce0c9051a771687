package nftmodel

import (
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// KeyPart is the datatype of a part of a set's key.
type KeyPart uint8

// The datatypes of keys.
const (
	AddrPart    KeyPart = iota + 1 // ipv4_addr or ipv6_addr, the table's
	ProtoPart                      // inet_proto
	ServicePart                    // inet_service
)

// Set is a named set or map with its elements. A set's type is Key; a
// map's data are verdicts (Verdicts) or, for an endpoint map
// (EndpointMod > 0), the address and port of an endpoint keyed by a
// numgen draw: `typeof numgen random mod N : ip daddr . th dport`.
//
// A set or verdict map holds Elements, an endpoint map Endpoints: each
// kind of element holds only what its sets use, and what few elements
// have (dropped duplicates) is kept beside them, so that the sets of a
// big table cost little. Elements are addressed by their index in the
// set's list (Len, AppendElementText, Encode).
type Set struct {
	Name    string
	Comment string // the comment line above the set, "" for none

	Key         []KeyPart // unused by an endpoint map
	Verdicts    bool
	EndpointMod uint32
	Interval    bool          // flags interval
	Dynamic     bool          // flags dynamic,timeout (with Timeout)
	Timeout     time.Duration // whole seconds

	// Inline writes the elements on the line of `elements = { … }`.
	Inline    bool
	Elements  []Element         // of a set or verdict map
	Endpoints []EndpointElement // of an endpoint map

	// Dropped are, by key, the values of elements with that key that the
	// file shows as dropped after it (a zero Verdict for a set): two
	// frontends with one key, which the compiler rejects; the first is
	// kept so that the file still loads. Usually nil.
	Dropped map[Key][]Verdict
}

// Len is the number of the set's elements: of Endpoints for an endpoint
// map, of Elements otherwise.
func (s *Set) Len() int {
	if s.EndpointMod > 0 {
		return len(s.Endpoints)
	}
	return len(s.Elements)
}

// Key is the key of an element of a set or verdict map, comparable, so
// that elements are found by value. Which fields are used follows the
// set's Key: an address part is Addr (with Bits, the prefix length, in an
// interval set), a protocol Proto, a port Port. A key of two address
// parts holds Addr in both: netspec's one such set, hairpin, matches a
// packet whose source and destination are one address.
type Key struct {
	Addr  netip.Addr
	Port  uint16
	Proto Proto
	Bits  uint8
}

// Element is an element of a set or verdict map. It is comparable, and
// holds what the kernel keeps of the element: equal elements are held
// alike (the set's dropped duplicates are the file's only).
type Element struct {
	Key     Key
	Verdict Verdict // of a verdict map
	Comment string  // the element's comment, which the kernel keeps
}

// EndpointElement is an element of an endpoint map: the range Lo-Hi of
// numgen keys, mapped to the address and port of an endpoint.
type EndpointElement struct {
	Lo, Hi uint32
	To     netip.AddrPort
	// Note is a comment line above the element in the file, "" for none.
	Note string
}

// appendKey appends the text of the key of a set or verdict map's
// element.
func (s *Set) appendKey(b []byte, k *Key) []byte {
	for i, p := range s.Key {
		if i > 0 {
			b = append(b, " . "...)
		}
		switch p {
		case AddrPart:
			b = k.Addr.AppendTo(b)
			if s.Interval && int(k.Bits) != k.Addr.BitLen() {
				b = append(b, '/')
				b = strconv.AppendUint(b, uint64(k.Bits), 10)
			}
		case ProtoPart:
			b = append(b, k.Proto.String()...)
		case ServicePart:
			b = strconv.AppendUint(b, uint64(k.Port), 10)
		}
	}
	return b
}

// AppendElementText appends the element at i as the file writes it,
// without indent or separator: "10.96.0.10 . tcp . 80 : goto service-…".
func (s *Set) AppendElementText(b []byte, i int) []byte {
	if s.EndpointMod > 0 {
		e := &s.Endpoints[i]
		b = strconv.AppendUint(b, uint64(e.Lo), 10)
		if e.Hi != e.Lo {
			b = append(b, '-')
			b = strconv.AppendUint(b, uint64(e.Hi), 10)
		}
		b = append(b, " : "...)
		b = e.To.Addr().AppendTo(b)
		b = append(b, " . "...)
		return strconv.AppendUint(b, uint64(e.To.Port()), 10)
	}
	e := &s.Elements[i]
	b = s.appendKey(b, &e.Key)
	if e.Comment != "" {
		b = append(b, ` comment "`...)
		b = append(b, CommentText(e.Comment)...)
		b = append(b, '"')
	}
	if s.Verdicts {
		b = append(b, " : "...)
		b = e.Verdict.AppendText(b)
	}
	return b
}

// ElementText is AppendElementText as a string.
func (s *Set) ElementText(i int) string { return string(s.AppendElementText(nil, i)) }

// appendType appends the set's type (or typeof) line's text.
func (s *Set) appendType(b []byte, f Family) []byte {
	if s.EndpointMod > 0 {
		b = append(b, "typeof numgen random mod "...)
		b = strconv.AppendUint(b, uint64(s.EndpointMod), 10)
		b = append(b, " : "...)
		b = append(b, f.Keyword()...)
		return append(b, " daddr . th dport"...)
	}
	b = append(b, "type "...)
	for i, p := range s.Key {
		if i > 0 {
			b = append(b, " . "...)
		}
		switch p {
		case AddrPart:
			b = append(b, f.AddrType()...)
		case ProtoPart:
			b = append(b, "inet_proto"...)
		case ServicePart:
			b = append(b, "inet_service"...)
		}
	}
	if s.Verdicts {
		b = append(b, " : verdict"...)
	}
	return b
}

// declLines are the set's declarations, one a line, as the file writes
// them.
func (s *Set) declLines(f Family) []string {
	lines := []string{string(s.appendType(nil, f))}
	switch {
	case s.Dynamic:
		lines = append(lines, "flags dynamic,timeout")
	case s.Interval:
		lines = append(lines, "flags interval")
	}
	if s.Timeout > 0 {
		lines = append(lines, "timeout "+strconv.FormatInt(int64(s.Timeout/time.Second), 10)+"s")
	}
	return lines
}

// Decl is the declaration without the elements, one statement a line
// ("type ipv4_addr\nflags interval"): when it changes, the set must be
// created anew rather than updated.
func (s *Set) Decl(f Family) string {
	return strings.Join(s.declLines(f), "\n")
}

// AppendText appends the set as the file writes it, with its comment.
func (s *Set) AppendText(b []byte, f Family) []byte {
	if s.Comment != "" {
		b = appendComment(b, "\t", s.Comment)
	}
	if s.Verdicts || s.EndpointMod > 0 {
		b = append(b, "\tmap "...)
	} else {
		b = append(b, "\tset "...)
	}
	b = append(b, s.Name...)
	b = append(b, " {\n"...)
	for _, l := range s.declLines(f) {
		b = append(b, "\t\t"...)
		b = append(b, l...)
		b = append(b, '\n')
	}
	switch n := s.Len(); {
	case n == 0:
	case s.Inline:
		b = append(b, "\t\telements = { "...)
		for i := range n {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = s.AppendElementText(b, i)
		}
		b = append(b, " }\n"...)
	default:
		b = append(b, "\t\telements = {\n"...)
		for i := range n {
			b = s.appendElementLines(b, i)
		}
		b = append(b, "\t\t}\n"...)
	}
	return append(b, "\t}\n"...)
}

// appendElementLines appends the lines of the element at i in a list:
// its note, itself and its dropped duplicates.
func (s *Set) appendElementLines(b []byte, i int) []byte {
	if s.EndpointMod > 0 {
		if note := s.Endpoints[i].Note; note != "" {
			b = appendComment(b, "\t\t\t", note)
		}
	}
	b = append(b, "\t\t\t"...)
	b = s.AppendElementText(b, i)
	b = append(b, ",\n"...)
	if s.Dropped == nil || s.EndpointMod > 0 {
		return b
	}
	k := &s.Elements[i].Key
	for _, v := range s.Dropped[*k] {
		b = append(b, "\t\t\t# duplicate key dropped: "...)
		b = s.appendKey(b, k)
		if v.Kind != 0 {
			b = append(b, " : "...)
			b = v.AppendText(b)
		}
		b = append(b, '\n')
	}
	return b
}
