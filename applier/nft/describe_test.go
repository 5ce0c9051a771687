package nft

import (
	"encoding/binary"
	"encoding/hex"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
	"netspec.dev/netspec/applier/nft/encoding"
	"netspec.dev/netspec/render/nftmodel"
)

// encodedChain is a chain of a table of family f, encoded.
func encodedChain(f nftmodel.Family, name string, rules ...nftmodel.Rule) *Chain {
	var text []byte
	return encodeChain(encoding.NewEncoder(f), f, &nftmodel.Chain{Name: name, Rules: rules}, &text)
}

// prefixes parses prefixes.
func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

// oneElement is a comparison with an anonymous set of one element: nft
// matches it as the value itself.
var oneElement = regexp.MustCompile(`(!= )\{ ([^,{}]+) \}`)

// TestRuleKeyTextGolden: every rule of every golden ruleset, compiled as
// netspec sends it and written back from its key as the kernel would
// give it, reads as the rule's text. (The one form that differs is
// equivalent: nft compiles `!= { 198.51.100.0/24 }` to a prefix match.)
func TestRuleKeyTextGolden(t *testing.T) {
	n := 0
	models := goldenModels(t)
	for _, name := range slices.Sorted(maps.Keys(models)) {
		for _, tb := range Encode(models[name]).Tables {
			for _, ch := range tb.Chains {
				for _, r := range ch.Rules {
					n++
					want := oneElement.ReplaceAllString(r.Text, "$1$2")
					if got := ruleKeyText(tb.Family, ruleKeyOf(r, tb.Family)); got != want {
						t.Errorf("%s: chain %s:\n got  %s\n want %s", name, ch.Name, got, want)
					}
				}
			}
		}
	}
	if n < 100 {
		t.Errorf("only %d rules in the golden rulesets", n)
	}
}

// TestRuleKeyText: rules of shapes the golden files lack, and kernel
// rules netspec never writes.
func TestRuleKeyText(t *testing.T) {
	for _, tc := range []struct {
		name string
		fam  nftmodel.Family
		rule nftmodel.Rule
		want string
	}{
		{name: "anonymous set of several", fam: nftmodel.IPv4,
			rule: nftmodel.Rule{nftmodel.AddrMatch{Field: nftmodel.SAddr, Neq: true, Prefixes: prefixes("10.0.0.0/8", "192.168.1.0/24", "255.255.255.255/32"), Braces: true}, nftmodel.Verdict{Kind: nftmodel.Drop}},
			want: "ip saddr != { 10.0.0.0/8, 192.168.1.0/24, 255.255.255.255 } drop"},
		{name: "prefix off a byte", fam: nftmodel.IPv4,
			rule: nftmodel.Rule{nftmodel.AddrMatch{Field: nftmodel.DAddr, Prefixes: prefixes("10.96.0.0/12")}, nftmodel.Verdict{Kind: nftmodel.Accept}},
			want: "ip daddr 10.96.0.0/12 accept"},
		{name: "ipv6 prefix", fam: nftmodel.IPv6,
			rule: nftmodel.Rule{nftmodel.AddrMatch{Field: nftmodel.SAddr, Prefixes: prefixes("fd00::/8")}, nftmodel.Verdict{Kind: nftmodel.Return}},
			want: "ip6 saddr fd00::/8 return"},
		{name: "dnat to an address and port", fam: nftmodel.IPv4,
			rule: nftmodel.Rule{nftmodel.ProtoMatch{Proto: nftmodel.TCP}, nftmodel.DNAT{To: netip.MustParseAddrPort("10.244.1.5:8080")}},
			want: "meta l4proto tcp dnat to 10.244.1.5:8080"},
		{name: "ipv6 dnat", fam: nftmodel.IPv6,
			rule: nftmodel.Rule{nftmodel.ProtoMatch{Proto: nftmodel.UDP}, nftmodel.DNAT{To: netip.MustParseAddrPort("[fd00::5]:53")}},
			want: "meta l4proto udp dnat to [fd00::5]:53"},
		{name: "jump", fam: nftmodel.IPv4, rule: nftmodel.Rule{nftmodel.Verdict{Kind: nftmodel.Jump, Chain: "services"}}, want: "jump services"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := encodedChain(tc.fam, "c", tc.rule).Rules[0]
			fam := encoding.TableFamily(tc.fam)
			if got := ruleKeyText(fam, ruleKeyOf(r, fam)); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name  string
		exprs []expr.Any
		want  string
	}{
		{name: "counter drop", exprs: []expr.Any{&expr.Counter{}, &expr.Verdict{Kind: expr.VerdictDrop}}, want: "counter drop"},
		{name: "ct state several", exprs: []expr.Any{
			&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: binary.NativeEndian.AppendUint32(nil, 6), Xor: make([]byte, 4)},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
			&expr.Verdict{Kind: expr.VerdictAccept},
		}, want: "ct state established,related accept"},
		{name: "tcp reset", exprs: []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_TCP_RST}}, want: "reject with tcp reset"},
		{name: "reject host unreachable", exprs: []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: 1}}, want: "reject with icmp host-unreachable"},
		{name: "port range", exprs: []expr.Any{
			&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Range{Op: expr.CmpOpEq, Register: 1, FromData: []byte{0x75, 0x30}, ToData: []byte{0x7f, 0xff}},
			&expr.Log{}, &expr.Verdict{Kind: expr.VerdictAccept},
		}, want: "th dport 30000-32767 log accept"},
		{name: "mark test", exprs: []expr.Any{
			&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{0x00, 0x40, 0x00, 0x00}},
			&expr.Verdict{Kind: expr.VerdictGoto, Chain: "x"},
		}, want: "meta mark != 0x4000 goto x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := ruleKey(nftables.TableFamilyIPv4, tc.exprs)
			if got := ruleKeyText(nftables.TableFamilyIPv4, key); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
	t.Run("opaque", func(t *testing.T) {
		got := ruleKeyText(nftables.TableFamilyIPv4, []byte("opaque: quota tproxy "))
		if want := "(a rule with expressions netspec does not write: quota tproxy)"; got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	})
}

