package compiler_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/schema"
)

// TestCompileSidecarPorts: a named targetPort is looked up as Kubernetes'
// FindPort does, in the containers and then in the native sidecars (init
// containers with restartPolicy Always), never in a plain init container;
// the containers' port wins a name both have. The endpoint's probes are
// the containers' and then the sidecars', each named port resolved in its
// own container.
func TestCompileSidecarPorts(t *testing.T) {
	c := mustTree(t, "testdata/sidecar-ports", "node-a")
	svc := findService(t, c.plans["node-a"], "shop/mesh")
	probes := []plan.Probe{
		{Action: plan.ProbeTCPSocket, Port: 8080, PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3},
		{Action: plan.ProbeHTTPGet, Port: 15000, Scheme: "HTTP", Path: "/ready", PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3},
	}
	tests := []struct {
		name string
		port string
		want []string
	}{
		{name: "a port of the sidecar only", port: "proxy", want: []string{"10.244.1.40:15001"}},
		{name: "a name of the app and the sidecar: the app's", port: "http", want: []string{"10.244.1.40:8080"}},
		{name: "a port of a plain init container: none", port: "setup", want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pp := findPort(t, svc, tc.port, "TCP")
			if diff := cmp.Diff(tc.want, addrs(pp, pp.Cluster)); diff != "" {
				t.Errorf("endpoints used (-want +got):\n%s", diff)
			}
			for _, e := range pp.Endpoints {
				if diff := cmp.Diff(probes, e.Probes); diff != "" {
					t.Errorf("%s probes (-want +got):\n%s", e.AddrPort(), diff)
				}
			}
		})
	}
}

// TestPodTargetSidecar: PodTarget, which explain also uses, finds a
// sidecar's named port, and says why it does not find one elsewhere.
func TestPodTargetSidecar(t *testing.T) {
	always := "Always"
	pod := &schema.Pod{Spec: schema.PodSpec{
		Containers: []schema.Container{{Name: "app", Ports: []schema.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: "TCP"}}}},
		InitContainers: []schema.Container{
			{Name: "init", Ports: []schema.ContainerPort{{Name: "setup", ContainerPort: 9000, Protocol: "TCP"}}},
			{Name: "envoy", RestartPolicy: always, Ports: []schema.ContainerPort{
				{Name: "envoy-out", ContainerPort: 15001, Protocol: "TCP"},
				{Name: "http", ContainerPort: 15080, Protocol: "TCP"},
				{Name: "dns", ContainerPort: 15053, Protocol: "UDP"},
			}},
		},
	}}
	named := func(name, proto string) schema.ServicePort {
		return schema.ServicePort{Port: 80, Protocol: proto, TargetPort: schema.IntOrString{Str: name}}
	}
	tests := []struct {
		name    string
		port    schema.ServicePort
		want    uint16
		wantWhy string
	}{
		{name: "sidecar port", port: named("envoy-out", "TCP"), want: 15001},
		{name: "containers first", port: named("http", "TCP"), want: 8080},
		{name: "sidecar port of another protocol", port: named("dns", "UDP"), want: 15053},
		{name: "protocol must match", port: named("envoy-out", "UDP"), wantWhy: "the pod has no container port named envoy-out/UDP"},
		{name: "plain init container", port: named("setup", "TCP"), wantWhy: "the pod has no container port named setup/TCP"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, why := compiler.PodTarget(pod, tc.port)
			if got != tc.want || why != tc.wantWhy {
				t.Errorf("PodTarget = %d, %q; want %d, %q", got, why, tc.want, tc.wantWhy)
			}
		})
	}
}
