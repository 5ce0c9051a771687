package compiler

import (
	"maps"
	"net/netip"
	"reflect"
	"slices"

	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/schema"
)

// compileMemo is what CompileStaged keeps from one call to the next in a
// Memo: each Service's plan.Service with the inputs it was made from. A
// Service whose inputs are the same objects and values as last time gets
// the same plan.Service back (sharing its slices: plans are not changed
// after compiling).
//
// A plan.Service is made from the Service object, its allocation, the
// pods its selector picks (or, without a selector, its Endpoints object
// and EndpointSlices and the Pods their targetRefs name), and inputs every Service shares: the node, the
// zones of the Nodes and the Cluster spec. A change of a shared input
// empties the memo.
type compileMemo struct {
	shared   compileShared
	services map[*schema.Service]*compiledService
	// last is the last compilation, in plan order, for Restage.
	last struct {
		header     plan.Plan // FormatVersion, Node and Cluster
		objs       []*schema.Service
		compiled   []*compiledService
		namespaces []string
		// failing is the Options.Failing of the last compilation or
		// Restage (nil: unknown); byAddr indexes compiled by the
		// addresses of their probed endpoints, made by the first
		// Restage that needs it.
		failing map[netip.Addr]bool
		byAddr  map[netip.Addr][]int
	}
}

// compileShared are the inputs every Service's compilation reads.
type compileShared struct {
	node    plan.Node
	nodes   map[string]*schema.Node // zones and names (zoneOf)
	cluster schema.ClusterSpec      // service CIDRs (serviceFamilies)
}

// compiledService is one Service's plan.Service and what it was made of,
// the inputs by pointer: the slices are those of the compilation
// (selected pods, a Service's EndpointSlices), which nothing changes
// after.
type compiledService struct {
	alloc  *ServiceAlloc // nil: none
	pods   []*schema.Pod
	manual *manualInputs // nil: no Endpoints object or EndpointSlice
	// out is the plan.Service: the last plan's (hold), or, when that
	// plan has the view's, one of its own (own).
	out *plan.Service
	// view is out under the last NotReady view, nil when none of its
	// endpoints failed (probe.go): kept so that a view unchanged for
	// this Service gives the same plan.Service.
	view *probedService
	own  bool
}

// manualInputs are the inputs of a Service without a selector.
type manualInputs struct {
	endpoints *schema.Endpoints
	slices    []*schema.EndpointSlice
	refPods   []*schema.Pod // the Pods the targetRefs of endpoints and slices resolve to (refPods)
}

// hold points cs.out at p.Services[i] when that is the Service without a
// view, so that the memo and the plan share it; otherwise cs.out is made
// a copy of its own rather than pin an older plan's Services.
func (cs *compiledService) hold(p *plan.Plan, i int) {
	switch {
	case cs.view == nil:
		cs.out, cs.own = &p.Services[i], false
	case !cs.own:
		out := *cs.out
		cs.out, cs.own = &out, true
	}
}

// begin readies the memo for a compilation for node n: it keeps the
// Services of the last one only if the shared inputs are unchanged.
func (m *compileMemo) begin(c *compilation, n plan.Node) {
	shared := compileShared{node: n, nodes: c.nodes, cluster: c.checked.Cluster}
	if m.services == nil || !m.shared.node.Equal(n) || !maps.Equal(m.shared.nodes, c.nodes) ||
		!reflect.DeepEqual(m.shared.cluster, c.checked.Cluster) {
		m.services = nil
	}
	m.shared = shared
}

// inputs returns what compiling o reads besides the shared inputs.
func (c *compilation) inputs(o *schema.Service) *compiledService {
	in := &compiledService{}
	in.alloc = c.checked.Alloc.lookup(o.Metadata.Namespace, o.Metadata.Name)
	switch {
	case o.Spec.Type == "ExternalName":
		// no endpoints (service)
	case o.Spec.Selector.Len() > 0:
		in.pods = c.pods.servicePods(o)
	default:
		key := o.Metadata.Namespace + "/" + o.Metadata.Name
		if e, ss := c.endpoints[key], c.slices[key]; e != nil || len(ss) > 0 {
			in.manual = &manualInputs{endpoints: e, slices: ss, refPods: c.refPods(e, ss)}
		}
	}
	return in
}

// same tells whether two compilations of a Service read the same inputs.
func (a *compiledService) same(b *compiledService) bool {
	return slices.Equal(a.pods, b.pods) && a.manual.same(b.manual) && sameAlloc(a.alloc, b.alloc)
}

func (a *manualInputs) same(b *manualInputs) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.endpoints == b.endpoints && slices.Equal(a.slices, b.slices) && slices.Equal(a.refPods, b.refPods)
}

