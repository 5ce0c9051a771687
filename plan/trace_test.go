package plan_test

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"netspec.dev/netspec/plan"
)

var (
	ip  = netip.MustParseAddr
	ap  = netip.MustParseAddrPort
	pfx = netip.MustParsePrefix
)

func eps(s ...string) []netip.AddrPort {
	out := make([]netip.AddrPort, len(s))
	for i, a := range s {
		out[i] = ap(a)
	}
	return out
}

// ep is a ready endpoint on a node.
func ep(addr, node string) plan.Endpoint {
	a := ap(addr)
	return plan.Endpoint{IP: a.Addr(), Port: a.Port(), Ready: true, Serving: true, NodeName: node}
}

// testPlan is node-1 (192.168.10.11, also reached on 203.0.113.7) of a
// dual-stack cluster whose pods use 10.244.0.0/16 and fd00:10:244::/56.
func testPlan() *plan.Plan {
	return &plan.Plan{
		FormatVersion: plan.FormatVersion,
		Node:          plan.Node{Name: "node-1", Zone: "zone-a", IPs: []netip.Addr{ip("192.168.10.11"), ip("203.0.113.7")}},
		Cluster: plan.Cluster{
			Domain:       "cluster.local",
			ServiceCIDRs: []netip.Prefix{pfx("10.96.0.0/12"), pfx("fd00:10:96::/112")},
			PodCIDRs:     []netip.Prefix{pfx("10.244.0.0/16"), pfx("fd00:10:244::/56")},
			DNSTTL:       5,
		},
		Services: []plan.Service{
			{
				Namespace: "data", Name: "db", Type: "ClusterIP", Headless: true,
				Ports: []plan.Port{{
					Name: "postgres", Protocol: "TCP", Port: 5432,
					Endpoints: []plan.Endpoint{ep("10.244.1.30:5432", "node-1")},
					Cluster:   []int{0}, External: []int{0},
				}},
			},
			{
				Namespace: "edge", Name: "gateway", Type: "LoadBalancer",
				ClusterIPs:      []netip.Addr{ip("10.96.0.80")},
				LoadBalancerIPs: []netip.Addr{ip("203.0.113.100")},
				SourceRanges:    []netip.Prefix{pfx("198.51.100.0/24"), pfx("10.244.0.0/16")},
				Ports: []plan.Port{{
					Name: "https", Protocol: "TCP", Port: 443, NodePort: 31443,
					Endpoints: []plan.Endpoint{ep("10.244.1.50:8443", "node-1"), ep("10.244.2.50:8443", "node-2")},
					Cluster:   []int{0, 1}, External: []int{0, 1},
				}},
			},
			{
				Namespace: "edge", Name: "ingress", Type: "NodePort", ExternalLocal: true,
				ClusterIPs: []netip.Addr{ip("10.96.0.81")},
				Ports: []plan.Port{{
					Name: "https", Protocol: "TCP", Port: 443, NodePort: 30443,
					Endpoints: []plan.Endpoint{ep("10.244.1.80:8443", "node-1"), ep("10.244.2.80:8443", "node-2")},
					Cluster:   []int{0, 1}, External: []int{0},
				}},
			},
			{
				// externalTrafficPolicy Local, but no endpoint on node-1.
				Namespace: "edge", Name: "remote", Type: "LoadBalancer", ExternalLocal: true,
				ClusterIPs:      []netip.Addr{ip("10.96.0.82")},
				LoadBalancerIPs: []netip.Addr{ip("203.0.113.102")},
				Ports: []plan.Port{{
					Protocol: "TCP", Port: 80, NodePort: 30082,
					Endpoints: []plan.Endpoint{ep("10.244.2.82:8080", "node-2")},
					Cluster:   []int{0}, External: nil,
				}},
			},
			{
				// Local policies and no endpoints anywhere: reject, not drop.
				Namespace: "edge", Name: "void", Type: "NodePort", ExternalLocal: true, InternalLocal: true,
				ClusterIPs: []netip.Addr{ip("10.96.0.83")},
				Ports:      []plan.Port{{Protocol: "TCP", Port: 80, NodePort: 30083}},
			},
			{
				Namespace: "infra", Name: "dns", Type: "ClusterIP",
				ClusterIPs: []netip.Addr{ip("10.96.0.53")},
				Ports: []plan.Port{
					{
						Name: "dns", Protocol: "UDP", Port: 53,
						Endpoints: []plan.Endpoint{ep("10.244.1.53:53", "node-1"), ep("10.244.2.53:53", "node-2")},
						Cluster:   []int{0, 1}, External: []int{0, 1},
					},
					{
						Name: "dns-tcp", Protocol: "TCP", Port: 53,
						Endpoints: []plan.Endpoint{ep("10.244.1.53:5353", "node-1")},
						Cluster:   []int{0}, External: []int{0},
					},
				},
			},
			{
				Namespace: "infra", Name: "node-agent", Type: "ClusterIP", InternalLocal: true,
				ClusterIPs: []netip.Addr{ip("10.96.0.90")},
				Ports: []plan.Port{{
					Name: "trace", Protocol: "TCP", Port: 8126,
					Endpoints: []plan.Endpoint{ep("10.244.2.90:8126", "node-2")},
					Cluster:   nil, External: []int{0},
				}},
			},
			{
				Namespace: "infra", Name: "node-agent-here", Type: "ClusterIP", InternalLocal: true,
				ClusterIPs: []netip.Addr{ip("10.96.0.91")},
				Ports: []plan.Port{{
					Protocol: "TCP", Port: 8126,
					Endpoints: []plan.Endpoint{ep("10.244.1.91:8126", "node-1"), ep("10.244.2.91:8126", "node-2")},
					Cluster:   []int{0}, External: []int{0, 1},
				}},
			},
			{
				Namespace: "shop", Name: "checkout", Type: "ClusterIP",
				ClusterIPs: []netip.Addr{ip("10.96.0.100")},
				Ports: []plan.Port{{
					Name: "http", Protocol: "TCP", Port: 80,
					Endpoints: []plan.Endpoint{
						{IP: ip("10.244.1.100"), Port: 8080, Serving: true, Terminating: true, NodeName: "node-1"},
						{IP: ip("10.244.3.100"), Port: 8080, Terminating: true, NodeName: "node-3"},
					},
					Cluster: []int{0}, External: []int{0},
				}},
			},
			{
				Namespace: "shop", Name: "frontend", Type: "ClusterIP",
				ClusterIPs: []netip.Addr{ip("10.96.0.120"), ip("fd00:10:96::120")},
				Ports: []plan.Port{{
					Name: "http", Protocol: "TCP", Port: 80,
					Endpoints: []plan.Endpoint{
						ep("10.244.1.120:8080", "node-1"), ep("10.244.3.120:8080", "node-3"),
						ep("[fd00:10:244:1::120]:8080", "node-1"), ep("[fd00:10:244:3::120]:8080", "node-3"),
					},
					Cluster: []int{0, 1, 2, 3}, External: []int{0, 1, 2, 3},
				}},
			},
			{
				// Dual-stack, but only IPv4 pods.
				Namespace: "shop", Name: "legacy", Type: "ClusterIP",
				ClusterIPs: []netip.Addr{ip("10.96.0.121"), ip("fd00:10:96::121")},
				Ports: []plan.Port{{
					Protocol: "TCP", Port: 80,
					Endpoints: []plan.Endpoint{ep("10.244.1.121:8080", "node-1")},
					Cluster:   []int{0}, External: []int{0},
				}},
			},
			{
				Namespace: "shop", Name: "portal", Type: "ClusterIP",
				ClusterIPs:  []netip.Addr{ip("10.96.0.60")},
				ExternalIPs: []netip.Addr{ip("203.0.113.7"), ip("203.0.113.10")},
				Ports: []plan.Port{{
					Name: "http", Protocol: "TCP", Port: 80,
					Endpoints: []plan.Endpoint{ep("10.244.1.60:8080", "node-1"), ep("10.244.3.60:8080", "node-3")},
					Cluster:   []int{0, 1}, External: []int{0, 1},
				}},
			},
			{
				Namespace: "shop", Name: "reports", Type: "ClusterIP",
				ClusterIPs: []netip.Addr{ip("10.96.0.70")},
				Ports:      []plan.Port{{Name: "http", Protocol: "TCP", Port: 80}},
			},
			{
				Namespace: "shop", Name: "search", Type: "ExternalName", ExternalName: "search.example.com",
			},
			{
				Namespace: "shop", Name: "web", Type: "NodePort",
				ClusterIPs: []netip.Addr{ip("10.96.0.10")},
				Ports: []plan.Port{{
					Name: "http", Protocol: "TCP", Port: 80, NodePort: 30080,
					Endpoints: []plan.Endpoint{ep("10.244.1.5:8080", "node-1"), ep("10.244.2.5:8081", "node-2")},
					Cluster:   []int{0, 1}, External: []int{0, 1},
				}},
			},
		},
	}
}

