package nft

import (
	"bytes"
	"fmt"
	"hash/maphash"

	"github.com/google/nftables"
	"netspec.dev/netspec/render/nftmodel"
)

// Encode returns the ruleset of the model m with every rule, set and
// element encoded for netlink (nftmodel's encoding: what nft sends for the
// model's text). Tables, chains and sets keep the model's order.
func Encode(m *nftmodel.Ruleset) *Ruleset {
	var c encodeCache
	return c.encode(m)
}

// encodeCache remembers the encoding of the last model: chains and sets
// of the next model that are the same pointers (render.Memo reuses the
// pieces of Services that did not change) are not encoded again, nor are
// the elements a set shares with its last version, at its head and tail.
// The items of a table are aligned with the last model's by pointer: the
// common head and tail are taken over without a look at each piece, and
// only the middle, where a change is, goes through maps. The work of
// encoding then follows the size of the change, not of the ruleset.
// A model, once encoded, is not changed (render builds a new one each
// time, sharing the unchanged pieces): the cache keeps its items and
// takes a same pointer for the same content.
type encodeCache struct {
	enc  [3]*nftmodel.Encoder // by family; expressions shared across calls
	last [3]lastTable         // by family
}

// lastTable is a table of the last model with its encoding.
type lastTable struct {
	items []nftmodel.Item
	t     *Table
}

// lastSet is the last version of a set, with its encoding.
type lastSet struct {
	m *nftmodel.Set
	s *Set
}

// sameItem tells whether two items hold the same chain or set (their
// headings are the file's only).
func sameItem(a, b *nftmodel.Item) bool { return a.Chain == b.Chain && a.Set == b.Set }

// encode encodes m, reusing the last call's work, and keeps m's pieces
// for the next call.
func (c *encodeCache) encode(m *nftmodel.Ruleset) *Ruleset {
	var next [3]lastTable
	rs := &Ruleset{}
	var text []byte
	for _, mt := range m.Tables {
		f := mt.Family
		if c.enc[f] == nil {
			c.enc[f] = nftmodel.NewEncoder(f)
		}
		last := c.last[f]
		if last.t == nil || last.t.Name != mt.Name {
			last = lastTable{t: &Table{}}
		}
		items, old := mt.Items, last.items
		// The common head and tail, by pointer, and how many chains and
		// sets they hold.
		head, headChains, headSets := 0, 0, 0
		for head < len(items) && head < len(old) && sameItem(&items[head], &old[head]) {
			headChains, headSets = headChains+b2i(items[head].Chain != nil), headSets+b2i(items[head].Set != nil)
			head++
		}
		tail, tailChains, tailSets := 0, 0, 0
		for tail < len(items)-head && tail < len(old)-head && sameItem(&items[len(items)-1-tail], &old[len(old)-1-tail]) {
			it := &items[len(items)-1-tail]
			tailChains, tailSets = tailChains+b2i(it.Chain != nil), tailSets+b2i(it.Set != nil)
			tail++
		}
		// The last middle's pieces, by pointer and sets by name.
		lc, ls := last.t.Chains, last.t.Sets
		oldChains, oldSets := lc[headChains:len(lc)-tailChains], ls[headSets:len(ls)-tailSets]
		chains := make(map[*nftmodel.Chain]*Chain, len(oldChains))
		sets := make(map[*nftmodel.Set]*Set, len(oldSets))
		named := make(map[string]lastSet, len(oldSets))
		sum := last.t.chainSum
		ci, si := 0, 0
		for _, it := range old[head : len(old)-tail] {
			switch {
			case it.Chain != nil:
				chains[it.Chain] = oldChains[ci]
				sum -= oldChains[ci].hash
				ci++
			case it.Set != nil:
				sets[it.Set] = oldSets[si]
				named[it.Set.Name] = lastSet{it.Set, oldSets[si]}
				si++
			}
		}
		t := &Table{Family: f.TableFamily(), Name: mt.Name}
		t.Chains = append(make([]*Chain, 0, len(lc)+4), lc[:headChains]...)
		t.Sets = append(make([]*Set, 0, len(ls)+4), ls[:headSets]...)
		for _, it := range items[head : len(items)-tail] {
			switch {
			case it.Chain != nil:
				ch := chains[it.Chain]
				if ch == nil {
					ch = encodeChain(c.enc[f], f, it.Chain, &text)
				}
				sum += ch.hash
				t.Chains = append(t.Chains, ch)
			case it.Set != nil:
				s := sets[it.Set]
				if s == nil {
					s = encodeSet(f, it.Set, named[it.Set.Name], &text)
				}
				t.Sets = append(t.Sets, s)
			}
		}
		t.Chains = append(t.Chains, lc[len(lc)-tailChains:]...)
		t.Sets = append(t.Sets, ls[len(ls)-tailSets:]...)
		t.chainSum = sum
		next[f] = lastTable{items: items, t: t}
		rs.Tables = append(rs.Tables, t)
	}
	c.last = next
	return rs
}

