package compiler_test

import (
	"slices"
	"strings"
	"testing"
)

// TestCompileProxyNameSlices: an EndpointSlice labelled
// service.kubernetes.io/service-proxy-name is left out of a Service with a
// cluster IP, as kube-proxy's informers leave it out, with a warning; a
// headless Service keeps it, as CoreDNS reads every slice.
func TestCompileProxyNameSlices(t *testing.T) {
	c := mustTree(t, "testdata/proxy-name-slices", "node-a")
	p := c.plans["node-a"]
	for _, tc := range []struct {
		svc  string
		want []string
	}{
		{svc: "shop/ext", want: []string{"10.70.0.1:8080"}},
		{svc: "shop/hl", want: []string{"10.71.0.1:8080", "10.71.0.2:8080"}},
	} {
		port := findPort(t, findService(t, p, tc.svc), "http", "TCP")
		var got []string
		for _, e := range port.Endpoints {
			got = append(got, e.AddrPort().String())
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: endpoints %v, want %v", tc.svc, got, tc.want)
		}
	}
	warnings := warningsOf(c.checked.Diags)
	if len(warnings) != 1 || !strings.Contains(warnings[0], `gives this slice to another proxy: kube-proxy leaves it out, and netspec's data plane too, so Service shop/ext does not forward to its endpoints`) {
		t.Errorf("warnings:\n%s\nwant one, about the slice ext-theirs", strings.Join(warnings, "\n"))
	}
}
