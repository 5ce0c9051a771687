package compiler_test

import (
	"testing"

	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/schema"
)

// TestPodTarget: a named targetPort resolves as Kubernetes' FindPort
// does: the first container port of that name with the Service port's
// protocol, in container order. A name may repeat across containers
// (Kubernetes only warns of it), and the first one wins.
func TestPodTarget(t *testing.T) {
	pod := &schema.Pod{Spec: schema.PodSpec{Containers: []schema.Container{
		{Name: "a"},
		{Name: "b", Ports: []schema.ContainerPort{{Name: "dns", ContainerPort: 5353, Protocol: "UDP"}, {Name: "http", ContainerPort: 8080, Protocol: "TCP"}}},
		{Name: "c", Ports: []schema.ContainerPort{{Name: "http", ContainerPort: 9090, Protocol: "TCP"}, {Name: "dns", ContainerPort: 53, Protocol: "TCP"}}},
	}}}
	for _, tc := range []struct {
		name    string
		port    schema.ServicePort
		want    uint16
		wantWhy string
	}{
		{name: "number", port: schema.ServicePort{Protocol: "TCP", TargetPort: schema.IntOrString{Int: 80}}, want: 80},
		{name: "name in two containers: the first", port: schema.ServicePort{Protocol: "TCP", TargetPort: schema.IntOrString{Str: "http"}}, want: 8080},
		{name: "name of another protocol first: the first of this protocol", port: schema.ServicePort{Protocol: "TCP", TargetPort: schema.IntOrString{Str: "dns"}}, want: 53},
		{name: "UDP", port: schema.ServicePort{Protocol: "UDP", TargetPort: schema.IntOrString{Str: "dns"}}, want: 5353},
		{name: "no such name", port: schema.ServicePort{Protocol: "TCP", TargetPort: schema.IntOrString{Str: "grpc"}}, wantWhy: "the pod has no container port named grpc/TCP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := compiler.PodTarget(pod, tc.port)
			if got != tc.want || why != tc.wantWhy {
				t.Errorf("PodTarget = %d, %q; want %d, %q", got, why, tc.want, tc.wantWhy)
			}
		})
	}
}
