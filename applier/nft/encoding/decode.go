package encoding

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
	"netspec.dev/netspec/render/nftmodel"
)

// Decoding is the inverse of the encoding: what the kernel holds, read
// back as expressions and set elements, becomes the model again, so that
// the kernel's state is compared with the model's by the model's one
// comparison (nftmodel.Diff and the functions it uses), and printed by the
// model's printer. A rule that is not one of the model's forms (made by
// hand, or by another program) does not decode: ErrForeign.

// ErrForeign is the error of a rule or element that is not one the model
// can hold.
var ErrForeign = errors.New("not a form netspec writes")

// foreign wraps ErrForeign with what was found.
func foreign(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrForeign, fmt.Sprintf(format, args...))
}

// DecodeRule reads a rule of a table of family f back into the model from
// its expressions, as Encode writes them or the kernel dumps them; anon
// are the elements of the anonymous set its lookup uses, if any.
func DecodeRule(f nftmodel.Family, exprs []expr.Any, anon []nftables.SetElement) (nftmodel.Rule, error) {
	d := decoder{fam: f, ex: exprs, anon: anon}
	var r nftmodel.Rule
	for d.i < len(d.ex) {
		s, err := d.stmt()
		if err != nil {
			return nil, err
		}
		r = append(r, s)
	}
	return r, nil
}

// decoder is the state of one rule's decoding: ex[i] is the next
// expression.
type decoder struct {
	fam  nftmodel.Family
	ex   []expr.Any
	i    int
	anon []nftables.SetElement
}

func (d *decoder) peek(k int) expr.Any {
	if d.i+k < len(d.ex) {
		return d.ex[d.i+k]
	}
	return nil
}

// field is the field a load expression loads, with the length it loads.
func (d *decoder) field(x expr.Any) (fd nftmodel.Field, n uint32, ok bool) {
	switch x := x.(type) {
	case *expr.Payload:
		if x.OperationType != expr.PayloadLoad {
			return 0, 0, false
		}
		switch {
		case x.Base == expr.PayloadBaseTransportHeader && x.Offset == 2 && x.Len == 2:
			return nftmodel.THDport, 2, true
		case x.Base != expr.PayloadBaseNetworkHeader:
			return 0, 0, false
		}
		switch x.Offset {
		case addrOffset(d.fam, nftmodel.SAddr):
			return nftmodel.SAddr, x.Len, x.Len <= addrLen(d.fam)
		case addrOffset(d.fam, nftmodel.DAddr):
			return nftmodel.DAddr, x.Len, x.Len <= addrLen(d.fam)
		}
	case *expr.Meta:
		if x.SourceRegister {
			return 0, 0, false
		}
		switch x.Key {
		case expr.MetaKeyL4PROTO:
			return nftmodel.L4Proto, 1, true
		case expr.MetaKeyMARK:
			return nftmodel.Mark, 4, true
		}
	}
	return 0, 0, false
}

// concat reads consecutive loads into registers as loadConcat writes
// them, stopping before the first expression that is not one.
func (d *decoder) concat() nftmodel.Concat {
	var c nftmodel.Concat
	var k uint32
	for {
		fd, n, ok := d.field(d.peek(0))
		if !ok || n != fieldSize(d.fam, fd) || destReg(d.peek(0)) != concatReg(k) && !(len(c) == 0 && destReg(d.peek(0)) == reg1) {
			return c
		}
		c = append(c, fd)
		k += (n + 3) / 4
		d.i++
	}
}

// destReg is the register a load writes.
func destReg(x expr.Any) uint32 {
	switch x := x.(type) {
	case *expr.Payload:
		return x.DestRegister
	case *expr.Meta:
		return x.Register
	}
	return 1 << 31
}