func sameAlloc(a, b *ServiceAlloc) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Namespace == b.Namespace && a.Name == b.Name &&
		slices.Equal(a.ClusterIPs, b.ClusterIPs) && slices.Equal(a.NodePorts, b.NodePorts) &&
		a.HealthCheckNodePort == b.HealthCheckNodePort && a.HealthCheckOrigin == b.HealthCheckOrigin
}

// lookup is Service without the copy, for reading only.
func (a *Allocations) lookup(namespace, name string) *ServiceAlloc {
	if a == nil {
		return nil
	}
	if i, ok := a.byKey[namespace+"/"+name]; ok {
		return &a.services[i]
	}
	return nil
}

// compile returns the compiled Service of o: the memo's when its inputs
// are unchanged, else a new one.
func (m *compileMemo) compile(c *compilation, o *schema.Service, n plan.Node) *compiledService {
	in := c.inputs(o)
	if last := m.services[o]; last != nil && last.same(in) {
		// The allocation is the same; hold this call's (Allocations are
		// not changed once made), so that the last ones can go.
		last.alloc = in.alloc
		return last
	}
	out := c.service(o, n)
	in.out, in.own = &out, true
	return in
}

// end keeps the Services of this compilation (compiled[i] is that of
// c.services[i]) for the next one.
func (m *compileMemo) end(c *compilation, compiled []*compiledService) {
	m.services = make(map[*schema.Service]*compiledService, len(compiled))
	objs := make([]*schema.Service, len(compiled))
	for i, cs := range compiled {
		m.services[c.services[i].Service] = cs
		objs[i] = c.services[i].Service
	}
	m.last.objs, m.last.compiled = objs, compiled
	m.last.byAddr = nil
}

// probedAddrs indexes Services by the addresses of their endpoints that
// have probes: the Services whose view an address's readiness can change.
func probedAddrs(compiled []*compiledService) map[netip.Addr][]int {
	out := map[netip.Addr][]int{}
	for i, cs := range compiled {
		for _, port := range cs.out.Ports {
			for _, e := range port.Endpoints {
				if len(e.Probes) > 0 {
					if s := out[e.IP]; len(s) == 0 || s[len(s)-1] != i {
						out[e.IP] = append(s, i)
					}
				}
			}
		}
	}
	return out
}

// IndexProbes builds now what the first Restage after a compilation with
// Options.Failing would build: the index of Services by the addresses of
// their probed endpoints (5–10 ms at 10,000 Services). A node agent calls
// it once a reload is done, so that the next probe flip does not pay for
// it. It does nothing when the index is built or cannot be used.
func (m *Memo) IndexProbes() {
	if l := &m.compile.last; l.compiled != nil && l.failing != nil && l.byAddr == nil {
		l.byAddr = probedAddrs(l.compiled)
	}
}

// Restage is the last CompileStaged (or CompileStagedWith) of m again,
// with another readiness view: the same tree, node and Services as
// compiled then, only the endpoints that o.NotReady fails out. It is what
// a node agent runs when a readiness probe flips and nothing else
// changed: no object is read or checked, and only the Services with
// failing endpoints are worked out again. ok is false when m has compiled
// nothing yet.
func (m *Memo) Restage(o Options) (st *Staged, ok bool) {
	l := &m.compile.last
	if l.compiled == nil {
		return nil, false
	}
	p := &plan.Plan{FormatVersion: l.header.FormatVersion, Node: l.header.Node, Cluster: l.header.Cluster}
	p.Services = make([]plan.Service, len(l.compiled))
	failOpen := make([]bool, len(l.compiled))
	// With both sets of failing addresses known, only the Services with
	// an endpoint at one of them can see their view change.
	var touched []bool
	if o.Failing != nil && l.failing != nil {
		if l.byAddr == nil {
			l.byAddr = probedAddrs(l.compiled)
		}
		touched = make([]bool, len(l.compiled))
		for _, set := range []map[netip.Addr]bool{l.failing, o.Failing} {
			for a := range set {
				for _, i := range l.byAddr[a] {
					touched[i] = true
				}
			}
		}
	}
	l.failing = o.Failing
	for i, cs := range l.compiled {
		p.Services[i] = *cs.out
		if touched == nil || touched[i] {
			cs.view = withView(l.objs[i], cs.out, p.Node, o.NotReady, cs.view)
		}
		if cs.view != nil {
			p.Services[i], failOpen[i] = cs.view.out, cs.view.failOpen
		}
		cs.hold(p, i)
	}
	return &Staged{Plan: p, FailOpen: failOpenKeys(p, failOpen), namespaces: l.namespaces, memo: m}, true
}
