package render

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/netip"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"netspec.dev/netspec/internal/heapprof"

	"netspec.dev/netspec/internal/gen/genplan"
	"netspec.dev/netspec/plan"
)

// memoCheck renders p with m and fails unless the text is NFTables(p)'s,
// and a second Memo.NFTablesModel of p agrees; it returns the text.
func memoCheck(t *testing.T, m *Memo, p *plan.Plan, step string) []byte {
	t.Helper()
	want := NFTables(p)
	got := m.NFTablesModel(p).AppendText(nil)
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: the text of Memo.NFTablesModel differs from NFTables: %s", step, firstDiff(got, want))
	}
	if again := m.NFTablesModel(p).AppendText(nil); !bytes.Equal(again, want) {
		t.Fatalf("%s: Memo.NFTablesModel of the same plan again differs from NFTables: %s", step, firstDiff(again, want))
	}
	return want
}

// firstDiff describes where two texts part.
func firstDiff(got, want []byte) string {
	gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := range min(len(gl), len(wl)) {
		if gl[i] != wl[i] {
			return fmt.Sprintf("line %d:\n got  %q\n want %q", i+1, gl[i], wl[i])
		}
	}
	return fmt.Sprintf("%d lines, want %d", len(gl), len(wl))
}

// memoCOW returns a copy of p that shares every Service but the one at i,
// which is copied deeply for f to change: plans are never mutated, so
// edits copy on write as a compiler would.
func memoCOW(p *plan.Plan, i int, f func(s *plan.Service)) *plan.Plan {
	q := *p
	q.Services = slices.Clone(p.Services)
	s := &q.Services[i]
	s.ClusterIPs = slices.Clone(s.ClusterIPs)
	s.ExternalIPs = slices.Clone(s.ExternalIPs)
	s.LoadBalancerIPs = slices.Clone(s.LoadBalancerIPs)
	s.SourceRanges = slices.Clone(s.SourceRanges)
	s.Ports = slices.Clone(s.Ports)
	for j := range s.Ports {
		pt := &s.Ports[j]
		pt.Endpoints = slices.Clone(pt.Endpoints)
		pt.Cluster = slices.Clone(pt.Cluster)
		pt.External = slices.Clone(pt.External)
	}
	f(s)
	return &q
}

// memoFind returns the index of the Service ns/name in p.
func memoFind(t *testing.T, p *plan.Plan, key string) int {
	t.Helper()
	i := slices.IndexFunc(p.Services, func(s plan.Service) bool { return s.Key() == key })
	if i < 0 {
		t.Fatalf("no Service %s in the plan", key)
	}
	return i
}

// memoInsert returns a copy of p with s added in namespace/name order.
func memoInsert(p *plan.Plan, s plan.Service) *plan.Plan {
	q := *p
	at, _ := slices.BinarySearchFunc(p.Services, &s, func(a plan.Service, b *plan.Service) int { return compareServices(&a, b) })
	q.Services = slices.Insert(slices.Clone(p.Services), at, s)
	return &q
}

// memoDelete returns a copy of p without the Service at i.
func memoDelete(p *plan.Plan, i int) *plan.Plan {
	q := *p
	q.Services = slices.Delete(slices.Clone(p.Services), i, i+1)
	return &q
}

// memoSetEndpoints sets the endpoints of pt, sorted, with every ready one
// serving internal and external traffic.
func memoSetEndpoints(pt *plan.Port, eps []plan.Endpoint) {
	slices.SortFunc(eps, func(a, b plan.Endpoint) int { return a.AddrPort().Compare(b.AddrPort()) })
	pt.Endpoints, pt.Cluster, pt.External = eps, nil, nil
	for i, ep := range eps {
		if ep.Ready {
			pt.Cluster = append(pt.Cluster, i)
			pt.External = append(pt.External, i)
		}
	}
}

// memoService is a ClusterIP Service ns/name on vip with port http 80/TCP to
// two endpoints at ep and the address after it.
func memoService(ns, name, vip, ep string) plan.Service {
	a := netip.MustParseAddr(ep)
	s := plan.Service{Namespace: ns, Name: name, Type: "ClusterIP", ClusterIPs: nftAddrs(vip),
		Ports: []plan.Port{{Name: "http", Protocol: "TCP", Port: 80}}}
	memoSetEndpoints(&s.Ports[0], []plan.Endpoint{nftEP(a.String(), 8080, "node-1", ""), nftEP(a.Next().String(), 8080, "node-2", "")})
	return s
}

