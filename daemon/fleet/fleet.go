// Package fleet shares readiness among the node agents of a fleet by
// gossip (hashicorp/memberlist): who is a member, which checks fail on
// the node that owns them, and which nodes are dead.
//
// Each node probes the endpoints whose Pod runs on it, and the endpoints
// without an agent on their node are probed by two alive members picked by
// rendezvous hashing; each node publishes the set of its checks that fail
// (its table, versioned). Every node works out of the tables and the
// membership a View: the checks out of their Services everywhere. Gossip
// only takes endpoints out of what the tree gives, never adds one. The pure
// logic (tables, versions, claims, rendezvous, fail static) is in state;
// Fleet is the memberlist glue. docs/fleet.md has the design.
package fleet

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// Config configures a Fleet.
type Config struct {
	// Name is the member's name: the node's name, as the tree's Node
	// objects name it.
	Name string
	// BindAddr is IP:PORT to listen on, UDP and TCP (--gossip-listen).
	// Ignored when Transport is set.
	BindAddr string
	// Join are members' IP:PORT to join through (--join); tried again
	// while this node sees fewer members than it has seen.
	Join []string
	// Keys encrypt the gossip (AES-GCM); the first is the primary, which
	// encrypts, every key decrypts (ReadKeyFile). Nil only with Insecure.
	Keys [][]byte
	// Insecure allows gossip in the clear (--gossip-insecure).
	Insecure bool
	// Label separates fleets sharing a network: a packet with another
	// label is dropped. Empty: "netspec".
	Label string
	// Tree is the tree's Node names and checks as of the sync before New
	// (SetTree follows); nil is none yet: every other member is refused
	// until SetTree.
	Tree *Tree
	// Generation orders this run's tables after an earlier run's of the
	// same node: 0 is the start time in nanoseconds.
	Generation uint64
	// Transport replaces UDP and TCP on BindAddr (tests, the
	// simulation).
	Transport memberlist.NodeAwareTransport
	// Tune changes memberlist's configuration last (tests, the
	// simulation: faster or slower timers). Nil keeps memberlist's LAN
	// defaults, with DeadNodeReclaimTime set (see New).
	Tune func(*memberlist.Config)
	// Logger gets the fleet's log and memberlist's (nil: discarded).
	Logger *slog.Logger
	// OnChange is called with the new View after it changed: never
	// concurrently, calls may be merged; it must not block long.
	OnChange func(*View)
}

// DefaultLabel is the label of a fleet whose Config gives none.
const DefaultLabel = "netspec"

// deadNodeReclaim lets a node take its name back from its dead self at a
// new address (a re-addressed or restarted node): memberlist's default, 0,
// refuses it forever.
const deadNodeReclaim = time.Second

// ErrNoKey is New's error when gossip would go in the clear without
// Insecure.
var ErrNoKey = errors.New("gossip without a key: give a key file, or allow gossip in the clear")

// Fleet is a member of the fleet. Its methods are safe for concurrent use.
//
// Lock order: f.mu is never held while calling memberlist, which calls
// the delegate with its own locks held.
type Fleet struct {
	cfg   Config
	log   *slog.Logger
	ml    *memberlist.Memberlist
	mc    *memberlist.Config // as memberlist runs with it: never changed
	queue *memberlist.TransmitLimitedQueue
	tr    *countingTransport
	rd    *packetReader // of the packets through tr: suspicions
	t     traffic
	c     counters

	mu        sync.Mutex
	st        *state
	meta      Meta
	alive     []nameHash // of the last membership change
	probe     []string   // what this node probes, of the last membership or tree change
	needProbe bool       // probe must be worked out again
	probedAt  time.Time  // when probe was worked out last
	// probeEvery bounds how often probe is worked out (it costs the
	// agentless checks times the members): membership changes come in
	// bursts when a fleet starts.
	probeEvery time.Duration
	probeLater bool // a remake is set for when probeEvery has passed
	// viewEvery bounds how often a view is made: tables come in bursts
	// (a gossip packet carries many), each view costs what is out, and
	// OnChange's work follows each.
	viewEvery time.Duration

	view    atomic.Pointer[View]
	changed chan struct{} // a new view is to be made (cap 1)
	metaCh  chan struct{} // the meta changed (cap 1)
	deaths  chan death    // declared by this node's memberlist, to be told (death.go)
	done    chan struct{}
	wg      sync.WaitGroup
}

