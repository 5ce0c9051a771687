package e2e

import (
	"flag"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"netspec.dev/netspec/daemon"
)

const (
	// fleetSize is the number of nodes of every test's fleet.
	fleetSize = 8
	// quietWindow is how long a test watches for a change that must not
	// come, once the event that would cause it happened: gossip reaches
	// every member well within a second, and a probe period is 1 s.
	quietWindow = 3 * time.Second
)

// The scenarios run one after another, but for the cut-off node's, which
// spends a minute or more waiting for memberlist to declare the others
// dead while its fleet is idle, and runs beside them: every scenario is
// parallel (t.Parallel), the others take oneByOne for their whole run.
// Each fleet lives in namespaces of its own: the two fleets use the same
// addresses and device names, which never meet, as no two fleets share a
// namespace, and testnet gives every namespace a name of its own.
var oneByOne sync.Mutex

// scenario starts a test as one of the scenarios that run one by one:
// parallel to the cut-off node's, after the one before it.
func scenario(t *testing.T) {
	t.Helper()
	netspecBin(t)
	t.Parallel()
	oneByOne.Lock()
	t.Cleanup(oneByOne.Unlock)
}

// atLeastParallel raises go test's -parallel to n unless the command line
// set it: with fewer slots than the package has tests, scenarios waiting
// for oneByOne could hold every slot and keep the cut-off scenario from
// running beside them. The fleets' load is bounded by oneByOne, not by
// -parallel.
func atLeastParallel(n int) {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if p := flag.Lookup("test.parallel"); !set && p != nil {
		if cur, err := strconv.Atoi(p.Value.String()); err == nil && cur < n {
			p.Value.Set(strconv.Itoa(n))
		}
	}
}

// TestPodServerStops (scenario a): when a pod's server stops, no new
// connection from any node reaches it within failureThreshold ×
// periodSeconds + 2 s, for an httpGet and a tcpSocket readiness probe,
// and it stays so. With gossip, only the pod's own node probes it and
// the others learn it from gossip; without, every node probes it.
func TestPodServerStops(t *testing.T) {
	scenario(t)
	for _, tc := range []struct {
		name   string
		gossip bool
	}{
		{name: "alone", gossip: false},
		{name: "gossip", gossip: true},
	} {
		t.Run(tc.name, func(t *testing.T) { podServerStops(t, tc.gossip) })
	}
}

// podServerStops is TestPodServerStops with gossip or not.
func podServerStops(t *testing.T, gossip bool) {
	f := runningFleet(t, gossip)

	// The probe load: alone, every node probes every pod it forwards
	// to (all of them); in a fleet, each node probes its own pods only.
	all := len(f.podsOf(apps))
	want := func(n *node) int {
		if gossip {
			return len(n.pods)
		}
		return all
	}
	f.waitAgents("each node runs its share of the checks", f.nodes, deadline, func(n *node) (bool, string) {
		st, err := n.agent.status()
		if err != nil || st.Probes == nil {
			return false, fmt.Sprint(err)
		}
		return st.Probes.Checks == want(n), fmt.Sprintf("%d checks, want %d", st.Probes.Checks, want(n))
	})
	t.Logf("probe load: %d nodes, %d pods: %d checks a period fleet-wide", len(f.nodes), all, len(f.nodes)*want(f.node(1)))

	gone := []*pod{f.node(3).pods["echo"], f.node(5).pods["web"]}
	t0 := time.Now()
	for _, p := range gone {
		p.srv.Stop()
	}
	bound := time.Duration(probeFailure*probePeriod)*time.Second + 2*time.Second
	rest := f.podsOf(apps, gone...)
	f.waitRounds("no connection reaches echo-3 and web-5, whose servers stopped", f.nodes, apps, t0, bound,
		func(c map[string]int) bool { return every(c, rest) })
	f.checkRounds("echo-3 and web-5 stay out", f.nodes, apps, func(c map[string]int) bool { return every(c, rest) })
}

// runningFleet builds a fleet of fleetSize nodes, starts their agents
// (with gossip or not) and waits until every node reaches every pod.
func runningFleet(t *testing.T, gossip bool) *fleet {
	t.Helper()
	f := newFleet(t, fleetSize)
	f.startAgents(gossip)
	f.waitEveryPod("agents started")
	return f
}