// memoPickHome is the bucket and home slot of the service chain of port
// http/TCP of ns/name (nameChains, addPick).
func memoPickHome(ns, name string) (bucket int, home uint32, chain string) {
	base := []byte(ns + "/" + name + "/tcp/http")
	h := hash8(base)
	chain = string(appendNFTName(nil, "service-", h[:], base))
	f := fnv.New64a()
	f.Write([]byte(chain))
	sum := f.Sum64()
	return int(sum % pickBuckets), uint32((sum / pickBuckets) % pickSlots), chain
}

// memoCollision finds two Services of namespace ns whose service chains
// hash to one bucket and slot; first has the greater chain name, so that
// adding second moves first's pick to the next slot.
func memoCollision(t *testing.T, ns string) (first, second string) {
	t.Helper()
	type key struct {
		bucket int
		home   uint32
	}
	seen := map[key]string{}
	for i := range 2_000_000 {
		name := fmt.Sprintf("c-%d", i)
		b, h, chain := memoPickHome(ns, name)
		if other, ok := seen[key{b, h}]; ok {
			_, _, otherChain := memoPickHome(ns, other)
			if otherChain > chain {
				return other, name
			}
			return name, other
		}
		seen[key{b, h}] = name
	}
	t.Fatal("no two chains share a slot")
	return "", ""
}

// memoPlan is a generated plan of n Services for node-1 with the
// hand-built Services of nftCases (renamed into namespace zz-cases), on
// node addresses of both families.
func memoPlan(t *testing.T, n int) *plan.Plan {
	t.Helper()
	p := genplan.Plan(t, n, "node-1")
	p.Node.IPs = append(slices.Clone(p.Node.IPs), netip.MustParseAddr("fd00:1::10"))
	p.Cluster.ServiceCIDRs = append(slices.Clone(p.Cluster.ServiceCIDRs), netip.MustParsePrefix("fd00:96::/108"))
	p.Cluster.PodCIDRs = append(slices.Clone(p.Cluster.PodCIDRs), netip.MustParsePrefix("fd00:244::/56"))
	for i, tc := range nftCases() {
		for _, s := range tc.plan.Services {
			s.Namespace = "zz-cases"
			s.Name = fmt.Sprintf("%s-%d", s.Name, i)
			p = memoInsert(p, s)
		}
	}
	return p
}

func TestMemoNil(t *testing.T) {
	var m *Memo
	p := nftPlan(nftWeb())
	memoCheck(t, m, p, "nil Memo")
	if got := m.NFTablesModel(nil).AppendText(nil); !bytes.Equal(got, NFTables(nil)) {
		t.Error("nil Memo, nil plan: differs from NFTables(nil)")
	}
	var z Memo
	if got := z.NFTablesModel(nil).AppendText(nil); !bytes.Equal(got, NFTables(nil)) {
		t.Error("zero Memo, nil plan: differs from NFTables(nil)")
	}
}

// TestMemoSameServiceFields: sameService compares every field of a
// Service but its ports, so that a field added to plan.Service cannot be
// missed.
func TestMemoSameServiceFields(t *testing.T) {
	base := memoService("a", "b", "10.96.0.1", "10.244.0.1")
	typ := reflect.TypeFor[plan.Service]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Name == "Ports" {
			continue
		}
		s := base
		v := reflect.ValueOf(&s).Elem().Field(i)
		switch v.Kind() {
		case reflect.String:
			v.SetString("x")
		case reflect.Bool:
			v.SetBool(!v.Bool())
		case reflect.Int32:
			v.SetInt(v.Int() + 1)
		case reflect.Uint16:
			v.SetUint(v.Uint() + 1)
		case reflect.Slice:
			v.Set(reflect.Append(v, reflect.Zero(v.Type().Elem())))
		default:
			t.Fatalf("field %s of kind %s: teach this test to change it", f.Name, v.Kind())
		}
		if sameService(&base, &s) {
			t.Errorf("sameService misses a change of %s", f.Name)
		}
	}
	if s := base; !sameService(&base, &s) {
		t.Error("sameService: a copy differs")
	}
}

