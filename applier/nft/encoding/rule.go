// Package encoding encodes render's nftables model (render/nftmodel) for
// netlink: a rule into the expressions, a set into the declaration and
// elements, that nft 1.0.6 sends for the model's text (checked against
// `nft --debug=netlink` and the kernel's read-back by applier/nft's
// tests). The model itself stays pure; this is the one place that knows
// google/nftables' types.
package encoding

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
	"netspec.dev/netspec/render/nftmodel"
)

// The encoding of a rule is what nft 1.0.6 sends for its text (checked
// against `nft --debug=netlink` and against the rules the kernel returns,
// see applier/nft): a relational match loads its left side into register
// 1 and compares; an address prefix loads only its whole bytes, or the
// whole address and a mask when it ends inside a byte; a concatenation
// loads each part into the next 32-bit register (reg 1, 9, 10 for IPv4,
// reg 1, 2, 13 for nftmodel.IPv6).

// Register numbers (the 32-bit ones start at NFT_REG32_00 = 8).
const (
	regVerdict = 0
	reg1       = 1
	reg2       = 2
	reg32Base  = 8
)

// AnonName is the name of an anonymous set until the kernel names it:
// google/nftables asks for "__set%d".
const AnonName = "__set%d"

// AnonSet is the anonymous set of a rule (`ip saddr != { … }` with more
// than one element), with its elements as nft sends them (for an interval
// set: a leading end element at zero when the first interval does not
// start there, then start and end of every merged interval). Its lookup
// in the rule's expressions has SetName AnonName.
type AnonSet struct {
	Template nftables.Set
	Elements []nftables.SetElement
	// At is the index of the Lookup of the set in the rule's expressions.
	At int
}

// Encoder encodes the rules of one family's table. Expressions that many
// rules have (a payload load, a verdict) are shared between the rules one
// Encoder encodes: they are read-only.
type Encoder struct {
	fam   nftmodel.Family
	cache map[string]expr.Any
	sig   []byte
}

// NewEncoder returns an Encoder for rules of a table of family f.
func NewEncoder(f nftmodel.Family) *Encoder { return &Encoder{fam: f} }

// encoder is the state of one rule's encoding.
type encoder struct {
	*Encoder
	ex   []expr.Any
	anon *AnonSet
}

// Encode returns the expressions of r, named sets referenced by name
// (SetID 0), and its anonymous set, if any.
func (e *Encoder) Encode(r nftmodel.Rule) ([]expr.Any, *AnonSet) {
	enc := encoder{Encoder: e, ex: make([]expr.Any, 0, 8)}
	for _, s := range r {
		enc.stmt(s)
	}
	return enc.ex, enc.anon
}

// stmt appends the expressions of one statement.
func (e *encoder) stmt(s nftmodel.Stmt) {
	switch s := s.(type) {
	case nftmodel.Lookup:
		e.lookup(s)
	case nftmodel.VMap:
		e.vmap(s)
	case nftmodel.AddrMatch:
		e.addrMatch(s)
	case nftmodel.ProtoMatch:
		e.protoMatch(s)
	case nftmodel.FibLocal:
		e.fibLocal(s)
	case nftmodel.CtMatch:
		e.ctMatch(s)
	case nftmodel.MarkMatch:
		e.markMatch(s)
	case nftmodel.NumgenMatch:
		e.numgenMatch(s)
	case nftmodel.MarkSet:
		e.markSet(s)
	case nftmodel.Update:
		e.update(s)
	case nftmodel.DNAT:
		e.dnat(s)
	case nftmodel.DNATMap:
		e.dnatMap(s)
	case nftmodel.Masquerade:
		e.masquerade(s)
	case nftmodel.Reject:
		e.reject()
	case nftmodel.Verdict:
		e.verdict(s)
	default:
		panic(fmt.Sprintf("nft encoding: statement %T has no encoding", s)) // the set of statements is closed: a new one needs a case
	}
}

// intern returns the shared expression of signature sig, which build
// makes the first time.
func (e *encoder) intern(sig []byte, build func() expr.Any) expr.Any {
	if x, ok := e.cache[string(sig)]; ok {
		return x
	}
	x := build()
	if e.cache == nil {
		e.cache = map[string]expr.Any{}
	}
	e.cache[string(sig)] = x
	return x
}

func (e *encoder) add(x expr.Any) { e.ex = append(e.ex, x) }