func TestTrace(t *testing.T) {
	p := testPlan()
	tests := []struct {
		name string
		pk   plan.Packet
		want plan.Verdict
	}{
		// Cluster IPs.
		{
			name: "cluster IP from a pod: dnat to Cluster, no masquerade",
			pk:   plan.Packet{Src: ip("10.244.3.7"), Dst: ip("10.96.0.10"), Protocol: "TCP", Port: 80},
			want: plan.Verdict{Action: "dnat", Endpoints: eps("10.244.1.5:8080", "10.244.2.5:8081"), Service: "shop/web", Port: "http"},
		},
		{
			name: "cluster IP from outside the pod CIDRs: masquerade",
			pk:   plan.Packet{Src: ip("192.168.50.4"), Dst: ip("10.96.0.10"), Protocol: "TCP", Port: 80},
			want: plan.Verdict{Action: "dnat", Endpoints: eps("10.244.1.5:8080", "10.244.2.5:8081"), Masquerade: true, Service: "shop/web", Port: "http"},
		},
		{
			name: "cluster IP from a process on the node: masquerade",
			pk:   plan.Packet{Src: ip("192.168.10.11"), Dst: ip("10.96.0.10"), Protocol: "TCP", Port: 80, FromLocal: true},
			want: plan.Verdict{Action: "dnat", Endpoints: eps("10.244.1.5:8080", "10.244.2.5:8081"), Masquerade: true, Service: "shop/web", Port: "http"},
		},
		{
			name: "cluster IP, IPv4-mapped destination",
			pk:   plan.Packet{Src: ip("10.244.3.7"), Dst: ip("::ffff:10.96.0.10"), Protocol: "TCP", Port: 80},
			want: plan.Verdict{Action: "dnat", Endpoints: eps("10.244.1.5:8080", "10.244.2.5:8081"), Service: "shop/web", Port: "http"},
		},
		{
			name: "UDP port of a service that has a TCP port of the same number",
			pk:   plan.Packet{Src: ip("10.244.3.7"), Dst: ip("10.96.0.53"), Protocol: "UDP", Port: 53},
			want: plan.Verdict{Action: "dnat", Endpoints: eps("10.244.1.53:53", "10.244.2.53:53"), Service: "infra/dns", Port: "dns"},
		},
		{
			name: "TCP port of a service that has a UDP port of the same number",
			pk:   plan.Packet{Src: ip("10.244.3.7"), Dst: ip("10.96.0.53"), Protocol: "TCP", Port: 53},
			want: plan.Verdict{Action: "dnat", Endpoints: eps("10.244.1.53:5353"), Service: "infra/dns", Port: "dns-tcp"},
		},
		{
			name: "cluster IP on a port it does not serve: reject",
			pk:   plan.Packet{Src: ip("10.244.3.7"), Dst: ip("10.96.0.10"), Protocol: "TCP", Port: 8080},
			want: plan.Verdict{Action: "reject", Service: "shop/web"},
		},
		{
			name: "cluster IP with a protocol it does not serve: reject",
			pk:   plan.Packet{Src: ip("10.244.3.7"), Dst: ip("10.96.0.10"), Protocol: "SCTP", Port: 80},
			want: plan.Verdict{Action: "reject", Service: "shop/web"},
		},
		{
			name: "unallocated address of a service CIDR: drop",
			pk:   plan.Packet{Src: ip("10.244.3.7"), Dst: ip("10.96.7.7"), Protocol: "TCP", Port: 80},
			want: plan.Verdict{Action: "drop"},
		},
		{
			name: "unallocated address of the IPv6 service CIDR: drop",
			pk:   plan.Packet{Src: ip("fd00:10:244:3::7"), Dst: ip("fd00:10:96::7"), Protocol: "TCP", Port: 80},
			want: plan.Verdict{Action: "drop"},
		},
		{
			name: "not a service address: accept",
			pk:   plan.Packet{Src: ip("10.244.3.7"), Dst: ip("8.8.8.8"), Protocol: "UDP", Port: 53},
			want: plan.Verdict{Action: "accept"},
		},
		{
			name: "headless: a pod address is not a frontend",
			pk:   plan.Packet{Src: ip("10.244.3.7"), Dst: ip("10.244.1.30"), Protocol: "TCP", Port: 5432},
			want: plan.Verdict{Action: "accept"},
		},
		{
			name: "no endpoints: reject",
			pk:   plan.Packet{Src: ip("10.244.3.7"), Dst: ip("10.96.0.70"), Protocol: "TCP", Port: 80},
			want: plan.Verdict{Action: "reject", Service: "shop/reports", Port: "http"},
		},
		{
			name: "terminating fallback: dnat to the serving, terminating endpoint",
			pk:   plan.Packet{Src: ip("10.244.3.7"), Dst: ip("10.96.0.100"), Protocol: "TCP", Port: 80},
			want: plan.Verdict{Action: "dnat", Endpoints: eps("10.244.1.100:8080"), Service: "shop/checkout", Port: "http"},
		},
		{
			name: "internalTrafficPolicy Local with a local endpoint",
			pk:   plan.Packet{Src: ip("10.244.1.7"), Dst: ip("10.96.0.91"), Protocol: "TCP", Port: 8126},
			want: plan.Verdict{Action: "dnat", Endpoints: eps("10.244.1.91:8126"), Service: "infra/node-agent-here"},
		},
		{
			name: "internalTrafficPolicy Local without a local endpoint: drop",
			pk:   plan.Packet{Src: ip("10.244.1.7"), Dst: ip("10.96.0.90"), Protocol: "TCP", Port: 8126},
			want: plan.Verdict{Action: "drop", Service: "infra/node-agent", Port: "trace"},
		},
		{
			name: "Local policies without any endpoint: reject",
			pk:   plan.Packet{Src: ip("10.244.1.7"), Dst: ip("10.96.0.83"), Protocol: "TCP", Port: 80},
			want: plan.Verdict{Action: "reject", Service: "edge/void"},
		},
		{
			name: "Local policies without any endpoint, node port: reject",
			pk:   plan.Packet{Src: ip("198.51.100.9"), Dst: ip("192.168.10.11"), Protocol: "TCP", Port: 30083},
			want: plan.Verdict{Action: "reject", Service: "edge/void"},
		},
		{
			name: "hairpin: a pod calling its own service is masqueraded",
			pk:   plan.Packet{Src: ip("10.244.1.5"), Dst: ip("10.96.0.10"), Protocol: "TCP", Port: 80},
			want: plan.Verdict{Action: "dnat", Endpoints: eps("10.244.1.5:8080", "10.244.2.5:8081"), Masquerade: true, Service: "shop/web", Port: "http"},
		},

		// Dual-stack.
		{
			name: "dual-stack, IPv4 cluster IP: IPv4 endpoints only",
			pk:   plan.Packet{Src: ip("10.244.3.7"), Dst: ip("10.96.0.120"), Protocol: "TCP", Port: 80},
			want: plan.Verdict{Action: "dnat", Endpoints: eps("10.244.1.120:8080", "10.244.3.120:8080"), Service: "shop/frontend", Port: "http"},
		},
		{
			name: "dual-stack, IPv6 cluster IP: IPv6 endpoints only",
			pk:   plan.Packet{Src: ip("fd00:10:244:3::7"), Dst: ip("fd00:10:96::120"), Protocol: "TCP", Port: 80},
			want: plan.Verdict{Action: "dnat", Endpoints: eps("[fd00:10:244:1::120]:8080", "[fd00:10:244:3::120]:8080"), Service: "shop/frontend", Port: "http"},
		},
		{
			name: "dual-stack, IPv6 cluster IP from outside the IPv6 pod CIDR: masquerade",
			pk:   plan.Packet{Src: ip("2001:db8::1"), Dst: ip("fd00:10:96::120"), Protocol: "TCP", Port: 80},
			want: plan.Verdict{Action: "dnat", Endpoints: eps("[fd00:10:244:1::120]:8080", "[fd00:10:244:3::120]:8080"), Masquerade: true, Service: "shop/frontend", Port: "http"},
		},
		{
			name: "dual-stack, IPv6 cluster IP without IPv6 endpoints: reject",
			pk:   plan.Packet{Src: ip("fd00:10:244:3::7"), Dst: ip("fd00:10:96::121"), Protocol: "TCP", Port: 80},
			want: plan.Verdict{Action: "reject", Service: "shop/legacy"},
		},

		// External IPs, LoadBalancer IPs, node ports.
		{
			name: "external IP: dnat to External, masquerade",
			pk:   plan.Packet{Src: ip("198.51.100.9"), Dst: ip("203.0.113.10"), Protocol: "TCP", Port: 80},
			want: plan.Verdict{Action: "dnat", Endpoints: eps("10.244.1.60:8080", "10.244.3.60:8080"), Masquerade: true, Service: "shop/portal", Port: "http"},
		},
		{
			name: "external IP that is also a node IP: the external IP wins",
			pk:   plan.Packet{Src: ip("198.51.100.9"), Dst: ip("203.0.113.7"), Protocol: "TCP", Port: 80},
			want: plan.Verdict{Action: "dnat", Endpoints: eps("10.244.1.60:8080", "10.244.3.60:8080"), Masquerade: true, Service: "shop/portal", Port: "http"},
		},
		{
			name: "external IP on another port: not a frontend",
			pk:   plan.Packet{Src: ip("198.51.100.9"), Dst: ip("203.0.113.10"), Protocol: "TCP", Port: 443},
			want: plan.Verdict{Action: "accept"},
		},
		{
			name: "external IP, hairpin from its own endpoint",
			pk:   plan.Packet{Src: ip("10.244.3.60"), Dst: ip("203.0.113.10"), Protocol: "TCP", Port: 80},
			want: plan.Verdict{Action: "dnat", Endpoints: eps("10.244.1.60:8080", "10.244.3.60:8080"), Masquerade: true, Service: "shop/portal", Port: "http"},
		},
		{
			name: "LoadBalancer IP from an allowed source range",
			pk:   plan.Packet{Src: ip("198.51.100.9"), Dst: ip("203.0.113.100"), Protocol: "TCP", Port: 443},
			want: plan.Verdict{Action: "dnat", Endpoints: eps("10.244.1.50:8443", "10.244.2.50:8443"), Masquerade: true, Service: "edge/gateway", Port: "https"},
		},
		{
			name: "LoadBalancer IP from outside the source ranges: drop",
			pk:   plan.Packet{Src: ip("192.0.2.1"), Dst: ip("203.0.113.100"), Protocol: "TCP", Port: 443},
			want: plan.Verdict{Action: "drop", Service: "edge/gateway", Port: "https"},
		},
		{
			name: "source ranges do not apply to the node port",
			pk:   plan.Packet{Src: ip("192.0.2.1"), Dst: ip("192.168.10.11"), Protocol: "TCP", Port: 31443},
			want: plan.Verdict{Action: "dnat", Endpoints: eps("10.244.1.50:8443", "10.244.2.50:8443"), Masquerade: true, Service: "edge/gateway", Port: "https"},
		},
		{
			name: "source ranges do not apply to the cluster IP",
			pk:   plan.Packet{Src: ip("10.244.3.7"), Dst: ip("10.96.0.80"), Protocol: "TCP", Port: 443},
			want: plan.Verdict{Action: "dnat", Endpoints: eps("10.244.1.50:8443", "10.244.2.50:8443"), Service: "edge/gateway", Port: "https"},
		},
		{
			name: "node port on a node IP: dnat to External, masquerade",
			pk:   plan.Packet{Src: ip("198.51.100.9"), Dst: ip("192.168.10.11"), Protocol: "TCP", Port: 30080},
			want: plan.Verdict{Action: "dnat", Endpoints: eps("10.244.1.5:8080", "10.244.2.5:8081"), Masquerade: true, Service: "shop/web", Port: "http"},
		},
		{
			name: "node port on the node's second address",
			pk:   plan.Packet{Src: ip("198.51.100.9"), Dst: ip("203.0.113.7"), Protocol: "TCP", Port: 30080},
			want: plan.Verdict{Action: "dnat", Endpoints: eps("10.244.1.5:8080", "10.244.2.5:8081"), Masquerade: true, Service: "shop/web", Port: "http"},
		},
		{
			name: "node port on another node's IP: accept",
			pk:   plan.Packet{Src: ip("198.51.100.9"), Dst: ip("192.168.10.12"), Protocol: "TCP", Port: 30080},
			want: plan.Verdict{Action: "accept"},
		},
		{
			name: "node port on a local address that is not the Node's (the pod bridge): not a service address",
			pk:   plan.Packet{Src: ip("10.244.3.7"), Dst: ip("10.244.1.1"), Protocol: "TCP", Port: 30080},
			want: plan.Verdict{Action: "accept"},
		},
		{
			name: "node port on loopback: not a service address",
			pk:   plan.Packet{Src: ip("127.0.0.1"), Dst: ip("127.0.0.1"), Protocol: "TCP", Port: 30080, FromLocal: true},
			want: plan.Verdict{Action: "accept"},
		},
		{
			name: "node port with another protocol: accept",
			pk:   plan.Packet{Src: ip("198.51.100.9"), Dst: ip("192.168.10.11"), Protocol: "UDP", Port: 30080},
			want: plan.Verdict{Action: "accept"},
		},
		{
			name: "service port number on a node IP is not a node port",
			pk:   plan.Packet{Src: ip("198.51.100.9"), Dst: ip("192.168.10.11"), Protocol: "TCP", Port: 80},
			want: plan.Verdict{Action: "accept"},
		},

		// externalTrafficPolicy Local.
		{
			name: "externalTrafficPolicy Local: local endpoints only, client IP kept",
			pk:   plan.Packet{Src: ip("198.51.100.9"), Dst: ip("192.168.10.11"), Protocol: "TCP", Port: 30443},
			want: plan.Verdict{Action: "dnat", Endpoints: eps("10.244.1.80:8443"), Service: "edge/ingress", Port: "https"},
		},
		{
			name: "externalTrafficPolicy Local: pod traffic short-circuits to Cluster",
			pk:   plan.Packet{Src: ip("10.244.3.7"), Dst: ip("192.168.10.11"), Protocol: "TCP", Port: 30443},
			want: plan.Verdict{Action: "dnat", Endpoints: eps("10.244.1.80:8443", "10.244.2.80:8443"), Service: "edge/ingress", Port: "https"},
		},
		{
			name: "externalTrafficPolicy Local: a process on the node goes to Cluster, masqueraded",
			pk:   plan.Packet{Src: ip("192.168.10.11"), Dst: ip("192.168.10.11"), Protocol: "TCP", Port: 30443, FromLocal: true},
			want: plan.Verdict{Action: "dnat", Endpoints: eps("10.244.1.80:8443", "10.244.2.80:8443"), Masquerade: true, Service: "edge/ingress", Port: "https"},
		},
		{
			name: "externalTrafficPolicy Local without a local endpoint: drop",
			pk:   plan.Packet{Src: ip("198.51.100.9"), Dst: ip("203.0.113.102"), Protocol: "TCP", Port: 80},
			want: plan.Verdict{Action: "drop", Service: "edge/remote"},
		},
		{
			name: "externalTrafficPolicy Local without a local endpoint, node port: drop",
			pk:   plan.Packet{Src: ip("198.51.100.9"), Dst: ip("192.168.10.11"), Protocol: "TCP", Port: 30082},
			want: plan.Verdict{Action: "drop", Service: "edge/remote"},
		},
		{
			name: "externalTrafficPolicy Local without a local endpoint, from a pod: short-circuit",
			pk:   plan.Packet{Src: ip("10.244.1.7"), Dst: ip("203.0.113.102"), Protocol: "TCP", Port: 80},
			want: plan.Verdict{Action: "dnat", Endpoints: eps("10.244.2.82:8080"), Service: "edge/remote"},
		},
		{
			name: "externalTrafficPolicy Local without a local endpoint, from the node: masquerade to Cluster",
			pk:   plan.Packet{Src: ip("192.168.10.11"), Dst: ip("203.0.113.102"), Protocol: "TCP", Port: 80, FromLocal: true},
			want: plan.Verdict{Action: "dnat", Endpoints: eps("10.244.2.82:8080"), Masquerade: true, Service: "edge/remote"},
		},
		{
			name: "externalTrafficPolicy Local, cluster IP is not external",
			pk:   plan.Packet{Src: ip("10.244.1.7"), Dst: ip("10.96.0.82"), Protocol: "TCP", Port: 80},
			want: plan.Verdict{Action: "dnat", Endpoints: eps("10.244.2.82:8080"), Service: "edge/remote"},
		},
		{
			name: "externalTrafficPolicy Local, hairpin through the node port",
			pk:   plan.Packet{Src: ip("10.244.1.80"), Dst: ip("192.168.10.11"), Protocol: "TCP", Port: 30443},
			want: plan.Verdict{Action: "dnat", Endpoints: eps("10.244.1.80:8443", "10.244.2.80:8443"), Masquerade: true, Service: "edge/ingress", Port: "https"},
		},
	}
	opts := cmpopts.EquateComparable(netip.Addr{}, netip.AddrPort{})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := p.Trace(tc.pk)
			if diff := cmp.Diff(tc.want, got, opts); diff != "" {
				t.Errorf("Trace(%+v) (-want +got):\n%s", tc.pk, diff)
			}
		})
	}
}