// waitEveryPod waits until a round from every node reaches every pod of
// every Service, and no other answer.
func (f *fleet) waitEveryPod(when string) {
	f.t.Helper()
	all := f.podsOf(apps)
	f.waitRounds(when+": every node reaches every pod", f.nodes, apps, time.Now(), deadline,
		func(c map[string]int) bool { return every(c, all) })
}

// waitDead waits until every node of nodes lists dead as a dead member
// and does not fail static.
func (f *fleet) waitDead(nodes []*node, dead *node) {
	f.t.Helper()
	f.waitAgents(dead.name+" dead, and no fail static, on "+fmt.Sprint(len(nodes))+" nodes", nodes, deadline, func(n *node) (bool, string) {
		s, err := n.agent.fleet()
		if err != nil {
			return false, err.Error()
		}
		m := s.member(dead.name)
		return m != nil && m.State == "dead" && !s.FailStatic, fmt.Sprintf("%s %+v, failStatic %v", dead.name, m, s.FailStatic)
	})
}

// nodeDeathBound is the target for scenario (b): a dead node's
// pods are out of every other node within it.
const nodeDeathBound = 10 * time.Second

// TestNodeDies (scenario b): after kill -9 of a node's agent and its link
// down, no connection from any other node goes to its pods within
// nodeDeathBound (only the dead node probed them: the others act on
// memberlist declaring it dead); every other node then lists it dead and
// none fails static. Back (link up, agent started), it is alive on every
// node, and its pods are in again.
func TestNodeDies(t *testing.T) {
	scenario(t)
	f := runningFleet(t, true)

	dead := f.node(4)
	others := f.others(dead)
	t0 := time.Now()
	dead.agent.kill()
	f.setLink(dead, false)
	rest := f.podsOf(apps, dead.pods["web"], dead.pods["echo"])
	f.waitRounds("no connection goes to node-4's pods", others, apps, t0, nodeDeathBound,
		func(c map[string]int) bool { return every(c, rest) })
	f.waitDead(others, dead)
	f.checkRounds("node-4's pods stay out", others, apps, func(c map[string]int) bool { return every(c, rest) })

	f.setLink(dead, true)
	dead.agent.start()
	f.waitMembers(f.nodes, 2*deadline)
	f.waitEveryPod("node-4 back")
}

// TestCutOffNodeFailsStatic (scenario c): a node cut off the lan (its
// agent running) suspects the other nodes, then sees them dead: it fails
// static once more than half of the tree's are dead or suspect, and
// keeps every other node's pods in its data plane, then and once every
// other node is dead, so that connections from it still go to them (and
// time out, the link being down) rather than all to its own pod. The
// other nodes, a majority, take the cut-off node's pods out and do not
// fail static. With the link back, the fleet is whole again: every
// member alive on every node, no fail static, every pod in.
func TestCutOffNodeFailsStatic(t *testing.T) {
	netspecBin(t)
	t.Parallel() // beside the scenarios that run one by one
	f := runningFleet(t, true)

	cut := f.node(6)
	others := f.others(cut)
	t0 := time.Now()
	f.setLink(cut, false)

	// The majority: node-6's pods out, no fail static.
	rest := f.podsOf(apps, cut.pods["web"], cut.pods["echo"])
	f.waitRounds("no connection from the majority goes to node-6's pods", others, apps, t0, deadline,
		func(c map[string]int) bool { return every(c, rest) })
	f.waitDead(others, cut)

	// The cut-off node: it fails static once it suspects or saw dead
	// five of its seven peers (each failed probe of its own makes one
	// suspect), every pod kept.
	var static *fleetStatus
	waitFor(t, "node-6 fails static", 3*deadline, func() (bool, string) {
		s, err := cut.agent.fleet()
		if err != nil {
			return false, err.Error()
		}
		static = s
		return s.FailStatic, fmt.Sprintf("%+v", *s)
	})
	t.Logf("node-6 fails static %s after the cut, with %d dead and %d suspect of %d", time.Since(t0).Round(time.Second),
		static.Dead, static.Suspect, static.Ever)
	f.checkKeepsPods(cut)
	// Then every other node dead: it still fails static and keeps every
	// pod. It takes longer than the majority: nobody confirms its
	// suspicions, and memberlist's Lifeguard slows the probes of a node
	// that misses acks (its probe interval grows up to ninefold), so that
	// it reaches the last of its seven peers after up to a minute, then
	// waits out the suspicion.
	waitFor(t, "node-6 sees every other node dead and fails static", 3*deadline, func() (bool, string) {
		s, err := cut.agent.fleet()
		if err != nil {
			return false, err.Error()
		}
		for _, o := range others {
			if m := s.member(o.name); m == nil || m.State != "dead" {
				return false, fmt.Sprintf("%s %+v, failStatic %v", o.name, m, s.FailStatic)
			}
		}
		return s.FailStatic, fmt.Sprintf("%+v", *s)
	})
	t.Logf("node-6 sees every other node dead %s after the cut", time.Since(t0).Round(time.Second))
	f.checkKeepsPods(cut)
	// Connections from it go to its own web-6 and to the pods it cannot
	// reach (timeout, or no route to host once ARP gave up), not all to
	// web-6 as they would with the others' pods out.
	c := round(cut.ns, []app{apps[0]})
	if own := c["web-6"]; own == 0 || own == perRound {
		t.Errorf("connections from node-6 to web, failing static: %s; want some to its own web-6, the rest to the pods it cannot reach", showCounts(c))
	}

	f.setLink(cut, true)
	f.waitMembers(f.nodes, 2*deadline)
	f.waitAgents("no fail static once the link is back", f.nodes, deadline, func(n *node) (bool, string) {
		s, err := n.agent.fleet()
		if err != nil {
			return false, err.Error()
		}
		return !s.FailStatic, "fails static"
	})
	f.waitEveryPod("node-6 back")
}

