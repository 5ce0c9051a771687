package e2e

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"netspec.dev/netspec/internal/testnet"
)

const (
	// deadline bounds every wait that has no bound of its own: a failure
	// bound for a loaded machine, not a guess at how long things take.
	deadline = 30 * time.Second
	// poll is the interval of polling for a condition.
	poll = 50 * time.Millisecond
	// dialTimeout bounds a connection's handshake and its answer; a
	// connection DNATed to a pod that cannot be reached times out. It
	// outlasts one retransmission of the SYN (after 1 s), which conntrack
	// drops now and then when a source port is reused.
	dialTimeout = 1500 * time.Millisecond
	// perRound is how many connections a round opens to each Service
	// from one node. A pod of eight that still receives traffic is
	// missed by a round with probability (7/8)^100 < 2e-6.
	perRound = 100
	// workers is how many connections of a round are open at once: a
	// round with a tenth of its connections timing out lasts about a
	// second.
	workers = 25
)

// startAgents writes the fleet's tree (f.tree), starts the agent of
// every node and waits until each has applied it; with gossip, the agents
// gossip with a shared key (f.key), joining through node-1 and node-2,
// and startAgents waits until every node knows every other as alive.
func (f *fleet) startAgents(gossip bool) {
	f.t.Helper()
	nodes, pods := f.fleetTree()
	f.tree = writeTree(f.t, nodes, pods)
	if gossip {
		f.key = writeKey(f.t)
	}
	for _, n := range f.nodes {
		var g []string
		if gossip {
			g = gossipFlags(n.addr, f.joinFor(n), f.key)
		}
		n.agent = newAgent(f.t, n.ns, n.name, f.tree, g)
		n.agent.start()
	}
	f.waitAgents("every agent applied the tree", f.nodes, deadline, func(n *node) (bool, string) { return n.agent.synced() })
	if gossip {
		f.waitMembers(f.nodes, deadline)
	}
}

// joinFor is where n joins: node-1 and node-2 but itself.
func (f *fleet) joinFor(n *node) []string {
	var j []string
	for _, o := range f.nodes[:3] {
		if o != n && len(j) < 2 {
			j = append(j, o.addr)
		}
	}
	return j
}

// waitMembers waits until each node of nodes lists every node of nodes
// as an alive member at its lan address.
func (f *fleet) waitMembers(nodes []*node, limit time.Duration) {
	f.t.Helper()
	f.waitAgents("every node knows every other alive", nodes, limit, func(n *node) (bool, string) {
		s, err := n.agent.fleet()
		if err != nil {
			return false, err.Error()
		}
		for _, o := range nodes {
			m := s.member(o.name)
			if m == nil || m.State != "alive" || !strings.HasPrefix(m.Address, o.addr) {
				return false, fmt.Sprintf("%s: %+v", o.name, m)
			}
		}
		return true, ""
	})
}

// waitFor polls cond until it holds; it fails the test with cond's last
// detail when limit passes first.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() (bool, string)) {
	t.Helper()
	end := time.Now().Add(limit)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%s: not within %s: %s", what, limit, detail)
		}
		time.Sleep(poll)
	}
}

// waitAgents polls cond for each node of nodes until it holds for all of
// them (each node is no longer asked once it held); it fails the test
// with the details of those that did not when limit passes first.
func (f *fleet) waitAgents(what string, nodes []*node, limit time.Duration, cond func(*node) (bool, string)) {
	f.t.Helper()
	left := slices.Clone(nodes)
	details := map[string]string{}
	waitFor(f.t, what, limit, func() (bool, string) {
		left = slices.DeleteFunc(left, func(n *node) bool {
			ok, d := cond(n)
			details[n.name] = d
			return ok
		})
		var b strings.Builder
		for _, n := range left {
			fmt.Fprintf(&b, "\n  %s: %s", n.name, details[n.name])
		}
		return len(left) == 0, b.String()
	})
}