func TestTraceMasqueradeAll(t *testing.T) {
	// Without PodCIDRs every packet to a cluster IP is masqueraded, and
	// externalTrafficPolicy Local has no pod short-circuit.
	p := testPlan()
	p.Cluster.PodCIDRs = nil
	tests := []struct {
		name string
		pk   plan.Packet
		want plan.Verdict
	}{
		{
			name: "cluster IP from a pod address",
			pk:   plan.Packet{Src: ip("10.244.3.7"), Dst: ip("10.96.0.10"), Protocol: "TCP", Port: 80},
			want: plan.Verdict{Action: "dnat", Endpoints: eps("10.244.1.5:8080", "10.244.2.5:8081"), Masquerade: true, Service: "shop/web", Port: "http"},
		},
		{
			name: "externalTrafficPolicy Local from a pod address: no short-circuit",
			pk:   plan.Packet{Src: ip("10.244.3.7"), Dst: ip("192.168.10.11"), Protocol: "TCP", Port: 30443},
			want: plan.Verdict{Action: "dnat", Endpoints: eps("10.244.1.80:8443"), Service: "edge/ingress", Port: "https"},
		},
	}
	opts := cmpopts.EquateComparable(netip.Addr{}, netip.AddrPort{})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, p.Trace(tc.pk), opts); diff != "" {
				t.Errorf("Trace(%+v) (-want +got):\n%s", tc.pk, diff)
			}
		})
	}
}

