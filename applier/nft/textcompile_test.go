package nft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// The compiler turns one rule line into the expressions nft 1.0.6 sends
// for it. Each form was checked against `nft --debug=netlink` and against
// the rules the kernel returns (see compile_test.go): a relational match
// loads its left side into register 1 and compares; a match on a
// transport port is preceded by its `meta l4proto` dependency; an address
// prefix loads only its whole bytes, or the whole address and a mask when
// it ends inside a byte; a concatenation loads each part into the next
// 32-bit register (reg 1, 9, 10 for IPv4, reg 1, 2, 13 for IPv6).

// Register numbers (the 32-bit ones start at NFT_REG32_00 = 8).
const (
	regVerdict = 0
	reg1       = 1
	reg2       = 2
	reg32Base  = 8
)

// concatReg is the register nft puts a value at 32-bit offset k into: the
// 128-bit register when k is one's start, for compatibility with old
// kernels, else the 32-bit one.
func concatReg(k uint32) uint32 {
	if k%4 == 0 {
		return reg1 + k/4
	}
	return reg32Base + k
}

// vtype is the datatype of a value.
type vtype uint8

const (
	vAddr4 vtype = iota + 1
	vAddr6
	vProto
	vPort
	vMark
	vFibType
	vCtState
	vCtStatus
	vInt
)

// prim is a primary expression: something loaded into a register.
type prim struct {
	kind   primKind
	base   expr.PayloadBase
	off    uint32
	size   uint32 // bytes of the value
	meta   expr.MetaKey
	daddr  bool // fib
	ct     expr.CtKey
	mod    uint32 // numgen
	ngOff  uint32
	typ    vtype
	dep    int // transport protocol the expression needs (meta l4proto), -1 for none
	tokens int // tokens it took
}

type primKind uint8

const (
	pPayload primKind = iota + 1
	pMeta
	pFib
	pCt
	pNumgen
)

// refKind is what a rule or element refers to by name.
type refKind uint8

const (
	refChain  refKind = iota + 1 // jump, goto
	refSet                       // lookup in a set
	refVmap                      // lookup in a verdict map
	refDynset                    // update of a set
	refMap                       // lookup in an endpoint map (dnat … map)
)

// ref is a reference to a chain or set, checked once the table is read.
type ref struct {
	kind   refKind
	name   string
	line   int
	keyLen uint32
}

// compiler compiles the rules and elements of one table. Expressions are
// carved out of slabs (arena), as a large ruleset has hundreds of
// thousands.
type compiler struct {
	fam  nftables.TableFamily
	a    arena
	toks []string
	ex   []expr.Any
	refs []ref
	line int
	l4   int // transport protocol established by the rule so far, -1 for none
	pays []payMatch

	// cache and small hold the shared expressions (intern), recent the
	// last ones found in small.
	cache  map[string]expr.Any
	small  map[uint64]expr.Any
	recent [1 << recentBits]struct {
		k uint64
		e expr.Any
	}

	// Scratch space.
	sig           []byte
	parts, cparts []prim
	v1, v2        [16]byte
	key           []byte
}

// recentBits sizes the cache of recently shared expressions.
const recentBits = 8

// zeros are zero bytes to slice values from.
var zeros [16]byte

// appendAddr appends the bytes of an address.
func appendAddr(b []byte, a netip.Addr) []byte {
	if a.Is4() {
		a4 := a.As4()
		return append(b, a4[:]...)
	}
	a16 := a.As16()
	return append(b, a16[:]...)
}

// payMatch is a comparison of a payload field with a value.
type payMatch struct {
	base     expr.PayloadBase
	off, len uint32
}

var errSyntax = errors.New("syntax error")

// ruleError tells what is wrong with a rule.
func ruleError(format string, args ...any) error {
	return fmt.Errorf(format, args...)
}

// rule compiles a rule line.
func (c *compiler) rule(text string) (*Rule, error) {
	toks, err := tokenize(c.toks[:0], text)
	c.toks = toks
	if err != nil {
		return nil, err
	}
	c.ex, c.pays = c.ex[:0], c.pays[:0]
	c.l4 = -1
	if c.sig == nil {
		c.sig = make([]byte, 0, 64) // longer than any signature
	}
	r := c.a.rule()
	r.Text = text
	r.anonAt = -1
	final := false // a verdict or reject ends the rule
	for i := 0; i < len(toks); {
		if final {
			return nil, ruleError("unknown rule form: %q after the verdict", strings.Join(toks[i:], " "))
		}
		n, fin, err := c.stmt(r, toks[i:])
		if err != nil {
			return nil, err
		}
		i += n
		final = fin
	}
	if len(c.ex) == 0 {
		return nil, ruleError("empty rule")
	}
	if err := c.checkMerge(); err != nil {
		return nil, err
	}
	r.Exprs = c.a.exprs(c.ex)
	return r, nil
}

