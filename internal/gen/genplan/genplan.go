// Package genplan loads and compiles generated trees (gentree) for
// benchmarks and tests that need big inputs: one place that knows how a
// tree becomes a Plan without the CLI.
package genplan

import (
	"cmp"
	"net/netip"
	"os"
	"slices"
	"testing"

	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/internal/gen/gentree"
	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/schema"
)

// Tree writes a generated tree of n Services with two pods each into a
// temporary directory, loads it and fails tb if it is not valid.
func Tree(tb testing.TB, n int) *schema.Tree {
	tb.Helper()
	dir, err := os.MkdirTemp("", "netspec-gen-")
	if err != nil {
		tb.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := gentree.Write(dir, gentree.Config{Services: n, PodsPerService: 2}); err != nil {
		tb.Fatal(err)
	}
	tr, err := schema.Load(dir, schema.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	if tr.Diags.Errors() > 0 {
		tb.Fatal(tr.Diags.Err())
	}
	return tr
}

// Plan compiles Tree(tb, n) for node.
func Plan(tb testing.TB, n int, node string) *plan.Plan {
	tb.Helper()
	tr := Tree(tb, n)
	checked := compiler.Validate(tr.Objects, nil, tr)
	if checked.Diags.Errors() > 0 {
		tb.Fatal(checked.Diags.Err())
	}
	p, err := compiler.Compile(tr.Objects, checked, node)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// WithExtraService returns a copy of p with one more Service,
// ns-1/svc-bench-extra: one TCP port 80 with two endpoints on pod IPs and
// a cluster IP that p does not use.
func WithExtraService(tb testing.TB, p *plan.Plan) *plan.Plan {
	tb.Helper()
	used := map[netip.Addr]bool{}
	for _, s := range p.Services {
		for _, ip := range s.ClusterIPs {
			used[ip] = true
		}
		for _, port := range s.Ports {
			for _, ep := range port.Endpoints {
				used[ep.IP] = true
			}
		}
	}
	vip := lastFree(tb, p.Cluster.ServiceCIDRs, used)
	used[vip] = true
	ep1 := lastFree(tb, p.Cluster.PodCIDRs, used)
	used[ep1] = true
	ep2 := lastFree(tb, p.Cluster.PodCIDRs, used)
	s := plan.Service{
		Namespace:       "ns-1",
		Name:            "svc-bench-extra",
		Type:            "ClusterIP",
		ClusterIPs:      []netip.Addr{vip},
		ExternalIPs:     []netip.Addr{},
		LoadBalancerIPs: []netip.Addr{},
		SourceRanges:    []netip.Prefix{},
		Ports: []plan.Port{{
			Name:     "http",
			Protocol: "TCP",
			Port:     80,
			Endpoints: []plan.Endpoint{
				{IP: minAddr(ep1, ep2), Port: 8080, Ready: true, Serving: true, NodeName: "node-1", Pod: "ns-1/svc-bench-extra-a"},
				{IP: maxAddr(ep1, ep2), Port: 8080, Ready: true, Serving: true, NodeName: "node-2", Pod: "ns-1/svc-bench-extra-b"},
			},
			Cluster:  []int{0, 1},
			External: []int{0, 1},
		}},
	}
	q := *p
	at := len(p.Services)
	for i, o := range p.Services {
		if cmp.Or(cmp.Compare(o.Namespace, s.Namespace), cmp.Compare(o.Name, s.Name)) > 0 {
			at = i
			break
		}
	}
	q.Services = slices.Insert(slices.Clone(p.Services), at, s)
	return &q
}

func minAddr(a, b netip.Addr) netip.Addr {
	if b.Less(a) {
		return b
	}
	return a
}

func maxAddr(a, b netip.Addr) netip.Addr {
	if a.Less(b) {
		return b
	}
	return a
}

// lastFree returns the highest IPv4 address of the first IPv4 prefix in
// cidrs that is not in used (and not the prefix's last address).
func lastFree(tb testing.TB, cidrs []netip.Prefix, used map[netip.Addr]bool) netip.Addr {
	tb.Helper()
	for _, c := range cidrs {
		if !c.Addr().Is4() {
			continue
		}
		c = c.Masked()
		b := c.Addr().As4()
		v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
		last := v | (1<<(32-c.Bits()) - 1)
		for a := last - 1; a > v; a-- {
			ip := netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)})
			if !used[ip] && ip.As4()[3] != 0 && ip.As4()[3] != 255 {
				return ip
			}
		}
	}
	tb.Fatalf("no free IPv4 address in %v", cidrs)
	return netip.Addr{}
}

// WithMovedEndpoint returns a copy of p in which the pod behind the first
// endpoint of Service ns-1/svc-1 was replaced by one on another IP: that
// endpoint's IP changes in every port of the Service.
func WithMovedEndpoint(tb testing.TB, p *plan.Plan) *plan.Plan {
	tb.Helper()
	k := slices.IndexFunc(p.Services, func(s plan.Service) bool { return s.Namespace == "ns-1" && s.Name == "svc-1" })
	if k < 0 || len(p.Services[k].Ports) == 0 || len(p.Services[k].Ports[0].Endpoints) == 0 {
		tb.Fatal("the plan has no Service ns-1/svc-1 with endpoints")
	}
	used := map[netip.Addr]bool{}
	for _, s := range p.Services {
		for _, port := range s.Ports {
			for _, ep := range port.Endpoints {
				used[ep.IP] = true
			}
		}
	}
	from := p.Services[k].Ports[0].Endpoints[0].IP
	to := lastFree(tb, p.Cluster.PodCIDRs, used)

	q := *p
	q.Services = slices.Clone(p.Services)
	s := &q.Services[k]
	s.Ports = slices.Clone(s.Ports)
	for j := range s.Ports {
		port := &s.Ports[j]
		eps := slices.Clone(port.Endpoints)
		for i := range eps {
			if eps[i].IP == from {
				eps[i].IP = to
				eps[i].Pod += "-moved"
			}
		}
		// Keep the endpoints sorted by IP and port, and the index lists
		// pointing at the same endpoints.
		order := make([]int, len(eps)) // order[new] = old
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int {
			return cmp.Or(eps[a].IP.Compare(eps[b].IP), cmp.Compare(eps[a].Port, eps[b].Port))
		})
		newAt := make([]int, len(eps))
		port.Endpoints = make([]plan.Endpoint, len(eps))
		for i, old := range order {
			port.Endpoints[i] = eps[old]
			newAt[old] = i
		}
		remap := func(idx []int) []int {
			out := make([]int, len(idx))
			for i, old := range idx {
				out[i] = newAt[old]
			}
			slices.Sort(out)
			return out
		}
		port.Cluster, port.External = remap(port.Cluster), remap(port.External)
		if port.ShortCircuit != nil {
			port.ShortCircuit = remap(port.ShortCircuit)
		}
	}
	return &q
}
