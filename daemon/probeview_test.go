package daemon

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"netspec.dev/netspec/plan"
)

// TestProbeView: plan's view of the daemon's probes takes the record's
// endpoints that the last applied plan holds not ready (IPv6 too), by
// address and probe, and nothing from a record of another node, a
// record it has back in, or an endpoint without that probe.
func TestProbeView(t *testing.T) {
	http := plan.Probe{Action: plan.ProbeHTTPGet, Scheme: "HTTP", Port: 8080, Path: "/ready"}
	tcp := plan.Probe{Action: plan.ProbeTCPSocket, Port: 8080}
	ep := probedEndpoint
	last := &plan.Plan{Node: plan.Node{Name: "node-1"}, Services: []plan.Service{{Namespace: "shop", Name: "cart",
		Ports: []plan.Port{{Port: 80, Endpoints: []plan.Endpoint{
			ep("10.244.1.11", false, http),
			ep("10.244.1.12", true, http),
			ep("fd00:244::11", false, tcp),
		}}}}}}
	out := func(endpoint, probe string) ProbeOut {
		return ProbeOut{Service: "shop/cart", Endpoint: endpoint, Probe: probe}
	}
	held4 := out("10.244.1.11:8080", "httpGet http://10.244.1.11:8080/ready")
	held6 := out("[fd00:244::11]:8080", "tcpSocket :8080")
	back := out("10.244.1.12:8080", "httpGet http://10.244.1.12:8080/ready") // an apply put it back
	for _, tc := range []struct {
		name     string
		last     *plan.Plan
		rec      *ProbeRecord
		wantHeld []ProbeOut
		// notReady: what the view says of each address with probes.
		notReady map[string][]plan.Probe
		ready    map[string][]plan.Probe
	}{
		{
			name:     "held out",
			last:     last,
			rec:      &ProbeRecord{Node: "node-1", Out: []ProbeOut{held4, back, held6}},
			wantHeld: []ProbeOut{held4, held6},
			notReady: map[string][]plan.Probe{"10.244.1.11": {http}, "fd00:244::11": {tcp}},
			// Another probe of the same address does not fail, nor an
			// endpoint the record has back in.
			ready: map[string][]plan.Probe{"10.244.1.11": {tcp}, "10.244.1.12": {http}},
		},
		{
			name: "another node's record",
			last: last,
			rec:  &ProbeRecord{Node: "node-2", Out: []ProbeOut{held4}},
		},
		{
			name: "no record",
			last: last,
		},
		{
			name: "nothing applied",
			rec:  &ProbeRecord{Node: "node-1", Out: []ProbeOut{held4}},
		},
		{
			name: "the record's endpoints all back in",
			last: last,
			rec:  &ProbeRecord{Node: "node-1", Out: []ProbeOut{back, out("not an address", "tcpSocket :8080")}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, held := ProbeView(tc.last, tc.rec, "node-1")
			if diff := cmp.Diff(tc.wantHeld, held); diff != "" {
				t.Errorf("held (-want +got):\n%s", diff)
			}
			if len(tc.wantHeld) == 0 {
				if o.NotReady != nil || o.Failing != nil {
					t.Errorf("a view without endpoints held out: %+v", o)
				}
				return
			}
			for ip, probes := range tc.notReady {
				a := netip.MustParseAddr(ip)
				if !o.NotReady(a, probes) || !o.Failing[a] {
					t.Errorf("%s %v: ready in the view (Failing %v), want not ready", ip, probes, o.Failing[a])
				}
			}
			for ip, probes := range tc.ready {
				if o.NotReady(netip.MustParseAddr(ip), probes) {
					t.Errorf("%s %v: not ready in the view, want ready", ip, probes)
				}
			}
			if len(o.Failing) != len(tc.notReady) {
				t.Errorf("Failing %v, want the addresses of %v", o.Failing, tc.notReady)
			}
		})
	}
}

// probedEndpoint is an endpoint ip:8080 with probes, ready (and serving)
// or not.
func probedEndpoint(ip string, ready bool, probes ...plan.Probe) plan.Endpoint {
	return plan.Endpoint{IP: netip.MustParseAddr(ip), Port: 8080, Ready: ready, Serving: ready, Probes: probes}
}

// TestHeldOut: without a daemon, what the kernel holds out for probes is
// the record's endpoints the applied plan still has not ready (not those
// of a Service failing open); without a record, or with one of another
// node, the plan's probed endpoints that are not ready; nothing when the
// plan has no probe.
func TestHeldOut(t *testing.T) {
	pr := plan.Probe{Action: plan.ProbeHTTPGet, Scheme: "HTTP", Port: 8080, Path: "/ready"}
	ep := func(ip string, ready bool) plan.Endpoint { return probedEndpoint(ip, ready, pr) }
	p := &plan.Plan{Node: plan.Node{Name: "node-1"}, Services: []plan.Service{{Namespace: "shop", Name: "cart",
		Ports: []plan.Port{{Port: 80, Endpoints: []plan.Endpoint{ep("10.244.1.11", false), ep("10.244.1.12", true), ep("10.244.1.13", false)}}}}}}
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	out := func(ip string, failOpen bool) ProbeOut {
		return ProbeOut{Service: "shop/cart", Endpoint: ip + ":8080", Probe: "httpGet http://" + ip + ":8080/ready", FailOpen: failOpen}
	}
	rec := &ProbeRecord{Node: "node-1", Written: since, FailOpen: []string{"shop/other"},
		Out: []ProbeOut{out("10.244.1.11", false), out("10.244.1.12", false), out("10.244.1.13", true)}}
	unready := []ProbeOut{out("10.244.1.11", false), out("10.244.1.13", false)}
	for _, tc := range []struct {
		name string
		p    *plan.Plan
		rec  *ProbeRecord
		want *Held
	}{
		{name: "record", p: p, rec: rec, want: &Held{Recorded: true, Written: since, Out: []ProbeOut{out("10.244.1.11", false)}, FailOpen: []string{"shop/other"}}},
		{name: "no record", p: p, rec: nil, want: &Held{Out: unready}},
		{name: "record of another node", p: p, rec: &ProbeRecord{Node: "node-2", Out: rec.Out}, want: &Held{Out: unready}},
		{name: "no probe", p: &plan.Plan{Node: plan.Node{Name: "node-1"}}, rec: rec, want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, HeldOut(tc.p, tc.rec)); diff != "" {
				t.Errorf("HeldOut (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRemoveProbeRecord: cleanup's removal of the probe record says
// whether there was one, and a missing one is no error.
func TestRemoveProbeRecord(t *testing.T) {
	for _, tc := range []struct {
		name    string
		present bool
	}{
		{name: "present", present: true},
		{name: "absent", present: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.present {
				if err := writeProbeRecord(dir, &ProbeRecord{Node: "node-1"}); err != nil {
					t.Fatal(err)
				}
			}
			removed, err := RemoveProbeRecord(dir)
			if err != nil || removed != tc.present {
				t.Fatalf("RemoveProbeRecord = %v, %v; want %v, nil", removed, err, tc.present)
			}
			if rec, err := ReadProbeRecord(dir); rec != nil || err != nil {
				t.Errorf("after RemoveProbeRecord the record reads %+v, %v; want none", rec, err)
			}
		})
	}
}