func TestTraceNodePortAddresses(t *testing.T) {
	// nodePortAddresses replace the Node's addresses in their family:
	// 192.168.10.0/24 and 10.244.1.1/32 for IPv4; IPv6 has none, so its
	// node ports stay on the Node's IPv6 address.
	p := testPlan()
	p.Node.IPs = append(p.Node.IPs, ip("fd00:192:168:10::11"))
	p.Cluster.NodePortAddresses = []netip.Prefix{pfx("192.168.10.0/24"), pfx("10.244.1.1/32")}
	for i := range p.Services {
		if p.Services[i].Key() == "edge/gateway" { // dual-stack, so that it has IPv6 node ports
			p.Services[i].ClusterIPs = append(p.Services[i].ClusterIPs, ip("fd00:10:96::80"))
		}
	}
	web := plan.Verdict{Action: "dnat", Endpoints: eps("10.244.1.5:8080", "10.244.2.5:8081"), Masquerade: true, Service: "shop/web", Port: "http"}
	tests := []struct {
		name string
		pk   plan.Packet
		want plan.Verdict
	}{
		{
			name: "the Node's address inside the CIDRs",
			pk:   plan.Packet{Src: ip("198.51.100.9"), Dst: ip("192.168.10.11"), Protocol: "TCP", Port: 30080},
			want: web,
		},
		{
			name: "another local address inside the CIDRs (a secondary address)",
			pk:   plan.Packet{Src: ip("198.51.100.9"), Dst: ip("192.168.10.99"), Protocol: "TCP", Port: 30080},
			want: web,
		},
		{
			name: "the pod bridge address, as a /32",
			pk:   plan.Packet{Src: ip("10.244.3.7"), Dst: ip("10.244.1.1"), Protocol: "TCP", Port: 30080},
			want: web,
		},
		{
			name: "the Node's address outside the CIDRs: not a service address",
			pk:   plan.Packet{Src: ip("198.51.100.9"), Dst: ip("203.0.113.7"), Protocol: "TCP", Port: 30080},
			want: plan.Verdict{Action: "accept"},
		},
		{
			// A node port (edge/gateway's, which has no IPv6 endpoint).
			name: "IPv6 without a CIDR: the Node's IPv6 address",
			pk:   plan.Packet{Src: ip("2001:db8::9"), Dst: ip("fd00:192:168:10::11"), Protocol: "TCP", Port: 31443},
			want: plan.Verdict{Action: "reject", Service: "edge/gateway", Port: "https"},
		},
		{
			name: "IPv6 without a CIDR: another IPv6 address is not a node-port address",
			pk:   plan.Packet{Src: ip("2001:db8::9"), Dst: ip("fd00:192:168:10::99"), Protocol: "TCP", Port: 31443},
			want: plan.Verdict{Action: "accept"},
		},
	}
	opts := cmpopts.EquateComparable(netip.Addr{}, netip.AddrPort{})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, p.Trace(tc.pk), opts); diff != "" {
				t.Errorf("Trace(%+v) (-want +got):\n%s", tc.pk, diff)
			}
		})
	}
}

