package nftmodel

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Rule is a rule: its statements, in order. The last may end it (a
// verdict, a vmap, reject).
type Rule []Stmt

// Stmt is a statement of a rule: one of the types of this package
// (Lookup, VMap, AddrMatch, ProtoMatch, FibLocal, CtMatch, MarkMatch,
// NumgenMatch, MarkSet, Update, DNAT, DNATMap, Masquerade, Reject,
// Verdict). The set is closed: a statement prints itself, and the
// applier's encoding (applier/nft/encoding) has a case for each.
type Stmt interface {
	appendText(b []byte, f Family) []byte
}

// Field is a value a rule loads from a packet or its metadata.
type Field uint8

// The fields rules match or look up.
const (
	SAddr   Field = iota + 1 // ip saddr, ip6 saddr
	DAddr                    // ip daddr, ip6 daddr
	L4Proto                  // meta l4proto
	THDport                  // th dport
	Mark                     // meta mark
)

// appendField appends the field's expression.
func appendField(b []byte, fd Field, f Family) []byte {
	switch fd {
	case SAddr:
		return append(append(b, f.Keyword()...), " saddr"...)
	case DAddr:
		return append(append(b, f.Keyword()...), " daddr"...)
	case L4Proto:
		return append(b, "meta l4proto"...)
	case THDport:
		return append(b, "th dport"...)
	}
	return append(b, "meta mark"...)
}

// Concat is a field or a concatenation of fields.
type Concat []Field

// Common keys, shared so that rules need not allocate them.
var (
	KeySAddr          = Concat{SAddr}
	KeyDAddr          = Concat{DAddr}
	KeyDAddrProtoPort = Concat{DAddr, L4Proto, THDport}
	KeyProtoPort      = Concat{L4Proto, THDport}
	KeySAddrDAddr     = Concat{SAddr, DAddr}
)

func (c Concat) appendText(b []byte, f Family) []byte {
	for i, fd := range c {
		if i > 0 {
			b = append(b, " . "...)
		}
		b = appendField(b, fd, f)
	}
	return b
}

// Lookup matches when the key is (Invert: is not) in the named set:
// `KEY @SET`.
type Lookup struct {
	Key    Concat
	Set    string
	Invert bool
}

func (s Lookup) appendText(b []byte, f Family) []byte {
	b = s.Key.appendText(b, f)
	if s.Invert {
		b = append(b, " !="...)
	}
	b = append(b, " @"...)
	return append(b, s.Set...)
}

// VMap looks the key up in a verdict map and applies the verdict found:
// `KEY vmap @MAP`. It ends the rule.
type VMap struct {
	Key Concat
	Map string
}

func (s VMap) appendText(b []byte, f Family) []byte {
	b = s.Key.appendText(b, f)
	b = append(b, " vmap @"...)
	return append(b, s.Map...)
}

// AddrMatch matches an address field (SAddr or DAddr) against prefixes:
// `ip saddr 10.0.0.0/8`, `ip saddr != { 10.0.0.0/8, 192.0.2.1 }`. One
// prefix is written bare unless Braces; several always in braces (an
// anonymous set). A prefix holding one address is written as the address.
type AddrMatch struct {
	Field    Field
	Neq      bool
	Prefixes []netip.Prefix
	Braces   bool
}

func (s AddrMatch) appendText(b []byte, f Family) []byte {
	b = appendField(b, s.Field, f)
	if s.Neq {
		b = append(b, " !="...)
	}
	b = append(b, ' ')
	if len(s.Prefixes) == 1 && !s.Braces {
		return appendPrefix(b, s.Prefixes[0])
	}
	b = append(b, "{ "...)
	for i, p := range s.Prefixes {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = appendPrefix(b, p)
	}
	return append(b, " }"...)
}

// appendPrefix appends p, as an address when it holds one.
func appendPrefix(b []byte, p netip.Prefix) []byte {
	if p.IsSingleIP() {
		return p.Addr().AppendTo(b)
	}
	return p.AppendTo(b)
}

// Proto is a transport protocol number.
type Proto uint8

// The protocols of Services.
const (
	TCP  Proto = 6
	UDP  Proto = 17
	SCTP Proto = 132
)

// String is nft's name of the protocol.
func (p Proto) String() string {
	switch p {
	case TCP:
		return "tcp"
	case UDP:
		return "udp"
	case SCTP:
		return "sctp"
	}
	return strconv.Itoa(int(p))
}

// ProtoOf is the protocol of nft's name ("tcp", "udp", "sctp") or
// Kubernetes' ("TCP", "UDP", "SCTP"), false for another.
func ProtoOf(name string) (Proto, bool) {
	for _, p := range [...]Proto{TCP, UDP, SCTP} {
		if strings.EqualFold(name, p.String()) {
			return p, true
		}
	}
	return 0, false
}

// ProtoMatch matches the transport protocol: `meta l4proto tcp`.
type ProtoMatch struct{ Proto Proto }

func (s ProtoMatch) appendText(b []byte, _ Family) []byte {
	b = append(b, "meta l4proto "...)
	return append(b, s.Proto.String()...)
}

// FibLocal matches a packet whose source (or with Daddr, destination)
// address is local: `fib saddr type local`.
type FibLocal struct{ Daddr bool }

func (s FibLocal) appendText(b []byte, _ Family) []byte {
	if s.Daddr {
		return append(b, "fib daddr type local"...)
	}
	return append(b, "fib saddr type local"...)
}

// CtKey is a conntrack field of a CtMatch.
type CtKey uint8

// The conntrack fields.
const (
	CtState CtKey = iota + 1
	CtStatus
)

// Conntrack bits rules test.
const (
	StateNew   uint32 = 8  // ct state new
	StatusDNAT uint32 = 32 // ct status dnat
)

// CtMatch tests conntrack bits: `ct state new`, `ct status dnat`.
type CtMatch struct {
	Key  CtKey
	Bits uint32 // StateNew or StatusDNAT
}

func (s CtMatch) appendText(b []byte, _ Family) []byte {
	if s.Key == CtStatus {
		b = append(b, "ct status "...)
		if s.Bits == StatusDNAT {
			return append(b, "dnat"...)
		}
	} else {
		b = append(b, "ct state "...)
		if s.Bits == StateNew {
			return append(b, "new"...)
		}
	}
	return appendHex(b, s.Bits)
}

// appendHex appends v as nft reads a mark: 0x and hexadecimal digits.
func appendHex(b []byte, v uint32) []byte {
	b = append(b, "0x"...)
	return strconv.AppendUint(b, uint64(v), 16)
}

// MarkMatch matches the packet mark under a mask: `meta mark & 0x4000 ==
// 0`.
type MarkMatch struct{ Mask, Value uint32 }

func (s MarkMatch) appendText(b []byte, _ Family) []byte {
	b = append(b, "meta mark & "...)
	b = appendHex(b, s.Mask)
	b = append(b, " == "...)
	return strconv.AppendUint(b, uint64(s.Value), 10)
}

// NumgenMatch draws a random number below Mod and matches Value: `numgen
// random mod 3 == 0`.
type NumgenMatch struct{ Mod, Value uint32 }

func (s NumgenMatch) appendText(b []byte, _ Family) []byte {
	b = append(b, "numgen random mod "...)
	b = strconv.AppendUint(b, uint64(s.Mod), 10)
	b = append(b, " == "...)
	return strconv.AppendUint(b, uint64(s.Value), 10)
}

// MarkOp is how MarkSet changes the mark.
type MarkOp uint8

// The operations on the mark.
const (
	MarkOr  MarkOp = iota + 1 // set the bits
	MarkXor                   // flip the bits
)

// MarkSet changes the packet mark: `meta mark set meta mark | 0x4000`.
type MarkSet struct {
	Op    MarkOp
	Value uint32
}

func (s MarkSet) appendText(b []byte, _ Family) []byte {
	b = append(b, "meta mark set meta mark "...)
	if s.Op == MarkXor {
		b = append(b, "^ "...)
	} else {
		b = append(b, "| "...)
	}
	return appendHex(b, s.Value)
}

// Update adds the key to a dynamic set or refreshes its timeout: `update
// @SET { ip saddr }`.
type Update struct {
	Set string
	Key Concat
}

func (s Update) appendText(b []byte, f Family) []byte {
	b = append(b, "update @"...)
	b = append(b, s.Set...)
	b = append(b, " { "...)
	b = s.Key.appendText(b, f)
	return append(b, " }"...)
}

// DNAT rewrites the destination address and port: `dnat to
// 10.244.1.5:8080`. It needs a ProtoMatch before it.
type DNAT struct{ To netip.AddrPort }

func (s DNAT) appendText(b []byte, _ Family) []byte {
	b = append(b, "dnat to "...)
	return s.To.AppendTo(b)
}

// DNATMap rewrites the destination to the address and port an endpoint
// map holds for a random key: `dnat ip to numgen random mod 2520 offset O
// map @MAP` (offset 0 is not written). It needs a ProtoMatch before it.
type DNATMap struct {
	Mod, Offset uint32
	Map         string
}

func (s DNATMap) appendText(b []byte, f Family) []byte {
	b = append(b, "dnat "...)
	b = append(b, f.Keyword()...)
	b = append(b, " to numgen random mod "...)
	b = strconv.AppendUint(b, uint64(s.Mod), 10)
	if s.Offset != 0 {
		b = append(b, " offset "...)
		b = strconv.AppendUint(b, uint64(s.Offset), 10)
	}
	b = append(b, " map @"...)
	return append(b, s.Map...)
}

// Masquerade masquerades the packet: `masquerade fully-random`.
type Masquerade struct{ FullyRandom bool }

func (s Masquerade) appendText(b []byte, _ Family) []byte {
	if s.FullyRandom {
		return append(b, "masquerade fully-random"...)
	}
	return append(b, "masquerade"...)
}

// Reject refuses the packet with an ICMP port unreachable: `reject`. It
// ends the rule.
type Reject struct{}

func (Reject) appendText(b []byte, _ Family) []byte { return append(b, "reject"...) }

// VerdictKind is what a verdict does.
type VerdictKind uint8

// The verdicts.
const (
	Accept VerdictKind = iota + 1
	Drop
	Return
	Jump
	Goto
)

// Verdict ends a rule: `drop`, `return`, `jump CHAIN`, `goto CHAIN`. It is
// also the value of a verdict map's element.
type Verdict struct {
	Kind  VerdictKind
	Chain string // of Jump and Goto
}

// GoTo is the verdict that goes to chain: that of the map elements and
// dispatch rules that send a packet on to a Service's chains.
func GoTo(chain string) Verdict { return Verdict{Kind: Goto, Chain: chain} }

// AppendText appends the verdict as nft writes it.
func (v Verdict) AppendText(b []byte) []byte {
	switch v.Kind {
	case Accept:
		return append(b, "accept"...)
	case Drop:
		return append(b, "drop"...)
	case Return:
		return append(b, "return"...)
	case Jump:
		b = append(b, "jump "...)
	default:
		b = append(b, "goto "...)
	}
	return append(b, v.Chain...)
}

func (v Verdict) appendText(b []byte, _ Family) []byte { return v.AppendText(b) }

// String is the verdict's text.
func (v Verdict) String() string { return string(v.AppendText(nil)) }

// AppendText appends the rule's line as nft reads it, without indent or
// newline.
func (r Rule) AppendText(b []byte, f Family) []byte {
	for i, s := range r {
		if i > 0 {
			b = append(b, ' ')
		}
		b = s.appendText(b, f)
	}
	return b
}

// Text is the rule's line.
func (r Rule) Text(f Family) string { return string(r.AppendText(nil, f)) }

// Canonical is the rule as the kernel keeps it, which is how it reads
// back: an address match of several prefixes is an anonymous set, which
// holds single addresses sorted and once each, and prefixes (with any
// single addresses among them) merged into the fewest prefixes that
// cover them, in order; it is written in braces, even when the merge
// leaves one prefix. A match of one prefix is compared with it, bare.
// Other statements are kept as they are. A rule without an address
// match is returned as it is.
func (r Rule) Canonical() Rule {
	if !r.hasAddrMatch() {
		return r
	}
	out := slices.Clone(r)
	for i, s := range out {
		if m, ok := s.(AddrMatch); ok {
			out[i] = m.canonical()
		}
	}
	return out
}

// hasAddrMatch tells whether the rule has an address match.
func (r Rule) hasAddrMatch() bool {
	return slices.ContainsFunc(r, func(s Stmt) bool {
		_, ok := s.(AddrMatch)
		return ok
	})
}

// canonical is the match as the kernel keeps it (Rule.Canonical).
func (s AddrMatch) canonical() AddrMatch {
	s.Braces = len(s.Prefixes) > 1
	if !s.Braces {
		return s
	}
	ps := slices.Clone(s.Prefixes)
	slices.SortFunc(ps, ComparePrefixes)
	if slices.ContainsFunc(ps, func(p netip.Prefix) bool { return !p.IsSingleIP() }) {
		s.Prefixes = nil
		for _, r := range MergeRanges(ps) {
			s.Prefixes = r.AppendPrefixes(s.Prefixes)
		}
	} else {
		s.Prefixes = slices.Compact(ps)
	}
	return s
}

// ComparePrefixes orders prefixes by address, then length.
func ComparePrefixes(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}

// Range is the addresses from Lo to Hi, both included.
type Range struct{ Lo, Hi netip.Addr }

// MergeRanges returns the ranges of the prefixes, sorted, those that
// overlap or touch merged into one, as nft merges the elements of an
// interval set.
func MergeRanges(ps []netip.Prefix) []Range {
	rs := make([]Range, len(ps))
	for i, p := range ps {
		rs[i] = Range{p.Masked().Addr(), LastAddr(p)}
	}
	slices.SortFunc(rs, func(a, b Range) int { return a.Lo.Compare(b.Lo) })
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 {
			if next := out[n-1].Hi.Next(); !next.IsValid() || !next.Less(r.Lo) {
				if out[n-1].Hi.Less(r.Hi) {
					out[n-1].Hi = r.Hi
				}
				continue
			}
		}
		out = append(out, r)
	}
	return out
}

// AppendPrefixes appends the fewest prefixes that cover r exactly, in
// order.
func (r Range) AppendPrefixes(out []netip.Prefix) []netip.Prefix {
	for lo := r.Lo; ; {
		n := lo.BitLen()
		// The shortest prefix at lo that stays inside the range.
		for n > 0 {
			p := netip.PrefixFrom(lo, n-1)
			if p.Masked().Addr() != lo || r.Hi.Less(LastAddr(p)) {
				break
			}
			n--
		}
		p := netip.PrefixFrom(lo, n)
		out = append(out, p)
		next := LastAddr(p).Next()
		if !next.IsValid() || r.Hi.Less(next) {
			return out
		}
		lo = next
	}
}

// LastAddr is the last address of a prefix.
func LastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
