package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"netspec.dev/netspec/daemon"
	"netspec.dev/netspec/plan"
)

// TestStatusHeldOut: without a daemon, status says which endpoints the
// kernel still holds out for failing probes: the daemon's record of them,
// kept to those the applied plan has not ready; without a record, the
// plan's probed endpoints that are not ready, saying it cannot tell why.
func TestStatusHeldOut(t *testing.T) {
	pr := plan.Probe{Action: plan.ProbeHTTPGet, Scheme: "HTTP", Port: 8080, Path: "/ready"}
	ep := func(ip string, ready bool) plan.Endpoint { return probedEndpoint(ip, ready, pr) }
	p := &plan.Plan{Node: plan.Node{Name: "node-1"}, Services: []plan.Service{{Namespace: "shop", Name: "cart",
		Ports: []plan.Port{{Port: 80, Endpoints: []plan.Endpoint{ep("10.244.1.11", false), ep("10.244.1.12", true), ep("10.244.1.13", false)}, Cluster: []int{1}}}}}}
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rec := &daemon.ProbeRecord{Node: "node-1", Written: since, Out: []daemon.ProbeOut{
		{Service: "shop/cart", Endpoint: "10.244.1.11:8080", Probe: "httpGet http://10.244.1.11:8080/ready", Since: since, LastError: "HTTP probe failed with statuscode: 503"},
		// Ready in the plan: an apply put the tree's readiness back since.
		{Service: "shop/cart", Endpoint: "10.244.1.12:8080", Probe: "httpGet http://10.244.1.12:8080/ready", Since: since, LastError: "timeout"},
	}, FailOpen: []string{}}
	now := since.Add(time.Minute)

	var b bytes.Buffer
	writeRecordView(&b, "state", &recordView{Present: true, Node: "node-1", Services: 1, Endpoints: 3, Recorded: since, Probes: heldOut(p, rec)}, now)
	got := b.String()
	for _, want := range []string{
		"readiness probes: the kernel holds the probe view the daemon last applied (recorded 2026-01-02T03:04:05Z (1m0s ago)), with 1 endpoint held out for failing probes, though no daemon probes them now:\n",
		"  shop/cart 10.244.1.11:8080: httpGet http://10.244.1.11:8080/ready, failing since 2026-01-02T03:04:05Z (1m0s ago): HTTP probe failed with statuscode: 503\n",
		"to put the tree's readiness back: netspec apply TREE --node node-1, or start netspec watch (it probes again)\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("status lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "10.244.1.12") || strings.Contains(got, "10.244.1.13") {
		t.Errorf("status names an endpoint the record does not hold out now:\n%s", got)
	}

	// No record: what the plan tells, and no more.
	b.Reset()
	writeRecordView(&b, "state", &recordView{Present: true, Node: "node-1", Services: 1, Endpoints: 3, Recorded: since, Probes: heldOut(p, nil)}, now)
	got = b.String()
	for _, want := range []string{
		"readiness probes: no record of the daemon's probes; 2 endpoints of the applied plan not ready although probed (out for a failing probe, or not Ready in the tree: the record does not tell which):\n",
		"  shop/cart 10.244.1.11:8080: httpGet http://10.244.1.11:8080/ready\n",
		"  shop/cart 10.244.1.13:8080: httpGet http://10.244.1.13:8080/ready\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("status lacks %q:\n%s", want, got)
		}
	}
}
