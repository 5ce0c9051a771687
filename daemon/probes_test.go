package daemon

import (
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"netspec.dev/netspec/daemon/probe"
	"netspec.dev/netspec/internal/testnet"
	"netspec.dev/netspec/plan"
)

// probedTree is examples/basic with a namespace "probed" whose endpoints
// have readiness probes: api (two pods), db (headless, two pods) and
// legacy (an Endpoints object and the annotation).
const probedTree = `apiVersion: v1
kind: Service
metadata: {name: api, namespace: probed}
spec:
  selector: {app: api}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Pod
metadata: {name: api-1, namespace: probed, labels: {app: api}}
spec:
  nodeName: node-1
  containers: [{name: app, readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1, failureThreshold: 2}}]
status: {podIP: 10.244.1.111, conditions: [{type: Ready, status: "True"}]}
---
apiVersion: v1
kind: Pod
metadata: {name: api-2, namespace: probed, labels: {app: api}}
spec:
  nodeName: node-2
  containers: [{name: app, readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1, failureThreshold: 2}}]
status: {podIP: 10.244.2.11, conditions: [{type: Ready, status: "True"}]}
---
apiVersion: v1
kind: Service
metadata: {name: db, namespace: probed}
spec:
  clusterIP: None
  selector: {app: db}
  ports: [{name: pg, port: 5432}]
---
apiVersion: v1
kind: Pod
metadata: {name: db-0, namespace: probed, labels: {app: db}}
spec:
  nodeName: node-1
  containers: [{name: pg, readinessProbe: {tcpSocket: {port: 5432}}}]
status: {podIP: 10.244.1.120, conditions: [{type: Ready, status: "True"}]}
---
apiVersion: v1
kind: Pod
metadata: {name: db-1, namespace: probed, labels: {app: db}}
spec:
  nodeName: node-2
  containers: [{name: pg, readinessProbe: {tcpSocket: {port: 5432}}}]
status: {podIP: 10.244.2.120, conditions: [{type: Ready, status: "True"}]}
---
apiVersion: v1
kind: Service
metadata:
  name: legacy
  namespace: probed
  annotations: {netspec.dev/readiness-probe: '{"httpGet": {"port": 8443, "path": "/ready"}}'}
spec:
  ports: [{name: https, port: 443}]
---
apiVersion: v1
kind: Endpoints
metadata: {name: legacy, namespace: probed}
subsets:
- addresses: [{ip: 10.50.0.1}, {ip: 10.50.0.2}]
  ports: [{name: https, port: 8443}]
`

// fakeProber is a prober whose checks fail when the test says so.
type fakeProber struct {
	mu       sync.Mutex
	targets  []probe.Target
	byAddr   map[netip.Addr][]probe.Target // the targets Set, by address
	sets     int
	failing  map[netip.Addr]string // address → error
	since    map[netip.Addr]time.Time
	probed   time.Time // LastProbe of the failing checks
	onChange func()
}

func (f *fakeProber) Set(ts []probe.Target) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.targets = slices.Clone(ts)
	f.byAddr = map[netip.Addr][]probe.Target{}
	for _, t := range ts {
		f.byAddr[t.Addr] = append(f.byAddr[t.Addr], t)
	}
	f.sets++
}

// Failing returns the status of the checks Set of the failing addresses
// (a check not Set does not fail, as with the prober).
func (f *fakeProber) Failing() map[string]probe.Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]probe.Status{}
	for a, err := range f.failing {
		for _, t := range f.byAddr[a] {
			out[t.Key()] = probe.Status{Target: t, LastError: err, Since: f.since[a], Probed: true, LastProbe: f.probed}
		}
	}
	return out
}

func (f *fakeProber) Close() {}

// set fails (err != "") or passes the checks of the addresses, then tells
// the watcher, as the prober does after a flip.
func (f *fakeProber) set(err string, addrs ...string) {
	f.mu.Lock()
	for _, s := range addrs {
		a := netip.MustParseAddr(s)
		if err == "" {
			delete(f.failing, a)
		} else {
			f.failing[a] = err
			f.since[a] = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		}
	}
	f.mu.Unlock()
	f.onChange()
}

