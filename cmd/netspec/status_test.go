package main

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"time"

	"netspec.dev/netspec/daemon"
	"netspec.dev/netspec/daemon/status"
	"netspec.dev/netspec/plan"
)

// TestStatusHeldOut: without a daemon, status says which endpoints the
// kernel still holds out for failing probes: the daemon's record of them,
// kept to those the applied plan has not ready; without a record, the
// plan's probed endpoints that are not ready, saying it cannot tell why.
func TestStatusHeldOut(t *testing.T) {
	pr := plan.Probe{Action: plan.ProbeHTTPGet, Scheme: "HTTP", Port: 8080, Path: "/ready"}
	ep := func(ip string, ready bool) plan.Endpoint { return probedEndpoint(ip, ready, pr) }
	p := &plan.Plan{Node: plan.Node{Name: "node-1"}, Services: []plan.Service{{Namespace: "shop", Name: "cart",
		Ports: []plan.Port{{Port: 80, Endpoints: []plan.Endpoint{ep("10.244.1.11", false), ep("10.244.1.12", true), ep("10.244.1.13", false)}, Cluster: []int{1}}}}}}
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rec := &daemon.ProbeRecord{Node: "node-1", Written: since, Out: []daemon.ProbeOut{
		{Service: "shop/cart", Endpoint: "10.244.1.11:8080", Probe: "httpGet http://10.244.1.11:8080/ready", Since: since, LastError: "HTTP probe failed with statuscode: 503"},
		// Ready in the plan: an apply put the tree's readiness back since.
		{Service: "shop/cart", Endpoint: "10.244.1.12:8080", Probe: "httpGet http://10.244.1.12:8080/ready", Since: since, LastError: "timeout"},
	}, FailOpen: []string{}}
	now := since.Add(time.Minute)

	var b bytes.Buffer
	writeRecordView(&b, "state", &status.Record{Present: true, Node: "node-1", Services: 1, Endpoints: 3, Recorded: since, Probes: daemon.HeldOut(p, rec)}, now)
	got := b.String()
	for _, want := range []string{
		"readiness probes: the kernel holds the probe view the daemon last applied (recorded 2026-01-02T03:04:05Z (1m0s ago)), with 1 endpoint held out for failing probes, though no daemon probes them now:\n",
		"  shop/cart 10.244.1.11:8080: httpGet http://10.244.1.11:8080/ready, failing since 2026-01-02T03:04:05Z (1m0s ago): HTTP probe failed with statuscode: 503\n",
		"to put the tree's readiness back: netspec apply TREE --node node-1, or start netspec watch (it probes again)\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("status lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "10.244.1.12") || strings.Contains(got, "10.244.1.13") {
		t.Errorf("status names an endpoint the record does not hold out now:\n%s", got)
	}

	// No record: what the plan tells, and no more.
	b.Reset()
	writeRecordView(&b, "state", &status.Record{Present: true, Node: "node-1", Services: 1, Endpoints: 3, Recorded: since, Probes: daemon.HeldOut(p, nil)}, now)
	got = b.String()
	for _, want := range []string{
		"readiness probes: no record of the daemon's probes; 2 endpoints of the applied plan not ready although probed (out for a failing probe, or not Ready in the tree: the record does not tell which):\n",
		"  shop/cart 10.244.1.11:8080: httpGet http://10.244.1.11:8080/ready\n",
		"  shop/cart 10.244.1.13:8080: httpGet http://10.244.1.13:8080/ready\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("status lacks %q:\n%s", want, got)
		}
	}
}