// TestMemoSamePortFields: a change of any field of a port or endpoint
// that changes the text is one that samePort sees.
func TestMemoSamePortFields(t *testing.T) {
	all := nftPlan()
	for i, tc := range nftCases() {
		for _, s := range tc.plan.Services {
			s.Name = fmt.Sprintf("%s-%d", s.Name, i)
			all.Services = append(all.Services, s)
		}
	}
	// Local policy with no endpoint here: whether one serves elsewhere
	// (Ready or Serving) tells drop from reject.
	for i, ready := range []bool{true, false} {
		s := memoService("local", fmt.Sprintf("elsewhere-%d", i), fmt.Sprintf("10.96.1.%d", i+1), "10.244.9.1")
		s.InternalLocal = true
		s.Ports[0].Endpoints = s.Ports[0].Endpoints[:1]
		s.Ports[0].Endpoints[0].Ready, s.Ports[0].Endpoints[0].Serving = ready, !ready
		s.Ports[0].Cluster, s.Ports[0].External = nil, nil
		all.Services = append(all.Services, s)
	}
	want := NFTables(all)
	change := func(v reflect.Value) {
		switch v.Kind() {
		case reflect.String:
			v.SetString(v.String() + "x")
		case reflect.Bool:
			v.SetBool(!v.Bool())
		case reflect.Uint16:
			v.SetUint(v.Uint() + 1)
		case reflect.Slice:
			v.Set(reflect.Append(v, reflect.Zero(v.Type().Elem())))
		case reflect.Struct: // netip.Addr
			v.Set(reflect.ValueOf(v.Interface().(netip.Addr).Next()))
		case reflect.Pointer: // Endpoint.Extra
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
			} else {
				v.Set(reflect.Zero(v.Type()))
			}
		default:
			t.Fatalf("a field of kind %s: teach this test to change it", v.Kind())
		}
	}
	seen := map[string]bool{}
	for i := range all.Services {
		for j := range all.Services[i].Ports {
			pt := all.Services[i].Ports[j]
			for f := range reflect.TypeFor[plan.Port]().NumField() {
				name := reflect.TypeFor[plan.Port]().Field(f).Name
				q := memoCOW(all, i, func(s *plan.Service) { change(reflect.ValueOf(&s.Ports[j]).Elem().Field(f)) })
				if !bytes.Equal(NFTables(q), want) {
					seen["Port."+name] = true
					if samePort(pt, q.Services[i].Ports[j]) {
						t.Errorf("%s port %d: samePort misses a change of %s", all.Services[i].Key(), j, name)
					}
				}
			}
			for k := range pt.Endpoints {
				for f := range reflect.TypeFor[plan.Endpoint]().NumField() {
					name := reflect.TypeFor[plan.Endpoint]().Field(f).Name
					q := memoCOW(all, i, func(s *plan.Service) {
						change(reflect.ValueOf(&s.Ports[j].Endpoints[k]).Elem().Field(f))
					})
					if !bytes.Equal(NFTables(q), want) {
						seen["Endpoint."+name] = true
						if samePort(pt, q.Services[i].Ports[j]) {
							t.Errorf("%s port %d endpoint %d: samePort misses a change of %s", all.Services[i].Key(), j, k, name)
						}
					}
				}
			}
		}
	}
	// The test sees the changes that matter.
	for _, f := range []string{"Port.Name", "Port.Port", "Port.NodePort", "Port.Cluster", "Endpoint.IP", "Endpoint.Port", "Endpoint.Ready", "Endpoint.Serving"} {
		if !seen[f] {
			t.Errorf("no change of %s changed the text", f)
		}
	}
}

// TestMemoEdits renders a sequence of edited plans with one Memo: after
// every step, its text is NFTables'.
func TestMemoEdits(t *testing.T) {
	memoEdits(t, memoPlan(t, 200))
}

// TestMemoEditsSideBySide is TestMemoEdits with sections written by
// several goroutines.
func TestMemoEditsSideBySide(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("SKIPPED: needs GOMAXPROCS ≥ 2 to render side by side")
	}
	defer func(n int) { groupsPerWorker = n }(groupsPerWorker)
	groupsPerWorker = 8
	memoEdits(t, memoPlan(t, 100))
}

