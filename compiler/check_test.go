package compiler

import (
	"reflect"
	"strings"
	"testing"

	"netspec.dev/netspec/internal/diag"
	"netspec.dev/netspec/schema"
)

// fakeLoc puts every field of an object on line Doc+1, column 1, of its file.
type fakeLoc struct{}

func (fakeLoc) Locate(src schema.Source, p diag.Path) diag.Pos {
	return diag.Pos{File: src.File, Line: src.Doc + 1, Col: 1}
}

// ---- object builders; the values are what schema decoding yields ----

func src(file string) schema.Source { return schema.Source{File: file, Item: -1} }

// svcObj returns a ClusterIP Service with one TCP port 80, as decoded with
// Kubernetes defaults, changed by mods.
func svcObj(file, ns, name string, mods ...func(*schema.ServiceSpec)) *schema.Object {
	s := &schema.Service{
		Metadata: schema.ObjectMeta{Namespace: ns, Name: name},
		Spec: schema.ServiceSpec{
			Type:                  "ClusterIP",
			Ports:                 []schema.ServicePort{{Name: "http", Protocol: "TCP", Port: 80, TargetPort: schema.IntOrString{Int: 80}}},
			SessionAffinity:       "None",
			InternalTrafficPolicy: "Cluster",
			IPFamilyPolicy:        "SingleStack",
		},
	}
	for _, m := range mods {
		m(&s.Spec)
	}
	if (s.Spec.Type == "NodePort" || s.Spec.Type == "LoadBalancer") && s.Spec.ExternalTrafficPolicy == "" {
		s.Spec.ExternalTrafficPolicy = "Cluster"
	}
	return &schema.Object{Src: src(file), APIVersion: "v1", Kind: schema.KindService, Service: s}
}

func clusterIP(ips ...string) func(*schema.ServiceSpec) {
	return func(s *schema.ServiceSpec) {
		s.ClusterIP = ips[0]
		s.ClusterIPs = ips
		if len(ips) == 2 {
			s.IPFamilyPolicy = "RequireDualStack"
		}
	}
}

func families(policy string, fams ...string) func(*schema.ServiceSpec) {
	return func(s *schema.ServiceSpec) { s.IPFamilyPolicy, s.IPFamilies = policy, fams }
}

func selector(kv ...string) func(*schema.ServiceSpec) {
	return func(s *schema.ServiceSpec) {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		s.Selector = schema.NewStringMap(m)
	}
}

func typ(t string) func(*schema.ServiceSpec) { return func(s *schema.ServiceSpec) { s.Type = t } }

// nodePorts makes a NodePort Service whose ports carry the given node
// ports (0: allocate), each a TCP port named p0, p1, ...
func nodePorts(ports ...int32) func(*schema.ServiceSpec) {
	return func(s *schema.ServiceSpec) {
		s.Type = "NodePort"
		s.Ports = nil
		for i, n := range ports {
			s.Ports = append(s.Ports, schema.ServicePort{Name: "p" + string(rune('0'+i)), Protocol: "TCP", Port: 80 + int32(i), TargetPort: schema.IntOrString{Int: 80}, NodePort: n})
		}
	}
}

func externalIPs(ips ...string) func(*schema.ServiceSpec) {
	return func(s *schema.ServiceSpec) { s.ExternalIPs = ips }
}

// lb makes a LoadBalancer Service with spec.loadBalancerIP lbIP ("" for
// none).
func lb(lbIP string) func(*schema.ServiceSpec) {
	return func(s *schema.ServiceSpec) { s.Type, s.LoadBalancerIP = "LoadBalancer", lbIP }
}

// withIngress sets the status ingress IPs of a Service object; "Proxy:IP"
// has ipMode Proxy.
func withIngress(o *schema.Object, ips ...string) *schema.Object {
	for _, ip := range ips {
		ing := schema.LoadBalancerIngress{IP: ip}
		if a, ok := strings.CutPrefix(ip, "Proxy:"); ok {
			ing = schema.LoadBalancerIngress{IP: a, IPMode: "Proxy"}
		}
		o.Service.Status.LoadBalancer.Ingress = append(o.Service.Status.LoadBalancer.Ingress, ing)
	}
	return o
}

func clusterObj(file, name string, mod func(*schema.ClusterSpec)) *schema.Object {
	c := &schema.Cluster{Metadata: schema.ObjectMeta{Name: name}, Spec: schema.DefaultClusterSpec()}
	if mod != nil {
		mod(&c.Spec)
	}
	return &schema.Object{Src: src(file), APIVersion: "netspec.dev/v1alpha1", Kind: schema.KindCluster, Cluster: c}
}

