package nft

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/bits"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
	"netspec.dev/netspec/applier/nft/encoding"
	"netspec.dev/netspec/render/nftmodel"
)

// What plan and apply say about drift: the elements and rules the kernel
// holds that the plan does not, written as nft writes them
// (`10.1.2.3 . tcp . 99 : goto service-…`, `ip daddr . meta l4proto . th
// dport vmap @service-ips`), never as the bytes netlink carries. An
// element is decoded into the model's set and printed by the model
// (kernelText), so that it reads as the plan's elements do. The kernel
// keeps no rule text: a rule is written back from its expressions, for
// the expressions netspec's rules and common hand-written ones use.

// RuleChange is one rule of a chain that differs between the kernel and
// the plan: Old is the kernel's rule, New the plan's, as nft writes them;
// Old is empty for a rule the kernel lacks, New for one the plan does not
// have. Index is the rule's position in the plan's chain (from 1), or,
// for a rule only the kernel has, in the kernel's.
type RuleChange struct {
	Chain string
	Index int
	Old   string `json:",omitempty"`
	New   string `json:",omitempty"`
}

// kernelText writes a unit of the kernel's elements of s (one element, or
// an interval's start and end: intervalUnits) as the model writes the
// element: decoded into the model's set and printed by it, so that drift
// reads as the plan's elements do. What does not decode (an element of
// another type, an interval that is not a prefix, made by hand) is
// written from its bytes.
func (s *Set) kernelText(u []nftables.SetElement) string { return s.kernelChange(u).Text }

// kernelChange reports a unit of the kernel's elements of s as added or
// removed: written as kernelText, and, when it decodes, the element as
// the model holds it.
func (s *Set) kernelChange(u []nftables.SetElement) ElementChange {
	c := ElementChange{Set: s.Name}
	if len(u) == 0 {
		return c
	}
	if u[0].IntervalEnd {
		// The end element nft puts before the lowest interval.
		c.Text = "(the end of an interval at " + rawValue(u[0].Key) + ")"
		return c
	}
	if s.model != nil {
		shell := *s.model
		if err := encoding.DecodeElements(s.fam, &shell, u, decodeVerdict); err == nil && shell.Len() == 1 {
			c.Text = shell.ElementText(0)
			if shell.EndpointMod > 0 {
				c.Endpoint = &shell.Endpoints[0]
			} else {
				c.Element = &shell.Elements[0]
			}
			return c
		}
	}
	c.Text = s.rawText(u)
	return c
}

// rawText writes a unit of elements that does not decode from its bytes.
func (s *Set) rawText(u []nftables.SetElement) string {
	text := rawValue(u[0].Key)
	if len(u) > 1 {
		if last, ok := netip.AddrFromSlice(decrement(u[1].Key)); ok && len(u[1].Key) == len(u[0].Key) {
			text += "-" + last.String()
		} else {
			text += "-" + rawValue(u[1].Key)
		}
	}
	if v := u[0].VerdictData; v != nil {
		text += " : " + verdictText(v)
	} else if v := decodeVerdict(u[0].Val); v != nil {
		text += " : " + verdictText(v)
	}
	return text
}

// rawValue writes a key of an element that did not decode: an address
// when it has an address's length, else its bytes in hex.
func rawValue(b []byte) string {
	if len(b) == 4 || len(b) == 16 {
		if a, ok := netip.AddrFromSlice(b); ok {
			return a.String()
		}
	}
	return "0x" + hex.EncodeToString(b)
}

// decrement is b - 1, as a big-endian number.
func decrement(b []byte) []byte {
	out := bytes.Clone(b)
	for i := len(out) - 1; i >= 0; i-- {
		out[i]--
		if out[i] != 0xff {
			break
		}
	}
	return out
}

// fieldLen is the length of a key field's value.
func fieldLen(typ string) int {
	switch typ {
	case "ipv6_addr":
		return 16
	case "inet_proto":
		return 1
	case "inet_service":
		return 2
	}
	return 4
}

