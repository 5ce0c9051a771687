package fleet

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// newTestState is a's state in the tree of the cluster tests, with the
// members given alive.
func newTestState(alive ...string) *state {
	s := newState("a", 100)
	s.setTree(NewTree(treeNodes, treeChecks))
	for _, n := range alive {
		s.setMember(n, n+":7946", StateAlive, time.Unix(0, 0), Meta{})
	}
	return s
}

func ids(keys ...string) []ID {
	var out []ID
	for _, k := range keys {
		out = append(out, KeyID(k))
	}
	return out
}

func TestOffer(t *testing.T) {
	v1, v2 := Version{Gen: 5, Seq: 1}, Version{Gen: 5, Seq: 2}
	restart := Version{Gen: 9, Seq: 0}
	tests := []struct {
		name    string
		parts   []part
		results []string
		dropped int
		table   []ID // b's table after, nil: none
	}{{
		name:    "applied",
		parts:   []part{{owner: "b", v: v1, parts: 1, ids: ids(keyB)}},
		results: []string{offerApplied},
		table:   ids(keyB),
	}, {
		name:    "duplicate and old",
		parts:   []part{{owner: "b", v: v2, parts: 1, ids: ids(keyB)}, {owner: "b", v: v2, parts: 1}, {owner: "b", v: v1, parts: 1}},
		results: []string{offerApplied, offerDuplicate, offerOld},
		table:   ids(keyB),
	}, {
		name:    "a restart supersedes",
		parts:   []part{{owner: "b", v: v2, parts: 1, ids: ids(keyB)}, {owner: "b", v: restart, parts: 1}},
		results: []string{offerApplied, offerApplied},
		table:   []ID{},
	}, {
		name: "parts assembled",
		parts: []part{{owner: "b", v: v1, index: 1, parts: 2, ids: ids(keyX)}, {owner: "b", v: v1, index: 1, parts: 2, ids: ids(keyX)},
			{owner: "b", v: v1, index: 0, parts: 2, ids: ids(keyB)}},
		results: []string{offerPart, offerDuplicate, offerApplied},
		table:   ids(keyB, keyX),
	}, {
		name: "a newer version's part drops the older assembly",
		parts: []part{{owner: "b", v: v1, index: 0, parts: 2, ids: ids(keyB)}, {owner: "b", v: v2, index: 0, parts: 1},
			{owner: "b", v: v1, index: 1, parts: 2}},
		results: []string{offerPart, offerApplied, offerOld},
		table:   []ID{},
	}, {
		name:    "claim about an alive member's check dropped, agentless and unknown kept",
		parts:   []part{{owner: "b", v: v1, parts: 1, ids: append(ids(keyA, keyC, keyX, keyB), 42)}},
		results: []string{offerApplied},
		dropped: 2,
		table:   append(ids(keyX, keyB), 42),
	}, {
		name:    "stranger",
		parts:   []part{{owner: "x", v: v1, parts: 1, ids: ids(keyB)}},
		results: []string{offerStranger},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestState("b", "c")
			var results []string
			dropped := 0
			for _, p := range tt.parts {
				r, d := s.offer(p)
				results = append(results, r)
				dropped += d
			}
			if diff := cmp.Diff(tt.results, results); diff != "" {
				t.Errorf("results (-want +got):\n%s", diff)
			}
			if dropped != tt.dropped {
				t.Errorf("dropped %d claims, want %d", dropped, tt.dropped)
			}
			var got []ID
			if tb := s.tables["b"]; tb != nil {
				got = []ID{}
				for id := range tb.ids {
					got = append(got, id)
				}
			}
			slices.Sort(got)
			want := slices.Clone(tt.table)
			slices.Sort(want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("b's table (-want +got):\n%s", diff)
			}
		})
	}
}

