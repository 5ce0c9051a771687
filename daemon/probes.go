package daemon

import (
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/daemon/fleet"
	"netspec.dev/netspec/daemon/probe"
	"netspec.dev/netspec/plan"
)

// prober is what the watcher needs of a probe.Prober (a fake in tests).
type prober interface {
	Set(targets []probe.Target)
	// Failing returns the status of each check that fails now, by key.
	Failing() map[string]probe.Status
	Close()
}

// probes is the watcher's side of the readiness prober, owned by Run's
// goroutine: the checks it runs (each distinct address and probe of the
// plan once, however many Services select it) and which of them failed
// as of the last sync.
type probes struct {
	p prober
	// keys are the checks Set, by address.
	keys    map[netip.Addr][]string
	targets int // distinct checks Set
	// failing are the checks not ready as of the last sync, and
	// failingAddrs their addresses: the NotReady view reads them.
	failing      map[string]bool
	failingAddrs map[netip.Addr]bool
	// failOpen are the Services failing open as of the last sync.
	failOpen []string
	// out are the endpoints out for a failing probe after the last sync
	// (with their probe, described), for logging flips once.
	out map[outKey]string
	// recorded tells that the state dir's ProbeRecordFile holds out.
	recorded bool
	// execPods are the Pods (namespace/name) of the last reading with an
	// exec readinessProbe, which a node cannot run.
	execPods map[string]bool

	// gossip tells that the node is a member of a fleet: it probes only
	// the checks fleet says it owns (nothing before the fleet's first
	// view), and takes readiness from the fleet's view merged with its
	// own probes.
	gossip bool
	// fleet is the fleet's view the last sync used (nil: none yet), and
	// fleetAddrs the addresses of its checks out.
	fleet      *fleet.View
	fleetAddrs map[netip.Addr]bool
	// probed are the checks the fleet's view said this node probes when
	// the prober was last Set.
	probed []string
}

// unprobed counts the endpoint addresses of p that carry this node's
// traffic (as targetsOf) whose Pod has an exec readinessProbe: not
// probed from the node, the tree's Ready stands for them.
func (ps *probes) unprobed(p *plan.Plan) int {
	if len(ps.execPods) == 0 {
		return 0
	}
	seen := map[netip.Addr]bool{}
	for i := range p.Services {
		s := &p.Services[i]
		for j := range s.Ports {
			port := &s.Ports[j]
			for k, e := range port.Endpoints {
				if e.Pod == "" || !ps.execPods[e.Pod] || seen[e.IP] {
					continue
				}
				if s.Headless || carries(port, k) {
					seen[e.IP] = true
				}
			}
		}
	}
	return len(seen)
}

// carries tells whether the endpoint k of port carries traffic from this
// node: it is in the port's Cluster, External or ShortCircuit set.
func carries(port *plan.Port, k int) bool {
	return slices.Contains(port.Cluster, k) || slices.Contains(port.External, k) || slices.Contains(port.ShortCircuit, k)
}

// outKey is an endpoint of a Service out for one of its probes.
type outKey struct {
	service  string
	endpoint netip.AddrPort
	check    string // probe.Target key
}

func newProbes(p prober) *probes {
	return &probes{p: p, keys: map[netip.Addr][]string{}, failing: map[string]bool{},
		failingAddrs: map[netip.Addr]bool{}, out: map[outKey]string{}}
}

// targetsOf lists the distinct checks of a plan, in plan order: those
// of the endpoints that carry traffic from this node (in a port's Cluster,
// External or ShortCircuit set), of every endpoint of a headless Service (this node
// serves their DNS answers), and of the addresses in keep (failing now:
// out of their sets for that reason). An endpoint only other nodes use (a
// Local traffic policy, topology) is not probed here. With owns (a member
// of a fleet), the checks are those owns says this node probes, whichever
// nodes use them: the fleet tells the others.
func targetsOf(p *plan.Plan, keep map[netip.Addr]bool, owns func(key string) bool) (targets []probe.Target, keys map[netip.Addr][]string) {
	keys = map[netip.Addr][]string{}
	seen := map[string]bool{}
	for i := range p.Services {
		s := &p.Services[i]
		for j := range s.Ports {
			port := &s.Ports[j]
			for k, e := range port.Endpoints {
				if len(e.Probes) == 0 || owns == nil && !s.Headless && !keep[e.IP] && !carries(port, k) {
					continue
				}
				for _, pr := range e.Probes {
					t := probe.Target{Addr: e.IP, Probe: pr}
					k := t.Key()
					if seen[k] || owns != nil && !owns(k) {
						continue
					}
					seen[k] = true
					targets = append(targets, t)
					keys[e.IP] = append(keys[e.IP], k)
				}
			}
		}
	}
	return targets, keys
}