// stmt compiles the statement at the start of toks and says how many
// tokens it took and whether it ends the rule.
func (c *compiler) stmt(r *Rule, toks []string) (n int, final bool, err error) {
	switch toks[0] {
	case "accept", "drop", "return", "continue":
		c.verdict(toks[0], "")
		return 1, true, nil
	case "jump", "goto":
		if len(toks) < 2 || !isName(toks[1]) {
			return 0, false, ruleError("%s needs a chain name", toks[0])
		}
		c.verdict(toks[0], toks[1])
		c.refs = append(c.refs, ref{kind: refChain, name: toks[1], line: c.line})
		return 2, true, nil
	case "reject":
		code := byte(3) // ICMP_PORT_UNREACH
		if c.fam == nftables.TableFamilyIPv6 {
			code = 4 // ICMPV6_PORT_UNREACH
		}
		c.ex = append(c.ex, c.intern(append(c.sig[:0], 'r'), func() expr.Any {
			return &expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: code}
		}))
		return 1, true, nil
	case "counter":
		n := 1
		if len(toks) >= 5 && toks[1] == "packets" && toks[3] == "bytes" {
			n = 5 // values are not set by a rule
		}
		c.ex = append(c.ex, alloc(&c.a.counters))
		return n, false, nil
	case "masquerade":
		return c.masquerade(toks)
	case "dnat", "snat":
		if toks[0] == "dnat" && len(toks) > 2 && toks[2] == "to" && (toks[1] == "ip" || toks[1] == "ip6") {
			return c.natMap(toks)
		}
		return c.nat(toks)
	case "update", "add":
		return c.dynset(toks)
	case "meta":
		if len(toks) >= 3 && toks[1] == "mark" && toks[2] == "set" {
			return c.markSet(toks)
		}
	}
	return c.match(r, toks)
}

// checkMerge refuses the rules where nft would merge two comparisons of
// adjacent payload fields into one load (it does so up to four bytes, for
// example tcp sport and dport): a form render never writes.
func (c *compiler) checkMerge() error {
	for i, a := range c.pays {
		for _, b := range c.pays[i+1:] {
			if a.base == b.base && (a.off+a.len == b.off || b.off+b.len == a.off) && a.len+b.len <= 4 {
				return ruleError("unsupported rule form: nft merges matches on adjacent header fields")
			}
		}
	}
	return nil
}

// verdict appends a verdict.
func (c *compiler) verdict(kw, chain string) {
	if chain == "" {
		c.ex = append(c.ex, c.intern(append(append(c.sig[:0], 'v'), kw...), func() expr.Any {
			e := &expr.Verdict{}
			setVerdict(e, kw, "")
			return e
		}))
		return
	}
	e := alloc(&c.a.verdicts)
	setVerdict(e, kw, chain)
	c.ex = append(c.ex, e)
}

// setVerdict sets the verdict of keyword kw.
func setVerdict(e *expr.Verdict, kw, chain string) {
	switch kw {
	case "accept":
		e.Kind = expr.VerdictAccept
	case "drop":
		e.Kind = expr.VerdictDrop
	case "return":
		e.Kind = expr.VerdictReturn
	case "continue":
		e.Kind = expr.VerdictContinue
	case "jump":
		e.Kind = expr.VerdictJump
	case "goto":
		e.Kind = expr.VerdictGoto
	}
	e.Chain = chain
}

// masquerade compiles `masquerade [random|fully-random|persistent]...`.
func (c *compiler) masquerade(toks []string) (int, bool, error) {
	var random, fully, persistent bool
	n := 1
	for ; n < len(toks); n++ {
		ok := true
		for _, f := range strings.Split(toks[n], ",") {
			switch f {
			case "random":
				random = true
			case "fully-random":
				fully = true
			case "persistent":
				persistent = true
			default:
				ok = false
			}
		}
		if !ok {
			break
		}
	}
	c.ex = append(c.ex, c.intern(append(c.sig[:0], 'q', b2u(random), b2u(fully), b2u(persistent)), func() expr.Any {
		return &expr.Masq{Random: random, FullyRandom: fully, Persistent: persistent}
	}))
	return n, false, nil
}

// nat compiles `dnat to ADDR[:PORT]` and `snat to ADDR[:PORT]`.
func (c *compiler) nat(toks []string) (int, bool, error) {
	if len(toks) < 3 || toks[1] != "to" {
		return 0, false, ruleError("%s: expected %q ADDR[:PORT]", toks[0], toks[0]+" to")
	}
	addr, port, hasPort, err := parseAddrPort(toks[2], c.fam)
	if err != nil {
		return 0, false, ruleError("%s to %s: %v", toks[0], toks[2], err)
	}
	if hasPort && c.l4 < 0 {
		// As nft: "transport protocol mapping is only valid after
		// transport protocol match".
		return 0, false, ruleError("%s to %s: a port needs a transport protocol match before it", toks[0], toks[2])
	}
	typ, family := expr.NATTypeDestNAT, uint32(unix.NFPROTO_IPV4)
	if toks[0] == "snat" {
		typ = expr.NATTypeSourceNAT
	}
	if c.fam == nftables.TableFamilyIPv6 {
		family = unix.NFPROTO_IPV6
	}
	c.immediate(reg1, appendAddr(c.v1[:0], addr))
	if hasPort {
		c.immediate(reg2, binary.BigEndian.AppendUint16(c.v2[:0], port))
	}
	c.ex = append(c.ex, c.intern(append(c.sig[:0], 'n', byte(typ), byte(family), b2u(hasPort)), func() expr.Any {
		e := &expr.NAT{Type: typ, Family: family, RegAddrMin: reg1}
		if hasPort {
			e.RegProtoMin, e.Specified = reg2, true
		}
		return e
	}))
	return 3, false, nil
}

