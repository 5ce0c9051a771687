package compiler

import (
	"cmp"
	"hash/maphash"
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
// a Service's allocation slots), and the indexes across objects (objects
// by kind and name, the Services, the pods by label, ...). A call works
// out which objects appeared and disappeared since the last one, by
// pointer, and updates the indexes and the findings those objects can
// change; what the last call derived from the other objects stands. The
// result equals Validate's. The indexes are keyed by hashes of names
// rather than by the names (hashSeed), and an object's own strings are
// not copied: the memo lives as long as the daemon, for every object of
// the tree.
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

	states []*objState // the last call's objects' states, in object order

	// groups holds every object by its kind and name (groupHash): a chain
	// through objState.next in rank order. Objects of another kind or
	// name whose hash is the same share the chain; sameGroup tells them
	// apart.
	groups   map[uint64]*objState
	svcs     []*service // the first Service of each key, sorted by key
	svcByKey map[string]*service

	pods    *podIndex
	podIPs  podIPIndex              // pods by their IPs (podAddrs)
	nodes   map[string]int          // the names of the Nodes, with how many have each
	selReg  map[uint64][]*objState  // selecting Services by the labelHash of their selKey
	linkReg map[string][]*objState  // Endpoints and EndpointSlices by the Service key they name
	diagged map[*objState]*objDiags // the findings of the states that have any

	// The inputs and results of the last allocation.
	plans      []*svcPlan // of svcs, in order
	lock       *Lock
	alloc      *Allocations
	allocDiags diag.List
	owner      map[netip.Addr]addrOwner // serviceAddrs of svcs and alloc
}

// objState is what the memo knows of one object: 32 bytes, kept for
// every object of the tree. Its findings are in diagged; a Service that
// is first of its key is in svcByKey.
type objState struct {
	obj  *schema.Object
	rank uint64    // grows with the object order, for ordered inserts
	next *objState // the next object of its chain in groups

	// pending marks, while the memo compares the objects with the last
	// call's, an object of the last call not seen again yet.
	pending bool
	gone    bool // removed from the tree
	dirty   bool // a selecting Service whose pods are to be selected again
	settled bool // settleGroups did its group in this call

	selecting bool // a Service whose selector picks its pods
	hasAddrs  bool // an Endpoints, EndpointSlice or Pod with endpoint IPs (read again when checked)
	linked    bool // an Endpoints or EndpointSlice in linkReg (under linkKey)
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
	checkManual            // checkManualEndpoints of a first Service
	checkMirror            // checkMirrored of an Endpoints object
	checkNode              // checkPodNode of a pod
	checkPodIP             // checkPodIPs of a pod
	numChecks
)

// groupHash hashes an object's kind and namespace/name (objKey), the
// key of checkDuplicates, for the memo's groups.
func groupHash(o *schema.Object) uint64 {
	m := o.Meta()
	return kindHash(o.Kind, m.Namespace, m.Name)
}

// kindHash is groupHash of an object of kind with that namespace (left
// out for cluster-scoped kinds) and name.
func kindHash(kind, namespace, name string) uint64 {
	var h maphash.Hash
	h.SetSeed(hashSeed)
	h.WriteString(kind)
	h.WriteByte(0)
	if schema.Namespaced(kind) {
		h.WriteString(namespace)
		h.WriteByte('/')
	}
	h.WriteString(name)
	return h.Sum64() & hashMask
}

// sameGroup reports whether a and b have the same kind and objKey,
// without making the keys but when the namespaces' lengths differ (the
// keys can then only be the same if a name has a slash).
func sameGroup(a, b *schema.Object) bool {
	if a.Kind != b.Kind {
		return false
	}
	am, bm := a.Meta(), b.Meta()
	if !schema.Namespaced(a.Kind) || len(am.Namespace) == len(bm.Namespace) {
		return am.Name == bm.Name && (!schema.Namespaced(a.Kind) || am.Namespace == bm.Namespace)
	}
	return objKey(a) == objKey(b)
}

// join puts st into its chain of groups, in rank order. It fails when the
// chain has st's object already: the object is in the tree twice.
func (m *checkMemo) join(st *objState) bool {
	h := groupHash(st.obj)
	var prev *objState // the last member ranked before st
	for o := m.groups[h]; o != nil; o = o.next {
		if o.obj == st.obj {
			return false
		}
		if o.rank < st.rank {
			prev = o
		}
	}
	if prev == nil {
		st.next = m.groups[h]
		m.groups[h] = st
	} else {
		st.next, prev.next = prev.next, st
	}
	return true
}

