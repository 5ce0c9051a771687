package render

import (
	"errors"
	"net/netip"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/render/nftmodel"
)

// Memo renders one node's successive plans as NFTables does, byte for
// byte, reusing what it derived from the Services that did not change
// since its previous call: a daemon re-renders the whole ruleset on every
// change of its tree, and a change of one Service then costs about that
// Service and a copy of the text, not the whole table.
//
// Per Service and table it keeps the first pass over the Service's ports
// (chain names, map elements with their lines, endpoint picks, hairpin
// addresses) and the text of their chains; per table, the maps' sorted
// elements and the endpoint maps' text. A Service is reused when it equals
// the previous plan's Service of the same namespace and name in what the
// ruleset is made of (sameService, samePorts). Its text is written again
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

// NFTables is NFTables(p), reusing the work of the previous call.
func (m *Memo) NFTables(p *plan.Plan) []byte {
	if m == nil {
		return NFTables(p)
	}
	if p == nil {
		p = &plan.Plan{}
	}
	if !m.update(p) {
		*m = Memo{}
		return NFTables(p)
	}
	for f := range m.tables {
		if m.tables[f].dups > 0 {
			return NFTables(p)
		}
	}
	size := 256 + len(p.Node.Name)
	for f := range m.tables {
		size += m.size(f)
	}
	b := make([]byte, 0, size)
	b = append(b, "# nftables ruleset of node "...)
	b = appendCommentText(b, p.Node.Name)
	b = append(b, ", rendered by netspec: do not edit.\n"...)
	b = append(b, "# `nft -f` replaces the tables ip netspec and ip6 netspec in one transaction\n"...)
	b = append(b, "# and touches no other table.\n"...)
	for f := range m.tables {
		b = append(b, '\n')
		b = m.appendTable(b, f)
	}
	return b
}

// KernelFiles is KernelFiles(p, dp, sched), reusing the work of the
// previous call for data plane nftables (Memo.NFTables). The IPVS data
// plane is rendered afresh.
func (m *Memo) KernelFiles(p *plan.Plan, dp Dataplane, sched string) (map[string][]byte, error) {
	if m == nil || dp != DataplaneNFTables {
		return KernelFiles(p, dp, sched)
	}
	if p == nil {
		return nil, errors.New("render: no plan")
	}
	return map[string][]byte{"nftables.nft": m.NFTables(p)}, nil
}