func (c *compiler) immediate(reg uint32, data []byte) {
	if len(data) <= 2 { // a port: they repeat
		c.ex = append(c.ex, c.intern(append(append(c.sig[:0], 'i', byte(reg)), data...), func() expr.Any {
			return &expr.Immediate{Register: reg, Data: c.a.bytes(data)}
		}))
		return
	}
	e := alloc(&c.a.imms)
	e.Register = reg
	e.Data = c.a.bytes(data)
	c.ex = append(c.ex, e)
}

// dynset compiles `update @SET { EXPR }` and `add @SET { EXPR }`.
func (c *compiler) dynset(toks []string) (int, bool, error) {
	if len(toks) < 5 || !strings.HasPrefix(toks[1], "@") || !isName(toks[1][1:]) || toks[2] != "{" {
		return 0, false, ruleError("%s: expected %q @SET { EXPR }", toks[0], toks[0])
	}
	end := indexOf(toks, "}", 3)
	if end < 0 {
		return 0, false, ruleError("%s: missing }", toks[0])
	}
	parts, err := c.concat(toks[3:end])
	if err != nil {
		return 0, false, err
	}
	keyLen := c.loadConcat(parts)
	e := alloc(&c.a.dynsets)
	e.SrcRegKey, e.SetName, e.Operation = reg1, toks[1][1:], unix.NFT_DYNSET_OP_UPDATE
	if toks[0] == "add" {
		e.Operation = unix.NFT_DYNSET_OP_ADD
	}
	c.ex = append(c.ex, e)
	c.refs = append(c.refs, ref{kind: refDynset, name: e.SetName, line: c.line, keyLen: keyLen})
	return end + 1, false, nil
}

// markSet compiles `meta mark set VALUE` and `meta mark set meta mark OP VALUE`
// with OP one of | ^ &.
func (c *compiler) markSet(toks []string) (int, bool, error) {
	if len(toks) >= 7 && toks[3] == "meta" && toks[4] == "mark" {
		v, err := parseUint(toks[6], 32)
		if err != nil {
			return 0, false, ruleError("meta mark set: %v", err)
		}
		var mask, xor uint32
		switch toks[5] {
		case "|":
			mask, xor = ^uint32(v), uint32(v)
		case "^":
			mask, xor = 0xffffffff, uint32(v)
		case "&":
			mask, xor = uint32(v), 0
		default:
			return 0, false, ruleError("meta mark set: unknown operator %q", toks[5])
		}
		c.meta(expr.MetaKeyMARK, reg1, false)
		c.bitwise(4, binary.NativeEndian.AppendUint32(c.v1[:0], mask), binary.NativeEndian.AppendUint32(c.v2[:0], xor))
		c.meta(expr.MetaKeyMARK, reg1, true)
		return 7, false, nil
	}
	if len(toks) < 4 {
		return 0, false, ruleError("meta mark set: missing value")
	}
	v, err := parseUint(toks[3], 32)
	if err != nil {
		return 0, false, ruleError("meta mark set: %v", err)
	}
	c.immediate(reg1, binary.NativeEndian.AppendUint32(c.v1[:0], uint32(v)))
	c.meta(expr.MetaKeyMARK, reg1, true)
	return 4, false, nil
}

func (c *compiler) meta(key expr.MetaKey, reg uint32, set bool) {
	c.ex = append(c.ex, c.intern(append(c.sig[:0], 'm', byte(key), byte(reg), b2u(set)), func() expr.Any {
		return &expr.Meta{Key: key, Register: reg, SourceRegister: set}
	}))
}

func (c *compiler) bitwise(n uint32, mask, xor []byte) {
	c.sig = append(append(append(c.sig[:0], 'b', byte(n)), mask...), xor...)
	c.ex = append(c.ex, c.intern(c.sig, func() expr.Any {
		return &expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: n, Mask: c.a.bytes(mask), Xor: c.a.bytes(xor)}
	}))
}

func (c *compiler) cmp(op expr.CmpOp, data []byte) {
	if len(data) != 4 && len(data) != 16 || data[0] == 0 {
		// Protocols, ports, prefixes and zeros repeat; whole addresses
		// seldom do.
		c.ex = append(c.ex, c.intern(append(append(c.sig[:0], 'c', byte(op)), data...), func() expr.Any {
			return &expr.Cmp{Op: op, Register: reg1, Data: c.a.bytes(data)}
		}))
		return
	}
	e := alloc(&c.a.cmps)
	e.Op, e.Register, e.Data = op, reg1, c.a.bytes(data)
	c.ex = append(c.ex, e)
}

// intern returns the expression of signature sig, which build makes the
// first time. Expressions that many rules have are shared.
func (c *compiler) intern(sig []byte, build func() expr.Any) expr.Any {
	if len(sig) <= 7 {
		// Most signatures fit in an integer, which hashes faster.
		k := uint64(len(sig)) << 56
		for i, b := range sig {
			k |= uint64(b) << (8 * i)
		}
		slot := &c.recent[(k*0x9e3779b97f4a7c15)>>(64-recentBits)]
		if slot.e != nil && slot.k == k {
			return slot.e
		}
		e, ok := c.small[k]
		if !ok {
			e = build()
			if c.small == nil {
				c.small = map[uint64]expr.Any{}
			}
			c.small[k] = e
		}
		slot.k, slot.e = k, e
		return e
	}
	if e, ok := c.cache[string(sig)]; ok {
		return e
	}
	e := build()
	if c.cache == nil {
		c.cache = map[string]expr.Any{}
	}
	c.cache[string(sig)] = e
	return e
}

