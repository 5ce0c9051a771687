package compiler_test

import (
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/plan"
)

const probesTree = "testdata/readiness-probes"

// TestCompileProbes: the plan carries each endpoint's readiness probes:
// those of its Pod's containers (a named port resolved in the container,
// the kubelet's defaults filled in, exec left out), or for endpoints
// without a Pod the Service's annotation netspec.dev/readiness-probe.
func TestCompileProbes(t *testing.T) {
	c := mustTree(t, probesTree, "node-a")
	p := c.plans["node-a"]
	probesOf := func(svc, port, ep string) []plan.Probe {
		t.Helper()
		pp := findPort(t, findService(t, p, svc), port, "TCP")
		for _, e := range pp.Endpoints {
			if e.AddrPort().String() == ep {
				return e.Probes
			}
		}
		t.Fatalf("%s has no endpoint %s", svc, ep)
		return nil
	}
	tests := []struct {
		name     string
		svc      string
		port     string
		endpoint string
		want     []plan.Probe
	}{
		{name: "httpGet on a named port and grpc, two containers", svc: "shop/web", port: "http", endpoint: "10.244.1.10:8080", want: []plan.Probe{
			{Action: plan.ProbeHTTPGet, Port: 8080, Scheme: "HTTP", Path: "/ready", Headers: []plan.ProbeHeader{{Name: "X-Probe", Value: "netspec"}},
				PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 2},
			{Action: plan.ProbeGRPC, Port: 9090, GRPCService: "health", PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3},
		}},
		{name: "tcpSocket with the defaults", svc: "shop/web", port: "http", endpoint: "10.244.2.10:8080", want: []plan.Probe{
			{Action: plan.ProbeTCPSocket, Port: 8080, PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3},
		}},
		{name: "exec is not probed", svc: "shop/web", port: "http", endpoint: "10.244.1.12:8080", want: nil},
		{name: "annotation for Endpoints", svc: "shop/legacy", port: "https", endpoint: "10.50.0.2:8443", want: []plan.Probe{
			{Action: plan.ProbeHTTPGet, Port: 8443, Scheme: "HTTPS", Host: "legacy.example.com", Path: "/",
				PeriodSeconds: 10, TimeoutSeconds: 2, SuccessThreshold: 1, FailureThreshold: 3},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, probesOf(tc.svc, tc.port, tc.endpoint)); diff != "" {
				t.Errorf("probes (-want +got):\n%s", diff)
			}
		})
	}
}

// failing is a NotReady view that fails the given addresses.
func failing(ips ...string) compiler.NotReady {
	set := map[netip.Addr]bool{}
	for _, s := range ips {
		set[netip.MustParseAddr(s)] = true
	}
	return func(ip netip.Addr, probes []plan.Probe) bool {
		if len(probes) == 0 {
			panic("NotReady asked about an endpoint without probes")
		}
		return set[ip]
	}
}

