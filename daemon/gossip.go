package daemon

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"netspec.dev/netspec/daemon/fleet"
	"netspec.dev/netspec/daemon/probe"
	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/schema"
)

// GossipOptions make the watcher a member of a fleet (package fleet):
// readiness is shared by gossip among the nodes' agents. A node probes
// only the endpoints whose Pod runs on it and the agentless ones
// rendezvous hashing assigns to it; every node takes out what the fleet's
// view says is out (a probe failing on its owner, a dead node's
// endpoints), merged with its own probes.
type GossipOptions struct {
	// Listen is IP:PORT to gossip on, UDP and TCP (--gossip-listen).
	Listen string
	// Join are members' IP:PORT to join through (--join); tried again
	// until one answers, and again after a partition.
	Join []string
	// Keys encrypt the gossip (fleet.ReadKeyFile): the first encrypts,
	// every one decrypts. Empty only with Insecure.
	Keys [][]byte
	// Insecure allows gossip in the clear (--gossip-insecure).
	Insecure bool
}

// check validates the options: what New says of them.
func (g *GossipOptions) check(probes bool) error {
	if !probes {
		return fmt.Errorf("watch: gossip shares readiness probes: it needs the probes on")
	}
	// Port 0 would listen on a port the other members cannot know.
	if ap, err := netip.ParseAddrPort(g.Listen); err != nil || ap.Port() == 0 {
		return fmt.Errorf("watch: gossip listen address %q: want IP:PORT", g.Listen)
	}
	for _, j := range g.Join {
		if _, _, err := splitHostPort(j); err != nil {
			return fmt.Errorf("watch: gossip join address %q: want IP:PORT", j)
		}
	}
	if len(g.Keys) == 0 && !g.Insecure {
		return fmt.Errorf("watch: %w", fleet.ErrNoKey)
	}
	return nil
}

// splitHostPort splits IP:PORT or NAME:PORT.
func splitHostPort(s string) (host, port string, err error) {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 || i == len(s)-1 {
		return "", "", fmt.Errorf("%q: want HOST:PORT", s)
	}
	return s[:i], s[i+1:], nil
}

// member is what the watcher needs of a fleet.Fleet (a fake in tests).
type member interface {
	SetTree(nodes []string, checks []fleet.Check)
	SetLocal(failing []string)
	SetRevision(revision string, checks int)
	View() *fleet.View
	Members() []fleet.Member
	Leave(timeout time.Duration) error
}

var _ member = fleetMember{}

// memberRef holds the fleet member for the status server, which reads it
// from another goroutine than Run's.
type memberRef struct{ m member }

// leaveTimeout bounds each broadcast of leaving the fleet on shutdown.
const leaveTimeout = 2 * time.Second

// newMember starts the fleet member of the tree's nodes and checks
// (fleet.New; a fake in tests).
func newMember(cfg fleet.Config, nodes []string, checks []fleet.Check) (member, error) {
	cfg.Tree = fleet.NewTree(nodes, checks)
	f, err := fleet.New(cfg)
	if err != nil {
		return nil, err
	}
	return fleetMember{f}, nil
}

// fleetMember is a fleet.Fleet told the tree as the watcher knows it.
type fleetMember struct{ *fleet.Fleet }

func (m fleetMember) SetTree(nodes []string, checks []fleet.Check) {
	m.Fleet.SetTree(fleet.NewTree(nodes, checks))
}

// gossip follows a sync that read the tree and applied p: the fleet
// learns the tree's nodes and checks; the first time, the member starts
// (its nodes are known only now: before, it would refuse every member).
// When it cannot start (its port is taken), Run stops with the error.
func (w *Watcher) gossip(rd reading, p *plan.Plan) {
	if w.opts.Gossip == nil || rd.res == nil || rd.restaged {
		return
	}
	if err := w.gossipTree(rd, p); err != nil {
		select {
		case w.fatal <- err:
		default:
		}
	}
}

