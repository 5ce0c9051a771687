package render

import (
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"

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
// changed (nft.Applier.Update).
//
// Per Service and table it keeps the first pass over the Service's ports
// (chain names, map elements, endpoint picks, hairpin addresses) and the
// model of their sets and chains; per table, the maps' sorted elements
// and sets, and the endpoint maps. A Service is reused when it equals the
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

// NFTables is NFTables(p), reusing the work of the previous call: the text
// of NFTablesModel.
func (m *Memo) NFTables(p *plan.Plan) []byte { return m.NFTablesModel(p).Text() }

// memoEntry is a Service of the last plan with what a Memo keeps of it.
type memoEntry struct {
	svc   *plan.Service
	ms    *memoSvc
	items [len(nftFamilies)][]nftmodel.Item // the sets and chains of its ports in each table (appendGroupItems)
}

// memoSvc is what a Memo derived from a Service.
type memoSvc struct {
	ns, name string
	ports    [len(nftFamilies)][]*memoPort // in each table, in comparePorts order
	redo     [len(nftFamilies)]bool        // its text is to be written in this update
}

// memoPort is a service port with what a table derived from it. Its svc
// and port are set only while it is scanned or written, so that a Memo
// holds no plan but the last.
type memoPort struct {
	nftPort
	index int                     // in Service.Ports
	own   [memoLists][]nftElement // its map elements, then hairpin addresses (addr)
}

// memoLists are the sorted lists of a table: its maps and the sets
// cluster-frontends and cluster-ips (nftMaps), then the set hairpin.
const memoLists = len(nftMaps) + 1

// memoLine is an element of a list.
type memoLine struct {
	e *nftElement // in its port's own
}

// memoBucket is an endpoint map.
type memoBucket struct {
	picks []*nftPick    // by slot
	set   *nftmodel.Set // pickMapSet, when there are picks
	dirty bool          // picks were added or removed
}

// memoTable is what a Memo keeps of one table.
type memoTable struct {
	t     *nftTable // of the last update, with its count of service ports
	lists [memoLists][]memoLine
	sets  [memoLists]*nftmodel.Set // of the lists (listSet)
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
	del   [memoLists][]*nftElement
	add   [memoLists][]memoLine
	spare [memoLists][]memoLine // the lists' previous arrays, to reuse
}

// sameService tells whether two Services are equal but for their ports.
func sameService(a, b *plan.Service) bool {
	return a == b || a.Namespace == b.Namespace && a.Name == b.Name && a.Type == b.Type &&
		sameSlice(a.ClusterIPs, b.ClusterIPs) && a.Headless == b.Headless &&
		a.ExternalName == b.ExternalName && sameSlice(a.ExternalIPs, b.ExternalIPs) &&
		sameSlice(a.LoadBalancerIPs, b.LoadBalancerIPs) && sameSlice(a.SourceRanges, b.SourceRanges) &&
		a.AffinitySeconds == b.AffinitySeconds && a.InternalLocal == b.InternalLocal &&
		a.ExternalLocal == b.ExternalLocal && a.HealthCheckNodePort == b.HealthCheckNodePort &&
		a.IPVSScheduler == b.IPVSScheduler
}

// sameSlice is slices.Equal, at once for a slice that two plans share.
func sameSlice[E comparable](a, b []E) bool { return plan.Shared(a, b) || slices.Equal(a, b) }

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
		slices.Equal(a.Cluster, b.Cluster) && slices.Equal(a.External, b.External) &&
		slices.EqualFunc(a.Endpoints, b.Endpoints, func(x, y plan.Endpoint) bool {
			return x.IP == y.IP && x.Port == y.Port && x.Ready == y.Ready && x.Serving == y.Serving
		})
}