// stmt decodes the statement at ex[i] and moves past it.
func (d *decoder) stmt() (nftmodel.Stmt, error) {
	start := d.i
	switch x := d.peek(0).(type) {
	case *expr.Verdict:
		d.i++
		return DecodeVerdict(x)
	case *expr.Masq:
		d.i++
		return nftmodel.Masquerade{FullyRandom: x.FullyRandom}, nil
	case *expr.Reject:
		d.i++
		return nftmodel.Reject{}, nil
	case *expr.Fib:
		if c, ok := d.peek(1).(*expr.Cmp); ok && x.ResultADDRTYPE && x.FlagDADDR != x.FlagSADDR &&
			c.Op == expr.CmpOpEq && bytes.Equal(c.Data, binary.NativeEndian.AppendUint32(nil, fibTypeLocal)) {
			d.i += 2
			return nftmodel.FibLocal{Daddr: x.FlagDADDR}, nil
		}
	case *expr.Ct:
		b, okB := d.peek(1).(*expr.Bitwise)
		c, okC := d.peek(2).(*expr.Cmp)
		if okB && okC && (x.Key == expr.CtKeySTATE || x.Key == expr.CtKeySTATUS) && len(b.Mask) == 4 && isZero(b.Xor) &&
			c.Op == expr.CmpOpNeq && len(c.Data) == 4 && isZero(c.Data) {
			d.i += 3
			key := nftmodel.CtState
			if x.Key == expr.CtKeySTATUS {
				key = nftmodel.CtStatus
			}
			return nftmodel.CtMatch{Key: key, Bits: binary.NativeEndian.Uint32(b.Mask)}, nil
		}
	case *expr.Numgen:
		return d.numgen(x)
	case *expr.Immediate:
		return d.dnat()
	}
	if s, err := d.markOrMatch(); s != nil || err != nil {
		return s, err
	}
	if _, _, ok := d.field(d.peek(0)); ok {
		switch d.peek(1).(type) {
		case *expr.Bitwise, *expr.Cmp:
			return d.compare()
		}
	}
	key := d.concat()
	if len(key) == 0 {
		return nil, foreign("expression %d (%T)", start, d.peek(0))
	}
	switch x := d.peek(0).(type) {
	case *expr.Lookup:
		d.i++
		if x.IsDestRegSet {
			if x.DestRegister != 0 || x.Invert {
				return nil, foreign("a lookup into register %d", x.DestRegister)
			}
			return nftmodel.VMap{Key: key, Map: x.SetName}, nil
		}
		if len(key) == 1 && (key[0] == nftmodel.SAddr || key[0] == nftmodel.DAddr) && isAnon(x) {
			ps, err := AnonPrefixes(d.fam, d.anon)
			if err != nil {
				return nil, err
			}
			return nftmodel.AddrMatch{Field: key[0], Neq: x.Invert, Prefixes: ps, Braces: true}, nil
		}
		return nftmodel.Lookup{Key: key, Set: x.SetName, Invert: x.Invert}, nil
	case *expr.Dynset:
		d.i++
		if x.Operation != unix.NFT_DYNSET_OP_UPDATE {
			return nil, foreign("a dynset operation %d", x.Operation)
		}
		return nftmodel.Update{Set: x.SetName, Key: key}, nil
	}
	return nil, foreign("expression %d (%T) after a load", d.i, d.peek(0))
}

// isAnon tells whether a lookup's set is anonymous: named by the kernel
// (__set0) or by google/nftables before it is (AnonName).
func isAnon(x *expr.Lookup) bool {
	return len(x.SetName) > 5 && x.SetName[:5] == "__set"
}

// markOrMatch decodes the statements that start with loading meta mark:
// MarkSet and MarkMatch; nil when ex[i] starts neither.
func (d *decoder) markOrMatch() (nftmodel.Stmt, error) {
	m, ok := d.peek(0).(*expr.Meta)
	if !ok || m.Key != expr.MetaKeyMARK || m.SourceRegister {
		return nil, nil
	}
	b, ok := d.peek(1).(*expr.Bitwise)
	if !ok || len(b.Mask) != 4 || len(b.Xor) != 4 {
		return nil, nil
	}
	mask, xor := binary.NativeEndian.Uint32(b.Mask), binary.NativeEndian.Uint32(b.Xor)
	switch x := d.peek(2).(type) {
	case *expr.Meta:
		if x.Key != expr.MetaKeyMARK || !x.SourceRegister {
			return nil, foreign("a meta set of key %d", x.Key)
		}
		d.i += 3
		switch {
		case mask == 0xffffffff:
			return nftmodel.MarkSet{Op: nftmodel.MarkXor, Value: xor}, nil
		case mask == ^xor:
			return nftmodel.MarkSet{Op: nftmodel.MarkOr, Value: xor}, nil
		}
		return nil, foreign("a mark set with mask %#x and xor %#x", mask, xor)
	case *expr.Cmp:
		if xor != 0 || x.Op != expr.CmpOpEq || len(x.Data) != 4 {
			return nil, foreign("a mark match")
		}
		d.i += 3
		return nftmodel.MarkMatch{Mask: mask, Value: binary.NativeEndian.Uint32(x.Data)}, nil
	}
	return nil, nil
}