// formatValue writes one value of a type as nft does.
func formatValue(typ string, b []byte) string {
	switch typ {
	case "ipv4_addr", "ipv6_addr":
		if a, ok := netip.AddrFromSlice(b); ok {
			return a.String()
		}
	case "inet_proto":
		if len(b) == 1 {
			return protoName(b[0])
		}
	case "inet_service":
		if len(b) == 2 {
			return strconv.Itoa(int(binary.BigEndian.Uint16(b)))
		}
	case "mark":
		if len(b) == 4 {
			if v := binary.NativeEndian.Uint32(b); v != 0 {
				return fmt.Sprintf("0x%x", v)
			}
			return "0"
		}
	case "integer":
		if len(b) == 4 {
			return strconv.FormatUint(uint64(binary.BigEndian.Uint32(b)), 10)
		}
	}
	return "0x" + hex.EncodeToString(b)
}

func protoName(p byte) string {
	switch p {
	case unix.IPPROTO_TCP:
		return "tcp"
	case unix.IPPROTO_UDP:
		return "udp"
	case unix.IPPROTO_SCTP:
		return "sctp"
	case unix.IPPROTO_ICMP:
		return "icmp"
	case unix.IPPROTO_ICMPV6:
		return "ipv6-icmp"
	}
	return strconv.Itoa(int(p))
}

// verdictText writes a verdict as nft does.
func verdictText(v *expr.Verdict) string {
	switch v.Kind {
	case expr.VerdictAccept:
		return "accept"
	case expr.VerdictDrop:
		return "drop"
	case expr.VerdictReturn:
		return "return"
	case expr.VerdictContinue:
		return "continue"
	case expr.VerdictJump:
		return "jump " + v.Chain
	case expr.VerdictGoto:
		return "goto " + v.Chain
	}
	return fmt.Sprintf("verdict %d", v.Kind)
}

// ruleKeyText writes a rule read from the kernel (its key: kernelRuleKey,
// which holds its expressions as netlink encodes them, then the elements
// of its anonymous set) as nft writes it, as far as the expressions are
// ones netspec knows.
func ruleKeyText(fam nftables.TableFamily, key []byte) string {
	if names, ok := bytes.CutPrefix(key, []byte("opaque: ")); ok {
		return "(a rule with expressions netspec does not write: " + strings.TrimSpace(string(names)) + ")"
	}
	var exprs []expr.Any
	var anon string
	for len(key) > 0 {
		if rest, ok := bytes.CutPrefix(key, []byte("|anon:")); ok {
			anon = string(rest)
			break
		}
		if len(key) < 4 {
			return "(unreadable rule)"
		}
		n := int(binary.BigEndian.Uint32(key))
		if len(key) < 4+n {
			return "(unreadable rule)"
		}
		e, name, err := parseExpr(byte(fam), key[4:4+n])
		if err != nil || e == nil {
			return "(a rule with an expression netspec cannot read: " + name + ")"
		}
		exprs = append(exprs, e)
		key = key[4+n:]
	}
	return exprsText(fam, exprs, anonElements(anon))
}

// anonElements reads the elements of an anonymous set back from anonKey.
func anonElements(s string) []nftables.SetElement {
	if s == "" {
		return nil
	}
	var out []nftables.SetElement
	for _, k := range strings.Split(s, ",") {
		end := strings.HasSuffix(k, " end")
		k = strings.TrimSuffix(k, " end")
		b, err := hex.DecodeString(k)
		if err != nil {
			return nil
		}
		out = append(out, nftables.SetElement{Key: b, IntervalEnd: end})
	}
	return out
}