// New starts a member: it listens, joins (in the background, retrying)
// and gossips until Leave or Shutdown.
func New(cfg Config) (*Fleet, error) {
	if cfg.Name == "" {
		return nil, errors.New("fleet: no member name")
	}
	if len(cfg.Keys) == 0 && !cfg.Insecure {
		return nil, ErrNoKey
	}
	if cfg.Generation == 0 {
		cfg.Generation = uint64(time.Now().UnixNano())
	}
	if cfg.Label == "" {
		cfg.Label = DefaultLabel
	}
	f := &Fleet{cfg: cfg, log: cfg.Logger, changed: make(chan struct{}, 1), metaCh: make(chan struct{}, 1),
		deaths: make(chan death, maxDeaths), done: make(chan struct{}), needProbe: true}
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	f.st = newState(cfg.Name, cfg.Generation)
	if cfg.Tree != nil {
		f.st.setTree(cfg.Tree)
	}

	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.Name
	mc.Label = cfg.Label
	mc.DeadNodeReclaimTime = deadNodeReclaim
	mc.Logger = newLogLogger(f.log)
	d := &delegate{f: f}
	mc.Delegate, mc.Events, mc.Alive, mc.Merge, mc.Conflict = d, d, d, d, d
	if len(cfg.Keys) > 0 {
		kr, err := keyring(cfg.Keys)
		if err != nil {
			return nil, err
		}
		mc.Keyring = kr
		mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	}
	inner := cfg.Transport
	if inner == nil {
		ap, err := netip.ParseAddrPort(cfg.BindAddr)
		if err != nil {
			return nil, fmt.Errorf("gossip listen address %q: want IP:PORT: %w", cfg.BindAddr, err)
		}
		nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{
			BindAddrs: []string{ap.Addr().String()}, BindPort: int(ap.Port()), Logger: mc.Logger})
		if err != nil {
			return nil, fmt.Errorf("gossip listen on %s: %w", cfg.BindAddr, err)
		}
		inner = nt
		mc.BindAddr, mc.BindPort = ap.Addr().String(), int(ap.Port())
		mc.AdvertiseAddr, mc.AdvertisePort = mc.BindAddr, mc.BindPort
	}
	f.tr = newCountingTransport(inner, &f.t)
	mc.Transport = f.tr
	if cfg.Tune != nil {
		cfg.Tune(mc)
	}
	f.mc, f.rd = mc, newPacketReader(mc)
	watch := f.watchPacket
	f.tr.watch.Store(&watch)
	f.queue = &memberlist.TransmitLimitedQueue{NumNodes: f.numMembers, RetransmitMult: mc.RetransmitMult}
	f.view.Store(&View{Out: map[string]Why{}})
	ml, err := memberlist.Create(mc)
	if err != nil {
		f.tr.Shutdown()
		return nil, fmt.Errorf("gossip: %w", err)
	}
	f.ml = ml
	f.probeEvery = mc.ProbeInterval
	f.viewEvery = mc.GossipInterval / 2
	settle := time.AfterFunc(mc.PushPullInterval, func() {
		f.mu.Lock()
		f.st.settled, f.needProbe = true, true
		f.mu.Unlock()
		f.signal()
	})
	go func() {
		<-f.done
		settle.Stop()
	}()
	f.publish()
	f.wg.Add(2)
	go f.loop()
	go f.joinLoop(5*mc.ProbeInterval, mc.PushPullInterval)
	f.signal()
	return f, nil
}