// TestTraceOtherFamily: an external IP, LoadBalancer IP or node-port
// address of an IP family the Service has no cluster IP of is no frontend
// of it (kube-proxy keeps each family's addresses to that family's rules):
// the packet is what the node does without Services.
func TestTraceOtherFamily(t *testing.T) {
	p := testPlan()
	p.Node.IPs = append(p.Node.IPs, ip("fd00:192:168:10::11"))
	for i := range p.Services {
		switch s := &p.Services[i]; s.Key() {
		case "shop/portal":
			s.ExternalIPs = append(s.ExternalIPs, ip("2001:db8:e::5"))
		case "edge/gateway":
			s.LoadBalancerIPs = append(s.LoadBalancerIPs, ip("2001:db8:1b::7"))
		}
	}
	for _, pk := range []plan.Packet{
		{Src: ip("2001:db8::9"), Dst: ip("fd00:192:168:10::11"), Protocol: "TCP", Port: 30080}, // shop/web's node port
		{Src: ip("2001:db8::9"), Dst: ip("2001:db8:e::5"), Protocol: "TCP", Port: 80},
		{Src: ip("2001:db8::9"), Dst: ip("2001:db8:1b::7"), Protocol: "TCP", Port: 443},
	} {
		if got := p.TraceDetail(pk); got.Action != plan.ActionAccept || got.Service != "" || got.Frontend != "" {
			t.Errorf("TraceDetail(%+v) = %+v, want accept: no frontend of that family", pk, got)
		}
	}
	// The IPv4 ones still are.
	if got := p.Trace(plan.Packet{Src: ip("198.51.100.9"), Dst: ip("192.168.10.11"), Protocol: "TCP", Port: 30080}); got.Action != plan.ActionDNAT {
		t.Errorf("IPv4 node port: %+v, want dnat", got)
	}
}