// memoEntry is a Service of the last plan with what a Memo keeps of it.
type memoEntry struct {
	svc  *plan.Service
	ms   *memoSvc
	text [len(nftFamilies)][]byte // the chains of its ports in each table (appendGroup)
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

// memoLine is an element of a list with its line (appendElement,
// appendHairpinElement), whose first key bytes are its key: two elements
// of a map have the same key exactly when these bytes are equal.
type memoLine struct {
	e    *nftElement // in its port's own
	line string
	key  int
}

// memoBucket is an endpoint map.
type memoBucket struct {
	picks []*nftPick // by slot
	text  []byte     // appendPickMap, when there are picks
	dirty bool       // picks were added or removed
}

// memoTable is what a Memo keeps of one table.
type memoTable struct {
	t       *nftTable // of the last update, with its count of service ports
	lists   [memoLists][]memoLine
	buckets [pickBuckets]memoBucket

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
	s := &memoScan{lines: make([]byte, 0, 160*n), own: make([]nftElement, 0, 4*n)}
	for k := range s.at {
		if k == 0 || k == len(nftMaps) {
			s.at[k] = make([][2]int, 0, n*(1+k/len(nftMaps)))
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
	arena := string(s.lines)
	for k := range mt.add {
		for i := range mt.add[k] {
			mt.add[k][i].line = arena[s.at[k][i][0]:s.at[k][i][1]]
		}
	}

	for k := range mt.lists {
		compare := compareElementPtrs
		if k == len(nftMaps) {
			compare = compareHairpin
		}
		if len(mt.del[k]) > 0 || len(mt.add[k]) > 0 {
			mt.lists[k], mt.spare[k] = patchLines(mt.spare[k][:0], mt.lists[k], mt.del[k], mt.add[k], compare), mt.lists[k]
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
		bk.text = bk.text[:0]
		if len(bk.picks) > 0 {
			n := 512
			for _, p := range bk.picks {
				n += 8 + len(p.chain) + 48*len(p.eps)
			}
			bk.text = appendPickMap(slices.Grow(bk.text, n), t.fam, bk.picks)
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
	lines []byte              // the lines of the added elements,
	at    [memoLists][][2]int // at these offsets
	own   []nftElement        // the ports' own elements
	picks []*nftPick          // the ports' picks
}

// scan runs the first pass over a new port of ms: it names the port's
// chains, keeps its elements (their lines in s) and picks.
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
			e := &mp.own[k][i]
			from := len(s.lines)
			var key int
			if k < len(nftMaps) {
				s.lines = append(s.lines, "\t\t\t"...)
				s.lines = e.appendKey(s.lines)
				key = len(s.lines) - from
				s.lines = appendElement(s.lines[:from], e)
			} else {
				s.lines = appendHairpinElement(s.lines, e.addr)
				key = len(s.lines) - from
			}
			mt.add[k] = append(mt.add[k], memoLine{e: e, key: key})
			s.at[k] = append(s.at[k], [2]int{from, len(s.lines)})
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

// write writes the text of the Services at indexes of entries in table f,
// side by side when they are many.
func (mt *memoTable) write(f int, entries []memoEntry, indexes []int) {
	t := mt.t
	write := func(indexes []int) {
		var v nftPortView
		var buf []byte
		var items []nftmodel.Item
		ends := make([]int, len(indexes))
		for n, i := range indexes {
			e := &entries[i]
			for _, mp := range e.ms.ports[f] {
				mp.svc, mp.port = e.svc, &e.svc.Ports[mp.index]
				buf = t.appendGroup(buf, t.viewPortIn(&v, &mp.nftPort), &items)
				mp.svc, mp.port = nil, nil
				for _, p := range mp.picks {
					p.shown = p.slot
				}
			}
			e.ms.redo[f] = false
			ends[n] = len(buf)
		}
		from := 0
		for n, i := range indexes {
			entries[i].text[f] = buf[from:ends[n]:ends[n]]
			from = ends[n]
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

// size is about the size of table f's text.
func (m *Memo) size(f int) int {
	mt := &m.tables[f]
	n := 16384
	for k := range mt.lists {
		for i := range mt.lists[k] {
			n += len(mt.lists[k][i].line)
		}
	}
	for b := range mt.buckets {
		n += len(mt.buckets[b].text)
	}
	for i := range m.svcs {
		n += len(m.svcs[i].text[f])
	}
	return n
}

// appendTable appends table f, as nftTable.appendTo.
func (m *Memo) appendTable(b []byte, f int) []byte {
	mt := &m.tables[f]
	t := mt.t
	b = t.appendDispatch(b)
	for k, list := range mt.lists {
		if k == len(nftMaps) {
			b = appendHairpinOpen(b, t.fam, len(list) > 0)
		} else {
			b = appendMapOpen(b, t.fam, k, len(list) > 0)
		}
		for i := range list {
			l := &list[i]
			if i > 0 && l.key == list[i-1].key && l.line[:l.key] == list[i-1].line[:l.key] {
				// An element with the key of the one before: a
				// hairpin address or cluster IP repeated, a map
				// element dropped.
				if k < len(nftMaps) && !nftMaps[k].addrs {
					b = appendDroppedElement(b, l.e)
				}
				continue
			}
			b = append(b, l.line...)
		}
		b = appendMapClose(b, len(list) > 0)
		if k == len(nftMaps) {
			if s := t.podCIDRsSet(); s != nil {
				b = s.AppendText(b, t.fam.model)
			}
			b = t.nodePortIPsSet().AppendText(b, t.fam.model)
		}
	}
	for i := range mt.buckets {
		if bk := &mt.buckets[i]; len(bk.picks) > 0 {
			b = append(b, bk.text...)
		}
	}
	for i := range m.svcs {
		b = append(b, m.svcs[i].text[f]...)
	}
	return append(b, "}\n"...)
}

// The memo keeps the lines of map elements, and writes the heads of the
// maps around them: text equal to what the model prints
// (TestMemoEqualsFresh and the other tests of nftmemo_test.go).

// appendMapOpen appends the start of map nftMaps[i], up to its first
// element; appendMapClose ends it.
func appendMapOpen(b []byte, fam nftFamily, i int, elements bool) []byte {
	s := &nftmodel.Set{Name: nftMaps[i].name, Comment: nftMaps[i].name + ": " + nftMaps[i].comment, Key: mapKey(i), Verdicts: !nftMaps[i].set}
	return openSet(b, fam, s, elements)
}

// openSet appends the text of the empty set s without its end, and the
// start of its elements.
func openSet(b []byte, fam nftFamily, s *nftmodel.Set, elements bool) []byte {
	b = s.AppendText(b, fam.model)
	b = b[:len(b)-len("\t}\n")]
	if elements {
		b = append(b, "\t\telements = {\n"...)
	}
	return b
}

// appendMapClose ends a map or set opened with the same elements.
func appendMapClose(b []byte, elements bool) []byte {
	if elements {
		b = append(b, "\t\t}\n"...)
	}
	return append(b, "\t}\n"...)
}

// appendHairpinOpen appends the start of the set hairpin, up to its first
// element (appendHairpinElement); appendMapClose ends it.
func appendHairpinOpen(b []byte, fam nftFamily, elements bool) []byte {
	return openSet(b, fam, &nftmodel.Set{Name: "hairpin", Comment: hairpinComment, Key: keyAddrAddr}, elements)
}

// appendHairpinElement appends the element of the set hairpin for a.
func appendHairpinElement(b []byte, a netip.Addr) []byte {
	b = append(b, "\t\t\t"...)
	b = a.AppendTo(b)
	b = append(b, " . "...)
	b = a.AppendTo(b)
	return append(b, ",\n"...)
}

// appendElement appends the line of a map element, or of a set element
// (no verdict).
func appendElement(b []byte, e *nftElement) []byte {
	b = append(b, "\t\t\t"...)
	b = e.appendKey(b)
	if e.comment != "" {
		b = append(b, ` comment "`...)
		b = appendCommentText(b, e.comment)
		b = append(b, '"')
	}
	if e.verdict == "" {
		return append(b, ",\n"...)
	}
	b = append(b, " : "...)
	b = append(b, e.verdict...)
	return append(b, ",\n"...)
}

// appendDroppedElement appends, in place of an element, the comment that
// drops it as it has the key of the one before: two frontends with one
// key, which the compiler rejects; the first is kept so that the file
// still loads.
func appendDroppedElement(b []byte, e *nftElement) []byte {
	b = append(b, "\t\t\t# duplicate key dropped: "...)
	b = e.appendKey(b)
	if e.verdict == "" {
		return append(b, '\n')
	}
	b = append(b, " : "...)
	b = append(b, e.verdict...)
	return append(b, '\n')
}

// appendKey appends the element's key: "addr . proto . port",
// "proto . port" for node ports, or "addr" for the set cluster-ips.
func (e *nftElement) appendKey(b []byte) []byte {
	if e.addr.IsValid() {
		b = e.addr.AppendTo(b)
		if e.addrOnly() {
			return b
		}
		b = append(b, " . "...)
	}
	b = append(b, e.proto...)
	b = append(b, " . "...)
	return strconv.AppendUint(b, uint64(e.port), 10)
}

// appendGroup appends the text of a service port's section
// (appendGroupItems), using items as scratch space.
func (t *nftTable) appendGroup(b []byte, v *nftPortView, items *[]nftmodel.Item) []byte {
	*items = t.appendGroupItems((*items)[:0], v)
	for _, it := range *items {
		b = it.AppendText(b, t.fam.model)
	}
	clear(*items)
	return b
}
