package render

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"
	"sort"

	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/render/nftmodel"
)

// Memo builds one node's successive models as NFTablesModel does, equal
// to a fresh build, reusing what it derived from the Services that did
// not change since its previous call: a daemon re-renders the ruleset on
// every change of its tree, and a change of one Service then costs about
// that Service and the assembly of the model, not the whole table. The
// pieces of the model that did not change are the same pointers as in the
// last model (chains, sets), which lets the applier encode only what
// changed (nft.Applier.Update). The Memo keeps the model's pieces, and
// each Service's items in the list of its table: a model is read, never
// changed.
//
// Per Service and table it keeps the first pass over the Service's ports
// (chain names, endpoint picks) and the model of their sets and chains;
// per table, the maps and sets of the model, each element with the number
// of ports (or endpoints) it stands for, and the endpoint maps. A port's
// map elements are not kept: when its Service leaves or changes they are
// derived again from the last plan, which the Memo keeps. A Service is reused when it equals the
// previous plan's Service of the same namespace and name in what the
// ruleset is made of (sameService, samePorts). Its model is built again
// when a pick of its moved to another slot (assignBucket), or for every
// Service when a table-wide input changed (pod CIDRs, node addresses); an
// endpoint map, when it gained or lost a pick.
//
// Plans are never mutated once compiled, and a Memo relies on it: it keeps
// the last plan, compares the next one with it, and takes a Ports slice
// that two plans share (a compiler that reuses unchanged Services) as
// equal without comparing. A plan whose Services are not in namespace/name
// order, or that has two ports with one key (which the compiler rejects),
// is rendered afresh (NFTables) and makes the Memo start over; one in
// which two ports have chains of one name is rendered afresh.
//
// The zero Memo is ready to use; a nil *Memo renders afresh on every
// call. A Memo is used by one goroutine at a time.
type Memo struct {
	svcs   []memoEntry // the last plan's Services, in its order
	tables [len(nftFamilies)]memoTable

	// Scratch space reused from call to call.
	next  []memoEntry
	fresh []int // indexes in next of the Services to scan
}

// NFTablesModel is NFTablesModel(p), reusing the work of the previous
// call.
func (m *Memo) NFTablesModel(p *plan.Plan) *nftmodel.Ruleset {
	if m == nil {
		return NFTablesModel(p)
	}
	if p == nil {
		p = &plan.Plan{}
	}
	if !m.update(p) {
		*m = Memo{}
		return NFTablesModel(p)
	}
	for f := range m.tables {
		if m.tables[f].dups > 0 {
			return NFTablesModel(p)
		}
	}
	rs := &nftmodel.Ruleset{Comment: rulesetComment("nftables ruleset of node " + p.Node.Name + ", rendered by netspec: do not edit.")}
	for f := range m.tables {
		rs.Tables = append(rs.Tables, m.table(f))
	}
	return rs
}

// memoEntry is a Service of the last plan with what a Memo keeps of it.
type memoEntry struct {
	svc   *plan.Service
	ms    *memoSvc
	items [len(nftFamilies)][]nftmodel.Item // the sets and chains of its ports in each table (appendGroupItems), in the list of the last model it assembled
}

// memoSvc is what a Memo derived from a Service.
type memoSvc struct {
	ports [len(nftFamilies)][]memoPort // in each table, in comparePorts order
	redo  [len(nftFamilies)]bool       // its text is to be written in this update
}

// memoPort is a service port with what a table derived from it: the
// names of its chains and its picks. The rest is derived again from the
// Service when the port is written or leaves (memoTable.view), so that a
// Memo holds no plan but the last, and little per port.
type memoPort struct {
	nftChains
	index int32 // in Service.Ports
}

// view fills v for port mp of svc, a Service of the plan that has it, as
// nftTable.viewPort: the port as the table sees it is derived again, in
// v (held).
func (mt *memoTable) view(v *nftPortView, svc *plan.Service, mp *memoPort) *nftPortView {
	v.held = newPort(svc, int(mp.index))
	v.held.nftChains = mp.nftChains
	return mt.t.viewPort(v, &v.held)
}