// kernelVerdict encodes a verdict as GetSetElements leaves it in Val.
func kernelVerdict(t *testing.T, kind expr.VerdictKind, chain string) []byte {
	t.Helper()
	ae := netlink.NewAttributeEncoder()
	ae.ByteOrder = binary.BigEndian
	ae.Uint32(unix.NFTA_VERDICT_CODE, uint32(int32(kind)))
	if chain != "" {
		ae.String(unix.NFTA_VERDICT_CHAIN, chain)
	}
	b, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestElementText: elements read from the kernel, decoded into the model
// and written as it writes them, for every kind of set netspec declares;
// and elements that do not decode, written from their bytes.
func TestElementText(t *testing.T) {
	ip := func(parts ...nftmodel.KeyPart) []nftmodel.KeyPart { return parts }
	addr, proto, port := nftmodel.AddrPart, nftmodel.ProtoPart, nftmodel.ServicePart
	sets := map[string]*nftmodel.Set{
		"service-ips":       {Name: "service-ips", Key: ip(addr, proto, port), Verdicts: true},
		"service-nodeports": {Name: "service-nodeports", Key: ip(proto, port), Verdicts: true},
		"cluster-frontends": {Name: "cluster-frontends", Key: ip(addr, proto, port)},
		"pod-cidrs":         {Name: "pod-cidrs", Key: ip(addr), Interval: true},
		"endpoints-3f":      {Name: "endpoints-3f", EndpointMod: 2520, Interval: true},
		"endpoints-0a":      {Name: "endpoints-0a", EndpointMod: 2520, Interval: true},
		"hairpin":           {Name: "hairpin", Key: ip(addr, addr)},
	}
	tb := &Table{Family: nftables.TableFamilyIPv4}
	tb6 := &Table{Family: nftables.TableFamilyIPv6}
	for _, name := range []string{"service-ips", "service-nodeports", "cluster-frontends", "pod-cidrs", "endpoints-3f"} {
		tb.Sets = append(tb.Sets, encodeSet(nftmodel.IPv4, sets[name]))
	}
	for _, name := range []string{"endpoints-0a", "hairpin"} {
		tb6.Sets = append(tb6.Sets, encodeSet(nftmodel.IPv6, sets[name]))
	}
	set := func(tb *Table, name string) *Set {
		for _, s := range tb.Sets {
			if s.Name == name {
				return s
			}
		}
		t.Fatalf("no set %s", name)
		return nil
	}
	hexKey := func(s string) []byte {
		b, err := hexDecode(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name string
		f    *Set
		unit []nftables.SetElement
		want string
	}{
		{name: "address, protocol and port", f: set(tb, "service-ips"),
			unit: []nftables.SetElement{{Key: hexKey("0a0102030600000000630000"), Val: kernelVerdict(t, expr.VerdictGoto, "external-x")}},
			want: "10.1.2.3 . tcp . 99 : goto external-x"},
		{name: "node port", f: set(tb, "service-nodeports"),
			unit: []nftables.SetElement{{Key: hexKey("0600000075aa0000"), Val: kernelVerdict(t, expr.VerdictGoto, "external-x")}},
			want: "tcp . 30122 : goto external-x"},
		{name: "verdict as the plan holds it", f: set(tb, "service-nodeports"),
			unit: []nftables.SetElement{{Key: hexKey("1100000000350000"), VerdictData: &expr.Verdict{Kind: expr.VerdictDrop}}},
			want: "udp . 53 : drop"},
		{name: "set of a concatenation", f: set(tb, "cluster-frontends"),
			unit: []nftables.SetElement{{Key: hexKey("0a600001840000000bb80000")}},
			want: "10.96.0.1 . sctp . 3000"},
		{name: "interval: a prefix", f: set(tb, "pod-cidrs"),
			unit: []nftables.SetElement{{Key: hexKey("0af40000")}, {Key: hexKey("0af50000"), IntervalEnd: true}},
			want: "10.244.0.0/16"},
		{name: "interval: a range", f: set(tb, "pod-cidrs"),
			unit: []nftables.SetElement{{Key: hexKey("0a000001")}, {Key: hexKey("0a000006"), IntervalEnd: true}},
			want: "10.0.0.1-10.0.0.5"},
		{name: "interval: one address", f: set(tb, "pod-cidrs"),
			unit: []nftables.SetElement{{Key: hexKey("0a000001")}, {Key: hexKey("0a000002"), IntervalEnd: true}},
			want: "10.0.0.1"},
		{name: "interval to the end", f: set(tb, "pod-cidrs"),
			unit: []nftables.SetElement{{Key: hexKey("f0000000")}},
			want: "240.0.0.0/4"},
		{name: "the end element before the lowest interval", f: set(tb, "pod-cidrs"),
			unit: []nftables.SetElement{{Key: hexKey("00000000"), IntervalEnd: true}},
			want: "(the end of an interval at 0.0.0.0)"},
		{name: "endpoint map", f: set(tb, "endpoints-3f"),
			unit: []nftables.SetElement{{Key: hexKey("00000000"), Val: hexKey("0af401051f900000")}, {Key: hexKey("000004ec"), IntervalEnd: true}},
			want: "0-1259 : 10.244.1.5 . 8080"},
		{name: "ipv6 endpoint map", f: set(tb6, "endpoints-0a"),
			unit: []nftables.SetElement{{Key: hexKey("000004ec"), Val: hexKey("fd000000000000000000000000000005 0035 0000")}, {Key: hexKey("000009d8"), IntervalEnd: true}},
			want: "1260-2519 : fd00::5 . 53"},
		{name: "ipv6 pair", f: set(tb6, "hairpin"),
			unit: []nftables.SetElement{{Key: hexKey("fd000000000000000000000000000005fd000000000000000000000000000005")}},
			want: "fd00::5 . fd00::5"},
		{name: "not of the set's type", f: set(tb, "service-ips"),
			unit: []nftables.SetElement{{Key: hexKey("0a01")}},
			want: "0x0a01"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.f.kernelText(tc.unit); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestRuleChanges: a chain's rules in the kernel against the plan's: a
// rule changed in place, one missing, one extra, each named with its
// text.
func TestRuleChanges(t *testing.T) {
	v4 := nftmodel.IPv4
	fam := nftables.TableFamilyIPv4
	ch := encodedChain(v4, "c",
		nftmodel.Rule{nftmodel.Verdict{Kind: nftmodel.Jump, Chain: "a"}},
		nftmodel.Rule{nftmodel.AddrMatch{Field: nftmodel.DAddr, Prefixes: prefixes("10.96.0.0/12")}, nftmodel.Verdict{Kind: nftmodel.Accept}},
		nftmodel.Rule{nftmodel.ProtoMatch{Proto: nftmodel.TCP}, nftmodel.DNAT{To: netip.MustParseAddrPort("10.244.1.5:8080")}},
		nftmodel.Rule{nftmodel.Verdict{Kind: nftmodel.Jump, Chain: "b"}},
	)
	key := func(i int) []byte { return ruleKeyOf(ch.Rules[i], fam) }
	changed := ruleKeyOf(encodedChain(v4, "c", nftmodel.Rule{nftmodel.AddrMatch{Field: nftmodel.DAddr, Prefixes: prefixes("10.96.0.0/16")}, nftmodel.Verdict{Kind: nftmodel.Accept}}).Rules[0], fam)
	extra := ruleKey(fam, []expr.Any{&expr.Counter{}, &expr.Verdict{Kind: expr.VerdictDrop}})
	for _, tc := range []struct {
		name string
		have [][]byte
		want []RuleChange
	}{
		{name: "same", have: [][]byte{key(0), key(1), key(2), key(3)}},
		{name: "a rule changed", have: [][]byte{key(0), changed, key(2), key(3)}, want: []RuleChange{
			{Chain: "c", Index: 2, Old: "ip daddr 10.96.0.0/16 accept", New: "ip daddr 10.96.0.0/12 accept"}}},
		{name: "a rule missing", have: [][]byte{key(0), key(1), key(3)}, want: []RuleChange{
			{Chain: "c", Index: 3, New: "meta l4proto tcp dnat to 10.244.1.5:8080"}}},
		{name: "a rule added by hand", have: [][]byte{key(0), key(1), key(2), key(3), extra}, want: []RuleChange{
			{Chain: "c", Index: 5, Old: "counter drop"}}},
		{name: "flushed", have: nil, want: []RuleChange{
			{Chain: "c", Index: 1, New: "jump a"}, {Chain: "c", Index: 2, New: "ip daddr 10.96.0.0/12 accept"},
			{Chain: "c", Index: 3, New: "meta l4proto tcp dnat to 10.244.1.5:8080"}, {Chain: "c", Index: 4, New: "jump b"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ruleChanges(ch, tc.have, fam)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func hexDecode(s string) ([]byte, error) {
	return hex.DecodeString(strings.ReplaceAll(s, " ", ""))
}
