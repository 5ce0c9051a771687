package fleet

import (
	"hash/fnv"
	"slices"
	"sort"
	"time"
)

// ID is a check's identity on the wire: a 64-bit hash of its key
// (probe.Target.Key), which every node computes alike from the same tree.
// Eight bytes per failing check instead of an address and a probe.
type ID uint64

// KeyID is the ID of the check key.
func KeyID(key string) ID {
	h := fnv.New64a()
	h.Write([]byte(key))
	return ID(h.Sum64())
}

// Version orders the tables of one owner: Gen is the agent's generation
// (its start time in nanoseconds), Seq counts the tables it published
// since. A restarted agent's tables supersede those of its earlier run.
type Version struct {
	Gen uint64
	Seq uint64
}

// Less tells whether v is older than o.
func (v Version) Less(o Version) bool {
	if v.Gen != o.Gen {
		return v.Gen < o.Gen
	}
	return v.Seq < o.Seq
}

// Check is a readiness check of the tree, as the watcher knows it.
type Check struct {
	// Key is the check's key (probe.Target.Key: address and probe).
	Key string
	// Node is the node the endpoint's Pod runs on (plan.Endpoint.NodeName),
	// the one node that may speak for it; "" for an endpoint without one.
	Node string
}

// MemberState is what the fleet knows of a member.
type MemberState string

// The states of a member. A suspect member is one memberlist lists alive
// that its failure detector suspects (suspicion.go): its endpoints follow
// the tree as an alive member's do; only fail static counts it.
const (
	StateAlive   MemberState = "alive"
	StateSuspect MemberState = "suspect"
	StateDead    MemberState = "dead"
	StateLeft    MemberState = "left"
)

// member is what the state knows of a member.
type member struct {
	state MemberState
	addr  string
	since time.Time
	meta  Meta
}

// Why tells why a check is out in a View.
type Why struct {
	// Reason is ReasonProbe (a probe fails, as By say) or ReasonDead
	// (By is the dead node the endpoint runs on).
	Reason string `json:"reason"`
	// By are the nodes whose say takes the endpoint out: the owner, or
	// every prober assigned to an agentless endpoint, or the dead node.
	By []string `json:"by"`
}

// The reasons of Why.
const (
	ReasonProbe = "probe"
	ReasonDead  = "nodeDead"
)

// table is an owner's failing checks at a version.
type table struct {
	v   Version
	ids map[ID]bool
}

// assembly collects the parts of a version of an owner's table.
type assembly struct {
	v     Version
	parts int
	got   map[int][]ID
}

// state is the fleet's pure state: the tree's nodes and checks, the
// members, every owner's table. It has no lock, no clock of its own and no
// network: Fleet guards it and feeds it.
type state struct {
	self string
	// nodes are the tree's Node names; only they may be members.
	nodes map[string]bool
	// checks of the tree by ID, and the IDs by home node.
	checks  map[ID]Check
	byHome  map[string][]ID
	members map[string]*member
	// ever are the tree's nodes ever seen as members: fail static's
	// denominator.
	ever    map[string]bool
	tables  map[string]*table
	pending map[string]*assembly
	// own is this node's table.
	own table
	// incs are the members' highest incarnations seen in memberlist's
	// membership messages, suspects the members suspected (gossiped).
	incs     map[string]uint32
	suspects map[string]suspicion
	// settled tells that the fleet had time to gather (a push/pull
	// round since the start): until then a node of the tree not seen as
	// a member may be one still joining, and its endpoints follow the
	// tree rather than be probed by others.
	settled bool
}

func newState(self string, gen uint64) *state {
	return &state{self: self, nodes: map[string]bool{}, checks: map[ID]Check{}, byHome: map[string][]ID{},
		members: map[string]*member{}, ever: map[string]bool{}, tables: map[string]*table{},
		pending: map[string]*assembly{}, own: table{v: Version{Gen: gen}, ids: map[ID]bool{}},
		incs: map[string]uint32{}, suspects: map[string]suspicion{}}
}

// Tree is what the fleet reads of the tree: its Node names (who may be a
// member) and its checks with their home nodes. Built once per sync
// (NewTree), never changed after: members in one process may share one.
type Tree struct {
	nodes  map[string]bool
	checks map[ID]Check
	byHome map[string][]ID // IDs by home node, sorted
}

