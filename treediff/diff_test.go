package treediff

import (
	"encoding/json"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/plan"
)

// ---- hand-built Plans: services as the compiler makes them, without the
// per-node endpoint sets, which dfPlans computes for every node ----

var (
	dfNode1 = plan.Node{Name: "node-1", Zone: "a", IPs: []netip.Addr{netip.MustParseAddr("192.168.0.1")}}
	dfNode2 = plan.Node{Name: "node-2", Zone: "b", IPs: []netip.Addr{netip.MustParseAddr("192.168.0.2")}}
)

// dfEP is a ready endpoint of a pod on node at ip:8080.
func dfEP(ip, node string) plan.Endpoint {
	return plan.Endpoint{IP: netip.MustParseAddr(ip), Port: 8080, Ready: true, Serving: true, NodeName: node, Pod: "shop/" + node}
}

func dfNotReady(e plan.Endpoint) plan.Endpoint { e.Ready, e.Serving = false, false; return e }

// dfSvc is a ClusterIP Service shop/name with port http 80/TCP.
func dfSvc(name, clusterIP string, eps ...plan.Endpoint) plan.Service {
	return plan.Service{
		Namespace: "shop", Name: name, Type: "ClusterIP",
		ClusterIPs: []netip.Addr{netip.MustParseAddr(clusterIP)},
		Ports:      []plan.Port{{Name: "http", Protocol: "TCP", Port: 80, Endpoints: eps}},
	}
}

func dfNodePort(s plan.Service, np uint16, externalLocal bool) plan.Service {
	s.Type = "NodePort"
	s.ExternalLocal = externalLocal
	s.Ports = slices.Clone(s.Ports)
	s.Ports[0].NodePort = np
	return s
}

// dfPlans completes hand-built Services for each node as Compile would
// (compiler.Complete): endpoint sets, DNS records and env files.
func dfPlans(nodes []plan.Node, svcs ...plan.Service) map[string]*plan.Plan {
	out := map[string]*plan.Plan{}
	for _, n := range nodes {
		p := &plan.Plan{
			FormatVersion: plan.FormatVersion,
			Node:          n,
			Cluster: plan.Cluster{
				Domain:       "cluster.local",
				ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")},
				DNSTTL:       5,
			},
		}
		nss := []string{"shop"}
		for _, s := range svcs {
			s.Ports = slices.Clone(s.Ports)
			for i := range s.Ports {
				s.Ports[i].Endpoints = slices.Clone(s.Ports[i].Endpoints)
			}
			p.Services = append(p.Services, s)
			if !slices.Contains(nss, s.Namespace) {
				nss = append(nss, s.Namespace)
			}
		}
		slices.Sort(nss)
		compiler.Complete(p, nss)
		out[n.Name] = p
	}
	return out
}

var dfCmpOpts = cmp.Options{
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
}

