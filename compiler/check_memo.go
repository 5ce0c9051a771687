package compiler

import (
	"cmp"
	"maps"
	"math"
	"net/netip"
	"reflect"
	"slices"
	"sync"

	"netspec.dev/netspec/internal/diag"
	"netspec.dev/netspec/schema"
)

// checkMemo is what Validate keeps from one call to the next in a Memo:
// for every object what the checks derived from it alone (its findings,
// its endpoint addresses, a Service's allocation slots), and the indexes
// across objects (objects by kind and name, the Services, the pods by
// label, ...). A call works out which objects appeared and disappeared
// since the last one, by pointer, and updates the indexes and the
// findings those objects can change; what the last call derived from the
// other objects stands. The result equals Validate's.
//
// It relies on the contract of schema's cache: an object pointer seen
// again has the same content and file position, and objects seen again
// keep their order relative to each other. A change of the Cluster spec
// or of the kind of Locator starts afresh; the lock only feeds the
// allocation, which is redone whenever its inputs differ.
//
// The Checked a call returns shares the memo's pod index: its pods are
// those of that call until the Memo validates again.
type checkMemo struct {
	valid   bool         // the fields below describe the last call
	locType reflect.Type // the Locator's type: findings hold its positions
	cl      *cluster

	objs   []*schema.Object // the last call's objects, in order
	states []*objState      // states[i] is objs[i]'s
	// spare buffers for the next objs and states
	spareObjs   []*schema.Object
	spareStates []*objState
	live        map[*schema.Object]*objState

	groups   map[groupKey]*objGroup
	svcs     []*service // the first Service of each key, sorted by key
	svcByKey map[string]*service

	pods    *podIndex
	selReg  map[labelKey][]*objState // selecting Services by the least label key of their selector
	linkReg map[string][]*objState   // Endpoints and EndpointSlices by the Service key they name
	diagged map[*objState]struct{}   // the states that have findings

	// The inputs and results of the last allocation.
	plans      []*svcPlan // of svcs, in order
	sparePlans []*svcPlan // a buffer for the next plans
	lock       *Lock
	alloc      *Allocations
	allocDiags diag.List
	owner      map[netip.Addr]addrOwner // serviceAddrs of svcs and alloc
}

// objState is what the memo knows of one object.
type objState struct {
	obj  *schema.Object
	rank uint64 // grows with the object order, for ordered inserts
	key  string // objKey
	// pending marks, while the memo compares the objects with the last
	// call's, an object of the last call not seen again yet.
	pending bool
	gone    bool // removed from the tree
	dirty   bool // a selecting Service whose pods are to be selected again

	group *objGroup // objects of its kind and name; nil for a Cluster
	svc   *service  // a Service first of its key: its entry in svcs

	selecting bool   // a Service whose selector picks its pods
	hasAddrs  bool   // an Endpoints, EndpointSlice or Pod with endpoint IPs (read again when checked)
	link      string // an Endpoints or EndpointSlice: the Service key it names
	linked    bool   // link is set (the object is in linkReg)

	diags *objDiags // nil when it has no findings
}

// objDiags are an object's findings, by check.
type objDiags [numChecks]diag.List

// The checks whose findings the memo keeps per object.
const (
	checkDup        = iota // checkDuplicates
	checkExternal          // checkExternalIPs
	checkSelect            // checkSelectors
	checkLink              // checkEndpointLinks
	checkEndpointIP        // checkEndpointIPs
	checkSlots             // clusterIPSlots and nodePortSlots of a first Service
	numChecks
)

// groupKey is an object's kind and namespace/name (objKey): checkDuplicates
// keys objects by the two joined with a slash, and kinds have none, so
// the pair is the same key.
type groupKey struct{ kind, key string }

// objGroup lists the objects of one kind and name, in object order.
type objGroup struct {
	key     groupKey
	members []*objState
	touched bool      // members changed in this call
	first   *objState // Services: the first member, that is in svcs
}

