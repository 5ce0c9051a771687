package nft

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"netspec.dev/netspec/applier/nft/encoding"
	"netspec.dev/netspec/render"
	"netspec.dev/netspec/render/nftmodel"
)

// modelForms is a ruleset with every rule form and element form render
// writes (see golden/*/*/nftables.nft), in both families.
func modelForms() *nftmodel.Ruleset {
	rs := &nftmodel.Ruleset{Comment: []string{"forms of nftmodel"}}
	for _, f := range nftmodel.Families {
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
		goTo := func(c string) nftmodel.Verdict { return nftmodel.Verdict{Kind: nftmodel.Goto, Chain: c} }
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
			{nftmodel.AddrMatch{Field: nftmodel.SAddr, Prefixes: []netip.Prefix{p("10.244.0.0/16", "fd00:244::/48")}}, goTo("svc")},
			{nftmodel.Lookup{Key: nftmodel.KeySAddr, Set: "pod-cidrs"}, goTo("svc")},
			{nftmodel.FibLocal{}, markOr},
			{nftmodel.FibLocal{}, goTo("svc")},
			{goTo("svc")},
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
			{Key: nftmodel.Key{Addr: a("10.96.0.10", "fd00:96::10"), Proto: nftmodel.TCP, Port: 80}, Verdict: goTo("svc")},
			{Key: reports, Verdict: goTo("check"), Comment: "shop/reports:http"},
			{Key: nftmodel.Key{Addr: a("10.96.0.12", "fd00:96::12"), Proto: nftmodel.UDP, Port: 53}, Verdict: nftmodel.Verdict{Kind: nftmodel.Drop}, Comment: "a \"b\""},
		}, Dropped: map[nftmodel.Key][]nftmodel.Verdict{reports: {{Kind: nftmodel.Drop}}}})
		t.AddSet("", &nftmodel.Set{Name: "vmp", Key: []nftmodel.KeyPart{nftmodel.ProtoPart, nftmodel.ServicePart}, Verdicts: true, Elements: []nftmodel.Element{
			{Key: nftmodel.Key{Proto: nftmodel.TCP, Port: 30080}, Verdict: goTo("ext")},
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

// TestModelEncodesAsParse: for every rule and element form, what the
// typed model encodes equals what Parse compiles from the text the model
// prints.
func TestModelEncodesAsParse(t *testing.T) {
	checkModelEqualsParse(t, modelForms())
}

// checkModelEqualsParse compares the model's encoding of every chain, rule,
// set and element with Parse of its text.
func checkModelEqualsParse(t *testing.T, m *nftmodel.Ruleset) {
	t.Helper()
	text := m.Text()
	rs, err := Parse(text)
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, text)
	}
	checkEncodeEqualsParse(t, Encode(m), rs)
	if len(rs.Tables) != len(m.Tables) {
		t.Fatalf("Parse: %d tables, the model has %d", len(rs.Tables), len(m.Tables))
	}
	for i, mt := range m.Tables {
		pt := rs.Tables[i]
		f := mt.Family
		if pt.Family != encoding.TableFamily(f) || pt.Name != mt.Name {
			t.Errorf("table %d: parsed %v %s, model %v %s", i, pt.Family, pt.Name, f, mt.Name)
			continue
		}
		enc := encoding.NewEncoder(f)
		chains := mt.Chains()
		if len(chains) != len(pt.Chains) {
			t.Errorf("table %s: %d chains parsed, %d in the model", f.Keyword(), len(pt.Chains), len(chains))
			continue
		}
		for j, mc := range chains {
			pc := pt.Chains[j]
			if pc.Name != mc.Name || len(pc.Rules) != len(mc.Rules) {
				t.Errorf("chain %d: parsed %s with %d rules, model %s with %d", j, pc.Name, len(pc.Rules), mc.Name, len(mc.Rules))
				continue
			}
			if (pc.Base == nil) != (mc.Hook == nil) {
				t.Errorf("chain %s: base chain parsed %v, model %v", mc.Name, pc.Base != nil, mc.Hook != nil)
			}
			for k, r := range mc.Rules {
				ex, anon := enc.Encode(r)
				pr := pc.Rules[k]
				if !reflect.DeepEqual(ex, pr.Exprs) {
					t.Errorf("%s chain %s rule %q:\nmodel %s\nparse %s", f.Keyword(), mc.Name, pr.Text, dumpExprs(ex), dumpExprs(pr.Exprs))
				}
				if (anon == nil) != (pr.Anon == nil) {
					t.Errorf("%s chain %s rule %q: anonymous set in the model %v, parsed %v", f.Keyword(), mc.Name, pr.Text, anon != nil, pr.Anon != nil)
				} else if anon != nil {
					if !reflect.DeepEqual(anon.Template, pr.Anon.Template) || !reflect.DeepEqual(anon.Elements, pr.Anon.Elements) || anon.At != pr.anonAt {
						t.Errorf("%s chain %s rule %q: anonymous set\nmodel %+v %+v at %d\nparse %+v %+v at %d", f.Keyword(), mc.Name, pr.Text,
							anon.Template, anon.Elements, anon.At, pr.Anon.Template, pr.Anon.Elements, pr.anonAt)
					}
				}
			}
		}
		sets := mt.Sets()
		if len(sets) != len(pt.Sets) {
			t.Errorf("table %s: %d sets parsed, %d in the model", f.Keyword(), len(pt.Sets), len(sets))
			continue
		}
		for j, ms := range sets {
			ps := pt.Sets[j]
			if ps.Name != ms.Name {
				t.Errorf("set %d: parsed %s, model %s", j, ps.Name, ms.Name)
				continue
			}
			if d := ms.Decl(f); d != ps.Decl {
				t.Errorf("set %s: declaration %q, parsed %q", ms.Name, d, ps.Decl)
			}
			if tmpl := encoding.SetTemplate(f, ms); !reflect.DeepEqual(tmpl, ps.Template) {
				t.Errorf("set %s: template\nmodel %+v\nparse %+v", ms.Name, tmpl, ps.Template)
			}
			all := encoding.SetElements(f, ms)
			if len(all) != len(ps.Elements) {
				t.Errorf("set %s: %d elements parsed, %d in the model", ms.Name, len(ps.Elements), len(all))
				continue
			}
			for k := range all {
				pe := ps.Elements[k]
				if txt := ms.ElementText(k); txt != pe.Text {
					t.Errorf("set %s: element %q, parsed %q", ms.Name, txt, pe.Text)
				}
				if !reflect.DeepEqual(all[k], pe.Elems) {
					t.Errorf("set %s element %q:\nmodel %s\nparse %s", ms.Name, pe.Text, dumpElems(all[k]), dumpElems(pe.Elems))
				}
			}
		}
	}
}

func dumpExprs(ex []expr.Any) string {
	var parts []string
	for _, e := range ex {
		parts = append(parts, fmt.Sprintf("%T%+v", e, e))
	}
	return strings.Join(parts, " ")
}

func dumpElems(els []nftables.SetElement) string {
	var parts []string
	for _, e := range els {
		s := fmt.Sprintf("{Key:%x IntervalEnd:%v Val:%x Comment:%q", e.Key, e.IntervalEnd, e.Val, e.Comment)
		if e.VerdictData != nil {
			s += fmt.Sprintf(" Verdict:%+v", *e.VerdictData)
		}
		parts = append(parts, s+"}")
	}
	return strings.Join(parts, " ")
}

// TestGoldenModelEncodesAsParse: for every golden plan, the model render
// builds prints the golden file byte for byte, and encodes, rule by rule
// and element by element, what Parse compiles from that file.
func TestGoldenModelEncodesAsParse(t *testing.T) {
	plans, err := filepath.Glob("../../golden/*/*/plan.json")
	if err != nil || len(plans) < 4 {
		t.Fatalf("found %d golden plans: %v", len(plans), err)
	}
	for _, path := range plans {
		dir := filepath.Dir(path)
		t.Run(nftcName(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			p, err := render.ParsePlanJSON(data)
			if err != nil {
				t.Fatal(err)
			}
			models := map[string]*nftmodel.Ruleset{"nftables.nft": render.NFTablesModel(p), "ipvs-nftables.nft": render.NFTablesIPVSModel(p)}
			for file, m := range models {
				want, err := os.ReadFile(filepath.Join(dir, file))
				if os.IsNotExist(err) {
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if got := m.Text(); string(got) != string(want) {
					t.Errorf("%s: the model's text differs from the golden file", file)
				}
				checkModelEqualsParse(t, m)
			}
		})
	}
}

// checkEncodeEqualsParse compares what Encode made of a model with what
// Parse made of its text, field by field (the texts and user data
// included: the diff and the batch use them all).
func checkEncodeEqualsParse(t *testing.T, got, want *Ruleset) {
	t.Helper()
	if len(got.Tables) != len(want.Tables) {
		t.Fatalf("Encode: %d tables, Parse %d", len(got.Tables), len(want.Tables))
	}
	for i, gt := range got.Tables {
		wt := want.Tables[i]
		if gt.Family != wt.Family || gt.Name != wt.Name || len(gt.Chains) != len(wt.Chains) || len(gt.Sets) != len(wt.Sets) {
			t.Errorf("table %d: Encode %v %s, %d chains, %d sets; Parse %v %s, %d chains, %d sets", i,
				gt.Family, gt.Name, len(gt.Chains), len(gt.Sets), wt.Family, wt.Name, len(wt.Chains), len(wt.Sets))
			continue
		}
		for j, gc := range gt.Chains {
			wc := wt.Chains[j]
			if gc.Name != wc.Name || gc.Text != wc.Text || !reflect.DeepEqual(gc.Base, wc.Base) || len(gc.Rules) != len(wc.Rules) {
				t.Errorf("chain %s: Encode %+v, Parse %+v", gc.Name, *gc, *wc)
				continue
			}
			for k, gr := range gc.Rules {
				wr := wc.Rules[k]
				if gr.Text != wr.Text || gr.anonAt != wr.anonAt || !reflect.DeepEqual(gr.Exprs, wr.Exprs) || !reflect.DeepEqual(gr.Anon, wr.Anon) {
					t.Errorf("chain %s rule %q: Encode %+v, Parse %+v", gc.Name, wr.Text, *gr, *wr)
				}
			}
		}
		for j, gs := range gt.Sets {
			ws := wt.Sets[j]
			if gs.Name != ws.Name || gs.Decl != ws.Decl || !reflect.DeepEqual(gs.Template, ws.Template) || !reflect.DeepEqual(gs.udata, ws.udata) || !reflect.DeepEqual(gs.Elements, ws.Elements) {
				t.Errorf("set %s: Encode and Parse differ:\nEncode %+v\nParse  %+v", gs.Name, *gs, *ws)
			}
		}
	}
}
