package compiler_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"netspec.dev/netspec/plan"
)

// TestCompileTargetRefProbes: an endpoint of an Endpoints object (ready
// or not) or of an EndpointSlice whose targetRef names a Pod of the tree
// (kind Pod; the namespace of the reference, else of the object) has
// that Pod: its namespace/name and its containers' readiness probes, a
// named port resolved in the Pod's containers. A Pod without a probe
// (or with an exec probe only) gives none, and the Service's annotation
// does not apply to it. A reference to a Pod the tree lacks, to another
// kind or without kind, and no reference at all leave the endpoint
// without a Pod, with the annotation's probe.
func TestCompileTargetRefProbes(t *testing.T) {
	c := mustTree(t, "testdata/targetref-probes", "node-a")
	p := c.plans["node-a"]
	refProbe := []plan.Probe{{Action: plan.ProbeHTTPGet, Port: 8081, Scheme: "HTTP", Path: "/ready",
		PeriodSeconds: 5, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3}}
	otherProbe := []plan.Probe{{Action: plan.ProbeTCPSocket, Port: 5432,
		PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3}}
	annotation := []plan.Probe{{Action: plan.ProbeTCPSocket, Port: 9000,
		PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3}}
	tests := []struct {
		name     string
		svc      string
		endpoint string
		ready    bool
		pod      string
		probes   []plan.Probe
	}{
		// Endpoints object.
		{name: "Endpoints: pod with a probe on a named port", svc: "shop/legacy", endpoint: "10.60.0.1:9000", ready: true,
			pod: "shop/ref-probe", probes: refProbe},
		{name: "Endpoints: pod without a probe", svc: "shop/legacy", endpoint: "10.60.0.2:9000", ready: true,
			pod: "shop/ref-noprobe", probes: nil},
		{name: "Endpoints: pod not in the tree", svc: "shop/legacy", endpoint: "10.60.0.3:9000", ready: true,
			probes: annotation},
		{name: "Endpoints: another kind", svc: "shop/legacy", endpoint: "10.60.0.4:9000", ready: true,
			probes: annotation},
		{name: "Endpoints: no targetRef", svc: "shop/legacy", endpoint: "10.60.0.5:9000", ready: true,
			probes: annotation},
		{name: "Endpoints: pod of the namespace the reference names", svc: "shop/legacy", endpoint: "10.60.0.6:9000", ready: true,
			pod: "other/ref-other", probes: otherProbe},
		{name: "Endpoints: no namespace is the object's, which lacks the pod", svc: "shop/legacy", endpoint: "10.60.0.7:9000", ready: true,
			probes: annotation},
		{name: "Endpoints: no kind", svc: "shop/legacy", endpoint: "10.60.0.8:9000", ready: true,
			probes: annotation},
		{name: "Endpoints: pod with an exec probe only", svc: "shop/legacy", endpoint: "10.60.0.9:9000", ready: true,
			pod: "shop/ref-exec", probes: nil},
		{name: "Endpoints: not-ready address of a pod with a probe", svc: "shop/legacy", endpoint: "10.60.0.10:9000", ready: false,
			pod: "shop/ref-probe", probes: refProbe},
		// EndpointSlice.
		{name: "slice: pod with a probe on a named port", svc: "shop/sliced", endpoint: "10.61.0.1:9000", ready: true,
			pod: "shop/ref-probe", probes: refProbe},
		{name: "slice: pod without a probe", svc: "shop/sliced", endpoint: "10.61.0.2:9000", ready: true,
			pod: "shop/ref-noprobe", probes: nil},
		{name: "slice: pod not in the tree", svc: "shop/sliced", endpoint: "10.61.0.3:9000", ready: true,
			probes: annotation},
		{name: "slice: another kind", svc: "shop/sliced", endpoint: "10.61.0.4:9000", ready: true,
			probes: annotation},
		{name: "slice: no targetRef", svc: "shop/sliced", endpoint: "10.61.0.5:9000", ready: true,
			probes: annotation},
		{name: "slice: pod of the namespace the reference names", svc: "shop/sliced", endpoint: "10.61.0.6:9000", ready: true,
			pod: "other/ref-other", probes: otherProbe},
		{name: "slice: no namespace is the object's, which lacks the pod", svc: "shop/sliced", endpoint: "10.61.0.7:9000", ready: true,
			probes: annotation},
		{name: "slice: not-ready endpoint of a pod with a probe", svc: "shop/sliced", endpoint: "10.61.0.8:9000", ready: false,
			pod: "shop/ref-probe", probes: refProbe},
		// Without the annotation.
		{name: "no annotation: pod with a probe", svc: "shop/plain", endpoint: "10.62.0.1:9000", ready: true,
			pod: "shop/ref-probe", probes: refProbe},
		{name: "no annotation: no targetRef", svc: "shop/plain", endpoint: "10.62.0.2:9000", ready: true,
			probes: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pp := findPort(t, findService(t, p, tc.svc), "app", "TCP")
			for _, e := range pp.Endpoints {
				if e.AddrPort().String() != tc.endpoint {
					continue
				}
				if e.Ready != tc.ready {
					t.Errorf("ready = %v, want %v (the targetRef does not change readiness)", e.Ready, tc.ready)
				}
				if e.Pod != tc.pod {
					t.Errorf("pod = %q, want %q", e.Pod, tc.pod)
				}
				if diff := cmp.Diff(tc.probes, e.Probes); diff != "" {
					t.Errorf("probes (-want +got):\n%s", diff)
				}
				return
			}
			t.Fatalf("%s has no endpoint %s", tc.svc, tc.endpoint)
		})
	}
}