// TestCompileNotReady: a NotReady view takes failing endpoints out of the
// node's selection (not ready, not serving) as the tree's readiness
// would, unless every endpoint a port uses here fails: then the port
// keeps them (fail open) and the Service is named in FailOpen. Endpoints
// without probes are never asked about.
func TestCompileNotReady(t *testing.T) {
	c := mustTree(t, probesTree)
	tests := []struct {
		name     string
		node     string
		failing  []string
		svc      string
		port     string
		cluster  []string
		notReady []string // endpoints the plan marks not ready
		failOpen []string
	}{
		{name: "one of three out", node: "node-a", failing: []string{"10.244.1.10"}, svc: "shop/web", port: "http",
			cluster: []string{"10.244.1.12:8080", "10.244.2.10:8080"}, notReady: []string{"10.244.1.10:8080"}},
		{name: "the one without probes stays", node: "node-a", failing: []string{"10.244.1.10", "10.244.2.10"}, svc: "shop/web", port: "http",
			cluster: []string{"10.244.1.12:8080"}, notReady: []string{"10.244.1.10:8080", "10.244.2.10:8080"}},
		{name: "Local: the only local endpoint fails: fail open", node: "node-a", failing: []string{"10.244.1.20"}, svc: "shop/local", port: "http",
			cluster: []string{"10.244.1.20:8080"}, failOpen: []string{"shop/local"}},
		{name: "Local: another node's endpoint fails", node: "node-b", failing: []string{"10.244.1.20"}, svc: "shop/local", port: "http",
			cluster: []string{"10.244.2.20:8080"}, notReady: []string{"10.244.1.20:8080"}},
		{name: "annotation: every endpoint fails: fail open", node: "node-a", failing: []string{"10.50.0.1", "10.50.0.2"}, svc: "shop/legacy", port: "https",
			cluster: []string{"10.50.0.1:8443", "10.50.0.2:8443"}, failOpen: []string{"shop/legacy"}},
		{name: "annotation: one fails", node: "node-a", failing: []string{"10.50.0.2"}, svc: "shop/legacy", port: "https",
			cluster: []string{"10.50.0.1:8443"}, notReady: []string{"10.50.0.2:8443"}},
		{name: "dual-stack: the only IPv4 endpoint fails: that family fails open", node: "node-a", failing: []string{"10.50.1.1"}, svc: "shop/dual", port: "http",
			cluster: []string{"10.50.1.1:8080", "[fd00:50:1::1]:8080", "[fd00:50:1::2]:8080"}, failOpen: []string{"shop/dual"}},
		{name: "dual-stack: one IPv6 endpoint fails", node: "node-a", failing: []string{"fd00:50:1::2"}, svc: "shop/dual", port: "http",
			cluster: []string{"10.50.1.1:8080", "[fd00:50:1::1]:8080"}, notReady: []string{"[fd00:50:1::2]:8080"}},
		{name: "nothing fails", node: "node-a", svc: "shop/web", port: "http",
			cluster: []string{"10.244.1.10:8080", "10.244.1.12:8080", "10.244.2.10:8080"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, memo := range []bool{false, true} {
				var st *compiler.Staged
				var err error
				o := compiler.Options{NotReady: failing(tc.failing...)}
				if memo {
					m := compiler.NewMemo()
					// A first compilation without the view: the memo must
					// apply the view to what it kept.
					if _, err = m.CompileStaged(c.tree.Objects, m.Validate(c.tree.Objects, c.lock, c.tree), tc.node); err != nil {
						t.Fatal(err)
					}
					st, err = m.CompileStagedWith(c.tree.Objects, m.Validate(c.tree.Objects, c.lock, c.tree), tc.node, o)
				} else {
					st, err = compiler.CompileStagedWith(c.tree.Objects, c.checked, tc.node, o)
				}
				if err != nil {
					t.Fatal(err)
				}
				pp := findPort(t, findService(t, st.Plan, tc.svc), tc.port, "TCP")
				if diff := cmp.Diff(tc.cluster, addrs(pp, pp.Cluster)); diff != "" {
					t.Errorf("memo %v: Cluster (-want +got):\n%s", memo, diff)
				}
				var notReady []string
				for _, e := range pp.Endpoints {
					if !e.Ready {
						notReady = append(notReady, e.AddrPort().String())
						if e.Serving {
							t.Errorf("memo %v: %s is out for its probe but still serving", memo, e.AddrPort())
						}
					}
				}
				if diff := cmp.Diff(tc.notReady, notReady); diff != "" {
					t.Errorf("memo %v: not ready (-want +got):\n%s", memo, diff)
				}
				if diff := cmp.Diff(tc.failOpen, st.FailOpen); diff != "" {
					t.Errorf("memo %v: FailOpen (-want +got):\n%s", memo, diff)
				}
			}
		})
	}
}