// numMembers is the queue's view of the fleet's size.
func (f *Fleet) numMembers() int {
	if f.ml == nil {
		return 1
	}
	return f.ml.NumMembers()
}

// SetTree sets the tree's Node names (who may be a member) and checks,
// after each sync of the watcher.
func (f *Fleet) SetTree(t *Tree) {
	f.mu.Lock()
	f.st.setTree(t)
	f.needProbe = true
	f.mu.Unlock()
	f.signal()
}

// SetLocal sets the checks this node probes that fail now (keys of
// View.Probe); a change is published to the fleet.
func (f *Fleet) SetLocal(failing []string) {
	f.mu.Lock()
	changed := f.st.setLocal(failing)
	f.meta.Failing = len(f.st.own.ids)
	f.mu.Unlock()
	if changed {
		f.publish()
		f.signal()
	}
}

// SetRevision sets what the node's metadata says: the revision applied
// and the number of checks it probes.
func (f *Fleet) SetRevision(revision string, checks int) {
	f.mu.Lock()
	changed := f.meta.Revision != revision || f.meta.Checks != checks
	f.meta.Revision, f.meta.Checks = revision, checks
	f.mu.Unlock()
	if changed {
		select {
		case f.metaCh <- struct{}{}:
		default:
		}
	}
}

// View is the latest view: which checks are out and which this node
// probes. Never nil; not to be changed.
func (f *Fleet) View() *View { return f.view.Load() }

// publish queues this node's table, each part under its name so that a
// newer version replaces one not yet sent.
func (f *Fleet) publish() {
	f.mu.Lock()
	v, ids := f.st.own.v, f.st.ownIDs()
	f.mu.Unlock()
	for i, msg := range encodeParts(f.cfg.Name, v, ids) {
		f.queue.QueueBroadcast(&broadcast{name: f.cfg.Name + "/" + strconv.Itoa(i), msg: msg})
	}
	f.c.published.Add(1)
}