// probeAgain is a later probe of a failing address that fails
// otherwise: no flip, so no OnChange and no sync.
func (f *fakeProber) probeAgain(addr, err string, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failing[netip.MustParseAddr(addr)] = err
	f.probed = at
}

// startProbed runs a watcher of tree with the fake prober, logging to
// recs (and the test's log).
func startProbed(t *testing.T, tree string, opts Options, recs *records) (*running, *fakeProber) {
	t.Helper()
	r, f := newProbed(t, tree, opts, recs)
	runSynced(t, r.Watcher, deadline)
	r.idle(t)
	return r, f
}

// newProbed is startProbed's watcher, not yet run.
func newProbed(t *testing.T, tree string, opts Options, recs *records) (*running, *fakeProber) {
	t.Helper()
	r := &running{stateDir: filepath.Join(t.TempDir(), "state")}
	opts.Tree, opts.Node, opts.StateDir = tree, "node-1", r.stateDir
	opts.Debounce, opts.Resync, opts.Probes = 50*time.Millisecond, -1, true
	if opts.Dataplane != DataplaneNone {
		testnet.Require(t, "nft")
		r.ns = testnet.New(t, "probe").NS("node")
		opts.NetNSFd = r.ns.Fd()
	}
	opts.Logger = slog.New(recs)
	w, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeProber{failing: map[netip.Addr]string{}, since: map[netip.Addr]time.Time{}}
	w.newProber = func(o probe.Options) prober {
		f.onChange = o.OnChange
		return f
	}
	r.Watcher = w
	return r, f
}

// probedPlan is the plan applied last; the watcher must be idle
// (r.idle), which orders this read after its sync.
func (r *running) probedPlan(t *testing.T) *plan.Plan {
	t.Helper()
	r.idle(t)
	return r.good
}

// clusterOf is "ip:port" of the endpoints Service key's first port uses
// for cluster traffic in p.
func clusterOf(p *plan.Plan, key string) string {
	for i := range p.Services {
		if s := &p.Services[i]; s.Key() == key {
			var out []string
			for _, k := range s.Ports[0].Cluster {
				out = append(out, s.Ports[0].Endpoints[k].AddrPort().String())
			}
			return strings.Join(out, ",")
		}
	}
	return "no service " + key
}

// gaugeVec returns the series of a gauge vector as "label=value,...: v".
func gaugeVec(t *testing.T, w *Watcher, name string) []string {
	t.Helper()
	mfs, err := w.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			out = append(out, fmt.Sprintf("%s: %g", strings.Join(ls, ","), value(m)))
		}
	}
	slices.Sort(out)
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetHistogram() != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return -1
}