// TestTraceOtherProxy: a Service another proxy serves (ProxyName) has no
// frontends, as kube-proxy knows nothing of it: its cluster IP is dropped
// as an unallocated address of the service CIDR, its external IPs and
// node ports are accepted untouched.
func TestTraceOtherProxy(t *testing.T) {
	p := testPlan()
	for i := range p.Services {
		if s := &p.Services[i]; s.Key() == "shop/portal" || s.Key() == "shop/web" {
			s.ProxyName = "multus-proxy"
		}
	}
	for _, tc := range []struct {
		pk   plan.Packet
		want string
	}{
		{plan.Packet{Src: ip("10.244.1.9"), Dst: ip("10.96.0.60"), Protocol: "TCP", Port: 80}, plan.ActionDrop},
		{plan.Packet{Src: ip("10.244.1.9"), Dst: ip("10.96.0.10"), Protocol: "TCP", Port: 80}, plan.ActionDrop},
		{plan.Packet{Src: ip("198.51.100.9"), Dst: ip("203.0.113.10"), Protocol: "TCP", Port: 80}, plan.ActionAccept},
		{plan.Packet{Src: ip("198.51.100.9"), Dst: ip("192.168.10.11"), Protocol: "TCP", Port: 30080}, plan.ActionAccept},
	} {
		if got := p.TraceDetail(tc.pk); got.Action != tc.want || got.Service != "" || got.Frontend != "" {
			t.Errorf("TraceDetail(%+v) = %+v, want %s: no frontend", tc.pk, got, tc.want)
		}
	}
	// The other Services keep theirs.
	if got := p.Trace(plan.Packet{Src: ip("198.51.100.9"), Dst: ip("203.0.113.100"), Protocol: "TCP", Port: 443}); got.Action != plan.ActionDNAT || got.Service != "edge/gateway" {
		t.Errorf("edge/gateway's LoadBalancer IP: %+v, want dnat", got)
	}
}