// memoLists are the sorted lists of a table: its maps and the sets
// cluster-frontends and cluster-ips (nftMaps), then the set hairpin.
const memoLists = len(nftMaps) + 1

// memoBucket is an endpoint map.
type memoBucket struct {
	picks []*nftPick    // by slot
	set   *nftmodel.Set // pickMapSet, when there are picks
	dirty bool          // picks were added or removed
}

// readEndpoints gives back their endpoints to the bucket's picks that its
// last map holds, read from the map: from the offset of its slot then,
// the pick's keys map to its endpoints in order.
func (bk *memoBucket) readEndpoints() {
	if bk.set == nil {
		return
	}
	all := bk.set.Endpoints
	for _, p := range bk.picks {
		if p.eps != nil { // new
			continue
		}
		i, _ := slices.BinarySearchFunc(all, p.offset(), func(e nftmodel.EndpointElement, lo uint32) int { return cmp.Compare(e.Lo, lo) })
		p.eps = make([]netip.AddrPort, p.n)
		for j := range p.eps {
			p.eps[j] = all[i+j].To
		}
	}
}

// memoTable is what a Memo keeps of one table.
type memoTable struct {
	t *nftTable // of the last update, with its count of service ports
	// sets are the lists' sets in the last model; counts[k][i] is how
	// many elements of ports (hairpin addresses of endpoints) the element
	// sets[k].Elements[i] stands for: one, but for an address that
	// several ports have, or duplicates (mapSet).
	sets   [memoLists]*nftmodel.Set
	counts [memoLists][]int32
	// runs are the elements of a key whose values differ (two Services
	// with one frontend, which the compiler rejects), in order: the set
	// shows the first, and the verdicts of the rest as dropped.
	runs [memoLists]map[nftmodel.Key][]nftmodel.Element
	// dispatch are the base and dispatch chains of the last model, reused
	// when built alike.
	dispatch map[string]*nftmodel.Chain
	buckets  [pickBuckets]memoBucket

	// chains counts the ports that have each name of a chain that picks
	// (service, external, local); dups is how many names more than one
	// port has. NFTables finds a pick by name, a Memo by port: they agree
	// while names are unique.
	chains map[string]int32
	dups   int

	// Of the update in progress: elements that left and came.
	del, add [memoLists][]nftmodel.Element
}

// sameService tells whether two Services are equal but for their ports:
// plan.Service.Equal of copies without them, so that a field added to
// Service is compared here too.
func sameService(a, b *plan.Service) bool {
	if a == b {
		return true
	}
	x, y := *a, *b
	x.Ports, y.Ports = nil, nil
	return x.Equal(&y)
}

// samePorts tells whether two Services' ports render alike (samePort).
func samePorts(a, b []plan.Port) bool {
	return plan.Shared(a, b) || slices.EqualFunc(a, b, samePort)
}

// samePort tells whether two ports render alike: plan.Port.Equal but for
// the fields of endpoints that no table reads (a daemon's plans are
// compiled afresh, and comparing those, strings mostly, costs more than
// the rest).
func samePort(a, b plan.Port) bool {
	return a.Name == b.Name && a.Protocol == b.Protocol && a.Port == b.Port && a.NodePort == b.NodePort &&
		slices.Equal(a.Cluster, b.Cluster) && slices.Equal(a.External, b.External) && slices.Equal(a.ShortCircuit, b.ShortCircuit) &&
		slices.EqualFunc(a.Endpoints, b.Endpoints, func(x, y plan.Endpoint) bool {
			return x.IP == y.IP && x.Port == y.Port && x.Ready == y.Ready && x.Serving == y.Serving
		})
}

