package compiler

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

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

// TestDNSSOATTL checks the TTLs of the records: the SOA's TTL and MINIMUM
// make the caching time of negative answers (RFC 2308 §3: the smaller of
// the two), and as in CoreDNS the SOA's TTL is the Cluster's dnsTTL up to
// 300 s and its MINIMUM the dnsTTL; dns-version's TTL is 28800; every
// other record keeps the dnsTTL.
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
			// CoreDNS gives dns-version a TTL of its own.
			if v := zoneRecords(d, "cluster.local.", "dns-version.cluster.local.", "TXT"); len(v) != 1 || v[0].TTL != 28800 || v[0].Data != `"1.1.0"` {
				t.Errorf("dns-version: %+v, want one TXT \"1.1.0\" with TTL 28800", v)
			}
		})
	}
}

// TestDNSServiceNameSRV checks the SRV records at a Service's own name,
// as CoreDNS answers them: one per port, named or not, to the Service's
// name; for a headless Service one per ready endpoint and port, to the
// endpoint's name; none for the sentinel port of a headless Service
// without ports, whose endpoints have no port number.
func TestDNSServiceNameSRV(t *testing.T) {
	ep := func(ip string, port uint16, ready bool) plan.Endpoint {
		return plan.Endpoint{IP: netip.MustParseAddr(ip), Port: port, Ready: ready}
	}
	tests := []struct {
		name    string
		service plan.Service
		want    []string // SRV data at the Service's name
		wantSub []string // SRV owner names below it
	}{
		{
			name: "ClusterIP, an unnamed port",
			service: plan.Service{Namespace: "ns", Name: "a", Type: "ClusterIP", ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.1")},
				Ports: []plan.Port{{Protocol: "TCP", Port: 80}}},
			want: []string{"0 100 80 a.ns.svc.cluster.local."},
		},
		{
			name: "ClusterIP, a named and an unnamed port",
			service: plan.Service{Namespace: "ns", Name: "a", Type: "ClusterIP", ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.1")},
				Ports: []plan.Port{{Name: "http", Protocol: "TCP", Port: 80}, {Name: "", Protocol: "UDP", Port: 53}}},
			want:    []string{"0 100 53 a.ns.svc.cluster.local.", "0 100 80 a.ns.svc.cluster.local."},
			wantSub: []string{"_http._tcp.a.ns.svc.cluster.local."},
		},
		{
			name: "headless, an unnamed port: the endpoints' ports, ready ones only",
			service: plan.Service{Namespace: "ns", Name: "h", Type: "ClusterIP", Headless: true,
				Ports: []plan.Port{{Protocol: "TCP", Port: 80, Endpoints: []plan.Endpoint{ep("10.244.1.1", 8080, true), ep("10.244.1.2", 8080, false)}}}},
			want:    []string{"0 100 8080 10-244-1-1.h.ns.svc.cluster.local."},
			wantSub: nil,
		},
		{
			name: "headless, a named port",
			service: plan.Service{Namespace: "ns", Name: "h", Type: "ClusterIP", Headless: true,
				Ports: []plan.Port{{Name: "db", Protocol: "TCP", Port: 5432, Endpoints: []plan.Endpoint{ep("fd00::1", 5432, true)}}}},
			want:    []string{"0 100 5432 fd00--1.h.ns.svc.cluster.local."},
			wantSub: []string{"_db._tcp.h.ns.svc.cluster.local."},
		},
		{
			name: "headless without ports: the sentinel port has no SRV",
			service: plan.Service{Namespace: "ns", Name: "h", Type: "ClusterIP", Headless: true,
				Ports: []plan.Port{{Endpoints: []plan.Endpoint{ep("10.244.1.1", 0, true)}}}},
			want: nil,
		},
		{
			name:    "ExternalName: none",
			service: plan.Service{Namespace: "ns", Name: "x", Type: "ExternalName", ExternalName: "example.com"},
			want:    nil,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := dnsRecords(dnsPlan(5, tc.service))
			svc := tc.service.Name + ".ns.svc.cluster.local."
			var got []string
			for _, r := range zoneRecords(d, "cluster.local.", svc, "SRV") {
				got = append(got, r.Data)
			}
			var sub []string
			for _, z := range d.Zones {
				for _, r := range z.Records {
					if r.Type == "SRV" && strings.HasSuffix(r.Name, "."+svc) {
						sub = append(sub, r.Name)
					}
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("SRV at %s (-want +got):\n%s", svc, diff)
			}
			if diff := cmp.Diff(tc.wantSub, slices.Compact(sub)); diff != "" {
				t.Errorf("SRV names below %s (-want +got):\n%s", svc, diff)
			}
		})
	}
}

// TestDNSExternalName: an ExternalName Service's name is a CNAME to its
// externalName, but none when that reads as an IPv4 address (a name of
// digits to Kubernetes, for which CoreDNS publishes nothing).
func TestDNSExternalName(t *testing.T) {
	for _, tc := range []struct {
		externalName string
		want         []string
	}{
		{externalName: "db.example.com", want: []string{"db.example.com."}},
		{externalName: "192.0.2.10", want: nil},
		{externalName: "1.2.3.4.5", want: []string{"1.2.3.4.5."}},
	} {
		d := dnsRecords(dnsPlan(5, plan.Service{Namespace: "ns", Name: "x", Type: "ExternalName", ExternalName: tc.externalName}))
		var got []string
		for _, r := range zoneRecords(d, "cluster.local.", "x.ns.svc.cluster.local.", "CNAME") {
			got = append(got, r.Data)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("externalName %s: CNAME (-want +got):\n%s", tc.externalName, diff)
		}
	}
}
