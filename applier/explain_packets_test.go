package applier_test

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/explain"
	"netspec.dev/netspec/internal/testnet"
	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/schema"
)

// TestExplainPackets proves that `netspec explain` cannot drift from the
// rules: each example tree (examples/basic, examples/kitchen-sink) is
// compiled for node-1 (kitchen-sink also for node-3, where its Local
// Services have no endpoint) and installed by the applier, and for every frontend
// of every Service of that plan (each port on each cluster IP, external IP
// and LoadBalancer IP, each node port on each node-port address), real
// packets are sent and the outcome is checked against what explain
// (plan.Trace) says:
//
//   - dnat: over 20 connections per endpoint listed, every listed endpoint
//     answers and no other server does (with session affinity: the answers
//     come from the listed endpoints only, as affinity keeps the client on
//     one); with masquerade the endpoint sees an address that is not the
//     client's, without it the client's own address;
//   - reject: the first connection is refused (RST or ICMP unreachable)
//     within refusedRetryWait;
//   - drop: one connection gets no answer within dropWait (the answer
//     that must not come is waited for that long).
//
// The client sends from explain's default source (198.51.100.10 or
// 2001:db8::10, inside the examples' loadBalancerSourceRanges); a
// LoadBalancer frontend with source ranges is also tried from 192.0.2.7,
// outside them and from the node itself (its first IPv4 address), and the IPv4 external frontends of Services with
// externalTrafficPolicy Local from 10.244.250.10, a pod address (kube-proxy's
// short-circuit, which internalTrafficPolicy Local does not narrow). Topology:
//
//	client ── node ── upstream (drops: the route of un-DNATed traffic)
//	             └── one namespace per endpoint address of the plan
//
// Every endpoint address of the plan, of whatever node, is linked to
// the node directly (what the verdict is does not depend on where an
// endpoint runs), with a server on each of its ports that answers
// "IP:PORT CLIENT-IP"; endpoints that are not ready answer too, so a
// packet sent to one would show.
//
// Left out: SCTP frontends (kitchen-sink's telecom/diameter), as the
// test's clients and servers are Go's net package, which has no SCTP.
// Headless and ExternalName Services have no frontends. kitchen-sink's
// shop/storage, which another proxy serves (service-proxy-name), has its
// cluster IP tried: explain says drop, and no endpoint may answer.
func TestExplainPackets(t *testing.T) {
	testnet.Require(t, "nft")
	for _, c := range []struct{ example, node string }{
		{"basic", "node-1"},
		{"kitchen-sink", "node-1"},
		// node-3 has no endpoint of edge/ingress and edge/gateway-local:
		// their externalTrafficPolicy Local drops there.
		{"kitchen-sink", "node-3"},
	} {
		t.Run(c.example+"/"+c.node, func(t *testing.T) {
			t.Parallel()
			runExplainPackets(t, filepath.Join("..", "examples", c.example), c.node)
		})
	}
}

const (
	explainClient  = "198.51.100.10" // explain.DefaultSource of IPv4
	explainClient6 = "2001:db8::10"  // explain.DefaultSource of IPv6
	explainDenied  = "192.0.2.7"     // outside every loadBalancerSourceRanges of the examples
	explainPod     = "10.244.250.10" // in the examples' pod CIDR, on no node: kube-proxy's short-circuit
	explainGW      = "169.254.0.1"   // node-1's address on every endpoint link
	explainGW6     = "fd00:ffff::1"
)