func b2u(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// match compiles a relational statement: LHS [OP] RHS, where LHS is a
// primary expression or a concatenation of them.
func (c *compiler) match(r *Rule, toks []string) (int, bool, error) {
	parts := c.parts[:0]
	n := 0
	for {
		p, err := c.prim(toks[n:])
		if err != nil {
			return 0, false, err
		}
		parts = append(parts, p)
		c.parts = parts
		n += p.tokens
		if n < len(toks) && toks[n] == "." {
			n++
			continue
		}
		break
	}
	if n >= len(toks) {
		return 0, false, ruleError("unknown rule form: %q has no right-hand side", strings.Join(toks, " "))
	}
	op, opTok := expr.CmpOpEq, false
	switch toks[n] {
	case "==":
		n, opTok = n+1, true
	case "!=":
		op, n, opTok = expr.CmpOpNeq, n+1, true
	}
	if n >= len(toks) {
		return 0, false, ruleError("unknown rule form: %q has no right-hand side", strings.Join(toks, " "))
	}
	rhs := toks[n]
	switch {
	case rhs == "vmap" && !opTok:
		if n+1 >= len(toks) || !strings.HasPrefix(toks[n+1], "@") || !isName(toks[n+1][1:]) {
			return 0, false, ruleError("vmap needs a named map @MAP")
		}
		keyLen := c.loadConcat(parts)
		e := alloc(&c.a.lookups)
		e.SourceRegister, e.IsDestRegSet, e.DestRegister, e.SetName = reg1, true, regVerdict, toks[n+1][1:]
		c.ex = append(c.ex, e)
		c.refs = append(c.refs, ref{kind: refVmap, name: e.SetName, line: c.line, keyLen: keyLen})
		return n + 2, true, nil
	case strings.HasPrefix(rhs, "@"):
		if !isName(rhs[1:]) {
			return 0, false, ruleError("bad set name %q", rhs)
		}
		keyLen := c.loadConcat(parts)
		e := alloc(&c.a.lookups)
		e.SourceRegister, e.SetName, e.Invert = reg1, rhs[1:], op == expr.CmpOpNeq
		c.ex = append(c.ex, e)
		c.refs = append(c.refs, ref{kind: refSet, name: e.SetName, line: c.line, keyLen: keyLen})
		return n + 1, false, nil
	}
	if len(parts) > 1 {
		return 0, false, ruleError("unknown rule form: a concatenation can only be looked up in a set or map")
	}
	p := parts[0]
	switch {
	case rhs == "{":
		m, err := c.anonSet(r, p, op, toks[n:])
		return n + m, false, err
	case rhs == "&" && !opTok:
		return c.masked(p, toks, n)
	}
	m, err := c.compare(p, op, opTok, toks[n:])
	return n + m, false, err
}

// masked compiles `LHS & MASK ==|!= VALUE`.
func (c *compiler) masked(p prim, toks []string, n int) (int, bool, error) {
	if n+3 >= len(toks) {
		return 0, false, ruleError("unknown rule form: %q", strings.Join(toks, " "))
	}
	if p.typ != vMark && p.typ != vInt {
		return 0, false, ruleError("& works on integers only")
	}
	mask, err := c.intValue(p, toks[n+1], c.v1[:0])
	if err != nil {
		return 0, false, err
	}
	var op expr.CmpOp
	switch toks[n+2] {
	case "==":
		op = expr.CmpOpEq
	case "!=":
		op = expr.CmpOpNeq
	default:
		return 0, false, ruleError("expected == or != after the mask, not %q", toks[n+2])
	}
	v, err := c.intValue(p, toks[n+3], c.v2[:0])
	if err != nil {
		return 0, false, err
	}
	c.load(p, reg1, p.size)
	c.bitwise(p.size, mask, zeros[:p.size])
	c.cmp(op, v)
	return n + 4, false, nil
}

// compare compiles `LHS [==|!=] VALUE`.
func (c *compiler) compare(p prim, op expr.CmpOp, opTok bool, toks []string) (int, error) {
	v := toks[0]
	switch p.typ {
	case vAddr4, vAddr6:
		pfx, err := parseAddrOrPrefix(v, p.typ)
		if err != nil {
			return 0, err
		}
		c.comparePrefix(p, op, pfx)
		return 1, nil
	case vCtState, vCtStatus:
		// A bitmask without an operator (or with !=) tests bits.
		if opTok && op == expr.CmpOpEq {
			break
		}
		bits, err := c.intValue(p, v, c.v1[:0])
		if err != nil {
			return 0, err
		}
		c.load(p, reg1, p.size)
		c.bitwise(p.size, bits, zeros[:p.size])
		if op == expr.CmpOpEq {
			c.cmp(expr.CmpOpNeq, zeros[:p.size])
		} else {
			c.cmp(expr.CmpOpEq, zeros[:p.size])
		}
		return 1, nil
	}
	data, err := c.intValue(p, v, c.v1[:0])
	if err != nil {
		return 0, err
	}
	if p.kind == pPayload {
		c.pays = append(c.pays, payMatch{p.base, p.off, p.size})
	}
	c.load(p, reg1, p.size)
	c.cmp(op, data)
	if p.kind == pMeta && p.meta == expr.MetaKeyL4PROTO && op == expr.CmpOpEq {
		c.l4 = int(data[0])
	}
	return 1, nil
}

// comparePrefix compares an address with an address or prefix: whole
// bytes of the prefix are loaded and compared; a prefix ending inside a
// byte loads the whole address and masks it.
func (c *compiler) comparePrefix(p prim, op expr.CmpOp, pfx netip.Prefix) {
	addr := appendAddr(c.v1[:0], pfx.Addr())
	bits := pfx.Bits()
	if bits%8 == 0 && bits > 0 {
		n := uint32(bits / 8)
		c.pays = append(c.pays, payMatch{p.base, p.off, n})
		c.load(p, reg1, n)
		c.cmp(op, addr[:n])
		return
	}
	c.pays = append(c.pays, payMatch{p.base, p.off, p.size})
	c.load(p, reg1, p.size)
	mask := prefixMask(c.v2[:0], bits, len(addr))
	c.bitwise(p.size, mask, zeros[:p.size])
	c.cmp(op, addr)
}

// prefixMask appends the netmask of bits ones in n bytes to m.
func prefixMask(m []byte, bits, n int) []byte {
	m = append(m, zeros[:n]...)
	for i := 0; i < bits/8; i++ {
		m[i] = 0xff
	}
	if bits%8 != 0 {
		m[bits/8] = ^byte(0xff >> (bits % 8))
	}
	return m
}

// anonSet compiles `LHS [!=] { A, B/N, ... }` on an address: a lookup in an
// anonymous set, or, as nft does, a plain comparison when the set has one
// element.
func (c *compiler) anonSet(r *Rule, p prim, op expr.CmpOp, toks []string) (int, error) {
	if p.typ != vAddr4 && p.typ != vAddr6 {
		return 0, ruleError("anonymous sets are supported for addresses only")
	}
	if r.Anon != nil {
		return 0, ruleError("a rule may have one anonymous set")
	}
	end := indexOf(toks, "}", 1)
	if end < 0 {
		return 0, ruleError("missing } of the anonymous set")
	}
	var ranges []addrRange
	interval := false
	want := true // an element, not a comma
	for _, t := range toks[1:end] {
		if t == "," {
			if want {
				return 0, ruleError("anonymous set: empty element")
			}
			want = true
			continue
		}
		if !want {
			return 0, ruleError("anonymous set: missing comma before %q", t)
		}
		want = false
		rg, isInterval, err := parseRange(t, p.typ)
		if err != nil {
			return 0, ruleError("anonymous set: %v", err)
		}
		interval = interval || isInterval
		ranges = append(ranges, rg)
	}
	if len(ranges) == 0 {
		return 0, ruleError("anonymous set: no element")
	}
	if len(ranges) == 1 && ranges[0].prefix.IsValid() {
		c.comparePrefix(p, op, ranges[0].prefix)
		return end + 1, nil
	}
	anon := &AnonSet{Template: nftables.Set{
		Anonymous: true,
		Constant:  true,
		KeyType:   nftables.TypeIPAddr,
	}}
	if p.typ == vAddr6 {
		anon.Template.KeyType = nftables.TypeIP6Addr
	}
	if interval {
		anon.Template.Interval = true
		anon.Template.AutoMerge = true
		var size uint32
		anon.Elements, size = intervalElements(mergeRanges(ranges))
		anon.Template.Size = size
	} else {
		for _, rg := range ranges {
			anon.Elements = append(anon.Elements, nftables.SetElement{Key: rg.start.AsSlice()})
		}
		anon.Template.Size = uint32(len(anon.Elements))
	}
	c.load(p, reg1, p.size)
	e := alloc(&c.a.lookups)
	e.SourceRegister, e.Invert, e.SetName = reg1, op == expr.CmpOpNeq, anonName
	r.anonAt = len(c.ex)
	c.ex = append(c.ex, e)
	r.Anon = anon
	return end + 1, nil
}

// anonName is the name of an anonymous set until the kernel names it:
// google/nftables asks for "__set%d".
const anonName = "__set%d"

// loadConcat loads the parts of a concatenation into consecutive
// registers, after their dependencies, and returns the key length.
func (c *compiler) loadConcat(parts []prim) uint32 {
	if len(parts) == 1 {
		c.load(parts[0], reg1, parts[0].size)
		return parts[0].size
	}
	var k uint32
	for _, p := range parts {
		c.load(p, concatReg(k), p.size)
		k += (p.size + 3) / 4
	}
	return 4 * k
}

// load appends the dependency of p, if the rule has not established it
// yet, and the expression that loads n bytes of p into reg.
func (c *compiler) load(p prim, reg, n uint32) {
	if p.dep >= 0 && p.dep != c.l4 {
		c.meta(expr.MetaKeyL4PROTO, reg1, false)
		c.cmp(expr.CmpOpEq, []byte{byte(p.dep)})
		c.l4 = p.dep
	}
	switch p.kind {
	case pPayload:
		c.ex = append(c.ex, c.intern(append(c.sig[:0], 'p', byte(reg), byte(p.base), byte(p.off), byte(n)), func() expr.Any {
			return &expr.Payload{DestRegister: reg, Base: p.base, Offset: p.off, Len: n}
		}))
	case pMeta:
		c.meta(p.meta, reg, false)
	case pFib:
		c.ex = append(c.ex, c.intern(append(c.sig[:0], 'f', byte(reg), b2u(p.daddr)), func() expr.Any {
			return &expr.Fib{Register: reg, ResultADDRTYPE: true, FlagDADDR: p.daddr, FlagSADDR: !p.daddr}
		}))
	case pCt:
		c.ex = append(c.ex, c.intern(append(c.sig[:0], 't', byte(reg), byte(p.ct)), func() expr.Any {
			return &expr.Ct{Register: reg, Key: p.ct}
		}))
	case pNumgen:
		c.sig = binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(append(c.sig[:0], 'g', byte(reg)), p.mod), p.ngOff)
		c.ex = append(c.ex, c.intern(c.sig, func() expr.Any {
			return &expr.Numgen{Register: reg, Modulus: p.mod, Type: unix.NFT_NG_RANDOM, Offset: p.ngOff}
		}))
	}
}

