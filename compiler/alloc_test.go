package compiler

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"netspec.dev/netspec/internal/diag"
	"netspec.dev/netspec/schema"
)

// withHash replaces the allocation hash for one test.
func withHash(t *testing.T, h func(string) uint64) {
	t.Helper()
	if h == nil {
		return
	}
	old := hash
	hash = h
	t.Cleanup(func() { hash = old })
}

// constHash sends every key to the first slot, so that every derivation
// collides with every earlier one.
func constHash(string) uint64 { return 0 }

func ip(family, addr string, o Origin) ClusterIP {
	return ClusterIP{Family: family, Addr: netip.MustParseAddr(addr), Origin: o}
}

func np(index int, key string, port int32, o Origin) NodePort {
	return NodePort{Index: index, Key: key, Protocol: key[strings.IndexByte(key, '/')+1:], Port: port, Origin: o}
}

// tiny is a cluster with 6 IPv4 addresses, 7 IPv6 addresses and 10 node ports.
func tiny(c *schema.ClusterSpec) {
	c.ServiceCIDRs = []string{"10.0.0.0/29", "fd00::/125"}
	c.NodePortRange = "30000-30009"
}

// allocDiags leaves out of dl the findings that a Service without
// selector has no endpoints (msgNoEndpoints): the trees of the
// allocation tests are Services alone, as allocation needs nothing else.
func allocDiags(dl diag.List) diag.List {
	return slices.DeleteFunc(slices.Clone(dl), func(d diag.Diagnostic) bool {
		return d.Severity == diag.Warning && strings.HasPrefix(d.Msg, msgNoEndpoints)
	})
}