// set gives the prober the checks of p: those kept keep their state.
// Failing checks p no longer has are forgotten.
func (ps *probes) set(p *plan.Plan) {
	var owns func(string) bool
	if ps.gossip {
		owns = func(string) bool { return false } // no view yet: the fleet assigns
		ps.probed = nil
		if ps.fleet != nil {
			owns, ps.probed = ps.fleet.Probes, ps.fleet.Probe
		}
	}
	targets, keys := targetsOf(p, ps.failingAddrs, owns)
	ps.p.Set(targets)
	ps.keys, ps.targets = keys, len(targets)
	for k := range ps.failing {
		t, _, _ := strings.Cut(k, "\x00")
		if a, err := netip.ParseAddr(t); err != nil || !slices.Contains(keys[a], k) {
			delete(ps.failing, k)
		}
	}
	addrs := map[netip.Addr]bool{}
	for a := range ps.failingAddrs {
		for _, k := range keys[a] {
			if ps.failing[k] {
				addrs[a] = true
			}
		}
	}
	ps.failingAddrs = addrs
}

// probeReport follows a successful sync of p: it gives the prober the
// plan's checks (setTargets: unless only a check flipped, which leaves
// them as they are), logs each endpoint that went out of a Service for a
// failing probe or came back, and each Service that fails open or no
// longer does (failOpen, when compiled: p was compiled in this sync),
// and updates the metrics and the status.
func (w *Watcher) probeReport(p *plan.Plan, setTargets, compiled bool, failOpen []string) {
	ps := w.probes
	if setTargets || ps.assigned() {
		ps.set(p)
	}
	if compiled {
		for _, s := range failOpen {
			if !slices.Contains(ps.failOpen, s) {
				w.log.Warn("every endpoint of the Service fails its readiness probe on this node; keeping them all (fail open)", "service", s)
			}
		}
		for _, s := range ps.failOpen {
			if !slices.Contains(failOpen, s) {
				w.log.Info("leaving fail open: an endpoint of the Service passes its readiness probe on this node again; those failing are out", "service", s)
			}
		}
		ps.failOpen = failOpen
	}
	out, perService := ps.outOf(p)
	st, keys := ps.status(out)
	st.Unprobed = ps.unprobed(p)
	now := map[outKey]string{}
	for i, o := range st.Out {
		now[keys[i]] = o.Probe
		if _, ok := ps.out[keys[i]]; ok {
			continue
		}
		msg := "endpoint out for its readiness probe"
		if o.FailOpen {
			msg = "endpoint fails its readiness probe; kept, its Service fails open"
		}
		w.log.Warn(msg, "service", o.Service, "endpoint", o.Endpoint, "probe", o.Probe, "err", o.LastError)
	}
	for k, desc := range ps.out {
		if _, ok := now[k]; ok {
			continue
		}
		if !hasEndpoint(p, k.service, k.endpoint) {
			// Not back: gone with its Service, or from it.
			w.log.Info("endpoint out for its readiness probe left the plan (its Service or the endpoint left the tree)", "service", k.service, "endpoint", k.endpoint.String(), "probe", desc)
			continue
		}
		w.log.Info("endpoint back in: its readiness probe passes", "service", k.service, "endpoint", k.endpoint.String(), "probe", desc)
	}
	recorded := ps.recorded && len(now) == len(ps.out)
	for k, desc := range now {
		if d, ok := ps.out[k]; !ok || d != desc {
			recorded = false
		}
	}
	ps.out = now
	w.metrics.probeState(ps.targets, len(ps.failing), perService, len(ps.failOpen))
	w.cur.Probes = st
	if !recorded {
		// The endpoints out changed (or were never recorded): the record
		// follows the kernel, which holds them out now.
		err := writeProbeRecord(w.opts.StateDir, &ProbeRecord{Node: w.opts.Node, Written: time.Now().UTC().Truncate(time.Millisecond),
			Out: st.Out, FailOpen: st.FailOpen})
		ps.recorded = err == nil
		if err != nil {
			w.log.Warn("cannot record the endpoints out for failing probes in the state dir", "err", err)
		}
	}
}