// validate is Validate reusing the memo.
func (m *checkMemo) validate(objs []*schema.Object, lock *Lock, loc Locator) *Checked {
	r := &reporter{loc: loc}
	cl := findCluster(objs, r)
	lt := reflect.TypeOf(loc)
	if !m.valid || lt != m.locType || !reflect.DeepEqual(cl.spec, m.cl.spec) {
		m.reset(cl, lt)
	}
	added, removed, ok := m.diff(objs)
	if !ok {
		m.reset(cl, lt)
		if added, removed, ok = m.diff(objs); !ok {
			// An object is in objs twice: not a tree the memo knows.
			*m = checkMemo{}
			return validateAll(objs, lock, loc)
		}
	}
	// When every object is new, so is every selecting Service: no need to
	// look for those an added pod concerns, and selectAll does the pods.
	u := &update{m: m, r: &reporter{loc: loc}, allNew: len(added) == len(objs)}
	u.remove(removed)
	finish := func() {}
	if u.allNew {
		finish = u.selectAll(added, loc)
	}
	u.add(added)
	u.settleGroups()
	u.settleServices()
	u.checkLinks(added)
	u.checkSelectors()
	alloc, allocated := m.allocate(lock, u.r)
	if allocated || u.addrsChanged {
		m.owner = serviceAddrs(m.owner, m.svcs, alloc)
		for _, st := range m.states {
			if st.hasAddrs {
				u.checkAddrs(st)
			}
		}
	} else {
		for _, st := range added {
			if st.hasAddrs {
				u.checkAddrs(st)
			}
		}
	}

	finish()

	dl := r.dl
	dl = append(dl, m.allocDiags...)
	for st := range m.diagged {
		for _, l := range st.diags {
			dl = append(dl, l...)
		}
	}
	return &Checked{Cluster: cl.spec, Alloc: alloc, Diags: dl, pods: m.pods}
}

// reset empties the memo for the Cluster cl. Its maps grow as they fill,
// not from a size hint: a hint rounds a big map up to a power of two of
// tables, up to twice what it holds, kept as long as the memo.
func (m *checkMemo) reset(cl *cluster, lt reflect.Type) {
	*m = checkMemo{
		valid:    true,
		locType:  lt,
		cl:       cl,
		live:     map[*schema.Object]*objState{},
		groups:   map[groupKey]*objGroup{},
		svcByKey: map[string]*service{},
		pods:     emptyPodIndex(),
		selReg:   map[labelKey][]*objState{},
		linkReg:  map[string][]*objState{},
		diagged:  map[*objState]struct{}{},
	}
}

// rankStep is the gap diff leaves between the ranks of consecutive new
// objects, so that objects inserted later between them get ranks too.
const rankStep = 1 << 32

// diff compares objs with the last call's objects: the objects before
// the first difference and after the last keep their states, and so do
// the objects between that are seen again in the same order; the others
// are added (new states, with ranks between their neighbours') or
// removed. It fails when an object is in objs twice, when objects seen
// again changed their order or when no rank is left between two objects;
// then only a reset memo can take objs.
func (m *checkMemo) diff(objs []*schema.Object) (added, removed []*objState, ok bool) {
	prev, ps := m.objs, m.states
	p := 0
	for p < len(prev) && p < len(objs) && prev[p] == objs[p] {
		p++
	}
	s := 0
	for s < len(prev)-p && s < len(objs)-p && prev[len(prev)-1-s] == objs[len(objs)-1-s] {
		s++
	}
	oldMid := ps[p : len(ps)-s]
	for _, st := range oldMid {
		st.pending = true
	}
	lo, hi := uint64(0), uint64(math.MaxUint64)
	if p > 0 {
		lo = ps[p-1].rank
	}
	if s > 0 {
		hi = ps[len(ps)-s].rank
	}
	states := slices.Grow(m.spareStates[:0], len(objs))[:len(objs)]
	copy(states, ps[:p])
	copy(states[len(objs)-s:], ps[len(ps)-s:])
	last, run := lo, 0 // the rank of the last object kept; new objects since
	for i, o := range objs[p : len(objs)-s] {
		st := m.live[o]
		switch {
		case st == nil:
			st = &objState{obj: o}
			m.live[o] = st
			added = append(added, st)
			run++
		case !st.pending || st.rank <= last:
			return nil, nil, false
		default:
			st.pending = false
			if !spreadRanks(added[len(added)-run:], last, st.rank) {
				return nil, nil, false
			}
			last, run = st.rank, 0
		}
		states[p+i] = st
	}
	if !spreadRanks(added[len(added)-run:], last, hi) {
		return nil, nil, false
	}
	for _, st := range oldMid {
		if st.pending {
			st.pending, st.gone = false, true
			delete(m.live, st.obj)
			removed = append(removed, st)
		}
	}
	m.spareObjs, m.objs = m.objs, append(m.spareObjs[:0], objs...)
	m.spareStates, m.states = m.states, states
	clear(m.spareObjs[:cap(m.spareObjs)]) // let removed objects and states go
	clear(m.spareStates[:cap(m.spareStates)])
	return added, removed, true
}

