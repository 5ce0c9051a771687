package compiler_test

import (
	"errors"
	"io/fs"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/internal/diag"
	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/schema"
)

// The tests of this file compile examples/kitchen-sink, which uses every
// Service feature on three nodes (node-1 and node-2 in zone-a, node-3 in
// zone-b), and check the Plans: the Services, the endpoints each node
// forwards to (also by walking packets through Plan.Trace), the DNS
// records and the environment variables. Cluster IPs and node ports that
// the tree leaves out are those of examples/kitchen-sink/netspec.lock.
//
// The trees under testdata/ show compiler bugs, one per directory.

const kitchenSink = "../examples/kitchen-sink"

var kitchenSinkNodes = []string{"node-1", "node-2", "node-3"}

// compiled is a tree loaded, validated and compiled for some nodes.
type compiled struct {
	tree    *schema.Tree
	lock    *compiler.Lock
	checked *compiler.Checked
	plans   map[string]*plan.Plan
}

// compileTree loads dir with its netspec.lock (when it has one), validates
// it and compiles it for each node.
func compileTree(dir string, nodes ...string) (*compiled, error) {
	tr, err := schema.Load(dir, schema.Options{})
	if err != nil {
		return nil, err
	}
	if tr.Diags.Errors() > 0 {
		return nil, tr.Diags.Err()
	}
	c := &compiled{tree: tr, plans: map[string]*plan.Plan{}}
	data, err := os.ReadFile(filepath.Join(dir, "netspec.lock"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		if c.lock, err = compiler.ParseLock(data); err != nil {
			return nil, err
		}
	}
	c.checked = compiler.Validate(tr.Objects, c.lock, tr)
	if c.checked.Diags.Errors() > 0 {
		return nil, c.checked.Diags.Err()
	}
	for _, n := range nodes {
		if c.plans[n], err = compiler.Compile(tr.Objects, c.checked, n); err != nil {
			return nil, err
		}
	}
	return c, nil
}

var kitchen struct {
	once sync.Once
	c    *compiled
	err  error
}

// kitchenSinkPlans compiles examples/kitchen-sink once for all tests.
func kitchenSinkPlans(t *testing.T) *compiled {
	t.Helper()
	kitchen.once.Do(func() { kitchen.c, kitchen.err = compileTree(kitchenSink, kitchenSinkNodes...) })
	if kitchen.err != nil {
		t.Fatalf("%s: %v", kitchenSink, kitchen.err)
	}
	return kitchen.c
}

func mustTree(t *testing.T, dir string, nodes ...string) *compiled {
	t.Helper()
	c, err := compileTree(dir, nodes...)
	if err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	return c
}

func findService(t *testing.T, p *plan.Plan, key string) *plan.Service {
	t.Helper()
	for i := range p.Services {
		if p.Services[i].Key() == key {
			return &p.Services[i]
		}
	}
	t.Fatalf("node %s: no Service %s in the plan", p.Node.Name, key)
	return nil
}

func findPort(t *testing.T, s *plan.Service, name, protocol string) *plan.Port {
	t.Helper()
	for i := range s.Ports {
		if s.Ports[i].Name == name && s.Ports[i].Protocol == protocol {
			return &s.Ports[i]
		}
	}
	t.Fatalf("Service %s has no port %q/%s", s.Key(), name, protocol)
	return nil
}

// addrs turns a set of endpoint indexes into "ip:port" strings.
func addrs(p *plan.Port, set []int) []string {
	var out []string
	for _, i := range set {
		out = append(out, p.Endpoints[i].AddrPort().String())
	}
	return out
}

func addrPorts(s ...string) []netip.AddrPort {
	var out []netip.AddrPort
	for _, a := range s {
		out = append(out, netip.MustParseAddrPort(a))
	}
	return out
}

var equateNetip = cmpopts.EquateComparable(netip.Addr{}, netip.AddrPort{}, netip.Prefix{})

// ---- the tree ----

// warningsOf returns the warnings among diags, as printed.
func warningsOf(diags diag.List) []string {
	var out []string
	for _, d := range diags {
		if d.Severity == diag.Warning {
			out = append(out, d.String())
		}
	}
	return out
}

func TestKitchenSinkValidates(t *testing.T) {
	c := kitchenSinkPlans(t)
	warnings := warningsOf(c.checked.Diags)
	want := []string{
		// db-2 shows a not-ready endpoint of a headless Service.
		`headless/pods.yaml:69:3: warning: status.conditions: Pod data/db-2 is not Ready (no condition type Ready with status "True"), so Service data/db sends it no traffic; add that condition to status.conditions`,
		"no-endpoints/service.yaml:10:5: warning: spec.selector: matches no Pod in namespace shop, so the Service has no endpoints",
	}
	if diff := cmp.Diff(want, warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	if c.lock == nil {
		t.Fatalf("%s has no netspec.lock; run netspec lock", kitchenSink)
	}
	if diff := compiler.LockDiff(c.lock, c.checked.Alloc.Lock()); len(diff) > 0 {
		t.Errorf("netspec.lock is not up to date (run netspec lock %s):\n%s", kitchenSink, strings.Join(diff, "\n"))
	}
	for _, n := range kitchenSinkNodes {
		if got := len(c.plans[n].Services); got != 28 {
			t.Errorf("node %s: %d services, want 28", n, got)
		}
		// shop/storage is another proxy's: its endpoints are listed,
		// and no traffic of the node goes to them.
		for _, s := range c.plans[n].Services {
			if s.Key() != "shop/storage" {
				continue
			}
			if s.ProxyName != "multus-proxy" || s.Proxied() || len(s.Ports) != 1 || len(s.Ports[0].Endpoints) != 2 ||
				s.Ports[0].Cluster != nil || s.Ports[0].External != nil || s.Ports[0].ShortCircuit != nil {
				t.Errorf("node %s: shop/storage is %+v, want proxy multus-proxy, 2 endpoints and no endpoint sets", n, s)
			}
		}
	}
}

// ---- services ----

// serviceShape is what a Service of the Plan holds apart from endpoints:
// the same on every node.
type serviceShape struct {
	Type            string
	ClusterIPs      []string
	Headless        bool
	ExternalName    string
	ExternalIPs     []string
	LoadBalancerIPs []string
	SourceRanges    []string
	AffinitySeconds int32
	InternalLocal   bool
	ExternalLocal   bool
	HealthCheck     uint16 // HealthCheckNodePort
	Ports           []portShape
}

type portShape struct {
	Name     string
	Protocol string
	Port     uint16
	NodePort uint16
}

func strs[T interface{ String() string }](in []T) []string {
	var out []string
	for _, v := range in {
		out = append(out, v.String())
	}
	return out
}

func shapeOf(s *plan.Service) serviceShape {
	sh := serviceShape{
		Type:            s.Type,
		ClusterIPs:      strs(s.ClusterIPs),
		Headless:        s.Headless,
		ExternalName:    s.ExternalName,
		ExternalIPs:     strs(s.ExternalIPs),
		LoadBalancerIPs: strs(s.LoadBalancerIPs),
		SourceRanges:    strs(s.SourceRanges),
		AffinitySeconds: s.AffinitySeconds,
		InternalLocal:   s.InternalLocal,
		ExternalLocal:   s.ExternalLocal,
		HealthCheck:     s.HealthCheckNodePort,
	}
	for _, p := range s.Ports {
		sh.Ports = append(sh.Ports, portShape{Name: p.Name, Protocol: p.Protocol, Port: p.Port, NodePort: p.NodePort})
	}
	return sh
}

func TestKitchenSinkServices(t *testing.T) {
	c := kitchenSinkPlans(t)
	http80 := []portShape{{Name: "http", Protocol: "TCP", Port: 80}}
	tests := []struct {
		feature string
		service string
		want    serviceShape
	}{
		{
			feature: "ClusterIP, allocated from the lock, unnamed port",
			service: "shop/api",
			want:    serviceShape{Type: "ClusterIP", ClusterIPs: []string{"10.101.64.11"}, Ports: []portShape{{Protocol: "TCP", Port: 80}}},
		},
		{
			feature: "multi-port, in spec order",
			service: "shop/cart",
			want: serviceShape{Type: "ClusterIP", ClusterIPs: []string{"10.96.0.30"}, Ports: []portShape{
				{Name: "http", Protocol: "TCP", Port: 80},
				{Name: "grpc", Protocol: "TCP", Port: 9090},
				{Name: "metrics", Protocol: "TCP", Port: 9100},
			}},
		},
		{
			feature: "named targetPort",
			service: "shop/web",
			want:    serviceShape{Type: "ClusterIP", ClusterIPs: []string{"10.96.0.10"}, Ports: http80},
		},
		{
			feature: "UDP and TCP on one port number",
			service: "infra/dns",
			want: serviceShape{Type: "ClusterIP", ClusterIPs: []string{"10.96.0.53"}, Ports: []portShape{
				{Name: "dns", Protocol: "UDP", Port: 53},
				{Name: "dns-tcp", Protocol: "TCP", Port: 53},
			}},
		},
		{
			feature: "SCTP",
			service: "telecom/diameter",
			want:    serviceShape{Type: "ClusterIP", ClusterIPs: []string{"10.103.102.215"}, Ports: []portShape{{Name: "diameter", Protocol: "SCTP", Port: 3868}}},
		},
		{
			feature: "headless with selector: no cluster IP",
			service: "data/db",
			want:    serviceShape{Type: "ClusterIP", Headless: true, Ports: []portShape{{Name: "postgres", Protocol: "TCP", Port: 5432}}},
		},
		{
			feature: "headless without selector",
			service: "data/legacy-db",
			want:    serviceShape{Type: "ClusterIP", Headless: true, Ports: []portShape{{Name: "mysql", Protocol: "TCP", Port: 3306}}},
		},
		{
			feature: "headless without ready endpoints",
			service: "data/standby-db",
			want:    serviceShape{Type: "ClusterIP", Headless: true, Ports: []portShape{{Name: "mysql", Protocol: "TCP", Port: 3306}}},
		},
		{
			feature: "ExternalName: no addresses, no ports",
			service: "shop/search",
			want:    serviceShape{Type: "ExternalName", ExternalName: "search.example.com"},
		},
		{
			feature: "NodePort auto-allocated",
			service: "shop/admin",
			want:    serviceShape{Type: "NodePort", ClusterIPs: []string{"10.110.227.110"}, Ports: []portShape{{Name: "http", Protocol: "TCP", Port: 80, NodePort: 30890}}},
		},
		{
			feature: "NodePort explicit",
			service: "shop/storefront",
			want:    serviceShape{Type: "NodePort", ClusterIPs: []string{"10.105.247.247"}, Ports: []portShape{{Name: "http", Protocol: "TCP", Port: 80, NodePort: 30080}}},
		},
		{
			feature: "LoadBalancer with source ranges and an ingress IP",
			service: "edge/gateway",
			want: serviceShape{
				Type: "LoadBalancer", ClusterIPs: []string{"10.101.113.56"},
				LoadBalancerIPs: []string{"203.0.113.100"}, SourceRanges: []string{"198.51.100.0/24"},
				Ports: []portShape{{Name: "https", Protocol: "TCP", Port: 443, NodePort: 32631}},
			},
		},
		{
			feature: "LoadBalancer with policy Local: a health check node port",
			service: "edge/gateway-local",
			want: serviceShape{
				Type: "LoadBalancer", ClusterIPs: []string{"10.101.111.6"}, LoadBalancerIPs: []string{"203.0.113.101"},
				ExternalLocal: true, HealthCheck: 32681,
				Ports: []portShape{{Name: "https", Protocol: "TCP", Port: 443, NodePort: 32133}},
			},
		},
		{
			feature: "externalIPs",
			service: "shop/portal",
			want:    serviceShape{Type: "ClusterIP", ClusterIPs: []string{"10.110.225.3"}, ExternalIPs: []string{"203.0.113.10"}, Ports: http80},
		},
		{
			feature: "ClientIP affinity",
			service: "shop/session",
			want:    serviceShape{Type: "ClusterIP", ClusterIPs: []string{"10.105.57.89"}, AffinitySeconds: 600, Ports: http80},
		},
		{
			feature: "externalTrafficPolicy Local",
			service: "edge/ingress",
			want: serviceShape{
				Type: "NodePort", ClusterIPs: []string{"10.106.62.251"}, ExternalLocal: true,
				Ports: []portShape{{Name: "https", Protocol: "TCP", Port: 443, NodePort: 30443}},
			},
		},
		{
			feature: "internalTrafficPolicy Local",
			service: "infra/node-agent",
			want:    serviceShape{Type: "ClusterIP", ClusterIPs: []string{"10.110.197.11"}, InternalLocal: true, Ports: []portShape{{Name: "trace", Protocol: "TCP", Port: 8126}}},
		},
		{
			feature: "terminating fallback",
			service: "shop/checkout",
			want:    serviceShape{Type: "ClusterIP", ClusterIPs: []string{"10.105.119.139"}, Ports: http80},
		},
		{
			feature: "zone hints",
			service: "shop/catalog",
			want:    serviceShape{Type: "ClusterIP", ClusterIPs: []string{"10.105.50.224"}, Ports: http80},
		},
		{
			feature: "no endpoints",
			service: "shop/reports",
			want:    serviceShape{Type: "ClusterIP", ClusterIPs: []string{"10.104.172.164"}, Ports: http80},
		},
		{
			feature: "dual-stack RequireDualStack, IPv4 first",
			service: "shop/frontend",
			want:    serviceShape{Type: "ClusterIP", ClusterIPs: []string{"10.96.0.120", "fd00:10:96::120"}, Ports: http80},
		},
		{
			feature: "dual-stack PreferDualStack, IPv6 first",
			service: "shop/frontend-v6",
			want:    serviceShape{Type: "ClusterIP", ClusterIPs: []string{"fd00:10:96::e67", "10.97.184.250"}, Ports: http80},
		},
		{
			feature: "hairpin",
			service: "shop/echo",
			want:    serviceShape{Type: "ClusterIP", ClusterIPs: []string{"10.100.207.92"}, Ports: http80},
		},
		{
			feature: "trafficDistribution PreferSameZone",
			service: "shop/recommend",
			want:    serviceShape{Type: "ClusterIP", ClusterIPs: []string{"10.110.194.205"}, Ports: http80},
		},
		{
			feature: "publishNotReadyAddresses",
			service: "data/etcd",
			want: serviceShape{Type: "ClusterIP", Headless: true, Ports: []portShape{
				{Name: "client", Protocol: "TCP", Port: 2379},
				{Name: "peer", Protocol: "TCP", Port: 2380},
			}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.feature, func(t *testing.T) {
			for _, n := range kitchenSinkNodes {
				got := shapeOf(findService(t, c.plans[n], tc.service))
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("node %s, %s (-want +got):\n%s", n, tc.service, diff)
				}
			}
		})
	}
}

// TestKitchenSinkPlanOrder checks that Services are in namespace/name
// order and every port's endpoints in address order.
func TestKitchenSinkPlanOrder(t *testing.T) {
	c := kitchenSinkPlans(t)
	for _, n := range kitchenSinkNodes {
		p := c.plans[n]
		if !slices.IsSortedFunc(p.Services, func(a, b plan.Service) int {
			return strings.Compare(a.Namespace+"\x00"+a.Name, b.Namespace+"\x00"+b.Name)
		}) {
			t.Errorf("node %s: Services are not in namespace/name order", n)
		}
		for _, s := range p.Services {
			for _, port := range s.Ports {
				if !slices.IsSortedFunc(port.Endpoints, func(a, b plan.Endpoint) int { return a.AddrPort().Compare(b.AddrPort()) }) {
					t.Errorf("node %s: %s port %q: endpoints are not in address order", n, s.Key(), port.Name)
				}
				for _, set := range [][]int{port.Cluster, port.External} {
					if !slices.IsSorted(set) {
						t.Errorf("node %s: %s port %q: endpoint set %v is not sorted", n, s.Key(), port.Name, set)
					}
				}
			}
		}
	}
}

// ---- endpoints ----

// endpointShape is an Endpoint of the Plan, written for reading.
type endpointShape struct {
	Addr                        string
	Ready, Serving, Terminating bool
	Node, Zone, Hostname        string
	ZoneHints                   []string
	Pod                         string
}

func endpointShapes(p *plan.Port) []endpointShape {
	var out []endpointShape
	for _, e := range p.Endpoints {
		out = append(out, endpointShape{
			Addr: e.AddrPort().String(), Ready: e.Ready, Serving: e.Serving, Terminating: e.Terminating,
			Node: e.NodeName, Zone: e.Zone, Hostname: e.Hostname(), ZoneHints: e.ZoneHints(), Pod: e.Pod,
		})
	}
	return out
}

// TestKitchenSinkEndpoints checks every endpoint of a port with its state;
// endpoints do not depend on the node.
func TestKitchenSinkEndpoints(t *testing.T) {
	c := kitchenSinkPlans(t)
	ready := func(addr, node, zone, pod string) endpointShape {
		return endpointShape{Addr: addr, Ready: true, Serving: true, Node: node, Zone: zone, Pod: pod}
	}
	tests := []struct {
		feature  string
		service  string
		port     string
		protocol string
		want     []endpointShape
		ignore   []string // endpointShape fields not checked
	}{
		{
			feature: "ClusterIP: a numeric targetPort",
			service: "shop/api", port: "", protocol: "TCP",
			want: []endpointShape{
				ready("10.244.1.10:8080", "node-1", "zone-a", "shop/api-7f9c-1"),
				ready("10.244.3.10:8080", "node-3", "zone-b", "shop/api-7f9c-2"),
			},
		},
		{
			feature: "multi-port: a named targetPort on one port",
			service: "shop/cart", port: "grpc", protocol: "TCP",
			want: []endpointShape{
				ready("10.244.2.20:9090", "node-2", "zone-a", "shop/cart-5d8b-1"),
				ready("10.244.3.20:9090", "node-3", "zone-b", "shop/cart-5d8b-2"),
			},
		},
		{
			feature: "named targetPort that differs per pod; a pod without the name serves nothing",
			service: "shop/web", port: "http", protocol: "TCP",
			want: []endpointShape{
				ready("10.244.1.5:8080", "node-1", "zone-a", "shop/web-v1-1"),
				ready("10.244.2.5:8081", "node-2", "zone-a", "shop/web-v2-1"),
			},
		},
		{
			feature: "UDP: named container port of protocol UDP",
			service: "infra/dns", port: "dns", protocol: "UDP",
			want: []endpointShape{
				ready("10.244.1.53:53", "node-1", "zone-a", "infra/coredns-1"),
				ready("10.244.2.53:53", "node-2", "zone-a", "infra/coredns-2"),
			},
		},
		{
			feature: "SCTP",
			service: "telecom/diameter", port: "diameter", protocol: "SCTP",
			want: []endpointShape{ready("10.244.3.68:3868", "node-3", "zone-b", "telecom/diameter-1")},
		},
		{
			feature: "headless with selector: hostnames from hostname+subdomain, a not-ready pod",
			service: "data/db", port: "postgres", protocol: "TCP",
			want: []endpointShape{
				{Addr: "10.244.1.30:5432", Ready: true, Serving: true, Node: "node-1", Zone: "zone-a", Hostname: "db-0", Pod: "data/db-0"},
				{Addr: "10.244.2.30:5432", Ready: true, Serving: true, Node: "node-2", Zone: "zone-a", Hostname: "db-1", Pod: "data/db-1"},
				{Addr: "10.244.3.30:5432", Node: "node-3", Zone: "zone-b", Hostname: "db-2", Pod: "data/db-2"},
			},
		},
		{
			feature: "headless without selector: EndpointSlice hostnames",
			service: "data/legacy-db", port: "mysql", protocol: "TCP",
			want: []endpointShape{
				{Addr: "192.168.20.10:3306", Ready: true, Serving: true, Hostname: "mysql-a"},
				{Addr: "192.168.20.11:3306", Ready: true, Serving: true, Hostname: "mysql-b"},
			},
		},
		{
			feature: "terminating: slice conditions",
			service: "shop/checkout", port: "http", protocol: "TCP",
			want: []endpointShape{
				{Addr: "10.244.1.100:8080", Serving: true, Terminating: true, Node: "node-1", Zone: "zone-a"},
				{Addr: "10.244.2.100:8080", Serving: true, Terminating: true, Node: "node-2", Zone: "zone-a"},
				{Addr: "10.244.3.100:8080", Terminating: true, Node: "node-3", Zone: "zone-b"},
			},
		},
		{
			feature: "zone hints",
			service: "shop/catalog", port: "http", protocol: "TCP",
			want: []endpointShape{
				{Addr: "10.244.1.110:8080", Ready: true, Serving: true, Node: "node-1", Zone: "zone-a", ZoneHints: []string{"zone-a"}},
				{Addr: "10.244.2.110:8080", Ready: true, Serving: true, Node: "node-2", Zone: "zone-a", ZoneHints: []string{"zone-a"}},
				{Addr: "10.244.3.110:8080", Ready: true, Serving: true, Node: "node-3", Zone: "zone-b", ZoneHints: []string{"zone-b"}},
			},
		},
		{
			feature: "no endpoints",
			service: "shop/reports", port: "http", protocol: "TCP",
			want: nil,
		},
		{
			feature: "dual-stack: both families of each pod",
			service: "shop/frontend", port: "http", protocol: "TCP",
			want: []endpointShape{
				ready("10.244.1.120:8080", "node-1", "zone-a", "shop/frontend-1"),
				ready("10.244.3.120:8080", "node-3", "zone-b", "shop/frontend-2"),
				ready("[fd00:10:244:1::120]:8080", "node-1", "zone-a", "shop/frontend-1"),
				ready("[fd00:10:244:3::120]:8080", "node-3", "zone-b", "shop/frontend-2"),
			},
		},
		{
			// Serving is not checked: Kubernetes sets it to the pod's
			// readiness, netspec to ready (see the report); routing is the same.
			feature: "publishNotReadyAddresses: not-ready pods are ready endpoints",
			service: "data/etcd", port: "peer", protocol: "TCP",
			want: []endpointShape{
				{Addr: "10.244.1.150:2380", Ready: true, Node: "node-1", Zone: "zone-a", Hostname: "etcd-0", Pod: "data/etcd-0"},
				{Addr: "10.244.2.150:2380", Ready: true, Node: "node-2", Zone: "zone-a", Hostname: "etcd-1", Pod: "data/etcd-1"},
				{Addr: "10.244.3.150:2380", Ready: true, Node: "node-3", Zone: "zone-b", Hostname: "etcd-2", Pod: "data/etcd-2"},
			},
			ignore: []string{"Serving"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.feature, func(t *testing.T) {
			opts := cmp.Options{}
			if len(tc.ignore) > 0 {
				opts = append(opts, cmpopts.IgnoreFields(endpointShape{}, tc.ignore...))
			}
			for _, n := range kitchenSinkNodes {
				port := findPort(t, findService(t, c.plans[n], tc.service), tc.port, tc.protocol)
				if diff := cmp.Diff(tc.want, endpointShapes(port), opts); diff != "" {
					t.Errorf("node %s, %s port %q (-want +got):\n%s", n, tc.service, tc.port, diff)
				}
			}
		})
	}
}

// TestKitchenSinkEndpointSets checks which endpoints each node sends
// internal (Cluster) and external traffic to.
func TestKitchenSinkEndpointSets(t *testing.T) {
	c := kitchenSinkPlans(t)
	tests := []struct {
		feature      string
		node         string
		service      string
		port         string
		protocol     string
		wantCluster  []string
		wantExternal []string
	}{
		{
			feature: "ClusterIP: every ready endpoint",
			node:    "node-2", service: "shop/api", port: "", protocol: "TCP",
			wantCluster:  []string{"10.244.1.10:8080", "10.244.3.10:8080"},
			wantExternal: []string{"10.244.1.10:8080", "10.244.3.10:8080"},
		},
		{
			feature: "named targetPort that differs per pod",
			node:    "node-2", service: "shop/web", port: "http", protocol: "TCP",
			wantCluster:  []string{"10.244.1.5:8080", "10.244.2.5:8081"},
			wantExternal: []string{"10.244.1.5:8080", "10.244.2.5:8081"},
		},
		{
			feature: "headless with selector: only ready endpoints",
			node:    "node-3", service: "data/db", port: "postgres", protocol: "TCP",
			wantCluster:  []string{"10.244.1.30:5432", "10.244.2.30:5432"},
			wantExternal: []string{"10.244.1.30:5432", "10.244.2.30:5432"},
		},
		{
			feature: "externalTrafficPolicy Local on node-1: its own endpoint for external traffic",
			node:    "node-1", service: "edge/ingress", port: "https", protocol: "TCP",
			wantCluster:  []string{"10.244.1.80:8443", "10.244.2.80:8443"},
			wantExternal: []string{"10.244.1.80:8443"},
		},
		{
			feature: "externalTrafficPolicy Local on node-2",
			node:    "node-2", service: "edge/ingress", port: "https", protocol: "TCP",
			wantCluster:  []string{"10.244.1.80:8443", "10.244.2.80:8443"},
			wantExternal: []string{"10.244.2.80:8443"},
		},
		{
			feature: "externalTrafficPolicy Local on node-3: none",
			node:    "node-3", service: "edge/ingress", port: "https", protocol: "TCP",
			wantCluster:  []string{"10.244.1.80:8443", "10.244.2.80:8443"},
			wantExternal: nil,
		},
		{
			feature: "LoadBalancer with policy Local on node-3: none",
			node:    "node-3", service: "edge/gateway-local", port: "https", protocol: "TCP",
			wantCluster:  []string{"10.244.1.50:8443", "10.244.2.50:8443"},
			wantExternal: nil,
		},
		{
			feature: "internalTrafficPolicy Local on node-1",
			node:    "node-1", service: "infra/node-agent", port: "trace", protocol: "TCP",
			wantCluster:  []string{"10.244.1.90:8126"},
			wantExternal: []string{"10.244.1.90:8126", "10.244.2.90:8126"},
		},
		{
			feature: "internalTrafficPolicy Local on node-3: none",
			node:    "node-3", service: "infra/node-agent", port: "trace", protocol: "TCP",
			wantCluster:  nil,
			wantExternal: []string{"10.244.1.90:8126", "10.244.2.90:8126"},
		},
		{
			feature: "terminating fallback: serving and terminating, not the one no longer serving",
			node:    "node-3", service: "shop/checkout", port: "http", protocol: "TCP",
			wantCluster:  []string{"10.244.1.100:8080", "10.244.2.100:8080"},
			wantExternal: []string{"10.244.1.100:8080", "10.244.2.100:8080"},
		},
		{
			feature: "zone hints on node-1 (zone-a)",
			node:    "node-1", service: "shop/catalog", port: "http", protocol: "TCP",
			wantCluster:  []string{"10.244.1.110:8080", "10.244.2.110:8080"},
			wantExternal: []string{"10.244.1.110:8080", "10.244.2.110:8080"},
		},
		{
			feature: "zone hints on node-3 (zone-b): only its hinted endpoint",
			node:    "node-3", service: "shop/catalog", port: "http", protocol: "TCP",
			wantCluster:  []string{"10.244.3.110:8080"},
			wantExternal: []string{"10.244.3.110:8080"},
		},
		{
			feature: "no endpoints",
			node:    "node-1", service: "shop/reports", port: "http", protocol: "TCP",
			wantCluster: nil, wantExternal: nil,
		},
		{
			feature: "trafficDistribution PreferSameZone on node-2 (zone-a)",
			node:    "node-2", service: "shop/recommend", port: "http", protocol: "TCP",
			wantCluster:  []string{"10.244.1.140:8080"},
			wantExternal: []string{"10.244.1.140:8080"},
		},
		{
			feature: "trafficDistribution PreferSameZone on node-3 (zone-b)",
			node:    "node-3", service: "shop/recommend", port: "http", protocol: "TCP",
			wantCluster:  []string{"10.244.3.140:8080"},
			wantExternal: []string{"10.244.3.140:8080"},
		},
		{
			feature: "publishNotReadyAddresses: not-ready pods get traffic",
			node:    "node-1", service: "data/etcd", port: "client", protocol: "TCP",
			wantCluster:  []string{"10.244.1.150:2379", "10.244.2.150:2379", "10.244.3.150:2379"},
			wantExternal: []string{"10.244.1.150:2379", "10.244.2.150:2379", "10.244.3.150:2379"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.feature, func(t *testing.T) {
			port := findPort(t, findService(t, c.plans[tc.node], tc.service), tc.port, tc.protocol)
			if diff := cmp.Diff(tc.wantCluster, addrs(port, port.Cluster)); diff != "" {
				t.Errorf("node %s, %s: Cluster (-want +got):\n%s", tc.node, tc.service, diff)
			}
			if diff := cmp.Diff(tc.wantExternal, addrs(port, port.External)); diff != "" {
				t.Errorf("node %s, %s: External (-want +got):\n%s", tc.node, tc.service, diff)
			}
		})
	}
}

// ---- packet walks ----

func TestKitchenSinkTrace(t *testing.T) {
	c := kitchenSinkPlans(t)
	a := netip.MustParseAddr
	const (
		client = "198.51.100.7" // outside the cluster, inside the LoadBalancer's source range
		denied = "192.0.2.10"   // outside the source range
	)
	tests := []struct {
		feature string
		node    string
		pk      plan.Packet
		want    plan.Verdict
	}{
		// ClusterIP.
		{
			feature: "ClusterIP: a pod to api on node-1 forwards to both pods",
			node:    "node-1",
			pk:      plan.Packet{Src: a("10.244.1.200"), Dst: a("10.101.64.11"), Protocol: "TCP", Port: 80},
			want:    plan.Verdict{Action: "dnat", Endpoints: addrPorts("10.244.1.10:8080", "10.244.3.10:8080"), Service: "shop/api"},
		},
		{
			feature: "ClusterIP: the node itself is outside the pod CIDRs and masqueraded",
			node:    "node-1",
			pk:      plan.Packet{Src: a("192.168.10.11"), Dst: a("10.101.64.11"), Protocol: "TCP", Port: 80, FromLocal: true},
			want:    plan.Verdict{Action: "dnat", Endpoints: addrPorts("10.244.1.10:8080", "10.244.3.10:8080"), Masquerade: true, Service: "shop/api"},
		},
		{
			feature: "ClusterIP: a port the Service does not have is rejected",
			node:    "node-1",
			pk:      plan.Packet{Src: a("10.244.1.200"), Dst: a("10.101.64.11"), Protocol: "TCP", Port: 8080},
			want:    plan.Verdict{Action: "reject", Service: "shop/api"},
		},
		// Multi-port.
		{
			feature: "multi-port: http",
			node:    "node-1",
			pk:      plan.Packet{Src: a("10.244.1.200"), Dst: a("10.96.0.30"), Protocol: "TCP", Port: 80},
			want:    plan.Verdict{Action: "dnat", Endpoints: addrPorts("10.244.2.20:8080", "10.244.3.20:8080"), Service: "shop/cart", Port: "http"},
		},
		{
			feature: "multi-port: grpc",
			node:    "node-1",
			pk:      plan.Packet{Src: a("10.244.1.200"), Dst: a("10.96.0.30"), Protocol: "TCP", Port: 9090},
			want:    plan.Verdict{Action: "dnat", Endpoints: addrPorts("10.244.2.20:9090", "10.244.3.20:9090"), Service: "shop/cart", Port: "grpc"},
		},
		{
			feature: "multi-port: metrics",
			node:    "node-1",
			pk:      plan.Packet{Src: a("10.244.1.200"), Dst: a("10.96.0.30"), Protocol: "TCP", Port: 9100},
			want:    plan.Verdict{Action: "dnat", Endpoints: addrPorts("10.244.2.20:9100", "10.244.3.20:9100"), Service: "shop/cart", Port: "metrics"},
		},
		// Named targetPort.
		{
			feature: "named targetPort: on node-2, 10.96.0.10:80/TCP forwards to 8080 on v1 and 8081 on v2",
			node:    "node-2",
			pk:      plan.Packet{Src: a("10.244.2.200"), Dst: a("10.96.0.10"), Protocol: "TCP", Port: 80},
			want:    plan.Verdict{Action: "dnat", Endpoints: addrPorts("10.244.1.5:8080", "10.244.2.5:8081"), Service: "shop/web", Port: "http"},
		},
		// UDP.
		{
			feature: "UDP: DNS over UDP",
			node:    "node-3",
			pk:      plan.Packet{Src: a("10.244.3.200"), Dst: a("10.96.0.53"), Protocol: "UDP", Port: 53},
			want:    plan.Verdict{Action: "dnat", Endpoints: addrPorts("10.244.1.53:53", "10.244.2.53:53"), Service: "infra/dns", Port: "dns"},
		},
		{
			feature: "UDP: the TCP port of the same number",
			node:    "node-3",
			pk:      plan.Packet{Src: a("10.244.3.200"), Dst: a("10.96.0.53"), Protocol: "TCP", Port: 53},
			want:    plan.Verdict{Action: "dnat", Endpoints: addrPorts("10.244.1.53:53", "10.244.2.53:53"), Service: "infra/dns", Port: "dns-tcp"},
		},
		// SCTP.
		{
			feature: "SCTP",
			node:    "node-1",
			pk:      plan.Packet{Src: a("10.244.1.200"), Dst: a("10.103.102.215"), Protocol: "SCTP", Port: 3868},
			want:    plan.Verdict{Action: "dnat", Endpoints: addrPorts("10.244.3.68:3868"), Service: "telecom/diameter", Port: "diameter"},
		},
		{
			feature: "SCTP: the same port over TCP is rejected",
			node:    "node-1",
			pk:      plan.Packet{Src: a("10.244.1.200"), Dst: a("10.103.102.215"), Protocol: "TCP", Port: 3868},
			want:    plan.Verdict{Action: "reject", Service: "telecom/diameter"},
		},
		// Headless.
		{
			feature: "headless with selector: no forwarding",
			node:    "node-2",
			pk:      plan.Packet{Src: a("10.244.2.200"), Dst: a("10.244.1.30"), Protocol: "TCP", Port: 5432},
			want:    plan.Verdict{Action: "accept"},
		},
		{
			feature: "headless without selector: no forwarding",
			node:    "node-2",
			pk:      plan.Packet{Src: a("10.244.2.200"), Dst: a("192.168.20.10"), Protocol: "TCP", Port: 3306},
			want:    plan.Verdict{Action: "accept"},
		},
		// NodePort.
		{
			feature: "NodePort auto-allocated: on node-3, to the pod on node-2, masqueraded",
			node:    "node-3",
			pk:      plan.Packet{Src: a(client), Dst: a("192.168.10.13"), Protocol: "TCP", Port: 30890},
			want:    plan.Verdict{Action: "dnat", Endpoints: addrPorts("10.244.2.40:8080"), Masquerade: true, Service: "shop/admin", Port: "http"},
		},
		{
			feature: "NodePort explicit",
			node:    "node-2",
			pk:      plan.Packet{Src: a(client), Dst: a("192.168.10.12"), Protocol: "TCP", Port: 30080},
			want:    plan.Verdict{Action: "dnat", Endpoints: addrPorts("10.244.1.41:8080", "10.244.3.41:8080"), Masquerade: true, Service: "shop/storefront", Port: "http"},
		},
		{
			feature: "NodePort: another node's address is not this node's business",
			node:    "node-2",
			pk:      plan.Packet{Src: a(client), Dst: a("192.168.10.11"), Protocol: "TCP", Port: 30080},
			want:    plan.Verdict{Action: "accept"},
		},
		// LoadBalancer.
		{
			feature: "LoadBalancer: an allowed source",
			node:    "node-1",
			pk:      plan.Packet{Src: a(client), Dst: a("203.0.113.100"), Protocol: "TCP", Port: 443},
			want:    plan.Verdict{Action: "dnat", Endpoints: addrPorts("10.244.1.50:8443", "10.244.2.50:8443"), Masquerade: true, Service: "edge/gateway", Port: "https"},
		},
		{
			feature: "LoadBalancer: another source is dropped",
			node:    "node-1",
			pk:      plan.Packet{Src: a(denied), Dst: a("203.0.113.100"), Protocol: "TCP", Port: 443},
			want:    plan.Verdict{Action: "drop", Service: "edge/gateway", Port: "https"},
		},
		{
			feature: "LoadBalancer: its node port ignores the source ranges",
			node:    "node-3",
			pk:      plan.Packet{Src: a(denied), Dst: a("192.168.10.13"), Protocol: "TCP", Port: 32631},
			want:    plan.Verdict{Action: "dnat", Endpoints: addrPorts("10.244.1.50:8443", "10.244.2.50:8443"), Masquerade: true, Service: "edge/gateway", Port: "https"},
		},
		// externalIPs.
		{
			feature: "externalIPs: masqueraded to the pod",
			node:    "node-2",
			pk:      plan.Packet{Src: a(client), Dst: a("203.0.113.10"), Protocol: "TCP", Port: 80},
			want:    plan.Verdict{Action: "dnat", Endpoints: addrPorts("10.244.3.60:8080"), Masquerade: true, Service: "shop/portal", Port: "http"},
		},
		{
			feature: "externalIPs: the cluster IP still works, unmasqueraded from a pod",
			node:    "node-2",
			pk:      plan.Packet{Src: a("10.244.2.200"), Dst: a("10.110.225.3"), Protocol: "TCP", Port: 80},
			want:    plan.Verdict{Action: "dnat", Endpoints: addrPorts("10.244.3.60:8080"), Service: "shop/portal", Port: "http"},
		},
		// ClientIP affinity (the timeout is in TestKitchenSinkServices).
		{
			feature: "ClientIP affinity: forwards to both pods",
			node:    "node-3",
			pk:      plan.Packet{Src: a("10.244.3.200"), Dst: a("10.105.57.89"), Protocol: "TCP", Port: 80},
			want:    plan.Verdict{Action: "dnat", Endpoints: addrPorts("10.244.1.70:8080", "10.244.2.70:8080"), Service: "shop/session", Port: "http"},
		},
		// externalTrafficPolicy Local.
		{
			feature: "externalTrafficPolicy Local: node-1 keeps the client IP and its own pod",
			node:    "node-1",
			pk:      plan.Packet{Src: a(client), Dst: a("192.168.10.11"), Protocol: "TCP", Port: 30443},
			want:    plan.Verdict{Action: "dnat", Endpoints: addrPorts("10.244.1.80:8443"), Service: "edge/ingress", Port: "https"},
		},
		{
			feature: "externalTrafficPolicy Local: node-2 keeps the client IP and its own pod",
			node:    "node-2",
			pk:      plan.Packet{Src: a(client), Dst: a("192.168.10.12"), Protocol: "TCP", Port: 30443},
			want:    plan.Verdict{Action: "dnat", Endpoints: addrPorts("10.244.2.80:8443"), Service: "edge/ingress", Port: "https"},
		},
		{
			feature: "externalTrafficPolicy Local: node-3 has no endpoint and drops",
			node:    "node-3",
			pk:      plan.Packet{Src: a(client), Dst: a("192.168.10.13"), Protocol: "TCP", Port: 30443},
			want:    plan.Verdict{Action: "drop", Service: "edge/ingress", Port: "https"},
		},
		{
			feature: "externalTrafficPolicy Local: a pod on node-3 short-circuits to every endpoint",
			node:    "node-3",
			pk:      plan.Packet{Src: a("10.244.3.200"), Dst: a("192.168.10.13"), Protocol: "TCP", Port: 30443},
			want:    plan.Verdict{Action: "dnat", Endpoints: addrPorts("10.244.1.80:8443", "10.244.2.80:8443"), Service: "edge/ingress", Port: "https"},
		},
		{
			feature: "externalTrafficPolicy Local: the cluster IP on node-3 uses every endpoint",
			node:    "node-3",
			pk:      plan.Packet{Src: a("10.244.3.200"), Dst: a("10.106.62.251"), Protocol: "TCP", Port: 443},
			want:    plan.Verdict{Action: "dnat", Endpoints: addrPorts("10.244.1.80:8443", "10.244.2.80:8443"), Service: "edge/ingress", Port: "https"},
		},
		// internalTrafficPolicy Local.
		{
			feature: "internalTrafficPolicy Local: node-1's own agent",
			node:    "node-1",
			pk:      plan.Packet{Src: a("10.244.1.200"), Dst: a("10.110.197.11"), Protocol: "TCP", Port: 8126},
			want:    plan.Verdict{Action: "dnat", Endpoints: addrPorts("10.244.1.90:8126"), Service: "infra/node-agent", Port: "trace"},
		},
		{
			feature: "internalTrafficPolicy Local: node-3 has no agent and drops",
			node:    "node-3",
			pk:      plan.Packet{Src: a("10.244.3.200"), Dst: a("10.110.197.11"), Protocol: "TCP", Port: 8126},
			want:    plan.Verdict{Action: "drop", Service: "infra/node-agent", Port: "trace"},
		},
		// Terminating fallback.
		{
			feature: "terminating fallback: the serving endpoints while they drain",
			node:    "node-3",
			pk:      plan.Packet{Src: a("10.244.3.200"), Dst: a("10.105.119.139"), Protocol: "TCP", Port: 80},
			want:    plan.Verdict{Action: "dnat", Endpoints: addrPorts("10.244.1.100:8080", "10.244.2.100:8080"), Service: "shop/checkout", Port: "http"},
		},
		// Zone hints.
		{
			feature: "zone hints: node-3 in zone-b sees only its hinted endpoint",
			node:    "node-3",
			pk:      plan.Packet{Src: a("10.244.3.200"), Dst: a("10.105.50.224"), Protocol: "TCP", Port: 80},
			want:    plan.Verdict{Action: "dnat", Endpoints: addrPorts("10.244.3.110:8080"), Service: "shop/catalog", Port: "http"},
		},
		{
			feature: "zone hints: node-2 in zone-a sees the zone-a endpoints",
			node:    "node-2",
			pk:      plan.Packet{Src: a("10.244.2.200"), Dst: a("10.105.50.224"), Protocol: "TCP", Port: 80},
			want:    plan.Verdict{Action: "dnat", Endpoints: addrPorts("10.244.1.110:8080", "10.244.2.110:8080"), Service: "shop/catalog", Port: "http"},
		},
		// No endpoints.
		{
			feature: "no endpoints: reject",
			node:    "node-1",
			pk:      plan.Packet{Src: a("10.244.1.200"), Dst: a("10.104.172.164"), Protocol: "TCP", Port: 80},
			want:    plan.Verdict{Action: "reject", Service: "shop/reports", Port: "http"},
		},
		// Dual-stack.
		{
			feature: "dual-stack: the IPv4 cluster IP forwards to IPv4 pod addresses",
			node:    "node-2",
			pk:      plan.Packet{Src: a("10.244.2.200"), Dst: a("10.96.0.120"), Protocol: "TCP", Port: 80},
			want:    plan.Verdict{Action: "dnat", Endpoints: addrPorts("10.244.1.120:8080", "10.244.3.120:8080"), Service: "shop/frontend", Port: "http"},
		},
		{
			feature: "dual-stack: the IPv6 cluster IP forwards to IPv6 pod addresses",
			node:    "node-2",
			pk:      plan.Packet{Src: a("fd00:10:244:2::200"), Dst: a("fd00:10:96::120"), Protocol: "TCP", Port: 80},
			want:    plan.Verdict{Action: "dnat", Endpoints: addrPorts("[fd00:10:244:1::120]:8080", "[fd00:10:244:3::120]:8080"), Service: "shop/frontend", Port: "http"},
		},
		{
			feature: "dual-stack: IPv6 from outside the IPv6 pod CIDR is masqueraded",
			node:    "node-2",
			pk:      plan.Packet{Src: a("2001:db8::7"), Dst: a("fd00:10:96::120"), Protocol: "TCP", Port: 80},
			want:    plan.Verdict{Action: "dnat", Endpoints: addrPorts("[fd00:10:244:1::120]:8080", "[fd00:10:244:3::120]:8080"), Masquerade: true, Service: "shop/frontend", Port: "http"},
		},
		{
			feature: "dual-stack: IPv6-first Service, IPv6 cluster IP",
			node:    "node-1",
			pk:      plan.Packet{Src: a("fd00:10:244:1::200"), Dst: a("fd00:10:96::e67"), Protocol: "TCP", Port: 80},
			want:    plan.Verdict{Action: "dnat", Endpoints: addrPorts("[fd00:10:244:1::120]:8080", "[fd00:10:244:3::120]:8080"), Service: "shop/frontend-v6", Port: "http"},
		},
		{
			feature: "dual-stack: IPv6-first Service, IPv4 cluster IP",
			node:    "node-1",
			pk:      plan.Packet{Src: a("10.244.1.200"), Dst: a("10.97.184.250"), Protocol: "TCP", Port: 80},
			want:    plan.Verdict{Action: "dnat", Endpoints: addrPorts("10.244.1.120:8080", "10.244.3.120:8080"), Service: "shop/frontend-v6", Port: "http"},
		},
		// Hairpin.
		{
			feature: "hairpin: the echo pod calling its own Service is masqueraded",
			node:    "node-2",
			pk:      plan.Packet{Src: a("10.244.2.130"), Dst: a("10.100.207.92"), Protocol: "TCP", Port: 80},
			want:    plan.Verdict{Action: "dnat", Endpoints: addrPorts("10.244.2.130:8080"), Masquerade: true, Service: "shop/echo", Port: "http"},
		},
		{
			feature: "hairpin: another pod calling echo is not",
			node:    "node-2",
			pk:      plan.Packet{Src: a("10.244.2.200"), Dst: a("10.100.207.92"), Protocol: "TCP", Port: 80},
			want:    plan.Verdict{Action: "dnat", Endpoints: addrPorts("10.244.2.130:8080"), Service: "shop/echo", Port: "http"},
		},
		// trafficDistribution.
		{
			feature: "trafficDistribution PreferSameZone: node-2 (zone-a) to the zone-a pod",
			node:    "node-2",
			pk:      plan.Packet{Src: a("10.244.2.200"), Dst: a("10.110.194.205"), Protocol: "TCP", Port: 80},
			want:    plan.Verdict{Action: "dnat", Endpoints: addrPorts("10.244.1.140:8080"), Service: "shop/recommend", Port: "http"},
		},
		{
			feature: "trafficDistribution PreferSameZone: node-3 (zone-b) to the zone-b pod",
			node:    "node-3",
			pk:      plan.Packet{Src: a("10.244.3.200"), Dst: a("10.110.194.205"), Protocol: "TCP", Port: 80},
			want:    plan.Verdict{Action: "dnat", Endpoints: addrPorts("10.244.3.140:8080"), Service: "shop/recommend", Port: "http"},
		},
		// Not a service.
		{
			feature: "unallocated address of the service CIDR: drop",
			node:    "node-1",
			pk:      plan.Packet{Src: a("10.244.1.200"), Dst: a("10.96.0.99"), Protocol: "TCP", Port: 80},
			want:    plan.Verdict{Action: "drop"},
		},
		{
			feature: "an address outside the cluster: accept",
			node:    "node-1",
			pk:      plan.Packet{Src: a("10.244.1.200"), Dst: a("93.184.216.34"), Protocol: "TCP", Port: 443},
			want:    plan.Verdict{Action: "accept"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.feature, func(t *testing.T) {
			got := c.plans[tc.node].Trace(tc.pk)
			if diff := cmp.Diff(tc.want, got, equateNetip); diff != "" {
				t.Errorf("node %s: Trace(%+v) (-want +got):\n%s", tc.node, tc.pk, diff)
			}
		})
	}
}

// ---- DNS ----

// recordsAt returns the data of the records of type typ ("*": any) named
// name (or, with below, named anything under name) in zone.
func recordsAt(t *testing.T, p *plan.Plan, zone, name, typ string, below bool) []string {
	t.Helper()
	var z *plan.Zone
	for i := range p.DNS.Zones {
		if p.DNS.Zones[i].Name == zone {
			z = &p.DNS.Zones[i]
		}
	}
	if z == nil {
		t.Fatalf("no zone %s", zone)
	}
	var out []string
	for _, r := range z.Records {
		at := r.Name == name
		if below {
			at = strings.HasSuffix(r.Name, "."+name)
		}
		if at && (typ == "*" || r.Type == typ) {
			out = append(out, r.Data)
		}
	}
	return out
}

func TestKitchenSinkDNS(t *testing.T) {
	c := kitchenSinkPlans(t)
	const (
		fwd  = "cluster.local."
		rev4 = "10.in-addr.arpa."
		rev6 = "0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa."
	)
	tests := []struct {
		feature string
		zone    string
		name    string
		typ     string
		below   bool // records under name rather than at it
		want    []string
	}{
		{feature: "A of a ClusterIP Service", zone: fwd, name: "web.shop.svc.cluster.local.", typ: "A", want: []string{"10.96.0.10"}},
		{feature: "ClusterIP Service: no AAAA in one family", zone: fwd, name: "web.shop.svc.cluster.local.", typ: "AAAA", want: nil},
		{feature: "SRV for a named port", zone: fwd, name: "_http._tcp.web.shop.svc.cluster.local.", typ: "SRV", want: []string{"0 100 80 web.shop.svc.cluster.local."}},
		{feature: "SRV only for named ports: none for an unnamed port", zone: fwd, name: "api.shop.svc.cluster.local.", typ: "*", below: true, want: nil},
		{feature: "SRV at the Service's name: its port", zone: fwd, name: "web.shop.svc.cluster.local.", typ: "SRV", want: []string{"0 100 80 web.shop.svc.cluster.local."}},
		{feature: "SRV at the Service's name: also an unnamed port", zone: fwd, name: "api.shop.svc.cluster.local.", typ: "SRV", want: []string{"0 100 80 api.shop.svc.cluster.local."}},
		{
			feature: "SRV at the Service's name: every port of a multi-port Service", zone: fwd, name: "cart.shop.svc.cluster.local.", typ: "SRV",
			want: []string{"0 100 80 cart.shop.svc.cluster.local.", "0 100 9090 cart.shop.svc.cluster.local.", "0 100 9100 cart.shop.svc.cluster.local."},
		},
		{feature: "SRV at the Service's name: one for a number on UDP and TCP", zone: fwd, name: "dns.infra.svc.cluster.local.", typ: "SRV", want: []string{"0 100 53 dns.infra.svc.cluster.local."}},
		{feature: "SRV at the Service's name: one per port of a dual-stack Service", zone: fwd, name: "frontend.shop.svc.cluster.local.", typ: "SRV", want: []string{"0 100 80 frontend.shop.svc.cluster.local."}},
		{feature: "ExternalName: no SRV at its name", zone: fwd, name: "search.shop.svc.cluster.local.", typ: "SRV", want: nil},
		{feature: "multi-port: SRV http", zone: fwd, name: "_http._tcp.cart.shop.svc.cluster.local.", typ: "SRV", want: []string{"0 100 80 cart.shop.svc.cluster.local."}},
		{feature: "multi-port: SRV grpc", zone: fwd, name: "_grpc._tcp.cart.shop.svc.cluster.local.", typ: "SRV", want: []string{"0 100 9090 cart.shop.svc.cluster.local."}},
		{feature: "multi-port: SRV metrics", zone: fwd, name: "_metrics._tcp.cart.shop.svc.cluster.local.", typ: "SRV", want: []string{"0 100 9100 cart.shop.svc.cluster.local."}},
		{feature: "UDP: SRV _udp", zone: fwd, name: "_dns._udp.dns.infra.svc.cluster.local.", typ: "SRV", want: []string{"0 100 53 dns.infra.svc.cluster.local."}},
		{feature: "UDP: SRV _tcp of the TCP port", zone: fwd, name: "_dns-tcp._tcp.dns.infra.svc.cluster.local.", typ: "SRV", want: []string{"0 100 53 dns.infra.svc.cluster.local."}},
		{feature: "SCTP: SRV _sctp", zone: fwd, name: "_diameter._sctp.diameter.telecom.svc.cluster.local.", typ: "SRV", want: []string{"0 100 3868 diameter.telecom.svc.cluster.local."}},
		{feature: "no endpoints: the name still resolves", zone: fwd, name: "reports.shop.svc.cluster.local.", typ: "A", want: []string{"10.104.172.164"}},
		{feature: "LoadBalancer: A is the cluster IP", zone: fwd, name: "gateway.edge.svc.cluster.local.", typ: "A", want: []string{"10.101.113.56"}},
		{feature: "dual-stack: A", zone: fwd, name: "frontend.shop.svc.cluster.local.", typ: "A", want: []string{"10.96.0.120"}},
		{feature: "dual-stack: AAAA", zone: fwd, name: "frontend.shop.svc.cluster.local.", typ: "AAAA", want: []string{"fd00:10:96::120"}},
		{feature: "dual-stack IPv6 first: AAAA", zone: fwd, name: "frontend-v6.shop.svc.cluster.local.", typ: "AAAA", want: []string{"fd00:10:96::e67"}},
		{feature: "dual-stack IPv6 first: A", zone: fwd, name: "frontend-v6.shop.svc.cluster.local.", typ: "A", want: []string{"10.97.184.250"}},
		{
			feature: "headless with selector: A per ready endpoint", zone: fwd, name: "db.data.svc.cluster.local.", typ: "A",
			want: []string{"10.244.1.30", "10.244.2.30"},
		},
		{feature: "headless with selector: hostname record", zone: fwd, name: "db-0.db.data.svc.cluster.local.", typ: "A", want: []string{"10.244.1.30"}},
		{feature: "headless with selector: no name for a not-ready pod", zone: fwd, name: "db-2.db.data.svc.cluster.local.", typ: "*", want: nil},
		{
			feature: "headless with selector: SRV to the ready hostnames", zone: fwd, name: "_postgres._tcp.db.data.svc.cluster.local.", typ: "SRV",
			want: []string{"0 100 5432 db-0.db.data.svc.cluster.local.", "0 100 5432 db-1.db.data.svc.cluster.local."},
		},
		{
			feature: "headless with selector: SRV at its name to the ready hostnames", zone: fwd, name: "db.data.svc.cluster.local.", typ: "SRV",
			want: []string{"0 100 5432 db-0.db.data.svc.cluster.local.", "0 100 5432 db-1.db.data.svc.cluster.local."},
		},
		{
			feature: "headless without selector: A per endpoint", zone: fwd, name: "legacy-db.data.svc.cluster.local.", typ: "A",
			want: []string{"192.168.20.10", "192.168.20.11"},
		},
		{feature: "headless without selector: slice hostname", zone: fwd, name: "mysql-b.legacy-db.data.svc.cluster.local.", typ: "A", want: []string{"192.168.20.11"}},
		{
			feature: "headless without selector: SRV", zone: fwd, name: "_mysql._tcp.legacy-db.data.svc.cluster.local.", typ: "SRV",
			want: []string{"0 100 3306 mysql-a.legacy-db.data.svc.cluster.local.", "0 100 3306 mysql-b.legacy-db.data.svc.cluster.local."},
		},
		{feature: "headless without ports: A at its name", zone: fwd, name: "extdb.data.svc.cluster.local.", typ: "A", want: []string{"192.0.2.10"}},
		{feature: "headless without ports: no SRV at its name", zone: fwd, name: "extdb.data.svc.cluster.local.", typ: "SRV", want: nil},
		{feature: "headless without ports: the hostname, no SRV", zone: fwd, name: "extdb.data.svc.cluster.local.", typ: "*", below: true, want: []string{"192.0.2.10"}},
		{feature: "headless with no ready endpoints: no records at its name", zone: fwd, name: "standby-db.data.svc.cluster.local.", typ: "*", want: nil},
		{feature: "headless with no ready endpoints: none under it", zone: fwd, name: "standby-db.data.svc.cluster.local.", typ: "*", below: true, want: nil},
		{
			feature: "publishNotReadyAddresses: every pod in DNS", zone: fwd, name: "etcd.data.svc.cluster.local.", typ: "A",
			want: []string{"10.244.1.150", "10.244.2.150", "10.244.3.150"},
		},
		{feature: "publishNotReadyAddresses: a not-ready pod's name", zone: fwd, name: "etcd-2.etcd.data.svc.cluster.local.", typ: "A", want: []string{"10.244.3.150"}},
		{
			feature: "publishNotReadyAddresses: SRV at its name, every port of every pod", zone: fwd, name: "etcd.data.svc.cluster.local.", typ: "SRV",
			want: []string{
				"0 100 2379 etcd-0.etcd.data.svc.cluster.local.", "0 100 2379 etcd-1.etcd.data.svc.cluster.local.", "0 100 2379 etcd-2.etcd.data.svc.cluster.local.",
				"0 100 2380 etcd-0.etcd.data.svc.cluster.local.", "0 100 2380 etcd-1.etcd.data.svc.cluster.local.", "0 100 2380 etcd-2.etcd.data.svc.cluster.local.",
			},
		},
		{feature: "ExternalName: CNAME", zone: fwd, name: "search.shop.svc.cluster.local.", typ: "CNAME", want: []string{"search.example.com."}},
		{feature: "ExternalName: nothing but the CNAME", zone: fwd, name: "search.shop.svc.cluster.local.", typ: "*", want: []string{"search.example.com."}},
		{feature: "dns-version TXT", zone: fwd, name: "dns-version.cluster.local.", typ: "TXT", want: []string{`"1.1.0"`}},
		{feature: "PTR v4 of a cluster IP", zone: rev4, name: "10.0.96.10.in-addr.arpa.", typ: "PTR", want: []string{"web.shop.svc.cluster.local."}},
		{feature: "PTR v4 of a headless endpoint", zone: rev4, name: "30.1.244.10.in-addr.arpa.", typ: "PTR", want: []string{"db-0.db.data.svc.cluster.local."}},
		{feature: "PTR v4: none for a not-ready headless endpoint", zone: rev4, name: "30.3.244.10.in-addr.arpa.", typ: "*", want: nil},
		{
			feature: "PTR v6 nibble of a cluster IP", zone: rev6,
			name: "0.2.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa.", typ: "PTR",
			want: []string{"frontend.shop.svc.cluster.local."},
		},
		{
			feature: "PTR v6 nibble of the IPv6-first Service", zone: rev6,
			name: "7.6.e.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa.", typ: "PTR",
			want: []string{"frontend-v6.shop.svc.cluster.local."},
		},
	}
	for _, tc := range tests {
		t.Run(tc.feature, func(t *testing.T) {
			got := recordsAt(t, c.plans["node-1"], tc.zone, tc.name, tc.typ, tc.below)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s %s in %s (-want +got):\n%s", tc.name, tc.typ, tc.zone, diff)
			}
		})
	}
}

// TestKitchenSinkDNSZones checks the zones and their apex: the cluster
// domain and one reverse zone per CIDR (the pod CIDR 10.244.0.0/16 falls
// inside 10.in-addr.arpa of the service CIDR), each with SOA and NS.
func TestKitchenSinkDNSZones(t *testing.T) {
	c := kitchenSinkPlans(t)
	p := c.plans["node-1"]
	var names []string
	for _, z := range p.DNS.Zones {
		names = append(names, z.Name)
	}
	want := []string{
		"0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa.", // fd00:10:96::/112
		"0.0.4.4.2.0.0.1.0.0.0.0.d.f.ip6.arpa.",                             // fd00:10:244::/56
		"10.in-addr.arpa.",                                                  // 10.96.0.0/12 rounded to /8
		"cluster.local.",
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Fatalf("zones (-want +got):\n%s", diff)
	}
	for _, z := range p.DNS.Zones {
		t.Run(z.Name, func(t *testing.T) {
			if len(z.Records) < 2 {
				t.Fatalf("%d records", len(z.Records))
			}
			soa, ns := z.Records[0], z.Records[1]
			f := strings.Fields(soa.Data)
			if soa.Name != z.Name || soa.Type != "SOA" || soa.TTL != 5 || len(f) != 7 ||
				f[0] != "localhost." || f[1] != "hostmaster."+z.Name || f[2] == "0" ||
				strings.Join(f[3:], " ") != "7200 1800 86400 5" {
				t.Errorf("first record %+v, want the SOA: localhost. hostmaster.%s SERIAL 7200 1800 86400 5", soa, z.Name)
			}
			if want := (plan.Record{Name: z.Name, Type: "NS", TTL: 5, Data: "localhost."}); ns != want {
				t.Errorf("second record %+v, want %+v", ns, want)
			}
			for _, r := range z.Records {
				if r.Name != strings.ToLower(r.Name) || !strings.HasSuffix(r.Name, ".") {
					t.Errorf("record name %q is not lower case and fully qualified", r.Name)
				}
				if r.Name != z.Name && !strings.HasSuffix(r.Name, "."+z.Name) {
					t.Errorf("record %s is outside zone %s", r.Name, z.Name)
				}
			}
			if z.Name == "0.0.4.4.2.0.0.1.0.0.0.0.d.f.ip6.arpa." && len(z.Records) != 2 {
				t.Errorf("the IPv6 pod zone has %d records, want only SOA and NS (no IPv6 headless endpoints)", len(z.Records))
			}
		})
	}
}

// TestDNSInZoneNameServerHasAddress: a zone whose NS target lies inside
// the zone must hold an address for it, or authoritative servers refuse
// the zone (BIND: "NS 'ns.dns.cluster.local' has no address records (A or
// AAAA)", "not loaded due to errors"), while docs/design.md promises zone files
// that BIND and Knot serve.
func TestDNSInZoneNameServerHasAddress(t *testing.T) {
	c := kitchenSinkPlans(t)
	for _, z := range c.plans["node-1"].DNS.Zones {
		for _, r := range z.Records {
			if r.Type != "NS" {
				continue
			}
			if r.Data != z.Name && !strings.HasSuffix(r.Data, "."+z.Name) {
				continue // out of zone: no glue needed
			}
			if len(recordsAt(t, c.plans["node-1"], z.Name, r.Data, "A", false))+len(recordsAt(t, c.plans["node-1"], z.Name, r.Data, "AAAA", false)) == 0 {
				t.Errorf("zone %s: NS %s is inside the zone but has no A or AAAA record", z.Name, r.Data)
			}
		}
	}
}

// TestKitchenSinkSameOnEveryNode: DNS and env do not depend on the node.
func TestKitchenSinkSameOnEveryNode(t *testing.T) {
	c := kitchenSinkPlans(t)
	first := c.plans[kitchenSinkNodes[0]]
	for _, n := range kitchenSinkNodes[1:] {
		if diff := cmp.Diff(first.DNS, c.plans[n].DNS); diff != "" {
			t.Errorf("DNS of %s differs from %s (-%s +%s):\n%s", n, first.Node.Name, first.Node.Name, n, diff)
		}
		if diff := cmp.Diff(first.Env, c.plans[n].Env); diff != "" {
			t.Errorf("env of %s differs from %s (-%s +%s):\n%s", n, first.Node.Name, first.Node.Name, n, diff)
		}
		if diff := cmp.Diff(first.Cluster, c.plans[n].Cluster, equateNetip); diff != "" {
			t.Errorf("Cluster of %s differs from %s:\n%s", n, first.Node.Name, diff)
		}
	}
	wantNodes := map[string]plan.Node{
		"node-1": {Name: "node-1", Zone: "zone-a", IPs: []netip.Addr{netip.MustParseAddr("192.168.10.11")}},
		"node-2": {Name: "node-2", Zone: "zone-a", IPs: []netip.Addr{netip.MustParseAddr("192.168.10.12")}},
		"node-3": {Name: "node-3", Zone: "zone-b", IPs: []netip.Addr{netip.MustParseAddr("192.168.10.13")}},
	}
	for _, n := range kitchenSinkNodes {
		if diff := cmp.Diff(wantNodes[n], c.plans[n].Node, equateNetip); diff != "" {
			t.Errorf("Node of %s (-want +got):\n%s", n, diff)
		}
	}
	wantCluster := plan.Cluster{
		Domain:       "cluster.local",
		ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("fd00:10:96::/112")},
		PodCIDRs:     []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:10:244::/56")},
		DNSTTL:       5,
		DNSAddress:   netip.MustParseAddr("169.254.20.10"),
	}
	if diff := cmp.Diff(wantCluster, first.Cluster, equateNetip); diff != "" {
		t.Errorf("Cluster (-want +got):\n%s", diff)
	}
}

// ---- environment ----

func TestKitchenSinkEnv(t *testing.T) {
	c := kitchenSinkPlans(t)
	p := c.plans["node-2"]
	env := map[string]map[string]string{}
	var namespaces []string
	for _, f := range p.Env {
		namespaces = append(namespaces, f.Namespace)
		env[f.Namespace] = map[string]string{}
		if !slices.IsSortedFunc(f.Vars, func(a, b plan.EnvVar) int { return strings.Compare(a.Name, b.Name) }) {
			t.Errorf("namespace %s: variables are not sorted by name", f.Namespace)
		}
		for _, v := range f.Vars {
			env[f.Namespace][v.Name] = v.Value
		}
	}
	if diff := cmp.Diff([]string{"data", "edge", "infra", "shop", "telecom"}, namespaces); diff != "" {
		t.Errorf("env namespaces (-want +got):\n%s", diff)
	}
	tests := []struct {
		feature   string
		namespace string
		name      string
		want      string
		absent    bool // no variable named name, or starting with it when it ends in "_"
	}{
		{feature: "ClusterIP: SERVICE_HOST", namespace: "shop", name: "WEB_SERVICE_HOST", want: "10.96.0.10"},
		{feature: "ClusterIP: SERVICE_PORT", namespace: "shop", name: "WEB_SERVICE_PORT", want: "80"},
		{feature: "ClusterIP: SERVICE_PORT_<name>", namespace: "shop", name: "WEB_SERVICE_PORT_HTTP", want: "80"},
		{feature: "ClusterIP: PORT", namespace: "shop", name: "WEB_PORT", want: "tcp://10.96.0.10:80"},
		{feature: "ClusterIP: PORT_<port>_<proto>", namespace: "shop", name: "WEB_PORT_80_TCP", want: "tcp://10.96.0.10:80"},
		{feature: "ClusterIP: _PROTO", namespace: "shop", name: "WEB_PORT_80_TCP_PROTO", want: "tcp"},
		{feature: "ClusterIP: _PORT", namespace: "shop", name: "WEB_PORT_80_TCP_PORT", want: "80"},
		{feature: "ClusterIP: _ADDR", namespace: "shop", name: "WEB_PORT_80_TCP_ADDR", want: "10.96.0.10"},
		{feature: "unnamed port: SERVICE_PORT", namespace: "shop", name: "API_SERVICE_PORT", want: "80"},
		{feature: "unnamed port: no SERVICE_PORT_<name>", namespace: "shop", name: "API_SERVICE_PORT_", absent: true},
		{feature: "multi-port: PORT is the first port", namespace: "shop", name: "CART_PORT", want: "tcp://10.96.0.30:80"},
		{feature: "multi-port: SERVICE_PORT is the first port", namespace: "shop", name: "CART_SERVICE_PORT", want: "80"},
		{feature: "multi-port: each named port", namespace: "shop", name: "CART_SERVICE_PORT_GRPC", want: "9090"},
		{feature: "multi-port: each port's link variables", namespace: "shop", name: "CART_PORT_9100_TCP_ADDR", want: "10.96.0.30"},
		{feature: "UDP: first port URL", namespace: "infra", name: "DNS_PORT", want: "udp://10.96.0.53:53"},
		{feature: "UDP: link variables", namespace: "infra", name: "DNS_PORT_53_UDP", want: "udp://10.96.0.53:53"},
		{feature: "UDP: _PROTO", namespace: "infra", name: "DNS_PORT_53_UDP_PROTO", want: "udp"},
		{feature: "UDP: the TCP port of the same number", namespace: "infra", name: "DNS_PORT_53_TCP", want: "tcp://10.96.0.53:53"},
		{feature: "port name with '-'", namespace: "infra", name: "DNS_SERVICE_PORT_DNS_TCP", want: "53"},
		{feature: "Service name with '-'", namespace: "infra", name: "NODE_AGENT_SERVICE_HOST", want: "10.110.197.11"},
		{feature: "SCTP", namespace: "telecom", name: "DIAMETER_PORT", want: "sctp://10.103.102.215:3868"},
		{feature: "SCTP: _PROTO", namespace: "telecom", name: "DIAMETER_PORT_3868_SCTP_PROTO", want: "sctp"},
		{feature: "LoadBalancer: the cluster IP", namespace: "edge", name: "GATEWAY_SERVICE_HOST", want: "10.101.113.56"},
		{feature: "externalIPs: the cluster IP", namespace: "shop", name: "PORTAL_SERVICE_HOST", want: "10.110.225.3"},
		{feature: "no endpoints: variables all the same", namespace: "shop", name: "REPORTS_SERVICE_HOST", want: "10.104.172.164"},
		{feature: "dual-stack: the first cluster IP", namespace: "shop", name: "FRONTEND_SERVICE_HOST", want: "10.96.0.120"},
		{feature: "IPv6 first: SERVICE_HOST unbracketed", namespace: "shop", name: "FRONTEND_V6_SERVICE_HOST", want: "fd00:10:96::e67"},
		{feature: "IPv6 first: PORT bracketed", namespace: "shop", name: "FRONTEND_V6_PORT", want: "tcp://[fd00:10:96::e67]:80"},
		{feature: "IPv6 first: PORT_<port>_<proto> bracketed", namespace: "shop", name: "FRONTEND_V6_PORT_80_TCP", want: "tcp://[fd00:10:96::e67]:80"},
		{feature: "IPv6 first: _ADDR unbracketed", namespace: "shop", name: "FRONTEND_V6_PORT_80_TCP_ADDR", want: "fd00:10:96::e67"},
		{feature: "headless with selector: skipped", namespace: "data", name: "DB_", absent: true},
		{feature: "headless without selector: skipped", namespace: "data", name: "LEGACY_DB_", absent: true},
		{feature: "publishNotReadyAddresses headless: skipped", namespace: "data", name: "ETCD_", absent: true},
		{feature: "ExternalName: skipped", namespace: "shop", name: "SEARCH_", absent: true},
		{feature: "other namespaces' Services are not visible", namespace: "infra", name: "WEB_", absent: true},
	}
	for _, tc := range tests {
		t.Run(tc.feature, func(t *testing.T) {
			vars := env[tc.namespace]
			if tc.absent {
				for k, v := range vars {
					if k == tc.name || strings.HasSuffix(tc.name, "_") && strings.HasPrefix(k, tc.name) {
						t.Errorf("namespace %s has %s=%s, want no %s", tc.namespace, k, v, tc.name)
					}
				}
				return
			}
			got, ok := vars[tc.name]
			if !ok || got != tc.want {
				t.Errorf("namespace %s: %s=%q (set: %v), want %q", tc.namespace, tc.name, got, ok, tc.want)
			}
		})
	}
	if n := len(env["data"]); n != 0 {
		t.Errorf("namespace data (headless Services only) has %d variables, want none", n)
	}
	// A Service has 3 variables, 1 more per named port and 4 per port.
	for _, n := range []struct {
		prefix string
		count  int
	}{{"WEB_", 3 + 1 + 4}, {"API_", 3 + 0 + 4}, {"CART_", 3 + 3 + 3*4}, {"DNS_", 3 + 2 + 2*4}, {"FRONTEND_V6_", 3 + 1 + 4}} {
		got := 0
		for _, vars := range env {
			for k := range vars {
				if strings.HasPrefix(k, n.prefix) {
					got++
				}
			}
		}
		if got != n.count {
			t.Errorf("%d variables %s*, want %d", got, n.prefix, n.count)
		}
	}
}

// ---- determinism ----

// TestCompileDeterministic compiles the kitchen sink twice and with its
// objects shuffled, with and without the lock: every node's Plan must be
// equal.
func TestCompileDeterministic(t *testing.T) {
	c := kitchenSinkPlans(t)
	objs := c.tree.Objects
	for _, withLock := range []bool{true, false} {
		lock := c.lock
		name := "with lock"
		if !withLock {
			lock, name = nil, "without lock"
		}
		t.Run(name, func(t *testing.T) {
			compileAll := func(objs []*schema.Object) map[string]*plan.Plan {
				t.Helper()
				checked := compiler.Validate(objs, lock, c.tree)
				if n := checked.Diags.Errors(); n > 0 {
					t.Fatalf("%d errors: %v", n, checked.Diags.Err())
				}
				out := map[string]*plan.Plan{}
				for _, n := range kitchenSinkNodes {
					p, err := compiler.Compile(objs, checked, n)
					if err != nil {
						t.Fatal(err)
					}
					out[n] = p
				}
				return out
			}
			base := compileAll(objs)
			if withLock {
				for _, n := range kitchenSinkNodes {
					if diff := cmp.Diff(c.plans[n], base[n], equateNetip); diff != "" {
						t.Errorf("node %s: a second compilation differs (-first +second):\n%s", n, diff)
					}
				}
			}
			// Compile again from the same Checked.
			checked := compiler.Validate(objs, lock, c.tree)
			for _, n := range kitchenSinkNodes {
				p1, err1 := compiler.Compile(objs, checked, n)
				p2, err2 := compiler.Compile(objs, checked, n)
				if err1 != nil || err2 != nil {
					t.Fatal(err1, err2)
				}
				if diff := cmp.Diff(p1, p2, equateNetip); diff != "" {
					t.Errorf("node %s: compiling twice from one Checked differs:\n%s", n, diff)
				}
			}
			rng := rand.New(rand.NewPCG(1, 2))
			for i := range 5 {
				shuffled := slices.Clone(objs)
				rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
				got := compileAll(shuffled)
				for _, n := range kitchenSinkNodes {
					if diff := cmp.Diff(base[n], got[n], equateNetip); diff != "" {
						t.Errorf("shuffle %d, node %s: the Plan depends on object order (-in order +shuffled):\n%s", i, n, diff)
					}
				}
			}
		})
	}
}

// ---- bugs, one tree each under testdata/ ----

// TestCompileDuplicateEndpointReadyWins: an address listed in two
// EndpointSlices of a Service (not ready in one, ready in the other) must
// give one ready endpoint, as endpointsOf's comment says ("ready first"),
// whatever the order of the slices. The sort before CompactFunc compares
// address and port only, so the slice that comes first in object order
// wins: here the stale, not-ready one, and the Service rejects traffic.
func TestCompileDuplicateEndpointReadyWins(t *testing.T) {
	c := mustTree(t, "testdata/duplicate-endpoint", "node-a")
	reversed := slices.Clone(c.tree.Objects)
	slices.Reverse(reversed)
	for _, tc := range []struct {
		order string
		objs  []*schema.Object
	}{
		{order: "file order", objs: c.tree.Objects},
		{order: "reversed", objs: reversed},
	} {
		t.Run(tc.order, func(t *testing.T) {
			p, err := compiler.Compile(tc.objs, compiler.Validate(tc.objs, nil, c.tree), "node-a")
			if err != nil {
				t.Fatal(err)
			}
			port := findPort(t, findService(t, p, "shop/moving"), "http", "TCP")
			want := []endpointShape{{Addr: "10.244.1.9:8080", Ready: true, Serving: true, Node: "node-a", Zone: "zone-a"}}
			if diff := cmp.Diff(want, endpointShapes(port)); diff != "" {
				t.Errorf("endpoints (-want +got):\n%s", diff)
			}
			v := p.Trace(plan.Packet{Src: netip.MustParseAddr("10.244.1.200"), Dst: netip.MustParseAddr("10.96.0.20"), Protocol: "TCP", Port: 80})
			wantV := plan.Verdict{Action: "dnat", Endpoints: addrPorts("10.244.1.9:8080"), Service: "shop/moving", Port: "http"}
			if diff := cmp.Diff(wantV, v, equateNetip); diff != "" {
				t.Errorf("Trace (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCompileTerminatingFallbackIgnoresTopology: when no endpoint is
// ready, kube-proxy falls back to every serving, terminating endpoint and
// ignores topology (pkg/proxy/topology.go, topologyModeFromHints: "If no
// ready endpoints exist, there are no hints to consider"). pick applies
// zone hints and trafficDistribution to the fallback set too, so a node
// sends all draining traffic to its own zone.
func TestCompileTerminatingFallbackIgnoresTopology(t *testing.T) {
	c := mustTree(t, "testdata/terminating-topology", "node-a", "node-b")
	tests := []struct {
		feature string
		node    string
		service string
		want    []string
	}{
		{feature: "zone hints, node-b", node: "node-b", service: "shop/hinted", want: []string{"10.244.1.30:8080", "10.244.2.30:8080"}},
		{feature: "zone hints, node-a", node: "node-a", service: "shop/hinted", want: []string{"10.244.1.30:8080", "10.244.2.30:8080"}},
		{feature: "PreferSameZone, node-b", node: "node-b", service: "shop/close", want: []string{"10.244.1.31:8080", "10.244.2.31:8080"}},
		{feature: "PreferSameZone, node-a", node: "node-a", service: "shop/close", want: []string{"10.244.1.31:8080", "10.244.2.31:8080"}},
	}
	for _, tc := range tests {
		t.Run(tc.feature, func(t *testing.T) {
			port := findPort(t, findService(t, c.plans[tc.node], tc.service), "http", "TCP")
			if diff := cmp.Diff(tc.want, addrs(port, port.Cluster)); diff != "" {
				t.Errorf("Cluster (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCompileLoadBalancerIPModeProxy: kube-proxy does not capture a
// LoadBalancer ingress IP whose ipMode is Proxy (KEP-1860): the load
// balancer proxies to the node ports, and capturing the IP on the nodes
// would bypass it for in-cluster clients. Nor does it capture
// spec.loadBalancerIP, a request to the load balancer: Compile adds
// every other ingress IP.
func TestCompileLoadBalancerIPModeProxy(t *testing.T) {
	c := mustTree(t, "testdata/lb-ipmode-proxy", "node-a")
	p := c.plans["node-a"]
	s := findService(t, p, "edge/lb")
	if diff := cmp.Diff([]string{"203.0.113.51"}, strs(s.LoadBalancerIPs)); diff != "" {
		t.Errorf("LoadBalancerIPs (-want +got):\n%s", diff)
	}
	v := p.Trace(plan.Packet{Src: netip.MustParseAddr("10.244.1.200"), Dst: netip.MustParseAddr("203.0.113.50"), Protocol: "TCP", Port: 443})
	if diff := cmp.Diff(plan.Verdict{Action: "accept"}, v, equateNetip); diff != "" {
		t.Errorf("Trace to the Proxy-mode ingress IP (-want +got):\n%s", diff)
	}
	v = p.Trace(plan.Packet{Src: netip.MustParseAddr("10.244.1.200"), Dst: netip.MustParseAddr("203.0.113.52"), Protocol: "TCP", Port: 443})
	if diff := cmp.Diff(plan.Verdict{Action: "accept"}, v, equateNetip); diff != "" {
		t.Errorf("Trace to spec.loadBalancerIP (-want +got):\n%s", diff)
	}
}

// TestCompileHeadlessSelectorFamilies: the API server makes a headless
// Service with a selector and no ipFamilyPolicy SingleStack in the
// cluster's first family (initIPFamilyFields; only headless *selectorless*
// Services default to RequireDualStack), and the EndpointSlice controller
// makes slices of that family only, so DNS answers A records alone.
// serviceFamilies takes every family for a headless Service without
// ipFamilies, ignoring its SingleStack policy.
func TestCompileHeadlessSelectorFamilies(t *testing.T) {
	c := mustTree(t, "testdata/headless-dual-stack", "node-a")
	p := c.plans["node-a"]
	tests := []struct {
		feature  string
		service  string
		wantEps  []string
		wantAAAA []string
	}{
		{
			feature: "no ipFamilyPolicy: SingleStack IPv4",
			service: "data/single",
			wantEps: []string{"10.244.1.70:7000"},
		},
		{
			feature:  "RequireDualStack: both families",
			service:  "data/dual",
			wantEps:  []string{"10.244.1.70:7000", "[fd00:10:244:1::70]:7000"},
			wantAAAA: []string{"fd00:10:244:1::70"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.feature, func(t *testing.T) {
			s := findService(t, p, tc.service)
			port := findPort(t, s, "peer", "TCP")
			if diff := cmp.Diff(tc.wantEps, addrs(port, allIndexes(port))); diff != "" {
				t.Errorf("endpoints (-want +got):\n%s", diff)
			}
			name := s.Name + ".data.svc.cluster.local."
			if diff := cmp.Diff(tc.wantAAAA, recordsAt(t, p, "cluster.local.", name, "AAAA", false)); diff != "" {
				t.Errorf("AAAA %s (-want +got):\n%s", name, diff)
			}
		})
	}
}

func allIndexes(p *plan.Port) []int {
	out := make([]int, len(p.Endpoints))
	for i := range out {
		out[i] = i
	}
	return out
}

// TestCompileNodeHints: when every ready endpoint of a Service carries
// hints.forNodes and one names this node, kube-proxy keeps the endpoints
// hinted for this node (topologyModeFromHints, PreferSameNode; feature
// PreferSameTrafficDistribution, on by default since Kubernetes 1.34).
// Compile records NodeHints but pick never reads them.
func TestCompileNodeHints(t *testing.T) {
	c := mustTree(t, "testdata/node-hints", "node-a", "node-b")
	tests := []struct {
		node string
		want []string
	}{
		{node: "node-a", want: []string{"10.244.1.50:8080", "10.244.1.51:8080"}},
		{node: "node-b", want: []string{"10.244.2.50:8080"}},
	}
	for _, tc := range tests {
		t.Run(tc.node, func(t *testing.T) {
			port := findPort(t, findService(t, c.plans[tc.node], "shop/local-first"), "http", "TCP")
			if diff := cmp.Diff(tc.want, addrs(port, port.Cluster)); diff != "" {
				t.Errorf("Cluster (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCompileTerminalPods: a pod that has Succeeded or Failed is never an
// endpoint, even when its Ready condition still says True and when the
// Service publishes not-ready addresses; nor does DNS name it. (The
// EndpointSlice controller leaves terminal pods out: ShouldPodBeInEndpoints.)
func TestCompileTerminalPods(t *testing.T) {
	c := mustTree(t, "testdata/terminal-pods", "node-a", "node-b")
	for _, node := range []string{"node-a", "node-b"} {
		p := c.plans[node]
		for _, svc := range []string{"shop/batch", "shop/batch-all"} {
			port := findPort(t, findService(t, p, svc), "http", "TCP")
			want := []endpointShape{{Addr: "10.244.1.40:8080", Ready: true, Serving: true, Node: "node-a", Zone: "zone-a", Hostname: hostnameIf(svc == "shop/batch-all", "running"), Pod: "shop/batch-running"}}
			if diff := cmp.Diff(want, endpointShapes(port)); diff != "" {
				t.Errorf("%s %s endpoints (-want +got):\n%s", node, svc, diff)
			}
		}
		running := false
		for _, z := range p.DNS.Zones {
			for _, r := range z.Records {
				running = running || r.Name == "running.batch-all.shop.svc.cluster.local."
				if strings.Contains(r.Data, "10.244.1.41") || strings.Contains(r.Data, "10.244.2.42") ||
					strings.HasPrefix(r.Name, "done.") || strings.HasPrefix(r.Name, "failed.") {
					t.Errorf("%s: DNS names a terminal pod: %+v", node, r)
				}
			}
		}
		if !running {
			t.Errorf("%s: DNS does not name the running pod", node)
		}
	}
}

func hostnameIf(ok bool, name string) string {
	if ok {
		return name
	}
	return ""
}

// TestNodePortAddresses: the Cluster's nodePortAddresses reach the Plan
// masked, in spec order, an IPv4-mapped IPv6 prefix as IPv4; without
// them the Plan has none (node ports then answer on Node.IPs).
func TestNodePortAddresses(t *testing.T) {
	dir := t.TempDir()
	node := "apiVersion: v1\nkind: Node\nmetadata: {name: node-1}\nstatus:\n  addresses: [{type: InternalIP, address: 192.168.10.11}]\n"
	if err := os.WriteFile(filepath.Join(dir, "node.yaml"), []byte(node), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := compileTree(dir, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.plans["node-1"].Cluster.NodePortAddresses; got != nil {
		t.Errorf("without a Cluster object: NodePortAddresses = %v, want none", got)
	}
	cluster := "apiVersion: netspec.dev/v1alpha1\nkind: Cluster\nmetadata: {name: c}\nspec:\n  nodePortAddresses: [\"192.168.11.0/24\", \"::ffff:10.0.0.0/104\", \"fd00::/64\"]\n"
	if err := os.WriteFile(filepath.Join(dir, "cluster.yaml"), []byte(cluster), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, err = compileTree(dir, "node-1"); err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("192.168.11.0/24"), netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/64")}
	if got := c.plans["node-1"].Cluster.NodePortAddresses; !slices.Equal(got, want) {
		t.Errorf("NodePortAddresses = %v, want %v", got, want)
	}
}
