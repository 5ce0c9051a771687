package fleet

import (
	"bytes"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The tree of the cluster tests: nodes a to e, one check on each, and one
// endpoint without a node (agentless).
var (
	treeNodes  = []string{"a", "b", "c", "d", "e"}
	treeChecks = []Check{
		{Key: "10.0.0.1\x00tcp:80", Node: "a"},
		{Key: "10.0.0.2\x00tcp:80", Node: "b"},
		{Key: "10.0.0.3\x00tcp:80", Node: "c"},
		{Key: "10.0.0.4\x00tcp:80", Node: "d"},
		{Key: "10.0.0.5\x00tcp:80", Node: "e"},
		{Key: "192.0.2.9\x00http:/healthz", Node: ""},
	}
	keyA, keyB, keyC, keyD, keyE, keyX = treeChecks[0].Key, treeChecks[1].Key, treeChecks[2].Key, treeChecks[3].Key, treeChecks[4].Key, treeChecks[5].Key
)

func TestJoinRefusesStranger(t *testing.T) {
	c := newCluster(t, []string{"a", "b", "c"}, treeChecks)
	fs := c.startAll("a", "b", "c")
	converged(t, fs)
	x := c.start("x", fs[:1], func(cfg *Config) { cfg.Tree = NewTree([]string{"a", "b", "c", "x"}, treeChecks) })
	waitFor(t, "a to refuse x", func() bool { return fs[0].Stats().Refused > 0 })
	// x's own table, published at its start, must not count either.
	x.SetLocal([]string{keyA})
	for _, f := range fs {
		if st := stateOf(f, "x"); st != "" {
			t.Errorf("%s knows x as %s, want unknown", f.cfg.Name, st)
		}
	}
	converged(t, fs)
}

func TestWrongKeyRefused(t *testing.T) {
	c := newCluster(t, treeNodes, treeChecks)
	a := c.start("a", nil, nil)
	b := c.start("b", nil, func(cfg *Config) { cfg.Keys = [][]byte{bytes.Repeat([]byte{2}, 32)} })
	if n, err := b.ml.Join([]string{a.Addr()}); err == nil {
		t.Fatalf("b joined a (%d) with another key", n)
	}
	if st := stateOf(a, "b"); st != "" {
		t.Errorf("a knows b as %s after a join with the wrong key", st)
	}
}

func TestNoKeyIsAnError(t *testing.T) {
	_, err := New(Config{Name: "a", Transport: newMemNetwork().transport()})
	if err != ErrNoKey {
		t.Fatalf("New without keys: %v, want ErrNoKey", err)
	}
}

func TestKeyRotation(t *testing.T) {
	old, new := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 16)
	c := newCluster(t, treeNodes, treeChecks)
	// Mid-rotation: a still encrypts with the old key, b and c with the
	// new one; all accept both.
	a := c.start("a", nil, func(cfg *Config) { cfg.Keys = [][]byte{old, new} })
	b := c.start("b", []*Fleet{a}, func(cfg *Config) { cfg.Keys = [][]byte{new, old} })
	cc := c.start("c", []*Fleet{b}, func(cfg *Config) { cfg.Keys = [][]byte{new, old} })
	converged(t, []*Fleet{a, b, cc})
	a.SetLocal([]string{keyA})
	cc.SetLocal([]string{keyC})
	for _, f := range []*Fleet{a, b, cc} {
		waitFor(t, f.cfg.Name+" to see a's and c's checks out", func() bool { return outOn(f, keyA, ReasonProbe) && outOn(f, keyC, ReasonProbe) })
	}
	// A node with the new key only cannot talk to one with the old only.
	d := c.start("d", nil, func(cfg *Config) { cfg.Keys = [][]byte{old} })
	e := c.start("e", nil, func(cfg *Config) { cfg.Keys = [][]byte{new} })
	if _, err := e.ml.Join([]string{d.Addr()}); err == nil {
		t.Errorf("a node with the new key only joined one with the old key only")
	}
}

func TestClaimAboutAnotherDropped(t *testing.T) {
	c := newCluster(t, treeNodes, treeChecks)
	fs := c.startAll("a", "b", "c")
	converged(t, fs)
	// b claims a's endpoint fails, and its own.
	fs[1].SetLocal([]string{keyA, keyB})
	for _, f := range []*Fleet{fs[0], fs[2]} {
		waitFor(t, f.cfg.Name+" to take b's endpoint out", func() bool { return outOn(f, keyB, ReasonProbe) })
		if outOn(f, keyA, "") {
			t.Errorf("%s took a's endpoint out on b's word", f.cfg.Name)
		}
		if f.Stats().Claims == 0 {
			t.Errorf("%s counted no dropped claim", f.cfg.Name)
		}
	}
}