func dualStack(c *schema.ClusterSpec) { c.ServiceCIDRs = []string{"10.96.0.0/12", "fd00:10:96::/108"} }

func podObj(file, ns, name string, labels map[string]string, ips ...string) *schema.Object {
	p := &schema.Pod{Metadata: schema.ObjectMeta{Namespace: ns, Name: name, Labels: schema.NewStringMap(labels)}}
	if len(ips) > 0 {
		p.Status.PodIP = ips[0]
		for _, ip := range ips {
			p.Status.PodIPs = append(p.Status.PodIPs, schema.PodIP{IP: ip})
		}
	}
	return &schema.Object{Src: src(file), APIVersion: "v1", Kind: schema.KindPod, Pod: p}
}

// ready makes a pod Ready.
func ready(o *schema.Object) *schema.Object {
	o.Pod.Status.Conditions = append(o.Pod.Status.Conditions, schema.PodCondition{Type: "Ready", Status: "True"})
	return o
}

func endpointsObj(file, ns, name string, ips ...string) *schema.Object {
	e := &schema.Endpoints{Metadata: schema.ObjectMeta{Namespace: ns, Name: name}}
	ss := schema.EndpointSubset{Ports: []schema.EndpointPort{{Name: "http", Port: 8080, Protocol: "TCP"}}}
	for _, ip := range ips {
		ss.Addresses = append(ss.Addresses, schema.EndpointAddress{IP: ip})
	}
	e.Subsets = []schema.EndpointSubset{ss}
	return &schema.Object{Src: src(file), APIVersion: "v1", Kind: schema.KindEndpoints, Endpoints: e}
}

func sliceObj(file, ns, name string, labels map[string]string, ips ...string) *schema.Object {
	s := &schema.EndpointSlice{Metadata: schema.ObjectMeta{Namespace: ns, Name: name, Labels: schema.NewStringMap(labels)}, AddressType: "IPv4",
		Ports: []schema.EndpointPort{{Name: "http", Port: 8080, Protocol: "TCP"}}}
	for _, ip := range ips {
		s.Endpoints = append(s.Endpoints, schema.SliceEndpoint{Addresses: []string{ip}, Conditions: schema.EndpointConditions{Ready: true, Serving: true}})
	}
	return &schema.Object{Src: src(file), APIVersion: "discovery.k8s.io/v1", Kind: schema.KindEndpointSlice, EndpointSlice: s}
}

func nodeObj(file, name string) *schema.Object {
	n := &schema.Node{Metadata: schema.ObjectMeta{Name: name}}
	return &schema.Object{Src: src(file), APIVersion: "v1", Kind: schema.KindNode, Node: n}
}

// atDoc moves an object to document doc of its file, so that fakeLoc puts
// it on line doc+1.
func atDoc(o *schema.Object, doc int) *schema.Object {
	o.Src.Doc = doc
	return o
}

// diagStrings returns the diagnostics sorted, as the CLI prints them.
func diagStrings(dl diag.List) []string {
	dl = append(diag.List(nil), dl...)
	dl.Sort()
	out := []string{}
	for _, d := range dl {
		out = append(out, d.String())
	}
	return out
}

// noEndpoints is the finding at pos of the name of a Service without
// selector that no Endpoints object or EndpointSlice gives an address:
// the trees of TestValidate, made for other findings, have many.
func noEndpoints(pos, name string) string {
	return pos + ": warning: metadata.name: the Service has no selector and no Endpoints object or EndpointSlice with an address, so every port of it refuses connections; write an Endpoints object named " +
		name + " or an EndpointSlice labelled kubernetes.io/service-name: " + name + " with the addresses, or give the Service a selector"
}

