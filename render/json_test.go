package render

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"unicode"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"netspec.dev/netspec/plan"
)

func TestPlanJSONRoundTrip(t *testing.T) {
	p := textFixturePlan()
	data, err := PlanJSON(p)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParsePlanJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(p, back, cmpopts.EquateEmpty(), cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})); diff != "" {
		t.Errorf("plan.json round trip (-want +got):\n%s", diff)
	}
	again, err := PlanJSON(back)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, data) {
		t.Errorf("plan.json of the parsed plan differs")
	}
	second, err := PlanJSON(textFixturePlan())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(second, data) {
		t.Errorf("plan.json is not byte-stable")
	}
	if !bytes.HasPrefix(data, []byte("{\n  \"formatVersion\": 1,\n")) || !bytes.HasSuffix(data, []byte("}\n")) {
		t.Errorf("plan.json does not start with formatVersion or end with a newline:\n%s", data)
	}
}

// TestPlanJSONFormat pins the whole format on a small plan: names, order,
// addresses as strings, [] for empty lists, no HTML escaping.
func TestPlanJSONFormat(t *testing.T) {
	p := &plan.Plan{
		Node:    plan.Node{Name: "n1", IPs: []netip.Addr{netip.MustParseAddr("192.168.1.10")}},
		Cluster: plan.Cluster{Domain: "cluster.local", ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")}, DNSTTL: 5},
		Services: []plan.Service{{
			Namespace: "ns", Name: "web", Type: "NodePort",
			ClusterIPs: []netip.Addr{netip.MustParseAddr("fd00::1")},
			Ports: []plan.Port{{
				Protocol: "TCP", Port: 80, NodePort: 30080,
				Endpoints: []plan.Endpoint{{IP: netip.MustParseAddr("10.244.0.5"), Port: 8080, Ready: true, Serving: true, Pod: "ns/web<1>&"}},
				Cluster:   []int{0},
			}},
		}},
		DNS: plan.DNS{Zones: []plan.Zone{{Name: "cluster.local.", Records: []plan.Record{
			{Name: "web.ns.svc.cluster.local.", Type: "AAAA", TTL: 5, Data: "fd00::1"},
		}}}},
		Env: []plan.EnvFile{{Namespace: "ns", Vars: []plan.EnvVar{{Name: "WEB_SERVICE_HOST", Value: "fd00::1"}}}},
	}
	want := `{
  "formatVersion": 1,
  "node": {"name": "n1", "zone": "", "ips": ["192.168.1.10"]},
  "cluster": {"domain": "cluster.local", "serviceCIDRs": ["10.96.0.0/12"], "podCIDRs": [], "nodePortAddresses": [], "dnsTTL": 5},
  "services": [
    {
      "namespace": "ns",
      "name": "web",
      "type": "NodePort",
      "clusterIPs": ["fd00::1"],
      "headless": false,
      "externalName": "",
      "externalIPs": [],
      "loadBalancerIPs": [],
      "sourceRanges": [],
      "affinitySeconds": 0,
      "internalLocal": false,
      "externalLocal": false,
      "healthCheckNodePort": 0,
      "ipvsScheduler": "",
      "ports": [
        {
          "name": "",
          "protocol": "TCP",
          "port": 80,
          "nodePort": 30080,
          "endpoints": [
            {"ip": "10.244.0.5", "port": 8080, "ready": true, "serving": true, "terminating": false, "nodeName": "", "zone": "", "hostname": "", "zoneHints": [], "nodeHints": [], "pod": "ns/web<1>&", "probes": []}
          ],
          "cluster": [0],
          "external": []
        }
      ]
    }
  ],
  "dns": {
    "zones": [
      {
        "name": "cluster.local.",
        "records": [
          {"name": "web.ns.svc.cluster.local.", "type": "AAAA", "ttl": 5, "data": "fd00::1"}
        ]
      }
    ]
  },
  "env": [
    {
      "namespace": "ns",
      "vars": [
        {"name": "WEB_SERVICE_HOST", "value": "fd00::1"}
      ]
    }
  ]
}
`
	got, err := PlanJSON(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("PlanJSON:\n%s\nwant:\n%s", got, want)
	}
	empty, err := PlanJSON(&plan.Plan{})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(empty, []byte("null")) {
		t.Errorf("PlanJSON of an empty plan has null:\n%s", empty)
	}
}

// TestPlanJSONMirrorsPlan checks that the json* mirror types have every
// field of plan's types, in the same order, named as lowerCamelCase of the
// Go name (leading initialisms lower-cased: IPs→ips, DNSTTL→dnsTTL), so a
// field added to plan.go cannot be silently left out of plan.json. The
// fields of a pointer to a struct (plan.Endpoint's Extra) stand in its
// place, as plan.json has them.
func TestPlanJSONMirrorsPlan(t *testing.T) {
	pairs := []struct{ plan, mirror any }{
		{plan: plan.Plan{}, mirror: jsonPlan{}},
		{plan: plan.Node{}, mirror: jsonNode{}},
		{plan: plan.Cluster{}, mirror: jsonCluster{}},
		{plan: plan.Service{}, mirror: jsonService{}},
		{plan: plan.Port{}, mirror: jsonPort{}},
		{plan: plan.Endpoint{}, mirror: jsonEndpoint{}},
		{plan: plan.Probe{}, mirror: jsonProbe{}},
		{plan: plan.ProbeHeader{}, mirror: jsonProbeHeader{}},
		{plan: plan.DNS{}, mirror: jsonDNS{}},
		{plan: plan.Zone{}, mirror: jsonZone{}},
		{plan: plan.Record{}, mirror: jsonRecord{}},
		{plan: plan.EnvFile{}, mirror: jsonEnvFile{}},
		{plan: plan.EnvVar{}, mirror: jsonEnvVar{}},
	}
	for _, pr := range pairs {
		pt, mt := reflect.TypeOf(pr.plan), reflect.TypeOf(pr.mirror)
		pfs := jsonFields(pt)
		if len(pfs) != mt.NumField() {
			t.Errorf("%v has %d fields, %v has %d", pt, len(pfs), mt, mt.NumField())
			continue
		}
		for i := range pfs {
			pf, mf := pfs[i], mt.Field(i)
			if pf.Name != mf.Name {
				t.Errorf("%v field %d is %s, %v's is %s", pt, i, pf.Name, mt, mf.Name)
			}
			tag, _, _ := strings.Cut(mf.Tag.Get("json"), ",")
			if want := lowerCamel(pf.Name); tag != want {
				t.Errorf("%v.%s is named %q in JSON, want %q", mt, mf.Name, tag, want)
			}
		}
	}
}

// jsonFields are the fields of a plan struct type as plan.json has them:
// those of a pointer to a struct (plan.Endpoint's Extra) in its place.
func jsonFields(t reflect.Type) []reflect.StructField {
	var out []reflect.StructField
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Struct {
			for j := range f.Type.Elem().NumField() {
				out = append(out, f.Type.Elem().Field(j))
			}
			continue
		}
		out = append(out, f)
	}
	return out
}