func memoEdits(t *testing.T, p0 *plan.Plan) {
	ns := "ns-c"
	first, second := memoCollision(t, ns)
	used := map[netip.Addr]bool{}
	for _, s := range p0.Services {
		for _, a := range s.ClusterIPs {
			used[a] = true
		}
	}
	next := netip.MustParseAddr("10.111.255.250")
	freeVIP := func() string {
		for used[next] {
			next = next.Prev()
		}
		used[next] = true
		return next.String()
	}
	epAt := netip.MustParseAddr("10.247.200.1")
	freeEP := func() string {
		epAt = epAt.Next().Next()
		return epAt.Prev().String()
	}
	// The first ClusterIP and NodePort Services with endpoints.
	clusterIP, nodePort := "", ""
	for _, s := range p0.Services {
		if len(s.Ports) == 0 || len(s.Ports[0].Endpoints) == 0 || s.Namespace == "zz-cases" {
			continue
		}
		if s.Type == "ClusterIP" && clusterIP == "" {
			clusterIP = s.Key()
		}
		if s.Type == "NodePort" && nodePort == "" {
			nodePort = s.Key()
		}
	}
	if clusterIP == "" || nodePort == "" {
		t.Fatal("the plan has no ClusterIP or NodePort Service with endpoints")
	}
	var lbVIP, dupVIP string
	var unshuffled *plan.Plan
	moved := "pick of " + second + ", which moves " + first + "'s"
	edit := func(key string, f func(s *plan.Service)) func(p *plan.Plan) *plan.Plan {
		return func(p *plan.Plan) *plan.Plan { return memoCOW(p, memoFind(t, p, key), f) }
	}
	steps := []struct {
		name string
		same bool // the text does not change
		edit func(p *plan.Plan) *plan.Plan
	}{
		{"the same plan", true, func(p *plan.Plan) *plan.Plan { return p }},
		{"a deep copy", true, nftClone},
		{"a shuffled copy", true, func(p *plan.Plan) *plan.Plan {
			unshuffled = p
			q := nftClone(p)
			nftShuffle(q, rand.New(rand.NewPCG(1, 2)))
			return q
		}},
		{"in order again", true, func(*plan.Plan) *plan.Plan { return unshuffled }},
		{"endpoint added", false, edit(clusterIP, func(s *plan.Service) {
			pt := &s.Ports[0]
			memoSetEndpoints(pt, append(pt.Endpoints, nftEP(freeEP(), pt.Endpoints[0].Port, "node-3", "")))
		})},
		{"endpoint removed", false, edit(clusterIP, func(s *plan.Service) {
			pt := &s.Ports[0]
			memoSetEndpoints(pt, pt.Endpoints[1:])
		})},
		{"endpoint moved", false, func(p *plan.Plan) *plan.Plan { return genplan.WithMovedEndpoint(t, p) }},
		{"endpoint port changed", false, edit(clusterIP, func(s *plan.Service) {
			s.Ports[0].Endpoints[0].Port++
		})},
		{"endpoint not ready", false, edit(clusterIP, func(s *plan.Service) {
			for j := range s.Ports {
				eps := s.Ports[j].Endpoints
				for k := range eps {
					eps[k].Ready, eps[k].Serving = false, false
				}
				memoSetEndpoints(&s.Ports[j], eps)
			}
		})},
		{"endpoint zone changed (no change in the text)", true, edit(nodePort, func(s *plan.Service) {
			s.Ports[0].Endpoints[0].Zone += "-b"
		})},
		{"endpoints ready again", false, edit(clusterIP, func(s *plan.Service) {
			for j := range s.Ports {
				eps := s.Ports[j].Endpoints
				for k := range eps {
					eps[k].Ready, eps[k].Serving = true, true
				}
				memoSetEndpoints(&s.Ports[j], eps)
			}
		})},
		{"port added", false, edit(clusterIP, func(s *plan.Service) {
			pt := s.Ports[0]
			pt.Name, pt.Port = "extra", 8443
			pt.Endpoints = slices.Clone(pt.Endpoints)
			s.Ports = append(s.Ports, pt)
		})},
		{"port removed", false, edit(clusterIP, func(s *plan.Service) {
			s.Ports = s.Ports[:len(s.Ports)-1]
		})},
		{"service added", false, func(p *plan.Plan) *plan.Plan { return genplan.WithExtraService(t, p) }},
		{"service removed", false, func(p *plan.Plan) *plan.Plan {
			return memoDelete(p, memoFind(t, p, "ns-1/svc-bench-extra"))
		}},
		{"cluster IP changed", false, edit(clusterIP, func(s *plan.Service) {
			s.ClusterIPs = nftAddrs(freeVIP())
		})},
		{"affinity on", false, edit(clusterIP, func(s *plan.Service) { s.AffinitySeconds = 300 })},
		{"affinity timeout", false, edit(clusterIP, func(s *plan.Service) { s.AffinitySeconds = 60 })},
		{"affinity off", false, edit(clusterIP, func(s *plan.Service) { s.AffinitySeconds = 0 })},
		{"external policy Local", false, edit(nodePort, func(s *plan.Service) {
			s.ExternalLocal = true
			for j := range s.Ports {
				s.Ports[j].External = s.Ports[j].External[:1]
			}
		})},
		{"external policy Local, no local endpoint", false, edit(nodePort, func(s *plan.Service) {
			for j := range s.Ports {
				s.Ports[j].External = nil
			}
		})},
		{"external policy Cluster", false, edit(nodePort, func(s *plan.Service) {
			s.ExternalLocal = false
			for j := range s.Ports {
				s.Ports[j].External = slices.Clone(s.Ports[j].Cluster)
			}
		})},
		{"internal policy Local, no local endpoint", false, edit(clusterIP, func(s *plan.Service) {
			s.InternalLocal = true
			for j := range s.Ports {
				s.Ports[j].Cluster = nil
			}
		})},
		{"internal policy Cluster", false, edit(clusterIP, func(s *plan.Service) {
			s.InternalLocal = false
			for j := range s.Ports {
				s.Ports[j].Cluster = slices.Clone(s.Ports[j].External)
			}
		})},
		{"type NodePort", false, edit(clusterIP, func(s *plan.Service) {
			s.Type = "NodePort"
			s.Ports[0].NodePort = 32700
		})},
		{"LoadBalancer with source ranges", false, func(p *plan.Plan) *plan.Plan {
			lbVIP = freeVIP()
			s := memoService("ns-lb", "lb", lbVIP, freeEP())
			s.Type = "LoadBalancer"
			s.LoadBalancerIPs = nftAddrs("203.0.113.77")
			s.SourceRanges = nftPrefixes("198.51.100.0/24")
			s.Ports[0].NodePort = 32701
			return memoInsert(p, s)
		}},
		{"node address in the source ranges", false, func(p *plan.Plan) *plan.Plan {
			q := *p
			q.Node.IPs = append(slices.Clone(p.Node.IPs), netip.MustParseAddr("198.51.100.9"))
			return &q
		}},
		{"node addresses changed", false, func(p *plan.Plan) *plan.Plan {
			q := *p
			q.Node.IPs = nftAddrs("192.168.0.1", "fd00:1::11")
			return &q
		}},
		{"two pod CIDRs", false, func(p *plan.Plan) *plan.Plan {
			q := *p
			q.Cluster.PodCIDRs = append(slices.Clone(p.Cluster.PodCIDRs), netip.MustParsePrefix("10.250.0.0/16"))
			return &q
		}},
		{"no pod CIDRs", false, func(p *plan.Plan) *plan.Plan {
			q := *p
			q.Cluster.PodCIDRs = nil
			return &q
		}},
		{"one pod CIDR", false, func(p *plan.Plan) *plan.Plan {
			q := *p
			q.Cluster.PodCIDRs = nftPrefixes("10.244.0.0/14")
			return &q
		}},
		{"pick of " + first, false, func(p *plan.Plan) *plan.Plan {
			return memoInsert(p, memoService(ns, first, freeVIP(), freeEP()))
		}},
		{moved, false, func(p *plan.Plan) *plan.Plan {
			return memoInsert(p, memoService(ns, second, freeVIP(), freeEP()))
		}},
		{"endpoint of " + first + " moved", false, edit(ns+"/"+first, func(s *plan.Service) {
			memoSetEndpoints(&s.Ports[0], append(s.Ports[0].Endpoints[1:], nftEP(freeEP(), 8080, "node-1", "")))
		})},
		{"pick of " + second + " gone, " + first + "'s back", false, func(p *plan.Plan) *plan.Plan {
			return memoDelete(p, memoFind(t, p, ns+"/"+second))
		}},
		{"two ports of one name", false, edit(clusterIP, func(s *plan.Service) {
			pt := s.Ports[0]
			pt.Port++
			pt.Endpoints = slices.Clone(pt.Endpoints)
			s.Ports = append(s.Ports, pt)
		})},
		{"an endpoint of the twin ports changed", false, edit(clusterIP, func(s *plan.Service) {
			pt := &s.Ports[len(s.Ports)-1]
			memoSetEndpoints(pt, append(pt.Endpoints, nftEP(freeEP(), 8080, "node-1", "")))
		})},
		{"a twin port gone", false, edit(clusterIP, func(s *plan.Service) {
			s.Ports = s.Ports[:len(s.Ports)-1]
		})},
		{"two ports of one key", false, edit(clusterIP, func(s *plan.Service) {
			pt := s.Ports[0]
			pt.NodePort = 32702
			pt.Endpoints = slices.Clone(pt.Endpoints)
			s.Ports = append(s.Ports, pt)
		})},
		{"one port of the key gone", false, edit(clusterIP, func(s *plan.Service) {
			s.Ports = s.Ports[:len(s.Ports)-1]
		})},
		{"two Services with chains of one name", false, func(p *plan.Plan) *plan.Plan {
			p = memoInsert(p, memoService("a", "b/c", freeVIP(), freeEP()))
			return memoInsert(p, memoService("a/b", "c", freeVIP(), freeEP()))
		}},
		{"one of them gone", false, func(p *plan.Plan) *plan.Plan {
			return memoDelete(p, memoFind(t, p, "a/b/c"))
		}},
		{"two Services of one name", false, func(p *plan.Plan) *plan.Plan {
			dupVIP = freeVIP()
			s := p.Services[memoFind(t, p, clusterIP)]
			s.ClusterIPs = nftAddrs(dupVIP)
			return memoInsert(p, s)
		}},
		{"an endpoint of the twins changed", false, func(p *plan.Plan) *plan.Plan {
			i := slices.IndexFunc(p.Services, func(s plan.Service) bool {
				return s.Key() == clusterIP && slices.Equal(s.ClusterIPs, nftAddrs(dupVIP))
			})
			return memoCOW(p, i, func(s *plan.Service) {
				memoSetEndpoints(&s.Ports[0], append(s.Ports[0].Endpoints, nftEP(freeEP(), 8080, "node-1", "")))
			})
		}},
		{"one of the twins gone", false, func(p *plan.Plan) *plan.Plan {
			i := slices.IndexFunc(p.Services, func(s plan.Service) bool {
				return s.Key() == clusterIP && slices.Equal(s.ClusterIPs, nftAddrs(dupVIP))
			})
			return memoDelete(p, i)
		}},
		{"every other Service removed", false, func(p *plan.Plan) *plan.Plan {
			q := *p
			q.Services = nil
			for i, s := range p.Services {
				if i%2 == 0 {
					q.Services = append(q.Services, s)
				}
			}
			return &q
		}},
		{"back to the start", false, func(*plan.Plan) *plan.Plan { return p0 }},
		{"no Services", false, func(p *plan.Plan) *plan.Plan {
			q := *p
			q.Services = nil
			return &q
		}},
		{"the start again", false, func(*plan.Plan) *plan.Plan { return p0 }},
	}

	// The steps after which the Memo starts over, or renders afresh
	// while it follows the plans.
	reset := map[string]bool{"a shuffled copy": true, "two ports of one key": true, "two Services of one name": true, "an endpoint of the twins changed": true}
	afresh := map[string]bool{"two ports of one name": true, "an endpoint of the twin ports changed": true, "two Services with chains of one name": true}
	var m Memo
	p := p0
	last := memoCheck(t, &m, p, "start")
	for _, st := range steps {
		p = st.edit(p)
		text := memoCheck(t, &m, p, st.name)
		if changed := !bytes.Equal(text, last); changed == st.same {
			t.Errorf("%s: the text changed: %v, want %v", st.name, changed, !st.same)
		}
		if gotReset := m.tables[0].t == nil; gotReset != reset[st.name] {
			t.Errorf("%s: the Memo started over: %v, want %v", st.name, gotReset, reset[st.name])
		}
		dups := m.tables[0].dups + m.tables[1].dups
		if gotAfresh := dups > 0; gotAfresh != afresh[st.name] {
			t.Errorf("%s: %d chain names twice, want some: %v", st.name, dups, afresh[st.name])
		}
		last = text
		if st.name == moved {
			tbl := newNFTTable(p, nftFamilies[0], false)
			b, h, chain := memoPickHome(ns, first)
			if p := tbl.pickOf[chain]; p == nil || int(p.bucket) != b || p.slot != (h+1)%pickSlots {
				t.Fatalf("%s: %s's pick is %+v, want slot %d of bucket %d", st.name, first, p, h+1, b)
			}
		}
	}
	memoCheck(t, &m, nil, "nil plan")
	memoCheck(t, &m, p0, "after a nil plan")
}