func TestValidate(t *testing.T) {
	app := map[string]string{"app": "web"}
	tests := []struct {
		name string
		objs []*schema.Object
		lock *Lock
		want []string
	}{
		// ---- duplicates ----
		{
			name: "same name in other kinds and namespaces is fine",
			objs: []*schema.Object{
				svcObj("svc.yaml", "shop", "web"),
				svcObj("svc.yaml", "blog", "web"),
				endpointsObj("ep.yaml", "shop", "web", "10.1.0.5"),
				nodeObj("nodes.yaml", "n1"),
				nodeObj("nodes.yaml", "n2"),
			},
			want: []string{
				noEndpoints("svc.yaml:1:1", "web"),
			},
		},
		{
			name: "duplicate Service and Node",
			objs: []*schema.Object{
				atDoc(svcObj("a.yaml", "shop", "web"), 2),
				svcObj("b.yaml", "shop", "web"),
				nodeObj("nodes.yaml", "n1"),
				atDoc(nodeObj("nodes.yaml", "n1"), 1),
			},
			want: []string{
				noEndpoints("a.yaml:3:1", "web"),
				"b.yaml:1:1: metadata.name: Service shop/web is already defined at a.yaml:3",
				"nodes.yaml:2:1: metadata.name: Node n1 is already defined at nodes.yaml:1",
			},
		},
		{
			name: "second Cluster object",
			objs: []*schema.Object{
				clusterObj("cluster.yaml", "prod", nil),
				clusterObj("more/cluster.yaml", "staging", nil),
				atDoc(clusterObj("more/cluster.yaml", "prod", nil), 1),
			},
			want: []string{
				`more/cluster.yaml:1:1: metadata.name: is a second Cluster object; a tree has at most one (the first, "prod", is at cluster.yaml:1)`,
				`more/cluster.yaml:2:1: metadata.name: is a second Cluster object; a tree has at most one (the first, "prod", is at cluster.yaml:1)`,
			},
		},

		// ---- explicit cluster IPs ----
		{
			name: "explicit cluster IPs inside their CIDRs",
			objs: []*schema.Object{
				clusterObj("cluster.yaml", "prod", dualStack),
				svcObj("svc.yaml", "shop", "a", clusterIP("10.96.0.10")),
				svcObj("svc.yaml", "shop", "b", clusterIP("10.111.255.254", "fd00:10:96::ffff")),
				svcObj("svc.yaml", "shop", "c", clusterIP("fd00:10:96::1")),
			},
			want: []string{
				noEndpoints("svc.yaml:1:1", "a"),
				noEndpoints("svc.yaml:1:1", "b"),
				noEndpoints("svc.yaml:1:1", "c"),
			},
		},
		{
			name: "explicit cluster IPs outside, network, broadcast, unknown family",
			objs: []*schema.Object{
				svcObj("a.yaml", "shop", "a", clusterIP("10.0.0.5")),
				svcObj("b.yaml", "shop", "b", clusterIP("10.96.0.0")),
				svcObj("c.yaml", "shop", "c", clusterIP("10.111.255.255")),
				svcObj("d.yaml", "shop", "d", clusterIP("fd00::1")),
			},
			want: []string{
				noEndpoints("a.yaml:1:1", "a"),
				"a.yaml:1:1: spec.clusterIPs[0]: 10.0.0.5 is outside the IPv4 service CIDR 10.96.0.0/12",
				noEndpoints("b.yaml:1:1", "b"),
				"b.yaml:1:1: spec.clusterIPs[0]: 10.96.0.0 is the network address of the IPv4 service CIDR 10.96.0.0/12 and cannot be a cluster IP",
				noEndpoints("c.yaml:1:1", "c"),
				"c.yaml:1:1: spec.clusterIPs[0]: 10.111.255.255 is the broadcast address of the IPv4 service CIDR 10.96.0.0/12 and cannot be a cluster IP",
				noEndpoints("d.yaml:1:1", "d"),
				"d.yaml:1:1: spec.clusterIPs[0]: fd00::1 is an IPv6 address, but the cluster has no IPv6 service CIDR (serviceCIDRs: 10.96.0.0/12)",
			},
		},
		{
			name: "clusterIP alone is checked at spec.clusterIP; IPv6 network address",
			objs: []*schema.Object{
				clusterObj("cluster.yaml", "prod", dualStack),
				svcObj("a.yaml", "shop", "a", func(s *schema.ServiceSpec) { s.ClusterIP = "10.95.0.1" }),
				svcObj("b.yaml", "shop", "b", clusterIP("fd00:10:96::")),
			},
			want: []string{
				noEndpoints("a.yaml:1:1", "a"),
				"a.yaml:1:1: spec.clusterIP: 10.95.0.1 is outside the IPv4 service CIDR 10.96.0.0/12",
				noEndpoints("b.yaml:1:1", "b"),
				"b.yaml:1:1: spec.clusterIPs[0]: fd00:10:96:: is the network address of the IPv6 service CIDR fd00:10:96::/108 and cannot be a cluster IP",
			},
		},
		{
			name: "families the cluster has",
			objs: []*schema.Object{
				svcObj("a.yaml", "shop", "a", families("SingleStack", "IPv4")),
				svcObj("b.yaml", "shop", "b", families("PreferDualStack")),
				svcObj("c.yaml", "shop", "c", families("PreferDualStack", "IPv4", "IPv6")),
			},
			want: []string{
				noEndpoints("a.yaml:1:1", "a"),
				noEndpoints("b.yaml:1:1", "b"),
				noEndpoints("c.yaml:1:1", "c"),
			},
		},
		{
			name: "families the cluster lacks",
			objs: []*schema.Object{
				svcObj("a.yaml", "shop", "a", families("SingleStack", "IPv6")),
				svcObj("b.yaml", "shop", "b", families("RequireDualStack")),
				svcObj("c.yaml", "shop", "c", families("RequireDualStack", "IPv4", "IPv6")),
				svcObj("d.yaml", "shop", "d", families("PreferDualStack", "IPv6", "IPv4")),
			},
			want: []string{
				noEndpoints("a.yaml:1:1", "a"),
				"a.yaml:1:1: spec.ipFamilies[0]: the cluster has no IPv6 service CIDR (serviceCIDRs: 10.96.0.0/12)",
				noEndpoints("b.yaml:1:1", "b"),
				"b.yaml:1:1: spec.ipFamilyPolicy: RequireDualStack needs an IPv4 and an IPv6 service CIDR, but the cluster has only 10.96.0.0/12; use PreferDualStack or SingleStack",
				noEndpoints("c.yaml:1:1", "c"),
				"c.yaml:1:1: spec.ipFamilyPolicy: RequireDualStack needs an IPv4 and an IPv6 service CIDR, but the cluster has only 10.96.0.0/12; use PreferDualStack or SingleStack",
				noEndpoints("d.yaml:1:1", "d"),
				"d.yaml:1:1: spec.ipFamilies[0]: the cluster has no IPv6 service CIDR (serviceCIDRs: 10.96.0.0/12)",
			},
		},
		{
			name: "headless with a selector: families the cluster lacks",
			objs: []*schema.Object{
				svcObj("a.yaml", "shop", "a", clusterIP("None"), selector("app", "a"), families("SingleStack", "IPv6")),
				svcObj("b.yaml", "shop", "b", clusterIP("None"), selector("app", "b"), families("RequireDualStack")),
				svcObj("c.yaml", "shop", "c", clusterIP("None"), selector("app", "c"), families("PreferDualStack", "IPv4")),
			},
			want: []string{
				"a.yaml:1:1: spec.ipFamilies[0]: the cluster has no IPv6 service CIDR (serviceCIDRs: 10.96.0.0/12); a headless Service with a selector gets endpoints of the cluster's families only",
				"a.yaml:1:1: warning: spec.selector: matches no Pod in namespace shop, so the Service has no endpoints",
				"b.yaml:1:1: spec.ipFamilyPolicy: RequireDualStack needs an IPv4 and an IPv6 service CIDR, but the cluster has only 10.96.0.0/12; use PreferDualStack or SingleStack",
				"b.yaml:1:1: warning: spec.selector: matches no Pod in namespace shop, so the Service has no endpoints",
				"c.yaml:1:1: warning: spec.selector: matches no Pod in namespace shop, so the Service has no endpoints",
			},
		},
		{
			name: "headless without a selector: any families",
			objs: []*schema.Object{
				svcObj("a.yaml", "shop", "a", clusterIP("None"), families("RequireDualStack", "IPv6", "IPv4")),
			},
			want: []string{},
		},
		{
			name: "RequireDualStack on a dual-stack cluster",
			objs: []*schema.Object{
				clusterObj("cluster.yaml", "prod", dualStack),
				svcObj("a.yaml", "shop", "a", families("RequireDualStack", "IPv6")),
			},
			want: []string{
				noEndpoints("a.yaml:1:1", "a"),
			},
		},

		// ---- one IP, two Services ----
		{
			name: "different explicit cluster IPs",
			objs: []*schema.Object{
				svcObj("a.yaml", "shop", "a", clusterIP("10.96.0.10")),
				svcObj("b.yaml", "shop", "b", clusterIP("10.96.0.11")),
			},
			want: []string{
				noEndpoints("a.yaml:1:1", "a"),
				noEndpoints("b.yaml:1:1", "b"),
			},
		},
		{
			name: "one explicit cluster IP, two Services",
			objs: []*schema.Object{
				svcObj("b.yaml", "shop", "b", clusterIP("10.96.0.10")),
				svcObj("a.yaml", "shop", "a", clusterIP("10.96.0.10")),
			},
			want: []string{
				noEndpoints("a.yaml:1:1", "a"),
				noEndpoints("b.yaml:1:1", "b"),
				"b.yaml:1:1: spec.clusterIPs[0]: 10.96.0.10 is already the cluster IP of shop/a",
			},
		},
		{
			name: "explicit cluster IP that another Service has in the lock",
			objs: []*schema.Object{
				svcObj("a.yaml", "shop", "a"),
				svcObj("b.yaml", "shop", "b", clusterIP("10.96.0.10")),
			},
			lock: lockOf(map[string]lockEntry{"shop/a": {clusterIPs: ips("10.96.0.10")}}),
			want: []string{
				noEndpoints("a.yaml:1:1", "a"),
				noEndpoints("b.yaml:1:1", "b"),
				"b.yaml:1:1: spec.clusterIPs[0]: 10.96.0.10 is the cluster IP of shop/a in netspec.lock; locked allocations never move, so choose another address",
			},
		},

		// ---- node ports ----
		{
			name: "node ports in range; one number for TCP and UDP",
			objs: []*schema.Object{
				svcObj("a.yaml", "shop", "a", nodePorts(30000, 0)),
				svcObj("b.yaml", "shop", "b", nodePorts(32767), func(s *schema.ServiceSpec) { s.Ports[0].Protocol = "UDP"; s.Ports[0].NodePort = 30000 }),
			},
			want: []string{
				noEndpoints("a.yaml:1:1", "a"),
				noEndpoints("b.yaml:1:1", "b"),
			},
		},
		{
			name: "node port out of range and used twice",
			objs: []*schema.Object{
				svcObj("a.yaml", "shop", "a", nodePorts(30080, 29999)),
				svcObj("b.yaml", "shop", "b", nodePorts(0, 30080)),
				svcObj("c.yaml", "shop", "c", nodePorts(32768), typ("LoadBalancer")),
			},
			want: []string{
				noEndpoints("a.yaml:1:1", "a"),
				"a.yaml:1:1: spec.ports[1].nodePort: 29999 is outside the cluster's node port range 30000-32767",
				noEndpoints("b.yaml:1:1", "b"),
				"b.yaml:1:1: spec.ports[1].nodePort: 30080/TCP is already a node port of shop/a",
				noEndpoints("c.yaml:1:1", "c"),
				"c.yaml:1:1: spec.ports[0].nodePort: 32768 is outside the cluster's node port range 30000-32767",
			},
		},
		{
			name: "node port range of the Cluster object",
			objs: []*schema.Object{
				clusterObj("cluster.yaml", "prod", func(c *schema.ClusterSpec) { c.NodePortRange = "20000-20099" }),
				svcObj("a.yaml", "shop", "a", nodePorts(20000)),
				svcObj("b.yaml", "shop", "b", nodePorts(30000)),
			},
			want: []string{
				noEndpoints("a.yaml:1:1", "a"),
				noEndpoints("b.yaml:1:1", "b"),
				"b.yaml:1:1: spec.ports[0].nodePort: 30000 is outside the cluster's node port range 20000-20099",
			},
		},
		{
			name: "explicit node port that another Service has in the lock",
			objs: []*schema.Object{
				svcObj("a.yaml", "shop", "a", nodePorts(0)),
				svcObj("b.yaml", "shop", "b", nodePorts(30500)),
			},
			lock: lockOf(map[string]lockEntry{"shop/a": {nodePorts: map[string]int{"p0/TCP": 30500}}}),
			want: []string{
				noEndpoints("a.yaml:1:1", "a"),
				noEndpoints("b.yaml:1:1", "b"),
				"b.yaml:1:1: spec.ports[0].nodePort: 30500/TCP is a node port of shop/a in netspec.lock; locked allocations never move, so choose another port",
			},
		},

		// ---- external IPs ----
		{
			name: "external IPs inside externalIPCIDRs",
			objs: []*schema.Object{
				clusterObj("cluster.yaml", "prod", func(c *schema.ClusterSpec) {
					c.ExternalIPCIDRs = []string{"198.51.100.0/24", "203.0.113.0/24"}
				}),
				svcObj("a.yaml", "shop", "a", externalIPs("203.0.113.7", "198.51.100.1")),
			},
			want: []string{
				noEndpoints("a.yaml:1:1", "a"),
			},
		},
		{
			name: "external IP with no externalIPCIDRs",
			objs: []*schema.Object{
				svcObj("a.yaml", "shop", "a", externalIPs("203.0.113.7")),
			},
			want: []string{
				noEndpoints("a.yaml:1:1", "a"),
				"a.yaml:1:1: spec.externalIPs[0]: 203.0.113.7 is not inside any externalIPCIDRs of the Cluster object; add a CIDR that contains it to spec.externalIPCIDRs to allow it (none are allowed by default, which closes CVE-2020-8554)",
			},
		},
		{
			name: "external IP outside the externalIPCIDRs",
			objs: []*schema.Object{
				clusterObj("cluster.yaml", "prod", func(c *schema.ClusterSpec) { c.ExternalIPCIDRs = []string{"198.51.100.0/24"} }),
				svcObj("a.yaml", "shop", "a", externalIPs("198.51.100.1", "203.0.113.7")),
			},
			want: []string{
				noEndpoints("a.yaml:1:1", "a"),
				"a.yaml:1:1: spec.externalIPs[1]: 203.0.113.7 is not inside any externalIPCIDRs of the Cluster object (198.51.100.0/24); add a CIDR that contains it to spec.externalIPCIDRs to allow it",
			},
		},

		// ---- LoadBalancer IPs ----
		{
			name: "ingress IPs inside loadBalancerIPCIDRs, loadBalancerIP among them",
			objs: []*schema.Object{
				clusterObj("cluster.yaml", "prod", func(c *schema.ClusterSpec) {
					c.LoadBalancerIPCIDRs = []string{"198.51.100.0/24", "2001:db8::/64"}
				}),
				withIngress(svcObj("a.yaml", "shop", "a", lb("198.51.100.7")), "198.51.100.7", "2001:db8::7", "::ffff:198.51.100.8"),
			},
			want: []string{
				noEndpoints("a.yaml:1:1", "a"),
				"a.yaml:1:1: warning: status.loadBalancer.ingress[1].ip: 2001:db8::7 is an IPv6 address, but the Service has no IPv6 cluster IP (ipFamilies: IPv4), so no node captures it, as kube-proxy installs a Service's rules per family; add IPv6 to ipFamilies with ipFamilyPolicy PreferDualStack",
			},
		},
		{
			name: "ingress IP with no loadBalancerIPCIDRs",
			objs: []*schema.Object{
				withIngress(svcObj("dns.yaml", "kube-system", "dns", lb("")), "1.1.1.1"),
			},
			want: []string{
				noEndpoints("dns.yaml:1:1", "dns"),
				"dns.yaml:1:1: status.loadBalancer.ingress[0].ip: 1.1.1.1 is not inside any loadBalancerIPCIDRs of the Cluster object; add a CIDR that contains it to spec.loadBalancerIPCIDRs to allow it (none are allowed by default: every node captures the traffic to a LoadBalancer IP, as it does to an external IP, CVE-2020-8554)",
			},
		},
		{
			name: "ingress IP outside the loadBalancerIPCIDRs; external IPs do not count",
			objs: []*schema.Object{
				clusterObj("cluster.yaml", "prod", func(c *schema.ClusterSpec) {
					c.ExternalIPCIDRs, c.LoadBalancerIPCIDRs = []string{"203.0.113.0/24"}, []string{"198.51.100.0/24", "203.0.113.96/28"}
				}),
				withIngress(svcObj("a.yaml", "shop", "a", lb("")), "203.0.113.100", "203.0.113.7"),
			},
			want: []string{
				noEndpoints("a.yaml:1:1", "a"),
				"a.yaml:1:1: status.loadBalancer.ingress[1].ip: 203.0.113.7 is not inside any loadBalancerIPCIDRs of the Cluster object (198.51.100.0/24, 203.0.113.96/28); add a CIDR that contains it to spec.loadBalancerIPCIDRs to allow it",
			},
		},
		{
			name: "ipMode Proxy and hostname ingresses are not captured, not checked",
			objs: []*schema.Object{
				withIngress(svcObj("a.yaml", "shop", "a", lb("")), "Proxy:8.8.8.8", ""),
			},
			want: []string{
				noEndpoints("a.yaml:1:1", "a"),
			},
		},
		{
			name: "ingress of a Service that is not a LoadBalancer is not captured, not checked",
			objs: []*schema.Object{
				withIngress(svcObj("a.yaml", "shop", "a", typ("NodePort")), "8.8.8.8"),
			},
			want: []string{
				noEndpoints("a.yaml:1:1", "a"),
			},
		},
		{
			name: "loadBalancerIP that no ingress IP matches",
			objs: []*schema.Object{
				clusterObj("cluster.yaml", "prod", func(c *schema.ClusterSpec) { c.LoadBalancerIPCIDRs = []string{"198.51.100.0/24"} }),
				svcObj("a.yaml", "shop", "a", lb("8.8.8.8")),
				withIngress(svcObj("b.yaml", "shop", "b", lb("198.51.100.9")), "198.51.100.10", "Proxy:8.8.4.4"),
				withIngress(svcObj("c.yaml", "shop", "c", lb("8.8.4.4")), "Proxy:8.8.4.4"),
			},
			want: []string{
				noEndpoints("a.yaml:1:1", "a"),
				"a.yaml:1:1: warning: spec.loadBalancerIP: 8.8.8.8 is not programmed: as kube-proxy, netspec captures only the addresses of status.loadBalancer.ingress, and none of them is 8.8.8.8; add it there once the load balancer answers on it",
				noEndpoints("b.yaml:1:1", "b"),
				"b.yaml:1:1: warning: spec.loadBalancerIP: 198.51.100.9 is not programmed: as kube-proxy, netspec captures only the addresses of status.loadBalancer.ingress, and none of them is 198.51.100.9; add it there once the load balancer answers on it",
				noEndpoints("c.yaml:1:1", "c"),
			},
		},

		// ---- endpoint IPs ----
		{
			name: "endpoint IPs that are no Service's",
			objs: []*schema.Object{
				clusterObj("cluster.yaml", "prod", func(c *schema.ClusterSpec) { c.ExternalIPCIDRs = []string{"203.0.113.0/24"} }),
				svcObj("svc.yaml", "shop", "web", clusterIP("10.96.0.10"), externalIPs("203.0.113.7")),
				endpointsObj("ep.yaml", "shop", "web", "10.1.0.5"),
				sliceObj("slice.yaml", "shop", "web-1", map[string]string{schema.ServiceNameLabel: "web"}, "10.1.0.6"),
			},
			want: []string{},
		},
		{
			name: "endpoint IPs that are cluster, external and load balancer IPs",
			objs: []*schema.Object{
				clusterObj("cluster.yaml", "prod", func(c *schema.ClusterSpec) {
					c.ExternalIPCIDRs, c.LoadBalancerIPCIDRs = []string{"203.0.113.0/24"}, []string{"192.0.2.0/24"}
				}),
				svcObj("svc.yaml", "shop", "web", clusterIP("10.96.0.10"), externalIPs("203.0.113.7")),
				func() *schema.Object {
					o := svcObj("lb.yaml", "shop", "lb", typ("LoadBalancer"))
					o.Service.Spec.LoadBalancerIP = "192.0.2.1"
					o.Service.Status.LoadBalancer.Ingress = []schema.LoadBalancerIngress{{IP: "192.0.2.2"}}
					return o
				}(),
				endpointsObj("ep.yaml", "shop", "web", "10.1.0.5", "10.96.0.10"),
				sliceObj("slice.yaml", "shop", "web-1", map[string]string{schema.ServiceNameLabel: "web"}, "203.0.113.7"),
				podObj("pod.yaml", "shop", "p", nil, "192.0.2.1"),
				podObj("pod2.yaml", "shop", "q", nil, "10.1.0.9", "192.0.2.2"),
			},
			want: []string{
				"ep.yaml:1:1: subsets[0].addresses[1].ip: 10.96.0.10 is the cluster IP of shop/web and cannot be an endpoint",
				noEndpoints("lb.yaml:1:1", "lb"),
				"lb.yaml:1:1: warning: spec.loadBalancerIP: 192.0.2.1 is not programmed: as kube-proxy, netspec captures only the addresses of status.loadBalancer.ingress, and none of them is 192.0.2.1; add it there once the load balancer answers on it",
				"pod.yaml:1:1: status.podIP: 192.0.2.1 is the load balancer IP of shop/lb and cannot be an endpoint",
				"pod2.yaml:1:1: status.podIPs[1].ip: 192.0.2.2 is a load balancer ingress IP of shop/lb and cannot be an endpoint",
				"slice.yaml:1:1: endpoints[0].addresses[0]: 203.0.113.7 is an external IP of shop/web and cannot be an endpoint",
			},
		},

		{
			name: "endpoint IP that is a locked cluster IP",
			objs: []*schema.Object{
				svcObj("svc.yaml", "shop", "web"),
				podObj("pod.yaml", "shop", "p", nil, "10.96.0.20"),
			},
			lock: lockOf(map[string]lockEntry{"shop/web": {clusterIPs: ips("10.96.0.20")}}),
			want: []string{
				"pod.yaml:1:1: status.podIP: 10.96.0.20 is the cluster IP of shop/web and cannot be an endpoint",
				noEndpoints("svc.yaml:1:1", "web"),
			},
		},

		// ---- endpoints and their Services ----
		{
			name: "manual endpoints of selectorless Services",
			objs: []*schema.Object{
				svcObj("svc.yaml", "shop", "db"),
				endpointsObj("ep.yaml", "shop", "db", "10.1.0.5"),
				sliceObj("slice.yaml", "shop", "db-1", map[string]string{schema.ServiceNameLabel: "db"}, "10.1.0.6"),
			},
			want: []string{},
		},
		{
			name: "manual endpoints nobody uses",
			objs: []*schema.Object{
				svcObj("svc.yaml", "shop", "web", selector("app", "web")),
				podObj("pod.yaml", "shop", "web-0", app, "10.1.0.7"),
				endpointsObj("ep.yaml", "shop", "web", "10.1.0.5"),
				endpointsObj("ep2.yaml", "shop", "gone", "10.1.0.5"),
				sliceObj("s1.yaml", "shop", "x", nil, "10.1.0.6"),
				sliceObj("s2.yaml", "shop", "y", map[string]string{"team": "a"}, "10.1.0.6"),
				sliceObj("s3.yaml", "shop", "z", map[string]string{schema.ServiceNameLabel: "gone"}, "10.1.0.6"),
			},
			want: []string{
				"ep.yaml:1:1: warning: metadata.name: Service shop/web has a selector, so Kubernetes ignores these manual endpoints and takes them from the selected Pods",
				"ep2.yaml:1:1: warning: metadata.name: no Service shop/gone exists, so these endpoints are unused",
				`pod.yaml:1:1: warning: status.conditions: Pod shop/web-0 is not Ready (no condition type Ready with status "True"), so Service shop/web sends it no traffic; add that condition to status.conditions`,
				"s1.yaml:1:1: warning: metadata.name: has no label kubernetes.io/service-name, so the slice belongs to no Service and is unused",
				"s2.yaml:1:1: warning: metadata.labels: has no label kubernetes.io/service-name, so the slice belongs to no Service and is unused",
				`s3.yaml:1:1: warning: metadata.labels["kubernetes.io/service-name"]: no Service shop/gone exists, so this slice is unused`,
			},
		},

		// ---- selectors ----
		{
			name: "selector matching a Pod",
			objs: []*schema.Object{
				svcObj("svc.yaml", "shop", "web", selector("app", "web")),
				ready(podObj("pod.yaml", "shop", "web-0", map[string]string{"app": "web", "tier": "front"}, "10.1.0.7")),
			},
			want: []string{},
		},
		{
			name: "selector matching no Pod",
			objs: []*schema.Object{
				svcObj("svc.yaml", "shop", "web", selector("app", "web", "tier", "back")),
				svcObj("svc2.yaml", "blog", "web", selector("app", "web")),
				podObj("pod.yaml", "shop", "web-0", map[string]string{"app": "web", "tier": "front"}, "10.1.0.7"),
			},
			want: []string{
				"svc.yaml:1:1: warning: spec.selector: matches no Pod in namespace shop, so the Service has no endpoints",
				"svc2.yaml:1:1: warning: spec.selector: matches no Pod in namespace blog, so the Service has no endpoints",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Validate(tt.objs, tt.lock, fakeLoc{})
			if got := diagStrings(c.Diags); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("diagnostics:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(tt.want, "\n     "))
			}
		})
	}
}

func TestValidateCluster(t *testing.T) {
	tests := []struct {
		name string
		objs []*schema.Object
		want schema.ClusterSpec
	}{
		{
			name: "no Cluster object: defaults",
			objs: []*schema.Object{svcObj("svc.yaml", "shop", "web")},
			want: schema.DefaultClusterSpec(),
		},
		{
			name: "the first Cluster object",
			objs: []*schema.Object{
				clusterObj("a.yaml", "prod", dualStack),
				clusterObj("b.yaml", "other", nil),
			},
			want: func() schema.ClusterSpec { s := schema.DefaultClusterSpec(); dualStack(&s); return s }(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Validate(tt.objs, nil, fakeLoc{}).Cluster; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Cluster = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestValidateNilLocator(t *testing.T) {
	objs := []*schema.Object{svcObj("a.yaml", "shop", "a", clusterIP("10.0.0.1"))}
	got := diagStrings(Validate(objs, nil, nil).Diags)
	want := []string{noEndpoints("a.yaml", "a"), "a.yaml: spec.clusterIPs[0]: 10.0.0.1 is outside the IPv4 service CIDR 10.96.0.0/12"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