// lowerCamel lower-cases a Go name's leading initialism: Name→name,
// IPs→ips, DNSTTL→dnsTTL, ClusterIPs→clusterIPs.
func lowerCamel(s string) string {
	switch s {
	case "DNSTTL":
		return "dnsTTL"
	case "DNS":
		return "dns"
	}
	r := []rune(s)
	n := 0
	for n < len(r) && unicode.IsUpper(r[n]) {
		n++
	}
	switch {
	case n == len(r): // TTL, IP
		n = len(r)
	case n > 1 && r[n] == 's' && n+1 == len(r): // IPs
		n = len(r)
	case n > 1: // URLPath → urlPath
		n--
	}
	for i := range n {
		r[i] = unicode.ToLower(r[i])
	}
	return string(r)
}

func TestPlanJSONErrors(t *testing.T) {
	if _, err := PlanJSON(nil); err == nil {
		t.Error("PlanJSON(nil) gave no error")
	}
	if _, err := PlanJSON(&plan.Plan{FormatVersion: plan.FormatVersion + 1}); err == nil {
		t.Error("PlanJSON of another format version gave no error")
	}
	good, err := PlanJSON(&plan.Plan{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, data, wantErr string
	}{
		{name: "not JSON", data: "{", wantErr: "unexpected end"},
		{name: "no version", data: "{}", wantErr: "format version 0"},
		{name: "other version", data: `{"formatVersion": 2}`, wantErr: "format version 2"},
		{name: "unknown field", data: strings.Replace(string(good), `"node": {`, `"nodes": 1, "node": {`, 1), wantErr: `unknown field "nodes"`},
		{name: "bad address", data: strings.Replace(string(good), `"ips": []`, `"ips": ["10.0.0.256"]`, 1), wantErr: "10.0.0.256"},
		{name: "trailing data", data: string(good) + "{}", wantErr: "after top-level value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParsePlanJSON([]byte(tt.data))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParsePlanJSON error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
	if !json.Valid(good) {
		t.Error("plan.json of an empty plan is not valid JSON")
	}
}
