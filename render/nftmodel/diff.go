package nftmodel

import (
	"bytes"
	"net/netip"
)

// The one comparison of two models. Chains are alike when they hang on
// the same hook and their rules print alike; elements are compared by
// value (an Element holds exactly what the kernel keeps of it; an
// endpoint element's Note is the file's only), in any order, as the
// kernel's sets hold them. The applier's sync (applier/nft), the tree
// diff (treediff, through Diff) and the drift that plan and explain
// --live report all compare with these.

// Delta counts what changes from one ruleset to another: chains by
// table and name (changed when they are not SameChain), elements by set
// (DiffElements, DiffEndpoints: an element whose value changed is
// removed and added, as the kernel replaces it).
type Delta struct {
	ChainsAdded, ChainsRemoved, ChainsChanged int
	ElementsAdded, ElementsRemoved            int
}

// itemID names a chain or set of a ruleset.
type itemID struct {
	fam  Family
	name string
}

// Diff counts the changes from a to b; either may be nil (no tables).
func Diff(a, b *Ruleset) Delta {
	var d Delta
	var cmp Comparer
	ca, sa := index(a)
	cb, sb := index(b)
	for id, c := range cb {
		old, ok := ca[id]
		switch {
		case !ok:
			d.ChainsAdded++
		case !cmp.SameChain(old, c, id.fam):
			d.ChainsChanged++
		}
	}
	for id := range ca {
		if _, ok := cb[id]; !ok {
			d.ChainsRemoved++
		}
	}
	for id, s := range sb {
		added, removed := DiffElements(sa[id], s)
		d.ElementsAdded += len(added)
		d.ElementsRemoved += len(removed)
		added, removed = DiffEndpoints(sa[id], s)
		d.ElementsAdded += len(added)
		d.ElementsRemoved += len(removed)
	}
	for id, s := range sa {
		if _, ok := sb[id]; !ok {
			d.ElementsRemoved += s.Len()
		}
	}
	return d
}

// index lists the chains and sets of rs by table and name.
func index(rs *Ruleset) (map[itemID]*Chain, map[itemID]*Set) {
	chains, sets := map[itemID]*Chain{}, map[itemID]*Set{}
	if rs == nil {
		return chains, sets
	}
	for _, t := range rs.Tables {
		for _, it := range t.Items {
			switch {
			case it.Chain != nil:
				chains[itemID{t.Family, it.Chain.Name}] = it.Chain
			case it.Set != nil:
				sets[itemID{t.Family, it.Set.Name}] = it.Set
			}
		}
	}
	return chains, sets
}

// Comparer compares chains; it keeps scratch space for their rules'
// text, so that comparing many chains allocates little. The zero value
// is ready to use; it is not safe for concurrent use.
type Comparer struct{ ta, tb []byte }

// SameChain tells whether two chains of a table of family f hang on the
// same hook and hold alike: the same rules, which print alike.
func (c *Comparer) SameChain(a, b *Chain, f Family) bool {
	if a == b {
		return true
	}
	if !SameHook(a.Hook, b.Hook) || len(a.Rules) != len(b.Rules) {
		return false
	}
	for i := range a.Rules {
		c.ta = a.Rules[i].AppendText(c.ta[:0], f)
		c.tb = b.Rules[i].AppendText(c.tb[:0], f)
		if !bytes.Equal(c.ta, c.tb) {
			return false
		}
	}
	return true
}

// SameHook tells whether two chains hang on the same hook (nil: a
// regular chain).
func SameHook(a, b *Hook) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// SameEndpoint tells whether two elements of an endpoint map are held
// alike by the kernel: the same range, to the same endpoint.
func SameEndpoint(a, b *EndpointElement) bool {
	return a.Lo == b.Lo && a.Hi == b.Hi && a.To == b.To
}

// DiffElements compares the Elements of two versions of a set or verdict
// map (nil: a set that is not there) by value: the indexes of those only
// b has (added, in b's order) and of those only a has (removed, in a's
// order); an element whose value changed is removed and added. The
// common head and tail are skipped in place, so that the work follows the
// size of the change.
func DiffElements(a, b *Set) (added, removed []int) {
	return diffBy(elementsOf(a), elementsOf(b), func(e *Element) Element { return *e })
}

// DiffEndpoints is DiffElements for the Endpoints of two versions of an
// endpoint map.
func DiffEndpoints(a, b *Set) (added, removed []int) {
	type held struct {
		lo, hi uint32
		to     netip.AddrPort
	}
	return diffBy(endpointsOf(a), endpointsOf(b), func(e *EndpointElement) held { return held{e.Lo, e.Hi, e.To} })
}

func elementsOf(s *Set) []Element {
	if s == nil {
		return nil
	}
	return s.Elements
}

func endpointsOf(s *Set) []EndpointElement {
	if s == nil {
		return nil
	}
	return s.Endpoints
}

// diffBy compares two lists of elements by the comparable value key
// gives of each, as DiffElements.
func diffBy[E any, K comparable](ea, eb []E, key func(*E) K) (added, removed []int) {
	head, tail := 0, 0
	for head < len(ea) && head < len(eb) && key(&ea[head]) == key(&eb[head]) {
		head++
	}
	for tail < len(ea)-head && tail < len(eb)-head && key(&ea[len(ea)-1-tail]) == key(&eb[len(eb)-1-tail]) {
		tail++
	}
	n, m := len(ea)-head-tail, len(eb)-head-tail
	if n+m == 0 {
		return nil, nil
	}
	inA := make(map[K]bool, n)
	for i := range n {
		inA[key(&ea[head+i])] = true
	}
	inB := make(map[K]bool, m)
	for j := range m {
		k := key(&eb[head+j])
		inB[k] = true
		if !inA[k] {
			added = append(added, head+j)
		}
	}
	for i := range n {
		if !inB[key(&ea[head+i])] {
			removed = append(removed, head+i)
		}
	}
	return added, removed
}
