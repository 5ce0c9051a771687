package render

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"netspec.dev/netspec/plan"
)

func TestZoneFileGolden(t *testing.T) {
	for _, z := range textFixturePlan().DNS.Zones {
		name := strings.TrimSuffix(z.Name, ".")
		t.Run(name, func(t *testing.T) {
			compareTextGolden(t, "dns/"+name+".zone", ZoneFile(z))
		})
	}
}

// parseZone reads a master file with miekg/dns, as a server would.
func parseZone(t *testing.T, text []byte) []dns.RR {
	t.Helper()
	zp := dns.NewZoneParser(strings.NewReader(string(text)), "", "")
	var rrs []dns.RR
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		rrs = append(rrs, rr)
	}
	if err := zp.Err(); err != nil {
		t.Fatalf("zone file does not parse: %v\n%s", err, text)
	}
	return rrs
}

// planRR is how miekg/dns reads one plan record written in full.
func planRR(t *testing.T, r plan.Record) dns.RR {
	t.Helper()
	rr, err := dns.NewRR(fmt.Sprintf("%s %d IN %s %s", r.Name, r.TTL, r.Type, r.Data))
	if err != nil {
		t.Fatalf("plan record %+v does not parse: %v", r, err)
	}
	return rr
}

// rrStrings gives the records in presentation form (name, TTL, class, type
// and rdata), normalised by miekg/dns.
func rrStrings(rrs []dns.RR) []string {
	out := make([]string, len(rrs))
	for i, rr := range rrs {
		out[i] = rr.String()
	}
	return out
}

func TestZoneFileParsesBack(t *testing.T) {
	zones := textFixturePlan().DNS.Zones
	zones = append(zones,
		// Odd but valid: names outside the origin, a wildcard, TXT with
		// spaces, a semicolon and an escaped quote, differing TTLs, no NS.
		plan.Zone{Name: "example.test.", Records: []plan.Record{
			{Name: "example.test.", Type: "SOA", TTL: 60, Data: "ns.example.test. admin.example.test. 1 2 3 4 5"},
			{Name: "*.example.test.", Type: "A", TTL: 30, Data: "192.0.2.1"},
			{Name: "a.example.test.", Type: "TXT", TTL: 0, Data: `"x y; z" "q\"uote"`},
			{Name: "aexample.test.", Type: "A", TTL: 30, Data: "192.0.2.2"},
			{Name: "example.test.", Type: "TXT", TTL: 3600, Data: `"apex"`},
			{Name: "other.example.", Type: "A", TTL: 30, Data: "192.0.2.3"},
		}},
	)
	for _, z := range zones {
		t.Run(z.Name, func(t *testing.T) {
			got := parseZone(t, ZoneFile(z))
			var want []dns.RR
			for _, r := range z.Records {
				want = append(want, planRR(t, r))
			}
			if len(got) == 0 || got[0].Header().Rrtype != dns.TypeSOA {
				t.Errorf("the first record is not the SOA: %v", got)
			}
			g, w := rrStrings(got), rrStrings(want)
			slices.Sort(g)
			slices.Sort(w)
			if !slices.Equal(g, w) {
				t.Errorf("records read back:\n%s\nwant:\n%s", strings.Join(g, "\n"), strings.Join(w, "\n"))
			}
		})
	}
}

func TestZoneFileOrder(t *testing.T) {
	z := plan.Zone{Name: "cluster.local.", Records: []plan.Record{
		{Name: "a.cluster.local.", Type: "A", TTL: 5, Data: "10.0.0.2"},
		{Name: "b.cluster.local.", Type: "NS", TTL: 5, Data: "ns.b.cluster.local."},
		{Name: "cluster.local.", Type: "NS", TTL: 5, Data: "ns1.cluster.local."},
		{Name: "cluster.local.", Type: "NS", TTL: 5, Data: "ns2.cluster.local."},
		{Name: "cluster.local.", Type: "SOA", TTL: 7, Data: "ns1.cluster.local. h.cluster.local. 9 1 1 1 5"},
		{Name: "z.cluster.local.", Type: "A", TTL: 5, Data: "10.0.0.1"},
	}}
	want := "; zone cluster.local — written by netspec from the tree; do not edit\n" +
		"$ORIGIN cluster.local.\n" +
		"$TTL 7\n" +
		"@\t7\tIN\tSOA\tns1.cluster.local. h.cluster.local. 9 1 1 1 5\n" +
		"@\t5\tIN\tNS\tns1.cluster.local.\n" +
		"@\t5\tIN\tNS\tns2.cluster.local.\n" +
		"a\t5\tIN\tA\t10.0.0.2\n" +
		"b\t5\tIN\tNS\tns.b.cluster.local.\n" +
		"z\t5\tIN\tA\t10.0.0.1\n"
	if got := string(ZoneFile(z)); got != want {
		t.Errorf("ZoneFile:\n%s\nwant:\n%s", got, want)
	}
}

func TestZoneFileEdges(t *testing.T) {
	tests := []struct {
		name string
		zone plan.Zone
		want string
	}{
		{
			name: "empty",
			zone: plan.Zone{Name: "cluster.local."},
			want: "; zone cluster.local — written by netspec from the tree; do not edit\n$ORIGIN cluster.local.\n$TTL 0\n",
		},
		{
			name: "no SOA: $TTL from the first record; name without trailing dot",
			zone: plan.Zone{Name: "x.test", Records: []plan.Record{{Name: "a.x.test.", Type: "A", TTL: 9, Data: "192.0.2.1"}}},
			want: "; zone x.test — written by netspec from the tree; do not edit\n$ORIGIN x.test.\n$TTL 9\na\t9\tIN\tA\t192.0.2.1\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(ZoneFile(tt.zone)); got != tt.want {
				t.Errorf("ZoneFile:\n%q\nwant:\n%q", got, tt.want)
			}
		})
	}
}

func TestOwnerName(t *testing.T) {
	tests := []struct {
		name, origin, want string
	}{
		{name: "cluster.local.", origin: "cluster.local.", want: "@"},
		{name: "Cluster.Local.", origin: "cluster.local.", want: "@"},
		{name: "web.shop.svc.cluster.local.", origin: "cluster.local.", want: "web.shop.svc"},
		{name: "_http._tcp.web.shop.svc.cluster.local.", origin: "cluster.local.", want: "_http._tcp.web.shop.svc"},
		{name: "*.cluster.local.", origin: "cluster.local.", want: "*"},
		{name: "xcluster.local.", origin: "cluster.local.", want: "xcluster.local."},
		{name: "example.com.", origin: "cluster.local.", want: "example.com."},
		{name: `a\.cluster.local.`, origin: "local.", want: `a\.cluster`},
		{name: `a\.cluster.local.`, origin: "cluster.local.", want: `a\.cluster.local.`},
		{name: "@.cluster.local.", origin: "cluster.local.", want: "@.cluster.local."},
		{name: "$x.cluster.local.", origin: "cluster.local.", want: "$x.cluster.local."},
		{name: "10.96.0.10.in-addr.arpa.", origin: "10.in-addr.arpa.", want: "10.96.0"},
		{name: "a.b.", origin: ".", want: "a.b."},
	}
	for _, tt := range tests {
		if got := ownerName(tt.name, tt.origin); got != tt.want {
			t.Errorf("ownerName(%q, %q) = %q, want %q", tt.name, tt.origin, got, tt.want)
		}
	}
}