// TestCompileNotReadyDNS: a headless Service's DNS answers follow the
// view: a failing pod's address leaves the Service name and its own name,
// and comes back when it passes.
func TestCompileNotReadyDNS(t *testing.T) {
	c := mustTree(t, probesTree)
	m := compiler.NewMemo()
	compile := func(fail ...string) *plan.Plan {
		t.Helper()
		st, err := m.CompileStagedWith(c.tree.Objects, m.Validate(c.tree.Objects, c.lock, c.tree), "node-a", compiler.Options{NotReady: failing(fail...)})
		if err != nil {
			t.Fatal(err)
		}
		return st.Finish()
	}
	const zone, name = "cluster.local.", "db.shop.svc.cluster.local."
	for _, step := range []struct {
		fail []string
		want []string
	}{
		{want: []string{"10.244.1.30", "10.244.2.30"}},
		{fail: []string{"10.244.1.30"}, want: []string{"10.244.2.30"}},
		{fail: []string{"10.244.1.30", "10.244.2.30"}, want: []string{"10.244.1.30", "10.244.2.30"}}, // fail open
		{want: []string{"10.244.1.30", "10.244.2.30"}},
	} {
		p := compile(step.fail...)
		got := recordsAt(t, p, zone, name, "A", false)
		slices.Sort(got)
		if diff := cmp.Diff(step.want, got); diff != "" {
			t.Errorf("failing %v: A records of %s (-want +got):\n%s", step.fail, name, diff)
		}
		if hosts := recordsAt(t, p, zone, "db-0."+name, "A", false); (len(hosts) == 0) != (len(step.fail) == 1) {
			t.Errorf("failing %v: db-0's own name has %v", step.fail, hosts)
		}
	}
}