// signal asks the loop for a new view.
func (f *Fleet) signal() {
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

// loop makes views, updates the metadata and tells deaths, one at a
// time; a view at most every viewEvery (the changes meanwhile make one
// view: a flip's latency grows by half a gossip interval at most).
func (f *Fleet) loop() {
	defer f.wg.Done()
	// After a view, changed is nil until wait fires: the signals
	// meanwhile merge into one.
	var wait <-chan time.Time
	changed := f.changed
	for {
		select {
		case <-f.done:
			return
		case <-changed:
			f.remake()
			changed, wait = nil, time.After(f.viewEvery)
		case <-wait:
			changed, wait = f.changed, nil
		case <-f.metaCh:
			// UpdateNode queues the update, then waits for its first
			// sending, which nothing here needs: the shortest wait. An
			// error only says it is not sent yet.
			f.ml.UpdateNode(time.Nanosecond)
		case d := <-f.deaths:
			f.tellDeath(d)
		}
	}
}

// remake works out a new view and hands it on if it changed.
func (f *Fleet) remake() {
	f.mu.Lock()
	if f.needProbe {
		if wait := f.probeEvery - time.Since(f.probedAt); wait > 0 {
			if !f.probeLater {
				f.probeLater = true
				time.AfterFunc(wait, func() {
					f.mu.Lock()
					f.probeLater = false
					f.mu.Unlock()
					f.signal()
				})
			}
		} else {
			f.alive = f.st.aliveList()
			f.probe = f.st.probed(f.alive)
			f.needProbe, f.probedAt = false, time.Now()
		}
	}
	f.st.expire(time.Now())
	v := f.st.view(f.alive, len(f.view.Load().Out))
	v.Probe = f.probe
	f.mu.Unlock()
	old := f.view.Load()
	if old != nil && viewEqual(old, v) {
		return
	}
	if v.FailStatic != old.FailStatic {
		if v.FailStatic {
			f.log.Warn("fail static: more than half of the fleet's nodes are dead or suspect; dead nodes' endpoints are not taken out for it",
				"dead", v.Dead, "suspect", v.Suspect, "members", v.Ever)
		} else {
			f.log.Info("fail static ends: dead nodes' endpoints are out again", "dead", v.Dead, "suspect", v.Suspect, "members", v.Ever)
		}
	}
	f.view.Store(v)
	f.c.views.Add(1)
	if f.cfg.OnChange != nil {
		f.cfg.OnChange(v)
	}
}

func viewEqual(a, b *View) bool {
	return a.FailStatic == b.FailStatic && a.Dead == b.Dead && a.Suspect == b.Suspect && a.Ever == b.Ever && slices.Equal(a.Probe, b.Probe) &&
		len(a.Out) == len(b.Out) && func() bool {
		for k, w := range a.Out {
			if o, ok := b.Out[k]; !ok || o.Reason != w.Reason || !slices.Equal(o.By, w.By) {
				return false
			}
		}
		return true
	}()
}

// joinLoop joins through cfg.Join, every retry until a member answers,
// and again every retry for the first rejoin after that (members starting
// together may join through a member before it knows the others, and the
// alive messages of those may have stopped spreading: a push/pull with
// the join members hands over what they learned since). Then, every
// rejoin while members seen earlier are dead, it joins one of them
// (reconnect): memberlist stops gossiping to dead members after
// GossipToTheDeadTime, so a healed partition stays split without it.
func (f *Fleet) joinLoop(retry, rejoin time.Duration) {
	defer f.wg.Done()
	joined := len(f.cfg.Join) == 0 // nothing to join through: the first member
	var joinedAt, last time.Time
	t := time.NewTicker(retry)
	defer t.Stop()
	for {
		switch {
		case !joined || !joinedAt.IsZero() && time.Since(joinedAt) < rejoin:
			n, err := f.ml.Join(f.cfg.Join)
			switch {
			case err != nil && n == 0:
				f.log.Warn("gossip: cannot join yet", "join", f.cfg.Join, "err", err)
			case !joined:
				joined, joinedAt = true, time.Now()
				f.log.Info("gossip: joined", "through", n, "members", f.ml.NumMembers())
			}
		case time.Since(last) >= rejoin:
			last = time.Now()
			if addr := f.reconnectTo(rand.Float64(), rand.Float64()); addr != "" {
				f.ml.Join([]string{addr}) // a dead member that does not answer is still dead
			}
		}
		select {
		case <-f.done:
			return
		case <-t.C:
		}
	}
}

// reconnectTo picks the address of a dead member to join, or "" for none
// this time, as serf's reconnect does: with the probability dead / alive,
// so that the fleet as a whole tries about one join per dead member and
// rejoin, and a member cut off from most (many dead, few alive) tries
// every time. A dead member rather than the join members: those may be
// on this side of the partition, and every member joining them would put
// all the push/pulls on them. chance and pick are uniform in [0, 1): the
// first decides whether to join, the second which dead member.
func (f *Fleet) reconnectTo(chance, pick float64) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	dead := f.st.deadMembers()
	alive := len(f.st.aliveList())
	if len(dead) == 0 || chance*float64(alive) >= float64(len(dead)) {
		return ""
	}
	return f.st.members[dead[min(len(dead)-1, int(pick*float64(len(dead))))]].addr
}

// Member is a member as status --fleet shows it: State is StateAlive,
// StateSuspect, StateDead or StateLeft.
type Member struct {
	Name     string      `json:"name"`
	State    MemberState `json:"state"`
	Address  string      `json:"address"`
	Revision string      `json:"revision,omitempty"`
	Checks   int         `json:"checks"`
	Failing  int         `json:"failing"`
	// Since is when the member entered its state, as this node saw.
	Since time.Time `json:"since"`
}

