package explain_test

import (
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/explain"
	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/schema"
)

// TestPacketWithProbes: with the node's failing readiness probes
// (explain --live), an endpoint left out for its probe is named so, with
// since and last error, and is the cause of the dnat; a Service that
// fails open takes its endpoints and says why.
func TestPacketWithProbes(t *testing.T) {
	dir := filepath.Join("..", "compiler", "testdata", "readiness-probes")
	tree, err := schema.Load(dir, schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	checked := compiler.Validate(tree.Objects, nil, tree)
	if n := checked.Diags.Errors(); n > 0 {
		t.Fatalf("%d errors", n)
	}
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	failures := []explain.ProbeFailure{
		{Service: "shop/web", Endpoint: netip.MustParseAddrPort("10.244.1.10:8080"), Probe: "httpGet http://:8080/ready", Since: since, LastError: "503"},
		{Service: "shop/legacy", Endpoint: netip.MustParseAddrPort("10.50.0.1:8443"), Probe: "httpGet https://legacy.example.com:8443/"},
		{Service: "shop/legacy", Endpoint: netip.MustParseAddrPort("10.50.0.2:8443"), Probe: "httpGet https://legacy.example.com:8443/"},
	}
	failing := map[netip.Addr]bool{}
	for _, f := range failures {
		failing[f.Endpoint.Addr()] = true
	}
	st, err := compiler.CompileStagedWith(tree.Objects, checked, "node-a", compiler.Options{
		NotReady: func(ip netip.Addr, _ []plan.Probe) bool { return failing[ip] },
	})
	if err != nil {
		t.Fatal(err)
	}
	p := st.Finish()
	o := explain.Options{Probes: failures, FailOpen: st.FailOpen}
	web := findService(t, p, "shop/web")
	x := explain.PacketWith(p, tree.Objects, plan.Packet{Src: explain.DefaultSource(web.ClusterIPs[0]), Dst: web.ClusterIPs[0], Port: 80, Protocol: "TCP"}, o)
	const why = "out for its readiness probe httpGet http://:8080/ready (since 2026-01-02T03:04:05Z, last error 503)"
	for _, e := range x.Endpoints {
		if e.Addr.String() == "10.244.1.10:8080" && (e.Taken || e.Why != why) {
			t.Errorf("endpoint %s: taken %v, why %q; want left out, %q", e.Addr, e.Taken, e.Why, why)
		}
	}
	if x.Verdict != plan.ActionDNAT || x.Cause == nil || x.Cause.Kind != explain.CauseProbeFailing || !strings.Contains(x.Cause.Text, why) {
		t.Errorf("verdict %s, cause %+v; want dnat, caused by the probe", x.Verdict, x.Cause)
	}

	legacy := findService(t, p, "shop/legacy")
	x = explain.PacketWith(p, tree.Objects, plan.Packet{Src: explain.DefaultSource(legacy.ClusterIPs[0]), Dst: legacy.ClusterIPs[0], Port: 443, Protocol: "TCP"}, o)
	if len(x.Targets) != 2 || x.Cause != nil {
		t.Errorf("legacy failing open: targets %v, cause %+v; want both, no cause", x.Targets, x.Cause)
	}
	if !strings.Contains(strings.Join(x.Steps, "\n"), "so all are kept (fail open)") {
		t.Errorf("legacy failing open: steps do not say so:\n%s", strings.Join(x.Steps, "\n"))
	}

	// Without Options, the same plan explains as before: no probe named.
	x = explain.PacketWith(p, tree.Objects, plan.Packet{Src: explain.DefaultSource(web.ClusterIPs[0]), Dst: web.ClusterIPs[0], Port: 80, Protocol: "TCP"}, explain.Options{})
	if x.Cause != nil || strings.Contains(strings.Join(x.Steps, "\n"), "readiness probe") {
		t.Errorf("without probe states: cause %+v, steps:\n%s", x.Cause, strings.Join(x.Steps, "\n"))
	}
}

func findService(t *testing.T, p *plan.Plan, key string) *plan.Service {
	t.Helper()
	for i := range p.Services {
		if p.Services[i].Key() == key {
			return &p.Services[i]
		}
	}
	t.Fatalf("no Service %s", key)
	return nil
}