// compareKeys orders Services by namespace and name.
func compareKeys(a, b *plan.Service) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
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
	var made []memoSvc // allocated a chunk at a time
	j, prev := 0, -1
	for i := range p.Services {
		s := &p.Services[i]
		if j < len(old) && (old[j].svc.Namespace != s.Namespace || old[j].svc.Name != s.Name) {
			for j < len(old) && compareKeys(old[j].svc, s) < 0 {
				m.drop(old[j].ms)
				j++
			}
		}
		matched := -1
		if j < len(old) && old[j].svc.Namespace == s.Namespace && old[j].svc.Name == s.Name {
			matched = j
			if sameService(old[j].svc, s) && samePorts(old[j].svc.Ports, s.Ports) {
				e := old[j]
				e.svc = s
				next = append(next, e)
			} else {
				m.drop(old[j].ms)
				matched = -1
			}
			j++
		}
		if matched < 0 {
			if len(made) == cap(made) {
				made = make([]memoSvc, 0, min(max(16, len(p.Services)-i), 1024))
			}
			made = append(made, memoSvc{ns: s.Namespace, name: s.Name})
			fresh = append(fresh, len(next))
			next = append(next, memoEntry{svc: s, ms: &made[len(made)-1]})
		}
		// Two Services matched in turn are in order, as the last plan's.
		if i > 0 && (matched < 0 || prev < 0) && compareKeys(&p.Services[i-1], s) >= 0 {
			return false
		}
		prev = matched
	}
	for ; j < len(old); j++ {
		m.drop(old[j].ms)
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

// drop removes a Service from the tables.
func (m *Memo) drop(ms *memoSvc) {
	for f := range m.tables {
		mt := &m.tables[f]
		mt.t.count -= len(ms.ports[f])
		for _, mp := range ms.ports[f] {
			for k := range mp.own {
				for i := range mp.own[k] {
					mt.del[k] = append(mt.del[k], &mp.own[k][i])
				}
			}
			for _, p := range mp.picks {
				p.gone = true
				mt.buckets[p.bucket].dirty = true
			}
			for _, name := range [...]string{mp.serviceChain, mp.externalChain, mp.localChain} {
				if name == "" {
					continue
				}
				switch n := mt.chains[name]; n {
				case 1:
					delete(mt.chains, name)
				case 2:
					mt.dups--
					fallthrough
				default:
					mt.chains[name] = n - 1
				}
			}
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
	ports, ptrs := make([]memoPort, n), make([]*memoPort, n)
	s := &memoScan{own: make([]nftElement, 0, 4*n)}
	for k := range mt.add {
		if k == 0 || k == len(nftMaps) {
			mt.add[k] = slices.Grow(mt.add[k], n*(1+k/len(nftMaps)))
		}
	}
	for _, i := range fresh {
		e := &entries[i]
		if !e.ms.redo[f] {
			continue
		}
		mps := ptrs[:len(e.svc.Ports):len(e.svc.Ports)]
		ptrs = ptrs[len(mps):]
		for j := range mps {
			ports[j] = memoPort{nftPort: newPort(e.svc, j), index: j}
			mps[j] = &ports[j]
		}
		ports = ports[len(mps):]
		// As sortPorts sorts the ports of a Service.
		slices.SortFunc(mps, func(a, b *memoPort) int { return comparePorts(&a.nftPort, &b.nftPort) })
		for j := 1; j < len(mps); j++ {
			if comparePorts(&mps[j-1].nftPort, &mps[j].nftPort) == 0 {
				return false
			}
		}
		for _, mp := range mps {
			mt.scan(t, e.ms, mp, s)
		}
		e.ms.ports[f] = mps
		t.count += len(mps)
	}
	for k := range mt.lists {
		compare := compareElementPtrs
		if k == len(nftMaps) {
			compare = compareHairpin
		}
		switch {
		case mt.sets[k] != nil && mt.swap(k, compare):
			// The same elements left and came back (a Service changed in
			// what the list does not hold): the set stays as it is.
		case len(mt.del[k]) > 0 || len(mt.add[k]) > 0 || mt.sets[k] == nil:
			mt.lists[k], mt.spare[k] = patchLines(mt.spare[k][:0], mt.lists[k], mt.del[k], mt.add[k], compare), mt.lists[k]
			if set := mt.listSet(k); mt.sets[k] == nil || !sameElements(mt.sets[k].Elements, set.Elements) {
				mt.sets[k] = set
			}
		}
		clear(mt.del[k])
		clear(mt.add[k])
		mt.del[k], mt.add[k] = mt.del[k][:0], mt.add[k][:0]
	}

	// The endpoint maps that gained or lost a pick are assigned again.
	var moved []*memoSvc
	for b := range mt.buckets {
		bk := &mt.buckets[b]
		if !bk.dirty {
			continue
		}
		bk.dirty = false
		bk.picks = slices.DeleteFunc(bk.picks, func(p *nftPick) bool { return p.gone })
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
			if p.slot != p.shown && !p.owner.redo[f] {
				p.owner.redo[f] = true
				moved = append(moved, p.owner)
			}
		}
	}

	var write []int // indexes in entries
	switch {
	case restyle:
		for i := range entries {
			if len(entries[i].ms.ports[f]) > 0 {
				write = append(write, i)
			}
		}
	default:
		for _, i := range fresh {
			if entries[i].ms.redo[f] {
				write = append(write, i)
			}
		}
		for _, ms := range moved {
			i, _ := slices.BinarySearchFunc(entries, ms, func(e memoEntry, ms *memoSvc) int {
				return compareKeys(e.svc, &plan.Service{Namespace: ms.ns, Name: ms.name})
			})
			write = append(write, i)
		}
	}
	mt.write(f, entries, write)
	return true
}

// memoScan is where the first pass over an update's new ports puts what
// it keeps.
type memoScan struct {
	own   []nftElement // the ports' own elements
	picks []*nftPick   // the ports' picks
}

// scan runs the first pass over a new port of ms: it names the port's
// chains, keeps its elements and picks (in s).
func (mt *memoTable) scan(t *nftTable, ms *memoSvc, mp *memoPort, s *memoScan) {
	maps := t.maps()
	for _, m := range maps {
		*m = (*m)[:0]
	}
	t.picks, t.hairpin = t.picks[:0], t.hairpin[:0]
	t.scanPort(t.viewPort(&mp.nftPort))
	for k, m := range maps {
		if len(*m) > 0 {
			from := len(s.own)
			s.own = append(s.own, *m...)
			mp.own[k] = s.own[from:len(s.own):len(s.own)]
		}
	}
	if len(t.hairpin) > 0 {
		from := len(s.own)
		for _, a := range t.hairpin {
			s.own = append(s.own, nftElement{addr: a})
		}
		mp.own[len(nftMaps)] = s.own[from:len(s.own):len(s.own)]
	}
	for k := range mp.own {
		for i := range mp.own[k] {
			mt.add[k] = append(mt.add[k], memoLine{e: &mp.own[k][i]})
		}
	}
	if len(t.picks) > 0 {
		from := len(s.picks)
		s.picks = append(s.picks, t.picks...)
		mp.picks = s.picks[from:len(s.picks):len(s.picks)]
		for _, p := range mp.picks {
			p.owner = ms
			bk := &mt.buckets[p.bucket]
			bk.picks = append(bk.picks, p)
			bk.dirty = true
		}
	}
	for _, name := range [...]string{mp.serviceChain, mp.externalChain, mp.localChain} {
		if name == "" {
			continue
		}
		if mt.chains[name] == 1 {
			mt.dups++
		}
		mt.chains[name]++
	}
	mp.svc, mp.port = nil, nil
}

func compareElementPtrs(a, b *nftElement) int { return compareElements(*a, *b) }

func compareHairpin(a, b *nftElement) int { return a.addr.Compare(b.addr) }

// patchLines appends to dst the sorted list without the elements del and
// with the lines add, in order.
func patchLines(dst, list []memoLine, del []*nftElement, add []memoLine, compare func(a, b *nftElement) int) []memoLine {
	lowerBound := func(e *nftElement) int {
		i, _ := slices.BinarySearchFunc(list, e, func(l memoLine, e *nftElement) int { return compare(l.e, e) })
		return i
	}
	gone := make([]int, 0, len(del))
	for _, e := range del {
		for i := lowerBound(e); i < len(list) && compare(list[i].e, e) == 0; i++ {
			if list[i].e == e {
				gone = append(gone, i)
				break
			}
		}
	}
	slices.Sort(gone)
	slices.SortFunc(add, func(a, b memoLine) int { return compare(a.e, b.e) })
	dst = slices.Grow(dst, len(list)-len(gone)+len(add))
	from := 0 // in list, the first not yet copied or skipped
	for len(add) > 0 || len(gone) > 0 {
		ins := len(list) + 1
		if len(add) > 0 {
			ins = lowerBound(add[0].e)
		}
		if len(gone) == 0 || ins <= gone[0] {
			dst = append(dst, list[from:ins]...)
			dst = append(dst, add[0])
			from, add = ins, add[1:]
			continue
		}
		dst = append(dst, list[from:gone[0]]...)
		from, gone = gone[0]+1, gone[1:]
	}
	return append(dst, list[from:]...)
}

// write builds the sets and chains of the Services at indexes of entries
// in table f, side by side when they are many.
func (mt *memoTable) write(f int, entries []memoEntry, indexes []int) {
	t := mt.t
	write := func(indexes []int) {
		var v nftPortView
		for _, i := range indexes {
			e := &entries[i]
			var items []nftmodel.Item
			for _, mp := range e.ms.ports[f] {
				mp.svc, mp.port = e.svc, &e.svc.Ports[mp.index]
				items = t.appendGroupItems(items, t.viewPortIn(&v, &mp.nftPort))
				mp.svc, mp.port = nil, nil
				for _, p := range mp.picks {
					p.shown = p.slot
				}
			}
			e.ms.redo[f] = false
			e.items[f] = slices.Clip(items)
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(indexes)/groupsPerWorker)
	if workers < 2 {
		write(indexes)
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		part := indexes[w*len(indexes)/workers : (w+1)*len(indexes)/workers]
		wg.Go(func() { write(part) })
	}
	wg.Wait()
}

// swap tells whether the elements that leave list k (del) and those that
// come (add) are equal, one for one; if so the list takes the new ones in
// place of the old, in O(changes · log n), and its set need not change.
func (mt *memoTable) swap(k int, compare func(a, b *nftElement) int) bool {
	del, add := mt.del[k], mt.add[k]
	if len(del) != len(add) {
		return false
	}
	slices.SortFunc(del, compare)
	slices.SortFunc(add, func(a, b memoLine) int { return compare(a.e, b.e) })
	for i := range del {
		if compare(del[i], add[i].e) != 0 {
			return false
		}
	}
	list := mt.lists[k]
	at := make([]int, len(del))
	for i, e := range del {
		j, _ := slices.BinarySearchFunc(list, e, func(l memoLine, e *nftElement) int { return compare(l.e, e) })
		for j < len(list) && list[j].e != e && compare(list[j].e, e) == 0 {
			j++
		}
		if j == len(list) || list[j].e != e {
			return false
		}
		at[i] = j
	}
	for i, j := range at {
		list[j].e = add[i].e
	}
	return true
}

// listSet is the set or map of list k (mapSet, hairpinSet).
func (mt *memoTable) listSet(k int) *nftmodel.Set {
	list := mt.lists[k]
	at := func(i int) *nftElement { return list[i].e }
	if k == len(nftMaps) {
		s := &nftmodel.Set{Name: "hairpin", Comment: hairpinComment, Key: keyAddrAddr}
		s.Elements = make([]nftmodel.Element, 0, len(list))
		for i := range list {
			if a := list[i].e.addr; i == 0 || a != list[i-1].e.addr {
				s.Elements = append(s.Elements, nftmodel.Element{Key: nftmodel.Key{Addr: a, Addr2: a}})
			}
		}
		return s
	}
	return mapSetOf(nftMaps[k].name, nftMaps[k].name+": "+nftMaps[k].comment, mapKey(k), !nftMaps[k].set, len(list), at)
}

// table assembles the model of table f, as nftTable.model.
func (m *Memo) table(f int) *nftmodel.Table {
	mt := &m.tables[f]
	t := mt.t
	tm := t.dispatchModel()
	last := mt.dispatch
	mt.dispatch = make(map[string]*nftmodel.Chain, len(tm.Items))
	for i := range tm.Items {
		c := tm.Items[i].Chain
		if old := last[c.Name]; old != nil && sameChain(old, c) {
			tm.Items[i].Chain = old
		}
		mt.dispatch[c.Name] = tm.Items[i].Chain
	}
	n := len(tm.Items) + len(mt.sets) + 2 + pickBuckets
	for i := range m.svcs {
		n += len(m.svcs[i].items[f])
	}
	tm.Items = slices.Grow(tm.Items, n-len(tm.Items))
	for k, s := range mt.sets {
		heading := ""
		if k == 0 {
			heading = "Maps."
		}
		tm.AddSet(heading, s)
	}
	if s := t.podCIDRsSet(); s != nil {
		tm.AddSet("", s)
	}
	tm.AddSet("", t.nodePortIPsSet())
	for i := range mt.buckets {
		if bk := &mt.buckets[i]; len(bk.picks) > 0 {
			tm.AddSet("", bk.set)
		}
	}
	for i := range m.svcs {
		tm.Items = append(tm.Items, m.svcs[i].items[f]...)
	}
	return tm
}

// sameChain tells whether two chains are built alike.
func sameChain(a, b *nftmodel.Chain) bool {
	return a.Name == b.Name && a.Comment == b.Comment && reflect.DeepEqual(a.Hook, b.Hook) && reflect.DeepEqual(a.Rules, b.Rules)
}

// sameElements tells whether two lists of elements are equal.
func sameElements(a, b []nftmodel.Element) bool {
	return slices.EqualFunc(a, b, func(x, y nftmodel.Element) bool {
		return x.Key == y.Key && x.Verdict == y.Verdict && x.To == y.To && x.Comment == y.Comment && x.Note == y.Note && slices.Equal(x.Dropped, y.Dropped)
	})
}