// NewTree reads the tree's Node names and checks. A key given twice keeps
// the smallest non-empty node name, so that every node reads the tree
// alike.
func NewTree(nodes []string, checks []Check) *Tree {
	t := &Tree{nodes: make(map[string]bool, len(nodes)), checks: make(map[ID]Check, len(checks)), byHome: map[string][]ID{}}
	for _, n := range nodes {
		t.nodes[n] = true
	}
	for _, c := range checks {
		id := KeyID(c.Key)
		if o, ok := t.checks[id]; ok && o.Node != "" && (c.Node == "" || o.Node < c.Node) {
			continue
		}
		t.checks[id] = c
	}
	for id, c := range t.checks {
		t.byHome[c.Node] = append(t.byHome[c.Node], id)
	}
	for _, ids := range t.byHome {
		slices.Sort(ids)
	}
	return t
}

// setTree sets the tree.
func (s *state) setTree(t *Tree) {
	s.nodes, s.checks, s.byHome = t.nodes, t.checks, t.byHome
	for n := range s.ever {
		if !s.isNode(n) {
			delete(s.ever, n)
		}
	}
	for n := range s.incs {
		if !s.isNode(n) {
			delete(s.incs, n)
			delete(s.suspects, n)
		}
	}
}

// isNode tells whether name is a node of the tree; this node always is.
func (s *state) isNode(name string) bool { return name == s.self || s.nodes[name] }

// setMember records a member's state (StateAlive, StateDead or
// StateLeft: memberlist's word). A member dead, left or back from either
// is suspected no more.
func (s *state) setMember(name, addr string, st MemberState, now time.Time, meta Meta) {
	m := s.members[name]
	if m == nil {
		m = &member{}
		s.members[name] = m
	}
	if st != StateAlive || m.state != StateAlive && m.state != "" {
		delete(s.suspects, name)
	}
	if m.state != st || m.since.IsZero() {
		m.since = now
	}
	m.state, m.addr, m.meta = st, addr, meta
	if s.isNode(name) {
		s.ever[name] = true
	}
}

// alive tells whether name is an alive member of the tree's nodes.
func (s *state) alive(name string) bool {
	if name == s.self {
		return true
	}
	m := s.members[name]
	return m != nil && m.state == StateAlive && s.isNode(name)
}

// failStatic tells whether more than half of the tree's nodes ever seen as
// members are dead or suspect now: a node that sees that suspects itself
// (a partition, its own network) more than them, and keeps their
// endpoints.
func (s *state) failStatic() (dead, suspect, ever int, on bool) {
	ever = 1 // the node itself
	for n := range s.ever {
		if n == s.self {
			continue
		}
		ever++
		if m := s.members[n]; m != nil && m.state == StateDead {
			dead++
		} else if _, ok := s.suspect(n); ok {
			suspect++
		}
	}
	return dead, suspect, ever, 2*(dead+suspect) > ever
}