// Members lists the members this node knows, by name; this node first.
func (f *Fleet) Members() []Member {
	addr := f.Addr() // memberlist's lock before ours, never inside: it calls us with its lock held
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st.expire(time.Now())
	out := []Member{{Name: f.cfg.Name, State: StateAlive, Address: addr,
		Revision: f.meta.Revision, Checks: f.meta.Checks, Failing: len(f.st.own.ids)}}
	if m := f.st.members[f.cfg.Name]; m != nil {
		out[0].Since = m.since
	}
	var rest []Member
	for name, m := range f.st.members {
		if name == f.cfg.Name {
			continue
		}
		st, since := m.state, m.since
		if t, ok := f.st.suspect(name); ok {
			st, since = StateSuspect, t
		}
		rest = append(rest, Member{Name: name, State: st, Address: m.addr, Revision: m.meta.Revision,
			Checks: m.meta.Checks, Failing: m.meta.Failing, Since: since})
	}
	sort.Slice(rest, func(i, j int) bool { return rest[i].Name < rest[j].Name })
	return append(out, rest...)
}

// Leave tells the fleet this node leaves on purpose (a restart, a
// drain), so that its endpoints follow the tree rather than go out as a
// dead node's; then it stops (Shutdown). timeout bounds each broadcast.
func (f *Fleet) Leave(timeout time.Duration) error {
	f.mu.Lock()
	f.meta.Leaving = true
	f.mu.Unlock()
	err := f.ml.UpdateNode(timeout)
	f.pushLeaving(timeout)
	if e := f.ml.Leave(timeout); e != nil {
		err = errors.Join(err, e)
	}
	return errors.Join(err, f.Shutdown())
}

// pushLeaving hands this node's state, leaving set, to every member over
// TCP (a push/pull, as a join makes) before the leave goes out by gossip:
// memberlist tells a delegate nothing that tells a leave from a death, so
// a member that heard the leave before the metadata saying leaving would
// take this node for dead. At most 16 at once; it waits no longer than
// timeout, and a member it misses hears the metadata by gossip.
func (f *Fleet) pushLeaving(timeout time.Duration) {
	self := f.ml.LocalNode().Name
	var addrs []string
	for _, n := range f.ml.Members() {
		if n.Name != self {
			addrs = append(addrs, n.Address())
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		for _, a := range addrs {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				f.ml.Join([]string{a}) // a member it cannot reach hears it by gossip
			})
		}
		wg.Wait()
	}()
	select {
	case <-done:
	case <-time.After(timeout):
	}
}

// Shutdown stops gossiping at once, without telling the fleet: the others
// find this node dead.
func (f *Fleet) Shutdown() error {
	select {
	case <-f.done:
		return nil
	default:
	}
	close(f.done)
	err := f.ml.Shutdown()
	f.wg.Wait()
	return err
}

// Addr is the address the member is reached at (IP:PORT).
func (f *Fleet) Addr() string { return f.ml.LocalNode().Address() }

// broadcast is one part of a table, queued under its owner and part.
type broadcast struct {
	name string
	msg  []byte
}

var _ memberlist.NamedBroadcast = (*broadcast)(nil)

func (b *broadcast) Invalidates(memberlist.Broadcast) bool { return false }
func (b *broadcast) Message() []byte                       { return b.msg }
func (b *broadcast) Finished()                             {}
func (b *broadcast) Name() string                          { return b.name }

// delegate is memberlist's side of a Fleet.
type delegate struct{ f *Fleet }

func (d *delegate) NodeMeta(limit int) []byte {
	d.f.mu.Lock()
	m := d.f.meta
	d.f.mu.Unlock()
	b := m.encode()
	if len(b) > limit {
		m.Revision = ""
		b = m.encode()
	}
	return b
}