// leave takes st out of its chain of groups.
func (m *checkMemo) leave(st *objState) {
	h := groupHash(st.obj)
	if head := m.groups[h]; head == st {
		if st.next == nil {
			delete(m.groups, h)
		} else {
			m.groups[h] = st.next
		}
	} else {
		for o := head; o != nil; o = o.next {
			if o.next == st {
				o.next = st.next
				break
			}
		}
	}
	st.next = nil
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
	if !u.add(added) {
		// An added object is also one seen again (join).
		finish()
		*m = checkMemo{}
		return validateAll(objs, lock, loc)
	}
	if !u.allNew {
		u.settleKeys() // (when every object is new, selectAll indexes every pod by the final keys)
	}
	u.settleGroups()
	u.settleServices()
	u.checkLinks(added)
	u.checkManual()
	u.checkSelectors()
	u.checkPods(added)
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
	for _, d := range m.diagged {
		for _, l := range d {
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
		groups:   map[uint64]*objState{},
		svcByKey: map[string]*service{},
		pods:     emptyPodIndex(),
		podIPs:   podIPIndex{one: map[netip.Addr]*objState{}, more: map[netip.Addr][]*objState{}},
		nodes:    map[string]int{},
		selReg:   map[uint64][]*objState{},
		linkReg:  map[string][]*objState{},
		diagged:  map[*objState]*objDiags{},
	}
}

// rankStep is the gap diff leaves between the ranks of consecutive new
// objects, so that objects inserted later between them get ranks too.
const rankStep = 1 << 32

// diff compares objs with the last call's objects: the objects before
// the first difference and after the last keep their states, and so do
// the objects between that are seen again in the same order; the others
// are added (new states, with ranks between their neighbours') or
// removed. It fails when an object is twice in the objects between (join
// finds those that are also before or after), when objects seen again
// changed their order or when no rank is left between two objects; then
// only a reset memo can take objs.
func (m *checkMemo) diff(objs []*schema.Object) (added, removed []*objState, ok bool) {
	ps := m.states
	p := 0
	for p < len(ps) && p < len(objs) && ps[p].obj == objs[p] {
		p++
	}
	s := 0
	for s < len(ps)-p && s < len(objs)-p && ps[len(ps)-1-s].obj == objs[len(objs)-1-s] {
		s++
	}
	// The states of the objects between, by object: the memo keeps no
	// such index of every object, a one-file change has few between.
	oldMid := ps[p : len(ps)-s]
	mid := make(map[*schema.Object]*objState, len(oldMid))
	for _, st := range oldMid {
		st.pending = true
		mid[st.obj] = st
	}
	lo, hi := uint64(0), uint64(math.MaxUint64)
	if p > 0 {
		lo = ps[p-1].rank
	}
	if s > 0 {
		hi = ps[len(ps)-s].rank
	}
	states := make([]*objState, len(objs))
	copy(states, ps[:p])
	copy(states[len(objs)-s:], ps[len(ps)-s:])
	last, run := lo, 0 // the rank of the last object kept; new objects since
	for i, o := range objs[p : len(objs)-s] {
		st := mid[o]
		switch {
		case st == nil:
			st = &objState{obj: o}
			mid[o] = st
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
			removed = append(removed, st)
		}
	}
	m.states = states
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
	touched      []*objState    // the added and removed objects but Clusters: their groups changed
	dirty        []*objState    // selecting Services whose pods may have changed
	links        []string       // Service keys whose first Service changed
	allNew       bool           // every object is added
	addrsChanged bool           // a Service's external, load balancer or ingress IPs changed
	addrs        []endpointAddr // scratch: an object's endpoint IPs
	linked       []string       // Service keys whose Endpoints or EndpointSlices changed
	nodesChanged bool           // a Node was added or removed
	ipsTouched   []netip.Addr   // pod IPs whose pods changed
	po           *podObjects    // the pods' objects, for checkSelectors
	// keyWas tells, for each label key whose count in the pod index
	// changed, whether the index had it before (settleKeys).
	keyWas map[string]bool
}

// count adds d to the counts of the pod index's keys of a selecting
// Service's selector, noting what the index had before.
func (u *update) count(svc *schema.Service, d int) {
	idx := u.m.pods
	for k := range svc.Spec.Selector.All() {
		if _, ok := u.keyWas[k]; !ok {
			if u.keyWas == nil {
				u.keyWas = map[string]bool{}
			}
			u.keyWas[k] = idx.keys[k] > 0
		}
	}
	idx.count(svc, d)
}

// settleKeys indexes the pods under the label keys that selectors now use
// and forgets those no selector uses any more.
func (u *update) settleKeys() {
	idx := u.m.pods
	for k, was := range u.keyWas {
		switch now := idx.keys[k] > 0; {
		case now && !was:
			idx.addKey(k, u.m.states)
		case was && !now:
			idx.dropKey(k, u.m.states)
		}
	}
	u.keyWas = nil
}

// findings runs f with u.r and returns what it reported.
func (u *update) findings(f func(r *reporter)) diag.List {
	u.r.dl = nil
	f(u.r)
	return u.r.dl
}

// setDiags sets the findings of check c of st; those of a removed object
// are dropped.
func (m *checkMemo) setDiags(st *objState, c int, dl diag.List) {
	if st.gone {
		return
	}
	d := m.diagged[st]
	if d == nil {
		if len(dl) == 0 {
			return
		}
		d = &objDiags{}
		m.diagged[st] = d
	}
	d[c] = dl
	for _, l := range d {
		if len(l) > 0 {
			return
		}
	}
	delete(m.diagged, st)
}

// markSelecting marks the selecting Services that select p, or did.
func (u *update) markSelecting(p *schema.Pod) {
	for k, v := range p.Metadata.Labels.All() {
		for _, st := range u.m.selReg[labelHash(p.Metadata.Namespace, k, v)] {
			s := st.obj.Service
			if !st.dirty && s.Metadata.Namespace == p.Metadata.Namespace && matches(s.Spec.Selector, p.Metadata.Labels) {
				st.dirty = true
				u.dirty = append(u.dirty, st)
			}
		}
	}
}

// selKey is where a selecting Service is in selReg: the labelHash of its
// namespace and the least key of its selector with its value. A pod it
// selects has that label.
func selKey(s *schema.Service) uint64 {
	first, k := true, ""
	for sk := range s.Spec.Selector.All() {
		if first || sk < k {
			first, k = false, sk
		}
	}
	return labelHash(s.Metadata.Namespace, k, s.Spec.Selector.Get(k))
}

// remove takes the removed objects out of the indexes.
func (u *update) remove(removed []*objState) {
	m := u.m
	for _, st := range removed {
		o := st.obj
		delete(m.diagged, st)
		m.leave(st)
		if o.Cluster == nil {
			u.touched = append(u.touched, st)
		}
		if st.selecting {
			lk := selKey(o.Service)
			m.selReg[lk] = deleteState(m.selReg[lk], st)
			if len(m.selReg[lk]) == 0 {
				delete(m.selReg, lk)
			}
			delete(m.pods.selected, o.Service)
			u.count(o.Service, -1)
		}
		if st.linked {
			link, _ := linkKey(o)
			m.linkReg[link] = deleteState(m.linkReg[link], st)
			if len(m.linkReg[link]) == 0 {
				delete(m.linkReg, link)
			}
			u.linked = append(u.linked, link)
		}
		if n := o.Node; n != nil {
			u.nodesChanged = true
			if m.nodes[n.Metadata.Name]--; m.nodes[n.Metadata.Name] == 0 {
				delete(m.nodes, n.Metadata.Name)
			}
		}
		if o.Pod != nil {
			for _, a := range podAddrs(u.addrs[:0], o) {
				m.podIPs.remove(a.addr, st)
				u.ipsTouched = append(u.ipsTouched, a.addr)
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
// depend on them alone. It fails when an added object is one of the
// memo's already (join): then the memo is in no state to go on.
func (u *update) add(added []*objState) bool {
	m := u.m
	for _, st := range added {
		o := st.obj
		if !m.join(st) {
			return false
		}
		if o.Cluster == nil {
			u.touched = append(u.touched, st)
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
					u.count(o.Service, 1)
				}
			}
			if hasServiceAddrs(o.Service) {
				u.addrsChanged = true
			}
		case o.Pod != nil:
			u.addrs = appendEndpointAddrs(u.addrs[:0], o)
			st.hasAddrs = len(u.addrs) > 0
			for _, a := range podAddrs(u.addrs[:0], o) {
				m.podIPs.add(a.addr, st)
				u.ipsTouched = append(u.ipsTouched, a.addr)
			}
		case o.Endpoints != nil || o.EndpointSlice != nil:
			u.addrs = appendEndpointAddrs(u.addrs[:0], o)
			st.hasAddrs = len(u.addrs) > 0
			if link, ok := linkKey(o); ok {
				st.linked = true
				m.linkReg[link] = append(m.linkReg[link], st)
				u.linked = append(u.linked, link)
			}
			if o.Endpoints != nil {
				m.setDiags(st, checkMirror, u.findings(func(r *reporter) { checkMirrored(o, r) }))
			}
		case o.Node != nil:
			u.nodesChanged = true
			m.nodes[o.Node.Metadata.Name]++
		}
	}
	if u.allNew {
		return true
	}
	// The pods go into the index after the Services: by the keys of the
	// Services added too.
	for _, st := range added {
		if p := st.obj.Pod; p != nil {
			m.pods.add(p, st.rank)
			u.markSelecting(p)
		}
	}
	return true
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

// settleGroups redoes the duplicate findings of the groups of the added
// and removed objects and notes the keys whose first Service changed.
func (u *update) settleGroups() {
	m := u.m
	for _, t := range u.touched {
		if t.settled {
			continue // an added object whose group is done
		}
		var first, now *objState // now: the first Service (schema gives a Service object kind Service)
		var old *service         // the last call's first Service of the key
		var key string           // objKey, for Services
		if t.obj.Kind == schema.KindService {
			key = objKey(t.obj)
			old = m.svcByKey[key]
		}
		for st := m.groups[groupHash(t.obj)]; st != nil; st = st.next {
			if !sameGroup(st.obj, t.obj) {
				continue
			}
			st.settled = true
			if now == nil && st.obj.Service != nil {
				now = st
			}
			if old != nil && old.obj == st.obj && st != now {
				m.setDiags(st, checkSlots, nil) // no longer the first
				m.setDiags(st, checkManual, nil)
			}
			if st.obj.Meta().Name == "" || first == nil {
				if st.obj.Meta().Name != "" {
					first = st
				}
				m.setDiags(st, checkDup, nil)
				continue
			}
			m.setDiags(st, checkDup, u.findings(func(r *reporter) { reportDuplicate(st.obj, first.obj, r) }))
		}
		if t.obj.Kind != schema.KindService || now == nil && old == nil || now != nil && old != nil && now.obj == old.obj {
			continue // no first Service, or the same
		}
		if old != nil {
			if hasServiceAddrs(old.obj.Service) {
				u.addrsChanged = true // no longer in svcs
			}
			delete(m.svcByKey, key)
		}
		if now != nil {
			if hasServiceAddrs(now.obj.Service) {
				u.addrsChanged = true // newly in svcs
			}
			s := &service{obj: now.obj, key: key}
			m.setDiags(now, checkSlots, u.findings(func(r *reporter) { s.plan = planService(s, m.cl, r) }))
			m.svcByKey[key] = s
		}
		u.links = append(u.links, key)
	}
	for _, t := range u.touched {
		for st := m.groups[groupHash(t.obj)]; st != nil; st = st.next {
			st.settled = false
		}
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
	po := &podObjects{each: func(yield func(*schema.Object) bool) {
		for _, st := range added {
			if !yield(st.obj) {
				return
			}
		}
	}}
	for _, st := range added {
		if selects(st.obj) {
			idx.count(st.obj.Service, 1)
		}
	}
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
				checkSelector(st.obj, idx, po, r)
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
		if u.po == nil {
			u.po = &podObjects{each: func(yield func(*schema.Object) bool) {
				for _, st := range m.states {
					if !yield(st.obj) {
						return
					}
				}
			}}
		}
		m.setDiags(st, checkSelect, u.findings(func(r *reporter) { checkSelector(st.obj, m.pods, u.po, r) }))
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
	n := 0
	for _, s := range m.svcs {
		if s.plan != nil {
			n++
		}
	}
	plans := make([]*svcPlan, 0, n)
	for _, s := range m.svcs {
		if s.plan != nil {
			plans = append(plans, s.plan)
		}
	}
	same := m.alloc != nil && len(plans) == len(m.plans) && lockEqual(lock, m.lock)
	for i := 0; same && i < len(plans); i++ {
		same = plans[i] == m.plans[i] || len(m.allocDiags) == 0 && samePlan(plans[i], m.plans[i])
	}
	m.plans, m.lock = plans, lock
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
		a.health == b.health && slices.Equal(a.ips, b.ips) && slices.Equal(a.ports, b.ports)
}

// podIPIndex holds the pods by their IPs: most addresses have one pod
// (one), and only those of two or more a list in rank order (more), so
// that the memo keeps a pointer per pod IP rather than a slice.
type podIPIndex struct {
	one  map[netip.Addr]*objState
	more map[netip.Addr][]*objState
}

func (x podIPIndex) add(a netip.Addr, st *objState) {
	if l, ok := x.more[a]; ok {
		x.more[a] = insertState(l, st)
	} else if o, ok := x.one[a]; ok {
		delete(x.one, a)
		x.more[a] = insertState([]*objState{o}, st)
	} else {
		x.one[a] = st
	}
}

func (x podIPIndex) remove(a netip.Addr, st *objState) {
	l, ok := x.more[a]
	if !ok {
		if x.one[a] == st {
			delete(x.one, a)
		}
		return
	}
	switch l = deleteState(l, st); len(l) {
	case 1:
		delete(x.more, a)
		x.one[a] = l[0]
	default:
		x.more[a] = l
	}
}

// first is the pod of the least rank with address a, nil for none.
func (x podIPIndex) first(a netip.Addr) *objState {
	if l := x.more[a]; len(l) > 0 {
		return l[0]
	}
	return x.one[a]
}

// all returns the pods with address a, in rank order.
func (x podIPIndex) all(a netip.Addr) []*objState {
	if l, ok := x.more[a]; ok {
		return l
	}
	if o := x.one[a]; o != nil {
		return []*objState{o}
	}
	return nil
}

// insertState puts st into l, kept in rank order.
func insertState(l []*objState, st *objState) []*objState {
	i, _ := slices.BinarySearchFunc(l, st.rank, func(o *objState, r uint64) int { return cmp.Compare(o.rank, r) })
	return slices.Insert(l, i, st)
}

// checkManual redoes the manual endpoints findings of the Services whose
// first Service or whose Endpoints and EndpointSlices changed.
func (u *update) checkManual() {
	m := u.m
	done := map[string]bool{}
	var links []*schema.Object
	for _, key := range slices.Concat(u.links, u.linked) {
		if done[key] {
			continue
		}
		done[key] = true
		s := m.svcByKey[key]
		if s == nil {
			continue
		}
		st := m.stateOf(s.obj)
		links = links[:0]
		for _, l := range m.linkReg[key] {
			links = append(links, l.obj)
		}
		m.setDiags(st, checkManual, u.findings(func(r *reporter) { checkManualEndpoints(s, links, r) }))
	}
	u.linked = nil
}

// stateOf finds the state of an object of the tree in its group.
func (m *checkMemo) stateOf(o *schema.Object) *objState {
	for st := m.groups[groupHash(o)]; st != nil; st = st.next {
		if st.obj == o {
			return st
		}
	}
	return nil
}

// checkPods redoes the pod findings that changed: the nodeName and
// podCIDR findings of the added pods, or of every pod when a Node came
// or went; the IP findings of the pods that have an IP of an added or
// removed pod.
func (u *update) checkPods(added []*objState) {
	m := u.m
	var names []string // sorted, when asked for
	nodes := memoNodes{m: m, names: &names}
	node := func(st *objState) {
		u.addrs = podAddrs(u.addrs[:0], st.obj)
		m.setDiags(st, checkNode, u.findings(func(r *reporter) { checkPodNode(st.obj, nodes, u.addrs, r) }))
	}
	if u.nodesChanged {
		for _, st := range m.states {
			if st.obj.Pod != nil {
				node(st)
			}
		}
	} else {
		for _, st := range added {
			if st.obj.Pod != nil {
				node(st)
			}
		}
	}
	first := func(a netip.Addr) *schema.Object {
		if st := m.podIPs.first(a); st != nil {
			return st.obj
		}
		return nil
	}
	done := map[*objState]bool{}
	ip := func(st *objState) {
		if done[st] || st.gone {
			return
		}
		done[st] = true
		u.addrs = podAddrs(u.addrs[:0], st.obj)
		m.setDiags(st, checkPodIP, u.findings(func(r *reporter) { checkPodIPs(st.obj, u.addrs, first, r) }))
	}
	for _, a := range u.ipsTouched {
		for _, st := range m.podIPs.all(a) {
			ip(st)
		}
	}
	u.ipsTouched, u.nodesChanged = nil, false
}

// memoNodes is the nodeLookup of a memo's tree.
type memoNodes struct {
	m     *checkMemo
	names *[]string
}

func (n memoNodes) node(name string) *schema.Node {
	for st := n.m.groups[kindHash(schema.KindNode, "", name)]; st != nil; st = st.next {
		if nd := st.obj.Node; nd != nil && nd.Metadata.Name == name {
			return nd
		}
	}
	return nil
}

func (n memoNodes) nodeNames() []string {
	if *n.names == nil && len(n.m.nodes) > 0 {
		*n.names = slices.Sorted(maps.Keys(n.m.nodes))
	}
	return *n.names
}