// update brings the Memo to plan p: it matches p's Services with the last
// ones, drops those that left or changed, and updates the tables. It
// returns false for a plan it cannot follow (see Memo).
func (m *Memo) update(p *plan.Plan) bool {
	var restyle [len(nftFamilies)]bool
	for f := range m.tables {
		mt := &m.tables[f]
		t := &nftTable{fam: nftFamilies[f]}
		t.setup(p)
		if mt.t == nil {
			restyle[f] = true
		} else {
			restyle[f] = !slices.Equal(mt.t.podCIDRs, t.podCIDRs) || !slices.Equal(mt.t.nodeIPs, t.nodeIPs)
			t.count = mt.t.count
		}
		mt.t = t
	}

	// Both lists are in namespace/name order: a merge. The order of p is
	// checked on the way where the last plan does not vouch for it.
	old, next, fresh := m.svcs, m.next[:0], m.fresh[:0]
	var made []memoSvc // allocated a chunk at a time, each twice the last
	j, prevReused := 0, false
	for i := range p.Services {
		s := &p.Services[i]
		for j < len(old) && compareServices(old[j].svc, s) < 0 {
			m.drop(old[j])
			j++
		}
		reused := false
		if j < len(old) && compareServices(old[j].svc, s) == 0 {
			if reused = sameService(old[j].svc, s) && samePorts(old[j].svc.Ports, s.Ports); reused {
				e := old[j]
				e.svc = s
				next = append(next, e)
			} else {
				m.drop(old[j])
			}
			j++
		}
		if !reused {
			if len(made) == cap(made) {
				// A chunk lives while one of its Services does: one
				// new Service must not keep a big chunk alive.
				made = make([]memoSvc, 0, min(max(1, 2*cap(made)), len(p.Services)-i, 1024))
			}
			made = append(made, memoSvc{})
			ms := &made[len(made)-1]
			fresh = append(fresh, len(next))
			next = append(next, memoEntry{svc: s, ms: ms})
		}
		// Two Services reused in turn are in order, as the last plan's.
		if i > 0 && !(reused && prevReused) && compareServices(&p.Services[i-1], s) >= 0 {
			return false
		}
		prevReused = reused
	}
	for ; j < len(old); j++ {
		m.drop(old[j])
	}
	clear(old)
	m.svcs, m.next, m.fresh = next, old[:0], fresh

	for f := range m.tables {
		if !m.tables[f].update(f, next, fresh, restyle[f]) {
			return false
		}
	}
	return true
}

// drop removes a Service of the last plan from the tables.
func (m *Memo) drop(e memoEntry) {
	ms := e.ms
	for f := range m.tables {
		mt := &m.tables[f]
		mt.t.count -= len(ms.ports[f])
		for i := range ms.ports[f] {
			mp := &ms.ports[f][i]
			mt.elements(e.svc, mp)
			for _, p := range mp.ownPicks() {
				p.gone = true
				mt.buckets[p.bucket].dirty = true
			}
			mt.countChains(&mp.nftChains, -1)
		}
	}
}

// countChains adds d to the count of ports that have each name of a
// chain of c that picks, keeping dups.
func (mt *memoTable) countChains(c *nftChains, d int32) {
	for _, name := range [...]string{c.serviceChain, c.externalChain, c.localChain} {
		if name == "" {
			continue
		}
		n := mt.chains[name]
		switch {
		case n <= 1 && n+d > 1:
			mt.dups++
		case n > 1 && n+d <= 1:
			mt.dups--
		}
		if n+d == 0 {
			delete(mt.chains, name)
		} else {
			mt.chains[name] = n + d
		}
	}
}

