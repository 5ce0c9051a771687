package compiler_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/render"
)

// TestCompileHeadlessWithoutPorts: a headless Service without ports has
// endpoints all the same, as Kubernetes' controllers make them (without
// ports) and CoreDNS answers for them: A/AAAA at the Service name for
// the ready ones, a name each (hostname, else the address with dashes),
// PTRs in the reverse zones, and no SRV. Its endpoints come from an
// Endpoints object or EndpointSlice without ports, or from the pods its
// selector picks. It has no frontend.
func TestCompileHeadlessWithoutPorts(t *testing.T) {
	c := mustTree(t, "testdata/headless-no-ports", "node-a")
	p := c.plans["node-a"]
	const (
		fwd  = "cluster.local."
		rev4 = "10.in-addr.arpa."
		rev6 = "0.0.4.4.2.0.0.1.0.0.0.0.d.f.ip6.arpa."
	)
	tests := []struct {
		feature string
		zone    string
		name    string
		typ     string
		want    []string
	}{
		{feature: "Endpoints without ports: A at the Service name, ready only", zone: fwd, name: "extdb.data.svc.cluster.local.", typ: "A", want: []string{"192.0.2.10"}},
		{feature: "Endpoints without ports: the hostname", zone: fwd, name: "db-0.extdb.data.svc.cluster.local.", typ: "A", want: []string{"192.0.2.10"}},
		{feature: "Endpoints without ports: no name for a not-ready address", zone: fwd, name: "db-1.extdb.data.svc.cluster.local.", typ: "*", want: nil},
		{feature: "EndpointSlice without ports: AAAA", zone: fwd, name: "cache.data.svc.cluster.local.", typ: "AAAA", want: []string{"fd00:10:244:1::20"}},
		{feature: "EndpointSlice without ports: the hostname", zone: fwd, name: "cache-0.cache.data.svc.cluster.local.", typ: "AAAA", want: []string{"fd00:10:244:1::20"}},
		{feature: "EndpointSlice without ports: PTR", zone: rev6, name: "0.2.0.0.0.0.0.0.0.0.0.0.0.0.0.0.1.0.0.0.4.4.2.0.0.1.0.0.0.0.d.f.ip6.arpa.", typ: "PTR", want: []string{"cache-0.cache.data.svc.cluster.local."}},
		{feature: "selector: A of the ready pods", zone: fwd, name: "peers.data.svc.cluster.local.", typ: "A", want: []string{"10.244.1.30", "10.244.1.31"}},
		{feature: "selector: hostname and subdomain", zone: fwd, name: "peer-0.peers.data.svc.cluster.local.", typ: "A", want: []string{"10.244.1.30"}},
		{feature: "selector: the address with dashes", zone: fwd, name: "10-244-1-31.peers.data.svc.cluster.local.", typ: "A", want: []string{"10.244.1.31"}},
		{feature: "selector: PTR", zone: rev4, name: "30.1.244.10.in-addr.arpa.", typ: "PTR", want: []string{"peer-0.peers.data.svc.cluster.local."}},
	}
	for _, tc := range tests {
		t.Run(tc.feature, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, recordsAt(t, p, tc.zone, tc.name, tc.typ, false)); diff != "" {
				t.Errorf("%s %s (-want +got):\n%s", tc.name, tc.typ, diff)
			}
		})
	}
	for _, z := range p.DNS.Zones {
		for _, r := range z.Records {
			if r.Type == "SRV" || strings.HasPrefix(r.Name, "_") {
				t.Errorf("a Service without ports has an SRV record: %+v", r)
			}
		}
	}
	for _, key := range []string{"data/extdb", "data/cache", "data/peers"} {
		s := findService(t, p, key)
		if len(s.Ports) != 1 || s.Ports[0].Port != 0 || s.Ports[0].Name != "" || s.Ports[0].Protocol != "" {
			t.Errorf("%s: ports %+v, want the sentinel port only", key, s.Ports)
		}
	}
	// The data plane is that of a plan without them.
	without := *p
	without.Services = slices.DeleteFunc(slices.Clone(p.Services), func(s plan.Service) bool { return s.Namespace == "data" })
	if got, want := render.NFTables(p), render.NFTables(&without); !bytes.Equal(got, want) {
		t.Errorf("the headless Services without ports change the nftables ruleset:\n%s", got)
	}
	if got, want := render.IPVS(p, "rr"), render.IPVS(&without, "rr"); !bytes.Equal(got, want) {
		t.Errorf("the headless Services without ports change the IPVS table:\n%s", got)
	}
}