// TestMemoRandomEdits applies random edits to random Services and checks
// the Memo's text after each.
func TestMemoRandomEdits(t *testing.T) {
	p := memoPlan(t, 150)
	r := rand.New(rand.NewPCG(7, 11))
	nextEP := netip.MustParseAddr("10.247.100.1")
	freeEP := func() netip.Addr {
		nextEP = nextEP.Next()
		return nextEP
	}
	nextVIP := netip.MustParseAddr("10.111.200.1")
	edits := []func(s *plan.Service){
		func(s *plan.Service) { // endpoint added
			pt := &s.Ports[r.IntN(len(s.Ports))]
			memoSetEndpoints(pt, append(pt.Endpoints, nftEP(freeEP().String(), 8080, "node-2", "")))
		},
		func(s *plan.Service) { // endpoint removed
			pt := &s.Ports[r.IntN(len(s.Ports))]
			if len(pt.Endpoints) > 0 {
				memoSetEndpoints(pt, slices.Delete(pt.Endpoints, 0, 1))
			}
		},
		func(s *plan.Service) { // endpoint ready toggled
			pt := &s.Ports[r.IntN(len(s.Ports))]
			if len(pt.Endpoints) > 0 {
				k := r.IntN(len(pt.Endpoints))
				pt.Endpoints[k].Ready = !pt.Endpoints[k].Ready
				memoSetEndpoints(pt, pt.Endpoints)
			}
		},
		func(s *plan.Service) { s.AffinitySeconds = int32(r.IntN(2)) * 600 },
		func(s *plan.Service) { s.InternalLocal = !s.InternalLocal },
		func(s *plan.Service) { // external policy toggled, one local endpoint
			s.ExternalLocal = !s.ExternalLocal
			for j := range s.Ports {
				if s.ExternalLocal && len(s.Ports[j].External) > 1 {
					s.Ports[j].External = s.Ports[j].External[:1]
				}
			}
		},
		func(s *plan.Service) { // node port toggled
			if s.Type == "ClusterIP" {
				s.Type = "NodePort"
				s.Ports[0].NodePort = uint16(31000 + r.IntN(1000))
			} else if s.Type == "NodePort" {
				s.Type = "ClusterIP"
				for j := range s.Ports {
					s.Ports[j].NodePort = 0
				}
			}
		},
		func(s *plan.Service) { // cluster IP changed
			if len(s.ClusterIPs) > 0 {
				nextVIP = nextVIP.Next()
				s.ClusterIPs = []netip.Addr{nextVIP}
			}
		},
		func(s *plan.Service) { // port added
			pt := s.Ports[0]
			pt.Name, pt.Port, pt.NodePort = fmt.Sprintf("p%d", r.IntN(1000)), uint16(10000+r.IntN(1000)), 0
			pt.Endpoints = slices.Clone(pt.Endpoints)
			s.Ports = append(s.Ports, pt)
		},
		func(s *plan.Service) { // port removed
			if len(s.Ports) > 1 {
				s.Ports = slices.Delete(s.Ports, 0, 1)
			}
		},
	}
	var m Memo
	memoCheck(t, &m, p, "start")
	for step := range 150 {
		var what string
		switch k := r.IntN(20); {
		case k == 0:
			p, what = memoDelete(p, r.IntN(len(p.Services))), "service removed"
		case k == 1:
			nextVIP = nextVIP.Next()
			s := memoService("ns-r", fmt.Sprintf("r-%d", step), nextVIP.String(), freeEP().String())
			freeEP()
			p, what = memoInsert(p, s), "service added"
		case k == 2:
			q := *p
			q.Node.IPs = append(slices.Clone(p.Node.IPs[:len(p.Node.IPs)-1]), netip.AddrFrom4([4]byte{192, 168, 9, byte(step)}))
			p, what = &q, "node addresses changed"
		case k == 3:
			q := *p
			if len(p.Cluster.PodCIDRs) > 2 || r.IntN(2) == 0 {
				q.Cluster.PodCIDRs = nftPrefixes("10.244.0.0/14")
			} else {
				q.Cluster.PodCIDRs = append(slices.Clone(p.Cluster.PodCIDRs), netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 250, byte(step), 0}), 24))
			}
			p, what = &q, "pod CIDRs changed"
		case k == 4:
			p, what = nftClone(p), "deep copy"
		default:
			// One to three Services edited.
			for range 1 + r.IntN(3) {
				i := r.IntN(len(p.Services))
				if len(p.Services[i].Ports) == 0 {
					continue
				}
				e := r.IntN(len(edits))
				p = memoCOW(p, i, edits[e])
				what += fmt.Sprintf(" edit %d of %s", e, p.Services[i].Key())
			}
		}
		memoCheck(t, &m, p, fmt.Sprintf("step %d:%s", step, what))
		if m.tables[0].t == nil {
			t.Fatalf("step %d:%s: the Memo started over", step, what)
		}
	}
}