func dfAP(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

func dfRec(name, typ, data string) DNSRecord {
	return DNSRecord{Name: name, Type: typ, TTL: 5, Data: data}
}

func TestDiff(t *testing.T) {
	one := []plan.Node{dfNode1}
	two := []plan.Node{dfNode1, dfNode2}
	web := dfSvc("web", "10.96.0.10", dfEP("10.244.1.5", "node-1"))
	web2 := dfSvc("web", "10.96.0.10", dfEP("10.244.1.5", "node-1"), dfEP("10.244.2.7", "node-2"))
	webNP := dfNodePort(web2, 30080, false)
	webNPLocal := dfNodePort(web2, 30080, true)
	cart := dfSvc("cart", "10.96.14.3", dfEP("10.244.1.6", "node-1"), dfEP("10.244.2.8", "node-2"))
	webMoved := dfSvc("web", "10.96.0.11", dfEP("10.244.1.5", "node-1"))
	webWLC := web
	webWLC.IPVSScheduler = "wlc"
	webOther := web
	webOther.ProxyName = "multus-proxy"
	// Both policies Local: node-1's own endpoint serves its cluster and
	// external traffic, every endpoint pods' and the node's traffic to
	// the node port (kube-proxy's short-circuit).
	webBothLocal := dfNodePort(web2, 30080, true)
	webBothLocal.InternalLocal = true
	webBothLocalDown := dfNodePort(dfSvc("web", "10.96.0.10", dfEP("10.244.1.5", "node-1"), dfNotReady(dfEP("10.244.2.7", "node-2"))), 30080, true)
	webBothLocalDown.InternalLocal = true
	webPort := web
	webPort.Ports = []plan.Port{{Name: "http", Protocol: "TCP", Port: 8000, Endpoints: web.Ports[0].Endpoints}}

	tests := []struct {
		name     string
		old, new map[string]*plan.Plan
		empty    bool
		services []ServiceDiff
		dns      []ZoneDiff
		env      []EnvDiff
		nodes    []NodeDiff
		ignore   []string // sections not compared: dns, env, nodes
	}{
		{
			name:  "no change",
			old:   dfPlans(two, web, cart),
			new:   dfPlans(two, web, cart),
			empty: true,
			nodes: []NodeDiff{{Name: "node-1"}, {Name: "node-2"}},
		},
		{
			name: "service added",
			old:  dfPlans(one, web),
			new:  dfPlans(one, web, cart),
			services: []ServiceDiff{{
				Namespace: "shop", Name: "cart", Change: DiffAdded,
				Service: &ServiceInfo{
					Type: "ClusterIP", ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.14.3")},
					InternalTrafficPolicy: "Cluster", ExternalTrafficPolicy: "Cluster",
					Ports: []PortInfo{{Name: "http", Protocol: "TCP", Port: 80, TargetPorts: []uint16{8080}, EndpointCount: 2, ReadyCount: 2}},
				},
			}},
			dns: []ZoneDiff{
				{Zone: "10.in-addr.arpa.", Change: DiffChanged, Added: []DNSRecord{dfRec("3.14.96.10.in-addr.arpa.", "PTR", "cart.shop.svc.cluster.local.")}},
				{Zone: "cluster.local.", Change: DiffChanged, Added: []DNSRecord{
					dfRec("_http._tcp.cart.shop.svc.cluster.local.", "SRV", "0 100 80 cart.shop.svc.cluster.local."),
					dfRec("cart.shop.svc.cluster.local.", "A", "10.96.14.3"),
					dfRec("cart.shop.svc.cluster.local.", "SRV", "0 100 80 cart.shop.svc.cluster.local."),
				}},
			},
			env: []EnvDiff{{Namespace: "shop", Change: DiffChanged, Added: []EnvVar{
				{Name: "CART_PORT", Value: "tcp://10.96.14.3:80"},
				{Name: "CART_PORT_80_TCP", Value: "tcp://10.96.14.3:80"},
				{Name: "CART_PORT_80_TCP_ADDR", Value: "10.96.14.3"},
				{Name: "CART_PORT_80_TCP_PORT", Value: "80"},
				{Name: "CART_PORT_80_TCP_PROTO", Value: "tcp"},
				{Name: "CART_SERVICE_HOST", Value: "10.96.14.3"},
				{Name: "CART_SERVICE_PORT", Value: "80"},
				{Name: "CART_SERVICE_PORT_HTTP", Value: "80"},
			}}},
			// One chain for the port (it DNATs to its endpoints), one element for the cluster IP.
			nodes: []NodeDiff{{Name: "node-1", DataPlane: DataPlaneChanges{ChainsAdded: 1, ElementsAdded: 7}}},
		},
		{
			name: "service removed",
			old:  dfPlans(two, web, cart),
			new:  dfPlans(two, web),
			services: []ServiceDiff{{
				Namespace: "shop", Name: "cart", Change: DiffRemoved,
				Service: &ServiceInfo{
					Type: "ClusterIP", ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.14.3")},
					InternalTrafficPolicy: "Cluster", ExternalTrafficPolicy: "Cluster",
					Ports: []PortInfo{{Name: "http", Protocol: "TCP", Port: 80, TargetPorts: []uint16{8080}, EndpointCount: 2, ReadyCount: 2}},
				},
			}},
			nodes: []NodeDiff{
				{Name: "node-1", DataPlane: DataPlaneChanges{ChainsRemoved: 1, ElementsRemoved: 7}},
				{Name: "node-2", DataPlane: DataPlaneChanges{ChainsRemoved: 1, ElementsRemoved: 7}},
			},
			ignore: []string{"dns", "env"},
		},
		{
			name: "endpoint added",
			old:  dfPlans(two, web),
			new:  dfPlans(two, web2),
			services: []ServiceDiff{{
				Namespace: "shop", Name: "web", Change: DiffChanged,
				Ports: []PortDiff{{
					PortInfo: PortInfo{Name: "http", Protocol: "TCP", Port: 80, TargetPorts: []uint16{8080}, EndpointCount: 2, ReadyCount: 2},
					Change:   DiffChanged,
					Endpoints: []EndpointDiff{{
						Endpoint: dfAP("10.244.2.7:8080"), Change: DiffAdded,
						Ready: true, Serving: true, NodeName: "node-2",
					}},
				}},
			}},
			nodes: []NodeDiff{
				{Name: "node-1", DataPlane: DataPlaneChanges{ElementsAdded: 3, ElementsRemoved: 1}},
				{Name: "node-2", DataPlane: DataPlaneChanges{ElementsAdded: 3, ElementsRemoved: 1}},
			},
		},
		{
			name: "endpoint became not ready",
			old:  dfPlans(two, web2),
			new:  dfPlans(two, dfSvc("web", "10.96.0.10", dfEP("10.244.1.5", "node-1"), dfNotReady(dfEP("10.244.2.7", "node-2")))),
			services: []ServiceDiff{{
				Namespace: "shop", Name: "web", Change: DiffChanged,
				Ports: []PortDiff{{
					PortInfo: PortInfo{Name: "http", Protocol: "TCP", Port: 80, TargetPorts: []uint16{8080}, EndpointCount: 2, ReadyCount: 1},
					Change:   DiffChanged,
					Endpoints: []EndpointDiff{{
						Endpoint: dfAP("10.244.2.7:8080"), Change: DiffChanged, NodeName: "node-2",
						Fields: []FieldChange{{Field: "state", Old: "ready", New: "not ready"}},
					}},
					// The same on every node: reported once.
					Forwarding: []ForwardingChange{{Traffic: TrafficCluster, Change: DiffRemoved, Endpoint: dfAP("10.244.2.7:8080")}},
				}},
			}},
			nodes: []NodeDiff{
				{Name: "node-1", DataPlane: DataPlaneChanges{ElementsAdded: 1, ElementsRemoved: 3}},
				{Name: "node-2", DataPlane: DataPlaneChanges{ElementsAdded: 1, ElementsRemoved: 3}},
			},
		},
		{
			// The scheduler matters to the IPVS data plane only: no
			// nftables change, but the reviewer sees it.
			name: "IPVS scheduler set",
			old:  dfPlans(one, web),
			new:  dfPlans(one, webWLC),
			services: []ServiceDiff{{
				Namespace: "shop", Name: "web", Change: DiffChanged,
				Fields: []FieldChange{{Field: "ipvsScheduler", Old: "the node's default", New: "wlc"}},
			}},
			nodes: []NodeDiff{{Name: "node-1"}},
		},
		{
			// Another proxy takes the Service: its rules go, its names
			// stay.
			name: "service-proxy-name set",
			old:  dfPlans(one, web),
			new:  dfPlans(one, webOther),
			services: []ServiceDiff{{
				Namespace: "shop", Name: "web", Change: DiffChanged,
				Fields: []FieldChange{{Field: "serviceProxyName", Old: "netspec", New: "multus-proxy"}},
				Ports: []PortDiff{{
					PortInfo:   PortInfo{Name: "http", Protocol: "TCP", Port: 80, TargetPorts: []uint16{8080}, EndpointCount: 1, ReadyCount: 1},
					Change:     DiffChanged,
					Forwarding: []ForwardingChange{{Traffic: TrafficCluster, Change: DiffRemoved, Endpoint: dfAP("10.244.1.5:8080")}},
				}},
			}},
			// The service chain, and the elements of its frontend, its
			// endpoint's hairpin and its endpoint map.
			nodes: []NodeDiff{{Name: "node-1", DataPlane: DataPlaneChanges{ChainsRemoved: 1, ElementsRemoved: 5}}},
		},
		{
			// node-2's endpoint goes down: on node-1 only the
			// short-circuit loses it.
			name: "both policies Local: the short-circuit",
			old:  dfPlans(one, webBothLocal),
			new:  dfPlans(one, webBothLocalDown),
			services: []ServiceDiff{{
				Namespace: "shop", Name: "web", Change: DiffChanged,
				Ports: []PortDiff{{
					PortInfo: PortInfo{Name: "http", Protocol: "TCP", Port: 80, NodePort: 30080, TargetPorts: []uint16{8080}, EndpointCount: 2, ReadyCount: 1},
					Change:   DiffChanged,
					Endpoints: []EndpointDiff{{
						Endpoint: dfAP("10.244.2.7:8080"), Change: DiffChanged, NodeName: "node-2",
						Fields: []FieldChange{{Field: "state", Old: "ready", New: "not ready"}},
					}},
					Forwarding: []ForwardingChange{{Traffic: TrafficShortCircuit, Change: DiffRemoved, Endpoint: dfAP("10.244.2.7:8080")}},
				}},
			}},
			// The cluster IP's service-ips element now goes to the
			// service chain (the short-circuit set is the cluster set),
			// 10.244.2.7's hairpin element goes, and the endpoint map
			// holds one endpoint instead of two.
			nodes: []NodeDiff{{Name: "node-1", DataPlane: DataPlaneChanges{ElementsAdded: 2, ElementsRemoved: 4}}},
		},
		{
			name: "cluster IP changes: DNS and env",
			old:  dfPlans(one, web),
			new:  dfPlans(one, webMoved),
			services: []ServiceDiff{{
				Namespace: "shop", Name: "web", Change: DiffChanged,
				Fields: []FieldChange{{Field: "clusterIPs", Old: "10.96.0.10", New: "10.96.0.11"}},
			}},
			dns: []ZoneDiff{
				{
					Zone: "10.in-addr.arpa.", Change: DiffChanged,
					Added:   []DNSRecord{dfRec("11.0.96.10.in-addr.arpa.", "PTR", "web.shop.svc.cluster.local.")},
					Removed: []DNSRecord{dfRec("10.0.96.10.in-addr.arpa.", "PTR", "web.shop.svc.cluster.local.")},
				},
				{
					Zone: "cluster.local.", Change: DiffChanged,
					Added:   []DNSRecord{dfRec("web.shop.svc.cluster.local.", "A", "10.96.0.11")},
					Removed: []DNSRecord{dfRec("web.shop.svc.cluster.local.", "A", "10.96.0.10")},
				},
			},
			env: []EnvDiff{{Namespace: "shop", Change: DiffChanged, Changed: []EnvChange{
				{Name: "WEB_PORT", Old: "tcp://10.96.0.10:80", New: "tcp://10.96.0.11:80"},
				{Name: "WEB_PORT_80_TCP", Old: "tcp://10.96.0.10:80", New: "tcp://10.96.0.11:80"},
				{Name: "WEB_PORT_80_TCP_ADDR", Old: "10.96.0.10", New: "10.96.0.11"},
				{Name: "WEB_SERVICE_HOST", Old: "10.96.0.10", New: "10.96.0.11"},
			}}},
			nodes: []NodeDiff{{Name: "node-1", DataPlane: DataPlaneChanges{ElementsAdded: 3, ElementsRemoved: 3}}},
		},
		{
			name: "port number changes: env and SRV",
			old:  dfPlans(one, web),
			new:  dfPlans(one, webPort),
			services: []ServiceDiff{{
				Namespace: "shop", Name: "web", Change: DiffChanged,
				Ports: []PortDiff{{
					PortInfo: PortInfo{Name: "http", Protocol: "TCP", Port: 8000, TargetPorts: []uint16{8080}, EndpointCount: 1, ReadyCount: 1},
					Change:   DiffChanged,
					Fields:   []FieldChange{{Field: "port", Old: "80", New: "8000"}},
				}},
			}},
			dns: []ZoneDiff{{
				Zone: "cluster.local.", Change: DiffChanged,
				Added: []DNSRecord{
					dfRec("_http._tcp.web.shop.svc.cluster.local.", "SRV", "0 100 8000 web.shop.svc.cluster.local."),
					dfRec("web.shop.svc.cluster.local.", "SRV", "0 100 8000 web.shop.svc.cluster.local."),
				},
				Removed: []DNSRecord{
					dfRec("_http._tcp.web.shop.svc.cluster.local.", "SRV", "0 100 80 web.shop.svc.cluster.local."),
					dfRec("web.shop.svc.cluster.local.", "SRV", "0 100 80 web.shop.svc.cluster.local."),
				},
			}},
			env: []EnvDiff{{
				Namespace: "shop", Change: DiffChanged,
				Added: []EnvVar{
					{Name: "WEB_PORT_8000_TCP", Value: "tcp://10.96.0.10:8000"},
					{Name: "WEB_PORT_8000_TCP_ADDR", Value: "10.96.0.10"},
					{Name: "WEB_PORT_8000_TCP_PORT", Value: "8000"},
					{Name: "WEB_PORT_8000_TCP_PROTO", Value: "tcp"},
				},
				Removed: []EnvVar{
					{Name: "WEB_PORT_80_TCP", Value: "tcp://10.96.0.10:80"},
					{Name: "WEB_PORT_80_TCP_ADDR", Value: "10.96.0.10"},
					{Name: "WEB_PORT_80_TCP_PORT", Value: "80"},
					{Name: "WEB_PORT_80_TCP_PROTO", Value: "tcp"},
				},
				Changed: []EnvChange{
					{Name: "WEB_PORT", Old: "tcp://10.96.0.10:80", New: "tcp://10.96.0.10:8000"},
					{Name: "WEB_SERVICE_PORT", Old: "80", New: "8000"},
					{Name: "WEB_SERVICE_PORT_HTTP", Old: "80", New: "8000"},
				},
			}},
			nodes: []NodeDiff{{Name: "node-1", DataPlane: DataPlaneChanges{ElementsAdded: 2, ElementsRemoved: 2}}},
		},
		{
			// externalTrafficPolicy Local: the policy change is the same
			// everywhere, which endpoints external traffic loses is not.
			name: "Local policy: node-specific forwarding",
			old:  dfPlans(two, webNP),
			new:  dfPlans(two, webNPLocal),
			services: []ServiceDiff{
				{
					Namespace: "shop", Name: "web", Change: DiffChanged,
					Fields: []FieldChange{{Field: "externalTrafficPolicy", Old: "Cluster", New: "Local"}},
				},
				{
					Namespace: "shop", Name: "web", Node: "node-1", Change: DiffChanged,
					Ports: []PortDiff{{
						PortInfo:   PortInfo{Name: "http", Protocol: "TCP", Port: 80, NodePort: 30080, TargetPorts: []uint16{8080}, EndpointCount: 2, ReadyCount: 2},
						Change:     DiffChanged,
						Forwarding: []ForwardingChange{{Traffic: TrafficExternal, Change: DiffRemoved, Endpoint: dfAP("10.244.2.7:8080")}},
					}},
				},
				{
					Namespace: "shop", Name: "web", Node: "node-2", Change: DiffChanged,
					Ports: []PortDiff{{
						PortInfo:   PortInfo{Name: "http", Protocol: "TCP", Port: 80, NodePort: 30080, TargetPorts: []uint16{8080}, EndpointCount: 2, ReadyCount: 2},
						Change:     DiffChanged,
						Forwarding: []ForwardingChange{{Traffic: TrafficExternal, Change: DiffRemoved, Endpoint: dfAP("10.244.1.5:8080")}},
					}},
				},
			},
			nodes: []NodeDiff{
				{Name: "node-1", DataPlane: DataPlaneChanges{ChainsAdded: 1, ChainsChanged: 1, ElementsAdded: 1}},
				{Name: "node-2", DataPlane: DataPlaneChanges{ChainsAdded: 1, ChainsChanged: 1, ElementsAdded: 1}},
			},
		},
		{
			name: "node added and removed",
			old:  dfPlans([]plan.Node{dfNode1}, web),
			new:  dfPlans([]plan.Node{dfNode2}, web),
			nodes: []NodeDiff{
				{Name: "node-1", Change: DiffRemoved, DataPlane: DataPlaneChanges{ChainsRemoved: 29, ElementsRemoved: 6}},
				{Name: "node-2", Change: DiffAdded, DataPlane: DataPlaneChanges{ChainsAdded: 29, ElementsAdded: 6}},
			},
		},
		{
			name:  "node zone changes",
			old:   dfPlans(one, web),
			new:   dfPlans([]plan.Node{{Name: "node-1", Zone: "c", IPs: dfNode1.IPs}}, web),
			nodes: []NodeDiff{{Name: "node-1", Fields: []FieldChange{{Field: "zone", Old: "a", New: "c"}}}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Diff(tc.old, tc.new)
			if got := d.Empty(); got != tc.empty {
				t.Errorf("Empty() = %v, want %v", got, tc.empty)
			}
			if diff := cmp.Diff(tc.services, d.Services, dfCmpOpts); diff != "" {
				t.Errorf("services (-want +got):\n%s", diff)
			}
			if len(d.Cluster) > 0 {
				t.Errorf("cluster changes: %v", d.Cluster)
			}
			if !slices.Contains(tc.ignore, "dns") {
				if diff := cmp.Diff(tc.dns, d.DNS, dfCmpOpts); diff != "" {
					t.Errorf("dns (-want +got):\n%s", diff)
				}
			}
			if !slices.Contains(tc.ignore, "env") {
				if diff := cmp.Diff(tc.env, d.Env, dfCmpOpts); diff != "" {
					t.Errorf("env (-want +got):\n%s", diff)
				}
			}
			if !slices.Contains(tc.ignore, "nodes") {
				if diff := cmp.Diff(tc.nodes, d.Nodes, dfCmpOpts); diff != "" {
					t.Errorf("nodes (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestDiffAffinityTimeout: a ClientIP affinity's timeout is the
// declaration of its sets, which are created anew: the data plane
// changes though no chain or element does.
func TestDiffAffinityTimeout(t *testing.T) {
	web := func(seconds int32) plan.Service {
		s := dfSvc("web", "10.96.0.10", dfEP("10.244.1.5", "node-1"))
		s.AffinitySeconds = seconds
		return s
	}
	d := Diff(dfPlans([]plan.Node{dfNode1}, web(10800)), dfPlans([]plan.Node{dfNode1}, web(60)))
	want := []NodeDiff{{Name: "node-1", DataPlane: DataPlaneChanges{SetsChanged: 1}}}
	if diff := cmp.Diff(want, d.Nodes, dfCmpOpts); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	if got, want := dataPlanePhrase(d.Nodes[0].DataPlane), "1 set declared anew"; got != want {
		t.Errorf("dataPlanePhrase = %q, want %q", got, want)
	}
}

// TestDiffCluster: cluster-wide settings are reported once; a TTL change
// does not list every record again.
func TestDiffCluster(t *testing.T) {
	web := dfSvc("web", "10.96.0.10", dfEP("10.244.1.5", "node-1"))
	old := dfPlans([]plan.Node{dfNode1, dfNode2}, web)
	new := dfPlans([]plan.Node{dfNode1, dfNode2}, web)
	for _, p := range new {
		p.Cluster.DNSTTL = 30
		p.Cluster.DNSAddress = netip.MustParseAddr("169.254.20.10")
		compiler.Complete(p, []string{"shop"})
	}
	d := Diff(old, new)
	want := []FieldChange{{Field: "dnsTTL", Old: "5", New: "30"}, {Field: "dnsAddress", Old: "none", New: "169.254.20.10"}}
	if diff := cmp.Diff(want, d.Cluster); diff != "" {
		t.Errorf("cluster (-want +got):\n%s", diff)
	}
	if len(d.DNS) != 0 {
		t.Errorf("dns: %+v, want none", d.DNS)
	}
	if d.Empty() {
		t.Error("Empty() = true")
	}
}

// TestDiffDeterministic: the same input gives the same bytes, however the
// maps were built and whatever order Go iterates them in.
func TestDiffDeterministic(t *testing.T) {
	var svcs []plan.Service
	for i, name := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		ip := netip.AddrFrom4([4]byte{10, 96, 1, byte(i + 1)}).String()
		svcs = append(svcs, dfNodePort(dfSvc(name, ip,
			dfEP(netip.AddrFrom4([4]byte{10, 244, 1, byte(i + 1)}).String(), "node-1"),
			dfEP(netip.AddrFrom4([4]byte{10, 244, 2, byte(i + 1)}).String(), "node-2"),
		), uint16(30000+i), i%2 == 0))
	}
	nodes := []plan.Node{dfNode1, dfNode2, {Name: "node-3", Zone: "a"}}
	var changed []plan.Service
	for i, s := range svcs {
		switch i % 4 {
		case 0: // removed
		case 1:
			s.ExternalLocal = !s.ExternalLocal
			changed = append(changed, s)
		case 2:
			s.Ports = slices.Clone(s.Ports)
			s.Ports[0].Endpoints = []plan.Endpoint{dfNotReady(s.Ports[0].Endpoints[0]), s.Ports[0].Endpoints[1]}
			changed = append(changed, s)
		default:
			changed = append(changed, s)
		}
	}
	changed = append(changed, dfSvc("z", "10.96.9.9", dfEP("10.244.3.1", "node-3")))
	var first []byte
	for i := range 20 {
		d := Diff(dfPlans(nodes, svcs...), dfPlans(nodes, changed...))
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = b
			continue
		}
		if string(b) != string(first) {
			t.Fatalf("run %d differs:\n%s\nfirst:\n%s", i, b, first)
		}
	}
}

// TestDiffJSONNames pins the JSON field names, which scripts depend on.
func TestDiffJSONNames(t *testing.T) {
	web := dfSvc("web", "10.96.0.10", dfEP("10.244.1.5", "node-1"))
	d := Diff(dfPlans([]plan.Node{dfNode1}, web), dfPlans([]plan.Node{dfNode1}, dfSvc("web", "10.96.0.10", dfEP("10.244.1.5", "node-1"), dfEP("10.244.1.9", "node-1"))))
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"nodes":[{"name":"node-1","dataPlane":{"chainsAdded":0,"chainsRemoved":0,"chainsChanged":0,"elementsAdded":3,"elementsRemoved":1}}],` +
		`"services":[{"namespace":"shop","name":"web","change":"changed","ports":[{"name":"http","protocol":"TCP","port":80,"targetPorts":[8080],"endpointCount":2,"readyCount":2,"change":"changed",` +
		`"endpointChanges":[{"endpoint":"10.244.1.9:8080","change":"added","ready":true,"serving":true,"terminating":false,"nodeName":"node-1"}]}]}]}`
	if string(b) != want {
		t.Errorf("JSON:\n%s\nwant:\n%s", b, want)
	}
}

// TestDiffWithoutDataPlane: DiffWithoutDataPlane is Diff with every node's
// data-plane counts zero, and nothing else missing.
func TestDiffWithoutDataPlane(t *testing.T) {
	one := []plan.Node{dfNode1}
	two := []plan.Node{dfNode1, dfNode2}
	web := dfSvc("web", "10.96.0.10", dfEP("10.244.1.5", "node-1"))
	cart := dfSvc("cart", "10.96.14.3", dfEP("10.244.1.6", "node-1"), dfEP("10.244.2.8", "node-2"))
	tests := []struct {
		name     string
		old, new map[string]*plan.Plan
	}{
		{name: "no change", old: dfPlans(two, web, cart), new: dfPlans(two, web, cart)},
		{name: "service added", old: dfPlans(one, web), new: dfPlans(one, web, cart)},
		{name: "first install", old: dfPlans(one), new: dfPlans(one, web, cart)},
		{name: "node added", old: dfPlans(one, web), new: dfPlans(two, web, dfNodePort(cart, 30080, true))},
	}
	counted := false
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := Diff(tc.old, tc.new)
			for i := range want.Nodes {
				counted = counted || !want.Nodes[i].DataPlane.Zero()
				want.Nodes[i].DataPlane = DataPlaneChanges{}
			}
			got := DiffWithoutDataPlane(tc.old, tc.new)
			if diff := cmp.Diff(want, got, dfCmpOpts); diff != "" {
				t.Errorf("DiffWithoutDataPlane differs from Diff without its counts (-want +got):\n%s", diff)
			}
		})
	}
	if !counted {
		t.Error("no case has data-plane counts: the comparison proves nothing")
	}
}