// operand is what a register holds, for writing the rule.
type operand struct {
	text string // "ip daddr", "meta l4proto . th dport", "0x4000"
	typ  string // the type of its values: a set field type, or "ct state", …
	pfx  int    // > 0: masked to a prefix of this length (ip saddr 10.0.0.0/8)
	// computed tells a value worked out (meta mark & 0x4000, numgen …):
	// nft writes its comparison with ==.
	computed bool
	// bits is what a test of the bits of the mask reads as (ct state new),
	// for a flag field masked.
	bits string
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func isOnes(b []byte) bool {
	for _, c := range b {
		if c != 0xff {
			return false
		}
	}
	return true
}

// exprsText writes a rule's expressions as nft writes them: a walk that
// remembers what each register holds and writes a statement where the
// value is used (a comparison, a lookup, a verdict, NAT, …).
func exprsText(fam nftables.TableFamily, exprs []expr.Any, anon []nftables.SetElement) string {
	regs := map[uint32]operand{}
	seq := map[uint32]int{} // when each register was loaded, by expression
	var out []string
	addrType := "ipv4_addr"
	if fam == nftables.TableFamilyIPv6 {
		addrType = "ipv6_addr"
	}
	width := func(op operand) uint32 { return uint32((fieldLen(op.typ) + 3) / 4) }
	// concat is what the registers from r on hold: a concatenation is
	// loaded field after field, by consecutive expressions, into
	// consecutive registers.
	concat := func(r uint32) operand {
		r = reg32(r)
		first, ok := regs[r]
		if !ok {
			return operand{text: "?"}
		}
		texts, typs := []string{first.text}, []string{first.typ}
		for next := r + width(first); ; next += width(regs[next]) {
			op, ok := regs[next]
			if !ok || seq[next] != seq[r]+len(texts) {
				break
			}
			texts, typs = append(texts, op.text), append(typs, op.typ)
		}
		if len(texts) == 1 {
			return first
		}
		return operand{text: strings.Join(texts, " . "), typ: strings.Join(typs, " . ")}
	}
	n := 0
	load := func(r uint32, op operand) {
		r = reg32(r)
		// A load overwrites what the registers it covers held.
		for i := uint32(0); i < width(op); i++ {
			delete(regs, r+i)
		}
		regs[r], seq[r] = op, n
	}
	value := func(op operand, b []byte) string {
		switch {
		case op.typ == "ct state":
			return ctStateText(b)
		case op.typ == "fib type":
			return fibTypeText(b)
		case op.pfx > 0:
			full := make([]byte, fieldLen(op.typ))
			copy(full, b)
			if a, ok := netip.AddrFromSlice(full); ok {
				return netip.PrefixFrom(a, op.pfx).String()
			}
		}
		return formatValue(op.typ, b)
	}
	for _, e := range exprs {
		n++
		switch e := e.(type) {
		case *expr.Payload:
			if e.OperationType != expr.PayloadLoad {
				out = append(out, "(payload write)")
				continue
			}
			load(e.DestRegister, payloadOperand(fam, e))
		case *expr.Meta:
			op := metaOperand(e.Key)
			if e.SourceRegister {
				out = append(out, op.text+" set "+regs[reg32(e.Register)].text)
				continue
			}
			load(e.Register, op)
		case *expr.Ct:
			op := ctOperand(e.Key)
			if e.SourceRegister {
				out = append(out, op.text+" set "+regs[reg32(e.Register)].text)
				continue
			}
			load(e.Register, op)
		case *expr.Fib:
			text := "fib"
			switch {
			case e.FlagSADDR:
				text += " saddr"
			case e.FlagDADDR:
				text += " daddr"
			}
			if e.FlagIIF {
				text += " . iif"
			}
			typ := "integer"
			switch {
			case e.ResultADDRTYPE:
				text, typ = text+" type", "fib type"
			case e.ResultOIF:
				text += " oif"
			case e.ResultOIFNAME:
				text += " oifname"
			}
			load(e.Register, operand{text: text, typ: typ})
		case *expr.Numgen:
			text := fmt.Sprintf("numgen random mod %d", e.Modulus)
			if e.Type == unix.NFT_NG_INCREMENTAL {
				text = fmt.Sprintf("numgen inc mod %d", e.Modulus)
			}
			if e.Offset != 0 {
				text += fmt.Sprintf(" offset %d", e.Offset)
			}
			load(e.Register, operand{text: text, typ: "integer", computed: true})
		case *expr.Byteorder:
			load(e.DestRegister, regs[reg32(e.SourceRegister)])
		case *expr.Bitwise:
			src := regs[reg32(e.SourceRegister)]
			load(e.DestRegister, bitwiseOperand(src, e))
		case *expr.Immediate:
			load(e.Register, operand{text: "0x" + hex.EncodeToString(e.Data), typ: "raw"})
		case *expr.Cmp:
			op := regs[reg32(e.Register)]
			if op.bits != "" && e.Op == expr.CmpOpNeq && isZero(e.Data) {
				// ct state new: a bit of the mask set.
				out = append(out, op.bits)
				continue
			}
			s := op.text + " "
			if o := cmpOpText(e.Op); o != "" {
				s += o + " "
			} else if op.computed {
				s += "== "
			}
			out = append(out, s+value(op, e.Data))
		case *expr.Range:
			op := regs[reg32(e.Register)]
			s := op.text + " "
			if o := cmpOpText(e.Op); o != "" {
				s += o + " "
			}
			out = append(out, s+value(op, e.FromData)+"-"+value(op, e.ToData))
		case *expr.Lookup:
			src := concat(e.SourceRegister)
			set := "@" + e.SetName
			if strings.HasPrefix(e.SetName, "__set") {
				set = anonText(src, anon, addrType)
			}
			switch {
			case e.IsDestRegSet && e.DestRegister == unix.NFT_REG_VERDICT:
				out = append(out, src.text+" vmap "+set)
			case e.IsDestRegSet:
				load(e.DestRegister, operand{text: src.text + " map " + set, typ: "mapped"})
			case e.Invert:
				out = append(out, src.text+" != "+set)
			default:
				out = append(out, src.text+" "+set)
			}
		case *expr.Dynset:
			verb := "add"
			if e.Operation == unix.NFT_DYNSET_OP_UPDATE {
				verb = "update"
			}
			s := verb + " @" + e.SetName + " { " + concat(e.SrcRegKey).text
			if e.Timeout > 0 {
				s += " timeout " + e.Timeout.String()
			}
			out = append(out, s+" }")
		case *expr.Counter:
			out = append(out, "counter")
		case *expr.Log:
			out = append(out, "log")
		case *expr.Verdict:
			out = append(out, verdictText(e))
		case *expr.Masq:
			s := "masquerade"
			switch {
			case e.FullyRandom:
				s += " fully-random"
			case e.Random:
				s += " random"
			}
			if e.Persistent {
				s += " persistent"
			}
			out = append(out, s)
		case *expr.NAT:
			s := "dnat"
			if e.Type == expr.NATTypeSourceNAT {
				s = "snat"
			}
			addr := regs[reg32(e.RegAddrMin)]
			if addr.typ == "mapped" {
				// An endpoint map gives the address and the port.
				out = append(out, s+" "+familyName(fam)+" to "+addr.text)
				continue
			}
			to := addrText(addr)
			if e.RegProtoMin != 0 {
				to += ":" + portText(regs[reg32(e.RegProtoMin)])
			}
			out = append(out, s+" to "+to)
		case *expr.Reject:
			out = append(out, rejectText(fam, e))
		default:
			out = append(out, fmt.Sprintf("(%T)", e))
		}
	}
	return strings.Join(out, " ")
}

// reg32 is the 32-bit register a register number names: NFT_REG_1 … 4
// are 128-bit registers, the first four 32-bit ones each.
func reg32(r uint32) uint32 {
	if r >= unix.NFT_REG_1 && r <= unix.NFT_REG_4 {
		return unix.NFT_REG32_00 + (r-unix.NFT_REG_1)*4
	}
	return r
}

func payloadOperand(fam nftables.TableFamily, e *expr.Payload) operand {
	switch e.Base {
	case expr.PayloadBaseNetworkHeader:
		// nft loads only the bytes of a prefix it matches: 10.0.0.0/8 is
		// the first byte of the address.
		addrs := []struct {
			off, len uint32
			text     string
		}{{12, 4, "ip saddr"}, {16, 4, "ip daddr"}}
		if fam == nftables.TableFamilyIPv6 {
			addrs = []struct {
				off, len uint32
				text     string
			}{{8, 16, "ip6 saddr"}, {24, 16, "ip6 daddr"}}
		}
		for _, a := range addrs {
			if e.Offset == a.off && e.Len < a.len && e.Len > 0 {
				typ := "ipv4_addr"
				if a.len == 16 {
					typ = "ipv6_addr"
				}
				return operand{text: a.text, typ: typ, pfx: int(e.Len) * 8}
			}
		}
		if fam == nftables.TableFamilyIPv6 {
			switch {
			case e.Offset == 8 && e.Len == 16:
				return operand{text: "ip6 saddr", typ: "ipv6_addr"}
			case e.Offset == 24 && e.Len == 16:
				return operand{text: "ip6 daddr", typ: "ipv6_addr"}
			case e.Offset == 6 && e.Len == 1:
				return operand{text: "ip6 nexthdr", typ: "inet_proto"}
			}
		} else {
			switch {
			case e.Offset == 12 && e.Len == 4:
				return operand{text: "ip saddr", typ: "ipv4_addr"}
			case e.Offset == 16 && e.Len == 4:
				return operand{text: "ip daddr", typ: "ipv4_addr"}
			case e.Offset == 9 && e.Len == 1:
				return operand{text: "ip protocol", typ: "inet_proto"}
			}
		}
		return operand{text: fmt.Sprintf("@nh,%d,%d", e.Offset*8, e.Len*8), typ: "raw"}
	case expr.PayloadBaseTransportHeader:
		switch {
		case e.Offset == 0 && e.Len == 2:
			return operand{text: "th sport", typ: "inet_service"}
		case e.Offset == 2 && e.Len == 2:
			return operand{text: "th dport", typ: "inet_service"}
		}
		return operand{text: fmt.Sprintf("@th,%d,%d", e.Offset*8, e.Len*8), typ: "raw"}
	}
	return operand{text: fmt.Sprintf("@ll,%d,%d", e.Offset*8, e.Len*8), typ: "raw"}
}

func metaOperand(k expr.MetaKey) operand {
	switch k {
	case expr.MetaKeyL4PROTO:
		return operand{text: "meta l4proto", typ: "inet_proto"}
	case expr.MetaKeyMARK:
		return operand{text: "meta mark", typ: "mark"}
	case expr.MetaKeyNFPROTO:
		return operand{text: "meta nfproto", typ: "raw"}
	case expr.MetaKeyIIFNAME:
		return operand{text: "iifname", typ: "raw"}
	case expr.MetaKeyOIFNAME:
		return operand{text: "oifname", typ: "raw"}
	case expr.MetaKeyIIF:
		return operand{text: "iif", typ: "raw"}
	case expr.MetaKeyOIF:
		return operand{text: "oif", typ: "raw"}
	}
	return operand{text: fmt.Sprintf("meta key %d", k), typ: "raw"}
}

func ctOperand(k expr.CtKey) operand {
	switch k {
	case expr.CtKeySTATE:
		return operand{text: "ct state", typ: "ct state"}
	case expr.CtKeySTATUS:
		return operand{text: "ct status", typ: "raw"}
	case expr.CtKeyMARK:
		return operand{text: "ct mark", typ: "mark"}
	}
	return operand{text: fmt.Sprintf("ct key %d", k), typ: "raw"}
}

// bitwiseOperand is src after (src & mask) ^ xor, as nft writes it: a
// prefix of an address, `| C`, `^ C` or `& C`.
func bitwiseOperand(src operand, e *expr.Bitwise) operand {
	zero, ones := isZero, isOnes
	inverse := len(e.Mask) == len(e.Xor)
	for i := range e.Mask {
		if inverse && e.Mask[i] != ^e.Xor[i] {
			inverse = false
		}
	}
	if src.typ == "ct state" || src.text == "ct status" {
		if zero(e.Xor) && len(e.Mask) == 4 {
			return operand{text: src.text + " & " + formatValue("mark", e.Mask), typ: src.typ, computed: true,
				bits: src.text + " " + ctBits(src.text, binary.NativeEndian.Uint32(e.Mask))}
		}
	}
	if (src.typ == "ipv4_addr" || src.typ == "ipv6_addr") && zero(e.Xor) {
		n, prefix := 0, true
		for _, b := range e.Mask {
			if b != 0 && n%8 != 0 || bits.LeadingZeros8(^b) != bits.OnesCount8(b) {
				prefix = false
			}
			n += bits.OnesCount8(b)
		}
		if prefix && n > 0 {
			return operand{text: src.text, typ: src.typ, pfx: n}
		}
	}
	c := func(b []byte) string { return formatValue(src.typ, b) }
	switch {
	case ones(e.Mask) && !zero(e.Xor):
		return operand{text: src.text + " ^ " + c(e.Xor), typ: src.typ, computed: true}
	case inverse && !zero(e.Xor):
		return operand{text: src.text + " | " + c(e.Xor), typ: src.typ, computed: true}
	case zero(e.Xor):
		return operand{text: src.text + " & " + c(e.Mask), typ: src.typ, computed: true}
	}
	return operand{text: "(" + src.text + " & " + c(e.Mask) + ") ^ " + c(e.Xor), typ: src.typ, computed: true}
}

func cmpOpText(op expr.CmpOp) string {
	switch op {
	case expr.CmpOpNeq:
		return "!="
	case expr.CmpOpLt:
		return "<"
	case expr.CmpOpLte:
		return "<="
	case expr.CmpOpGt:
		return ">"
	case expr.CmpOpGte:
		return ">="
	}
	return ""
}

// ctStateText writes a ct state bit mask: new, established, …
func ctStateText(b []byte) string {
	if len(b) != 4 {
		return "0x" + hex.EncodeToString(b)
	}
	return ctBits("ct state", binary.NativeEndian.Uint32(b))
}

// ctBits writes the bits of ct state or ct status by name, as nft does.
func ctBits(field string, v uint32) string {
	type bit struct {
		bit  uint32
		name string
	}
	names := []bit{{1, "invalid"}, {2, "established"}, {4, "related"}, {8, "new"}, {64, "untracked"}}
	if field == "ct status" {
		names = []bit{{1, "expected"}, {2, "seen-reply"}, {4, "assured"}, {8, "confirmed"}, {16, "snat"}, {32, "dnat"}, {512, "dying"}}
	}
	var out []string
	for _, n := range names {
		if v&n.bit != 0 {
			out = append(out, n.name)
			v &^= n.bit
		}
	}
	if v != 0 || len(out) == 0 {
		out = append(out, fmt.Sprintf("0x%x", v))
	}
	return strings.Join(out, ",")
}

// fibTypeText writes an address type (RTN_*) as nft does.
func fibTypeText(b []byte) string {
	if len(b) != 4 {
		return "0x" + hex.EncodeToString(b)
	}
	types := []string{"unspec", "unicast", "local", "broadcast", "anycast", "multicast", "blackhole", "unreachable", "prohibit"}
	if v := binary.NativeEndian.Uint32(b); int(v) < len(types) {
		return types[v]
	}
	return "0x" + hex.EncodeToString(b)
}

// anonText writes an anonymous set's elements, as { 10.0.0.0/8, … }: an
// address set as the model holds it (encoding.AnonPrefixes), others a
// value or an interval at a time.
func anonText(src operand, elems []nftables.SetElement, addrType string) string {
	typ := src.typ
	if typ == "" || strings.Contains(typ, " . ") {
		typ = addrType
	}
	var parts []string
	f := nftmodel.IPv4
	if typ == "ipv6_addr" {
		f = nftmodel.IPv6
	}
	if ps, err := encoding.AnonPrefixes(f, elems); (typ == "ipv4_addr" || typ == "ipv6_addr") && err == nil {
		for _, p := range ps {
			if p.IsSingleIP() {
				parts = append(parts, p.Addr().String())
			} else {
				parts = append(parts, p.String())
			}
		}
	} else {
		for _, u := range intervalUnits(elems) {
			if u[0].IntervalEnd || fieldLen(typ) != len(u[0].Key) {
				continue
			}
			text := formatValue(typ, u[0].Key)
			if len(u) > 1 {
				text += "-" + formatValue(typ, decrement(u[1].Key))
			}
			parts = append(parts, text)
		}
	}
	if len(parts) == 0 {
		return "{ }"
	}
	return "{ " + strings.Join(parts, ", ") + " }"
}

// addrText writes an immediate address of NAT.
func addrText(op operand) string {
	if op.typ == "raw" && strings.HasPrefix(op.text, "0x") {
		if b, err := hex.DecodeString(op.text[2:]); err == nil {
			if a, ok := netip.AddrFromSlice(b); ok {
				if a.Is6() {
					return "[" + a.String() + "]"
				}
				return a.String()
			}
		}
	}
	return op.text
}

// portText writes an immediate port of NAT.
func portText(op operand) string {
	if op.typ == "raw" && strings.HasPrefix(op.text, "0x") {
		if b, err := hex.DecodeString(op.text[2:]); err == nil && len(b) >= 2 {
			return strconv.Itoa(int(binary.BigEndian.Uint16(b)))
		}
	}
	return op.text
}

// rejectText writes a reject statement; nft leaves out the default
// (ICMP port unreachable).
func rejectText(fam nftables.TableFamily, e *expr.Reject) string {
	switch e.Type {
	case unix.NFT_REJECT_TCP_RST:
		return "reject with tcp reset"
	case unix.NFT_REJECT_ICMP_UNREACH:
		if fam == nftables.TableFamilyIPv6 {
			if e.Code == 4 { // port unreachable
				return "reject"
			}
			return fmt.Sprintf("reject with icmpv6 %d", e.Code)
		}
		if e.Code == 3 {
			return "reject"
		}
		codes := map[uint8]string{0: "net-unreachable", 1: "host-unreachable", 2: "prot-unreachable", 9: "net-prohibited", 10: "host-prohibited", 13: "admin-prohibited"}
		if n, ok := codes[e.Code]; ok {
			return "reject with icmp " + n
		}
		return fmt.Sprintf("reject with icmp %d", e.Code)
	case unix.NFT_REJECT_ICMPX_UNREACH:
		if e.Code == unix.NFT_REJECT_ICMPX_PORT_UNREACH {
			return "reject"
		}
		return fmt.Sprintf("reject with icmpx %d", e.Code)
	}
	return "reject"
}

// family is the nftables family of the table planned.
func (tp *tablePlan) family() nftables.TableFamily {
	if tp.changes.Family == "ip6" {
		return nftables.TableFamilyIPv6
	}
	return nftables.TableFamilyIPv4
}

// intervalDrift compares an interval set's elements with the kernel's an
// interval at a time: the plan's elements the kernel lacks (added), and
// the kernel's intervals the plan does not have (removed), as nft writes
// them. The set is flushed and filled whole all the same.
func intervalDrift(s *Set, have []nftables.SetElement, fam nftables.TableFamily) (added, removed []ElementChange) {
	left := map[string][]nftables.SetElement{}
	for _, u := range intervalUnits(have) {
		left[unitKey(u)] = u
	}
	for _, e := range s.Elements {
		missing := false
		for _, u := range intervalUnits(e.Elems) {
			k := unitKey(u)
			if _, ok := left[k]; ok {
				delete(left, k)
			} else {
				missing = true
			}
		}
		if missing {
			added = append(added, e.change(s.Name))
		}
	}
	for _, k := range sortedKeys(left) {
		if u := left[k]; len(u) > 1 || !u[0].IntervalEnd {
			removed = append(removed, s.kernelChange(u))
		}
	}
	return added, removed
}

// maxDescribedChains bounds the chains whose rules describeRules names:
// the report is for people (writing a rule back costs about 15 µs), and a
// change of thousands of chains is not drift to read rule by rule.
const maxDescribedChains = 100

// describeRules names, for each chain the plan rewrites (the first
// maxDescribedChains), the rules that differ between the kernel (have,
// read with its rules) and the plan.
func (tp *tablePlan) describeRules(have *kernelTable, fam nftables.TableFamily) {
	if have == nil || tp.changes.Replace {
		return
	}
	for _, ch := range tp.changedChains[:min(len(tp.changedChains), maxDescribedChains)] {
		if kc := have.chains[ch.Name]; kc != nil {
			tp.changes.Rules = append(tp.changes.Rules, ruleChanges(ch, kc.keys, fam)...)
		}
	}
}

// ruleChanges aligns a chain's rules in the kernel (have: their keys)
// with the plan's, and names those that differ: a kernel rule and a plan
// rule at the same place are one rule changed; the rest are rules the
// kernel lacks or the plan does not have.
func ruleChanges(ch *Chain, have [][]byte, fam nftables.TableFamily) []RuleChange {
	a := make([]string, len(have))
	for i, k := range have {
		a[i] = string(k)
	}
	b := make([]string, len(ch.Rules))
	for i, r := range ch.Rules {
		b[i] = string(ruleKeyOf(r, fam))
	}
	id := func(s string) string { return s }
	del, ins, ok := myersKeys(a, b, id, myersMaxD, nil)
	if !ok {
		// Too many edits to align: compare place by place.
		del, ins = nil, nil
		for i := range max(len(a), len(b)) {
			if i < len(a) && i < len(b) && a[i] == b[i] {
				continue
			}
			if i < len(a) {
				del = append(del, i)
			}
			if i < len(b) {
				ins = append(ins, i)
			}
		}
	}
	// A deletion and an insertion are at the same place when as many
	// rules match before each.
	gapDel := map[int][]int{}
	for n, i := range del {
		gapDel[i-n] = append(gapDel[i-n], i)
	}
	gapIns := map[int][]int{}
	var gaps []int
	for n, j := range ins {
		if _, ok := gapIns[j-n]; !ok {
			gaps = append(gaps, j-n)
		}
		gapIns[j-n] = append(gapIns[j-n], j)
	}
	for g := range gapDel {
		if _, ok := gapIns[g]; !ok {
			gaps = append(gaps, g)
		}
	}
	slices.Sort(gaps)
	var out []RuleChange
	for _, g := range gaps {
		ds, is := gapDel[g], gapIns[g]
		for k := range max(len(ds), len(is)) {
			c := RuleChange{Chain: ch.Name}
			if k < len(ds) {
				c.Index, c.Old = ds[k]+1, ruleKeyText(fam, have[ds[k]])
			}
			if k < len(is) {
				c.Index, c.New = is[k]+1, ch.Rules[is[k]].Text
			}
			out = append(out, c)
		}
	}
	return out
}