// b2i is 1 for true, 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// encodeChain encodes a chain; text is scratch space.
func encodeChain(enc *nftmodel.Encoder, f nftmodel.Family, mc *nftmodel.Chain, text *[]byte) *Chain {
	ch := &Chain{Name: mc.Name}
	if h := mc.Hook; h != nil {
		ch.Base = &BaseChain{Type: nftables.ChainTypeFilter, Policy: nftables.ChainPolicyAccept}
		if h.Type == nftmodel.NAT {
			ch.Base.Type = nftables.ChainTypeNAT
		}
		switch h.Hook {
		case nftmodel.Prerouting:
			ch.Base.Hooknum = nftables.ChainHookRef(*nftables.ChainHookPrerouting)
		case nftmodel.Output:
			ch.Base.Hooknum = nftables.ChainHookRef(*nftables.ChainHookOutput)
		case nftmodel.Postrouting:
			ch.Base.Hooknum = nftables.ChainHookRef(*nftables.ChainHookPostrouting)
		}
		ch.Base.Priority = nftables.ChainPriorityRef(nftables.ChainPriority(h.Priority))
	}
	*text = (*text)[:0]
	if len(mc.Rules) > 0 {
		ch.Rules = make([]*Rule, len(mc.Rules))
		rules := make([]Rule, len(mc.Rules))
		for i, mr := range mc.Rules {
			r := &rules[i]
			start := len(*text)
			if i > 0 {
				*text = append(*text, '\n')
				start++
			}
			*text = mr.AppendText(*text, f)
			r.Text = string((*text)[start:])
			var anon *nftmodel.AnonSet
			r.Exprs, anon = enc.Encode(mr)
			r.anonAt = -1
			if anon != nil {
				r.Anon = &AnonSet{Template: anon.Template, Elements: anon.Elements}
				r.anonAt = anon.At
			}
			ch.Rules[i] = r
		}
	}
	ch.Text = string(*text)
	ch.hash = chainHash(ch, ch.Text)
	return ch
}

// encodeElements encodes a set's elements, reusing the encoding of those
// its last version has too: the common head and tail in place, the
// middle aligned with myers (a moved element, say an endpoint's address
// in the sorted hairpin set, leaves the rest between its two places
// alike). text is scratch space.
func (s *Set) encodeElements(f nftmodel.Family, ms *nftmodel.Set, last lastSet, text *[]byte) {
	n := len(ms.Elements)
	s.Elements = make([]Element, n)
	head, tail := 0, 0
	fresh := [2]int{head, n - tail} // the elements to encode
	if last.m != nil && last.m.Decl(f) == s.Decl && len(last.m.Elements) == len(last.s.Elements) {
		old, now := last.m.Elements, ms.Elements
		for head < len(old) && head < n && sameElement(&old[head], &now[head]) {
			head++
		}
		for tail < len(old)-head && tail < n-head && sameElement(&old[len(old)-1-tail], &now[n-1-tail]) {
			tail++
		}
		copy(s.Elements[:head], last.s.Elements[:head])
		copy(s.Elements[n-tail:], last.s.Elements[len(old)-tail:])
		fresh = [2]int{head, n - tail}
		a, b := len(old)-head-tail, n-head-tail
		del, ins, ok := myersRun(a, b, sameRun(old[head:head+a], now[head:head+b]), myersMaxD, nil)
		if ok {
			// The middle: runs of elements the last version has, between
			// those that are new.
			for i, j := 0, 0; j < b; {
				for len(del) > 0 && del[0] == i {
					s.removed = append(s.removed, head+i)
					del, i = del[1:], i+1
				}
				if len(ins) > 0 && ins[0] == j {
					s.encodeElement(f, ms, head+j, text)
					s.added = append(s.added, head+j)
					ins, j = ins[1:], j+1
					continue
				}
				run := b - j
				if len(ins) > 0 {
					run = ins[0] - j
				}
				if len(del) > 0 {
					run = min(run, del[0]-i)
				}
				if run <= 0 || i+run > a {
					ok = false // cannot happen with an alignment of myers
					break
				}
				copy(s.Elements[head+j:head+j+run], last.s.Elements[head+i:head+i+run])
				i, j = i+run, j+run
			}
			for _, i := range del {
				s.removed = append(s.removed, head+i)
			}
		}
		if ok {
			fresh = [2]int{}
			if !ms.Interval {
				// An interval set's lowest element may change how it
				// encodes: its edit is not kept.
				s.base, last.s.base = last.s, nil
			}
		}
	}
	for i := fresh[0]; i < fresh[1]; i++ {
		s.encodeElement(f, ms, i, text)
	}
	if !s.hasBase() {
		s.added, s.removed = nil, nil
	}
	if ms.Interval {
		s.placeLeadingEnd()
	}
}