// gossipTree is gossip's work.
func (w *Watcher) gossipTree(rd reading, p *plan.Plan) error {
	nodes := treeNodes(rd.res.tree.Objects)
	checks := planChecks(p)
	if w.fleet != nil {
		w.fleet.SetTree(nodes, checks)
		return nil
	}
	g := w.opts.Gossip
	m, err := w.newMember(fleet.Config{
		Name: w.opts.Node, BindAddr: g.Listen, Join: g.Join, Keys: g.Keys, Insecure: g.Insecure,
		Logger: w.log, OnChange: func(*fleet.View) { w.kickProbe() },
	}, nodes, checks)
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	w.fleet = m
	w.fleetRef.Store(&memberRef{m: m})
	if c, ok := m.(prometheus.Collector); ok {
		w.metrics.reg.MustRegister(c)
	}
	w.log.Info("gossip: member of the fleet", "listen", g.Listen, "join", strings.Join(g.Join, ","),
		"encrypted", len(g.Keys) > 0, "nodes", len(nodes), "checks", len(checks))
	return nil
}

// leaveFleet tells the fleet this node leaves on purpose (a restart, a
// drain): its endpoints follow the tree on the other nodes, not go out as
// a dead node's.
func (w *Watcher) leaveFleet() {
	if w.fleet == nil {
		return
	}
	if err := w.fleet.Leave(leaveTimeout); err != nil {
		w.log.Warn("gossip: leaving the fleet", "err", err)
		return
	}
	w.log.Info("gossip: left the fleet")
}