// dial connects from ns to target over TCP with a new connection and
// returns the name of the pod that answered, or how the connection
// failed: "refused", "timeout" or "error: …".
func dial(ns *testnet.NS, target string) string {
	a := ns.DialTCP(target, dialTimeout)
	if strings.HasPrefix(a, "error:") {
		return a
	}
	if name, _, ok := strings.Cut(a, " "); ok {
		return name
	}
	return a
}

// round opens perRound connections from ns to each Service of svcs,
// workers at a time, and counts the answers by pod name or failure.
func round(ns *testnet.NS, svcs []app) map[string]int {
	jobs := make(chan string)
	counts := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for target := range jobs {
				a := dial(ns, target)
				mu.Lock()
				counts[a]++
				mu.Unlock()
			}
		})
	}
	for _, s := range svcs {
		for range perRound {
			jobs <- s.target()
		}
	}
	close(jobs)
	wg.Wait()
	return counts
}

// podsOf returns the names of the pods of svcs in the fleet but those in
// but.
func (f *fleet) podsOf(svcs []app, but ...*pod) map[string]bool {
	pods := map[string]bool{}
	for _, n := range f.nodes {
		for _, s := range svcs {
			if p := n.pods[s.name]; !slices.Contains(but, p) {
				pods[p.name] = true
			}
		}
	}
	return pods
}

// only tells whether every connection counted was answered by a pod of
// want.
func only(counts map[string]int, want map[string]bool) bool {
	for a := range counts {
		if !want[a] {
			return false
		}
	}
	return true
}

// every tells whether every connection counted was answered by a pod of
// want, and every pod of want answered one.
func every(counts map[string]int, want map[string]bool) bool {
	if !only(counts, want) {
		return false
	}
	for p := range want {
		if counts[p] == 0 {
			return false
		}
	}
	return true
}

// showCounts prints counts sorted by answer.
func showCounts(counts map[string]int) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		fmt.Fprintf(&b, " %s=%d", k, counts[k])
	}
	return strings.TrimSpace(b.String())
}

// waitRounds runs rounds of connections to svcs from every node of nodes
// at once, each node until a round of its own satisfies cond, and returns
// when each node's first such round began, since t0. A round must begin
// before t0+bound to count: the test fails, with each node's last round,
// when a node has none by then.
func (f *fleet) waitRounds(what string, nodes []*node, svcs []app, t0 time.Time, bound time.Duration, cond func(map[string]int) bool) map[string]time.Duration {
	f.t.Helper()
	end := t0.Add(bound)
	var mu sync.Mutex
	took := map[string]time.Duration{}
	last := map[string]string{}
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() {
			for {
				began := time.Now()
				if began.After(end) {
					return
				}
				counts := round(n.ns, svcs)
				ok := cond(counts)
				mu.Lock()
				last[n.name] = showCounts(counts)
				if ok {
					took[n.name] = began.Sub(t0)
				}
				mu.Unlock()
				if ok {
					return
				}
			}
		})
	}
	wg.Wait()
	var missing []string
	for _, n := range nodes {
		if _, ok := took[n.name]; !ok {
			missing = append(missing, fmt.Sprintf("\n  %s, last round: %s", n.name, last[n.name]))
		}
	}
	if len(missing) > 0 {
		f.t.Fatalf("%s: not within %s on%s", what, bound, strings.Join(missing, ""))
	}
	f.t.Logf("%s: %s", what, showTook(took))
	return took
}

// showTook prints the durations by node.
func showTook(took map[string]time.Duration) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(took)) {
		fmt.Fprintf(&b, " %s=%s", k, took[k].Round(time.Millisecond))
	}
	return strings.TrimSpace(b.String())
}

// checkRounds runs one round from every node of nodes and fails the test
// (not at once) for each whose round does not satisfy cond.
func (f *fleet) checkRounds(what string, nodes []*node, svcs []app, cond func(map[string]int) bool) {
	f.t.Helper()
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() {
			counts := round(n.ns, svcs)
			if !cond(counts) {
				f.t.Errorf("%s: from %s: %s", what, n.name, showCounts(counts))
			}
		})
	}
	wg.Wait()
}
