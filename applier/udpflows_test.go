package applier

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"netspec.dev/netspec/applier/conntrack"
	"netspec.dev/netspec/plan"
)

// TestStaleUDPFlowsRandomEdits: the stale flows worked out from the
// Services that may have changed (udpChanged) are those worked out from
// every Service of both plans, over random edits of the kinds a reload
// makes: one Service's endpoints or frontends anew (the rest shared with
// the last plan, as the compiler's memo hands them on), a Service gone or
// added, the node's addresses changed, Services in another order.
func TestStaleUDPFlowsRandomEdits(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	addr := func(net byte) netip.Addr {
		return netip.AddrFrom4([4]byte{10, net, byte(rng.IntN(4)), byte(1 + rng.IntN(8))})
	}
	// A frontend is one Service's (the compiler rejects two on one
	// address, port and protocol): the Service's number is in its
	// addresses and node ports.
	frontend := func(net byte, i int) netip.Addr { return netip.AddrFrom4([4]byte{10, net, byte(i >> 8), byte(i)}) }
	ports := func(i int) []plan.Port {
		var out []plan.Port
		for j := range 1 + rng.IntN(2) {
			proto := []string{"UDP", "TCP", "SCTP"}[rng.IntN(3)]
			p := plan.Port{Name: fmt.Sprint("p", j), Protocol: proto, Port: uint16(53 + j)}
			if rng.IntN(2) == 0 {
				p.NodePort = uint16(30000 + 2*i + j)
			}
			for k := range rng.IntN(4) {
				p.Endpoints = append(p.Endpoints, plan.Endpoint{IP: addr(1), Port: uint16(5353 + rng.IntN(2)), Ready: true})
				if rng.IntN(4) > 0 {
					p.Cluster = append(p.Cluster, k)
				}
				if rng.IntN(2) == 0 {
					p.External = append(p.External, k)
				}
			}
			out = append(out, p)
		}
		return out
	}
	service := func(i int) plan.Service {
		s := plan.Service{Namespace: "ns", Name: fmt.Sprint("svc-", i), ClusterIPs: []netip.Addr{frontend(96, i)}, Ports: ports(i)}
		if rng.IntN(3) == 0 {
			s.ExternalIPs = []netip.Addr{frontend(200, i)}
		}
		if rng.IntN(3) == 0 {
			s.LoadBalancerIPs = []netip.Addr{frontend(201, i)}
		}
		return s
	}
	number := func(s *plan.Service) (i int) {
		fmt.Sscanf(s.Name, "svc-%d", &i)
		return i
	}
	all := func(p *plan.Plan) []*plan.Service {
		var out []*plan.Service
		for i := range p.Services {
			out = append(out, &p.Services[i])
		}
		return out
	}
	// want is staleFlows over every Service.
	want := func(old, new *plan.Plan) []conntrack.Flow {
		keep := map[conntrack.Flow]bool{}
		for _, f := range flowsOf(all(new), new.Node.IPs) {
			keep[f] = true
		}
		var stale []conntrack.Flow
		for _, f := range flowsOf(all(old), old.Node.IPs) {
			if !keep[f] {
				stale = append(stale, f)
				keep[f] = true
			}
		}
		return stale
	}

	cur := &plan.Plan{Node: plan.Node{IPs: []netip.Addr{netip.MustParseAddr("192.168.0.1")}}}
	for i := range 20 {
		cur.Services = append(cur.Services, service(i))
	}
	next := 20
	edits := map[string]int{}
	for step := range 2000 {
		nxt := &plan.Plan{Node: cur.Node, Services: slices.Clone(cur.Services)}
		var edit string
		switch k := rng.IntN(10); {
		case k < 5 && len(nxt.Services) > 0:
			edit = "endpoints"
			s := &nxt.Services[rng.IntN(len(nxt.Services))]
			s.Ports = ports(number(s))
		case k == 5 && len(nxt.Services) > 0:
			edit = "frontends"
			s := &nxt.Services[rng.IntN(len(nxt.Services))]
			// One kind of address, a new slice, at one of two
			// addresses of the Service's own.
			i, net := number(s), byte(rng.IntN(2))
			switch rng.IntN(3) {
			case 0:
				s.ClusterIPs = []netip.Addr{frontend(96+net, i)}
			case 1:
				s.ExternalIPs = []netip.Addr{frontend(200+net, i)}
			default:
				s.LoadBalancerIPs = []netip.Addr{frontend(202+net, i)}
			}
		case k == 6 && len(nxt.Services) > 0:
			edit = "gone"
			i := rng.IntN(len(nxt.Services))
			nxt.Services = slices.Delete(nxt.Services, i, i+1)
		case k == 7:
			edit = "added"
			nxt.Services = append(nxt.Services, service(next))
			next++
		case k == 8:
			edit = "node addresses"
			nxt.Node.IPs = []netip.Addr{netip.AddrFrom4([4]byte{192, 168, 0, byte(1 + rng.IntN(2))})}
		default:
			edit = "order"
			rng.Shuffle(len(nxt.Services), func(i, j int) { nxt.Services[i], nxt.Services[j] = nxt.Services[j], nxt.Services[i] })
		}
		edits[edit]++
		if diff := cmp.Diff(want(cur, nxt), staleFlows(cur, nxt), cmpopts.EquateComparable(netip.AddrPort{})); diff != "" {
			t.Fatalf("step %d (%s): stale flows (-every Service +changed ones):\n%s", step, edit, diff)
		}
		cur = nxt
	}
	for _, e := range []string{"endpoints", "frontends", "gone", "added", "node addresses", "order"} {
		if edits[e] == 0 {
			t.Errorf("no %s edit in the random steps", e)
		}
	}
}
