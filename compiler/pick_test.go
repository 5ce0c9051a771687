package compiler

import (
	"fmt"
	"net/netip"
	"testing"

	"netspec.dev/netspec/plan"
)

func ep(ip string, node, zone string, ready, serving, terminating bool, hints ...string) plan.Endpoint {
	return plan.Endpoint{IP: netip.MustParseAddr(ip), Port: 80, Ready: ready, Serving: serving, Terminating: terminating, NodeName: node, Zone: zone, Extra: plan.NewEndpointExtra("", hints, nil)}
}

// TestPick covers the choice of endpoints per node: readiness, the
// terminating fallback, traffic policies and topology.
func TestPick(t *testing.T) {
	node1 := plan.Node{Name: "node-1", Zone: "a"}
	node3 := plan.Node{Name: "node-3", Zone: "b"}
	ready := func(ip, node, zone string, hints ...string) plan.Endpoint {
		return ep(ip, node, zone, true, true, false, hints...)
	}
	draining := func(ip, node, zone string) plan.Endpoint { return ep(ip, node, zone, false, true, true) }
	notReady := func(ip, node, zone string) plan.Endpoint { return ep(ip, node, zone, false, false, false) }
	tests := []struct {
		name         string
		eps          []plan.Endpoint
		svc          plan.Service
		distribution string
		node         plan.Node
		wantCluster  string
		wantExternal string
		wantShort    string // "" for nil: the short-circuit uses the cluster set
	}{
		{name: "ready only", eps: []plan.Endpoint{ready("10.0.0.1", "node-1", "a"), notReady("10.0.0.2", "node-1", "a")}, node: node1, wantCluster: "[0]", wantExternal: "[0]"},
		{name: "terminating fallback", eps: []plan.Endpoint{draining("10.0.0.1", "node-2", "a"), notReady("10.0.0.2", "node-1", "a")}, node: node1, wantCluster: "[0]", wantExternal: "[0]"},
		{name: "ready beats draining", eps: []plan.Endpoint{draining("10.0.0.1", "node-2", "a"), ready("10.0.0.2", "node-2", "a")}, node: node1, wantCluster: "[1]", wantExternal: "[1]"},
		{name: "none usable", eps: []plan.Endpoint{notReady("10.0.0.1", "node-1", "a")}, node: node1, wantCluster: "[]", wantExternal: "[]"},
		{name: "external local with local endpoint", eps: []plan.Endpoint{ready("10.0.0.1", "node-1", "a"), ready("10.0.0.2", "node-2", "a")}, svc: plan.Service{ExternalLocal: true}, node: node1, wantCluster: "[0 1]", wantExternal: "[0]"},
		{name: "external local without local endpoint", eps: []plan.Endpoint{ready("10.0.0.1", "node-1", "a")}, svc: plan.Service{ExternalLocal: true}, node: node3, wantCluster: "[0]", wantExternal: "[]"},
		{name: "internal local", eps: []plan.Endpoint{ready("10.0.0.1", "node-1", "a"), ready("10.0.0.2", "node-2", "a")}, svc: plan.Service{InternalLocal: true}, node: node1, wantCluster: "[0]", wantExternal: "[0 1]"},
		{name: "local draining fallback", eps: []plan.Endpoint{draining("10.0.0.1", "node-1", "a"), ready("10.0.0.2", "node-2", "a")}, svc: plan.Service{ExternalLocal: true}, node: node1, wantCluster: "[1]", wantExternal: "[0]"},
		{name: "zone hints for this zone", eps: []plan.Endpoint{ready("10.0.0.1", "node-1", "a", "a"), ready("10.0.0.2", "node-3", "b", "b")}, node: node3, wantCluster: "[1]", wantExternal: "[1]"},
		{name: "partial hints ignored", eps: []plan.Endpoint{ready("10.0.0.1", "node-1", "a", "a"), ready("10.0.0.2", "node-3", "b")}, node: node3, wantCluster: "[0 1]", wantExternal: "[0 1]"},
		{name: "no hint for this zone ignored", eps: []plan.Endpoint{ready("10.0.0.1", "node-1", "a", "a"), ready("10.0.0.2", "node-2", "a", "a")}, node: node3, wantCluster: "[0 1]", wantExternal: "[0 1]"},
		{name: "prefer same zone", eps: []plan.Endpoint{ready("10.0.0.1", "node-1", "a"), ready("10.0.0.2", "node-3", "b")}, distribution: "PreferSameZone", node: node3, wantCluster: "[1]", wantExternal: "[1]"},
		{name: "prefer close is same zone", eps: []plan.Endpoint{ready("10.0.0.1", "node-1", "a"), ready("10.0.0.2", "node-3", "b")}, distribution: "PreferClose", node: node1, wantCluster: "[0]", wantExternal: "[0]"},
		{name: "prefer same zone, none in zone", eps: []plan.Endpoint{ready("10.0.0.1", "node-1", "a")}, distribution: "PreferSameZone", node: node3, wantCluster: "[0]", wantExternal: "[0]"},
		{name: "prefer same node", eps: []plan.Endpoint{ready("10.0.0.1", "node-1", "a"), ready("10.0.0.2", "node-2", "a")}, distribution: "PreferSameNode", node: node1, wantCluster: "[0]", wantExternal: "[0]"},
		{name: "prefer same node falls back to zone", eps: []plan.Endpoint{ready("10.0.0.1", "node-2", "a"), ready("10.0.0.2", "node-3", "b")}, distribution: "PreferSameNode", node: node1, wantCluster: "[0]", wantExternal: "[0]"},
		// Both policies Local: kube-proxy's short-circuit of pod and node
		// traffic to external frontends is subject to neither.
		{name: "both Local: short-circuit to every endpoint", eps: []plan.Endpoint{ready("10.0.0.1", "node-1", "a"), ready("10.0.0.2", "node-2", "a")}, svc: plan.Service{InternalLocal: true, ExternalLocal: true}, node: node1, wantCluster: "[0]", wantExternal: "[0]", wantShort: "[0 1]"},
		{name: "both Local, no local endpoint", eps: []plan.Endpoint{ready("10.0.0.2", "node-2", "a")}, svc: plan.Service{InternalLocal: true, ExternalLocal: true}, node: node1, wantCluster: "[]", wantExternal: "[]", wantShort: "[0]"},
		{name: "both Local, every endpoint local", eps: []plan.Endpoint{ready("10.0.0.1", "node-1", "a")}, svc: plan.Service{InternalLocal: true, ExternalLocal: true}, node: node1, wantCluster: "[0]", wantExternal: "[0]"},
		{name: "both Local, short-circuit keeps topology", eps: []plan.Endpoint{ready("10.0.0.1", "node-2", "a"), ready("10.0.0.2", "node-3", "b")}, svc: plan.Service{InternalLocal: true, ExternalLocal: true}, distribution: "PreferClose", node: node1, wantCluster: "[]", wantExternal: "[]", wantShort: "[0]"},
		{name: "both Local, dual-stack", eps: []plan.Endpoint{ready("10.0.0.1", "node-1", "a"), ready("fd00::1", "node-1", "a"), ready("fd00::2", "node-2", "a")}, svc: plan.Service{InternalLocal: true, ExternalLocal: true}, node: node1, wantCluster: "[0 1]", wantExternal: "[0 1]", wantShort: "[0 1 2]"},
		// Each IP family is chosen on its own, as kube-proxy's proxier per family.
		{name: "dual-stack: a ready IPv6 endpoint leaves the IPv4 terminating fallback", eps: []plan.Endpoint{draining("10.0.5.1", "node-2", "a"), ready("fd00:5::1", "node-2", "a")}, node: node1, wantCluster: "[0 1]", wantExternal: "[0 1]"},
		{name: "dual-stack: zone preference per family", eps: []plan.Endpoint{ready("10.0.0.1", "node-2", "b"), ready("10.0.0.2", "node-2", "b"), ready("fd00::1", "node-1", "a"), ready("fd00::2", "node-2", "b")}, distribution: "PreferClose", node: node1, wantCluster: "[0 1 2]", wantExternal: "[0 1 2]"},
		{name: "dual-stack: zone hints per family", eps: []plan.Endpoint{ready("10.0.0.1", "node-2", "b", "b"), ready("fd00::1", "node-1", "a", "a")}, node: node1, wantCluster: "[0 1]", wantExternal: "[0 1]"},
		{name: "dual-stack: local per family", eps: []plan.Endpoint{draining("10.0.0.1", "node-1", "a"), ready("10.0.0.2", "node-2", "a"), ready("fd00::1", "node-1", "a")}, svc: plan.Service{InternalLocal: true}, node: node1, wantCluster: "[0 2]", wantExternal: "[1 2]"},
		{name: "dual-stack: IPv4-mapped IPv6 counts as IPv4", eps: []plan.Endpoint{draining("::ffff:10.0.0.1", "node-2", "a"), ready("fd00::1", "node-2", "a")}, node: node1, wantCluster: "[0 1]", wantExternal: "[0 1]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, e, sc := pick(tc.eps, &tc.svc, tc.distribution, tc.node)
			if got := fmt.Sprint(orEmpty(c)); got != tc.wantCluster {
				t.Errorf("cluster endpoints %s, want %s", got, tc.wantCluster)
			}
			if got := fmt.Sprint(orEmpty(e)); got != tc.wantExternal {
				t.Errorf("external endpoints %s, want %s", got, tc.wantExternal)
			}
			if got := fmt.Sprint(sc); sc == nil && tc.wantShort != "" || sc != nil && got != tc.wantShort {
				t.Errorf("short-circuit endpoints %v, want %q", sc, tc.wantShort)
			}
		})
	}
}

func orEmpty(l []int) []int {
	if l == nil {
		return []int{}
	}
	return l
}

func TestReverseNames(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{in: "10.96.0.10", want: "10.0.96.10.in-addr.arpa."},
		{in: "fd00::1", want: "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa."},
	}
	for _, tc := range tests {
		if got := reverseName(netip.MustParseAddr(tc.in)); got != tc.want {
			t.Errorf("reverseName(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
	zones := []struct {
		in   string
		want string
	}{
		{in: "10.96.0.0/12", want: "10.in-addr.arpa."},
		{in: "10.244.0.0/16", want: "244.10.in-addr.arpa."},
		{in: "192.168.10.0/24", want: "10.168.192.in-addr.arpa."},
		{in: "fd00:10:96::/112", want: "0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa."},
		{in: "0.0.0.0/0", want: "in-addr.arpa."},
	}
	for _, tc := range zones {
		if got := reverseZone(netip.MustParsePrefix(tc.in)); got != tc.want {
			t.Errorf("reverseZone(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
	if got := dashed(netip.MustParseAddr("10.244.1.30")); got != "10-244-1-30" {
		t.Errorf("dashed = %s", got)
	}
}