// update brings table f to entries, whose Services at fresh are new: it
// runs the first pass over their ports, updates the lists and endpoint
// maps, and writes the text of the new Services and of those whose picks
// moved (of every Service, with restyle). It returns false when two ports
// of a Service have one key.
func (mt *memoTable) update(f int, entries []memoEntry, fresh []int, restyle bool) bool {
	t := mt.t
	// What the new ports need is allocated at once.
	n := 0
	for _, i := range fresh {
		if e := &entries[i]; t.serves(e.svc) {
			n += len(e.svc.Ports)
			e.ms.redo[f] = true
		}
	}
	if mt.chains == nil {
		mt.chains = make(map[string]int32, n+n/4)
	}
	ports := make([]memoPort, n)
	var sps []nftPort // scratch
	for _, i := range fresh {
		e := &entries[i]
		if !e.ms.redo[f] {
			continue
		}
		sps = appendPorts(sps[:0], e.svc)
		for j := 1; j < len(sps); j++ {
			if comparePorts(&sps[j-1], &sps[j]) == 0 {
				return false
			}
		}
		mps := ports[:len(sps):len(sps)]
		ports = ports[len(mps):]
		for j := range sps {
			mt.scan(t, e.ms, &sps[j])
			mps[j] = memoPort{nftChains: sps[j].nftChains, index: sps[j].index}
		}
		e.ms.ports[f] = mps
		t.count += len(mps)
	}
	for k := range mt.sets {
		ok := mt.patch(k)
		// The scratch lists are kept for the next update, but not the
		// big ones of a first build.
		for _, l := range [...]*[]nftmodel.Element{&mt.del[k], &mt.add[k]} {
			clear(*l)
			*l = (*l)[:0]
			if cap(*l) > 1024 {
				*l = nil
			}
		}
		if !ok {
			return false
		}
	}

	// The endpoint maps that gained or lost a pick are assigned again.
	for b := range mt.buckets {
		bk := &mt.buckets[b]
		if !bk.dirty {
			continue
		}
		bk.dirty = false
		bk.picks = slices.DeleteFunc(bk.picks, func(p *nftPick) bool { return p.gone })
		bk.readEndpoints()
		for _, p := range bk.picks {
			p.slot = p.home
		}
		slices.SortFunc(bk.picks, comparePicks)
		assignBucket(bk.picks)
		bk.set = nil
		if len(bk.picks) > 0 {
			bk.set = pickMapSet(t.fam, bk.picks)
		}
		for _, p := range bk.picks {
			p.eps = nil // the map holds them
			if p.slot != p.shown {
				p.owner.redo[f] = true
			}
		}
	}

	// What is to be written: the new Services and those whose picks
	// moved, or every Service with ports in the table.
	var write []int // indexes in entries
	for i := range entries {
		if ms := entries[i].ms; ms.redo[f] || restyle && len(ms.ports[f]) > 0 {
			write = append(write, i)
		}
	}
	mt.write(f, entries, write)
	return true
}

// scan runs the first pass over a new port of ms: it names the port's
// chains, adds its elements to the update (add) and keeps its picks.
func (mt *memoTable) scan(t *nftTable, ms *memoSvc, sp *nftPort) {
	maps := t.maps()
	for _, m := range maps {
		*m = (*m)[:0]
	}
	t.picks, t.hairpin = t.picks[:0], t.hairpin[:0]
	t.scanPort(t.viewPort(&t.view, sp))
	for k, m := range maps {
		mt.add[k] = append(mt.add[k], *m...)
	}
	for _, a := range t.hairpin {
		mt.add[len(nftMaps)] = append(mt.add[len(nftMaps)], nftmodel.Element{Key: nftmodel.Key{Addr: a}})
	}
	if len(t.picks) > 0 {
		copy(sp.picks[:], t.picks)
		for _, p := range sp.ownPicks() {
			p.owner = ms
			bk := &mt.buckets[p.bucket]
			bk.picks = append(bk.picks, p)
			bk.dirty = true
		}
	}
	mt.countChains(&sp.nftChains, 1)
}