// NotifyMsg takes a part of a table; it runs in memberlist's receive
// loop: no blocking.
func (d *delegate) NotifyMsg(b []byte) {
	f := d.f
	f.c.received.Add(1)
	if len(b) > maxPartSize {
		f.c.drop(dropOversized)
		return
	}
	p, err := decodePart(b)
	if err != nil {
		f.c.drop(dropMalformed)
		f.log.Debug("gossip: dropped a malformed message", "err", err)
		return
	}
	f.mu.Lock()
	own := f.st.own.v
	result, dropped := f.st.offer(p)
	republish := own != f.st.own.v
	f.mu.Unlock()
	f.c.claims.Add(uint64(dropped))
	switch result {
	case offerApplied, offerPart:
		// The first receipt: gossip it on, as memberlist does not.
		f.queue.QueueBroadcast(&broadcast{name: p.owner + "/" + strconv.Itoa(p.index), msg: slices.Clone(b)})
		f.c.relayed.Add(1)
		if result == offerApplied {
			f.c.applied.Add(1)
			f.signal()
		}
	case offerOld:
		f.c.drop(dropOld)
	case offerStranger:
		f.c.drop(dropStranger)
	case offerDuplicate:
		f.c.duplicates.Add(1)
	}
	if republish {
		f.publish()
	}
}

func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte {
	msgs := d.f.queue.GetBroadcasts(overhead, limit)
	n := 0
	for _, m := range msgs {
		n += len(m)
	}
	d.f.c.sent.Add(uint64(len(msgs)))
	d.f.c.sentBytes.Add(uint64(n))
	return msgs
}

// LocalState is every complete table known, this node's own included:
// what a joining node or a push/pull partner gets.
func (d *delegate) LocalState(join bool) []byte {
	f := d.f
	f.c.pushPulls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	tables := []storedTable{{owner: f.cfg.Name, v: f.st.own.v, ids: f.st.ownIDs()}}
	owners := make([]string, 0, len(f.st.tables))
	for o := range f.st.tables {
		owners = append(owners, o)
	}
	sort.Strings(owners)
	for _, o := range owners {
		t := f.st.tables[o]
		tables = append(tables, storedTable{owner: o, v: t.v, ids: sortedIDs(t.ids)})
	}
	return encodeState(tables)
}

func (d *delegate) MergeRemoteState(b []byte, join bool) {
	f := d.f
	tables, err := decodeState(b)
	if err != nil {
		f.c.drop(dropMalformed)
		f.log.Debug("gossip: dropped a malformed state", "err", err)
		return
	}
	f.mu.Lock()
	own := f.st.own.v
	applied, dropped := 0, 0
	for _, t := range tables {
		ok, n := f.st.merge(t.owner, t.v, t.ids)
		dropped += n
		if ok {
			applied++
		}
	}
	republish := own != f.st.own.v
	f.mu.Unlock()
	f.c.claims.Add(uint64(dropped))
	f.c.applied.Add(uint64(applied))
	f.c.merged.Add(uint64(applied))
	if applied > 0 {
		f.signal()
	}
	if republish {
		f.publish()
	}
}

func (d *delegate) NotifyJoin(n *memberlist.Node)   { d.member(n, StateAlive) }
func (d *delegate) NotifyUpdate(n *memberlist.Node) { d.member(n, StateAlive) }

// NotifyLeave: memberlist says the same of a member that died and of one
// that left; the meta's Leaving, set before leaving, tells them apart.
func (d *delegate) NotifyLeave(n *memberlist.Node) {
	meta, _ := decodeMeta(n.Meta)
	st := StateDead
	if meta.Leaving {
		st = StateLeft
	}
	d.member(n, st)
}