// TestProbeFlips follows readiness checks failing and passing through a
// watcher with a fake prober: the checks Set (each address and probe
// once), the plan (cluster endpoints, headless DNS), the sync reason and
// kind, fail open, the status, the metrics and the log lines, each once.
func TestProbeFlips(t *testing.T) {
	tree := basicTree(t)
	writeFile(t, filepath.Join(tree, "probed", "services.yaml"), probedTree)
	recs := newRecords(t)
	r, f := startProbed(t, tree, Options{Dataplane: DataplaneNone}, recs)

	f.mu.Lock()
	var got []string
	for _, tg := range f.targets {
		got = append(got, tg.Addr.String()+" "+tg.Probe.String())
	}
	f.mu.Unlock()
	slices.Sort(got)
	want := []string{
		"10.244.1.111 tcpSocket :8080", "10.244.1.120 tcpSocket :5432", "10.244.2.11 tcpSocket :8080",
		"10.244.2.120 tcpSocket :5432", "10.50.0.1 httpGet http://:8443/ready", "10.50.0.2 httpGet http://:8443/ready",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("targets set:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	metricsAre := func(what string, want ...string) {
		t.Helper()
		waitFor(t, what, func() (bool, string) {
			var got []string
			for _, n := range []string{"netspec_probe_endpoints", "netspec_probe_fail_open_services", "netspec_probe_service_failing_endpoints"} {
				for _, s := range gaugeVec(t, r.Watcher, n) {
					got = append(got, n+"{"+s)
				}
			}
			return slices.Equal(got, want), strings.Join(got, "\n")
		})
	}
	metricsAre("all ready", "netspec_probe_endpoints{state=failing: 0", "netspec_probe_endpoints{state=ready: 6", "netspec_probe_fail_open_services{: 0")
	if p := r.probedPlan(t); clusterOf(p, "probed/api") != "10.244.1.111:8080,10.244.2.11:8080" {
		t.Fatalf("api's endpoints before any failure: %s", clusterOf(p, "probed/api"))
	}

	// api-1 fails: out of api's endpoints, by a partial sync "probe".
	f.set("dial tcp 10.244.1.111:8080: connect: connection refused", "10.244.1.111")
	st := r.statusUntil(t, "api-1 out", func(s *Status) bool { return s.Probes != nil && len(s.Probes.Out) == 1 })
	if st.LastSync.Reason != "probe" || st.LastSync.Kind != "partial" {
		t.Errorf("last sync: %+v, want reason probe, kind partial", st.LastSync)
	}
	wantOut := ProbeOut{Service: "probed/api", Endpoint: "10.244.1.111:8080", Probe: "tcpSocket :8080",
		Since: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), LastError: "dial tcp 10.244.1.111:8080: connect: connection refused"}
	if st.Probes.Out[0] != wantOut || st.Probes.Checks != 6 || st.Probes.Failing != 1 || len(st.Probes.FailOpen) != 0 {
		t.Errorf("status probes: %+v, want out %+v", st.Probes, wantOut)
	}
	r.idle(t)
	if p := r.probedPlan(t); clusterOf(p, "probed/api") != "10.244.2.11:8080" {
		t.Errorf("api's endpoints with api-1 failing: %s", clusterOf(p, "probed/api"))
	}
	metricsAre("api-1 failing", "netspec_probe_endpoints{state=failing: 1", "netspec_probe_endpoints{state=ready: 5",
		"netspec_probe_fail_open_services{: 0", "netspec_probe_service_failing_endpoints{namespace=probed,service=api: 1")

	// db-0 fails: the headless Service's name answers with db-1 only.
	f.set("i/o timeout", "10.244.1.120")
	r.fileHas(t, "dns/cluster.local.zone", "db.probed.svc\t5\tIN\tA\t10.244.2.120")
	r.idle(t)
	if z := r.file(t, "dns/cluster.local.zone"); strings.Contains(z, "10.244.1.120") {
		t.Errorf("db-0 failing, the zone still has its address:\n%s", z)
	}

	// Both legacy endpoints fail: kept (fail open), and said so.
	f.set("HTTP probe failed with statuscode: 503", "10.50.0.1", "10.50.0.2")
	st = r.statusUntil(t, "legacy fails open", func(s *Status) bool { return len(s.Probes.FailOpen) == 1 })
	if st.Probes.FailOpen[0] != "probed/legacy" || len(st.Probes.Out) != 4 || !st.Probes.Out[2].FailOpen {
		t.Errorf("status probes: %+v", st.Probes)
	}
	r.idle(t)
	if p := r.probedPlan(t); clusterOf(p, "probed/legacy") != "10.50.0.1:8443,10.50.0.2:8443" {
		t.Errorf("legacy failing open: %s", clusterOf(p, "probed/legacy"))
	}
	metricsAre("legacy failing open", "netspec_probe_endpoints{state=failing: 4", "netspec_probe_endpoints{state=ready: 2",
		"netspec_probe_fail_open_services{: 1", "netspec_probe_service_failing_endpoints{namespace=probed,service=api: 1",
		"netspec_probe_service_failing_endpoints{namespace=probed,service=db: 1", "netspec_probe_service_failing_endpoints{namespace=probed,service=legacy: 2")

	// Everything passes again: back as the tree has it, series gone.
	f.set("", "10.244.1.111", "10.244.1.120", "10.50.0.1", "10.50.0.2")
	r.statusUntil(t, "all back", func(s *Status) bool { return len(s.Probes.Out) == 0 && len(s.Probes.FailOpen) == 0 })
	r.idle(t)
	metricsAre("all ready again", "netspec_probe_endpoints{state=failing: 0", "netspec_probe_endpoints{state=ready: 6", "netspec_probe_fail_open_services{: 0")
	if p := r.probedPlan(t); clusterOf(p, "probed/api") != "10.244.1.111:8080,10.244.2.11:8080" {
		t.Errorf("api's endpoints after recovery: %s", clusterOf(p, "probed/api"))
	}
	// Each flip logged once.
	count := func(msg string) int {
		n := 0
		for _, l := range recs.all() {
			if l.msg == msg {
				n++
			}
		}
		return n
	}
	for msg, want := range map[string]int{
		"endpoint out for its readiness probe":                                                                               2,
		"endpoint fails its readiness probe; kept, its Service fails open":                                                   2,
		"every endpoint of the Service fails its readiness probe on this node; keeping them all (fail open)":                 1,
		"leaving fail open: an endpoint of the Service passes its readiness probe on this node again; those failing are out": 1,
		"endpoint back in: its readiness probe passes":                                                                       4,
	} {
		if got := count(msg); got != want {
			t.Errorf("%d log lines %q, want %d", got, msg, want)
		}
	}
	if f.sets != 1 {
		t.Errorf("the prober's checks were Set %d times; the plan's probes did not change after the first sync", f.sets)
	}
}

