package nftmodel

import (
	"net/netip"
	"slices"
)

// Delta counts what changes from one ruleset to another: chains by
// table and name (changed when their hook or rules differ), elements by
// set and key (an element whose value changed is removed and added, as
// the kernel replaces it).
type Delta struct {
	ChainsAdded, ChainsRemoved, ChainsChanged int
	ElementsAdded, ElementsRemoved            int
}

// itemID names a chain or set of a ruleset.
type itemID struct {
	fam  Family
	name string
}

// elemKey is the key of an element of a set or verdict map (key) or of
// an endpoint map (lo, hi).
type elemKey struct {
	key    Key
	lo, hi uint32
}

// elemValue is what an element maps its key to, with its comment.
type elemValue struct {
	verdict Verdict
	to      netip.AddrPort
	comment string
}

// Diff counts the changes from a to b; either may be nil (no tables).
func Diff(a, b *Ruleset) Delta {
	var d Delta
	ca, sa := index(a)
	cb, sb := index(b)
	for id, c := range cb {
		old, ok := ca[id]
		switch {
		case !ok:
			d.ChainsAdded++
		case !sameChain(old, c, id.fam):
			d.ChainsChanged++
		}
	}
	for id := range ca {
		if _, ok := cb[id]; !ok {
			d.ChainsRemoved++
		}
	}
	for id, s := range sb {
		old := elements(sa[id])
		for k, v := range elements(s) {
			if ov, ok := old[k]; !ok || ov != v {
				d.ElementsAdded++
			}
		}
	}
	for id, s := range sa {
		now := elements(sb[id])
		for k, v := range elements(s) {
			if nv, ok := now[k]; !ok || nv != v {
				d.ElementsRemoved++
			}
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

// elements maps the keys of s's elements to their values; nil for a nil
// set.
func elements(s *Set) map[elemKey]elemValue {
	if s == nil {
		return nil
	}
	m := make(map[elemKey]elemValue, s.Len())
	for i := range s.Elements {
		e := &s.Elements[i]
		m[elemKey{key: e.Key}] = elemValue{verdict: e.Verdict, comment: e.Comment}
	}
	for i := range s.Endpoints {
		e := &s.Endpoints[i]
		m[elemKey{lo: e.Lo, hi: e.Hi}] = elemValue{to: e.To}
	}
	return m
}

// sameChain tells whether two chains of a table of family f hook and hold
// alike.
func sameChain(a, b *Chain, f Family) bool {
	if (a.Hook == nil) != (b.Hook == nil) || a.Hook != nil && *a.Hook != *b.Hook {
		return false
	}
	return slices.EqualFunc(a.Rules, b.Rules, func(x, y Rule) bool { return x.Text(f) == y.Text(f) })
}