func TestBadMessagesDropped(t *testing.T) {
	c := newCluster(t, treeNodes, treeChecks)
	fs := c.startAll("a", "b")
	converged(t, fs)
	a, b := fs[0], fs[1]
	b.SetLocal([]string{keyB})
	waitFor(t, "a to take b's endpoint out", func() bool { return outOn(a, keyB, ReasonProbe) })
	stale := encodeParts("b", Version{Gen: b.cfg.Generation, Seq: 0}, nil)[0]
	for i, msg := range [][]byte{
		{wireMagic, msgPart, 0xff},               // malformed
		bytes.Repeat([]byte{0xab}, 1200),         // oversized
		stale,                                    // replayed: older than the version a has
		append(append([]byte(nil), stale...), 0), // trailing byte: malformed
	} {
		b.queue.QueueBroadcast(&broadcast{name: "test/" + string(rune('0'+i)), msg: msg})
	}
	waitFor(t, "a to count the bad messages", func() bool {
		s := a.Stats()
		return s.Malformed >= 2 && s.Oversized >= 1 && s.Old >= 1
	})
	if !outOn(a, keyB, ReasonProbe) {
		t.Errorf("a took b's endpoint back in on a replayed table")
	}
}

func TestUpdateReachesAll(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}
	var checks []Check
	for _, n := range names {
		checks = append(checks, Check{Key: "10.1.0.1\x00" + n, Node: n})
	}
	c := newCluster(t, names, checks)
	fs := c.startAll(names...)
	converged(t, fs)
	fs[3].SetLocal([]string{checks[3].Key})
	for _, f := range fs {
		waitFor(t, f.cfg.Name+" to see d's check out", func() bool { return outOn(f, checks[3].Key, ReasonProbe) })
	}
	fs[3].SetLocal(nil)
	for _, f := range fs {
		waitFor(t, f.cfg.Name+" to see d's check back", func() bool { return !outOn(f, checks[3].Key, "") })
	}
}

// A part received for the first time is queued again (memberlist gossips
// only its own broadcasts on); a duplicate is not.
func TestFirstReceiptGossipedOn(t *testing.T) {
	c := newCluster(t, treeNodes, treeChecks)
	a := c.start("a", nil, func(cfg *Config) { cfg.Join = nil })
	before := a.queue.NumQueued()
	msg := encodeParts("b", Version{Gen: 7, Seq: 1}, []ID{KeyID(keyB)})[0]
	d := &delegate{f: a}
	d.NotifyMsg(msg)
	if got := a.queue.NumQueued(); got != before+1 {
		t.Fatalf("queued after first receipt: %d, want %d", got, before+1)
	}
	d.NotifyMsg(msg)
	if got := a.queue.NumQueued(); got != before+1 {
		t.Fatalf("queued after a duplicate: %d, want %d", got, before+1)
	}
	if s := a.Stats(); s.Duplicates != 1 || s.Applied != 1 {
		t.Errorf("stats %+v, want 1 applied, 1 duplicate", s)
	}
}

func TestLateJoinerGetsWholeView(t *testing.T) {
	c := newCluster(t, treeNodes, treeChecks)
	fs := c.startAll("a", "b")
	converged(t, fs)
	fs[0].SetLocal([]string{keyA})
	fs[1].SetLocal([]string{keyB})
	waitFor(t, "the broadcasts to be sent out", func() bool {
		return outOn(fs[0], keyB, "") && outOn(fs[1], keyA, "") && fs[0].queue.NumQueued() == 0 && fs[1].queue.NumQueued() == 0
	})
	late := c.start("c", fs[:1], nil)
	waitFor(t, "c to see a's and b's checks out", func() bool { return outOn(late, keyA, ReasonProbe) && outOn(late, keyB, ReasonProbe) })
	if s := late.Stats(); s.Applied < 2 {
		t.Errorf("c applied %d tables, want a's and b's from the push/pull", s.Applied)
	}
}

