package nft

import (
	"fmt"
	"net/netip"
	"time"

	"netspec.dev/netspec/render/nftmodel"
)

// modelForms is a ruleset with every rule form and element form render
// writes (see golden/*/*/nftables.nft), in both families.
func modelForms() *nftmodel.Ruleset {
	rs := &nftmodel.Ruleset{Comment: []string{"forms of nftmodel"}}
	for _, f := range []nftmodel.Family{nftmodel.IPv4, nftmodel.IPv6} {
		a := func(s4, s6 string) netip.Addr {
			if f == nftmodel.IPv6 {
				return netip.MustParseAddr(s6)
			}
			return netip.MustParseAddr(s4)
		}
		p := func(s4, s6 string) netip.Prefix {
			if f == nftmodel.IPv6 {
				return netip.MustParsePrefix(s6)
			}
			return netip.MustParsePrefix(s4)
		}
		loop := p("127.0.0.0/8", "::1/128")
		t := &nftmodel.Table{Family: f, Name: "netspec", Comment: "forms."}
		markOr := nftmodel.MarkSet{Op: nftmodel.MarkOr, Value: 0x4000}
		t.AddChain("Base chains.", &nftmodel.Chain{Name: "nat-prerouting",
			Hook:  &nftmodel.Hook{Type: nftmodel.NAT, Hook: nftmodel.Prerouting, Priority: nftmodel.PriorityDstNAT},
			Rules: []nftmodel.Rule{{nftmodel.Verdict{Kind: nftmodel.Jump, Chain: "services"}}}})
		t.AddChain("", &nftmodel.Chain{Name: "nat-output",
			Hook:  &nftmodel.Hook{Type: nftmodel.NAT, Hook: nftmodel.Output, Priority: -100},
			Rules: []nftmodel.Rule{{nftmodel.Verdict{Kind: nftmodel.Jump, Chain: "services"}}}})
		t.AddChain("", &nftmodel.Chain{Name: "nat-postrouting",
			Hook: &nftmodel.Hook{Type: nftmodel.NAT, Hook: nftmodel.Postrouting, Priority: nftmodel.PrioritySrcNAT}})
		t.AddChain("", &nftmodel.Chain{Name: "filter-prerouting",
			Hook: &nftmodel.Hook{Type: nftmodel.Filter, Hook: nftmodel.Prerouting, Priority: -110},
			Rules: []nftmodel.Rule{
				{nftmodel.CtMatch{Key: nftmodel.CtState, Bits: nftmodel.StateNew}, nftmodel.Verdict{Kind: nftmodel.Jump, Chain: "check"}},
			}})
		t.AddChain("", &nftmodel.Chain{Name: "filter-prerouting-post",
			Hook: &nftmodel.Hook{Type: nftmodel.Filter, Hook: nftmodel.Prerouting, Priority: -90}})
		t.AddChain("", &nftmodel.Chain{Name: "filter-output",
			Hook: &nftmodel.Hook{Type: nftmodel.Filter, Hook: nftmodel.Output, Priority: -110}})
		t.AddChain("Dispatch.", &nftmodel.Chain{Name: "services", Comment: "services: \"quoted\"", Rules: []nftmodel.Rule{
			{nftmodel.Lookup{Key: nftmodel.KeyDAddrProtoPort, Set: "frontends"}, nftmodel.AddrMatch{Field: nftmodel.SAddr, Neq: true, Prefixes: []netip.Prefix{p("10.244.0.0/16", "fd00:244::/48")}}, markOr},
			{nftmodel.Lookup{Key: nftmodel.KeyDAddrProtoPort, Set: "frontends"}, nftmodel.Lookup{Key: nftmodel.KeySAddr, Set: "pod-cidrs", Invert: true}, markOr},
			{nftmodel.Lookup{Key: nftmodel.KeyDAddrProtoPort, Set: "frontends"}, markOr},
			{nftmodel.Lookup{Key: nftmodel.KeyDAddrProtoPort, Set: "frontends"}, nftmodel.Verdict{Kind: nftmodel.Return}},
			{nftmodel.VMap{Key: nftmodel.KeyDAddrProtoPort, Map: "vm"}},
			{nftmodel.Lookup{Key: nftmodel.KeyDAddr, Set: "ips"}, nftmodel.VMap{Key: nftmodel.KeyProtoPort, Map: "vmp"}},
			{nftmodel.Lookup{Key: nftmodel.KeyDAddr, Set: "ips"}, nftmodel.Lookup{Key: nftmodel.KeyProtoPort, Set: "ports"}, markOr},
			{nftmodel.FibLocal{Daddr: true}, nftmodel.AddrMatch{Field: nftmodel.DAddr, Neq: true, Prefixes: []netip.Prefix{loop}}, nftmodel.Lookup{Key: nftmodel.KeyDAddr, Set: "ips"}, nftmodel.VMap{Key: nftmodel.KeyProtoPort, Map: "vmp"}},
		}})
		t.AddChain("", &nftmodel.Chain{Name: "masquerading", Rules: []nftmodel.Rule{
			{nftmodel.CtMatch{Key: nftmodel.CtStatus, Bits: nftmodel.StatusDNAT}, nftmodel.Lookup{Key: nftmodel.KeySAddrDAddr, Set: "hairpin"}, nftmodel.Masquerade{FullyRandom: true}},
			{nftmodel.Lookup{Key: nftmodel.KeySAddrDAddr, Set: "hairpin"}, nftmodel.Masquerade{FullyRandom: true}},
			{nftmodel.MarkMatch{Mask: 0x4000, Value: 0}, nftmodel.Verdict{Kind: nftmodel.Return}},
			{nftmodel.MarkSet{Op: nftmodel.MarkXor, Value: 0x4000}},
			{nftmodel.Masquerade{FullyRandom: true}},
		}})
		t.AddChain("", &nftmodel.Chain{Name: "check", Rules: []nftmodel.Rule{
			{nftmodel.Lookup{Key: nftmodel.KeyDAddr, Set: "ips"}, nftmodel.Reject{}},
			{nftmodel.AddrMatch{Field: nftmodel.DAddr, Prefixes: []netip.Prefix{p("10.96.0.0/12", "fd00:96::/108")}}, nftmodel.Verdict{Kind: nftmodel.Drop}},
			{nftmodel.AddrMatch{Field: nftmodel.DAddr, Prefixes: []netip.Prefix{p("10.96.0.0/12", "fd00:96::/108"), p("10.128.0.0/9", "fd00:97::/112")}}, nftmodel.Verdict{Kind: nftmodel.Drop}},
			{nftmodel.Reject{}},
		}})
		t.AddChain("", &nftmodel.Chain{Name: "svc", Rules: []nftmodel.Rule{
			{nftmodel.ProtoMatch{Proto: nftmodel.TCP}, nftmodel.DNATMap{Mod: 2520, Offset: 4293030000, Map: "endpoints-28"}},
			{nftmodel.ProtoMatch{Proto: nftmodel.UDP}, nftmodel.DNATMap{Mod: 2520, Map: "endpoints-28"}},
			{nftmodel.ProtoMatch{Proto: nftmodel.SCTP}, nftmodel.DNATMap{Mod: 12000, Offset: 10000, Map: "endpoints-28"}},
		}})
		t.AddChain("", &nftmodel.Chain{Name: "ext", Rules: []nftmodel.Rule{
			{markOr},
			{nftmodel.AddrMatch{Field: nftmodel.SAddr, Prefixes: []netip.Prefix{p("10.244.0.0/16", "fd00:244::/48")}}, nftmodel.GoTo("svc")},
			{nftmodel.Lookup{Key: nftmodel.KeySAddr, Set: "pod-cidrs"}, nftmodel.GoTo("svc")},
			{nftmodel.FibLocal{}, markOr},
			{nftmodel.FibLocal{}, nftmodel.GoTo("svc")},
			{nftmodel.GoTo("svc")},
		}})
		t.AddChain("", &nftmodel.Chain{Name: "fw", Rules: []nftmodel.Rule{
			{nftmodel.AddrMatch{Field: nftmodel.SAddr, Neq: true, Prefixes: []netip.Prefix{p("198.51.100.0/24", "2001:db8::/64")}, Braces: true}, nftmodel.Verdict{Kind: nftmodel.Drop}},
			{nftmodel.AddrMatch{Field: nftmodel.SAddr, Neq: true, Prefixes: []netip.Prefix{p("198.51.100.0/24", "2001:db8::/64"), p("203.0.113.100/32", "2001:db8:1::100/128")}, Braces: true}, nftmodel.Verdict{Kind: nftmodel.Drop}},
			{nftmodel.AddrMatch{Field: nftmodel.SAddr, Neq: true, Prefixes: []netip.Prefix{p("198.51.100.1/32", "2001:db8::1/128"), p("203.0.113.100/32", "2001:db8:1::100/128")}, Braces: true}, nftmodel.Verdict{Kind: nftmodel.Drop}},
			{nftmodel.AddrMatch{Field: nftmodel.SAddr, Neq: true, Prefixes: []netip.Prefix{p("10.1.2.0/23", "fd00:1:2::/47")}}, nftmodel.Verdict{Kind: nftmodel.Drop}},
			{nftmodel.Verdict{Kind: nftmodel.Drop}},
		}})
		ep1 := netip.AddrPortFrom(a("10.244.1.5", "fd00:244:1::5"), 8080)
		ep2 := netip.AddrPortFrom(a("10.244.2.5", "fd00:244:2::5"), 8081)
		t.AddChain("", &nftmodel.Chain{Name: "aff", Rules: []nftmodel.Rule{
			{nftmodel.Lookup{Key: nftmodel.KeySAddr, Set: "affinity-a"}, nftmodel.Update{Set: "affinity-a", Key: nftmodel.KeySAddr}, nftmodel.ProtoMatch{Proto: nftmodel.TCP}, nftmodel.DNAT{To: ep1}},
			{nftmodel.NumgenMatch{Mod: 2, Value: 0}, nftmodel.Update{Set: "affinity-a", Key: nftmodel.KeySAddr}, nftmodel.ProtoMatch{Proto: nftmodel.TCP}, nftmodel.DNAT{To: ep1}},
			{nftmodel.ProtoMatch{Proto: nftmodel.UDP}, nftmodel.DNAT{To: ep2}},
		}})

		addr3 := []nftmodel.KeyPart{nftmodel.AddrPart, nftmodel.ProtoPart, nftmodel.ServicePart}
		reports := nftmodel.Key{Addr: a("10.96.0.11", "fd00:96::11"), Proto: nftmodel.SCTP, Port: 3868}
		t.AddSet("Maps.", &nftmodel.Set{Name: "vm", Comment: "vm: a verdict map", Key: addr3, Verdicts: true, Elements: []nftmodel.Element{
			{Key: nftmodel.Key{Addr: a("10.96.0.10", "fd00:96::10"), Proto: nftmodel.TCP, Port: 80}, Verdict: nftmodel.GoTo("svc")},
			{Key: reports, Verdict: nftmodel.GoTo("check"), Comment: "shop/reports:http"},
			{Key: nftmodel.Key{Addr: a("10.96.0.12", "fd00:96::12"), Proto: nftmodel.UDP, Port: 53}, Verdict: nftmodel.Verdict{Kind: nftmodel.Drop}, Comment: "a \"b\""},
		}, Dropped: map[nftmodel.Key][]nftmodel.Verdict{reports: {{Kind: nftmodel.Drop}}}})
		t.AddSet("", &nftmodel.Set{Name: "vmp", Key: []nftmodel.KeyPart{nftmodel.ProtoPart, nftmodel.ServicePart}, Verdicts: true, Elements: []nftmodel.Element{
			{Key: nftmodel.Key{Proto: nftmodel.TCP, Port: 30080}, Verdict: nftmodel.GoTo("ext")},
		}})
		t.AddSet("", &nftmodel.Set{Name: "empty", Key: []nftmodel.KeyPart{nftmodel.ProtoPart, nftmodel.ServicePart}, Verdicts: true})
		t.AddSet("", &nftmodel.Set{Name: "frontends", Key: addr3, Elements: []nftmodel.Element{
			{Key: nftmodel.Key{Addr: a("10.96.0.10", "fd00:96::10"), Proto: nftmodel.TCP, Port: 80}},
		}})
		t.AddSet("", &nftmodel.Set{Name: "ports", Key: []nftmodel.KeyPart{nftmodel.ProtoPart, nftmodel.ServicePart}, Elements: []nftmodel.Element{
			{Key: nftmodel.Key{Proto: nftmodel.TCP, Port: 30080}},
		}})
		t.AddSet("", &nftmodel.Set{Name: "ips", Key: []nftmodel.KeyPart{nftmodel.AddrPart}, Elements: []nftmodel.Element{
			{Key: nftmodel.Key{Addr: a("10.96.0.10", "fd00:96::10")}},
			{Key: nftmodel.Key{Addr: a("10.96.0.11", "fd00:96::11")}},
		}})
		t.AddSet("", &nftmodel.Set{Name: "hairpin", Key: []nftmodel.KeyPart{nftmodel.AddrPart, nftmodel.AddrPart}, Elements: []nftmodel.Element{
			{Key: nftmodel.Key{Addr: a("10.244.1.5", "fd00:244:1::5")}},
		}})
		t.AddSet("", &nftmodel.Set{Name: "pod-cidrs", Key: []nftmodel.KeyPart{nftmodel.AddrPart}, Interval: true, Inline: true, Elements: []nftmodel.Element{
			{Key: nftmodel.Key{Addr: a("10.244.0.0", "fd00:244::"), Bits: uint8(p("10.244.0.0/16", "fd00:244::/48").Bits())}},
			{Key: nftmodel.Key{Addr: a("10.245.0.0", "fd00:245::"), Bits: uint8(p("10.244.0.0/16", "fd00:244::/48").Bits())}},
		}})
		t.AddSet("", &nftmodel.Set{Name: "nodeport-ips", Key: []nftmodel.KeyPart{nftmodel.AddrPart}, Interval: true, Inline: true, Elements: []nftmodel.Element{
			{Key: nftmodel.Key{Addr: a("192.168.10.11", "2001:db8::11"), Bits: uint8(a("192.168.10.11", "2001:db8::11").BitLen())}},
		}})
		t.AddSet("", &nftmodel.Set{Name: "endpoints-28", EndpointMod: 2520, Interval: true, Endpoints: []nftmodel.EndpointElement{
			{Lo: 4293030000, Hi: 4293031259, To: ep1, Note: "svc"},
			{Lo: 4293031260, Hi: 4293031260, To: ep2},
			{Lo: 10000, Hi: 12519, To: ep2, Note: "other"},
		}})
		t.AddSet("Service a.", &nftmodel.Set{Name: "affinity-a", Comment: "affinity a", Key: []nftmodel.KeyPart{nftmodel.AddrPart}, Dynamic: true, Timeout: 10800 * time.Second})
		rs.Tables = append(rs.Tables, t)
	}
	return rs
}

