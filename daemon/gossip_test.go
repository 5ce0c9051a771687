package daemon

import (
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"netspec.dev/netspec/daemon/fleet"
	"netspec.dev/netspec/daemon/probe"
	"netspec.dev/netspec/plan"
)

// fakeMember is a fleet member whose view the test sets; it keeps what
// the watcher told it.
type fakeMember struct {
	mu       sync.Mutex
	cfg      fleet.Config
	trees    int // SetTree calls
	nodes    []string
	checks   []fleet.Check
	local    []string
	revision string
	probing  int // checks, as of SetRevision
	view     *fleet.View
	left     bool
}

var _ member = (*fakeMember)(nil)

func (m *fakeMember) SetTree(nodes []string, checks []fleet.Check) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.trees++
	m.nodes, m.checks = nodes, checks
}

func (m *fakeMember) SetLocal(failing []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.local = slices.Clone(failing)
}

func (m *fakeMember) SetRevision(revision string, checks int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.revision, m.probing = revision, checks
}

func (m *fakeMember) View() *fleet.View {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.view
}

func (m *fakeMember) Members() []fleet.Member {
	return []fleet.Member{{Name: m.cfg.Name, State: fleet.StateAlive, Address: "192.0.2.1:7946"},
		{Name: "node-2", State: fleet.StateDead, Address: "192.0.2.2:7946"}}
}

func (m *fakeMember) Leave(time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.left = true
	return nil
}

// setView makes v the view and tells the watcher, as the fleet does.
func (m *fakeMember) setView(v *fleet.View) {
	if v.Out == nil {
		v.Out = map[string]fleet.Why{}
	}
	slices.Sort(v.Probe)
	m.mu.Lock()
	m.view = v
	m.mu.Unlock()
	m.cfg.OnChange(v)
}

// state returns what the watcher told the member, under its lock.
func (m *fakeMember) state() fakeMember {
	m.mu.Lock()
	defer m.mu.Unlock()
	return fakeMember{cfg: m.cfg, trees: m.trees, nodes: m.nodes, checks: m.checks, local: m.local,
		revision: m.revision, probing: m.probing, left: m.left}
}

// tcpCheck is the key of a tcpSocket check of the probed tree.
func tcpCheck(addr string, port uint16, period, failure int32) string {
	pr := plan.Probe{Action: plan.ProbeTCPSocket, Port: port, PeriodSeconds: period, TimeoutSeconds: 1,
		SuccessThreshold: 1, FailureThreshold: failure}
	return probe.Target{Addr: netip.MustParseAddr(addr), Probe: pr}.Key()
}

// TestTargetsOfOwned: a member of a fleet probes the checks the fleet
// assigns it, whichever nodes use them, and no other.
func TestTargetsOfOwned(t *testing.T) {
	pr := plan.Probe{Action: plan.ProbeTCPSocket, Port: 80, PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3}
	ep := func(ip string) plan.Endpoint {
		return plan.Endpoint{IP: netip.MustParseAddr(ip), Port: 80, Ready: true, Probes: []plan.Probe{pr}}
	}
	key := func(ip string) string { return probe.Target{Addr: netip.MustParseAddr(ip), Probe: pr}.Key() }
	p := &plan.Plan{Services: []plan.Service{
		{Namespace: "a", Name: "x", Ports: []plan.Port{{Endpoints: []plan.Endpoint{ep("10.0.0.1"), ep("10.0.0.2")}, Cluster: []int{0, 1}}}},
		// Used by other nodes only: probed when the fleet assigns it.
		{Namespace: "a", Name: "z", Ports: []plan.Port{{Endpoints: []plan.Endpoint{ep("10.0.0.4"), ep("10.0.0.5")}}}},
	}}
	for _, tc := range []struct {
		name  string
		owned []string
		want  []string
	}{
		{name: "none assigned", owned: nil, want: nil},
		{name: "one carried", owned: []string{key("10.0.0.2")}, want: []string{"10.0.0.2"}},
		{name: "not carried", owned: []string{key("10.0.0.1"), key("10.0.0.5")}, want: []string{"10.0.0.1", "10.0.0.5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			owns := func(k string) bool { return slices.Contains(tc.owned, k) }
			// A failing address not assigned is not kept either.
			targets, _ := targetsOf(p, map[netip.Addr]bool{netip.MustParseAddr("10.0.0.4"): true}, owns)
			var got []string
			for _, tg := range targets {
				got = append(got, tg.Addr.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("targets %v, want %v", got, tc.want)
			}
		})
	}
}

// TestProbesViewMerge: an endpoint is not ready while its check fails on
// this node or the fleet's view says it is out; Failing lists the
// addresses of both.
func TestProbesViewMerge(t *testing.T) {
	pr := plan.Probe{Action: plan.ProbeTCPSocket, Port: 80, PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3}
	other := pr
	other.Port = 81
	key := func(ip string, p plan.Probe) string {
		return probe.Target{Addr: netip.MustParseAddr(ip), Probe: p}.Key()
	}
	ps := newProbes(&fakeProber{})
	ps.gossip = true
	ps.failing = map[string]bool{key("10.0.0.1", pr): true}
	ps.failingAddrs = map[netip.Addr]bool{netip.MustParseAddr("10.0.0.1"): true}
	if !ps.setFleet(&fleet.View{Out: map[string]fleet.Why{
		key("10.0.0.2", pr):    {Reason: fleet.ReasonProbe, By: []string{"node-2"}},
		key("10.0.0.3", other): {Reason: fleet.ReasonDead, By: []string{"node-3"}},
	}}) {
		t.Fatal("a new view is not taken as a change")
	}
	o := ps.view()
	for _, tc := range []struct {
		ip       string
		probes   []plan.Probe
		notReady bool
	}{
		{ip: "10.0.0.1", probes: []plan.Probe{pr}, notReady: true},         // fails here
		{ip: "10.0.0.2", probes: []plan.Probe{pr}, notReady: true},         // the fleet says
		{ip: "10.0.0.2", probes: []plan.Probe{other}, notReady: false},     // another check of the address
		{ip: "10.0.0.3", probes: []plan.Probe{pr, other}, notReady: true},  // its node is dead
		{ip: "10.0.0.4", probes: []plan.Probe{pr, other}, notReady: false}, // nobody says
	} {
		if got := o.NotReady(netip.MustParseAddr(tc.ip), tc.probes); got != tc.notReady {
			t.Errorf("NotReady(%s, %v) = %v, want %v", tc.ip, tc.probes, got, tc.notReady)
		}
	}
	var failing []string
	for a := range o.Failing {
		failing = append(failing, a.String())
	}
	slices.Sort(failing)
	if want := []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}; !slices.Equal(failing, want) {
		t.Errorf("Failing %v, want %v", failing, want)
	}
	if ps.failingAddrs[netip.MustParseAddr("10.0.0.2")] {
		t.Error("the view's addresses leaked into the node's own failing set")
	}
	if ps.setFleet(ps.fleet) {
		t.Error("the same view again is taken as a change")
	}
}