func runExplainPackets(t *testing.T, dir, nodeName string) {
	tree, err := schema.Load(dir, schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	checked := compiler.Validate(tree.Objects, nil, tree)
	if diags := append(tree.Diags, checked.Diags...); diags.Errors() > 0 {
		t.Fatalf("the tree %s is invalid:\n%v", dir, diags)
	}
	p, err := compiler.Compile(tree.Objects, checked, nodeName)
	if err != nil {
		t.Fatal(err)
	}
	if got := explain.DefaultSource(netip.MustParseAddr("10.0.0.1")).String(); got != explainClient {
		t.Fatalf("explain's default IPv4 source is %s, the test's client %s", got, explainClient)
	}
	if got := explain.DefaultSource(netip.MustParseAddr("fd00::1")).String(); got != explainClient6 {
		t.Fatalf("explain's default IPv6 source is %s, the test's client %s", got, explainClient6)
	}

	n := testnet.New(t, "explain")
	client, node, upstream := n.NS("client"), n.NS(nodeName), n.NS("upstream")
	nodeAddrs := []string{"198.51.100.1/24", "192.0.2.1/24", "2001:db8::1/64"}
	for _, ip := range p.Node.IPs {
		nodeAddrs = append(nodeAddrs, netip.PrefixFrom(ip, ip.BitLen()).String())
	}
	nodeAddrs = append(nodeAddrs, "10.244.250.1/24")
	testnet.Link(client, []string{explainClient + "/24", explainDenied + "/24", explainPod + "/24", explainClient6 + "/64"}, node, nodeAddrs)
	client.Route("default", "198.51.100.1")
	client.Route("default", "2001:db8::1")
	testnet.Link(node, []string{"198.18.0.1/24", "fd00:198:18::1/64"}, upstream, []string{"198.18.0.2/24", "fd00:198:18::2/64"})
	node.Forwarding()
	node.Route("default", "198.18.0.2")
	node.Route("default", "fd00:198:18::2")
	// The rejects of one test share the ICMP rate limit towards the
	// client: off in the node, so that each is sent.
	node.Sysctl("net.ipv4.icmp_ratelimit", "0")
	node.Sysctl("net.ipv6.icmp.ratelimit", "0")

	// One namespace per endpoint address, a server per port.
	ports := map[netip.Addr][]string{}
	for _, s := range p.Services {
		for _, pt := range s.Ports {
			for _, e := range pt.Endpoints {
				if a := e.AddrPort().String(); !slices.Contains(ports[e.IP], a) {
					ports[e.IP] = append(ports[e.IP], a)
				}
			}
		}
	}
	addrs := make([]netip.Addr, 0, len(ports))
	for a := range ports {
		addrs = append(addrs, a)
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	epNS := map[netip.Addr]*testnet.NS{}
	for i, a := range addrs {
		ep := n.NS(fmt.Sprintf("ep%d", i))
		epNS[a] = ep
		gw, bits := explainGW, 32
		if a.Is6() {
			gw, bits = explainGW6, 128
		}
		nodeDev, epDev := testnet.Link(node, []string{netip.PrefixFrom(netip.MustParseAddr(gw), bits).String()}, ep, []string{netip.PrefixFrom(a, bits).String()})
		node.IP("route replace " + netip.PrefixFrom(a, bits).String() + " dev " + nodeDev)
		ep.IP("route replace "+gw+" dev "+epDev, "route replace default via "+gw+" dev "+epDev)
		for _, ap := range ports[a] {
			ep.Serve(t, ap, ap)
		}
	}

	nodeInstaller(false)(t, node)(t, p)

	kinds, verdicts := map[string]int{}, map[string]int{}
	left, shortCircuits, fromNode := 0, 0, 0
	for i := range p.Services {
		s := &p.Services[i]
		for _, pk := range explain.Frontends(p, s) {
			if pk.Protocol == "SCTP" {
				left++
				continue
			}
			pk.Src = explain.DefaultSource(pk.Dst)
			x := explain.PacketWith(p, tree.Objects, pk, explain.Options{})
			kinds[x.Frontend]++
			verdicts[x.Verdict]++
			checkExplained(t, client, s, x, "")
			if x.Frontend == "LoadBalancer IP" && len(s.SourceRanges) > 0 && pk.Dst.Is4() {
				pk.Src = netip.MustParseAddr(explainDenied)
				x := explain.PacketWith(p, tree.Objects, pk, explain.Options{})
				if x.Verdict != plan.ActionDrop {
					t.Errorf("%s from %s: explain says %s, want drop (outside loadBalancerSourceRanges %v)", x.To, explainDenied, x.Verdict, s.SourceRanges)
				}
				checkExplained(t, client, s, x, explainDenied)
			}
			if x.Frontend == "LoadBalancer IP" && len(s.SourceRanges) > 0 && pk.Dst.Is4() {
				// From the node itself: the source ranges apply to its
				// own connections too (kube-proxy checks in output).
				pk.Src, pk.FromLocal = nodeIP4(t, p), true
				x := explain.PacketWith(p, tree.Objects, pk, explain.Options{})
				fromNode++
				checkExplained(t, node, s, x, pk.Src.String())
				pk.FromLocal = false
			}
			if x.Frontend != "cluster IP" && s.ExternalLocal && pk.Dst.Is4() {
				// From a pod: externalTrafficPolicy Local's short-circuit.
				pk.Src = netip.MustParseAddr(explainPod)
				x := explain.PacketWith(p, tree.Objects, pk, explain.Options{})
				shortCircuits++
				checkExplained(t, client, s, x, explainPod)
			}
		}
	}
	t.Logf("frontends checked by kind: %v, by verdict: %v; from a pod, to external frontends under policy Local: %d; from the node, to LoadBalancer IPs with source ranges: %d; SCTP frontends left out: %d", kinds, verdicts, shortCircuits, fromNode, left)

	// Hairpin: from an endpoint to its Service's cluster IP, only the
	// packets DNATed back to that endpoint are masqueraded.
	hairpins := 0
	for i := range p.Services {
		s := &p.Services[i]
		for _, pk := range explain.Frontends(p, s) {
			if pk.Protocol != "TCP" || s.AffinitySeconds != 0 {
				continue
			}
			pk.Src = explain.DefaultSource(pk.Dst)
			if x := explain.PacketWith(p, tree.Objects, pk, explain.Options{}); x.Frontend != "cluster IP" || x.Verdict != plan.ActionDNAT || len(x.Targets) < 2 {
				continue
			}
			pk.Src = explain.PacketWith(p, tree.Objects, pk, explain.Options{}).Targets[0].Addr()
			x := explain.PacketWith(p, tree.Objects, pk, explain.Options{})
			if x.Masquerade || len(x.Hairpin) == 0 {
				t.Errorf("%s/%s from its endpoint %s: masquerade=%v hairpin=%v, want hairpin only", x.To, x.Protocol, pk.Src, x.Masquerade, x.Hairpin)
				continue
			}
			checkHairpin(t, epNS[pk.Src], x)
			hairpins++
			break
		}
	}
	if strings.HasSuffix(dir, "kitchen-sink") && hairpins == 0 {
		t.Errorf("kitchen-sink: no hairpin was checked")
	}
	if kinds["cluster IP"] == 0 {
		t.Errorf("no cluster IP frontend in %s", dir)
	}
	if nodeName == "node-3" && verdicts[plan.ActionDrop] == 0 {
		t.Errorf("kitchen-sink on node-3: no frontend drops, yet its Local Services have no endpoint there")
	}
	if strings.HasSuffix(dir, "kitchen-sink") {
		for _, k := range []string{"cluster IP", "external IP", "LoadBalancer IP", "node port"} {
			if kinds[k] == 0 {
				t.Errorf("kitchen-sink: no %s frontend was checked", k)
			}
		}
		if shortCircuits == 0 {
			t.Errorf("kitchen-sink: no external frontend under policy Local was tried from a pod")
		}
		if fromNode == 0 {
			t.Errorf("kitchen-sink: no LoadBalancer IP with source ranges was tried from the node")
		}
	}
}

// checkExplained sends packets to the explanation's destination from the
// client (from src, "" for the default) and checks what happens against
// the explanation's verdict.
func checkExplained(t *testing.T, client *testnet.NS, s *plan.Service, x *explain.Explanation, src string) {
	t.Helper()
	what := fmt.Sprintf("%s/%s from %s (Service %s, %s)", x.To, x.Protocol, x.From, s.Key(), x.Frontend)
	dial := func(wait time.Duration) string {
		if x.Protocol == "UDP" {
			from := ""
			if src != "" {
				from = src + ":0"
			}
			return client.DialUDPFrom(from, x.To.String(), wait)
		}
		return client.DialTCPFrom(src, x.To.String(), wait)
	}
	switch x.Verdict {
	case plan.ActionDNAT:
		var want []string
		for _, e := range x.Targets {
			want = append(want, e.String())
		}
		answers := dials(20*len(want), func() string { return dial(answerWait) })
		count, sources := backends(t, what, answers, want...)
		if s.AffinitySeconds == 0 {
			allSeen(t, what, count, 1, want...)
		} else if len(count) != 1 {
			t.Errorf("%s: session affinity, yet %d endpoints answered: %v", what, len(count), count)
		}
		client := x.From.String()
		for seen := range sources {
			if x.Masquerade && seen == client {
				t.Errorf("%s: explain says masqueraded, the endpoint saw the client's own address %s", what, seen)
			}
			if !x.Masquerade && seen != client {
				t.Errorf("%s: explain says not masqueraded, the endpoint saw %s instead of the client's %s", what, seen, client)
			}
		}
	case plan.ActionReject:
		if got := dial(refusedRetryWait); got != "refused" {
			t.Errorf("%s: explain says reject (%s), got %q", what, causeOf(x), got)
		}
	case plan.ActionDrop:
		if got := dial(dropWait); got != "timeout" {
			t.Errorf("%s: explain says drop (%s), got %q", what, causeOf(x), got)
		}
	default:
		t.Errorf("%s: explain says %s for a frontend of the plan (%s)", what, x.Verdict, causeOf(x))
	}
}

// checkHairpin dials the explanation's destination from its source, an
// endpoint of the Service, and checks that the endpoints listed in Hairpin
// (the source itself) see a masqueraded address and the other targets the
// source's own.
func checkHairpin(t *testing.T, from *testnet.NS, x *explain.Explanation) {
	t.Helper()
	what := fmt.Sprintf("%s/%s from its endpoint %s", x.To, x.Protocol, x.From)
	var want []string
	for _, e := range x.Targets {
		want = append(want, e.String())
	}
	seen := map[string]int{}
	for _, a := range dials(20*len(want), func() string { return from.DialTCPFrom("", x.To.String(), answerWait) }) {
		f := strings.Fields(a)
		if len(f) != 2 || !slices.Contains(want, f[0]) {
			t.Errorf("%s: got %q, want an answer from one of %v", what, a, want)
			continue
		}
		seen[f[0]]++
		hairpin := slices.ContainsFunc(x.Hairpin, func(h netip.AddrPort) bool { return h.String() == f[0] })
		if hairpin && f[1] == x.From.String() {
			t.Errorf("%s: %s saw the source's own address %s, yet explain says hairpin: masqueraded", what, f[0], f[1])
		}
		if !hairpin && f[1] != x.From.String() {
			t.Errorf("%s: %s saw %s, yet explain says only the hairpin endpoint is masqueraded (the source is %s)", what, f[0], f[1], x.From)
		}
	}
	allSeen(t, what, seen, 1, want...)
}

// nodeIP4 is the node's first IPv4 address, a process on the node's
// source.
func nodeIP4(t *testing.T, p *plan.Plan) netip.Addr {
	t.Helper()
	for _, a := range p.Node.IPs {
		if a.Is4() {
			return a
		}
	}
	t.Fatalf("node %s has no IPv4 address", p.Node.Name)
	return netip.Addr{}
}

// causeOf is the explanation's cause, for messages.
func causeOf(x *explain.Explanation) string {
	if x.Cause == nil {
		return "no cause given"
	}
	return x.Cause.Text
}