// A table of this node newer than its own (a restart with the clock
// behind) moves its own version past it; its own version or an older one
// coming back (gossiped on by others, or in a push/pull) leaves it.
func TestOfferOwn(t *testing.T) {
	tests := []struct {
		name    string
		offered Version
		want    Version
	}{
		{name: "newer generation", offered: Version{Gen: 200, Seq: 3}, want: Version{Gen: 200, Seq: 4}},
		{name: "same generation, newer", offered: Version{Gen: 100, Seq: 9}, want: Version{Gen: 100, Seq: 10}},
		{name: "its own version back", offered: Version{Gen: 100, Seq: 5}, want: Version{Gen: 100, Seq: 5}},
		{name: "older", offered: Version{Gen: 100, Seq: 4}, want: Version{Gen: 100, Seq: 5}},
		{name: "older generation", offered: Version{Gen: 99, Seq: 50}, want: Version{Gen: 100, Seq: 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestState()
			s.own.v = Version{Gen: 100, Seq: 5}
			if r, _ := s.offer(part{owner: "a", v: tt.offered, parts: 1}); r != offerSelf {
				t.Errorf("offer: %s, want %s", r, offerSelf)
			}
			if s.own.v != tt.want {
				t.Errorf("own version %v, want %v", s.own.v, tt.want)
			}
		})
	}
}

func TestView(t *testing.T) {
	tests := []struct {
		name   string
		change func(s *state)
		out    map[string]Why
		static bool
	}{{
		name:   "own failing check",
		change: func(s *state) { s.setLocal([]string{keyA}) },
		out:    map[string]Why{keyA: {Reason: ReasonProbe, By: []string{"a"}}},
	}, {
		name:   "owner's failing check",
		change: func(s *state) { s.merge("b", Version{Gen: 1}, ids(keyB)) },
		out:    map[string]Why{keyB: {Reason: ReasonProbe, By: []string{"b"}}},
	}, {
		name:   "dead member's checks out",
		change: func(s *state) { s.setMember("c", "", StateDead, time.Unix(1, 0), Meta{}) },
		out:    map[string]Why{keyC: {Reason: ReasonDead, By: []string{"c"}}},
	}, {
		name:   "left member's checks follow the tree",
		change: func(s *state) { s.setMember("c", "", StateLeft, time.Unix(1, 0), Meta{}) },
		out:    map[string]Why{},
	}, {
		name: "fail static: more than half dead, their last tables stand",
		change: func(s *state) {
			s.merge("d", Version{Gen: 1}, ids(keyD))
			for _, n := range []string{"c", "d", "e"} {
				s.setMember(n, "", StateDead, time.Unix(1, 0), Meta{})
			}
		},
		out:    map[string]Why{keyD: {Reason: ReasonProbe, By: []string{"d"}}},
		static: true,
	}, {
		name: "half dead is not fail static",
		change: func(s *state) {
			s.setMember("c", "", StateDead, time.Unix(1, 0), Meta{})
			s.setMember("d", "", StateDead, time.Unix(1, 0), Meta{})
		},
		out: map[string]Why{keyC: {Reason: ReasonDead, By: []string{"c"}}, keyD: {Reason: ReasonDead, By: []string{"d"}}},
	}, {
		name: "a check no longer in the tree is nowhere",
		change: func(s *state) {
			s.merge("b", Version{Gen: 1}, ids(keyB))
			s.setTree(NewTree(treeNodes, treeChecks[2:]))
		},
		out: map[string]Why{},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestState("b", "c", "d", "e")
			tt.change(s)
			v := s.view(s.aliveList(), 0)
			if diff := cmp.Diff(tt.out, v.Out); diff != "" {
				t.Errorf("out (-want +got):\n%s", diff)
			}
			if v.FailStatic != tt.static {
				t.Errorf("fail static %v, want %v", v.FailStatic, tt.static)
			}
		})
	}
}

// An agentless check is out when each of its two probers says so.
func TestViewAgentless(t *testing.T) {
	s := newTestState("b", "c", "d", "e")
	alive := s.aliveList()
	by := probers(KeyID(keyX), alive)
	if len(by) != 2 || by[0] == by[1] {
		t.Fatalf("probers %v, want two", by)
	}
	say := func(n string) {
		if n == "a" {
			s.setLocal([]string{keyX})
		} else {
			s.merge(n, Version{Gen: 1}, ids(keyX))
		}
	}
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		if !slices.Contains(by, n) {
			say(n) // a non-prober's word changes nothing
		}
	}
	say(by[0])
	if _, ok := s.view(alive, 0).Out[keyX]; ok {
		t.Fatalf("out on the word of %s alone", by[0])
	}
	say(by[1])
	want := map[string]Why{keyX: {Reason: ReasonProbe, By: by}}
	if diff := cmp.Diff(want, s.view(alive, 0).Out); diff != "" {
		t.Errorf("out (-want +got):\n%s", diff)
	}
	if got, probes := s.probed(alive), slices.Contains(by, "a"); slices.Contains(got, keyX) != probes {
		t.Errorf("a probes %v; a is a prober: %v", got, probes)
	}
}