// TestProbeTargetsOnce: each address and probe is one check however many
// Services select the endpoint.
func TestProbeTargetsOnce(t *testing.T) {
	pr := plan.Probe{Action: plan.ProbeTCPSocket, Port: 80, PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3}
	other := pr
	other.Port = 81
	ep := func(ip string, probes ...plan.Probe) plan.Endpoint {
		return plan.Endpoint{IP: netip.MustParseAddr(ip), Port: 80, Ready: true, Probes: probes}
	}
	p := &plan.Plan{Services: []plan.Service{
		{Namespace: "a", Name: "x", Ports: []plan.Port{
			{Endpoints: []plan.Endpoint{ep("10.0.0.1", pr), ep("10.0.0.2", pr, other)}, Cluster: []int{0, 1}, External: []int{0, 1}},
			{Endpoints: []plan.Endpoint{ep("10.0.0.1", pr)}, Cluster: []int{0}}}},
		{Namespace: "a", Name: "y", Ports: []plan.Port{{Endpoints: []plan.Endpoint{ep("10.0.0.1", pr), ep("10.0.0.3")}, External: []int{0, 1}}}},
		// Used by other nodes only (a Local policy, say): not probed here,
		// unless failing now, or the Service is headless.
		{Namespace: "a", Name: "z", Ports: []plan.Port{{Endpoints: []plan.Endpoint{ep("10.0.0.4", pr), ep("10.0.0.5", pr)}}}},
		{Namespace: "a", Name: "hl", Headless: true, Ports: []plan.Port{{Endpoints: []plan.Endpoint{ep("10.0.0.6", pr)}}}},
	}}
	targets, keys := targetsOf(p, map[netip.Addr]bool{netip.MustParseAddr("10.0.0.5"): true}, nil)
	var got []string
	for _, tg := range targets {
		got = append(got, tg.Addr.String()+" "+tg.Probe.String())
	}
	want := []string{"10.0.0.1 tcpSocket :80", "10.0.0.2 tcpSocket :80", "10.0.0.2 tcpSocket :81", "10.0.0.5 tcpSocket :80", "10.0.0.6 tcpSocket :80"}
	if !slices.Equal(got, want) || len(keys[netip.MustParseAddr("10.0.0.2")]) != 2 {
		t.Errorf("targets:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestProbeFlipsInvalidTree: while the tree is invalid, a flip still
// applies, to the last good plan (the invalid tree never does), and the
// status and metrics say so; the tree stays invalid. Fixing the tree
// keeps the endpoint out while it fails.
func TestProbeFlipsInvalidTree(t *testing.T) {
	tree := basicTree(t)
	writeFile(t, filepath.Join(tree, "probed", "services.yaml"), probedTree)
	// An exec probe: not probed from the node, counted as such.
	writeFile(t, filepath.Join(tree, "probed", "exec.yaml"), `apiVersion: v1
kind: Service
metadata: {name: batch, namespace: probed}
spec:
  selector: {app: batch}
  ports: [{port: 80}]
---
apiVersion: v1
kind: Pod
metadata: {name: batch-1, namespace: probed, labels: {app: batch}}
spec:
  nodeName: node-1
  containers: [{name: app, readinessProbe: {exec: {command: [check]}}}]
status: {podIP: 10.244.1.130, conditions: [{type: Ready, status: "True"}]}
`)
	recs := newRecords(t)
	r, f := startProbed(t, tree, Options{Dataplane: DataplaneNone}, recs)
	if st := r.query(t); st.Probes.Unprobed != 1 || st.Probes.Checks != 6 {
		t.Errorf("probes %+v, want 6 checks and 1 endpoint not probed (exec)", st.Probes)
	}

	atomicWrite(t, filepath.Join(tree, "web/service.yaml"), webService("70000"))
	r.statusUntil(t, "the tree invalid", func(s *Status) bool { return !s.TreeState.Valid })
	r.idle(t)
	before := r.probedPlan(t)

	f.set("dial tcp 10.244.1.111:8080: connect: connection refused", "10.244.1.111")
	st := r.statusUntil(t, "api-1 out", func(s *Status) bool { return len(s.Probes.Out) == 1 })
	if st.TreeState.Valid || st.LastSync.Reason != "probe" || st.LastSync.Result != ResultApplied || st.LastSync.Kind != "partial" {
		t.Errorf("tree %+v, last sync %+v: want the tree still invalid, a partial probe sync applied", st.TreeState, st.LastSync)
	}
	p := r.probedPlan(t)
	if got := clusterOf(p, "probed/api"); got != "10.244.2.11:8080" {
		t.Errorf("api's endpoints with api-1 failing, tree invalid: %s", got)
	}
	// The state dir records it, for status without a daemon.
	if rec, err := ReadProbeRecord(r.stateDir); err != nil || rec == nil || len(rec.Out) != 1 || rec.Out[0].Endpoint != "10.244.1.111:8080" || rec.Node != "node-1" {
		t.Errorf("probe record %+v, %v: want api-1 out", rec, err)
	}
	// The last good plan, not the invalid tree's: web's port stays.
	webPort := func(p *plan.Plan) uint16 {
		for i := range p.Services {
			if p.Services[i].Key() == "shop/web" {
				return p.Services[i].Ports[0].Port
			}
		}
		return 0
	}
	if webPort(p) != webPort(before) || webPort(p) == 0 {
		t.Errorf("web's port after the flip: %d, was %d", webPort(p), webPort(before))
	}
	r.metricIs(t, "netspec_tree_valid", 0)
	if got := gaugeVec(t, r.Watcher, "netspec_probe_endpoints"); !slices.Equal(got, []string{"state=failing: 1", "state=ready: 5"}) {
		t.Errorf("netspec_probe_endpoints %q, want 1 failing", got)
	}

	// Later probes fail otherwise: the status says the latest, with its
	// time, although no sync ran.
	at := time.Date(2026, 1, 2, 3, 9, 0, 0, time.UTC)
	f.probeAgain("10.244.1.111", "HTTP probe failed with statuscode: 503", at)
	st = r.query(t)
	if o := st.Probes.Out[0]; o.LastError != "HTTP probe failed with statuscode: 503" || !o.LastProbe.Equal(at) {
		t.Errorf("endpoint out: %+v, want the latest error and probe time", o)
	}

	// The tree valid again: api-1, still failing, stays out.
	atomicWrite(t, filepath.Join(tree, "web/service.yaml"), webService("8080"))
	r.statusUntil(t, "the tree valid", func(s *Status) bool { return s.TreeState.Valid })
	if got := clusterOf(r.probedPlan(t), "probed/api"); got != "10.244.2.11:8080" {
		t.Errorf("api's endpoints after the fix: %s", got)
	}
}

// TestProbeOutOfOtherProxy: a Service another proxy serves is not listed
// with an endpoint out for its probe (this node sends it nothing), though
// the check fails for a Service that uses the same endpoint; a headless
// one is (its DNS answers follow the probe).
func TestProbeOutOfOtherProxy(t *testing.T) {
	pr := plan.Probe{Action: plan.ProbeTCPSocket, Port: 80, PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3}
	e := plan.Endpoint{IP: netip.MustParseAddr("10.0.0.1"), Port: 80, Ready: true, Probes: []plan.Probe{pr}}
	port := plan.Port{Endpoints: []plan.Endpoint{e}}
	p := &plan.Plan{Services: []plan.Service{
		{Namespace: "a", Name: "mine", Ports: []plan.Port{port}},
		{Namespace: "a", Name: "theirs", ProxyName: "multus-proxy", Ports: []plan.Port{port}},
		{Namespace: "a", Name: "theirs-hl", ProxyName: "multus-proxy", Headless: true, Ports: []plan.Port{port}},
	}}
	ps := newProbes(nil)
	k := probe.Target{Addr: e.IP, Probe: pr}.Key()
	ps.failing[k] = true
	ps.failingAddrs[e.IP] = true
	_, perService := ps.outOf(p)
	if want := map[string]int{"a/mine": 1, "a/theirs-hl": 1}; !maps.Equal(perService, want) {
		t.Errorf("failing endpoints by Service: %v, want %v", perService, want)
	}
}

// TestProbeOutLeavesTree: an endpoint out for its failing probe whose
// Service, or which itself, leaves the tree is not logged as back in (its
// probe still fails): the log says it left the plan.
func TestProbeOutLeavesTree(t *testing.T) {
	apiSvc := "apiVersion: v1\nkind: Service\nmetadata: {name: api, namespace: probed}\nspec:\n  selector: {app: api}\n  ports: [{name: http, port: 80, targetPort: 8080}]\n---\n"
	api1 := "apiVersion: v1\nkind: Pod\nmetadata: {name: api-1, namespace: probed, labels: {app: api}}\nspec:\n  nodeName: node-1\n  containers: [{name: app, readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1, failureThreshold: 2}}]\nstatus: {podIP: 10.244.1.111, conditions: [{type: Ready, status: \"True\"}]}\n---\n"
	tests := []struct {
		name   string
		remove string // the document of probedTree removed
	}{
		{name: "its Service removed", remove: apiSvc},
		{name: "its Pod removed", remove: api1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(probedTree, tt.remove) {
				t.Fatalf("probedTree lacks the document to remove:\n%s", tt.remove)
			}
			tree := basicTree(t)
			file := filepath.Join(tree, "probed", "services.yaml")
			writeFile(t, file, probedTree)
			recs := newRecords(t)
			r, f := startProbed(t, tree, Options{Dataplane: DataplaneNone, RemovalGrace: -1}, recs)
			f.set("dial tcp 10.244.1.111:8080: connect: connection refused", "10.244.1.111")
			r.statusUntil(t, "api-1 out", func(s *Status) bool { return s.Probes != nil && len(s.Probes.Out) == 1 })
			atomicWrite(t, file, strings.Replace(probedTree, tt.remove, "", 1))
			recs.waitRec(t, 0, "endpoint out for its readiness probe left the plan (its Service or the endpoint left the tree)",
				"service", "probed/api", "endpoint", "10.244.1.111:8080")
			r.idle(t)
			if got := recs.with("endpoint back in: its readiness probe passes"); len(got) != 0 {
				t.Errorf("an endpoint that left the tree logged as back in: %v", got)
			}
			if st := r.query(t); len(st.Probes.Out) != 0 {
				t.Errorf("endpoints out after it left the tree: %+v", st.Probes.Out)
			}
		})
	}
}