func TestAllocate(t *testing.T) {
	cl := clusterObj("cluster.yaml", "prod", tiny)
	noLBPorts := func(s *schema.ServiceSpec) { f := false; s.AllocateLoadBalancerNodePorts = &f }
	udp := func(s *schema.ServiceSpec) { s.Ports[0].Protocol = "UDP" }
	// local makes a LoadBalancer Service with policy Local and health
	// check node port hc (0: allocate).
	local := func(hc int32) func(*schema.ServiceSpec) {
		return func(s *schema.ServiceSpec) {
			s.Type, s.ExternalTrafficPolicy, s.HealthCheckNodePort = "LoadBalancer", "Local", hc
		}
	}
	hc := func(sa ServiceAlloc, port int32, o Origin) ServiceAlloc {
		sa.HealthCheckNodePort, sa.HealthCheckOrigin = port, o
		return sa
	}
	v4 := func(addr string) []ClusterIP { return []ClusterIP{ip("IPv4", addr, Derived)} }
	tests := []struct {
		name     string
		objs     []*schema.Object
		lock     *Lock
		want     []ServiceAlloc
		wantDiag []string
		wantLock string // Lock().Marshal() without the header, when set
	}{
		{
			name: "derived in namespace/name order",
			objs: []*schema.Object{cl, svcObj("s.yaml", "shop", "b"), svcObj("s.yaml", "shop", "a"), svcObj("s.yaml", "blog", "z")},
			want: []ServiceAlloc{
				{Namespace: "blog", Name: "z", ClusterIPs: []ClusterIP{ip("IPv4", "10.0.0.1", Derived)}},
				{Namespace: "shop", Name: "a", ClusterIPs: []ClusterIP{ip("IPv4", "10.0.0.2", Derived)}},
				{Namespace: "shop", Name: "b", ClusterIPs: []ClusterIP{ip("IPv4", "10.0.0.3", Derived)}},
			},
		},
		{
			name: "explicit before derived",
			objs: []*schema.Object{cl, svcObj("s.yaml", "shop", "a"), svcObj("s.yaml", "shop", "b", clusterIP("10.0.0.1"))},
			want: []ServiceAlloc{
				{Namespace: "shop", Name: "a", ClusterIPs: []ClusterIP{ip("IPv4", "10.0.0.2", Derived)}},
				{Namespace: "shop", Name: "b", ClusterIPs: []ClusterIP{ip("IPv4", "10.0.0.1", Explicit)}},
			},
		},
		{
			name: "locked before derived",
			objs: []*schema.Object{cl, svcObj("s.yaml", "shop", "a"), svcObj("s.yaml", "shop", "b"), svcObj("s.yaml", "shop", "c")},
			lock: lockOf(map[string]lockEntry{"shop/c": {clusterIPs: ips("10.0.0.1")}}),
			want: []ServiceAlloc{
				{Namespace: "shop", Name: "a", ClusterIPs: []ClusterIP{ip("IPv4", "10.0.0.2", Derived)}},
				{Namespace: "shop", Name: "b", ClusterIPs: []ClusterIP{ip("IPv4", "10.0.0.3", Derived)}},
				{Namespace: "shop", Name: "c", ClusterIPs: []ClusterIP{ip("IPv4", "10.0.0.1", Locked)}},
			},
		},
		{
			name: "explicit beats the Service's own lock entry",
			objs: []*schema.Object{cl, svcObj("s.yaml", "shop", "a", clusterIP("10.0.0.4"))},
			lock: lockOf(map[string]lockEntry{"shop/a": {clusterIPs: ips("10.0.0.1")}}),
			want: []ServiceAlloc{
				{Namespace: "shop", Name: "a", ClusterIPs: []ClusterIP{ip("IPv4", "10.0.0.4", Explicit)}},
			},
		},
		{
			name: "lock entries of gone Services, outside the CIDR or range, or on the broadcast address are dropped",
			objs: []*schema.Object{cl, svcObj("s.yaml", "shop", "a"), svcObj("s.yaml", "shop", "b"), svcObj("s.yaml", "shop", "c", nodePorts(0))},
			lock: lockOf(map[string]lockEntry{
				"shop/gone": {clusterIPs: ips("10.0.0.1"), nodePorts: map[string]int{"p0/TCP": 30000}},
				"shop/a":    {clusterIPs: ips("10.1.0.1")},
				"shop/b":    {clusterIPs: ips("10.0.0.7")},
				"shop/c":    {nodePorts: map[string]int{"p0/TCP": 40000, "old/TCP": 30005}},
			}),
			want: []ServiceAlloc{
				{Namespace: "shop", Name: "a", ClusterIPs: []ClusterIP{ip("IPv4", "10.0.0.1", Derived)}},
				{Namespace: "shop", Name: "b", ClusterIPs: []ClusterIP{ip("IPv4", "10.0.0.2", Derived)}},
				{Namespace: "shop", Name: "c", ClusterIPs: []ClusterIP{ip("IPv4", "10.0.0.3", Derived)}, NodePorts: []NodePort{np(0, "p0/TCP", 30000, Derived)}},
			},
			wantLock: `version: 1
services:
  shop/a:
    clusterIPs: [10.0.0.1]
  shop/b:
    clusterIPs: [10.0.0.2]
  shop/c:
    clusterIPs: [10.0.0.3]
    nodePorts:
      p0/TCP: 30000
`,
		},
		{
			name: "an explicit value on another Service's lock entry is an error, and the entry is dropped",
			objs: []*schema.Object{cl, svcObj("a.yaml", "shop", "a"), svcObj("b.yaml", "shop", "b", clusterIP("10.0.0.1"))},
			lock: lockOf(map[string]lockEntry{"shop/a": {clusterIPs: ips("10.0.0.1")}}),
			want: []ServiceAlloc{
				{Namespace: "shop", Name: "a", ClusterIPs: []ClusterIP{ip("IPv4", "10.0.0.2", Derived)}},
				{Namespace: "shop", Name: "b", ClusterIPs: []ClusterIP{ip("IPv4", "10.0.0.1", Explicit)}},
			},
			wantDiag: []string{
				"b.yaml:1:1: spec.clusterIPs[0]: 10.0.0.1 is the cluster IP of shop/a in netspec.lock; locked allocations never move, so choose another address",
			},
		},
		{
			name: "explicit values that are errors are left out",
			objs: []*schema.Object{
				cl,
				svcObj("a.yaml", "shop", "a", clusterIP("10.1.0.1")),
				svcObj("b.yaml", "shop", "b", clusterIP("10.0.0.3"), nodePorts(30001, 40000)),
				svcObj("c.yaml", "shop", "c", clusterIP("10.0.0.3"), nodePorts(30001)),
			},
			want: []ServiceAlloc{
				{Namespace: "shop", Name: "b", ClusterIPs: []ClusterIP{ip("IPv4", "10.0.0.3", Explicit)}, NodePorts: []NodePort{np(0, "p0/TCP", 30001, Explicit)}},
			},
			wantDiag: []string{
				"a.yaml:1:1: spec.clusterIPs[0]: 10.1.0.1 is outside the IPv4 service CIDR 10.0.0.0/29",
				"b.yaml:1:1: spec.ports[1].nodePort: 40000 is outside the cluster's node port range 30000-30009",
				"c.yaml:1:1: spec.clusterIPs[0]: 10.0.0.3 is already the cluster IP of shop/b",
				"c.yaml:1:1: spec.ports[0].nodePort: 30001/TCP is already a node port of shop/b",
			},
		},
		{
			name: "two lock entries on one address: the first in name order keeps it",
			objs: []*schema.Object{cl, svcObj("s.yaml", "shop", "b"), svcObj("s.yaml", "shop", "a")},
			lock: lockOf(map[string]lockEntry{"shop/a": {clusterIPs: ips("10.0.0.5")}, "shop/b": {clusterIPs: ips("10.0.0.5")}}),
			want: []ServiceAlloc{
				{Namespace: "shop", Name: "a", ClusterIPs: []ClusterIP{ip("IPv4", "10.0.0.5", Locked)}},
				{Namespace: "shop", Name: "b", ClusterIPs: []ClusterIP{ip("IPv4", "10.0.0.1", Derived)}},
			},
		},
		{
			name: "families",
			objs: []*schema.Object{
				cl,
				svcObj("s.yaml", "shop", "a", families("PreferDualStack")),
				svcObj("s.yaml", "shop", "b", families("SingleStack", "IPv6")),
				svcObj("s.yaml", "shop", "c", clusterIP("fd00::5")),
				svcObj("s.yaml", "shop", "d", families("RequireDualStack", "IPv6", "IPv4")),
				svcObj("s.yaml", "shop", "e", families("PreferDualStack", "IPv6")),
			},
			want: []ServiceAlloc{
				{Namespace: "shop", Name: "a", ClusterIPs: []ClusterIP{ip("IPv4", "10.0.0.1", Derived), ip("IPv6", "fd00::1", Derived)}},
				{Namespace: "shop", Name: "b", ClusterIPs: []ClusterIP{ip("IPv6", "fd00::2", Derived)}},
				{Namespace: "shop", Name: "c", ClusterIPs: []ClusterIP{ip("IPv6", "fd00::5", Explicit)}},
				{Namespace: "shop", Name: "d", ClusterIPs: []ClusterIP{ip("IPv6", "fd00::3", Derived), ip("IPv4", "10.0.0.2", Derived)}},
				{Namespace: "shop", Name: "e", ClusterIPs: []ClusterIP{ip("IPv6", "fd00::4", Derived), ip("IPv4", "10.0.0.3", Derived)}},
			},
		},
		{
			name: "PreferDualStack on a single-stack cluster gets one family",
			objs: []*schema.Object{svcObj("s.yaml", "shop", "a", families("PreferDualStack", "IPv4", "IPv6"))},
			want: []ServiceAlloc{
				{Namespace: "shop", Name: "a", ClusterIPs: []ClusterIP{ip("IPv4", "10.96.0.1", Derived)}},
			},
		},
		{
			name: "headless and ExternalName get nothing; node ports per protocol",
			objs: []*schema.Object{
				cl,
				svcObj("s.yaml", "shop", "h", clusterIP("None"), selector("app", "h")),
				svcObj("s.yaml", "shop", "x", typ("ExternalName"), func(s *schema.ServiceSpec) { s.ExternalName = "db.example.com"; s.Ports = nil; s.IPFamilyPolicy = "" }),
				svcObj("s.yaml", "shop", "np", nodePorts(0, 30005)),
				svcObj("s.yaml", "shop", "lb", nodePorts(0, 30001), typ("LoadBalancer"), noLBPorts),
				svcObj("s.yaml", "shop", "lb2", nodePorts(0), typ("LoadBalancer")),
				svcObj("s.yaml", "shop", "udp", nodePorts(0), udp),
				ready(podObj("p.yaml", "shop", "h-0", map[string]string{"app": "h"}, "10.1.0.1")),
			},
			want: []ServiceAlloc{
				{Namespace: "shop", Name: "lb", ClusterIPs: []ClusterIP{ip("IPv4", "10.0.0.1", Derived)}, NodePorts: []NodePort{np(1, "p1/TCP", 30001, Explicit)}},
				{Namespace: "shop", Name: "lb2", ClusterIPs: []ClusterIP{ip("IPv4", "10.0.0.2", Derived)}, NodePorts: []NodePort{np(0, "p0/TCP", 30000, Derived)}},
				{Namespace: "shop", Name: "np", ClusterIPs: []ClusterIP{ip("IPv4", "10.0.0.3", Derived)}, NodePorts: []NodePort{np(0, "p0/TCP", 30002, Derived), np(1, "p1/TCP", 30005, Explicit)}},
				{Namespace: "shop", Name: "udp", ClusterIPs: []ClusterIP{ip("IPv4", "10.0.0.4", Derived)}, NodePorts: []NodePort{np(0, "p0/UDP", 30000, Derived)}},
			},
			wantLock: `version: 1
services:
  shop/lb:
    clusterIPs: [10.0.0.1]
    nodePorts:
      p1/TCP: 30001
  shop/lb2:
    clusterIPs: [10.0.0.2]
    nodePorts:
      p0/TCP: 30000
  shop/np:
    clusterIPs: [10.0.0.3]
    nodePorts:
      p0/TCP: 30002
      p1/TCP: 30005
  shop/udp:
    clusterIPs: [10.0.0.4]
    nodePorts:
      p0/UDP: 30000
`,
		},

		// ---- health check node ports ----
		{
			name: "health check node port of a LoadBalancer with policy Local: derived after its node ports, locked",
			objs: []*schema.Object{
				cl,
				svcObj("s.yaml", "shop", "cluster", nodePorts(0), typ("LoadBalancer")),
				svcObj("s.yaml", "shop", "local", nodePorts(0), local(0)),
				svcObj("s.yaml", "shop", "np", nodePorts(0), func(s *schema.ServiceSpec) { s.ExternalTrafficPolicy = "Local" }),
				svcObj("s.yaml", "shop", "nolbports", nodePorts(0), local(0), noLBPorts),
			},
			want: []ServiceAlloc{
				{Namespace: "shop", Name: "cluster", ClusterIPs: v4("10.0.0.1"), NodePorts: []NodePort{np(0, "p0/TCP", 30000, Derived)}},
				hc(ServiceAlloc{Namespace: "shop", Name: "local", ClusterIPs: v4("10.0.0.2"), NodePorts: []NodePort{np(0, "p0/TCP", 30001, Derived)}}, 30002, Derived),
				hc(ServiceAlloc{Namespace: "shop", Name: "nolbports", ClusterIPs: v4("10.0.0.3")}, 30003, Derived),
				{Namespace: "shop", Name: "np", ClusterIPs: v4("10.0.0.4"), NodePorts: []NodePort{np(0, "p0/TCP", 30004, Derived)}},
			},
			wantLock: `version: 1
services:
  shop/cluster:
    clusterIPs: [10.0.0.1]
    nodePorts:
      p0/TCP: 30000
  shop/local:
    clusterIPs: [10.0.0.2]
    nodePorts:
      p0/TCP: 30001
    healthCheckNodePort: 30002
  shop/nolbports:
    clusterIPs: [10.0.0.3]
    healthCheckNodePort: 30003
  shop/np:
    clusterIPs: [10.0.0.4]
    nodePorts:
      p0/TCP: 30004
`,
		},
		{
			name: "a health check node port is taken in every protocol",
			objs: []*schema.Object{
				cl,
				svcObj("s.yaml", "shop", "a", nodePorts(0), udp),
				svcObj("s.yaml", "shop", "b", nodePorts(0), local(0)),
				svcObj("s.yaml", "shop", "c", nodePorts(0), udp),
			},
			want: []ServiceAlloc{
				{Namespace: "shop", Name: "a", ClusterIPs: v4("10.0.0.1"), NodePorts: []NodePort{np(0, "p0/UDP", 30000, Derived)}},
				hc(ServiceAlloc{Namespace: "shop", Name: "b", ClusterIPs: v4("10.0.0.2"), NodePorts: []NodePort{np(0, "p0/TCP", 30000, Derived)}}, 30001, Derived),
				{Namespace: "shop", Name: "c", ClusterIPs: v4("10.0.0.3"), NodePorts: []NodePort{np(0, "p0/UDP", 30002, Derived)}},
			},
		},
		{
			name: "explicit health check node port: kept, locked, and never the Service's own node port",
			objs: []*schema.Object{
				cl,
				svcObj("a.yaml", "shop", "a", nodePorts(30005), local(30006)),
				svcObj("b.yaml", "shop", "b", nodePorts(30007), local(30007)),
				svcObj("c.yaml", "shop", "c", nodePorts(30008, 0), func(s *schema.ServiceSpec) { s.Ports[0].Protocol = "UDP" }, local(30008)),
			},
			want: []ServiceAlloc{
				hc(ServiceAlloc{Namespace: "shop", Name: "a", ClusterIPs: v4("10.0.0.1"), NodePorts: []NodePort{np(0, "p0/TCP", 30005, Explicit)}}, 30006, Explicit),
				{Namespace: "shop", Name: "b", ClusterIPs: v4("10.0.0.2"), NodePorts: []NodePort{np(0, "p0/TCP", 30007, Explicit)}},
				{Namespace: "shop", Name: "c", ClusterIPs: v4("10.0.0.3"), NodePorts: []NodePort{np(0, "p0/UDP", 30008, Explicit), np(1, "p1/TCP", 30000, Derived)}},
			},
			wantDiag: []string{
				"b.yaml:1:1: spec.healthCheckNodePort: 30007 is already the node port 30007/TCP of this Service; the health check node port must differ from every node port",
				"c.yaml:1:1: spec.healthCheckNodePort: 30008 is already the node port 30008/UDP of this Service; the health check node port must differ from every node port",
			},
		},
		{
			name: "explicit health check node port against other Services: the second user is the error",
			objs: []*schema.Object{
				cl,
				svcObj("a.yaml", "shop", "a", nodePorts(30005), local(30006)),
				svcObj("b.yaml", "shop", "b", nodePorts(30006), udp),
				svcObj("c.yaml", "shop", "c", nodePorts(0), local(30005)),
				svcObj("d.yaml", "shop", "d", nodePorts(0), local(30006)),
				svcObj("e.yaml", "shop", "e", nodePorts(0), local(40000)),
			},
			want: []ServiceAlloc{
				hc(ServiceAlloc{Namespace: "shop", Name: "a", ClusterIPs: v4("10.0.0.1"), NodePorts: []NodePort{np(0, "p0/TCP", 30005, Explicit)}}, 30006, Explicit),
				{Namespace: "shop", Name: "b", ClusterIPs: v4("10.0.0.2")},
				{Namespace: "shop", Name: "c", ClusterIPs: v4("10.0.0.3"), NodePorts: []NodePort{np(0, "p0/TCP", 30000, Derived)}},
				{Namespace: "shop", Name: "d", ClusterIPs: v4("10.0.0.4"), NodePorts: []NodePort{np(0, "p0/TCP", 30001, Derived)}},
				{Namespace: "shop", Name: "e", ClusterIPs: v4("10.0.0.5"), NodePorts: []NodePort{np(0, "p0/TCP", 30002, Derived)}},
			},
			wantDiag: []string{
				"b.yaml:1:1: spec.ports[0].nodePort: 30006 is already the health check node port of shop/a",
				"c.yaml:1:1: spec.healthCheckNodePort: 30005 is already the node port 30005/TCP of shop/a",
				"d.yaml:1:1: spec.healthCheckNodePort: 30006 is already the health check node port of shop/a",
				"e.yaml:1:1: spec.healthCheckNodePort: 40000 is outside the cluster's node port range 30000-30009",
			},
		},
		{
			name: "an explicit value on another Service's locked health check node port is an error, and the entry is dropped",
			objs: []*schema.Object{
				cl,
				svcObj("a.yaml", "shop", "a", nodePorts(0), local(0)),
				svcObj("b.yaml", "shop", "b", nodePorts(30009), udp),
				svcObj("c.yaml", "shop", "c", nodePorts(0), local(30009)),
				svcObj("d.yaml", "shop", "d", nodePorts(0), local(30004)),
			},
			lock: lockOf(map[string]lockEntry{
				"shop/a":    {nodePorts: map[string]int{"p0/TCP": 30008}, healthCheckNodePort: 30009},
				"shop/gone": {nodePorts: map[string]int{"p0/UDP": 30004}},
			}),
			want: []ServiceAlloc{
				hc(ServiceAlloc{Namespace: "shop", Name: "a", ClusterIPs: v4("10.0.0.1"), NodePorts: []NodePort{np(0, "p0/TCP", 30008, Locked)}}, 30000, Derived),
				{Namespace: "shop", Name: "b", ClusterIPs: v4("10.0.0.2"), NodePorts: []NodePort{np(0, "p0/UDP", 30009, Explicit)}},
				{Namespace: "shop", Name: "c", ClusterIPs: v4("10.0.0.3"), NodePorts: []NodePort{np(0, "p0/TCP", 30001, Derived)}},
				hc(ServiceAlloc{Namespace: "shop", Name: "d", ClusterIPs: v4("10.0.0.4"), NodePorts: []NodePort{np(0, "p0/TCP", 30002, Derived)}}, 30004, Explicit),
			},
			wantDiag: []string{
				"b.yaml:1:1: spec.ports[0].nodePort: 30009 is the health check node port of shop/a in netspec.lock; locked allocations never move, so choose another port",
				"c.yaml:1:1: spec.healthCheckNodePort: 30009 is already the node port 30009/UDP of shop/b",
			},
		},
		{
			name: "a locked health check node port is kept; an explicit one on another Service's locked node port is an error",
			objs: []*schema.Object{
				cl,
				svcObj("a.yaml", "shop", "a", nodePorts(0), local(0)),
				svcObj("b.yaml", "shop", "b", nodePorts(0), udp),
				svcObj("c.yaml", "shop", "c", nodePorts(0), local(30003)),
			},
			lock: lockOf(map[string]lockEntry{
				"shop/a": {nodePorts: map[string]int{"p0/TCP": 30008}, healthCheckNodePort: 30009},
				"shop/b": {nodePorts: map[string]int{"p0/UDP": 30003}},
			}),
			want: []ServiceAlloc{
				hc(ServiceAlloc{Namespace: "shop", Name: "a", ClusterIPs: v4("10.0.0.1"), NodePorts: []NodePort{np(0, "p0/TCP", 30008, Locked)}}, 30009, Locked),
				{Namespace: "shop", Name: "b", ClusterIPs: v4("10.0.0.2"), NodePorts: []NodePort{np(0, "p0/UDP", 30000, Derived)}},
				hc(ServiceAlloc{Namespace: "shop", Name: "c", ClusterIPs: v4("10.0.0.3"), NodePorts: []NodePort{np(0, "p0/TCP", 30000, Derived)}}, 30003, Explicit),
			},
			wantDiag: []string{
				"c.yaml:1:1: spec.healthCheckNodePort: 30003 is the node port 30003/UDP of shop/b in netspec.lock; locked allocations never move, so choose another port",
			},
		},
		{
			name: "a Service no longer LoadBalancer with policy Local drops its health check node port",
			objs: []*schema.Object{cl, svcObj("s.yaml", "shop", "a", nodePorts(0), typ("LoadBalancer"))},
			lock: lockOf(map[string]lockEntry{"shop/a": {nodePorts: map[string]int{"p0/TCP": 30003}, healthCheckNodePort: 30004}}),
			want: []ServiceAlloc{
				{Namespace: "shop", Name: "a", ClusterIPs: v4("10.0.0.1"), NodePorts: []NodePort{np(0, "p0/TCP", 30003, Locked)}},
			},
			wantLock: `version: 1
services:
  shop/a:
    clusterIPs: [10.0.0.1]
    nodePorts:
      p0/TCP: 30003
`,
		},
		{
			name: "an unnamed port is keyed by its number",
			objs: []*schema.Object{cl, svcObj("s.yaml", "shop", "a", nodePorts(0), func(s *schema.ServiceSpec) { s.Ports[0].Name = "" })},
			lock: lockOf(map[string]lockEntry{"shop/a": {nodePorts: map[string]int{"80/TCP": 30009}}}),
			want: []ServiceAlloc{
				{Namespace: "shop", Name: "a", ClusterIPs: []ClusterIP{ip("IPv4", "10.0.0.1", Derived)}, NodePorts: []NodePort{np(0, "80/TCP", 30009, Locked)}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			withHash(t, constHash)
			c := Validate(tt.objs, tt.lock, fakeLoc{})
			if got := c.Alloc.Services(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Services:\n got %+v\nwant %+v", got, tt.want)
			}
			wantDiag := tt.wantDiag
			if wantDiag == nil {
				wantDiag = []string{}
			}
			if got := diagStrings(allocDiags(c.Diags)); !reflect.DeepEqual(got, wantDiag) {
				t.Errorf("diagnostics:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(wantDiag, "\n     "))
			}
			if tt.wantLock != "" {
				if got := string(c.Alloc.Lock().Marshal()); got != header+tt.wantLock {
					t.Errorf("lock:\n%s\nwant:\n%s%s", got, header, tt.wantLock)
				}
			}
			for _, s := range tt.want {
				if got, ok := c.Alloc.Service(s.Namespace, s.Name); !ok || !reflect.DeepEqual(got, s) {
					t.Errorf("Service(%s) = %+v, %v", s.Key(), got, ok)
				}
			}
		})
	}
}

func TestAllocateExhausted(t *testing.T) {
	many := func(n int, mods ...func(*schema.ServiceSpec)) []*schema.Object {
		var objs []*schema.Object
		for i := range n {
			objs = append(objs, atDoc(svcObj("svc.yaml", "shop", fmt.Sprintf("s%d", i), mods...), i))
		}
		return objs
	}
	tests := []struct {
		name string
		hash func(string) uint64
		objs []*schema.Object
		want []string
	}{
		{
			name: "IPv4 CIDR full",
			objs: append([]*schema.Object{clusterObj("c.yaml", "c", func(c *schema.ClusterSpec) { c.ServiceCIDRs = []string{"10.0.0.0/29"} })}, many(8)...),
			want: []string{
				"svc.yaml:7:1: metadata.name: no free IPv4 cluster IP is left in the service CIDR 10.0.0.0/29 for shop/s6; use a larger CIDR or fewer Services",
				"svc.yaml:8:1: metadata.name: no free IPv4 cluster IP is left in the service CIDR 10.0.0.0/29 for shop/s7; use a larger CIDR or fewer Services",
			},
		},
		{
			name: "IPv4 CIDR full, every key on one slot",
			hash: constHash,
			objs: append([]*schema.Object{clusterObj("c.yaml", "c", func(c *schema.ClusterSpec) { c.ServiceCIDRs = []string{"10.0.0.0/30"} })}, many(3)...),
			want: []string{
				"svc.yaml:3:1: metadata.name: no free IPv4 cluster IP is left in the service CIDR 10.0.0.0/30 for shop/s2; use a larger CIDR or fewer Services",
			},
		},
		{
			name: "IPv6 CIDR full",
			objs: append([]*schema.Object{clusterObj("c.yaml", "c", func(c *schema.ClusterSpec) { c.ServiceCIDRs = []string{"fd00::/126"} })}, many(4)...),
			want: []string{
				"svc.yaml:4:1: metadata.name: no free IPv6 cluster IP is left in the service CIDR fd00::/126 for shop/s3; use a larger CIDR or fewer Services",
			},
		},
		{
			name: "node port range full, explicit ports included",
			objs: append([]*schema.Object{
				clusterObj("c.yaml", "c", func(c *schema.ClusterSpec) { c.NodePortRange = "30000-30002" }),
				atDoc(svcObj("svc.yaml", "shop", "x", nodePorts(30001)), 9),
			}, many(3, nodePorts(0))...),
			want: []string{
				"svc.yaml:3:1: spec.ports[0]: no free TCP node port is left in the range 30000-30002 for port p0/TCP of shop/s2; widen the Cluster's nodePortRange or use fewer node ports",
			},
		},
		{
			name: "node port range full for a health check node port: a UDP node port takes its place",
			objs: append([]*schema.Object{
				clusterObj("c.yaml", "c", func(c *schema.ClusterSpec) { c.NodePortRange = "30000-30002" }),
				atDoc(svcObj("svc.yaml", "shop", "x", nodePorts(30001), func(s *schema.ServiceSpec) { s.Ports[0].Protocol = "UDP" }), 9),
			}, many(1, nodePorts(0), func(s *schema.ServiceSpec) { s.Type, s.ExternalTrafficPolicy = "LoadBalancer", "Local" })...),
			want: []string{},
		},
		{
			name: "node port range full for a health check node port",
			objs: append([]*schema.Object{
				clusterObj("c.yaml", "c", func(c *schema.ClusterSpec) { c.NodePortRange = "30000-30002" }),
				atDoc(svcObj("svc.yaml", "shop", "x", nodePorts(30001), func(s *schema.ServiceSpec) { s.Ports[0].Protocol = "UDP" }), 9),
			}, many(2, nodePorts(0), func(s *schema.ServiceSpec) { s.Type, s.ExternalTrafficPolicy = "LoadBalancer", "Local" })...),
			want: []string{
				"svc.yaml:2:1: metadata.name: no free node port is left in the range 30000-30002 for the health check node port of shop/s1; widen the Cluster's nodePortRange or use fewer node ports",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			withHash(t, tt.hash)
			c := Validate(tt.objs, nil, fakeLoc{})
			if got := diagStrings(allocDiags(c.Diags)); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("diagnostics:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(tt.want, "\n     "))
			}
		})
	}
}

func TestIPPool(t *testing.T) {
	tests := []struct {
		prefix string
		hash   uint64
		taken  []string
		want   string
	}{
		{prefix: "10.0.0.0/29", hash: 0, want: "10.0.0.1"},
		{prefix: "10.0.0.0/29", hash: 5, want: "10.0.0.6"},
		{prefix: "10.0.0.0/29", hash: 6, want: "10.0.0.1"},
		{prefix: "10.0.0.0/29", hash: 5, taken: []string{"10.0.0.6"}, want: "10.0.0.1"},
		{prefix: "10.0.0.0/29", hash: 0, taken: []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6"}, want: "none"},
		{prefix: "10.0.0.0/29", hash: 0, taken: []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.6", "10.1.0.0"}, want: "10.0.0.5"},
		{prefix: "10.96.0.0/12", hash: 1<<20 - 3, want: "10.111.255.254"},
		{prefix: "10.96.0.0/12", hash: 1<<20 - 2, want: "10.96.0.1"},
		{prefix: "fd00::/125", hash: 6, want: "fd00::7"},
		{prefix: "fd00::/125", hash: 7, want: "fd00::1"},
		{prefix: "fd00:10:96::/108", hash: 0xabcde, want: "fd00:10:96::a:bcdf"},
		{prefix: "fd00::/64", hash: 1<<63 + 4, want: "fd00::6"},
		{prefix: "fd00::/64", hash: 1<<63 - 3, want: "fd00::7fff:ffff:ffff:fffe"},
		{prefix: "2001:db8::/32", hash: 0, want: "2001:db8::1"},
		{prefix: "2001:db8::/32", hash: 0, taken: []string{"2001:db8::1", "2001:db8:8000::1"}, want: "2001:db8::2"},
	}
	for _, tt := range tests {
		name := fmt.Sprintf("%s/%d/%v", tt.prefix, tt.hash, tt.taken)
		t.Run(name, func(t *testing.T) {
			withHash(t, func(string) uint64 { return tt.hash })
			p := newIPPool(netip.MustParsePrefix(tt.prefix))
			for _, a := range tt.taken {
				p.take(netip.MustParseAddr(a))
			}
			got := "none"
			if a, ok := p.derive("k"); ok {
				got = a.String()
			}
			if got != tt.want {
				t.Errorf("derive = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestLastAddr(t *testing.T) {
	tests := []struct{ prefix, want string }{
		{prefix: "10.96.0.0/12", want: "10.111.255.255"},
		{prefix: "10.0.0.0/29", want: "10.0.0.7"},
		{prefix: "10.0.0.0/24", want: "10.0.0.255"},
		{prefix: "fd00::/108", want: "fd00::f:ffff"},
	}
	for _, tt := range tests {
		if got := lastAddr(netip.MustParsePrefix(tt.prefix)).String(); got != tt.want {
			t.Errorf("lastAddr(%s) = %s, want %s", tt.prefix, got, tt.want)
		}
	}
}

// ---- the promise: a locked allocation never moves ----

// world is a tree of Services that a test adds to and removes from.
type world struct {
	rng     *rand.Rand
	cluster *schema.Object
	svcs    map[string]*schema.Object // by namespace/name
	next    int
}

// add creates a Service of a random kind with a fresh name; explicit, when
// valid, becomes its cluster IP.
func (w *world) add(explicit netip.Addr) {
	ns := []string{"shop", "blog", "infra"}[w.rng.IntN(3)]
	name := fmt.Sprintf("svc-%04d", w.next)
	w.next++
	var mods []func(*schema.ServiceSpec)
	switch w.rng.IntN(6) {
	case 0:
		mods = append(mods, families("SingleStack", "IPv6"))
	case 1:
		mods = append(mods, families("PreferDualStack"))
	case 2:
		mods = append(mods, nodePorts(0, 0), func(s *schema.ServiceSpec) { s.Ports[1].Protocol = "UDP" })
	case 3:
		mods = append(mods, nodePorts(0), typ("LoadBalancer"))
		if w.rng.IntN(2) == 0 {
			mods = append(mods, func(s *schema.ServiceSpec) { s.ExternalTrafficPolicy = "Local" })
		}
	case 4:
		mods = append(mods, clusterIP("None"))
	}
	if explicit.IsValid() {
		mods = append(mods, func(s *schema.ServiceSpec) {
			s.IPFamilies, s.IPFamilyPolicy = nil, "SingleStack"
			s.ClusterIP, s.ClusterIPs = explicit.String(), []string{explicit.String()}
		})
	}
	w.svcs[ns+"/"+name] = svcObj(ns+".yaml", ns, name, mods...)
}

// objects returns the tree in a random order.
func (w *world) objects() []*schema.Object {
	objs := []*schema.Object{w.cluster}
	for _, k := range w.keys() {
		objs = append(objs, w.svcs[k])
	}
	w.rng.Shuffle(len(objs), func(i, j int) { objs[i], objs[j] = objs[j], objs[i] })
	return objs
}

func (w *world) keys() []string {
	keys := make([]string, 0, len(w.svcs))
	for k := range w.svcs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// values lists what a Service was given, without origins.
func values(s ServiceAlloc) []string {
	var out []string
	for _, ip := range s.ClusterIPs {
		out = append(out, ip.Family+"="+ip.Addr.String())
	}
	for _, p := range s.NodePorts {
		out = append(out, fmt.Sprintf("%s=%d", p.Key, p.Port))
	}
	if s.HealthCheckNodePort != 0 {
		out = append(out, fmt.Sprintf("healthCheck/*=%d", s.HealthCheckNodePort))
	}
	return out
}

// checkUnique fails when two Services share a cluster IP or a node port, a
// health check node port is any node port (of any protocol), or a value is
// outside the cluster's CIDRs and range.
func checkUnique(t *testing.T, a *Allocations, cidrs []netip.Prefix, from, to int32) {
	t.Helper()
	seen := map[string]string{}
	for _, s := range a.Services() {
		for _, v := range values(s) {
			key := v
			if i := strings.IndexByte(v, '/'); i >= 0 {
				key = v[i+1:] // protocol=port
			}
			keys := []string{key}
			if port, ok := strings.CutPrefix(key, "*="); ok {
				keys = []string{"TCP=" + port, "UDP=" + port, "SCTP=" + port}
			}
			for _, key := range keys {
				if o, ok := seen[key]; ok {
					t.Fatalf("%s of %s is also %s's", v, s.Key(), o)
				}
				seen[key] = s.Key() + " (" + v + ")"
			}
		}
		for _, ip := range s.ClusterIPs {
			if !slices.ContainsFunc(cidrs, func(p netip.Prefix) bool { return p.Contains(ip.Addr) && p.Addr() != ip.Addr }) || ip.Addr == lastAddr(cidrs[0]) {
				t.Fatalf("%s of %s is outside the CIDRs or a network or broadcast address", ip.Addr, s.Key())
			}
		}
		for _, p := range s.NodePorts {
			if p.Port < from || p.Port > to {
				t.Fatalf("node port %d of %s is outside %d-%d", p.Port, s.Key(), from, to)
			}
		}
		if n := s.HealthCheckNodePort; n != 0 && (n < from || n > to) {
			t.Fatalf("health check node port %d of %s is outside %d-%d", n, s.Key(), from, to)
		}
	}
}

func TestLockedAllocationsNeverMove(t *testing.T) {
	hashes := []struct {
		name string
		hash func(string) uint64
	}{
		{name: "fnv"},
		{name: "every key on one slot", hash: constHash},
		{name: "two slots", hash: func(k string) uint64 { return uint64(len(k) % 2) }},
	}
	// Nearly full CIDRs and ranges, so that most derivations probe.
	sizes := []struct {
		name         string
		cidr4, cidr6 string
		from, to     int32
		initial, max int
	}{
		{name: "500 services", cidr4: "10.0.0.0/23", cidr6: "fd00::/119", from: 30000, to: 30249, initial: 450, max: 500},
		{name: "/24", cidr4: "10.0.0.0/24", cidr6: "fd00::/120", from: 30000, to: 30119, initial: 200, max: 230},
	}
	const rounds = 25
	for _, size := range sizes {
		for _, h := range hashes {
			t.Run(size.name+"/"+h.name, func(t *testing.T) {
				withHash(t, h.hash)
				cidrs := []netip.Prefix{netip.MustParsePrefix(size.cidr4), netip.MustParsePrefix(size.cidr6)}
				w := &world{
					rng: rand.New(rand.NewPCG(1, 2)),
					cluster: clusterObj("cluster.yaml", "prod", func(c *schema.ClusterSpec) {
						c.ServiceCIDRs = []string{size.cidr4, size.cidr6}
						c.NodePortRange = fmt.Sprintf("%d-%d", size.from, size.to)
					}),
					svcs: map[string]*schema.Object{},
				}
				for range size.initial {
					w.add(netip.Addr{})
				}
				c := Validate(w.objects(), nil, fakeLoc{})
				if dl := allocDiags(c.Diags); len(dl) > 0 {
					t.Fatalf("initial tree: %s", diagStrings(dl))
				}
				checkUnique(t, c.Alloc, cidrs, size.from, size.to)
				lock := c.Alloc.Lock()
				prev := c.Alloc

				for round := range rounds {
					// Remove some Services, add others, a few with an
					// explicit cluster IP that no surviving Service holds.
					keys := w.keys()
					w.rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
					for _, k := range keys[:w.rng.IntN(size.max/10)] {
						delete(w.svcs, k)
					}
					used := map[netip.Addr]bool{}
					for _, s := range prev.Services() {
						if _, ok := w.svcs[s.Key()]; ok {
							for _, ip := range s.ClusterIPs {
								used[ip.Addr] = true
							}
						}
					}
					for len(w.svcs) < size.max && w.rng.IntN(50) > 0 {
						var explicit netip.Addr
						if w.rng.IntN(10) == 0 {
							for {
								b := cidrs[0].Addr().As4()
								b[2] += byte(w.rng.IntN(1 << (24 - cidrs[0].Bits())))
								b[3] = byte(1 + w.rng.IntN(254))
								if a := netip.AddrFrom4(b); !used[a] {
									explicit = a
									used[a] = true
									break
								}
							}
						}
						w.add(explicit)
					}

					// The lock goes through its file form, as between two runs.
					var err error
					if lock, err = ParseLock(lock.Marshal()); err != nil {
						t.Fatal(err)
					}
					c := Validate(w.objects(), lock, fakeLoc{})
					if dl := allocDiags(c.Diags); len(dl) > 0 {
						t.Fatalf("round %d: %s", round, diagStrings(dl))
					}
					checkUnique(t, c.Alloc, cidrs, size.from, size.to)
					moved := 0
					for _, old := range prev.Services() {
						if _, ok := w.svcs[old.Key()]; !ok {
							continue
						}
						now, ok := c.Alloc.Service(old.Namespace, old.Name)
						if !ok || !reflect.DeepEqual(values(now), values(old)) {
							t.Errorf("round %d: %s moved from %v to %v", round, old.Key(), values(old), values(now))
							moved++
						}
						for _, ip := range now.ClusterIPs {
							if ip.Origin == Derived {
								t.Errorf("round %d: %s: %s derived again despite the lock", round, old.Key(), ip.Addr)
							}
						}
						if now.HealthCheckNodePort != 0 && now.HealthCheckOrigin != Locked {
							t.Errorf("round %d: %s: health check node port %d is %s, not locked", round, old.Key(), now.HealthCheckNodePort, now.HealthCheckOrigin)
						}
					}
					if moved > 0 {
						t.FailNow()
					}
					lock, prev = c.Alloc.Lock(), c.Alloc
				}
			})
		}
	}
}

func TestAllocateDeterministic(t *testing.T) {
	for _, h := range []struct {
		name string
		hash func(string) uint64
	}{{name: "fnv"}, {name: "constant", hash: constHash}} {
		t.Run(h.name, func(t *testing.T) {
			withHash(t, h.hash)
			w := &world{rng: rand.New(rand.NewPCG(3, 4)), cluster: clusterObj("cluster.yaml", "prod", tiny), svcs: map[string]*schema.Object{}}
			w.cluster.Cluster.Spec.ServiceCIDRs = []string{"10.0.0.0/22", "fd00::/118"}
			w.cluster.Cluster.Spec.NodePortRange = "30000-30999"
			for range 300 {
				w.add(netip.Addr{})
			}
			// A lock from another tree, so that all three origins take part.
			var other []*schema.Object
			for i, o := range w.objects() {
				if i%3 != 0 || o.Cluster != nil {
					other = append(other, o)
				}
			}
			lock := Validate(other, nil, fakeLoc{}).Alloc.Lock()
			w.add(netip.MustParseAddr("10.0.3.33"))

			first := Validate(w.objects(), lock, fakeLoc{})
			if dl := allocDiags(first.Diags); len(dl) > 0 {
				t.Fatal(diagStrings(dl))
			}
			origins := map[Origin]int{}
			for _, s := range first.Alloc.Services() {
				for _, ip := range s.ClusterIPs {
					origins[ip.Origin]++
				}
			}
			if origins[Explicit] == 0 || origins[Locked] == 0 || origins[Derived] == 0 {
				t.Fatalf("origins %v: want all three", origins)
			}
			want := first.Alloc.Lock().Marshal()
			for i := range 5 {
				got := Validate(w.objects(), lock, fakeLoc{})
				if !reflect.DeepEqual(got.Alloc.Services(), first.Alloc.Services()) {
					t.Fatalf("shuffle %d: allocations differ", i)
				}
				if b := got.Alloc.Lock().Marshal(); string(b) != string(want) {
					t.Fatalf("shuffle %d: lock differs:\n%s\nwant:\n%s", i, b, want)
				}
			}
		})
	}
}