// hasEndpoint tells whether the Service (namespace/name) of p has the
// endpoint on one of its ports.
func hasEndpoint(p *plan.Plan, service string, ep netip.AddrPort) bool {
	for i := range p.Services {
		s := &p.Services[i]
		if s.Key() != service {
			continue
		}
		for j := range s.Ports {
			for _, e := range s.Ports[j].Endpoints {
				if e.AddrPort() == ep {
					return true
				}
			}
		}
	}
	return false
}

// refresh reads which checks fail now (the prober's failing ones) and
// tells whether that changed since the last refresh. It costs what
// fails, not what is checked: it runs on every flip.
func (ps *probes) refresh() bool {
	failing := map[string]bool{}
	addrs := map[netip.Addr]bool{}
	for k, st := range ps.p.Failing() {
		failing[k] = true
		addrs[st.Target.Addr] = true
	}
	changed := len(failing) != len(ps.failing)
	if !changed {
		for k := range failing {
			if !ps.failing[k] {
				changed = true
				break
			}
		}
	}
	ps.failing, ps.failingAddrs = failing, addrs
	return changed
}

// assigned tells whether the fleet's view assigns this node other checks
// than those the prober was Set last.
func (ps *probes) assigned() bool {
	return ps.gossip && ps.fleet != nil && !slices.Equal(ps.probed, ps.fleet.Probe)
}

// setFleet takes the fleet's view v for the next sync and tells whether
// it is another than the one used last.
func (ps *probes) setFleet(v *fleet.View) bool {
	if v == ps.fleet {
		return false
	}
	ps.fleet = v
	ps.fleetAddrs = map[netip.Addr]bool{}
	for k := range v.Out {
		t, _, _ := strings.Cut(k, "\x00")
		if a, err := netip.ParseAddr(t); err == nil {
			ps.fleetAddrs[a] = true
		}
	}
	return true
}

// view is the compiler's view of the node's probes: an endpoint is not
// ready while one of its checks fails here, or the fleet's view says it
// is out. Addresses without a failing check are answered without working
// out a key; Failing lists them, so that a Restage works out again only
// the Services at addresses that failed then or fail now.
func (ps *probes) view() compiler.Options {
	addrs := ps.failingAddrs
	if len(ps.fleetAddrs) > 0 {
		addrs = maps.Clone(ps.failingAddrs)
		if addrs == nil {
			addrs = map[netip.Addr]bool{}
		}
		maps.Copy(addrs, ps.fleetAddrs)
	}
	o := compiler.Options{Failing: addrs}
	if o.Failing == nil {
		o.Failing = map[netip.Addr]bool{}
	}
	if len(addrs) == 0 {
		return o
	}
	failing := ps.failing
	var out map[string]fleet.Why
	if ps.fleet != nil {
		out = ps.fleet.Out
	}
	o.NotReady = func(ip netip.Addr, probes []plan.Probe) bool {
		if !addrs[ip] {
			return false
		}
		for _, pr := range probes {
			k := probe.Target{Addr: ip, Probe: pr}.Key()
			if _, ok := out[k]; ok || failing[k] {
				return true
			}
		}
		return false
	}
	return o
}

// outOf lists the endpoints of p out for a failing check, by Service, and
// how many distinct failing endpoint addresses each Service has.
func (ps *probes) outOf(p *plan.Plan) (out map[outKey]plan.Probe, perService map[string]int) {
	out, perService = map[outKey]plan.Probe{}, map[string]int{}
	if len(ps.failing) == 0 {
		return out, perService
	}
	addrs := map[string]map[netip.Addr]bool{}
	endpointChecks(p, ps.failingAddrs, func(s *plan.Service, e plan.Endpoint, pr plan.Probe, k string) {
		if !ps.failing[k] {
			return
		}
		out[outKey{s.Key(), e.AddrPort(), k}] = pr
		if addrs[s.Key()] == nil {
			addrs[s.Key()] = map[netip.Addr]bool{}
		}
		addrs[s.Key()][e.IP] = true
	})
	for svc, a := range addrs {
		perService[svc] = len(a)
	}
	return out, perService
}

// endpointChecks calls f with each check (and its key) of each endpoint of
// p at an address of addrs, Service by Service, but for the Services of
// another proxy that are not headless: nothing of this node's goes to
// their endpoints.
func endpointChecks(p *plan.Plan, addrs map[netip.Addr]bool, f func(s *plan.Service, e plan.Endpoint, pr plan.Probe, key string)) {
	for i := range p.Services {
		s := &p.Services[i]
		if s.ProxyName != "" && !s.Headless {
			continue
		}
		for j := range s.Ports {
			for _, e := range s.Ports[j].Endpoints {
				if !addrs[e.IP] {
					continue
				}
				for _, pr := range e.Probes {
					f(s, e, pr, probe.Target{Addr: e.IP, Probe: pr}.Key())
				}
			}
		}
	}
}

