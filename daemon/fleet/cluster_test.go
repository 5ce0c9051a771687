package fleet

import (
	"bytes"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// fastTimers scales memberlist's timers down for tests in one process:
// failure detection in about a second instead of ten.
func fastTimers(c *memberlist.Config) {
	c.ProbeInterval = 100 * time.Millisecond
	c.ProbeTimeout = 50 * time.Millisecond
	c.GossipInterval = 20 * time.Millisecond
	c.PushPullInterval = time.Second
	c.SuspicionMult = 2
	c.TCPTimeout = 2 * time.Second
	c.DeadNodeReclaimTime = 10 * time.Millisecond
	c.GossipToTheDeadTime = time.Second
}

// cluster is a fleet of members in one process, on a memNetwork.
type cluster struct {
	t      *testing.T
	net    *memNetwork
	nodes  []string
	checks []Check
	keys   [][]byte

	mu      sync.Mutex
	members []*Fleet
	logs    bytes.Buffer
}

func newCluster(t *testing.T, nodes []string, checks []Check) *cluster {
	c := &cluster{t: t, net: newMemNetwork(), nodes: nodes, checks: checks, keys: [][]byte{bytes.Repeat([]byte{1}, 32)}}
	t.Cleanup(func() {
		for _, m := range c.members {
			m.Shutdown()
		}
		if t.Failed() {
			t.Logf("logs:\n%s", c.logOutput())
		}
	})
	return c
}

func (c *cluster) logOutput() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.logs.String()
}

// lockedWriter serializes the members' logs into one buffer.
type lockedWriter struct{ c *cluster }

func (w lockedWriter) Write(b []byte) (int, error) {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	return w.c.logs.Write(b)
}

// start starts a member named name that joins through join (members);
// change, when not nil, changes its Config first.
func (c *cluster) start(name string, join []*Fleet, change func(*Config)) *Fleet {
	c.t.Helper()
	cfg := Config{Name: name, Keys: c.keys, Nodes: c.nodes, Checks: c.checks, Transport: c.net.transport(), Tune: fastTimers,
		Logger: slog.New(slog.NewTextHandler(lockedWriter{c}, &slog.HandlerOptions{Level: slog.LevelDebug})).With("member", name)}
	for _, j := range join {
		cfg.Join = append(cfg.Join, j.Addr())
	}
	if change != nil {
		change(&cfg)
	}
	f, err := New(cfg)
	if err != nil {
		c.t.Fatalf("start %s: %v", name, err)
	}
	c.mu.Lock()
	c.members = append(c.members, f)
	c.mu.Unlock()
	return f
}

// startAll starts a member for each name, each joining through the
// first.
func (c *cluster) startAll(names ...string) []*Fleet {
	var out []*Fleet
	for _, n := range names {
		var join []*Fleet
		if len(out) > 0 {
			join = out[:1]
		}
		out = append(out, c.start(n, join, nil))
	}
	return out
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stateOf is what f knows of the member name ("" when unknown).
func stateOf(f *Fleet, name string) MemberState {
	for _, m := range f.Members() {
		if m.Name == name {
			return m.State
		}
	}
	return ""
}

// sees tells whether f sees each of names in state st.
func sees(f *Fleet, st MemberState, names ...string) bool {
	for _, n := range names {
		if stateOf(f, n) != st {
			return false
		}
	}
	return true
}

// converged waits until every member sees every other alive.
func converged(t *testing.T, fs []*Fleet) {
	t.Helper()
	var names []string
	for _, f := range fs {
		names = append(names, f.cfg.Name)
	}
	waitFor(t, fmt.Sprintf("%v to see each other alive", names), func() bool {
		for _, f := range fs {
			if !sees(f, StateAlive, names...) {
				return false
			}
		}
		return true
	})
}

// outOn tells whether key is out on f for reason (any reason when "").
func outOn(f *Fleet, key, reason string) bool {
	w, ok := f.View().Out[key]
	return ok && (reason == "" || w.Reason == reason)
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

func newTestQueue() *memberlist.TransmitLimitedQueue {
	return &memberlist.TransmitLimitedQueue{NumNodes: func() int { return 3 }, RetransmitMult: 4}
}