// TestNFTablesParallelAffinity: sections of ports with ClientIP affinity,
// whose names need scratch space, written side by side (sideBySide)
// are those of one goroutine (run with -race: the scratch space is the
// view's, not the table's).
func TestNFTablesParallelAffinity(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("SKIPPED: needs GOMAXPROCS ≥ 2 to render side by side")
	}
	defer func(n int) { groupsPerWorker = n }(groupsPerWorker)
	groupsPerWorker = 4
	p := nftPlan()
	for i := range 64 {
		s := nftWeb()
		s.Name = fmt.Sprintf("web-%d", i)
		s.AffinitySeconds = 60
		p.Services = append(p.Services, s)
	}
	parallel := NFTables(p)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	if sequential := NFTables(p); !bytes.Equal(parallel, sequential) {
		t.Fatalf("rendered side by side, the ruleset differs: %s", firstDiff(parallel, sequential))
	}
}

// BenchmarkNFTablesMemo builds, with one Memo, the model of a
// 10,000-Service plan in which one Service's endpoints change per
// iteration (an endpoint moves to a new address), as `netspec watch` does
// after a one-file change.
// shared: the plan shares every other Service with the last (a compiler
// that reuses them); copied: every Service is a fresh copy.
func BenchmarkNFTablesMemo(b *testing.B) {
	base := genplan.Plan(b, 10000, "node-1")
	for _, shared := range []bool{true, false} {
		b.Run(map[bool]string{true: "shared", false: "copied"}[shared], func(b *testing.B) {
			var m Memo
			p := base
			m.NFTablesModel(p)
			next := netip.MustParseAddr("10.247.0.1")
			b.ReportAllocs()
			b.ResetTimer()
			var items int
			for i := range b.N {
				b.StopTimer()
				k := i * 7919 % len(p.Services)
				for len(p.Services[k].Ports) == 0 || len(p.Services[k].Ports[0].Endpoints) == 0 {
					k = (k + 1) % len(p.Services)
				}
				p = memoCOW(p, k, func(s *plan.Service) {
					next = next.Next()
					for j := range s.Ports {
						s.Ports[j].Endpoints[0].IP = next
					}
				})
				q := p
				if !shared {
					q = nftClone(p)
				}
				b.StartTimer()
				items = len(m.NFTablesModel(q).Tables[0].Items)
			}
			b.ReportMetric(float64(items), "items")
		})
	}
}

