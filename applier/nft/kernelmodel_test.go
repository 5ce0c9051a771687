package nft

import (
	"encoding/binary"
	"encoding/hex"
	"maps"
	"net/netip"
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

// prefixes parses prefixes.
func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

// kernelRules are rules of a table of family f as the kernel gives them
// back: their expressions, with the elements of their anonymous sets
// in anon under the names the kernel gives them.
func kernelRules(f nftmodel.Family, anon map[string][]nftables.SetElement, rules ...nftmodel.Rule) []KernelRule {
	enc := encoding.NewEncoder(f)
	var out []KernelRule
	for _, r := range rules {
		ex, as := enc.Encode(r)
		if as != nil {
			name := "__set" + string(rune('0'+len(anon)))
			anon[name] = as.Elements
			l := *ex[as.At].(*expr.Lookup)
			l.SetName = name
			ex = append([]expr.Any(nil), ex...)
			ex[as.At] = &l
		}
		out = append(out, KernelRule{Exprs: ex})
	}
	return out
}

// TestRuleChanges: a chain's rules in the kernel against the plan's: a
// rule changed in place, one missing, one extra (made by hand: named by
// its expressions), each named with its text; a set of addresses the
// kernel keeps in another order is the same rule.
func TestRuleChanges(t *testing.T) {
	f := nftmodel.IPv4
	rules := []nftmodel.Rule{
		{nftmodel.Verdict{Kind: nftmodel.Jump, Chain: "a"}},
		{nftmodel.AddrMatch{Field: nftmodel.DAddr, Prefixes: prefixes("10.96.0.0/12")}, nftmodel.Verdict{Kind: nftmodel.Accept}},
		{nftmodel.ProtoMatch{Proto: nftmodel.TCP}, nftmodel.DNAT{To: netip.MustParseAddrPort("10.244.1.5:8080")}},
		{nftmodel.AddrMatch{Field: nftmodel.SAddr, Neq: true, Prefixes: prefixes("192.168.1.0/24", "10.0.0.0/8"), Braces: true}, nftmodel.Verdict{Kind: nftmodel.Drop}},
	}
	want := &nftmodel.Chain{Name: "c", Rules: rules}
	changed := nftmodel.Rule{nftmodel.AddrMatch{Field: nftmodel.DAddr, Prefixes: prefixes("10.96.0.0/16")}, nftmodel.Verdict{Kind: nftmodel.Accept}}
	extra := KernelRule{Exprs: []expr.Any{&expr.Counter{}, &expr.Verdict{Kind: expr.VerdictDrop}}}
	opaque := KernelRule{Exprs: []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}}, Opaque: "quota tproxy "}
	for _, tc := range []struct {
		name string
		have func(anon map[string][]nftables.SetElement) []KernelRule
		want []RuleChange
	}{
		{name: "same", have: func(anon map[string][]nftables.SetElement) []KernelRule {
			return kernelRules(f, anon, rules...)
		}},
		{name: "a rule changed", have: func(anon map[string][]nftables.SetElement) []KernelRule {
			return kernelRules(f, anon, rules[0], changed, rules[2], rules[3])
		}, want: []RuleChange{
			{Chain: "c", Index: 2, Old: "ip daddr 10.96.0.0/16 accept", New: "ip daddr 10.96.0.0/12 accept"}}},
		{name: "a rule missing", have: func(anon map[string][]nftables.SetElement) []KernelRule {
			return kernelRules(f, anon, rules[0], rules[1], rules[3])
		}, want: []RuleChange{
			{Chain: "c", Index: 3, New: "meta l4proto tcp dnat to 10.244.1.5:8080"}}},
		{name: "a rule added by hand", have: func(anon map[string][]nftables.SetElement) []KernelRule {
			return append(kernelRules(f, anon, rules...), extra)
		}, want: []RuleChange{
			{Chain: "c", Index: 5, Old: "(not a form netspec writes: counter drop)"}}},
		{name: "a rule of expressions netspec cannot read", have: func(anon map[string][]nftables.SetElement) []KernelRule {
			return append(kernelRules(f, anon, rules[:3]...), opaque)
		}, want: []RuleChange{
			{Chain: "c", Index: 4, Old: "(not a form netspec writes: accept quota tproxy)", New: "ip saddr != { 192.168.1.0/24, 10.0.0.0/8 } drop"}}},
		{name: "flushed", have: func(map[string][]nftables.SetElement) []KernelRule { return nil }, want: []RuleChange{
			{Chain: "c", Index: 1, New: "jump a"}, {Chain: "c", Index: 2, New: "ip daddr 10.96.0.0/12 accept"},
			{Chain: "c", Index: 3, New: "meta l4proto tcp dnat to 10.244.1.5:8080"},
			{Chain: "c", Index: 4, New: "ip saddr != { 192.168.1.0/24, 10.0.0.0/8 } drop"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			anon := map[string][]nftables.SetElement{}
			got := ruleChanges(want, tc.have(anon), f, anon)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
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

// TestDecodeKernelSet: elements read from the kernel, decoded into the
// model and written by it, for every kind of set netspec declares; and
// elements that do not decode, foreign, written from their bytes.
func TestDecodeKernelSet(t *testing.T) {
	ip := func(parts ...nftmodel.KeyPart) []nftmodel.KeyPart { return parts }
	addr, proto, port := nftmodel.AddrPart, nftmodel.ProtoPart, nftmodel.ServicePart
	sets := map[string]*nftmodel.Set{
		"service-ips":       {Name: "service-ips", Key: ip(addr, proto, port), Verdicts: true},
		"service-nodeports": {Name: "service-nodeports", Key: ip(proto, port), Verdicts: true},
		"cluster-frontends": {Name: "cluster-frontends", Key: ip(addr, proto, port)},
		"pod-cidrs":         {Name: "pod-cidrs", Key: ip(addr), Interval: true},
		"endpoints-3f":      {Name: "endpoints-3f", EndpointMod: 2520, Interval: true},
		"hairpin":           {Name: "hairpin", Key: ip(addr, addr)},
	}
	hexKey := func(s string) []byte {
		b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name    string
		fam     nftmodel.Family
		set     string
		unit    []nftables.SetElement
		want    string // the element's text; "" for none
		foreign bool
	}{
		{name: "address, protocol and port", set: "service-ips",
			unit: []nftables.SetElement{{Key: hexKey("0a0102030600000000630000"), Val: kernelVerdict(t, expr.VerdictGoto, "external-x")}},
			want: "10.1.2.3 . tcp . 99 : goto external-x"},
		{name: "node port", set: "service-nodeports",
			unit: []nftables.SetElement{{Key: hexKey("0600000075aa0000"), Val: kernelVerdict(t, expr.VerdictGoto, "external-x")}},
			want: "tcp . 30122 : goto external-x"},
		{name: "verdict as the plan holds it", set: "service-nodeports",
			unit: []nftables.SetElement{{Key: hexKey("1100000000350000"), VerdictData: &expr.Verdict{Kind: expr.VerdictDrop}}},
			want: "udp . 53 : drop"},
		{name: "set of a concatenation", set: "cluster-frontends",
			unit: []nftables.SetElement{{Key: hexKey("0a600001840000000bb80000")}},
			want: "10.96.0.1 . sctp . 3000"},
		{name: "interval: a prefix", set: "pod-cidrs",
			unit: []nftables.SetElement{{Key: hexKey("0af40000")}, {Key: hexKey("0af50000"), IntervalEnd: true}},
			want: "10.244.0.0/16"},
		{name: "interval: a range", set: "pod-cidrs",
			unit: []nftables.SetElement{{Key: hexKey("0a000001")}, {Key: hexKey("0a000006"), IntervalEnd: true}},
			want: "10.0.0.1-10.0.0.5", foreign: true},
		{name: "interval: one address", set: "pod-cidrs",
			unit: []nftables.SetElement{{Key: hexKey("0a000001")}, {Key: hexKey("0a000002"), IntervalEnd: true}},
			want: "10.0.0.1"},
		{name: "interval to the end", set: "pod-cidrs",
			unit: []nftables.SetElement{{Key: hexKey("f0000000")}},
			want: "240.0.0.0/4"},
		{name: "the end element before the lowest interval", set: "pod-cidrs",
			unit: []nftables.SetElement{{Key: hexKey("00000000"), IntervalEnd: true}}},
		{name: "endpoint map", set: "endpoints-3f",
			unit: []nftables.SetElement{{Key: hexKey("00000000"), Val: hexKey("0af401051f900000")}, {Key: hexKey("000004ec"), IntervalEnd: true}},
			want: "0-1259 : 10.244.1.5 . 8080"},
		{name: "ipv6 endpoint map", fam: nftmodel.IPv6, set: "endpoints-3f",
			unit: []nftables.SetElement{{Key: hexKey("000004ec"), Val: hexKey("fd000000000000000000000000000005 0035 0000")}, {Key: hexKey("000009d8"), IntervalEnd: true}},
			want: "1260-2519 : fd00::5 . 53"},
		{name: "ipv6 pair", fam: nftmodel.IPv6, set: "hairpin",
			unit: []nftables.SetElement{{Key: hexKey("fd000000000000000000000000000005fd000000000000000000000000000005")}},
			want: "fd00::5 . fd00::5"},
		{name: "not of the set's type", set: "service-ips",
			unit: []nftables.SetElement{{Key: hexKey("0a01"), Val: kernelVerdict(t, expr.VerdictAccept, "")}},
			want: "0x0a01 : accept", foreign: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.fam
			if f == 0 {
				f = nftmodel.IPv4
			}
			km := &kernelModel{foreign: map[string][][]nftables.SetElement{}}
			s := km.decodeSet(f, sets[tc.set], &kernelSet{elems: tc.unit})
			var got []string
			for i := range s.Len() {
				got = append(got, s.ElementText(i))
			}
			for _, u := range km.foreign[tc.set] {
				got = append(got, rawText(u))
			}
			var want []string
			if tc.want != "" {
				want = []string{tc.want}
			}
			if diff := cmp.Diff(want, got); diff != "" || (len(km.foreign[tc.set]) > 0) != tc.foreign {
				t.Errorf("elements (-want +got):\n%s\nforeign %d, want %v", diff, len(km.foreign[tc.set]), tc.foreign)
			}
		})
	}
}

// sortedKeys are the keys of m, sorted.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