// ProbeStatus is the readiness probes' state in Status.
type ProbeStatus struct {
	// Checks is the number of distinct checks (address and probe) run,
	// and Failing how many of them fail.
	Checks  int `json:"checks"`
	Failing int `json:"failing"`
	// Unprobed counts the endpoints (addresses) this node forwards to
	// whose Pod has an exec readinessProbe, which runs inside the
	// container and not from the node: the tree's Ready stands for them.
	Unprobed int `json:"unprobed"`
	// Out are the endpoints out of their Services on this node for a
	// failing probe, by service and endpoint.
	Out []ProbeOut `json:"out"`
	// FailOpen are the Services (namespace/name) every endpoint of
	// which fails on this node: they are all kept.
	FailOpen []string `json:"failOpen"`

	// checks are the keys of Out's checks (probe.Target.Key), for
	// refreshing LastError and LastProbe from the prober when the status
	// is asked for.
	checks []string
}

// ProbeOut is an endpoint of a Service out for a failing probe (or kept,
// when its Service fails open).
type ProbeOut struct {
	Service  string    `json:"service"`  // namespace/name
	Endpoint string    `json:"endpoint"` // ip:port
	Probe    string    `json:"probe"`    // e.g. "httpGet http://10.244.1.11:8080/ready" (ProbeString)
	Since    time.Time `json:"since"`
	// LastError is the error of the latest failed probe, and LastProbe
	// when the latest probe finished: as of the status asked for, not
	// of the last sync.
	LastError string    `json:"lastError"`
	LastProbe time.Time `json:"lastProbe,omitzero"`
	FailOpen  bool      `json:"failOpen"` // kept: its Service fails open
}

// status builds the probe section of Status from out (outOf) and the
// prober's snapshot of the failing checks; keys[i] is the key of
// Out[i].
func (ps *probes) status(out map[outKey]plan.Probe) (st *ProbeStatus, keys []outKey) {
	st = &ProbeStatus{Checks: ps.targets, Failing: len(ps.failing), Out: []ProbeOut{}, FailOpen: slices.Clone(ps.failOpen)}
	if st.FailOpen == nil {
		st.FailOpen = []string{}
	}
	if len(out) == 0 {
		return st, nil
	}
	byKey := ps.p.Failing()
	for k := range out {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.service != b.service {
			return a.service < b.service
		}
		if a.endpoint != b.endpoint {
			return a.endpoint.Compare(b.endpoint) < 0
		}
		return a.check < b.check
	})
	for _, k := range keys {
		s := byKey[k.check]
		o := ProbeOut{Service: k.service, Endpoint: k.endpoint.String(), Probe: ProbeString(out[k], k.endpoint.Addr()),
			FailOpen: slices.Contains(ps.failOpen, k.service)}
		o.refresh(s)
		st.Out = append(st.Out, o)
		st.checks = append(st.checks, k.check)
	}
	return st, keys
}

// refresh sets what o says of its check's latest probe from s.
func (o *ProbeOut) refresh(s probe.Status) {
	if !s.Since.IsZero() {
		o.Since = s.Since.UTC().Truncate(time.Millisecond)
	}
	if s.LastError != "" {
		o.LastError = s.LastError
	}
	if !s.LastProbe.IsZero() {
		o.LastProbe = s.LastProbe.UTC().Truncate(time.Millisecond)
	}
}

// live is st with the latest probe of each endpoint out read from the
// prober now: the status is made at syncs, and a failing check does not
// sync again while it keeps failing, whatever its errors. A check that
// passes now keeps what the last sync said (its sync is under way).
func (st *ProbeStatus) live(p prober) *ProbeStatus {
	if st == nil || len(st.Out) == 0 || p == nil {
		return st
	}
	failing := p.Failing()
	c := *st
	c.Out = slices.Clone(st.Out)
	for i, k := range st.checks {
		if s, ok := failing[k]; ok {
			c.Out[i].refresh(s)
		}
	}
	return &c
}

// ProbeString describes pr as probed at addr: an httpGet's URL names the
// address it asks (its Host, else addr), as the request does.
func ProbeString(pr plan.Probe, addr netip.Addr) string {
	if pr.Action == plan.ProbeHTTPGet && pr.Host == "" {
		host := addr.String()
		if addr.Is6() {
			host = "[" + host + "]"
		}
		pr.Host = host
	}
	return pr.String()
}