// deadMembers lists the tree's nodes known as dead members, sorted.
func (s *state) deadMembers() []string {
	var out []string
	for n, m := range s.members {
		if m.state == StateDead && n != s.self && s.isNode(n) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// Offer results: what became of a received table part.
const (
	offerApplied   = "applied"   // a new version is complete and applied
	offerPart      = "part"      // a new part of a version still incomplete
	offerDuplicate = "duplicate" // the version or part is known already
	offerOld       = "old"       // older than the version known: replayed or late
	offerStranger  = "stranger"  // the owner is no node of the tree
	offerSelf      = "self"      // about this node itself
)

// offer takes a part of an owner's table. It tells what became of it and
// how many of its claims were dropped (checks the owner may not speak
// for). fresh tells whether this is the first receipt of the part (then it
// is worth gossiping on).
func (s *state) offer(p part) (result string, dropped int) {
	switch {
	case p.owner == s.self:
		if s.own.v.Less(p.v) {
			// A table of ours newer than ours: we restarted with a clock
			// behind the last run's. Publish above it. Our own version
			// coming back (every member gossips it on) is no news:
			// moving on from it would publish a version each round trip.
			s.own.v = Version{Gen: p.v.Gen, Seq: p.v.Seq + 1}
		}
		return offerSelf, 0
	case !s.isNode(p.owner):
		return offerStranger, 0
	}
	if t := s.tables[p.owner]; t != nil && !t.v.Less(p.v) {
		if t.v == p.v {
			return offerDuplicate, 0
		}
		return offerOld, 0
	}
	a := s.pending[p.owner]
	if a != nil && p.v.Less(a.v) {
		return offerOld, 0
	}
	if a == nil || a.v != p.v || a.parts != p.parts {
		a = &assembly{v: p.v, parts: p.parts, got: map[int][]ID{}}
		s.pending[p.owner] = a
	}
	if _, ok := a.got[p.index]; ok {
		return offerDuplicate, 0
	}
	ids, dropped := s.claims(p.owner, p.ids)
	a.got[p.index] = ids
	if len(a.got) < a.parts {
		return offerPart, dropped
	}
	t := &table{v: a.v, ids: map[ID]bool{}}
	for _, ids := range a.got {
		for _, id := range ids {
			t.ids[id] = true
		}
	}
	s.tables[p.owner] = t
	delete(s.pending, p.owner)
	return offerApplied, dropped
}

// merge takes a whole table (push/pull): applied when newer than the one
// known.
func (s *state) merge(owner string, v Version, ids []ID) (applied bool, dropped int) {
	r, dropped := s.offer(part{owner: owner, v: v, index: 0, parts: 1, ids: ids})
	return r == offerApplied, dropped
}

// claims keeps the ids the owner may speak for: those of its own
// endpoints, of agentless ones (it may be their prober) and those this
// tree does not know (another revision's; they match nothing here). A
// claim about an endpoint of another node that is an alive member is
// dropped.
func (s *state) claims(owner string, ids []ID) (kept []ID, dropped int) {
	kept = ids[:0:0]
	for _, id := range ids {
		c, ok := s.checks[id]
		if ok && c.Node != owner && c.Node != "" && s.alive(c.Node) {
			dropped++
			continue
		}
		kept = append(kept, id)
	}
	return kept, dropped
}

// setLocal sets this node's failing checks; it tells whether the table
// changed (then its version moved on).
func (s *state) setLocal(failing []string) bool {
	ids := make(map[ID]bool, len(failing))
	for _, k := range failing {
		ids[KeyID(k)] = true
	}
	if len(ids) == len(s.own.ids) {
		same := true
		for id := range ids {
			if !s.own.ids[id] {
				same = false
				break
			}
		}
		if same {
			return false
		}
	}
	s.own.ids = ids
	s.own.v.Seq++
	return true
}

// ownIDs lists this node's failing checks, sorted.
func (s *state) ownIDs() []ID { return sortedIDs(s.own.ids) }

// sortedIDs lists a table's IDs, sorted: what goes on the wire.
func sortedIDs(set map[ID]bool) []ID {
	ids := make([]ID, 0, len(set))
	for id := range set {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// probers are the alive members assigned to an agentless check: the
// two with the highest rendezvous score (fewer when fewer are alive).
// Every node with the same members and tree picks the same two.
func probers(id ID, alive []nameHash) []string {
	var best [2]nameHash
	var score [2]uint64
	n := 0
	for _, m := range alive {
		sc := mix(m.h ^ uint64(id))
		switch {
		case n < 2:
			best[n], score[n] = m, sc
			n++
			if n == 2 && (score[1] > score[0] || score[1] == score[0] && best[1].name < best[0].name) {
				best[0], best[1], score[0], score[1] = best[1], best[0], score[1], score[0]
			}
		case sc > score[0] || sc == score[0] && m.name < best[0].name:
			best[1], score[1] = best[0], score[0]
			best[0], score[0] = m, sc
		case sc > score[1] || sc == score[1] && m.name < best[1].name:
			best[1], score[1] = m, sc
		}
	}
	out := make([]string, n)
	for i := range n {
		out[i] = best[i].name
	}
	return out
}

// nameHash is a member name with its hash, worked out once per view.
type nameHash struct {
	name string
	h    uint64
}

// mix is splitmix64's finalizer: FNV alone mixes the low bits poorly.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// aliveList lists the alive members of the tree (the node itself
// included), sorted, with their hashes.
func (s *state) aliveList() []nameHash {
	out := []nameHash{{name: s.self, h: uint64(KeyID(s.self))}}
	for n := range s.nodes {
		if n != s.self && s.alive(n) {
			out = append(out, nameHash{name: n, h: uint64(KeyID(n))})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// home tells the state of a check's home node: StateAlive, StateDead or
// StateLeft for a node of the tree known as a member (or not seen yet,
// before the fleet settled), "" for none (no agent there, or no node at
// all): probed by others.
func (s *state) home(h string) MemberState {
	if s.alive(h) {
		return StateAlive
	}
	if m := s.members[h]; m != nil && s.isNode(h) {
		return m.state
	}
	if !s.settled && s.isNode(h) {
		return StateLeft // not seen yet: maybe still joining
	}
	return ""
}

// view works out which of the tree's checks are out. It costs what fails
// and what runs on dead nodes, not what the tree checks: it runs on every
// table received. size is a guess of how many are out (the last view's):
// the map is made that big at once. The checks of one owner share their
// By.
func (s *state) view(alive []nameHash, size int) *View {
	v := &View{Out: make(map[string]Why, size)}
	dead, suspect, ever, static := s.failStatic()
	v.FailStatic, v.Dead, v.Suspect, v.Ever = static, dead, suspect, ever
	has := func(owner string, id ID) bool {
		if owner == s.self {
			return s.own.ids[id]
		}
		t := s.tables[owner]
		return t != nil && t.ids[id]
	}
	visit := func(owner string, ids map[ID]bool) {
		var self []string // By of the owner's own checks, made once
		owned := func() []string {
			if self == nil {
				self = []string{owner}
			}
			return self
		}
		for id := range ids {
			c, ok := s.checks[id]
			if !ok {
				continue
			}
			switch s.home(c.Node) {
			case StateAlive:
				if c.Node == owner {
					v.Out[c.Key] = Why{Reason: ReasonProbe, By: owned()}
				}
			case StateDead:
				if static && c.Node == owner {
					v.Out[c.Key] = Why{Reason: ReasonProbe, By: owned()}
				}
			case StateLeft:
				// A member that left on purpose (a restart, a drain): its
				// endpoints follow the tree until it is back.
			default:
				by := probers(id, alive)
				out := slices.Contains(by, owner)
				for _, p := range by {
					out = out && has(p, id)
				}
				if out {
					v.Out[c.Key] = Why{Reason: ReasonProbe, By: by}
				}
			}
		}
	}
	visit(s.self, s.own.ids)
	for owner, t := range s.tables {
		if s.isNode(owner) {
			visit(owner, t.ids)
		}
	}
	if !static {
		for h, m := range s.members {
			if m.state != StateDead || !s.isNode(h) {
				continue
			}
			by := []string{h}
			for _, id := range s.byHome[h] {
				v.Out[s.checks[id].Key] = Why{Reason: ReasonDead, By: by}
			}
		}
	}
	return v
}

// probed lists the check keys this node probes, sorted: those of the
// endpoints on it, and the agentless ones assigned to it.
// It costs the node's own checks and the agentless ones, not the tree's:
// it runs on every change of the membership.
func (s *state) probed(alive []nameHash) []string {
	var keys []string
	for h, ids := range s.byHome {
		if h != s.self && s.home(h) != "" {
			continue // a member's, alive or not: not probed here
		}
		for _, id := range ids {
			if h == s.self || slices.Contains(probers(id, alive), s.self) {
				keys = append(keys, s.checks[id].Key)
			}
		}
	}
	sort.Strings(keys)
	return keys
}

// View is the fleet's verdict on the tree's checks at one moment. It is
// never changed once made: Fleet hands out a new one on each change.
type View struct {
	// Out are the check keys (probe.Target.Key) out of their Services on
	// every node, with the reason: the owner's probe fails, or every
	// assigned prober's does (an agentless endpoint), or the node the
	// endpoint runs on is dead. This node's own failing checks are in it.
	Out map[string]Why
	// Probe are the check keys this node probes, sorted: those of the
	// endpoints on it, and the agentless ones assigned to it.
	Probe []string
	// FailStatic tells that Dead and Suspect of the Ever tree nodes seen
	// as members are dead or suspect, more than half: dead nodes'
	// endpoints are not taken out for their death (their last probe
	// results stand).
	FailStatic          bool
	Dead, Suspect, Ever int
}

// Probes tells whether this node probes the check key.
func (v *View) Probes(key string) bool {
	_, ok := slices.BinarySearch(v.Probe, key)
	return ok
}