// compare decodes a single field compared with a value: a protocol, or
// an address prefix (loaded whole bytes, or whole and masked).
func (d *decoder) compare() (nftmodel.Stmt, error) {
	fd, n, _ := d.field(d.peek(0))
	d.i++
	var mask []byte
	if b, ok := d.peek(0).(*expr.Bitwise); ok {
		if !isZero(b.Xor) || b.Len != n {
			return nil, foreign("a masked comparison")
		}
		mask = b.Mask
		d.i++
	}
	c, ok := d.peek(0).(*expr.Cmp)
	if !ok || c.Op != expr.CmpOpEq && c.Op != expr.CmpOpNeq {
		return nil, foreign("a comparison")
	}
	d.i++
	if fd == nftmodel.L4Proto {
		if mask != nil || c.Op != expr.CmpOpEq || len(c.Data) != 1 {
			return nil, foreign("a protocol comparison")
		}
		return nftmodel.ProtoMatch{Proto: nftmodel.Proto(c.Data[0])}, nil
	}
	if fd != nftmodel.SAddr && fd != nftmodel.DAddr || uint32(len(c.Data)) != n {
		return nil, foreign("a comparison of field %d", fd)
	}
	full := make([]byte, addrLen(d.fam))
	copy(full, c.Data)
	addr, _ := netip.AddrFromSlice(full)
	ones := int(n) * 8
	if mask != nil {
		var bits int
		if ones, bits = net.IPMask(mask).Size(); bits == 0 {
			return nil, foreign("an address mask that is not a prefix")
		}
	}
	p := netip.PrefixFrom(addr, ones)
	if p.Masked() != p {
		return nil, foreign("a prefix with host bits")
	}
	return nftmodel.AddrMatch{Field: fd, Neq: c.Op == expr.CmpOpNeq, Prefixes: []netip.Prefix{p}}, nil
}

// numgen decodes NumgenMatch and DNATMap, which start with numgen.
func (d *decoder) numgen(x *expr.Numgen) (nftmodel.Stmt, error) {
	if x.Type != unix.NFT_NG_RANDOM || x.Register != reg1 {
		return nil, foreign("a numgen")
	}
	if c, ok := d.peek(1).(*expr.Cmp); ok {
		if x.Offset != 0 || c.Op != expr.CmpOpEq || len(c.Data) != 4 {
			return nil, foreign("a numgen comparison")
		}
		d.i += 2
		return nftmodel.NumgenMatch{Mod: x.Modulus, Value: binary.NativeEndian.Uint32(c.Data)}, nil
	}
	_, okB := d.peek(1).(*expr.Byteorder)
	l, okL := d.peek(2).(*expr.Lookup)
	n, okN := d.peek(3).(*expr.NAT)
	if !okB || !okL || !okN || !l.IsDestRegSet || l.DestRegister != reg1 || n.Type != expr.NATTypeDestNAT || n.Family != natFamily(d.fam) {
		return nil, foreign("a numgen map")
	}
	d.i += 4
	return nftmodel.DNATMap{Mod: x.Modulus, Offset: x.Offset, Map: l.SetName}, nil
}