// TestMemoReusesModel: after a change of one Service, the Memo's model
// holds the very chains and sets of the last model for everything else,
// so that the applier encodes only what changed.
func TestMemoReusesModel(t *testing.T) {
	p := memoPlan(t, 60)
	var m Memo
	first := m.NFTablesModel(p)
	q := *p
	q.Services = slices.Clone(p.Services)
	s := &q.Services[7]
	s.Ports = slices.Clone(s.Ports)
	s.Ports[0].Endpoints = slices.Clone(s.Ports[0].Endpoints)
	for k := range s.Ports[0].Endpoints {
		s.Ports[0].Endpoints[k].Port++
	}
	second := m.NFTablesModel(&q)
	if !bytes.Equal(second.AppendText(nil), NFTables(&q)) {
		t.Fatal("the Memo's model differs from NFTables")
	}
	old := map[any]bool{}
	for _, tb := range first.Tables {
		for _, it := range tb.Items {
			old[it.Chain], old[it.Set] = true, true
		}
	}
	fresh, all := 0, 0
	for _, tb := range second.Tables {
		for _, it := range tb.Items {
			if it.Chain == nil && it.Set == nil {
				continue
			}
			all++
			if (it.Chain != nil && !old[it.Chain]) || (it.Set != nil && !old[it.Set]) {
				fresh++
			}
		}
	}
	// The Service's chains, the endpoint map of its pick, the sets rebuilt
	// on every call (nodeport-ips, pod-cidrs).
	if fresh > 8 {
		t.Errorf("%d of %d chains and sets are new after a change of one Service's endpoints", fresh, all)
	}
}