// concat parses a concatenation of primary expressions that must take all
// of toks.
func (c *compiler) concat(toks []string) ([]prim, error) {
	parts := c.cparts[:0]
	for n := 0; ; {
		p, err := c.prim(toks[n:])
		if err != nil {
			return nil, err
		}
		parts = append(parts, p)
		c.cparts = parts
		n += p.tokens
		if n == len(toks) {
			return parts, nil
		}
		if toks[n] != "." || n+1 == len(toks) {
			return nil, ruleError("unexpected %q in a concatenation", toks[n])
		}
		n++
	}
}

// prim parses the primary expression at the start of toks.
func (c *compiler) prim(toks []string) (prim, error) {
	p := prim{dep: -1}
	arg := func(i int) string {
		if i < len(toks) {
			return toks[i]
		}
		return ""
	}
	switch kw := arg(0); kw {
	case "ip", "ip6":
		if (kw == "ip") != (c.fam == nftables.TableFamilyIPv4) {
			return p, ruleError("%s in a table of the other family", kw)
		}
		p.kind, p.base, p.tokens = pPayload, expr.PayloadBaseNetworkHeader, 2
		p.typ, p.size = vAddr4, 4
		if kw == "ip6" {
			p.typ, p.size = vAddr6, 16
		}
		switch arg(1) {
		case "saddr":
			p.off = 12
			if kw == "ip6" {
				p.off = 8
			}
		case "daddr":
			p.off = 16
			if kw == "ip6" {
				p.off = 24
			}
		default:
			return p, ruleError("unknown rule form: %s %s", kw, arg(1))
		}
	case "meta":
		p.kind, p.tokens = pMeta, 2
		switch arg(1) {
		case "l4proto":
			p.meta, p.typ, p.size = expr.MetaKeyL4PROTO, vProto, 1
		case "mark":
			p.meta, p.typ, p.size = expr.MetaKeyMARK, vMark, 4
		default:
			return p, ruleError("unknown rule form: meta %s", arg(1))
		}
	case "th", "tcp", "udp", "sctp", "dccp", "udplite":
		p.kind, p.base, p.tokens, p.typ, p.size = pPayload, expr.PayloadBaseTransportHeader, 2, vPort, 2
		if kw != "th" {
			p.dep, _ = protoNumber(kw)
		}
		switch arg(1) {
		case "sport":
			p.off = 0
		case "dport":
			p.off = 2
		default:
			return p, ruleError("unknown rule form: %s %s", kw, arg(1))
		}
	case "fib":
		if arg(2) != "type" || (arg(1) != "saddr" && arg(1) != "daddr") {
			return p, ruleError("unknown rule form: fib %s %s", arg(1), arg(2))
		}
		p.kind, p.daddr, p.tokens, p.typ, p.size = pFib, arg(1) == "daddr", 3, vFibType, 4
	case "ct":
		p.kind, p.tokens, p.size = pCt, 2, 4
		switch arg(1) {
		case "state":
			p.ct, p.typ = expr.CtKeySTATE, vCtState
		case "status":
			p.ct, p.typ = expr.CtKeySTATUS, vCtStatus
		default:
			return p, ruleError("unknown rule form: ct %s", arg(1))
		}
	case "numgen":
		if arg(1) != "random" || arg(2) != "mod" {
			return p, ruleError("unknown rule form: numgen %s %s", arg(1), arg(2))
		}
		mod, err := parseUint(arg(3), 32)
		if err != nil || mod == 0 {
			return p, ruleError("numgen: bad modulus %q", arg(3))
		}
		p.kind, p.mod, p.tokens, p.typ, p.size = pNumgen, uint32(mod), 4, vInt, 4
		if arg(4) == "offset" {
			off, err := parseUint(arg(5), 32)
			if err != nil {
				return p, ruleError("numgen: bad offset %q", arg(5))
			}
			p.ngOff, p.tokens = uint32(off), 6
		}
	default:
		return p, ruleError("unknown rule form: %q", strings.Join(toks, " "))
	}
	return p, nil
}