// TestTraceHairpin: a packet from one of its endpoints is masqueraded only
// when DNATed to that endpoint (Detail.Hairpin), unless it is masqueraded
// for another reason.
func TestTraceHairpin(t *testing.T) {
	p := testPlan()
	for _, tc := range []struct {
		name              string
		pk                plan.Packet
		masquerade, hairp bool
	}{
		{"a pod calling its own Service", plan.Packet{Src: ip("10.244.1.5"), Dst: ip("10.96.0.10"), Protocol: "TCP", Port: 80}, true, true},
		{"another pod", plan.Packet{Src: ip("10.244.3.7"), Dst: ip("10.96.0.10"), Protocol: "TCP", Port: 80}, false, false},
		{"an endpoint through an external IP: masqueraded anyway (policy Cluster)", plan.Packet{Src: ip("10.244.3.60"), Dst: ip("203.0.113.10"), Protocol: "TCP", Port: 80}, true, false},
		{"an endpoint through the node port under policy Local", plan.Packet{Src: ip("10.244.1.80"), Dst: ip("192.168.10.11"), Protocol: "TCP", Port: 30443}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := p.TraceDetail(tc.pk)
			if d.Action != plan.ActionDNAT || d.Masquerade != tc.masquerade || d.Hairpin != tc.hairp {
				t.Errorf("%+v: %s masquerade=%v hairpin=%v, want dnat masquerade=%v hairpin=%v", tc.pk, d.Action, d.Masquerade, d.Hairpin, tc.masquerade, tc.hairp)
			}
		})
	}
}

func TestTraceDoesNotModifyPlan(t *testing.T) {
	p := testPlan()
	for _, pk := range []plan.Packet{
		{Src: ip("10.244.1.5"), Dst: ip("10.96.0.10"), Protocol: "TCP", Port: 80},
		{Src: ip("198.51.100.9"), Dst: ip("192.168.10.11"), Protocol: "TCP", Port: 30443},
		{Src: ip("fd00:10:244:3::7"), Dst: ip("fd00:10:96::120"), Protocol: "TCP", Port: 80},
	} {
		v := p.Trace(pk)
		if len(v.Endpoints) > 0 {
			v.Endpoints[0] = netip.AddrPort{}
		}
	}
	if diff := cmp.Diff(testPlan(), p, cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})); diff != "" {
		t.Errorf("Trace changed the Plan (-before +after):\n%s", diff)
	}
}