// TestGossipWatcher runs a watcher with gossip against a fake member: it
// starts the member with the tree's nodes and checks, probes only what
// the member's view assigns it, takes endpoints out (and back) on a view
// change alone, fails open across its own probes and the view, and tells
// the member its failing checks and revision; it leaves on shutdown.
func TestGossipWatcher(t *testing.T) {
	tree := basicTree(t)
	writeFile(t, filepath.Join(tree, "probed", "services.yaml"), probedTree)
	recs := newRecords(t)
	r, f := newProbed(t, tree, Options{Dataplane: DataplaneNone, Gossip: &GossipOptions{Listen: "127.0.0.1:7946", Insecure: true}}, recs)
	m := &fakeMember{view: &fleet.View{Out: map[string]fleet.Why{}}}
	r.newMember = func(cfg fleet.Config, nodes []string, checks []fleet.Check) (member, error) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.cfg, m.nodes, m.checks = cfg, nodes, checks
		return m, nil
	}
	t.Cleanup(func() {
		if !m.state().left {
			t.Error("the watcher stopped without leaving the fleet")
		}
	})
	runSynced(t, r.Watcher, deadline)
	r.idle(t)

	api1, api2 := tcpCheck("10.244.1.111", 8080, 1, 2), tcpCheck("10.244.2.11", 8080, 1, 2)
	db0 := tcpCheck("10.244.1.120", 5432, 10, 3)
	ms := m.state()
	if ms.cfg.Name != "node-1" || !slices.Equal(ms.nodes, []string{"node-1", "node-2"}) || len(ms.checks) != 6 {
		t.Fatalf("member started as %s with nodes %v and %d checks, want node-1, [node-1 node-2], 6", ms.cfg.Name, ms.nodes, len(ms.checks))
	}
	for _, c := range ms.checks {
		want := map[string]string{"10.244.1": "node-1", "10.244.2": "node-2", "10.50.0.": ""}[c.Key[:8]]
		if c.Node != want {
			t.Errorf("check %q on node %q, want %q", c.Key, c.Node, want)
		}
	}
	targets := func() []string {
		f.mu.Lock()
		defer f.mu.Unlock()
		var out []string
		for _, tg := range f.targets {
			out = append(out, tg.Key())
		}
		slices.Sort(out)
		return out
	}
	if got := targets(); len(got) != 0 {
		t.Errorf("probing %q before the fleet assigned anything", got)
	}

	// The fleet assigns node-1's own checks: probed, and only they.
	m.setView(&fleet.View{Probe: []string{api1, db0}})
	waitFor(t, "the prober probes what the fleet assigns", func() (bool, string) {
		got, want := targets(), []string{api1, db0}
		slices.Sort(want)
		return slices.Equal(got, want), strings.Join(got, " | ")
	})

	// api-2 fails on node-2: out here, by a view change alone.
	m.setView(&fleet.View{Probe: []string{api1, db0}, Out: map[string]fleet.Why{api2: {Reason: fleet.ReasonProbe, By: []string{"node-2"}}}})
	st := r.statusUntil(t, "api-2 out for the fleet", func(s *Status) bool { return s.Fleet != nil && len(s.Fleet.Out) == 1 })
	want := FleetOut{Service: "probed/api", Endpoint: "10.244.2.11:8080", Probe: "tcpSocket :8080", Reason: fleet.ReasonProbe, By: []string{"node-2"}}
	if o := st.Fleet.Out[0]; o.Service != want.Service || o.Endpoint != want.Endpoint || o.Probe != want.Probe || o.Reason != want.Reason || !slices.Equal(o.By, want.By) {
		t.Errorf("fleet out %+v, want %+v", o, want)
	}
	if st.LastSync.Reason != "probe" || len(st.Fleet.Members) != 2 || st.Fleet.Members[1].State != fleet.StateDead {
		t.Errorf("last sync %+v, members %+v", st.LastSync, st.Fleet.Members)
	}
	if p := r.probedPlan(t); clusterOf(p, "probed/api") != "10.244.1.111:8080" {
		t.Errorf("api's endpoints with api-2 out for the fleet: %s", clusterOf(p, "probed/api"))
	}
	if ms := m.state(); ms.revision == "" || ms.revision != st.Revision.ID || ms.probing != 2 {
		t.Errorf("member told revision %q and %d checks, want %q and 2", ms.revision, ms.probing, st.Revision.ID)
	}

	// api-1 fails here too: the fleet hears it, and api fails open.
	f.set("connection refused", "10.244.1.111")
	r.statusUntil(t, "api fails open", func(s *Status) bool { return slices.Equal(s.Probes.FailOpen, []string{"probed/api"}) })
	if got := m.state().local; !slices.Equal(got, []string{api1}) {
		t.Errorf("member told the failing checks %q, want api-1's", got)
	}
	if p := r.probedPlan(t); clusterOf(p, "probed/api") != "10.244.1.111:8080,10.244.2.11:8080" {
		t.Errorf("api failing open: %s", clusterOf(p, "probed/api"))
	}

	// Back: api-1 passes, and node-2's api-2 too.
	f.set("", "10.244.1.111")
	m.setView(&fleet.View{Probe: []string{api1, db0}})
	r.statusUntil(t, "all back", func(s *Status) bool {
		return len(s.Fleet.Out) == 0 && len(s.Probes.Out) == 0 && len(s.Probes.FailOpen) == 0
	})
	if p := r.probedPlan(t); clusterOf(p, "probed/api") != "10.244.1.111:8080,10.244.2.11:8080" {
		t.Errorf("api's endpoints after recovery: %s", clusterOf(p, "probed/api"))
	}
	waitFor(t, "the member hears nothing fails", func() (bool, string) {
		got := m.state().local
		return len(got) == 0, strings.Join(got, " | ")
	})
	for msg, want := range map[string]int{
		"endpoint out: its readiness probe fails on node-2":    1,
		"endpoint back in: the fleet no longer says it is out": 1,
	} {
		n := 0
		for _, l := range recs.all() {
			if l.msg == msg {
				n++
			}
		}
		if n != want {
			t.Errorf("%d log lines %q, want %d", n, msg, want)
		}
	}
}