// TestStatusRemovalAndGitLock: status says what removals wait for their
// grace and which git lock reloads wait for, and says nothing of either
// when there is none.
func TestStatusRemovalAndGitLock(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	base := daemon.Status{Node: "node-1", Tree: "/srv/tree", Dataplane: "none", StateDir: "state", PID: 7, Started: now.Add(-time.Hour)}
	tests := []struct {
		name  string
		set   func(*daemon.Status)
		want  []string
		wantN []string // must not appear
	}{{
		name:  "neither",
		set:   func(*daemon.Status) {},
		wantN: []string{"removals pending", "git lock"},
	}, {
		name: "pending and held",
		set: func(s *daemon.Status) {
			s.PendingRemoval = &daemon.PendingRemoval{Objects: 2, Since: now.Add(-500 * time.Millisecond), Due: now.Add(1500 * time.Millisecond)}
			s.GitLock = &daemon.GitLockStatus{Path: "/srv/tree/.git/index.lock", Since: now.Add(-2 * time.Second)}
		},
		want: []string{
			"removals pending: 2 objects left the tree and stay applied, since 2026-01-02T03:04:04Z (500ms ago); the next goes in 1.5s\n",
			"git lock: /srv/tree/.git/index.lock since 2026-01-02T03:04:03Z (2s ago): reloads wait for it (a checkout, merge or pull under way)\n",
		},
	}, {
		name: "due past and stale",
		set: func(s *daemon.Status) {
			s.PendingRemoval = &daemon.PendingRemoval{Objects: 1, Since: now.Add(-3 * time.Second), Due: now.Add(-time.Second)}
			s.GitLock = &daemon.GitLockStatus{Path: "/srv/tree/.git/index.lock", Since: now.Add(-2 * time.Minute), Stale: true}
		},
		want: []string{
			"removals pending: 1 object left the tree and stay applied, since 2026-01-02T03:04:02Z (3s ago); the next goes now (or once the tree is valid again)\n",
			"git lock: /srv/tree/.git/index.lock since 2026-01-02T03:02:05Z (2m0s ago): STALE (older than a minute; left by a git that died?), no longer waited for: remove it once no git runs\n",
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := base
			tt.set(&st)
			var b bytes.Buffer
			writeDaemonStatus(&b, "state/netspec.sock", &st, now)
			checkLines(t, b.String(), tt.want, tt.wantN)
		})
	}
}

// probedEndpoint is a port's endpoint at ip with readiness probes.
func probedEndpoint(ip string, ready bool, probes ...plan.Probe) plan.Endpoint {
	return plan.Endpoint{IP: netip.MustParseAddr(ip), Port: 8080, Ready: ready, Serving: ready, Probes: probes}
}

// TestStatusFirstSync: while the daemon's first sync is under way its
// health check node ports and probes are not set up, which says nothing
// of its flags: status says the first sync is under way, not that they
// are off. After a sync, nil means off.
func TestStatusFirstSync(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	synced := &daemon.SyncStatus{Reason: "start", Kind: "full", Ended: now, Result: daemon.ResultApplied}
	for _, tc := range []struct {
		name  string
		st    daemon.Status
		want  []string
		wantN []string // must not appear
	}{{
		name: "first sync, nftables",
		st:   daemon.Status{Dataplane: "nftables"},
		want: []string{
			"health check node ports: not known yet (the first sync is under way)\n",
			"readiness probes: not known yet (the first sync is under way)\n",
		},
		wantN: []string{"not served", "--probes=false", "none in the plan"},
	}, {
		name: "first sync, probing",
		st:   daemon.Status{Dataplane: "nftables", Probes: &daemon.ProbeStatus{Out: []daemon.ProbeOut{}, FailOpen: []string{}}},
		want: []string{
			"readiness probes: not known yet (the first sync is under way)\n",
		},
		wantN: []string{"none in the plan"},
	}, {
		name: "synced, off",
		st:   daemon.Status{Dataplane: "none", LastSync: synced},
		want: []string{
			"health check node ports: not served (dataplane none)\n",
			"readiness probes: off (--probes=false): readiness is the tree's\n",
		},
		wantN: []string{"under way"},
	}, {
		name: "synced, on",
		st: daemon.Status{Dataplane: "nftables", LastSync: synced, HealthChecks: []daemon.HealthCheckStatus{},
			Probes: &daemon.ProbeStatus{Out: []daemon.ProbeOut{}, FailOpen: []string{}}},
		want: []string{
			"health check node ports: none\n",
			"readiness probes: none in the plan\n",
		},
		wantN: []string{"under way"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			tc.st.Node, tc.st.Tree, tc.st.StateDir, tc.st.Started = "node-1", "/srv/tree", "state", now.Add(-time.Second)
			var b bytes.Buffer
			writeDaemonStatus(&b, "state/netspec.sock", &tc.st, now)
			checkLines(t, b.String(), tc.want, tc.wantN)
		})
	}
}

// checkLines fails t unless status output got has every line of want and
// none of the strings of wantN.
func checkLines(t *testing.T, got string, want, wantN []string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("status lacks %q:\n%s", w, got)
		}
	}
	for _, w := range wantN {
		if strings.Contains(got, w) {
			t.Errorf("status has %q:\n%s", w, got)
		}
	}
}