// dnat decodes DNAT: an address and a port in registers 1 and 2, and the
// NAT.
func (d *decoder) dnat() (nftmodel.Stmt, error) {
	a, okA := d.peek(0).(*expr.Immediate)
	p, okP := d.peek(1).(*expr.Immediate)
	n, okN := d.peek(2).(*expr.NAT)
	if !okA || !okP || !okN || a.Register != reg1 || p.Register != reg2 || len(p.Data) != 2 ||
		n.Type != expr.NATTypeDestNAT || n.Family != natFamily(d.fam) {
		return nil, foreign("a dnat")
	}
	addr, ok := netip.AddrFromSlice(a.Data)
	if !ok || uint32(len(a.Data)) != addrLen(d.fam) {
		return nil, foreign("a dnat address of %d bytes", len(a.Data))
	}
	d.i += 3
	return nftmodel.DNAT{To: netip.AddrPortFrom(addr, binary.BigEndian.Uint16(p.Data))}, nil
}

// DecodeVerdict is the model's verdict of an expression's: ErrForeign
// for one the model does not hold (continue, break).
func DecodeVerdict(v *expr.Verdict) (nftmodel.Verdict, error) {
	for k, x := range verdictKinds {
		if k > 0 && x == v.Kind {
			mv := nftmodel.Verdict{Kind: nftmodel.VerdictKind(k)}
			if mv.Kind == nftmodel.Jump || mv.Kind == nftmodel.Goto {
				mv.Chain = v.Chain
			}
			return mv, nil
		}
	}
	return nftmodel.Verdict{}, foreign("verdict %d", v.Kind)
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// AnonPrefixes reads the elements of an anonymous address set back as
// prefixes, sorted: single addresses, or intervals (each as the fewest
// prefixes that cover it exactly).
func AnonPrefixes(f nftmodel.Family, elems []nftables.SetElement) ([]netip.Prefix, error) {
	var out []netip.Prefix
	interval := slices.ContainsFunc(elems, func(e nftables.SetElement) bool { return e.IntervalEnd })
	if !interval {
		for _, e := range elems {
			a, ok := netip.AddrFromSlice(e.Key)
			if !ok || uint32(len(e.Key)) != addrLen(f) {
				return nil, foreign("an address of %d bytes", len(e.Key))
			}
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
		}
		slices.SortFunc(out, nftmodel.ComparePrefixes)
		return out, nil
	}
	rs, err := ranges(f, elems)
	if err != nil {
		return nil, err
	}
	for _, r := range rs {
		out = r.AppendPrefixes(out)
	}
	return out, nil
}

// ranges reads the elements of an interval set (starts and ends, in any
// order) as the address ranges they hold, sorted.
func ranges(f nftmodel.Family, elems []nftables.SetElement) ([]nftmodel.Range, error) {
	sorted := sortedIntervals(elems)
	var out []nftmodel.Range
	open := false
	for _, e := range sorted {
		a, ok := netip.AddrFromSlice(e.Key)
		if !ok || uint32(len(e.Key)) != addrLen(f) {
			return nil, foreign("an interval key of %d bytes", len(e.Key))
		}
		switch {
		case e.IntervalEnd && open:
			out[len(out)-1].Hi = a.Prev()
			open = false
		case e.IntervalEnd: // the end element before the lowest interval
		default:
			if open {
				return nil, foreign("an interval without an end")
			}
			out = append(out, nftmodel.Range{Lo: a, Hi: nftmodel.LastAddr(netip.PrefixFrom(a, 0))})
			open = true
		}
	}
	return out, nil
}

// sortedIntervals is the elements of an interval set sorted by key
// (CompareIntervalElems).
func sortedIntervals(elems []nftables.SetElement) []nftables.SetElement {
	sorted := slices.Clone(elems)
	slices.SortStableFunc(sorted, CompareIntervalElems)
	return sorted
}

// DecodeElements reads the elements of set s (its declaration, without
// elements: Key, Verdicts, Interval, EndpointMod) back into the model from
// the netlink elements the kernel holds: Elements for a set or verdict
// map, Endpoints for an endpoint map. An element's verdict is VerdictData,
// or, as the kernel dumps it, verdict(Val) (nil: none). The elements come
// in the kernel's order, intervals sorted.
func DecodeElements(f nftmodel.Family, s *nftmodel.Set, elems []nftables.SetElement, verdict func(val []byte) *expr.Verdict) error {
	s.Elements, s.Endpoints = nil, nil
	if s.EndpointMod > 0 {
		return decodeEndpoints(f, s, elems)
	}
	if s.Interval {
		if len(s.Key) != 1 || s.Key[0] != nftmodel.AddrPart || s.Verdicts {
			return foreign("an interval set of %d key parts", len(s.Key))
		}
		rs, err := ranges(f, elems)
		if err != nil {
			return err
		}
		comments := map[string]string{}
		for _, e := range elems {
			if !e.IntervalEnd {
				comments[string(e.Key)] = e.Comment
			}
		}
		for _, r := range rs {
			ps := r.AppendPrefixes(nil)
			if len(ps) != 1 {
				return foreign("the interval %s-%s, which is not a prefix", r.Lo, r.Hi)
			}
			s.Elements = append(s.Elements, nftmodel.Element{Key: nftmodel.Key{Addr: r.Lo, Bits: uint8(ps[0].Bits())}, Comment: comments[string(r.Lo.AsSlice())]})
		}
		return nil
	}
	for _, e := range elems {
		el := nftmodel.Element{Comment: e.Comment}
		k, err := decodeKey(f, s.Key, e.Key)
		if err != nil {
			return err
		}
		el.Key = k
		if s.Verdicts {
			v := e.VerdictData
			if v == nil && verdict != nil {
				v = verdict(e.Val)
			}
			if v == nil {
				return foreign("a verdict map element without a verdict")
			}
			if el.Verdict, err = DecodeVerdict(v); err != nil {
				return err
			}
		}
		s.Elements = append(s.Elements, el)
	}
	return nil
}

// decodeKey reads a key of the given parts (each padded to 4 bytes in a
// concatenation).
func decodeKey(f nftmodel.Family, parts []nftmodel.KeyPart, b []byte) (nftmodel.Key, error) {
	var k nftmodel.Key
	for _, p := range parts {
		var n int
		switch p {
		case nftmodel.AddrPart:
			n = int(addrLen(f))
		case nftmodel.ProtoPart:
			n = 1
		case nftmodel.ServicePart:
			n = 2
		}
		if len(b) < n {
			return k, foreign("a key of %d bytes", len(b))
		}
		switch p {
		case nftmodel.AddrPart:
			k.Addr, _ = netip.AddrFromSlice(b[:n])
		case nftmodel.ProtoPart:
			k.Proto = nftmodel.Proto(b[0])
		case nftmodel.ServicePart:
			k.Port = binary.BigEndian.Uint16(b)
		}
		if len(parts) > 1 {
			n = (n + 3) &^ 3
			if len(b) < n {
				return k, foreign("a key of %d bytes", len(b))
			}
		}
		b = b[n:]
	}
	if len(b) != 0 {
		return k, foreign("a key with %d bytes more", len(b))
	}
	return k, nil
}

// decodeEndpoints reads an endpoint map's intervals of numgen keys.
func decodeEndpoints(f nftmodel.Family, s *nftmodel.Set, elems []nftables.SetElement) error {
	sorted := sortedIntervals(elems)
	open := -1
	for _, e := range sorted {
		if len(e.Key) != 4 {
			return foreign("an endpoint key of %d bytes", len(e.Key))
		}
		k := binary.BigEndian.Uint32(e.Key)
		if e.IntervalEnd {
			if open >= 0 {
				s.Endpoints[open].Hi = k - 1
				open = -1
			}
			continue
		}
		if open >= 0 {
			return foreign("an endpoint interval without an end")
		}
		n := int(addrLen(f))
		if len(e.Val) != n+4 {
			return foreign("an endpoint of %d bytes", len(e.Val))
		}
		addr, _ := netip.AddrFromSlice(e.Val[:n])
		s.Endpoints = append(s.Endpoints, nftmodel.EndpointElement{Lo: k, Hi: 1<<32 - 1, To: netip.AddrPortFrom(addr, binary.BigEndian.Uint16(e.Val[n:]))})
		open = len(s.Endpoints) - 1
	}
	return nil
}