func TestDeadMemberEndpointsOut(t *testing.T) {
	c := newCluster(t, treeNodes, treeChecks)
	fs := c.startAll("a", "b", "c")
	converged(t, fs)
	fs[1].Shutdown() // a crash: no leave
	for _, f := range []*Fleet{fs[0], fs[2]} {
		waitFor(t, f.cfg.Name+" to take dead b's endpoint out", func() bool { return outOn(f, keyB, ReasonDead) })
		if w := f.View().Out[keyB]; len(w.By) != 1 || w.By[0] != "b" {
			t.Errorf("%s: out by %v, want [b]", f.cfg.Name, w.By)
		}
		if outOn(f, keyA, "") || outOn(f, keyC, "") {
			t.Errorf("%s: alive members' endpoints out: %v", f.cfg.Name, f.View().Out)
		}
	}
}

// A member joins a dead member now and then, to heal a partition: as
// often as dead / alive (one in four here, or every time when cut off
// from most), a dead member picked at random.
func TestReconnectTo(t *testing.T) {
	tests := []struct {
		name         string
		alive, dead  []string // besides a
		chance, pick float64
		want         string
	}{
		{name: "none dead", alive: []string{"b", "c", "d", "e"}, chance: 0, want: ""},
		{name: "one dead of four: joins", alive: []string{"b", "c", "d"}, dead: []string{"e"}, chance: 0.2, pick: 0.9, want: "e:7946"},
		{name: "one dead of four: not this time", alive: []string{"b", "c", "d"}, dead: []string{"e"}, chance: 0.3, want: ""},
		{name: "cut off: first", dead: []string{"b", "c", "d", "e"}, chance: 0.99, pick: 0, want: "b:7946"},
		{name: "cut off: third", dead: []string{"b", "c", "d", "e"}, chance: 0.99, pick: 0.6, want: "d:7946"},
		{name: "cut off: last", dead: []string{"b", "c", "d", "e"}, chance: 0.99, pick: 0.99, want: "e:7946"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &Fleet{st: newTestState(tt.alive...)}
			for _, n := range tt.dead {
				f.st.setMember(n, n+":7946", StateDead, time.Unix(0, 0), Meta{})
			}
			if got := f.reconnectTo(tt.chance, tt.pick); got != tt.want {
				t.Errorf("reconnectTo(%g, %g) = %q, want %q", tt.chance, tt.pick, got, tt.want)
			}
		})
	}
}

func TestLeftMemberEndpointsStay(t *testing.T) {
	c := newCluster(t, treeNodes, treeChecks)
	fs := c.startAll("a", "b", "c")
	converged(t, fs)
	if err := fs[1].Leave(5e9); err != nil {
		t.Fatalf("leave: %v", err)
	}
	for _, f := range []*Fleet{fs[0], fs[2]} {
		waitFor(t, f.cfg.Name+" to see b left", func() bool { return stateOf(f, "b") == StateLeft })
		if outOn(f, keyB, "") {
			t.Errorf("%s took b's endpoint out after b left", f.cfg.Name)
		}
	}
}

func TestRestartUnderSameNameNewAddress(t *testing.T) {
	c := newCluster(t, treeNodes, treeChecks)
	fs := c.startAll("a", "b", "c")
	converged(t, fs)
	fs[0].SetLocal([]string{keyA})
	old := fs[1].Addr()
	fs[1].Shutdown()
	waitFor(t, "a to see b dead", func() bool { return stateOf(fs[0], "b") == StateDead })
	b := c.start("b", fs[:1], nil) // a new transport: a new address
	if b.Addr() == old {
		t.Fatalf("restarted b has its old address %s", old)
	}
	waitFor(t, "a and c to see b alive at its new address", func() bool {
		for _, f := range []*Fleet{fs[0], fs[2]} {
			ok := false
			for _, m := range f.Members() {
				ok = ok || m.Name == "b" && m.State == StateAlive && m.Address == b.Addr()
			}
			if !ok {
				return false
			}
		}
		return true
	})
	waitFor(t, "b's endpoint back in on a", func() bool { return !outOn(fs[0], keyB, "") })
	waitFor(t, "restarted b to get a's table", func() bool { return outOn(b, keyA, ReasonProbe) })
}

