package explain

import (
	"maps"
	"net/netip"
	"slices"
	"testing"

	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/render/nftmodel"
)

const (
	webChain  = "service-KHN6ECMT-shop/web/tcp/http"
	cartChain = "service-242WI43H-shop/cart/tcp/http"
	webExt    = "external-KHN6ECMT-shop/web/tcp/http"
	webAff    = "affinity-IK6J7D47-shop/web/tcp/http__10.244.1.70/8080"
)

var (
	addrProtoPort = []nftmodel.KeyPart{nftmodel.AddrPart, nftmodel.ProtoPart, nftmodel.ServicePart}
	protoPort     = []nftmodel.KeyPart{nftmodel.ProtoPart, nftmodel.ServicePart}
)

// key is the key of a frontend: address (or none), protocol, port.
func key(addr string, proto nftmodel.Proto, port uint16) nftmodel.Key {
	k := nftmodel.Key{Proto: proto, Port: port}
	if addr != "" {
		k.Addr = netip.MustParseAddr(addr)
	}
	return k
}

// TestPickWindows: the ranges each chain picks from, read from the
// nftables model, in each family's table.
func TestPickWindows(t *testing.T) {
	const web = "service-KHN6ECMT-shop/web/tcp/http"
	pick := func(mod, off uint32, m string) nftmodel.Rule {
		return nftmodel.Rule{nftmodel.ProtoMatch{Proto: nftmodel.TCP}, nftmodel.DNATMap{Mod: mod, Offset: off, Map: m}}
	}
	v4 := &nftmodel.Table{Family: nftmodel.IPv4, Name: "netspec"}
	v4.AddChain("", &nftmodel.Chain{Name: web, Rules: []nftmodel.Rule{pick(2520, 975480000, "endpoints-62")}})
	v4.AddChain("", &nftmodel.Chain{Name: "services", Rules: []nftmodel.Rule{{nftmodel.Verdict{Kind: nftmodel.Goto, Chain: web}}}})
	v6 := &nftmodel.Table{Family: nftmodel.IPv6, Name: "netspec"}
	v6.AddChain("", &nftmodel.Chain{Name: web, Rules: []nftmodel.Rule{pick(12, 100, "endpoints-01")}})
	got := map[string][]PickWindow{}
	for _, t := range []*nftmodel.Table{v4, v6} {
		for _, c := range t.Chains() {
			if w := pickWindows(t.Family.Keyword(), c); w != nil {
				got[t.Family.Keyword()+" "+c.Name] = w
			}
		}
	}
	want := map[string][]PickWindow{
		"ip service-KHN6ECMT-shop/web/tcp/http":  {{Family: "ip", Set: "endpoints-62", Lo: 975480000, Hi: 975482519}},
		"ip6 service-KHN6ECMT-shop/web/tcp/http": {{Family: "ip6", Set: "endpoints-01", Lo: 100, Hi: 111}},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, w := range want {
		if !slices.Equal(got[k], w) {
			t.Errorf("%s: got %v, want %v", k, got[k], w)
		}
	}
}

// TestReachChains: the chains a frontend's packets go through are read
// from the model: from the verdict map elements keyed by it, through the
// chains they jump or go to, with the sets those chains update; a
// cluster IP does not reach the external chain a node port starts in.
func TestReachChains(t *testing.T) {
	tcp := nftmodel.TCP
	tb := &nftmodel.Table{Family: nftmodel.IPv4, Name: "netspec"}
	tb.AddSet("", &nftmodel.Set{Name: "service-ips", Key: addrProtoPort, Verdicts: true, Elements: []nftmodel.Element{
		{Key: key("10.96.0.10", tcp, 80), Verdict: nftmodel.GoTo(webChain)},
		{Key: key("10.96.0.20", tcp, 80), Verdict: nftmodel.GoTo(cartChain)},
	}})
	tb.AddSet("", &nftmodel.Set{Name: "service-nodeports", Key: protoPort, Verdicts: true, Elements: []nftmodel.Element{
		{Key: key("", tcp, 30080), Verdict: nftmodel.GoTo(webExt)},
	}})
	tb.AddChain("", &nftmodel.Chain{Name: "services", Rules: []nftmodel.Rule{{nftmodel.VMap{Key: nftmodel.KeyDAddrProtoPort, Map: "service-ips"}}}})
	tb.AddChain("", &nftmodel.Chain{Name: webExt, Rules: []nftmodel.Rule{{nftmodel.Verdict{Kind: nftmodel.Jump, Chain: "mark-for-masquerade"}}, {nftmodel.GoTo(webChain)}}})
	tb.AddChain("", &nftmodel.Chain{Name: "mark-for-masquerade"})
	tb.AddChain("", &nftmodel.Chain{Name: webChain, Rules: []nftmodel.Rule{{nftmodel.Update{Set: webAff, Key: nftmodel.KeySAddr}, nftmodel.ProtoMatch{Proto: tcp}, nftmodel.DNATMap{Mod: 2520, Offset: 975480000, Map: "endpoints-62"}}}})
	tb.AddChain("", &nftmodel.Chain{Name: cartChain})
	keys := func(m map[string]bool) []string { return slices.Sorted(maps.Keys(m)) }
	cluster := &Frontend{Family: "ip", Addr: netip.MustParseAddr("10.96.0.10"), Port: 80, Protocol: "tcp"}
	if got, want := keys(reachChains(tb, cluster.Keyed)), []string{webAff, webChain}; !slices.Equal(got, want) {
		t.Errorf("cluster IP: %q, want %q", got, want)
	}
	np := &Frontend{Family: "ip", Addr: netip.MustParseAddr("192.168.10.11"), Port: 30080, Protocol: "tcp", NodePort: true}
	if got, want := keys(reachChains(tb, np.Keyed)), []string{webAff, webExt, "mark-for-masquerade", webChain}; !slices.Equal(got, want) {
		t.Errorf("node port: %q, want %q", got, want)
	}
	all := reachChains(tb, func(nftmodel.Key) bool { return true })
	if all["services"] || !all[cartChain] || !all[webExt] {
		t.Errorf("port chains: %q: want every Service port's, not services", keys(all))
	}
	rs := &nftmodel.Ruleset{Tables: []*nftmodel.Table{tb}}
	p := &plan.Plan{}
	fe := FrontendOf(p, plan.Packet{Dst: netip.MustParseAddr("10.96.0.10"), Port: 80, Protocol: "TCP"}, rs)
	if want := []PickWindow{{Family: "ip", Set: "endpoints-62", Lo: 975480000, Hi: 975482519}}; !slices.Equal(fe.Picks, want) {
		t.Errorf("FrontendOf: picks %v, want %v", fe.Picks, want)
	}
}

// TestFrontendElement: an element concerns a frontend when keyed by it,
// when its verdict goes to a chain the frontend reaches, when its comment
// names the frontend's port, or when it is in a range the frontend's
// chains pick from; an element that does not decode concerns none.
func TestFrontendElement(t *testing.T) {
	cluster := &Frontend{
		Family: "ip", Addr: netip.MustParseAddr("10.96.0.10"), Port: 80, Protocol: "tcp",
		Service: "shop/web", PortID: "http",
		Names: map[string]bool{webChain: true, webAff: true},
		Picks: []PickWindow{{Family: "ip", Set: "endpoints-62", Lo: 975480000, Hi: 975482519}},
	}
	nodePort := &Frontend{
		Family: "ip", Addr: netip.MustParseAddr("192.168.10.11"), Port: 30080, Protocol: "tcp", NodePort: true,
		Service: "shop/web", PortID: "http",
		Names: map[string]bool{webExt: true, webChain: true},
	}
	tcp, udp := nftmodel.TCP, nftmodel.UDP
	ep := func(lo uint32) *nftmodel.EndpointElement {
		return &nftmodel.EndpointElement{Lo: lo, Hi: lo, To: netip.MustParseAddrPort("10.244.1.5:8080")}
	}
	for _, tc := range []struct {
		name string
		fe   *Frontend
		set  string
		el   *nftmodel.Element
		ep   *nftmodel.EndpointElement
		want bool
	}{
		{name: "keyed by the cluster IP", fe: cluster, set: "service-ips", el: &nftmodel.Element{Key: key("10.96.0.10", tcp, 80), Verdict: nftmodel.GoTo(webChain)}, want: true},
		{name: "keyed by the cluster IP, no verdict", fe: cluster, set: "cluster-frontends", el: &nftmodel.Element{Key: key("10.96.0.10", tcp, 80)}, want: true},
		{name: "another port", fe: cluster, set: "cluster-frontends", el: &nftmodel.Element{Key: key("10.96.0.10", tcp, 8080)}},
		{name: "another protocol", fe: cluster, set: "cluster-frontends", el: &nftmodel.Element{Key: key("10.96.0.10", udp, 80)}},
		{name: "the address alone is no cluster IP's key", fe: cluster, set: "cluster-ips", el: &nftmodel.Element{Key: key("10.96.0.10", 0, 0)}},
		{name: "another key going to the port's chain", fe: cluster, set: "service-ips", el: &nftmodel.Element{Key: key("10.96.0.77", tcp, 80), Verdict: nftmodel.GoTo(webChain)}, want: true},
		{name: "another key going to another chain", fe: cluster, set: "service-ips", el: &nftmodel.Element{Key: key("10.96.0.100", tcp, 80), Verdict: nftmodel.GoTo(cartChain)}},
		{name: "a comment naming the port", fe: cluster, set: "no-endpoint-services", el: &nftmodel.Element{Key: key("10.96.0.11", tcp, 80), Comment: "shop/web:http", Verdict: nftmodel.GoTo("reject-chain")}, want: true},
		{name: "a comment naming another port", fe: cluster, set: "no-endpoint-services", el: &nftmodel.Element{Key: key("10.96.0.12", tcp, 80), Comment: "shop/web:https", Verdict: nftmodel.GoTo("reject-chain")}},
		{name: "an endpoint the port's chain picks", fe: cluster, set: "endpoints-62", ep: ep(975482519), want: true},
		{name: "an endpoint past the window", fe: cluster, set: "endpoints-62", ep: ep(975482520)},
		{name: "an endpoint of another map", fe: cluster, set: "endpoints-63", ep: ep(975480000)},
		{name: "an element that does not decode", fe: cluster, set: "service-ips"},
		{name: "the node port's protocol and port", fe: nodePort, set: "service-nodeports", el: &nftmodel.Element{Key: key("", tcp, 30080), Verdict: nftmodel.GoTo(webExt)}, want: true},
		{name: "another node port", fe: nodePort, set: "service-nodeports", el: &nftmodel.Element{Key: key("", tcp, 30081), Verdict: nftmodel.GoTo("external-AAAAAAAA-shop/cart/tcp/http")}},
		{name: "the node's address", fe: nodePort, set: "nodeport-ips", el: &nftmodel.Element{Key: key("192.168.10.11", 0, 0)}, want: true},
		{name: "the node's address as a /32", fe: nodePort, set: "nodeport-ips", el: &nftmodel.Element{Key: nftmodel.Key{Addr: netip.MustParseAddr("192.168.10.11"), Bits: 32}}, want: true},
		{name: "a prefix holding the node's address", fe: nodePort, set: "nodeport-ips", el: &nftmodel.Element{Key: nftmodel.Key{Addr: netip.MustParseAddr("192.168.10.11"), Bits: 24}}},
		{name: "a node port is not keyed by address, protocol and port", fe: nodePort, set: "service-ips", el: &nftmodel.Element{Key: key("192.168.10.11", tcp, 30080), Verdict: nftmodel.GoTo(cartChain)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.fe.Element(tc.set, tc.el, tc.ep); got != tc.want {
				t.Errorf("Element = %t, want %t", got, tc.want)
			}
		})
	}
}