// intValue appends a non-address value of p's type to dst.
func (c *compiler) intValue(p prim, s string, dst []byte) ([]byte, error) {
	switch p.typ {
	case vProto:
		v, ok := protoNumber(s)
		if !ok {
			n, err := parseUint(s, 8)
			if err != nil {
				return nil, fmt.Errorf("unknown protocol %q", s)
			}
			v = int(n)
		}
		return append(dst, byte(v)), nil
	case vPort:
		n, err := parseUint(s, 16)
		if err != nil {
			return nil, fmt.Errorf("bad port %q", s)
		}
		return binary.BigEndian.AppendUint16(dst, uint16(n)), nil
	case vFibType:
		v, ok := fibTypes[s]
		if !ok {
			return nil, fmt.Errorf("unknown fib address type %q", s)
		}
		return binary.NativeEndian.AppendUint32(dst, v), nil
	case vCtState, vCtStatus:
		names := ctStates
		if p.typ == vCtStatus {
			names = ctStatuses
		}
		var bits uint32
		for _, f := range strings.Split(s, ",") {
			b, ok := names[f]
			if !ok {
				return nil, fmt.Errorf("unknown ct flag %q", f)
			}
			bits |= b
		}
		return binary.NativeEndian.AppendUint32(dst, bits), nil
	case vMark, vInt:
		n, err := parseUint(s, 32)
		if err != nil {
			return nil, fmt.Errorf("bad number %q", s)
		}
		return binary.NativeEndian.AppendUint32(dst, uint32(n)), nil
	}
	return nil, fmt.Errorf("bad value %q", s)
}