// checkKeepsPods checks that n's ruleset has every pod of the fleet.
func (f *fleet) checkKeepsPods(n *node) {
	f.t.Helper()
	ruleset := n.ns.MustRun("nft", "list", "ruleset")
	for _, o := range f.nodes {
		for _, p := range o.pods {
			if !regexp.MustCompile(`\b` + regexp.QuoteMeta(p.ip) + `\b`).MatchString(ruleset) {
				f.t.Errorf("%s fails static, but its ruleset lacks %s (%s):\n%s", n.name, p.ip, p.name, ruleset)
			}
		}
	}
}

// TestIntrudersChangeNothing (scenario d): a node no Node of the tree
// names, with the fleet's key, and a node claiming node-3's name with
// another key, both joining through node-1 and both seeing the pods they
// would own fail (they have no route to them), change nobody's data
// plane: every node still reaches every pod, and lists node-3 alive at
// its own address and node-9 not alive.
func TestIntrudersChangeNothing(t *testing.T) {
	scenario(t)
	f := runningFleet(t, true)
	all := f.podsOf(apps)

	// node-9 is in its own tree, where web-3 runs on it.
	const strangerAddr, impostorAddr = "192.0.2.109", "192.0.2.103"
	nodes, pods := f.fleetTree()
	nodes = append(nodes, treeNode{name: "node-9", addr: strangerAddr, podCIDR: nodePodCIDR(9)})
	for i := range pods {
		if pods[i].name == "web-3" {
			pods[i].nodeName = "node-9"
		}
	}
	strangerNS, _ := f.addLanHost("node-9", strangerAddr)
	stranger := newAgent(t, strangerNS, "node-9", writeTree(t, nodes, pods), gossipFlags(strangerAddr, []string{f.node(1).addr}, f.key))
	impostorNS, _ := f.addLanHost("impostor", impostorAddr)
	impostor := newAgent(t, impostorNS, "node-3", f.tree, gossipFlags(impostorAddr, []string{f.node(1).addr}, writeKey(t)))
	for _, a := range []*agent{stranger, impostor} {
		a.start()
		waitFor(t, "the intruder "+a.ns.Role+" applies its tree", deadline, a.synced)
		waitFor(t, "the intruder "+a.ns.Role+" sees web-3 fail", deadline, func() (bool, string) {
			st, err := a.status()
			if err != nil {
				return false, err.Error()
			}
			return outOn(st, "fleet/web", "10.244.3.10:8080"), fmt.Sprintf("probes %+v", st.Probes)
		})
	}
	// Each intruder reached the fleet: an agent logged it.
	for _, addr := range []string{strangerAddr, impostorAddr} {
		waitFor(t, "an agent of the fleet logs "+addr, deadline, func() (bool, string) {
			for _, n := range f.nodes {
				if line := n.agent.log.lineWith(addr); line != "" {
					t.Logf("%s logged: %s", n.name, line)
					return true, ""
				}
			}
			return false, "no log line names it"
		})
	}

	for end := time.Now().Add(quietWindow); time.Now().Before(end) && !t.Failed(); {
		f.checkRounds("with the intruders running, every node reaches every pod", f.nodes, apps,
			func(c map[string]int) bool { return every(c, all) })
	}
	for _, n := range f.nodes {
		s, err := n.agent.fleet()
		if err != nil {
			t.Fatal(err)
		}
		if m := s.member("node-3"); m == nil || m.State != "alive" || !strings.HasPrefix(m.Address, f.node(3).addr+":") {
			t.Errorf("%s lists node-3 as %+v; want alive at %s", n.name, m, f.node(3).addr)
		}
		if m := s.member("node-9"); m != nil && m.State == "alive" {
			t.Errorf("%s lists node-9, no Node of its tree, as %+v", n.name, m)
		}
	}
}

