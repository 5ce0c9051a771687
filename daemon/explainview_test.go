package daemon

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"netspec.dev/netspec/daemon/fleet"
	"netspec.dev/netspec/explain"
	"netspec.dev/netspec/plan"
)

// TestExplainView: explain --live's view of the daemon's status: the
// endpoints out (its own probes', then the fleet's), the Services
// failing open, the readiness view in which exactly the failing address
// and probe are not ready (an httpGet as the daemon names it, with the
// address, or as one before did), and the cause of a kernel that
// differs; a daemon that does not probe leaves readiness to the tree.
func TestExplainView(t *testing.T) {
	ended := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	http := plan.Probe{Action: plan.ProbeHTTPGet, Port: 8080, Scheme: "HTTP", Path: "/ready"}
	tcp := plan.Probe{Action: plan.ProbeTCPSocket, Port: 5432}
	a, b, c := netip.MustParseAddr("10.244.1.5"), netip.MustParseAddr("10.244.2.6"), netip.MustParseAddr("10.244.3.7")
	st := &Status{
		LastSync: &SyncStatus{Ended: ended},
		Probes: &ProbeStatus{
			Out:      []ProbeOut{{Service: "shop/web", Endpoint: "10.244.1.5:8080", Probe: ProbeString(http, a), Since: ended, LastError: "503"}},
			FailOpen: []string{"shop/db"},
		},
		Fleet: &FleetStatus{Out: []FleetOut{
			{Service: "shop/db", Endpoint: "10.244.2.6:5432", Probe: tcp.String(), Reason: fleet.ReasonDead, By: []string{"node-2"}},
			{Service: "shop/web", Endpoint: "10.244.3.7:8080", Probe: http.String(), Reason: fleet.ReasonProbe, By: []string{"node-3"}},
		}},
	}
	o, view, err := ExplainView(st)
	if err != nil {
		t.Fatal(err)
	}
	want := []explain.ProbeFailure{
		{Service: "shop/web", Endpoint: netip.MustParseAddrPort("10.244.1.5:8080"), Probe: ProbeString(http, a), Since: ended, LastError: "503"},
		{Service: "shop/db", Endpoint: netip.MustParseAddrPort("10.244.2.6:5432"), Probe: tcp.String(), By: []string{"node-2"}, NodeDead: true},
		{Service: "shop/web", Endpoint: netip.MustParseAddrPort("10.244.3.7:8080"), Probe: http.String(), By: []string{"node-3"}},
	}
	if !slices.EqualFunc(o.Probes, want, func(x, y explain.ProbeFailure) bool {
		return x.Service == y.Service && x.Endpoint == y.Endpoint && x.Probe == y.Probe && x.Since.Equal(y.Since) &&
			x.LastError == y.LastError && slices.Equal(x.By, y.By) && x.NodeDead == y.NodeDead
	}) {
		t.Errorf("probes:\n%+v\nwant\n%+v", o.Probes, want)
	}
	if !o.Probing || !slices.Equal(o.FailOpen, []string{"shop/db"}) {
		t.Errorf("probing %t, fail open %q; want true, [shop/db]", o.Probing, o.FailOpen)
	}
	if !strings.Contains(o.KernelDiffers, "since its last sync at 2026-01-02T03:04:05Z") {
		t.Errorf("kernel differs: %q, want the last sync's end", o.KernelDiffers)
	}
	for _, tc := range []struct {
		ip    netip.Addr
		probe plan.Probe
		want  bool
	}{
		{ip: a, probe: http, want: true},
		{ip: b, probe: tcp, want: true},
		{ip: c, probe: http, want: true},
		{ip: a, probe: tcp},
		{ip: b, probe: http},
		{ip: netip.MustParseAddr("10.244.9.9"), probe: http},
	} {
		if got := view.NotReady(tc.ip, []plan.Probe{tc.probe}); got != tc.want {
			t.Errorf("NotReady(%s, %s) = %t, want %t", tc.ip, tc.probe, got, tc.want)
		}
	}

	o, view, err = ExplainView(&Status{Fleet: st.Fleet})
	if err != nil || o.Probing || o.Probes != nil || view.NotReady != nil || o.KernelDiffers == "" || strings.Contains(o.KernelDiffers, "last sync") {
		t.Errorf("no probes: %+v, view %+v, %v; want the tree's readiness and a cause without a sync", o, view, err)
	}

	bad := &Status{Probes: &ProbeStatus{Out: []ProbeOut{{Service: "shop/web", Endpoint: "10.244.1.5"}}}}
	if _, _, err := ExplainView(bad); err == nil || !strings.Contains(err.Error(), `endpoint "10.244.1.5"`) {
		t.Errorf("an endpoint without port: %v, want an error naming it", err)
	}
}