// encodeElement encodes the i-th element of ms into s; text is scratch
// space.
func (s *Set) encodeElement(f nftmodel.Family, ms *nftmodel.Set, i int, text *[]byte) {
	e := &ms.Elements[i]
	*text = ms.AppendElementText((*text)[:0], e)
	s.Elements[i] = Element{Text: string(*text), Elems: ms.Encode(f, e)}
}

// hasBase tells whether s keeps its edit from the last version (base).
func (s *Set) hasBase() bool { return s.base != nil }

// placeLeadingEnd gives the leading end element at zero that nft sends
// with an interval set to the element with the lowest start, and to no
// other, as nftmodel's EncodeAll does (the elements reused from the last
// version may have had it, or lack it).
func (s *Set) placeLeadingEnd() {
	low := -1
	for i := range s.Elements {
		e := &s.Elements[i]
		if len(e.Elems) > 1 && e.Elems[0].IntervalEnd {
			e.Elems = e.Elems[1:]
		}
		if len(e.Elems) > 0 && (low < 0 || bytes.Compare(e.Elems[0].Key, s.Elements[low].Elems[0].Key) < 0) {
			low = i
		}
	}
	if low < 0 {
		return
	}
	e := &s.Elements[low]
	if zero := make([]byte, len(e.Elems[0].Key)); !bytes.Equal(e.Elems[0].Key, zero) {
		e.Elems = append([]nftables.SetElement{{Key: zero, IntervalEnd: true}}, e.Elems...)
	}
}

// sameElement tells whether two elements of a set encode alike (their
// notes and dropped duplicates are the file's only).
func sameElement(a, b *nftmodel.Element) bool {
	return a.Key == b.Key && a.Verdict == b.Verdict && a.To == b.To && a.Comment == b.Comment
}

// encodeSet encodes a set, reusing what it shares with its last version.
func encodeSet(f nftmodel.Family, ms *nftmodel.Set, last lastSet, text *[]byte) *Set {
	s := &Set{Name: ms.Name, Decl: ms.Decl(f), Template: ms.Template(f), m: ms}
	if ms.EndpointMod > 0 {
		s.udata = typeofUserdata(f.TableFamily(), ms.EndpointMod)
	}
	s.encodeElements(f, ms, last, text)
	return s
}

// sumSeed seeds the hashes of Table.chainSum, which are only
// compared within a process.
var sumSeed = maphash.MakeSeed()

// chainHash hashes a chain: its name, hook and rule lines (text).
func chainHash(ch *Chain, text string) uint64 {
	var h maphash.Hash
	h.SetSeed(sumSeed)
	h.WriteString(ch.Name)
	h.WriteByte(0)
	if b := ch.Base; b != nil {
		h.WriteString(string(b.Type))
		fmt.Fprintf(&h, " %d", b.Policy)
		if b.Hooknum != nil {
			fmt.Fprintf(&h, " hook %d", *b.Hooknum)
		}
		if b.Priority != nil {
			fmt.Fprintf(&h, " priority %d", *b.Priority)
		}
		h.WriteByte(0)
	}
	h.WriteString(text)
	return h.Sum64()
}