func b2u(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// fieldSize is the size of a field's value in bytes, in a table of
// family f.
func fieldSize(f nftmodel.Family, fd nftmodel.Field) uint32 {
	switch fd {
	case nftmodel.SAddr, nftmodel.DAddr:
		return addrLen(f)
	case nftmodel.L4Proto:
		return 1
	case nftmodel.THDport:
		return 2
	}
	return 4
}

// load appends the expression that loads n bytes of fd into reg.
func (e *encoder) load(fd nftmodel.Field, reg, n uint32) {
	switch fd {
	case nftmodel.SAddr, nftmodel.DAddr:
		e.payload(expr.PayloadBaseNetworkHeader, addrOffset(e.fam, fd), reg, n)
	case nftmodel.THDport:
		e.payload(expr.PayloadBaseTransportHeader, 2, reg, n)
	case nftmodel.L4Proto:
		e.meta(expr.MetaKeyL4PROTO, reg, false)
	case nftmodel.Mark:
		e.meta(expr.MetaKeyMARK, reg, false)
	}
}

// addrOffset is the offset of an address field in the network header of
// family f.
func addrOffset(f nftmodel.Family, fd nftmodel.Field) uint32 {
	switch {
	case fd == nftmodel.DAddr && f == nftmodel.IPv6:
		return 24
	case fd == nftmodel.DAddr:
		return 16
	case f == nftmodel.IPv6:
		return 8
	}
	return 12
}

func (e *encoder) payload(base expr.PayloadBase, off, reg, n uint32) {
	e.add(e.intern(append(e.sig[:0], 'p', byte(reg), byte(base), byte(off), byte(n)), func() expr.Any {
		return &expr.Payload{DestRegister: reg, Base: base, Offset: off, Len: n}
	}))
}

func (e *encoder) meta(key expr.MetaKey, reg uint32, set bool) {
	e.add(e.intern(append(e.sig[:0], 'm', byte(key), byte(reg), b2u(set)), func() expr.Any {
		return &expr.Meta{Key: key, Register: reg, SourceRegister: set}
	}))
}

func (e *encoder) bitwise(n uint32, mask, xor []byte) {
	e.add(e.intern(append(append(append(e.sig[:0], 'b', byte(n)), mask...), xor...), func() expr.Any {
		return &expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: n, Mask: bytes.Clone(mask), Xor: bytes.Clone(xor)}
	}))
}

func (e *encoder) cmp(op expr.CmpOp, data []byte) {
	if len(data) != 4 && len(data) != 16 || data[0] == 0 {
		// Protocols, ports, prefixes and zeros repeat; whole addresses
		// seldom do.
		e.add(e.intern(append(append(e.sig[:0], 'c', byte(op)), data...), func() expr.Any {
			return &expr.Cmp{Op: op, Register: reg1, Data: bytes.Clone(data)}
		}))
		return
	}
	e.add(&expr.Cmp{Op: op, Register: reg1, Data: bytes.Clone(data)})
}

func (e *encoder) immediate(reg uint32, data []byte) {
	if len(data) <= 2 { // a port: they repeat
		e.add(e.intern(append(append(e.sig[:0], 'i', byte(reg)), data...), func() expr.Any {
			return &expr.Immediate{Register: reg, Data: bytes.Clone(data)}
		}))
		return
	}
	e.add(&expr.Immediate{Register: reg, Data: bytes.Clone(data)})
}

func (e *encoder) numgen(reg, mod, off uint32) {
	sig := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(append(e.sig[:0], 'g', byte(reg)), mod), off)
	e.add(e.intern(sig, func() expr.Any {
		return &expr.Numgen{Register: reg, Modulus: mod, Type: unix.NFT_NG_RANDOM, Offset: off}
	}))
}

// zeros are zero bytes to slice values from.
var zeros [16]byte

// concatReg is the register nft puts a value at 32-bit offset k into: the
// 128-bit register when k is one's start, for compatibility with old
// kernels, else the 32-bit one.
func concatReg(k uint32) uint32 {
	if k%4 == 0 {
		return reg1 + k/4
	}
	return reg32Base + k
}

// loadConcat loads the fields of a key into consecutive registers.
func (e *encoder) loadConcat(c nftmodel.Concat) {
	if len(c) == 1 {
		e.load(c[0], reg1, fieldSize(e.fam, c[0]))
		return
	}
	var k uint32
	for _, fd := range c {
		n := fieldSize(e.fam, fd)
		e.load(fd, concatReg(k), n)
		k += (n + 3) / 4
	}
}

func appendAddr(b []byte, a netip.Addr) []byte {
	if a.Is4() {
		a4 := a.As4()
		return append(b, a4[:]...)
	}
	a16 := a.As16()
	return append(b, a16[:]...)
}

func (e *encoder) lookup(s nftmodel.Lookup) {
	e.loadConcat(s.Key)
	e.add(&expr.Lookup{SourceRegister: reg1, SetName: s.Set, Invert: s.Invert})
}