// BenchmarkMemoRetained measures what a Memo and the model it returned
// hold at 10,000 Services (about 20,000 endpoints), as `netspec watch`
// holds them between reloads (the applier keeps the last model it
// installed, whose pieces are the Memo's): the live heap (after two GCs)
// with both, less that before the first build. held: after the first
// build; edited: after 100 further builds, each with one more Service's
// endpoints changed (BenchmarkNFTablesMemo's edit). The plans are outside
// the figures (of the last edited one, the Memo keeps; its copy of the
// Services is subtracted). Reported, not asserted. With
// NETSPEC_RENDER_HEAPPROFILE=FILE it writes a heap profile taken after
// the first build (-memprofilerate=4096 or finer for a useful one).
func BenchmarkMemoRetained(b *testing.B) {
	base := genplan.Plan(b, 10000, "node-1")
	heap := func() float64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return float64(m.HeapAlloc)
	}
	edit := func(p *plan.Plan, i int, next *netip.Addr) *plan.Plan {
		k := i * 7919 % len(p.Services)
		for len(p.Services[k].Ports) == 0 || len(p.Services[k].Ports[0].Endpoints) == 0 {
			k = (k + 1) % len(p.Services)
		}
		return memoCOW(p, k, func(s *plan.Service) {
			*next = next.Next()
			for j := range s.Ports {
				s.Ports[j].Endpoints[0].IP = *next
			}
		})
	}
	// What an edited plan holds beyond the base plan.
	before := heap()
	one := edit(base, 0, new(netip.MustParseAddr("10.247.0.1")))
	planBytes := heap() - before
	runtime.KeepAlive(one)
	one = nil

	var held, edited float64
	for b.Loop() {
		before := heap()
		m := &Memo{}
		rs := m.NFTablesModel(base)
		held = heap() - before
		if out := os.Getenv("NETSPEC_RENDER_HEAPPROFILE"); out != "" {
			heapprof.Write(b, out)
		}
		p, next := base, netip.MustParseAddr("10.247.0.1")
		for i := range 100 {
			p = edit(p, i, &next)
			rs = m.NFTablesModel(p)
		}
		p = nil
		edited = heap() - before - planBytes
		runtime.KeepAlive(m)
		runtime.KeepAlive(rs)
	}
	b.ReportMetric(held/1e6, "held-MB")
	b.ReportMetric(edited/1e6, "edited-MB")
}