// protoNumber is the number of a transport protocol nft knows by name.
func protoNumber(name string) (int, bool) {
	switch name {
	case "tcp":
		return 6, true
	case "udp":
		return 17, true
	case "sctp":
		return 132, true
	case "icmp":
		return 1, true
	case "igmp":
		return 2, true
	case "dccp":
		return 33, true
	case "ipv6-icmp", "icmpv6":
		return 58, true
	case "udplite":
		return 136, true
	}
	return 0, false
}

var fibTypes = map[string]uint32{
	"unspec": 0, "unicast": 1, "local": 2, "broadcast": 3, "anycast": 4, "multicast": 5,
	"blackhole": 6, "unreachable": 7, "prohibit": 8,
}

var ctStates = map[string]uint32{
	"invalid": 1, "established": 2, "related": 4, "new": 8, "untracked": 64,
}

var ctStatuses = map[string]uint32{
	"expected": 1, "seen-reply": 2, "assured": 4, "confirmed": 8, "snat": 16, "dnat": 32, "dying": 512,
}

// parseUint parses a decimal or 0x-hexadecimal number of at most bits.
func parseUint(s string, bits int) (uint64, error) {
	if s == "" {
		return 0, errSyntax
	}
	base := 10
	if len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		s, base = s[2:], 16
	}
	return strconv.ParseUint(s, base, bits)
}

// parseAddrOrPrefix parses an address (as a full-length prefix) or a
// prefix of the type's family, which must be masked as render writes it.
func parseAddrOrPrefix(s string, typ vtype) (netip.Prefix, error) {
	var pfx netip.Prefix
	if strings.IndexByte(s, '/') >= 0 {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return pfx, fmt.Errorf("bad prefix %q", s)
		}
		if p != p.Masked() {
			return pfx, fmt.Errorf("prefix %q has bits set past its length", s)
		}
		pfx = p
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return pfx, fmt.Errorf("bad address %q", s)
		}
		pfx = netip.PrefixFrom(a, a.BitLen())
	}
	if err := checkFamily(pfx.Addr(), typ); err != nil {
		return pfx, err
	}
	return pfx, nil
}

func checkFamily(a netip.Addr, typ vtype) error {
	if a.Zone() != "" || (typ == vAddr4) != a.Is4() || a.Is4In6() {
		return fmt.Errorf("%s is not an address of type %s", a, typeNames[typ])
	}
	return nil
}

var typeNames = map[vtype]string{vAddr4: "ipv4_addr", vAddr6: "ipv6_addr", vProto: "inet_proto", vPort: "inet_service", vMark: "mark"}

// parseAddrPort parses ADDR, ADDR:PORT or [ADDR6]:PORT of the family.
func parseAddrPort(s string, fam nftables.TableFamily) (addr netip.Addr, port uint16, hasPort bool, err error) {
	typ := vAddr4
	if fam == nftables.TableFamilyIPv6 {
		typ = vAddr6
	}
	if ap, e := netip.ParseAddrPort(s); e == nil {
		addr, port, hasPort = ap.Addr(), ap.Port(), true
	} else if addr, err = netip.ParseAddr(s); err != nil {
		return addr, 0, false, fmt.Errorf("bad address %q", s)
	}
	return addr, port, hasPort, checkFamily(addr, typ)
}

// addrRange is an interval of addresses: [start, end], with the prefix
// when it is one.
type addrRange struct {
	start, end netip.Addr
	prefix     netip.Prefix
}

// parseRange parses an address, a prefix or a range A-B; isInterval tells
// that it was written as a prefix or range.
func parseRange(s string, typ vtype) (rg addrRange, isInterval bool, err error) {
	if i := strings.IndexByte(s, '-'); i >= 0 {
		a, err1 := netip.ParseAddr(s[:i])
		b, err2 := netip.ParseAddr(s[i+1:])
		if err1 != nil || err2 != nil || b.Less(a) {
			return rg, false, fmt.Errorf("bad range %q", s)
		}
		if err := checkFamily(a, typ); err != nil {
			return rg, false, err
		}
		if err := checkFamily(b, typ); err != nil {
			return rg, false, err
		}
		return addrRange{start: a, end: b}, true, nil
	}
	pfx, err := parseAddrOrPrefix(s, typ)
	if err != nil {
		return rg, false, err
	}
	return addrRange{start: pfx.Addr(), end: lastAddr(pfx), prefix: pfx}, strings.IndexByte(s, '/') >= 0, nil
}

// lastAddr is the last address of a prefix.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// mergeRanges sorts ranges and merges those that overlap or touch, as nft
// does for an anonymous set.
func mergeRanges(rs []addrRange) []addrRange {
	sortRanges(rs)
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 {
			last := &out[n-1]
			if next := last.end.Next(); !r.start.Less(last.start) && (!next.IsValid() || !next.Less(r.start)) {
				if last.end.Less(r.end) {
					last.end = r.end
				}
				last.prefix = netip.Prefix{}
				continue
			}
		}
		out = append(out, r)
	}
	return out
}