// elements adds to the update the elements of port mp of svc, a Service
// of the last plan, as scan added them then (del): the elements depend
// on the port and the table's family only.
func (mt *memoTable) elements(svc *plan.Service, mp *memoPort) {
	t := mt.t
	maps := t.maps()
	for _, m := range maps {
		*m = (*m)[:0]
	}
	v := mt.view(&t.view, svc, mp)
	t.addElements(v)
	for k, m := range maps {
		mt.del[k] = append(mt.del[k], *m...)
	}
	for i := range v.all {
		mt.del[len(nftMaps)] = append(mt.del[len(nftMaps)], nftmodel.Element{Key: nftmodel.Key{Addr: v.all[i].addr.Addr()}})
	}
	v.held = nftPort{} // of the last plan but one, which the Memo lets go
}

// write builds the sets and chains of the Services at indexes of entries
// in table f, side by side when they are many.
func (mt *memoTable) write(f int, entries []memoEntry, indexes []int) {
	t := mt.t
	sideBySide(len(indexes), workers(len(indexes)), func(_, from, to int) {
		var v nftPortView
		for _, i := range indexes[from:to] {
			e := &entries[i]
			var items []nftmodel.Item
			for j := range e.ms.ports[f] {
				mp := &e.ms.ports[f][j]
				items = t.appendGroupItems(items, mt.view(&v, e.svc, mp))
				for _, p := range mp.ownPicks() {
					p.shown = p.slot
				}
			}
			e.ms.redo[f] = false
			e.items[f] = slices.Clip(items)
		}
	})
}

// patch brings list k's set to the update: without the elements del, with
// the elements add. The set is built anew when its elements change (the
// last model keeps the old one) and stays the same pointer otherwise:
// when the same elements left and came (a Service changed in what the
// list does not hold), or only the number of ports behind an address
// changed. It returns false when an element to remove is not there.
func (mt *memoTable) patch(k int) bool {
	del, add := mt.del[k], mt.add[k]
	slices.SortFunc(del, compareElements)
	slices.SortFunc(add, compareElements)
	// Elements that both left and came cancel out.
	d, a := 0, 0
	for i, j := 0, 0; i < len(del) || j < len(add); {
		c := -1
		switch {
		case i == len(del):
			c = 1
		case j < len(add):
			c = compareElements(del[i], add[j])
		}
		switch {
		case c < 0:
			del[d] = del[i]
			d, i = d+1, i+1
		case c > 0:
			add[a] = add[j]
			a, j = a+1, j+1
		default:
			i, j = i+1, j+1
		}
	}
	del, add = del[:d], add[:a]
	old := mt.sets[k]
	if old != nil && len(del) == 0 && len(add) == 0 {
		return true
	}

	hairpin := k == len(nftMaps)
	silent := hairpin || nftMaps[k].addrs // repeats are not shown (mapSet)
	var olds []nftmodel.Element
	var dropped map[nftmodel.Key][]nftmodel.Verdict // shared with old's until a key's entry changes
	if old != nil {
		olds, dropped = old.Elements, old.Dropped
	}
	ownDropped := false
	setDropped := func(key nftmodel.Key, vs []nftmodel.Verdict) {
		if len(vs) == 0 && len(dropped[key]) == 0 {
			return
		}
		if !ownDropped {
			dropped, ownDropped = maps.Collect(maps.All(dropped)), true // never nil
		}
		if len(vs) == 0 {
			delete(dropped, key)
			return
		}
		dropped[key] = vs
	}
	oldCounts := mt.counts[k]
	// At most one element more than olds has per key that came: the
	// lists keep no room to spare (a first build adds an address once
	// per port that has it).
	n := len(olds)
	for j := range add {
		if j == 0 || add[j].Key != add[j-1].Key {
			n++
		}
	}
	elems := make([]nftmodel.Element, 0, n)
	counts := make([]int32, 0, n)
	changed := old == nil
	var run []nftmodel.Element
	i := 0 // in olds, the first not yet copied
	for len(del) > 0 || len(add) > 0 {
		var key nftmodel.Key
		if len(add) == 0 || len(del) > 0 && compareElementKeys(&del[0].Key, &add[0].Key) <= 0 {
			key = del[0].Key
		} else {
			key = add[0].Key
		}
		j := i + sort.Search(len(olds)-i, func(j int) bool { return compareElementKeys(&olds[i+j].Key, &key) >= 0 })
		elems, counts = append(elems, olds[i:j]...), append(counts, oldCounts[i:j]...)
		i = j
		// The key's elements, sorted: as many as the old element stands
		// for, alike, or those kept in runs.
		run = run[:0]
		var was *nftmodel.Element
		if i < len(olds) && olds[i].Key == key {
			was = &olds[i]
			if r, ok := mt.runs[k][key]; ok {
				run = append(run, r...)
			} else {
				for range oldCounts[i] {
					run = append(run, *was)
				}
			}
			i++
		}
		for ; len(del) > 0 && del[0].Key == key; del = del[1:] {
			at := slices.Index(run, del[0])
			if at < 0 {
				return false
			}
			run = slices.Delete(run, at, at+1)
		}
		for ; len(add) > 0 && add[0].Key == key; add = add[1:] {
			at, _ := slices.BinarySearchFunc(run, add[0], compareElements)
			run = slices.Insert(run, at, add[0])
		}
		if len(run) == 0 {
			changed = true
			delete(mt.runs[k], key)
			setDropped(key, nil)
			continue
		}
		cur := run[0]
		var drops []nftmodel.Verdict
		if !silent {
			for _, e := range run[1:] {
				drops = append(drops, e.Verdict)
			}
		}
		if was == nil || *was != cur || !slices.Equal(dropped[key], drops) {
			changed = true
			setDropped(key, drops)
		} else {
			cur = *was
		}
		elems, counts = append(elems, cur), append(counts, int32(len(run)))
		if run[0] == run[len(run)-1] {
			delete(mt.runs[k], key)
		} else {
			if mt.runs[k] == nil {
				mt.runs[k] = make(map[nftmodel.Key][]nftmodel.Element)
			}
			mt.runs[k][key] = slices.Clone(run)
		}
	}
	elems, counts = append(elems, olds[i:]...), append(counts, oldCounts[i:]...)
	mt.counts[k] = counts
	if !changed {
		return true
	}
	s := listSet(k)
	s.Elements = elems
	if len(dropped) > 0 {
		s.Dropped = dropped
	}
	mt.sets[k] = s
	return true
}