// treeNodes are the names of the tree's Node objects, sorted.
func treeNodes(objs []*schema.Object) []string {
	var names []string
	for _, o := range objs {
		if o.Node != nil {
			names = append(names, o.Node.Metadata.Name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// planChecks are every check of p's endpoints, whichever nodes forward to
// them, with the node the endpoint runs on: every node gives the fleet
// the same checks from the same tree, so that rendezvous hashing assigns
// each agentless one alike everywhere.
func planChecks(p *plan.Plan) []fleet.Check {
	seen := map[string]bool{}
	var out []fleet.Check
	for i := range p.Services {
		s := &p.Services[i]
		for j := range s.Ports {
			for _, e := range s.Ports[j].Endpoints {
				for _, pr := range e.Probes {
					k := probe.Target{Addr: e.IP, Probe: pr}.Key()
					if !seen[k] {
						seen[k] = true
						out = append(out, fleet.Check{Key: k, Node: e.NodeName})
					}
				}
			}
		}
	}
	return out
}

// FleetStatus is the fleet as this node sees it, in Status (`netspec
// status --fleet`); nil without gossip.
type FleetStatus struct {
	// Members are the members known, this node first, then by name:
	// their state (alive, suspect, dead, left), address, the revision
	// they applied last and since when they are in their state. A suspect
	// member is one memberlist's failure detector suspects: alive until
	// it refutes, or dead.
	Members []fleet.Member `json:"members"`
	// Revisions count the alive and suspect members by the revision they
	// applied.
	Revisions []RevisionNodes `json:"revisions"`
	// Out are the endpoints out of their Services on this node because
	// the fleet says so: a probe failing on another node, or the node
	// the endpoint runs on dead (this node's own failing probes are in
	// Status.Probes).
	Out []FleetOut `json:"out"`
	// FailStatic tells that more than half of the tree's nodes seen as
	// members are dead or suspect (Dead and Suspect of Ever): this node
	// suspects itself cut off, and keeps dead nodes' endpoints.
	FailStatic bool `json:"failStatic"`
	Dead       int  `json:"dead"`
	Suspect    int  `json:"suspect"`
	Ever       int  `json:"ever"`
}

// Alive counts the members alive, as status prints beside the members
// known.
func (fs *FleetStatus) Alive() int { return fs.count(fleet.StateAlive) }

// Suspects counts the members suspect.
func (fs *FleetStatus) Suspects() int { return fs.count(fleet.StateSuspect) }

func (fs *FleetStatus) count(st fleet.MemberState) int {
	n := 0
	for _, m := range fs.Members {
		if m.State == st {
			n++
		}
	}
	return n
}

// RevisionNodes is how many alive or suspect members run a revision.
type RevisionNodes struct {
	Revision string `json:"revision"`
	Nodes    int    `json:"nodes"`
}

// FleetOut is an endpoint of a Service out for the fleet.
type FleetOut struct {
	Service  string `json:"service"`  // namespace/name
	Endpoint string `json:"endpoint"` // ip:port
	Probe    string `json:"probe"`    // as ProbeOut's
	// Reason is "probe" (a probe fails where it runs) or "nodeDead" (the
	// node the endpoint runs on is dead); By are the nodes that say so.
	Reason string   `json:"reason"`
	By     []string `json:"by"`
}

// live is st with the members and fail static as the fleet knows them
// now: the status is made at syncs, the membership changes between them.
func (st *FleetStatus) live(ref *memberRef) *FleetStatus {
	if st == nil || ref == nil {
		return st
	}
	c := *st
	c.Members = ref.m.Members()
	v := ref.m.View()
	c.FailStatic, c.Dead, c.Suspect, c.Ever = v.FailStatic, v.Dead, v.Suspect, v.Ever
	c.Revisions = revisionsOf(c.Members)
	return &c
}

// revisionsOf counts the alive and suspect members (those memberlist
// lists alive) by revision, by revision.
func revisionsOf(ms []fleet.Member) []RevisionNodes {
	n := map[string]int{}
	for _, m := range ms {
		if m.State == fleet.StateAlive || m.State == fleet.StateSuspect {
			n[m.Revision]++
		}
	}
	out := []RevisionNodes{}
	for r, c := range n {
		out = append(out, RevisionNodes{Revision: r, Nodes: c})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Revision < out[j].Revision })
	return out
}

// fleetReport follows a sync applied (p): it logs the endpoints the fleet
// took out or put back, puts them in the status, and tells the fleet the
// revision applied and how many checks this node probes.
func (w *Watcher) fleetReport(p *plan.Plan) {
	if w.fleet == nil {
		return
	}
	ps := w.probes
	out := ps.fleetOut(p)
	now := map[string]FleetOut{}
	for _, o := range out {
		k := o.Service + " " + o.Endpoint + " " + o.Probe
		now[k] = o
		if old, ok := w.fleetOut[k]; ok && old.Reason == o.Reason {
			continue
		}
		msg := "endpoint out: its readiness probe fails on " + strings.Join(o.By, " and ")
		if o.Reason == fleet.ReasonDead {
			msg = "endpoint out: the node it runs on is dead"
		}
		w.log.Warn(msg, "service", o.Service, "endpoint", o.Endpoint, "probe", o.Probe, "by", strings.Join(o.By, ","))
	}
	for k, o := range w.fleetOut {
		if _, ok := now[k]; !ok && hasEndpoint(p, o.Service, netip.MustParseAddrPort(o.Endpoint)) {
			w.log.Info("endpoint back in: the fleet no longer says it is out", "service", o.Service, "endpoint", o.Endpoint, "probe", o.Probe)
		}
	}
	w.fleetOut = now
	w.cur.Fleet = &FleetStatus{Out: out}
	if v := ps.fleet; v != nil {
		w.cur.Fleet.FailStatic, w.cur.Fleet.Dead, w.cur.Fleet.Suspect, w.cur.Fleet.Ever = v.FailStatic, v.Dead, v.Suspect, v.Ever
	}
	// The checks this node probes that fail: published when they
	// changed (a flip, or checks no longer probed here).
	w.fleet.SetLocal(slices.Sorted(maps.Keys(ps.failing)))
	rev := ""
	if w.cur.Revision != nil {
		rev = w.cur.Revision.ID
	}
	w.fleet.SetRevision(rev, ps.targets)
}

// fleetOut lists the endpoints of p out for the fleet's view and not for
// this node's own probes, by service, endpoint and probe.
func (ps *probes) fleetOut(p *plan.Plan) []FleetOut {
	out := []FleetOut{}
	if ps.fleet == nil || len(ps.fleet.Out) == 0 {
		return out
	}
	seen := map[outKey]bool{}
	endpointChecks(p, ps.fleetAddrs, func(s *plan.Service, e plan.Endpoint, pr plan.Probe, k string) {
		why, ok := ps.fleet.Out[k]
		key := outKey{s.Key(), e.AddrPort(), k}
		if !ok || ps.failing[k] || seen[key] {
			return
		}
		seen[key] = true
		out = append(out, FleetOut{Service: s.Key(), Endpoint: e.AddrPort().String(),
			Probe: ProbeString(pr, e.IP), Reason: why.Reason, By: slices.Clone(why.By)})
	})
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Service != b.Service {
			return a.Service < b.Service
		}
		if a.Endpoint != b.Endpoint {
			return a.Endpoint < b.Endpoint
		}
		return a.Probe < b.Probe
	})
	return out
}

// kickProbe asks Run for a sync "probe": a check flipped, or the fleet's
// view changed. It does not block.
func (w *Watcher) kickProbe() {
	w.probeKicked.CompareAndSwap(0, time.Now().UnixNano())
	select {
	case w.probeKick <- struct{}{}:
	default: // one is pending already
	}
}
