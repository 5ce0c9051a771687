package nftmodel

import (
	"bytes"

	"netspec.dev/netspec/internal/myers"
)

// The one comparison of two models. Chains are alike when they hang on
// the same hook and their rules print alike, in the form the kernel
// keeps them (Rule.Canonical); sets are declared alike when their
// declarations print alike (Set.Decl); elements are compared by
// value (an Element holds what the kernel keeps of it, its comment as
// the file writes it; an endpoint element's Note is the file's only), in
// any order, as the kernel's sets hold them. The applier's sync (applier/nft), the tree
// diff (treediff, through Diff) and the drift that plan and explain
// --live report all compare with these.

// Delta counts what changes from one ruleset to another: chains by
// table and name (changed when they are not SameChain), sets present in
// both whose declaration changed (not SameDecl: the set is created
// anew), elements by set (DiffElements, DiffEndpoints: an element whose
// value changed is removed and added, as the kernel replaces it).
type Delta struct {
	ChainsAdded, ChainsRemoved, ChainsChanged int
	SetsChanged                               int
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
		if old, ok := sa[id]; ok && !SameDecl(old, s, id.fam) {
			d.SetsChanged++
		}
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

// SameDecl tells whether two sets of a table of family f are declared
// alike: the same type, flags and timeout (their elements aside).
func SameDecl(a, b *Set, f Family) bool {
	if a == b {
		return true
	}
	return a.Decl(f) == b.Decl(f)
}

// Comparer compares chains; it keeps scratch space for their rules'
// text, so that comparing many chains allocates little. The zero value
// is ready to use; it is not safe for concurrent use.
type Comparer struct{ ta, tb []byte }

// SameChain tells whether two chains of a table of family f hang on the
// same hook and hold alike: the same rules (SameRule).
func (c *Comparer) SameChain(a, b *Chain, f Family) bool {
	if a == b {
		return true
	}
	if !SameHook(a.Hook, b.Hook) || len(a.Rules) != len(b.Rules) {
		return false
	}
	for i := range a.Rules {
		if !c.SameRule(a.Rules[i], b.Rules[i], f) {
			return false
		}
	}
	return true
}

// SameRule tells whether two rules of a table of family f are held
// alike by the kernel: they print alike, or, when one has an address
// match, their canonical forms do (Rule.Canonical).
func (c *Comparer) SameRule(a, b Rule, f Family) bool {
	c.ta = a.AppendText(c.ta[:0], f)
	c.tb = b.AppendText(c.tb[:0], f)
	if bytes.Equal(c.ta, c.tb) {
		return true
	}
	if !a.hasAddrMatch() && !b.hasAddrMatch() {
		return false
	}
	c.ta = a.Canonical().AppendText(c.ta[:0], f)
	c.tb = b.Canonical().AppendText(c.tb[:0], f)
	return bytes.Equal(c.ta, c.tb)
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
	return diffBy(elementsOf(a), elementsOf(b), held)
}

// held is the element as the kernel holds it: its comment as the file
// writes it (CommentText), which is what the kernel is sent and keeps.
func held(e *Element) Element {
	h := *e
	h.Comment = CommentText(e.Comment)
	return h
}

// DiffEndpoints is DiffElements for the Endpoints of two versions of an
// endpoint map, which the kernel holds alike when they have the same
// range to the same endpoint (a Note is the file's only).
func DiffEndpoints(a, b *Set) (added, removed []int) {
	return diffBy(endpointsOf(a), endpointsOf(b), func(e *EndpointElement) EndpointElement {
		h := *e
		h.Note = ""
		return h
	})
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

// maxEdits bounds the edits diffBy aligns the middle of two lists with
// (myers) before it compares them through maps: a change of a few
// Services moves a few elements of each set.
const maxEdits = 32

// diffBy compares two lists of elements by the comparable value key
// gives of each (what the kernel holds), as DiffElements: the common head
// and tail in place, the middle with myers (an element that moved far in
// a long sorted list, say an endpoint's address in the hairpin set, costs
// a few passes, not a map of the middle), or with maps when it holds many
// edits. An element that moved (removed and added alike) is neither.
func diffBy[E, K comparable](ea, eb []E, key func(*E) K) (added, removed []int) {
	// Equal elements are alike without their keys: the common case.
	alike := func(x, y int) bool { return ea[x] == eb[y] || key(&ea[x]) == key(&eb[y]) }
	// run is how many from ea[x] and eb[y] on are alike.
	run := func(x, y int) int {
		k := 0
		for x+k < len(ea) && y+k < len(eb) && alike(x+k, y+k) {
			k++
		}
		return k
	}
	head := run(0, 0)
	tail := 0
	for tail < len(ea)-head && tail < len(eb)-head && alike(len(ea)-1-tail, len(eb)-1-tail) {
		tail++
	}
	n, m := len(ea)-head-tail, len(eb)-head-tail
	if n+m == 0 {
		return nil, nil
	}
	a, b := ea[head:head+n], eb[head:head+m]
	if del, ins, ok := myers.Run(n, m, func(x, y int) int { return min(run(head+x, head+y), n-x, m-y) }, maxEdits, nil); ok {
		// A set holds each value once: one deleted and inserted is a move.
		// There are few edits: a scan finds them without a map.
		in := func(k K, l []E, idx []int) bool {
			for _, i := range idx {
				if key(&l[i]) == k {
					return true
				}
			}
			return false
		}
		for _, j := range ins {
			if len(del) == 0 || !in(key(&b[j]), a, del) {
				added = append(added, head+j)
			}
		}
		for _, i := range del {
			if len(ins) == 0 || !in(key(&a[i]), b, ins) {
				removed = append(removed, head+i)
			}
		}
		return added, removed
	}
	inA := make(map[K]bool, n)
	for i := range n {
		inA[key(&a[i])] = true
	}
	inB := make(map[K]bool, m)
	for j := range m {
		k := key(&b[j])
		inB[k] = true
		if !inA[k] {
			added = append(added, head+j)
		}
	}
	for i := range n {
		if !inB[key(&a[i])] {
			removed = append(removed, head+i)
		}
	}
	return added, removed
}