// table assembles the model of table f, as nftTable.model.
func (m *Memo) table(f int) *nftmodel.Table {
	mt := &m.tables[f]
	t := mt.t
	tm := t.dispatchModel()
	last := mt.dispatch
	mt.dispatch = make(map[string]*nftmodel.Chain, len(tm.Items))
	var cmp nftmodel.Comparer
	for i := range tm.Items {
		c := tm.Items[i].Chain
		// Built alike: the same for the kernel and in the file.
		if old := last[c.Name]; old != nil && old.Comment == c.Comment && cmp.SameChain(old, c, tm.Family) {
			tm.Items[i].Chain = old
		}
		mt.dispatch[c.Name] = tm.Items[i].Chain
	}
	n := len(tm.Items) + len(mt.sets) + 2 + pickBuckets
	for i := range m.svcs {
		n += len(m.svcs[i].items[f])
	}
	tm.Items = slices.Grow(tm.Items, n-len(tm.Items))
	t.addSets(tm, mt.sets[:])
	for i := range mt.buckets {
		if bk := &mt.buckets[i]; len(bk.picks) > 0 {
			tm.AddSet("", bk.set)
		}
	}
	for i := range m.svcs {
		e := &m.svcs[i]
		if len(e.items[f]) == 0 {
			continue
		}
		// From now on the entry's items are those of the model: one copy
		// of them is kept, not two.
		from := len(tm.Items)
		tm.Items = append(tm.Items, e.items[f]...)
		e.items[f] = tm.Items[from:len(tm.Items):len(tm.Items)]
	}
	return tm
}