// Rendezvous: every node picks the same two, whatever the order it lists
// the members in; a member's death moves only its own checks; the load
// spreads.
func TestProbers(t *testing.T) {
	var members []nameHash
	for i := range 50 {
		n := fmt.Sprintf("node-%02d", i)
		members = append(members, nameHash{name: n, h: uint64(KeyID(n))})
	}
	reversed := slices.Clone(members)
	slices.Reverse(reversed)
	load := map[string]int{}
	moved := 0
	without := slices.Delete(slices.Clone(members), 7, 8) // node-07 dies
	for i := range 5000 {
		id := KeyID(fmt.Sprintf("10.9.%d.%d\x00tcp:80", i/256, i%256))
		by := probers(id, members)
		if !slices.Equal(by, probers(id, reversed)) {
			t.Fatalf("check %d: probers depend on the order: %v, %v", i, by, probers(id, reversed))
		}
		for _, n := range by {
			load[n]++
		}
		after := probers(id, without)
		if !slices.Contains(by, "node-07") && !slices.Equal(by, after) {
			t.Fatalf("check %d: probers %v moved to %v though neither died", i, by, after)
		}
		if slices.Contains(by, "node-07") {
			moved++
		}
	}
	// 10,000 assignments over 50 members: 200 each on average.
	for n, c := range load {
		if c < 120 || c > 280 {
			t.Errorf("%s probes %d checks, want about 200", n, c)
		}
	}
	if moved == 0 {
		t.Errorf("node-07 was a prober of nothing")
	}
}

func TestProbersFew(t *testing.T) {
	one := []nameHash{{name: "a", h: uint64(KeyID("a"))}}
	if got := probers(1, one); !slices.Equal(got, []string{"a"}) {
		t.Errorf("one member: probers %v", got)
	}
	if got := probers(1, nil); len(got) != 0 {
		t.Errorf("no member: probers %v", got)
	}
}

func TestSetChecksSameKeyTwice(t *testing.T) {
	for _, order := range [][]Check{
		{{Key: "k", Node: "b"}, {Key: "k", Node: ""}, {Key: "k", Node: "a"}},
		{{Key: "k", Node: "a"}, {Key: "k", Node: "b"}, {Key: "k", Node: ""}},
		{{Key: "k", Node: ""}, {Key: "k", Node: "b"}, {Key: "k", Node: "a"}},
	} {
		if got := NewTree(nil, order).checks[KeyID("k")].Node; got != "a" {
			t.Errorf("%v: home %q, want a", order, got)
		}
	}
}

// BenchmarkView is the work each member does on every table it applies:
// 200 members, 20,000 checks, 400 failing (1 % flipping plus a rolling
// restart), 2 members dead.
func BenchmarkView(b *testing.B) {
	const members, checks, failing = 200, 20000, 400
	var names []string
	for i := range members {
		names = append(names, fmt.Sprintf("node-%04d", i))
	}
	var cs []Check
	for i := range checks {
		cs = append(cs, Check{Key: fmt.Sprintf("10.%d.%d.%d\x00tcp:8080", i>>16&255, i>>8&255, i&255), Node: names[i%members]})
	}
	s := newState(names[0], 1)
	s.setTree(NewTree(names, cs))
	for i, n := range names[1:] {
		st := StateAlive
		if i >= members-3 {
			st = StateDead
		}
		s.setMember(n, n+":7946", st, time.Unix(0, 0), Meta{})
	}
	byOwner := map[string][]ID{}
	for i := 0; i < checks; i += checks / failing {
		byOwner[cs[i].Node] = append(byOwner[cs[i].Node], KeyID(cs[i].Key))
	}
	for o, ids := range byOwner {
		s.merge(o, Version{Gen: 1, Seq: 1}, ids)
	}
	alive := s.aliveList()
	size := len(s.view(alive, 0).Out)
	b.ReportAllocs()
	for b.Loop() {
		s.view(alive, size)
	}
}
