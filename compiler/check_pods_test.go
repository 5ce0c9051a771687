package compiler

import (
	"fmt"
	"strings"
	"testing"

	"netspec.dev/netspec/schema"
)

// TestCheckPods: the findings of a tree that validates but cannot serve,
// each at the object to fix, with the fix. A finding is matched by a part
// of its text; every finding of the tree is listed.
func TestCheckPods(t *testing.T) {
	app := map[string]string{"app": "web"}
	named := func(name string) func(*schema.ServiceSpec) {
		return func(s *schema.ServiceSpec) { s.Ports[0].TargetPort = schema.IntOrString{Str: name} }
	}
	withPort := func(o *schema.Object, name string) *schema.Object {
		o.Pod.Spec.Containers = append(o.Pod.Spec.Containers, schema.Container{Name: "c", Ports: []schema.ContainerPort{{Name: name, ContainerPort: 8080, Protocol: "TCP"}}})
		return o
	}
	phase := func(o *schema.Object, p string) *schema.Object { o.Pod.Status.Phase = p; return o }
	onNode := func(o *schema.Object, n string) *schema.Object { o.Pod.Spec.NodeName = n; return o }
	hostNet := func(o *schema.Object) *schema.Object { o.Pod.Spec.HostNetwork = true; return o }
	cidrs := func(o *schema.Object, c ...string) *schema.Object { o.Node.Spec.PodCIDRs = c; return o }
	tests := []struct {
		name string
		objs []*schema.Object
		want []string // parts of the findings, in their order
	}{
		{
			name: "ready pods serve",
			objs: []*schema.Object{
				svcObj("svc.yaml", "shop", "web", selector("app", "web")),
				ready(podObj("pod.yaml", "shop", "web-0", app, "10.1.0.7")),
			},
		},
		{
			name: "selected pods that are no endpoint",
			objs: []*schema.Object{
				svcObj("svc.yaml", "shop", "web", selector("app", "web")),
				podObj("a.yaml", "shop", "no-ip", app),
				podObj("b.yaml", "shop", "not-ready", app, "10.1.0.8"),
				ready(phase(podObj("c.yaml", "shop", "done", app, "10.1.0.9"), "Succeeded")),
			},
			want: []string{
				"a.yaml:1:1: warning: status.podIP: Pod shop/no-ip has no status.podIP, so it is no endpoint of Service shop/web; a Pod written by hand needs",
				`b.yaml:1:1: warning: status.conditions: Pod shop/not-ready is not Ready (no condition type Ready with status "True"), so Service shop/web sends it no traffic`,
				"c.yaml:1:1: warning: status.phase: Pod shop/done has finished (phase Succeeded), so it is no endpoint of Service shop/web",
			},
		},
		{
			name: "not ready is meant: publishNotReadyAddresses, terminating",
			objs: []*schema.Object{
				svcObj("svc.yaml", "shop", "web", selector("app", "web"), func(s *schema.ServiceSpec) { s.PublishNotReadyAddresses = true }),
				svcObj("svc2.yaml", "shop", "web2", selector("app", "web2")),
				podObj("a.yaml", "shop", "starting", app, "10.1.0.8"),
				func() *schema.Object {
					o := podObj("b.yaml", "shop", "leaving", map[string]string{"app": "web2"}, "10.1.0.9")
					o.Pod.Metadata.DeletionTimestamp = "2026-01-01T00:00:00Z"
					return o
				}(),
			},
		},
		{
			name: "named targetPort no selected pod has",
			objs: []*schema.Object{
				svcObj("svc.yaml", "shop", "web", selector("app", "web"), named("http")),
				withPort(ready(podObj("a.yaml", "shop", "web-0", app, "10.1.0.7")), "htpp"),
				withPort(ready(podObj("b.yaml", "shop", "web-1", app, "10.1.0.8")), "metrics"),
			},
			want: []string{`svc.yaml:1:1: warning: spec.ports[0].targetPort: no selected Pod has a container port named http/TCP (web-0, web-1), so port http has no endpoints; did you mean "htpp"?`},
		},
		{
			name: "named targetPort one selected pod has",
			objs: []*schema.Object{
				svcObj("svc.yaml", "shop", "web", selector("app", "web"), named("http")),
				withPort(ready(podObj("a.yaml", "shop", "web-0", app, "10.1.0.7")), "http"),
				withPort(ready(podObj("b.yaml", "shop", "web-1", app, "10.1.0.8")), "metrics"),
			},
		},
		{
			name: "two pods with one IP: an error at the second, naming the first",
			objs: []*schema.Object{
				ready(podObj("a.yaml", "shop", "a", app, "10.1.0.7")),
				ready(podObj("b.yaml", "shop", "b", app, "10.1.0.7")),
				ready(podObj("c.yaml", "blog", "c", nil, "10.1.0.8", "fd00::8")),
				ready(podObj("d.yaml", "blog", "d", nil, "10.1.0.9", "fd00::8")),
			},
			want: []string{
				"b.yaml:1:1: status.podIP: 10.1.0.7 is also the IP of Pod shop/a at a.yaml:1: two Pods cannot have one IP",
				"d.yaml:1:1: status.podIPs[1].ip: fd00::8 is also the IP of Pod blog/c at c.yaml:1",
			},
		},
		{
			name: "one IP is fine for host-network pods, and after a pod finished or while it terminates",
			objs: []*schema.Object{
				hostNet(ready(podObj("a.yaml", "kube-system", "proxy", nil, "192.168.1.1"))),
				hostNet(ready(podObj("b.yaml", "kube-system", "dns", nil, "192.168.1.1"))),
				phase(podObj("c.yaml", "shop", "job", nil, "10.1.0.7"), "Failed"),
				ready(podObj("d.yaml", "shop", "web", nil, "10.1.0.7")),
				func() *schema.Object {
					o := ready(podObj("e.yaml", "shop", "old", nil, "10.1.0.8"))
					o.Pod.Metadata.DeletionTimestamp = "2026-01-01T00:00:00Z"
					return o
				}(),
				ready(podObj("f.yaml", "shop", "new", nil, "10.1.0.8")),
			},
		},
		{
			name: "nodeName that names no Node, and a pod IP outside its Node's podCIDRs",
			objs: []*schema.Object{
				nodeObj("nodes.yaml", "node-1"),
				cidrs(nodeObj("nodes.yaml", "node-2"), "10.1.2.0/24", "fd00:2::/64"),
				onNode(ready(podObj("a.yaml", "shop", "a", nil, "10.1.0.7")), "nod-1"),
				onNode(ready(podObj("b.yaml", "shop", "b", nil, "10.1.0.8", "fd00:2::8")), "node-2"),
				onNode(ready(podObj("c.yaml", "shop", "c", nil, "10.1.2.9")), "node-2"),
				onNode(hostNet(ready(podObj("d.yaml", "shop", "d", nil, "192.168.1.2"))), "node-2"),
			},
			want: []string{
				`a.yaml:1:1: warning: spec.nodeName: no Node nod-1 in the tree, so the Pod's endpoints are local to no node and have no zone (Local traffic policies, topology); did you mean "node-1"?`,
				"b.yaml:1:1: warning: status.podIP: 10.1.0.8 is outside the podCIDRs of its Node node-2 (10.1.2.0/24, fd00:2::/64)",
			},
		},
		{
			name: "nodeName in a tree without Nodes",
			objs: []*schema.Object{onNode(ready(podObj("a.yaml", "shop", "a", nil, "10.1.0.7")), "node-1")},
		},
		{
			name: "a port of a Service without selector that its endpoints leave out",
			objs: []*schema.Object{
				svcObj("svc.yaml", "shop", "db", func(s *schema.ServiceSpec) {
					s.Ports = append(s.Ports, schema.ServicePort{Name: "metrics", Protocol: "TCP", Port: 9090, TargetPort: schema.IntOrString{Int: 9090}})
				}),
				endpointsObj("ep.yaml", "shop", "db", "10.1.0.5"),
			},
			want: []string{`svc.yaml:1:1: warning: spec.ports[1].name: no Endpoints object or EndpointSlice of Service shop/db has an address for a port named "metrics"/TCP`},
		},
		{
			name: "a Service without selector that no endpoints give an address",
			objs: []*schema.Object{
				svcObj("a.yaml", "shop", "db", nodePorts(0)),
				svcObj("b.yaml", "shop", "cache"),
				endpointsObj("b-ep.yaml", "shop", "cache"),
				svcObj("c.yaml", "shop", "queue"),
				sliceObj("c-slice.yaml", "shop", "queue-1", map[string]string{schema.ServiceNameLabel: "queue"}),
			},
			want: []string{
				"a.yaml:1:1: warning: metadata.name: the Service has no selector and no Endpoints object or EndpointSlice with an address, so every port of it refuses connections; write an Endpoints object named db or an EndpointSlice labelled kubernetes.io/service-name: db with the addresses, or give the Service a selector",
				"b.yaml:1:1: warning: metadata.name: the Service has no selector and no Endpoints object or EndpointSlice with an address, so every port of it refuses connections; write an Endpoints object named cache",
				"c.yaml:1:1: warning: metadata.name: the Service has no selector and no Endpoints object or EndpointSlice with an address, so every port of it refuses connections; write an Endpoints object named queue",
			},
		},
		{
			name: "no endpoints as meant: headless, ExternalName, another proxy's, not-ready addresses only",
			objs: []*schema.Object{
				svcObj("a.yaml", "shop", "peers", clusterIP("None")),
				svcObj("b.yaml", "shop", "ext", func(s *schema.ServiceSpec) { s.Type, s.ExternalName, s.Ports = "ExternalName", "db.example.com", nil }),
				func() *schema.Object {
					o := svcObj("c.yaml", "shop", "nfs")
					o.Service.Metadata.Labels = schema.NewStringMap(map[string]string{schema.ServiceProxyNameLabel: "other"})
					return o
				}(),
				svcObj("d.yaml", "shop", "db"),
				func() *schema.Object {
					o := endpointsObj("d-ep.yaml", "shop", "db")
					o.Endpoints.Subsets[0].NotReadyAddresses = []schema.EndpointAddress{{IP: "10.1.0.5"}}
					return o
				}(),
			},
			// (The schema warns about the label of c.yaml itself.)
		},
		{
			name: "endpoints without nodeName under a Local policy",
			objs: []*schema.Object{
				svcObj("svc.yaml", "shop", "db", func(s *schema.ServiceSpec) { s.InternalTrafficPolicy = "Local" }),
				endpointsObj("ep.yaml", "shop", "db", "10.1.0.5", "10.1.0.6"),
				sliceObj("slice.yaml", "shop", "db-1", map[string]string{schema.ServiceNameLabel: "db"}, "10.1.0.7"),
			},
			want: []string{
				"ep.yaml:1:1: warning: subsets[0].addresses[0]: 2 address(es) without nodeName: Service shop/db has internalTrafficPolicy Local",
				"slice.yaml:1:1: warning: endpoints[0]: 1 address(es) without nodeName: Service shop/db has internalTrafficPolicy Local",
			},
		},
		{
			name: "an external IP of a family the Service has no cluster IP of",
			objs: []*schema.Object{
				clusterObj("cluster.yaml", "c", func(c *schema.ClusterSpec) { c.ExternalIPCIDRs = []string{"203.0.113.0/24", "2001:db8::/64"} }),
				svcObj("svc.yaml", "shop", "web", externalIPs("203.0.113.1", "2001:db8::1")),
			},
			want: []string{
				"svc.yaml:1:1: warning: metadata.name: the Service has no selector and no Endpoints object or EndpointSlice with an address",
				"svc.yaml:1:1: warning: spec.externalIPs[1]: 2001:db8::1 is an IPv6 address, but the Service has no IPv6 cluster IP (ipFamilies: IPv4), so no node captures it",
			},
		},
		{
			name: "an Endpoints subset beyond what Kubernetes mirrors",
			objs: []*schema.Object{
				svcObj("svc.yaml", "shop", "db"),
				endpointsObj("ep.yaml", "shop", "db", manyIPs(MaxMirrored+2)...),
			},
			want: []string{"ep.yaml:1:1: warning: subsets[0]: this subset has 1002 addresses; Kubernetes' EndpointSlice mirroring controller copies at most 1000 per subset (ready ones first), so kube-proxy, and netspec as it, use the first 1000 and leave out 2"},
		},
		{
			name: "a duplicate Service hides no other finding",
			objs: []*schema.Object{
				svcObj("a.yaml", "shop", "web", selector("app", "web")),
				svcObj("b.yaml", "shop", "web", selector("app", "web")),
				podObj("c.yaml", "shop", "web-0", app, "10.1.0.7"),
				ready(podObj("d.yaml", "shop", "web-1", app, "10.1.0.7")),
			},
			want: []string{
				"b.yaml:1:1: metadata.name: Service shop/web is already defined at a.yaml:1",
				"c.yaml:1:1: warning: status.conditions: Pod shop/web-0 is not Ready",
				"d.yaml:1:1: status.podIP: 10.1.0.7 is also the IP of Pod shop/web-0 at c.yaml:1",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := diagStrings(Validate(tt.objs, nil, fakeLoc{}).Diags)
			ok := len(got) == len(tt.want)
			for i := 0; ok && i < len(got); i++ {
				ok = strings.Contains(got[i], tt.want[i])
			}
			if !ok {
				t.Errorf("findings:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(tt.want, "\n     "))
			}
			// The memo finds the same, from empty.
			m := NewMemo()
			if diff := checkedDiff(tt.objs, m.Validate(tt.objs, nil, fakeLoc{}), Validate(tt.objs, nil, fakeLoc{})); diff != "" {
				t.Errorf("memo differs from fresh: %s", diff)
			}
		})
	}
}

// TestMirroredEndpoints: netspec uses the addresses of an Endpoints
// subset that Kubernetes mirrors into EndpointSlices: the first 1,000 of
// its ready addresses, then of its not-ready ones.
func TestMirroredEndpoints(t *testing.T) {
	ips := manyIPs(MaxMirrored + 5)
	sub := schema.EndpointSubset{}
	for _, ip := range ips[:MaxMirrored-2] {
		sub.Addresses = append(sub.Addresses, schema.EndpointAddress{IP: ip})
	}
	sub.Addresses = append(sub.Addresses, schema.EndpointAddress{IP: "not-an-ip"}) // skipped, not counted
	for _, ip := range ips[MaxMirrored-2:] {
		sub.NotReadyAddresses = append(sub.NotReadyAddresses, schema.EndpointAddress{IP: ip})
	}
	ready, notReady, left := mirrored(sub)
	if len(ready) != MaxMirrored-1 || len(notReady) != 2 || left != 5 || notReady[1].IP != ips[MaxMirrored-1] {
		t.Errorf("mirrored %d ready, %d not ready (last %s), %d left; want %d, 2 (last %s), 5",
			len(ready), len(notReady), notReady[len(notReady)-1].IP, left, MaxMirrored-1, ips[MaxMirrored-1])
	}
}

// manyIPs returns n distinct addresses of 10.2.0.0/16.
func manyIPs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("10.2.%d.%d", i/250, i%250+1)
	}
	return out
}