func (d *delegate) member(n *memberlist.Node, st MemberState) {
	f := d.f
	meta, err := decodeMeta(n.Meta)
	if err != nil {
		f.c.drop(dropMalformed)
	}
	f.mu.Lock()
	// The state before: setMember changes the member in place.
	var was MemberState
	if old := f.st.members[n.Name]; old != nil {
		was = old.state
	}
	if st == StateAlive && meta.Leaving {
		// Alive and leaving: still alive until its leave arrives.
		st = StateAlive
	}
	f.st.setMember(n.Name, n.Address(), st, time.Now(), meta)
	changed := was != st
	// Its incarnation as the membership messages told it, the one
	// memberlist declared it dead at (it may know a newer one from a
	// push/pull: then the dead message is ignored).
	died := death{node: n.Name, inc: f.st.incs[n.Name]}
	if changed {
		f.needProbe = true
		if st == StateAlive && was != "" {
			// Back: its table is the one it publishes now, not the last
			// run's (a restart starts a new generation anyway).
			f.log.Info("gossip: member back", "node", n.Name, "address", n.Address(), "was", was)
		}
	}
	f.mu.Unlock()
	if changed {
		switch st {
		case StateDead:
			f.log.Warn("gossip: member dead", "node", n.Name, "address", n.Address())
			f.noteDeath(died)
		case StateLeft:
			f.log.Info("gossip: member left", "node", n.Name, "address", n.Address())
		}
		f.signal()
	}
}

// NotifyAlive refuses a member no Node of the tree names.
func (d *delegate) NotifyAlive(n *memberlist.Node) error {
	return d.f.allow(n.Name, n.Address())
}

// NotifyMerge refuses to merge with a fleet none of whose alive members
// is named by the tree (another fleet, or a stranger joining); single
// strangers among known nodes are refused by NotifyAlive.
func (d *delegate) NotifyMerge(peers []*memberlist.Node) error {
	var err error
	for _, p := range peers {
		if p.State != memberlist.StateAlive || p.Name == d.f.cfg.Name {
			continue
		}
		e := d.f.allow(p.Name, p.Address())
		if e == nil {
			return nil
		}
		err = e
	}
	return err
}

// allow tells whether name may be a member; a refusal is logged and
// counted.
func (f *Fleet) allow(name, addr string) error {
	f.mu.Lock()
	ok := f.st.isNode(name)
	f.mu.Unlock()
	if ok {
		return nil
	}
	f.c.refused.Add(1)
	f.log.Warn("gossip: refused a member no Node of the tree names", "node", name, "address", addr)
	return fmt.Errorf("node %q is not in the tree", name)
}

func (d *delegate) NotifyConflict(existing, other *memberlist.Node) {
	d.f.log.Warn("gossip: a member's name is claimed from another address; taken over once the first is dead",
		"node", existing.Name, "address", existing.Address(), "other", other.Address())
}

// watchPacket reads the membership messages of a packet memberlist
// receives or sends (suspicion.go) and keeps the suspicions they tell.
// It runs on memberlist's packet paths: a packet that does not read is
// left to memberlist, which counts and drops it.
func (f *Fleet) watchPacket(buf []byte) {
	msgs, _, err := f.rd.read(buf)
	if err != nil || len(msgs) == 0 {
		return
	}
	now := time.Now()
	var suspected, cleared []string
	f.mu.Lock()
	timeout := suspicionTimeout(f.mc, len(f.st.members))
	for _, m := range msgs {
		_, was := f.st.suspect(m.node)
		if !f.st.gossiped(m, now, timeout) {
			continue
		}
		switch _, is := f.st.suspect(m.node); {
		case is && !was:
			suspected = append(suspected, m.node)
		case was && !is:
			cleared = append(cleared, m.node)
		}
	}
	f.mu.Unlock()
	for _, n := range suspected {
		f.log.Info("gossip: member suspect: it missed its probes; dead unless it refutes", "node", n)
		time.AfterFunc(timeout, f.signal) // its end, when no death nor refutation came
	}
	for _, n := range cleared {
		f.log.Info("gossip: member suspect no more: it refuted", "node", n)
	}
	if len(suspected)+len(cleared) > 0 {
		f.signal()
	}
}