// spreadRanks gives the states ranks between lo and hi (exclusive), in
// order; false when there are too few.
func spreadRanks(sts []*objState, lo, hi uint64) bool {
	if len(sts) == 0 {
		return true
	}
	step := min((hi-lo)/uint64(len(sts)+1), rankStep)
	if step == 0 {
		return false
	}
	for i, st := range sts {
		st.rank = lo + step*uint64(i+1)
	}
	return true
}

// update is one call's update of the memo.
type update struct {
	m            *checkMemo
	r            *reporter      // scratch: findings go to states
	touched      []*objGroup    // groups whose members changed
	dirty        []*objState    // selecting Services whose pods may have changed
	links        []string       // Service keys whose first Service changed
	allNew       bool           // every object is added
	addrsChanged bool           // a Service's external, load balancer or ingress IPs changed
	addrs        []endpointAddr // scratch: an object's endpoint IPs
}

// findings runs f with u.r and returns what it reported.
func (u *update) findings(f func(r *reporter)) diag.List {
	u.r.dl = nil
	f(u.r)
	return u.r.dl
}

// setDiags sets the findings of check c of st.
func (m *checkMemo) setDiags(st *objState, c int, dl diag.List) {
	if st.diags == nil {
		if len(dl) == 0 {
			return
		}
		st.diags = &objDiags{}
	}
	st.diags[c] = dl
	for _, l := range st.diags {
		if len(l) > 0 {
			if !st.gone {
				m.diagged[st] = struct{}{}
			}
			return
		}
	}
	st.diags = nil
	delete(m.diagged, st)
}

func (u *update) touch(g *objGroup) {
	if !g.touched {
		g.touched = true
		u.touched = append(u.touched, g)
	}
}

// markSelecting marks the selecting Services that select p, or did.
func (u *update) markSelecting(p *schema.Pod) {
	for k, v := range p.Metadata.Labels.All() {
		for _, st := range u.m.selReg[labelKey{p.Metadata.Namespace, k, v}] {
			if !st.dirty && matches(st.obj.Service.Spec.Selector, p.Metadata.Labels) {
				st.dirty = true
				u.dirty = append(u.dirty, st)
			}
		}
	}
}

// selKey is where a selecting Service is in selReg: its namespace and
// the least key of its selector with its value. A pod it selects has that
// label.
func selKey(s *schema.Service) labelKey {
	first, k := true, ""
	for sk := range s.Spec.Selector.All() {
		if first || sk < k {
			first, k = false, sk
		}
	}
	return labelKey{s.Metadata.Namespace, k, s.Spec.Selector.Get(k)}
}

// remove takes the removed objects out of the indexes.
func (u *update) remove(removed []*objState) {
	m := u.m
	for _, st := range removed {
		o := st.obj
		delete(m.diagged, st)
		if g := st.group; g != nil {
			i := slices.Index(g.members, st)
			g.members = slices.Delete(g.members, i, i+1)
			u.touch(g)
		}
		if st.selecting {
			lk := selKey(o.Service)
			m.selReg[lk] = deleteState(m.selReg[lk], st)
			if len(m.selReg[lk]) == 0 {
				delete(m.selReg, lk)
			}
			delete(m.pods.selected, o.Service)
		}
		if st.linked {
			m.linkReg[st.link] = deleteState(m.linkReg[st.link], st)
			if len(m.linkReg[st.link]) == 0 {
				delete(m.linkReg, st.link)
			}
		}
	}
	for _, st := range removed {
		if p := st.obj.Pod; p != nil {
			m.pods.remove(p, st.rank)
			u.markSelecting(p)
		}
	}
}

func deleteState(l []*objState, st *objState) []*objState {
	if i := slices.Index(l, st); i >= 0 {
		return slices.Delete(l, i, i+1)
	}
	return l
}

