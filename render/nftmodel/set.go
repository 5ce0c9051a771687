package nftmodel

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"strconv"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
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
	Inline   bool
	Elements []Element
}

// IsMap tells whether the set is a map.
func (s *Set) IsMap() bool { return s.Verdicts || s.EndpointMod > 0 }

// Key is the key of an element, comparable, so that elements are found
// by value. Which fields are used follows the set's Key: its first
// address part is Addr (with Bits, the prefix length, in an interval
// set), a second one Addr2; a protocol Proto, a port Port. An endpoint
// map's key is the range Lo-Hi of numgen keys.
type Key struct {
	Addr, Addr2 netip.Addr
	Lo, Hi      uint32
	Port        uint16
	Proto       Proto
	Bits        uint8
}

// Element is an element of a set or map.
type Element struct {
	Key     Key
	Verdict Verdict        // of a verdict map
	To      netip.AddrPort // of an endpoint map
	Comment string         // the element's comment, which the kernel keeps

	// Note is a comment line above the element in the file, "" for none.
	Note string
	// Dropped are the values of elements with the same key that the file
	// shows as dropped (a zero Verdict for a set): two frontends with one
	// key, which the compiler rejects; the first is kept so that the file
	// still loads.
	Dropped []Verdict
}

// appendKey appends the text of an element's key.
func (s *Set) appendKey(b []byte, k *Key) []byte {
	if s.EndpointMod > 0 {
		b = strconv.AppendUint(b, uint64(k.Lo), 10)
		if k.Hi != k.Lo {
			b = append(b, '-')
			b = strconv.AppendUint(b, uint64(k.Hi), 10)
		}
		return b
	}
	addrs := 0
	for i, p := range s.Key {
		if i > 0 {
			b = append(b, " . "...)
		}
		switch p {
		case AddrPart:
			a := k.Addr
			if addrs > 0 {
				a = k.Addr2
			}
			addrs++
			b = a.AppendTo(b)
			if s.Interval && int(k.Bits) != a.BitLen() {
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

// AppendElementText appends the element as the file writes it, without
// indent or separator: "10.96.0.10 . tcp . 80 : goto service-…".
func (s *Set) AppendElementText(b []byte, e *Element) []byte {
	b = s.appendKey(b, &e.Key)
	if e.Comment != "" {
		b = append(b, ` comment "`...)
		b = appendCommentText(b, e.Comment)
		b = append(b, '"')
	}
	switch {
	case s.EndpointMod > 0:
		b = append(b, " : "...)
		b = e.To.Addr().AppendTo(b)
		b = append(b, " . "...)
		b = strconv.AppendUint(b, uint64(e.To.Port()), 10)
	case s.Verdicts:
		b = append(b, " : "...)
		b = e.Verdict.AppendText(b)
	}
	return b
}

// ElementText is AppendElementText as a string.
func (s *Set) ElementText(e *Element) string { return string(s.AppendElementText(nil, e)) }

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
	b := []byte(nil)
	for i, l := range s.declLines(f) {
		if i > 0 {
			b = append(b, '\n')
		}
		b = append(b, l...)
	}
	return string(b)
}

// AppendText appends the set as the file writes it, with its comment.
func (s *Set) AppendText(b []byte, f Family) []byte {
	if s.Comment != "" {
		b = append(b, "\t# "...)
		b = appendCommentText(b, s.Comment)
		b = append(b, '\n')
	}
	if s.IsMap() {
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
	switch {
	case len(s.Elements) == 0:
	case s.Inline:
		b = append(b, "\t\telements = { "...)
		for i := range s.Elements {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = s.AppendElementText(b, &s.Elements[i])
		}
		b = append(b, " }\n"...)
	default:
		b = append(b, "\t\telements = {\n"...)
		for i := range s.Elements {
			b = s.appendElementLines(b, &s.Elements[i])
		}
		b = append(b, "\t\t}\n"...)
	}
	return append(b, "\t}\n"...)
}

// appendElementLines appends the lines of an element in a list: its note,
// itself and its dropped duplicates.
func (s *Set) appendElementLines(b []byte, e *Element) []byte {
	if e.Note != "" {
		b = append(b, "\t\t\t# "...)
		b = appendCommentText(b, e.Note)
		b = append(b, '\n')
	}
	b = append(b, "\t\t\t"...)
	b = s.AppendElementText(b, e)
	b = append(b, ",\n"...)
	for _, v := range e.Dropped {
		b = append(b, "\t\t\t# duplicate key dropped: "...)
		b = s.appendKey(b, &e.Key)
		if v.Kind != 0 {
			b = append(b, " : "...)
			b = v.AppendText(b)
		}
		b = append(b, '\n')
	}
	return b
}

// keyTypes are the google/nftables datatypes of the key parts.
func (s *Set) keyTypes(f Family) []nftables.SetDatatype {
	dts := make([]nftables.SetDatatype, len(s.Key))
	for i, p := range s.Key {
		switch p {
		case AddrPart:
			dts[i] = nftables.TypeIPAddr
			if f == IPv6 {
				dts[i] = nftables.TypeIP6Addr
			}
		case ProtoPart:
			dts[i] = nftables.TypeInetProto
		case ServicePart:
			dts[i] = nftables.TypeInetService
		}
	}
	return dts
}

// Template is the set as google/nftables creates it, without its table.
func (s *Set) Template(f Family) nftables.Set {
	t := nftables.Set{
		Name:       s.Name,
		Interval:   s.Interval,
		Dynamic:    s.Dynamic,
		HasTimeout: s.Dynamic || s.Timeout > 0,
		Timeout:    s.Timeout,
	}
	if s.EndpointMod > 0 {
		addr := nftables.TypeIPAddr
		if f == IPv6 {
			addr = nftables.TypeIP6Addr
		}
		data, _ := nftables.ConcatSetType(addr, nftables.TypeInetService) // two types: cannot fail
		t.KeyType, t.KeyByteOrder = nftables.TypeInteger, binaryutil.NativeEndian
		t.IsMap, t.DataType = true, data
		return t
	}
	dts := s.keyTypes(f)
	if len(dts) == 1 {
		t.KeyType, t.KeyByteOrder = dts[0], binaryutil.BigEndian
	} else {
		t.KeyType, _ = nftables.ConcatSetType(dts...) // at most five types: cannot fail
	}
	if s.Verdicts {
		t.IsMap, t.DataType = true, nftables.TypeVerdict
	}
	return t
}

// Encode returns the netlink elements nft sends for e, an element of s in
// a table of family f: one for a plain key, two for an interval (its
// start, and its end flagged IntervalEnd) or just the start when the
// interval reaches the end of its key space. The leading end element of
// an interval set is not included (see EncodeAll).
func (s *Set) Encode(f Family, e *Element) []nftables.SetElement {
	var key, end []byte
	if s.EndpointMod > 0 {
		key = binary.BigEndian.AppendUint32(nil, e.Key.Lo)
		if e.Key.Hi < 1<<32-1 {
			end = binary.BigEndian.AppendUint32(nil, e.Key.Hi+1)
		}
	} else {
		addrs := 0
		for _, p := range s.Key {
			switch p {
			case AddrPart:
				a := e.Key.Addr
				if addrs > 0 {
					a = e.Key.Addr2
				}
				addrs++
				key = appendAddr(key, a)
				if s.Interval {
					if next := lastAddr(netip.PrefixFrom(a, int(e.Key.Bits))).Next(); next.IsValid() {
						end = appendAddr(nil, next)
					}
				}
			case ProtoPart:
				key = append(key, byte(e.Key.Proto))
			case ServicePart:
				key = binary.BigEndian.AppendUint16(key, e.Key.Port)
			}
			if len(s.Key) > 1 {
				for len(key)%4 != 0 {
					key = append(key, 0)
				}
			}
		}
	}
	el := nftables.SetElement{Key: key, Comment: CommentText(e.Comment)}
	switch {
	case s.Verdicts:
		el.VerdictData = e.Verdict.Expr()
	case s.EndpointMod > 0:
		val := appendAddr(nil, e.To.Addr())
		val = binary.BigEndian.AppendUint16(val, e.To.Port())
		el.Val = append(val, 0, 0)
	}
	if end == nil {
		return []nftables.SetElement{el}
	}
	return []nftables.SetElement{el, {Key: end, IntervalEnd: true}}
}

// EncodeAll returns Encode of every element, in order, the element of an
// interval set with the lowest start carrying first the end element at
// zero that nft sends when creating the set, unless that interval starts
// at zero: the kernel keeps it like any element.
func (s *Set) EncodeAll(f Family) [][]nftables.SetElement {
	out := make([][]nftables.SetElement, len(s.Elements))
	low := -1
	for i := range s.Elements {
		out[i] = s.Encode(f, &s.Elements[i])
		if low < 0 || bytes.Compare(out[i][0].Key, out[low][0].Key) < 0 {
			low = i
		}
	}
	if s.Interval && low >= 0 {
		start := out[low][0].Key
		if zero := make([]byte, len(start)); !bytes.Equal(start, zero) {
			out[low] = append([]nftables.SetElement{{Key: zero, IntervalEnd: true}}, out[low]...)
		}
	}
	return out
}