// TestCompileNotReadyMemo: with a memo, a view that fails the same
// endpoints as last time gives the same Services back (shared memory, so
// the daemon's comparison is free), and a Service without failing
// endpoints is the tree's.
func TestCompileNotReadyMemo(t *testing.T) {
	c := mustTree(t, probesTree)
	m := compiler.NewMemo()
	compile := func(fail ...string) *plan.Plan {
		t.Helper()
		st, err := m.CompileStagedWith(c.tree.Objects, m.Validate(c.tree.Objects, c.lock, c.tree), "node-a", compiler.Options{NotReady: failing(fail...)})
		if err != nil {
			t.Fatal(err)
		}
		return st.Plan
	}
	a := compile("10.244.1.10")
	b := compile("10.244.1.10")
	for i := range a.Services {
		if !plan.Shared(a.Services[i].Ports, b.Services[i].Ports) {
			t.Errorf("%s: compiled again for an unchanged view", a.Services[i].Key())
		}
	}
	d := compile()
	want, err := compiler.Compile(c.tree.Objects, c.checked, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	if !plan.SameDataplane(d, want) {
		t.Errorf("no endpoint failing: the plan differs from the tree's")
	}
}

// TestRestage: Restage gives what a compilation with the same view gives,
// DNS records included, without reading the tree again.
func TestRestage(t *testing.T) {
	c := mustTree(t, probesTree)
	m := compiler.NewMemo()
	if _, ok := m.Restage(compiler.Options{}); ok {
		t.Fatal("Restage of an empty memo")
	}
	if _, err := m.CompileStaged(c.tree.Objects, m.Validate(c.tree.Objects, c.lock, c.tree), "node-a"); err != nil {
		t.Fatal(err)
	}
	for _, fail := range [][]string{{"10.244.1.10"}, {"10.244.1.30"}, {"10.50.0.1", "10.50.0.2"}, nil, {"10.244.1.20", "10.244.2.30"}} {
		o := compiler.Options{NotReady: failing(fail...)}
		got, ok := m.Restage(o)
		if !ok {
			t.Fatal("Restage after a compilation: not ok")
		}
		want, err := compiler.CompileStagedWith(c.tree.Objects, c.checked, "node-a", o)
		if err != nil {
			t.Fatal(err)
		}
		if !plan.SameDataplane(got.Plan, want.Plan) || !slices.Equal(got.FailOpen, want.FailOpen) {
			t.Errorf("failing %v: Restage differs from a compilation (fail open %v, want %v)", fail, got.FailOpen, want.FailOpen)
		}
		if !got.Finish().Equal(want.Finish()) {
			t.Errorf("failing %v: Restage's DNS or env differ from a compilation's", fail)
		}
	}
}

// TestRestageFailingRandomFlips: Restage told which addresses fail
// (Options.Failing), so that it works out again only the Services at
// addresses failing now or last time, equals a compilation with the same
// view, over random flips, with compilations of the memo in between.
func TestRestageFailingRandomFlips(t *testing.T) {
	c := mustTree(t, probesTree)
	m := compiler.NewMemo()
	first, err := m.CompileStaged(c.tree.Objects, m.Validate(c.tree.Objects, c.lock, c.tree), "node-a")
	if err != nil {
		t.Fatal(err)
	}
	var addrs []netip.Addr
	for _, s := range first.Plan.Services {
		for _, port := range s.Ports {
			for _, e := range port.Endpoints {
				if len(e.Probes) > 0 && !slices.Contains(addrs, e.IP) {
					addrs = append(addrs, e.IP)
				}
			}
		}
	}
	if len(addrs) < 3 {
		t.Fatalf("%d probed addresses in %s", len(addrs), probesTree)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	fail := map[netip.Addr]bool{}
	for step := range 200 {
		next := maps.Clone(fail)
		for range 1 + rng.IntN(2) {
			a := addrs[rng.IntN(len(addrs))]
			if next[a] {
				delete(next, a)
			} else {
				next[a] = true
			}
		}
		fail = next
		var ips []string
		for a := range fail {
			ips = append(ips, a.String())
		}
		o := compiler.Options{NotReady: failing(ips...), Failing: fail}
		var got *compiler.Staged
		if step%17 == 16 {
			got, err = m.CompileStagedWith(c.tree.Objects, m.Validate(c.tree.Objects, c.lock, c.tree), "node-a", o)
			if err != nil {
				t.Fatal(err)
			}
			if step%2 == 0 {
				// As a node agent does between reloads; otherwise
				// the next Restage builds the index itself.
				m.IndexProbes()
			}
		} else {
			var ok bool
			if got, ok = m.Restage(o); !ok {
				t.Fatal("Restage after a compilation: not ok")
			}
		}
		want, err := compiler.CompileStagedWith(c.tree.Objects, c.checked, "node-a", compiler.Options{NotReady: failing(ips...)})
		if err != nil {
			t.Fatal(err)
		}
		if !plan.SameDataplane(got.Plan, want.Plan) || !slices.Equal(got.FailOpen, want.FailOpen) || !got.Finish().Equal(want.Finish()) {
			t.Fatalf("step %d, failing %v: differs from a compilation (fail open %v, want %v)", step, ips, got.FailOpen, want.FailOpen)
		}
	}
}

// TestCompileProbeUnknownPortName: a probe's port name that is no port of
// its own container (another container's, or none) is not dropped: the
// kubelet fails such a probe, so the plan keeps it with PortName and port
// 0, for the prober to fail. Probes of the other containers are as usual.
func TestCompileProbeUnknownPortName(t *testing.T) {
	c := mustTree(t, "testdata/probe-port-name", "node-a")
	pp := findPort(t, findService(t, c.plans["node-a"], "shop/web"), "http", "TCP")
	if len(pp.Endpoints) != 1 {
		t.Fatalf("want 1 endpoint, got %d", len(pp.Endpoints))
	}
	want := []plan.Probe{
		{Action: plan.ProbeHTTPGet, PortName: "metrics", Scheme: "HTTP", Path: "/ready", PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3},
		{Action: plan.ProbeTCPSocket, PortName: "http", PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3},
		{Action: plan.ProbeGRPC, Port: 9000, PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3},
	}
	if diff := cmp.Diff(want, pp.Endpoints[0].Probes); diff != "" {
		t.Errorf("probes (-want +got):\n%s", diff)
	}
	if got, want := want[0].String(), "httpGet http://:metrics/ready"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	other := want[0]
	other.PortName = "other"
	if want[0].Key() == other.Key() || want[0].Equal(other) {
		t.Errorf("probes that differ in PortName are one check")
	}
}