func (e *encoder) vmap(s nftmodel.VMap) {
	e.loadConcat(s.Key)
	e.add(&expr.Lookup{SourceRegister: reg1, IsDestRegSet: true, DestRegister: regVerdict, SetName: s.Map})
}

func (e *encoder) addrMatch(s nftmodel.AddrMatch) {
	op := expr.CmpOpEq
	if s.Neq {
		op = expr.CmpOpNeq
	}
	if len(s.Prefixes) == 1 {
		// nft compares with the one element of a set, as with a bare
		// prefix.
		e.comparePrefix(s.Field, op, s.Prefixes[0])
		return
	}
	anon := &AnonSet{Template: nftables.Set{
		Anonymous: true,
		Constant:  true,
		KeyType:   addrType(e.fam),
	}}
	interval := false
	for _, p := range s.Prefixes {
		interval = interval || !p.IsSingleIP()
	}
	if interval {
		anon.Template.Interval = true
		anon.Template.AutoMerge = true
		anon.Elements, anon.Template.Size = intervalElements(nftmodel.MergeRanges(s.Prefixes))
	} else {
		for _, p := range s.Prefixes {
			anon.Elements = append(anon.Elements, nftables.SetElement{Key: p.Addr().AsSlice()})
		}
		anon.Template.Size = uint32(len(anon.Elements))
	}
	e.load(s.Field, reg1, fieldSize(e.fam, s.Field))
	anon.At = len(e.ex)
	e.add(&expr.Lookup{SourceRegister: reg1, Invert: s.Neq, SetName: AnonName})
	e.anon = anon
}

// comparePrefix compares an address with a prefix: whole bytes of the
// prefix are loaded and compared; a prefix ending inside a byte loads the
// whole address and masks it.
func (e *encoder) comparePrefix(fd nftmodel.Field, op expr.CmpOp, pfx netip.Prefix) {
	addr := appendAddr(nil, pfx.Addr())
	bits := pfx.Bits()
	size := fieldSize(e.fam, fd)
	if bits%8 == 0 && bits > 0 {
		n := uint32(bits / 8)
		e.load(fd, reg1, n)
		e.cmp(op, addr[:n])
		return
	}
	e.load(fd, reg1, size)
	e.bitwise(size, net.CIDRMask(bits, len(addr)*8), zeros[:size])
	e.cmp(op, addr)
}

// intervalElements returns the elements nft sends for sorted, disjoint
// intervals: an end element at zero when the first does not start there,
// then each start and its end (the address after the last one, flagged
// IntervalEnd), none for an interval reaching the last address. size is
// what nft declares as the set's size.
func intervalElements(rs []nftmodel.Range) (elems []nftables.SetElement, size uint32) {
	if len(rs) > 0 && !rs[0].Lo.IsUnspecified() {
		elems = append(elems, nftables.SetElement{Key: make([]byte, rs[0].Lo.BitLen()/8), IntervalEnd: true})
		size++
	}
	for _, r := range rs {
		elems = append(elems, nftables.SetElement{Key: r.Lo.AsSlice()})
		if next := r.Hi.Next(); next.IsValid() {
			elems = append(elems, nftables.SetElement{Key: next.AsSlice(), IntervalEnd: true})
		}
		size += 2
	}
	return elems, size
}

func (e *encoder) protoMatch(s nftmodel.ProtoMatch) {
	e.load(nftmodel.L4Proto, reg1, 1)
	e.cmp(expr.CmpOpEq, []byte{byte(s.Proto)})
}

// fibTypeLocal is RTN_LOCAL, the address type `fib … type local` tests.
const fibTypeLocal = 2

func (e *encoder) fibLocal(s nftmodel.FibLocal) {
	e.add(e.intern(append(e.sig[:0], 'f', reg1, b2u(s.Daddr)), func() expr.Any {
		return &expr.Fib{Register: reg1, ResultADDRTYPE: true, FlagDADDR: s.Daddr, FlagSADDR: !s.Daddr}
	}))
	e.cmp(expr.CmpOpEq, binary.NativeEndian.AppendUint32(nil, fibTypeLocal))
}

func (e *encoder) ctMatch(s nftmodel.CtMatch) {
	key := expr.CtKeySTATE
	if s.Key == nftmodel.CtStatus {
		key = expr.CtKeySTATUS
	}
	e.add(e.intern(append(e.sig[:0], 't', reg1, byte(key)), func() expr.Any {
		return &expr.Ct{Register: reg1, Key: key}
	}))
	e.bitwise(4, binary.NativeEndian.AppendUint32(nil, s.Bits), zeros[:4])
	e.cmp(expr.CmpOpNeq, zeros[:4])
}