func sortRanges(rs []addrRange) {
	// Insertion sort: anonymous sets are small.
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0 && rs[j].start.Less(rs[j-1].start); j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
}

// intervalElements returns the elements nft sends for sorted, disjoint
// intervals: an end element at zero when the first does not start there,
// then each start and its end (the address after the last one, flagged
// IntervalEnd), none for an interval reaching the last address. size is
// what nft declares as the set's size.
func intervalElements(rs []addrRange) (elems []nftables.SetElement, size uint32) {
	if len(rs) > 0 && !rs[0].start.IsUnspecified() {
		elems = append(elems, nftables.SetElement{Key: make([]byte, rs[0].start.BitLen()/8), IntervalEnd: true})
		size++
	}
	for _, r := range rs {
		elems = append(elems, nftables.SetElement{Key: r.start.AsSlice()})
		if next := r.end.Next(); next.IsValid() {
			elems = append(elems, nftables.SetElement{Key: next.AsSlice(), IntervalEnd: true})
		}
		size += 2
	}
	return elems, size
}

// isName tells whether s is a chain or set name as nft's scanner reads an
// unquoted one.
func isName(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_', c == '.':
		case i > 0 && (c >= '0' && c <= '9' || c == '/' || c == '-'):
		default:
			return false
		}
	}
	return true
}

func indexOf(toks []string, s string, from int) int {
	for i := from; i < len(toks); i++ {
		if toks[i] == s {
			return i
		}
	}
	return -1
}

// tokenize appends the tokens of s to dst: words separated by blanks, with
// braces tokens of their own, commas too inside braces, and quoted strings
// kept whole with their quotes.
func tokenize(dst []string, s string) ([]string, error) {
	depth := 0
	for i := 0; i < len(s); {
		switch ch := s[i]; {
		case ch == ' ' || ch == '\t' || ch == '\r':
			i++
		case ch == '{' || ch == '}' || ch == ',' && depth > 0:
			if ch == '{' {
				depth++
			} else if ch == '}' {
				depth--
			}
			dst = append(dst, s[i:i+1])
			i++
		case ch == '"':
			j := strings.IndexByte(s[i+1:], '"')
			if j < 0 {
				return dst, ruleError("unterminated string")
			}
			dst = append(dst, s[i:i+j+2])
			i += j + 2
		default:
			j := i + 1
			for j < len(s) && !isDelim(s[j], depth) {
				j++
			}
			dst = append(dst, s[i:j])
			i = j
		}
	}
	return dst, nil
}

func isDelim(c byte, depth int) bool {
	return tokDelim[c] && (c != ',' || depth > 0)
}

// tokDelim marks the bytes that end a word.
var tokDelim = [256]bool{' ': true, '\t': true, '\r': true, '{': true, '}': true, '"': true, ',': true}

// arena hands out expressions and byte slices from slabs.
type arena struct {
	cmps     []expr.Cmp
	verdicts []expr.Verdict
	imms     []expr.Immediate
	lookups  []expr.Lookup
	counters []expr.Counter
	dynsets  []expr.Dynset
	rules    []Rule
	ruleps   []*Rule
	chains   []Chain
	elems    []nftables.SetElement
	anys     []expr.Any
	buf      []byte
}

const slab = 512

// alloc returns a new zero T from the slab s.
func alloc[T any](s *[]T) *T {
	if len(*s) == cap(*s) {
		*s = make([]T, 0, slab)
	}
	*s = (*s)[:len(*s)+1]
	return &(*s)[len(*s)-1]
}

func (a *arena) rule() *Rule { return alloc(&a.rules) }

// exprs returns a copy of ex carved from the slab.
func (a *arena) exprs(ex []expr.Any) []expr.Any {
	if len(ex) > cap(a.anys)-len(a.anys) {
		a.anys = make([]expr.Any, 0, max(8*slab, len(ex)))
	}
	n := len(a.anys)
	a.anys = append(a.anys, ex...)
	return a.anys[n:len(a.anys):len(a.anys)]
}

// rulePtrs returns a copy of rs carved from the slab.
func (a *arena) rulePtrs(rs []*Rule) []*Rule {
	if len(rs) > cap(a.ruleps)-len(a.ruleps) {
		a.ruleps = make([]*Rule, 0, max(8*slab, len(rs)))
	}
	n := len(a.ruleps)
	a.ruleps = append(a.ruleps, rs...)
	return a.ruleps[n:len(a.ruleps):len(a.ruleps)]
}

// setElems returns n zero elements carved from the slab.
func (a *arena) setElems(n int) []nftables.SetElement {
	if n > cap(a.elems)-len(a.elems) {
		a.elems = make([]nftables.SetElement, 0, max(4*slab, n))
	}
	m := len(a.elems)
	a.elems = a.elems[:m+n]
	return a.elems[m : m+n : m+n]
}

// bytes returns a copy of b carved from the slab.
func (a *arena) bytes(b []byte) []byte {
	if len(b) > cap(a.buf)-len(a.buf) {
		a.buf = make([]byte, 0, max(16*1024, len(b)))
	}
	n := len(a.buf)
	a.buf = append(a.buf, b...)
	return a.buf[n:len(a.buf):len(a.buf)]
}