// synthModel is a ruleset in render's layout with n service chains, a
// verdict map and a set of n elements each, and an anonymous set of
// ranges prefixes: big enough to be read in pieces and to need several
// netlink messages per set.
func synthModel(n, ranges int) *nftmodel.Ruleset {
	t := &nftmodel.Table{Family: nftmodel.IPv4, Name: TableName}
	t.AddChain("", &nftmodel.Chain{Name: "nat-prerouting",
		Hook:  &nftmodel.Hook{Type: nftmodel.NAT, Hook: nftmodel.Prerouting, Priority: nftmodel.PriorityDstNAT},
		Rules: []nftmodel.Rule{{nftmodel.Verdict{Kind: nftmodel.Jump, Chain: "services"}}}})
	t.AddChain("", &nftmodel.Chain{Name: "services", Rules: []nftmodel.Rule{{nftmodel.VMap{Key: nftmodel.KeyDAddrProtoPort, Map: "service-ips"}}}})
	var fw []netip.Prefix
	for i := range ranges {
		fw = append(fw, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i / 256), byte(i % 256), 0}), 25))
	}
	t.AddChain("", &nftmodel.Chain{Name: "firewall", Rules: []nftmodel.Rule{
		{nftmodel.AddrMatch{Field: nftmodel.SAddr, Neq: true, Prefixes: fw, Braces: true}, nftmodel.Verdict{Kind: nftmodel.Drop}}}})
	ips := &nftmodel.Set{Name: "service-ips", Key: []nftmodel.KeyPart{nftmodel.AddrPart, nftmodel.ProtoPart, nftmodel.ServicePart}, Verdicts: true}
	hairpin := &nftmodel.Set{Name: "hairpin", Key: []nftmodel.KeyPart{nftmodel.AddrPart, nftmodel.AddrPart}}
	for i := range n {
		ips.Elements = append(ips.Elements, nftmodel.Element{
			Key:     nftmodel.Key{Addr: netip.AddrFrom4([4]byte{10, 96, byte(i / 256), byte(i % 256)}), Proto: nftmodel.TCP, Port: 80},
			Verdict: nftmodel.Verdict{Kind: nftmodel.Goto, Chain: fmt.Sprintf("service-%d", i)}})
		hairpin.Elements = append(hairpin.Elements, nftmodel.Element{Key: nftmodel.Key{Addr: netip.AddrFrom4([4]byte{10, 244, byte(i / 256), byte(i % 256)})}})
	}
	t.AddSet("", ips)
	t.AddSet("", hairpin)
	mark := nftmodel.MarkSet{Op: nftmodel.MarkOr, Value: 0x4000}
	for i := range n {
		hi, lo := byte(i/256), byte(i%256)
		t.AddChain(fmt.Sprintf("service %d", i), &nftmodel.Chain{Name: fmt.Sprintf("service-%d", i), Rules: []nftmodel.Rule{
			{nftmodel.AddrMatch{Field: nftmodel.DAddr, Prefixes: []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 96, hi, lo}), 32)}},
				nftmodel.AddrMatch{Field: nftmodel.SAddr, Neq: true, Prefixes: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}}, mark},
			{nftmodel.NumgenMatch{Mod: 2, Value: 0}, nftmodel.ProtoMatch{Proto: nftmodel.TCP}, nftmodel.DNAT{To: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 244, hi, lo}), 8080)}},
			{nftmodel.ProtoMatch{Proto: nftmodel.TCP}, nftmodel.DNAT{To: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 245, hi, lo}), 8080)}},
		}})
	}
	t6 := &nftmodel.Table{Family: nftmodel.IPv6, Name: TableName}
	t6.AddChain("", &nftmodel.Chain{Name: "c", Rules: []nftmodel.Rule{{nftmodel.Verdict{Kind: nftmodel.Drop}}}})
	return &nftmodel.Ruleset{Tables: []*nftmodel.Table{t, t6}}
}
