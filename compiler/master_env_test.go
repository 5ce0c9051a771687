package compiler_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/plan"
)

// TestEnvMasterService: the variables of default/kubernetes are in the
// env file of every namespace, as the kubelet gives them to every pod; a
// namespace's own Service kubernetes wins over it.
func TestEnvMasterService(t *testing.T) {
	c := mustTree(t, "testdata/master-service", "node-a")
	p := c.plans["node-a"]
	master := []string{
		"KUBERNETES_PORT=tcp://10.96.0.1:443",
		"KUBERNETES_PORT_443_TCP=tcp://10.96.0.1:443",
		"KUBERNETES_PORT_443_TCP_ADDR=10.96.0.1",
		"KUBERNETES_PORT_443_TCP_PORT=443",
		"KUBERNETES_PORT_443_TCP_PROTO=tcp",
		"KUBERNETES_SERVICE_HOST=10.96.0.1",
		"KUBERNETES_SERVICE_PORT=443",
		"KUBERNETES_SERVICE_PORT_HTTPS=443",
	}
	tests := []struct {
		namespace string
		want      []string
	}{
		{namespace: "default", want: master},
		{namespace: "shop", want: master},
		{namespace: "data", want: master},
		{namespace: "ops", want: []string{
			"KUBERNETES_PORT=tcp://10.96.0.50:8080",
			"KUBERNETES_PORT_8080_TCP=tcp://10.96.0.50:8080",
			"KUBERNETES_PORT_8080_TCP_ADDR=10.96.0.50",
			"KUBERNETES_PORT_8080_TCP_PORT=8080",
			"KUBERNETES_PORT_8080_TCP_PROTO=tcp",
			"KUBERNETES_SERVICE_HOST=10.96.0.50",
			"KUBERNETES_SERVICE_PORT=8080",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.namespace, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, envWithPrefix(t, p, tc.namespace, "KUBERNETES_")); diff != "" {
				t.Errorf("KUBERNETES_ variables (-want +got):\n%s", diff)
			}
		})
	}
	// Without default/kubernetes no other namespace has them, and ops
	// keeps its own.
	without := &plan.Plan{FormatVersion: p.FormatVersion, Node: p.Node, Cluster: p.Cluster}
	without.Services = slices.DeleteFunc(slices.Clone(p.Services), func(s plan.Service) bool { return s.Key() == "default/kubernetes" })
	compiler.Complete(without, []string{"data", "default", "ops", "shop"})
	for _, ns := range []string{"default", "shop", "data"} {
		if got := envWithPrefix(t, without, ns, "KUBERNETES_"); got != nil {
			t.Errorf("without default/kubernetes, %s has %q", ns, got)
		}
	}
	if got := envWithPrefix(t, without, "ops", "KUBERNETES_SERVICE_HOST"); !slices.Equal(got, []string{"KUBERNETES_SERVICE_HOST=10.96.0.50"}) {
		t.Errorf("without default/kubernetes, ops has %q", got)
	}
}

// envWithPrefix returns a namespace's variables whose names start with
// prefix, as NAME=value, in file order.
func envWithPrefix(t *testing.T, p *plan.Plan, namespace, prefix string) []string {
	t.Helper()
	for _, f := range p.Env {
		if f.Namespace != namespace {
			continue
		}
		var out []string
		for _, v := range f.Vars {
			if strings.HasPrefix(v.Name, prefix) {
				out = append(out, v.Name+"="+v.Value)
			}
		}
		return out
	}
	t.Fatalf("no env file for namespace %s", namespace)
	return nil
}