// add puts the added objects into the indexes and makes the findings that
// depend on them alone.
func (u *update) add(added []*objState) {
	m := u.m
	for _, st := range added {
		o := st.obj
		if o.Cluster == nil {
			st.key = objKey(o)
			gk := groupKey{o.Kind, st.key}
			g := m.groups[gk]
			if g == nil {
				g = &objGroup{key: gk}
				m.groups[gk] = g
			}
			// Mostly the group is new, or the object comes last.
			i := len(g.members)
			for i > 0 && g.members[i-1].rank > st.rank {
				i--
			}
			g.members = slices.Insert(g.members, i, st)
			st.group = g
			u.touch(g)
		}
		switch {
		case o.Service != nil:
			m.setDiags(st, checkExternal, u.findings(func(r *reporter) {
				checkServiceExternalIPs(o, m.cl, r)
				checkServiceLoadBalancerIPs(o, m.cl, r)
			}))
			if selects(o) {
				st.selecting = true
				lk := selKey(o.Service)
				m.selReg[lk] = append(m.selReg[lk], st)
				if !u.allNew {
					st.dirty = true
					u.dirty = append(u.dirty, st)
				}
			}
			if hasServiceAddrs(o.Service) {
				u.addrsChanged = true
			}
		case o.Pod != nil:
			if !u.allNew {
				m.pods.add(o.Pod, st.rank)
			}
			u.addrs = appendEndpointAddrs(u.addrs[:0], o)
			st.hasAddrs = len(u.addrs) > 0
		case o.Endpoints != nil || o.EndpointSlice != nil:
			u.addrs = appendEndpointAddrs(u.addrs[:0], o)
			st.hasAddrs = len(u.addrs) > 0
			st.link, st.linked = linkKey(o)
			if st.linked {
				m.linkReg[st.link] = append(m.linkReg[st.link], st)
			}
		}
	}
	if u.allNew {
		return
	}
	for _, st := range added {
		if p := st.obj.Pod; p != nil {
			u.markSelecting(p)
		}
	}
}

// hasServiceAddrs reports whether s has addresses other than its cluster
// IPs that endpoints must not use (serviceAddrs).
func hasServiceAddrs(s *schema.Service) bool {
	if len(s.Spec.ExternalIPs) > 0 || s.Spec.LoadBalancerIP != "" {
		return true
	}
	for _, ing := range s.Status.LoadBalancer.Ingress {
		if ing.IP != "" {
			return true
		}
	}
	return false
}

// settleGroups redoes the duplicate findings of the touched groups and
// notes the keys whose first Service changed.
func (u *update) settleGroups() {
	m := u.m
	for _, g := range u.touched {
		g.touched = false
		var first *objState
		for _, st := range g.members {
			if st.obj.Meta().Name == "" || first == nil {
				if st.obj.Meta().Name != "" {
					first = st
				}
				m.setDiags(st, checkDup, nil)
				continue
			}
			m.setDiags(st, checkDup, u.findings(func(r *reporter) { reportDuplicate(st.obj, first.obj, r) }))
		}
		if len(g.members) == 0 {
			delete(m.groups, g.key)
		}
		if g.key.kind != schema.KindService {
			continue
		}
		var now *objState // (schema gives a Service object kind Service)
		if i := slices.IndexFunc(g.members, func(st *objState) bool { return st.obj.Service != nil }); i >= 0 {
			now = g.members[i]
		}
		if now == g.first {
			continue
		}
		if old := g.first; old != nil {
			if hasServiceAddrs(old.obj.Service) {
				u.addrsChanged = true // no longer in svcs
			}
			old.svc = nil
			m.setDiags(old, checkSlots, nil)
			delete(m.svcByKey, g.key.key)
		}
		if now != nil {
			if hasServiceAddrs(now.obj.Service) {
				u.addrsChanged = true // newly in svcs
			}
			s := &service{obj: now.obj, key: now.key, spec: &now.obj.Service.Spec}
			m.setDiags(now, checkSlots, u.findings(func(r *reporter) { s.plan = planService(s, m.cl, r) }))
			now.svc = s
			m.svcByKey[s.key] = s
		}
		g.first = now
		u.links = append(u.links, g.key.key)
	}
	u.touched = nil
}

// settleServices brings svcs up to date with svcByKey: key by key when
// few keys changed, else by sorting them all.
func (u *update) settleServices() {
	m := u.m
	if len(u.links) > 64 {
		m.svcs = slices.AppendSeq(m.svcs[:0], maps.Values(m.svcByKey))
		slices.SortFunc(m.svcs, func(a, b *service) int { return cmp.Compare(a.key, b.key) })
		return
	}
	for _, key := range u.links {
		i, found := slices.BinarySearchFunc(m.svcs, key, func(s *service, k string) int { return cmp.Compare(s.key, k) })
		s := m.svcByKey[key]
		switch {
		case found && s != nil:
			m.svcs[i] = s
		case found:
			m.svcs = slices.Delete(m.svcs, i, i+1)
		case s != nil:
			m.svcs = slices.Insert(m.svcs, i, s)
		}
	}
}