func TestFailStatic(t *testing.T) {
	c := newCluster(t, treeNodes, treeChecks)
	fs := c.startAll(treeNodes...)
	converged(t, fs)
	a := fs[0]
	fs[4].SetLocal([]string{keyE}) // e's last word: its endpoint fails
	waitFor(t, "a to see e's check out", func() bool { return outOn(a, keyE, ReasonProbe) })
	fs[2].Shutdown()
	fs[3].Shutdown()
	waitFor(t, "a to see c and d dead", func() bool { return outOn(a, keyC, ReasonDead) && outOn(a, keyD, ReasonDead) })
	if v := a.View(); v.FailStatic {
		t.Fatalf("fail static with 2 of 5 dead")
	}
	fs[4].Shutdown()
	// e suspect already makes 3 of 5 dead or suspect; then e dead.
	waitFor(t, "a to fail static", func() bool { return a.View().FailStatic })
	if v := a.View(); v.Dead+v.Suspect != 3 || v.Ever != 5 {
		t.Errorf("fail static with %d dead and %d suspect of %d, want 3 of 5", v.Dead, v.Suspect, v.Ever)
	}
	waitFor(t, "a to see e dead", func() bool { return a.View().Dead == 3 })
	v := a.View()
	if !v.FailStatic || v.Suspect != 0 || v.Ever != 5 {
		t.Errorf("fail static %v, %d dead and %d suspect of %d; want fail static, 3 dead of 5", v.FailStatic, v.Dead, v.Suspect, v.Ever)
	}
	if outOn(a, keyC, "") || outOn(a, keyD, "") {
		t.Errorf("dead nodes' endpoints out in fail static: %v", v.Out)
	}
	if !outOn(a, keyE, ReasonProbe) {
		t.Errorf("e's last failing check not out in fail static: %v", v.Out)
	}
}

func TestAgentlessProbedByTwo(t *testing.T) {
	c := newCluster(t, treeNodes, treeChecks)
	fs := c.startAll("a", "b", "c", "d")
	converged(t, fs)
	var probers []*Fleet
	waitFor(t, "two members to probe the agentless endpoint", func() bool {
		probers = probers[:0]
		for _, f := range fs {
			if f.View().Probes(keyX) {
				probers = append(probers, f)
			}
		}
		return len(probers) == 2
	})
	probers[0].SetLocal([]string{keyX})
	waitFor(t, "the first prober's table to reach all", func() bool {
		for _, f := range fs {
			if f.Stats().Applied == 0 && f != probers[0] {
				return false
			}
		}
		return true
	})
	for _, f := range fs {
		if outOn(f, keyX, "") {
			t.Errorf("%s: out on one prober's word", f.cfg.Name)
		}
	}
	probers[1].SetLocal([]string{keyX})
	for _, f := range fs {
		waitFor(t, f.cfg.Name+" to take the agentless endpoint out", func() bool { return outOn(f, keyX, ReasonProbe) })
	}
}

func TestMetadataAndMetrics(t *testing.T) {
	c := newCluster(t, treeNodes, treeChecks)
	fs := c.startAll("a", "b")
	converged(t, fs)
	fs[0].SetRevision("0123abc", 3)
	fs[1].SetRevision("0123abc", 2)
	waitFor(t, "b to see a's revision", func() bool {
		for _, m := range fs[1].Members() {
			if m.Name == "a" && m.Revision == "0123abc" && m.Checks == 3 {
				return true
			}
		}
		return false
	})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(fs[1])
	waitFor(t, "b's metrics to count both members at the revision", func() bool {
		got := gathered(t, reg)
		return got[`netspec_fleet_members{state="alive"}`] == 2 && got[`netspec_fleet_nodes_per_revision{revision="0123abc"}`] == 2
	})
	got := gathered(t, reg)
	for _, name := range []string{`netspec_fleet_gossip_bytes_total{direction="in"}`, `netspec_fleet_gossip_messages_total{direction="out"}`} {
		if got[name] == 0 {
			t.Errorf("%s is 0 after gossip", name)
		}
	}
	if _, ok := got[`netspec_fleet_fail_static`]; !ok {
		t.Errorf("no netspec_fleet_fail_static in %v", got)
	}
}

// gathered is the registry's samples by name{labels}.
func gathered(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			if len(m.GetLabel()) > 0 {
				name += "{"
				for i, l := range m.GetLabel() {
					if i > 0 {
						name += ","
					}
					name += l.GetName() + `="` + l.GetValue() + `"`
				}
				name += "}"
			}
			switch {
			case m.GetGauge() != nil:
				out[name] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				out[name] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}

func TestLogLevels(t *testing.T) {
	var buf bytes.Buffer
	l := newLogLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}})))
	l.Printf("[ERR] memberlist: a")
	l.Printf("[WARN] memberlist: b")
	l.Printf("[INFO] memberlist: c")
	l.Printf("plain")
	want := "level=ERROR msg=\"memberlist: a\"\nlevel=WARN msg=\"memberlist: b\"\nlevel=DEBUG msg=\"memberlist: c\"\nlevel=DEBUG msg=plain\n"
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}
}
