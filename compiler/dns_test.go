package compiler

import (
	"net/netip"
	"strings"
	"testing"

	"netspec.dev/netspec/plan"
)

// dnsPlan is a plan of the given Services for the DNS tests.
func dnsPlan(ttl uint32, services ...plan.Service) *plan.Plan {
	return &plan.Plan{
		Cluster: plan.Cluster{
			Domain:       "cluster.local",
			ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")},
			DNSTTL:       ttl,
		},
		Services: services,
	}
}

// zoneRecords returns the records of a name and type in a zone of d.
func zoneRecords(d plan.DNS, zone, name, typ string) []plan.Record {
	var out []plan.Record
	for _, z := range d.Zones {
		if z.Name != zone {
			continue
		}
		for _, r := range z.Records {
			if r.Name == name && r.Type == typ {
				out = append(out, r)
			}
		}
	}
	return out
}

// TestDNSSOATTL checks the SOA's TTL and MINIMUM, which make the caching
// time of negative answers (RFC 2308 §3: the smaller of the two): as in
// CoreDNS, the SOA's TTL is the Cluster's dnsTTL up to 300 s and its
// MINIMUM the dnsTTL, while every other record keeps the dnsTTL.
func TestDNSSOATTL(t *testing.T) {
	web := plan.Service{Namespace: "shop", Name: "web", Type: "ClusterIP", ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.10")}}
	tests := []struct {
		name        string
		ttl         uint32
		wantSOATTL  uint32
		wantMinimum string
	}{
		{name: "default 5 s", ttl: 5, wantSOATTL: 5, wantMinimum: "5"},
		{name: "zero", ttl: 0, wantSOATTL: 0, wantMinimum: "0"},
		{name: "300 s, the cap", ttl: 300, wantSOATTL: 300, wantMinimum: "300"},
		{name: "an hour: the SOA's TTL capped at 300 s", ttl: 3600, wantSOATTL: 300, wantMinimum: "3600"},
		{name: "a day", ttl: 86400, wantSOATTL: 300, wantMinimum: "86400"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := dnsRecords(dnsPlan(tc.ttl, web))
			for _, zone := range []string{"cluster.local.", "10.in-addr.arpa."} {
				soa := zoneRecords(d, zone, zone, "SOA")
				if len(soa) != 1 {
					t.Fatalf("zone %s: %d SOA records, want 1", zone, len(soa))
				}
				f := strings.Fields(soa[0].Data)
				if soa[0].TTL != tc.wantSOATTL || f[len(f)-1] != tc.wantMinimum {
					t.Errorf("zone %s: SOA TTL %d, MINIMUM %s; want %d, %s", zone, soa[0].TTL, f[len(f)-1], tc.wantSOATTL, tc.wantMinimum)
				}
				ns := zoneRecords(d, zone, zone, "NS")
				if len(ns) != 1 || ns[0].TTL != tc.ttl {
					t.Errorf("zone %s: NS %+v, want one with TTL %d", zone, ns, tc.ttl)
				}
			}
			if a := zoneRecords(d, "cluster.local.", "web.shop.svc.cluster.local.", "A"); len(a) != 1 || a[0].TTL != tc.ttl {
				t.Errorf("A of web: %+v, want one with TTL %d", a, tc.ttl)
			}
		})
	}
}