// outOn tells whether the status lists endpoint of service as out (or
// kept for a failing open) for a failing probe.
func outOn(st *daemon.Status, service, endpoint string) bool {
	if st.Probes == nil {
		return false
	}
	for _, o := range st.Probes.Out {
		if o.Service == service && o.Endpoint == endpoint {
			return true
		}
	}
	return false
}

// TestRestartedAgentGetsView (scenario e): web-2 and web-7 fail their
// probe only from their own nodes (only those probe them, and gossip
// tells the others): every node takes them out. An agent killed, its
// rules removed (netspec cleanup) and started again rejoins and receives
// that view: its data plane takes them out too, though it never probes
// them.
func TestRestartedAgentGetsView(t *testing.T) {
	scenario(t)
	f := runningFleet(t, true)
	web := []app{apps[0]}

	sick := []*pod{f.node(2).pods["web"], f.node(7).pods["web"]}
	for _, p := range sick {
		p.srv.SickFor(netip.MustParsePrefix(nodePodCIDR(p.node.n)))
	}
	rest := f.podsOf(web, sick...)
	f.waitRounds("every node takes out web-2 and web-7, failing for their own nodes", f.nodes, web, time.Now(), deadline,
		func(c map[string]int) bool { return every(c, rest) })

	n := f.node(5)
	n.agent.kill()
	n.ns.MustRun(netspecBin(t), "cleanup", "--state-dir", n.agent.state)
	if out := n.ns.MustRun("nft", "list", "ruleset"); strings.Contains(out, "10.244.") {
		t.Fatalf("after netspec cleanup, node-5's ruleset still holds pods:\n%s", out)
	}
	t0 := time.Now()
	n.agent.start()
	waitFor(t, "node-5's agent applies the tree again", deadline, n.agent.synced)
	f.waitRounds("node-5, restarted, takes out web-2 and web-7", []*node{n}, web, t0, deadline,
		func(c map[string]int) bool { return every(c, rest) })
	f.waitMembers(f.nodes, deadline)
}

// TestAgentLeaves: an agent stopped on purpose (SIGTERM: a restart, a
// drain) leaves the fleet rather than dies: every other node lists it
// left, and its pods, still answering, stay in everywhere as the tree
// says, where a dead node's would go out.
func TestAgentLeaves(t *testing.T) {
	scenario(t)
	f := runningFleet(t, true)

	gone := f.node(4)
	others := f.others(gone)
	gone.agent.stop()
	f.waitAgents("node-4 left on every other node", others, deadline, func(n *node) (bool, string) {
		s, err := n.agent.fleet()
		if err != nil {
			return false, err.Error()
		}
		m := s.member(gone.name)
		return m != nil && m.State == "left", fmt.Sprintf("node-4 %+v", m)
	})
	all := f.podsOf(apps)
	for end := time.Now().Add(quietWindow); time.Now().Before(end) && !t.Failed(); {
		f.checkRounds("node-4 left: every other node reaches every pod", others, apps,
			func(c map[string]int) bool { return every(c, all) })
	}
}