// checkLinks redoes the link findings of the added Endpoints and slices
// and of those whose Service changed.
func (u *update) checkLinks(added []*objState) {
	m := u.m
	check := func(st *objState) {
		m.setDiags(st, checkLink, u.findings(func(r *reporter) { checkEndpointLink(st.obj, m.svcByKey, r) }))
	}
	for _, st := range added {
		if st.obj.Endpoints != nil || st.obj.EndpointSlice != nil {
			check(st)
		}
	}
	for _, key := range u.links {
		for _, st := range m.linkReg[key] {
			check(st)
		}
	}
}

// selectAll is add's and checkSelectors' work on the pod index when
// every object is new, done beside the rest, as Validate does: a
// goroutine indexes the added pods and selects the pods of the added
// Services; the function it returns waits for it and keeps its findings.
// Until then only the goroutine uses the pod index.
func (u *update) selectAll(added []*objState, loc Locator) (finish func()) {
	type finding struct {
		st *objState
		dl diag.List
	}
	var found []finding
	idx := u.m.pods
	var wg sync.WaitGroup
	wg.Go(func() {
		r := &reporter{loc: loc}
		for _, st := range added {
			if p := st.obj.Pod; p != nil {
				idx.add(p, st.rank)
			}
		}
		for _, st := range added {
			if selects(st.obj) {
				r.dl = nil
				checkSelector(st.obj, idx, r)
				if len(r.dl) > 0 {
					found = append(found, finding{st, r.dl})
				}
			}
		}
	})
	return func() {
		wg.Wait()
		for _, f := range found {
			u.m.setDiags(f.st, checkSelect, f.dl)
		}
	}
}

// checkSelectors selects the pods of the marked Services again.
func (u *update) checkSelectors() {
	m := u.m
	for _, st := range u.dirty {
		st.dirty = false
		if st.gone {
			continue
		}
		m.setDiags(st, checkSelect, u.findings(func(r *reporter) { checkSelector(st.obj, m.pods, r) }))
	}
	u.dirty = nil
}

// checkAddrs redoes the endpoint IP findings of st. Its addresses are
// parsed again rather than kept: the memo would hold them for every pod.
func (u *update) checkAddrs(st *objState) {
	u.addrs = appendEndpointAddrs(u.addrs[:0], st.obj)
	u.m.setDiags(st, checkEndpointIP, u.findings(func(r *reporter) { checkAddrs(st.obj, u.addrs, u.m.owner, r) }))
}

// allocate returns the allocations of svcs: the last ones when the lock
// and every Service's slots are the same as then, else new ones (true).
func (m *checkMemo) allocate(lock *Lock, r *reporter) (*Allocations, bool) {
	plans := m.sparePlans[:0]
	for _, s := range m.svcs {
		if s.plan != nil {
			plans = append(plans, s.plan)
		}
	}
	same := m.alloc != nil && len(plans) == len(m.plans) && lockEqual(lock, m.lock)
	for i := 0; same && i < len(plans); i++ {
		same = plans[i] == m.plans[i] || len(m.allocDiags) == 0 && samePlan(plans[i], m.plans[i])
	}
	m.sparePlans, m.plans, m.lock = m.plans, plans, lock
	clear(m.sparePlans[:cap(m.sparePlans)])
	if same {
		return m.alloc, false
	}
	r.dl = nil
	m.alloc = assign(plans, m.cl, lock, r)
	m.allocDiags = r.dl
	return m.alloc, true
}

// samePlan reports whether assign treats two plans alike: same Service
// name, same slots.
func samePlan(a, b *svcPlan) bool {
	am, bm := a.svc.obj.Service.Metadata, b.svc.obj.Service.Metadata
	return a.svc.key == b.svc.key && am.Namespace == bm.Namespace && am.Name == bm.Name &&
		a.health.need == b.health.need && a.health.explicit == b.health.explicit && a.health.valid == b.health.valid &&
		slices.Equal(a.health.path, b.health.path) && a.health.deriveKey == b.health.deriveKey &&
		slices.EqualFunc(a.ips, b.ips, func(x, y ipSlot) bool {
			return x.family == y.family && x.explicit == y.explicit && x.valid == y.valid &&
				slices.Equal(x.path, y.path) && x.deriveKey == y.deriveKey
		}) &&
		slices.EqualFunc(a.ports, b.ports, func(x, y portSlot) bool {
			return x.index == y.index && x.key == y.key && x.protocol == y.protocol && x.explicit == y.explicit &&
				x.valid == y.valid && slices.Equal(x.path, y.path) && x.deriveKey == y.deriveKey
		})
}