// TestGossipOptionsChecked: New refuses gossip it cannot run.
func TestGossipOptionsChecked(t *testing.T) {
	for _, tc := range []struct {
		name   string
		probes bool
		g      GossipOptions
		want   string
	}{
		{name: "no key", probes: true, g: GossipOptions{Listen: "192.0.2.1:7946"}, want: "gossip without a key"},
		{name: "no probes", probes: false, g: GossipOptions{Listen: "192.0.2.1:7946", Insecure: true}, want: "needs the probes"},
		{name: "listen", probes: true, g: GossipOptions{Listen: "node-1", Insecure: true}, want: "want IP:PORT"},
		{name: "join", probes: true, g: GossipOptions{Listen: "192.0.2.1:7946", Join: []string{"192.0.2.2"}, Insecure: true}, want: "join address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(Options{Tree: t.TempDir(), Node: "node-1", Probes: tc.probes, Gossip: &tc.g})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestFleetStatusAlive: only the members alive count; dead and left ones
// are known but not alive.
func TestFleetStatusAlive(t *testing.T) {
	for _, tc := range []struct {
		name   string
		states []fleet.MemberState
		want   int
	}{
		{name: "no member"},
		{name: "all alive", states: []fleet.MemberState{fleet.StateAlive, fleet.StateAlive}, want: 2},
		{name: "dead and left", states: []fleet.MemberState{fleet.StateAlive, fleet.StateDead, fleet.StateLeft, fleet.StateAlive}, want: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := &FleetStatus{}
			for i, s := range tc.states {
				fs.Members = append(fs.Members, fleet.Member{Name: "node-" + string(rune('a'+i)), State: s})
			}
			if got := fs.Alive(); got != tc.want {
				t.Errorf("Alive = %d, want %d", got, tc.want)
			}
		})
	}
}