func (e *encoder) markMatch(s nftmodel.MarkMatch) {
	e.meta(expr.MetaKeyMARK, reg1, false)
	e.bitwise(4, binary.NativeEndian.AppendUint32(nil, s.Mask), zeros[:4])
	e.cmp(expr.CmpOpEq, binary.NativeEndian.AppendUint32(nil, s.Value))
}

func (e *encoder) numgenMatch(s nftmodel.NumgenMatch) {
	e.numgen(reg1, s.Mod, 0)
	e.cmp(expr.CmpOpEq, binary.NativeEndian.AppendUint32(nil, s.Value))
}

func (e *encoder) markSet(s nftmodel.MarkSet) {
	mask, xor := ^s.Value, s.Value
	if s.Op == nftmodel.MarkXor {
		mask = 0xffffffff
	}
	e.meta(expr.MetaKeyMARK, reg1, false)
	e.bitwise(4, binary.NativeEndian.AppendUint32(nil, mask), binary.NativeEndian.AppendUint32(nil, xor))
	e.meta(expr.MetaKeyMARK, reg1, true)
}

func (e *encoder) update(s nftmodel.Update) {
	e.loadConcat(s.Key)
	e.add(&expr.Dynset{SrcRegKey: reg1, SetName: s.Set, Operation: unix.NFT_DYNSET_OP_UPDATE})
}

// natFamily is the NFPROTO of the family.
func natFamily(f nftmodel.Family) uint32 {
	if f == nftmodel.IPv6 {
		return unix.NFPROTO_IPV6
	}
	return unix.NFPROTO_IPV4
}

func (e *encoder) dnat(s nftmodel.DNAT) {
	family := natFamily(e.fam)
	e.immediate(reg1, appendAddr(nil, s.To.Addr()))
	e.immediate(reg2, binary.BigEndian.AppendUint16(nil, s.To.Port()))
	e.add(e.intern(append(e.sig[:0], 'n', byte(expr.NATTypeDestNAT), byte(family)), func() expr.Any {
		return &expr.NAT{Type: expr.NATTypeDestNAT, Family: family, RegAddrMin: reg1, RegProtoMin: reg2, Specified: true}
	}))
}

// DNATMap: numgen into register 1, turned to network byte order for the
// interval map, looked up in the map into registers 1 (the address) and
// the next 32-bit word after it (the port), and DNAT to both.
func (e *encoder) dnatMap(s nftmodel.DNATMap) {
	e.numgen(reg1, s.Mod, s.Offset)
	e.add(e.intern(append(e.sig[:0], 'o'), func() expr.Any {
		return &expr.Byteorder{SourceRegister: reg1, DestRegister: reg1, Op: expr.ByteorderHton, Len: 4, Size: 4}
	}))
	e.add(&expr.Lookup{SourceRegister: reg1, IsDestRegSet: true, DestRegister: reg1, SetName: s.Map})
	family, portReg := natFamily(e.fam), uint32(reg32Base+1)
	if e.fam == nftmodel.IPv6 {
		portReg = reg2
	}
	e.add(e.intern(append(e.sig[:0], 'N', byte(family)), func() expr.Any {
		return &expr.NAT{Type: expr.NATTypeDestNAT, Family: family, RegAddrMin: reg1, RegProtoMin: portReg, Specified: true}
	}))
}

func (e *encoder) masquerade(s nftmodel.Masquerade) {
	e.add(e.intern(append(e.sig[:0], 'q', b2u(s.FullyRandom)), func() expr.Any {
		return &expr.Masq{FullyRandom: s.FullyRandom}
	}))
}

func (e *encoder) reject() {
	code := byte(3) // ICMP_PORT_UNREACH
	if e.fam == nftmodel.IPv6 {
		code = 4 // ICMPV6_PORT_UNREACH
	}
	e.add(e.intern(append(e.sig[:0], 'r'), func() expr.Any {
		return &expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: code}
	}))
}

func (e *encoder) verdict(v nftmodel.Verdict) {
	if v.Chain == "" {
		e.add(e.intern(append(e.sig[:0], 'v', byte(v.Kind)), func() expr.Any { return Verdict(v) }))
		return
	}
	e.add(Verdict(v))
}

// verdictKinds are the kernel's verdicts of the model's, by kind: the
// encoding's and the decoding's one table.
var verdictKinds = [...]expr.VerdictKind{
	nftmodel.Accept: expr.VerdictAccept,
	nftmodel.Drop:   expr.VerdictDrop,
	nftmodel.Return: expr.VerdictReturn,
	nftmodel.Jump:   expr.VerdictJump,
	nftmodel.Goto:   expr.VerdictGoto,
}

// Verdict is the verdict's expression, also the data of a verdict map's
// element.
func Verdict(v nftmodel.Verdict) *expr.Verdict {
	return &expr.Verdict{Kind: verdictKinds[v.Kind], Chain: v.Chain}
}
