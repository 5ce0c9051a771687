package nft

import (
	"slices"

	"github.com/google/nftables"
	"netspec.dev/netspec/internal/myers"
)

// flushSet plans to empty an interval set and fill it again; added and
// removed are the elements that differ, for the report (all of them are
// sent again).
func (tp *tablePlan) flushSet(s *Set, added, removed []ElementChange) {
	tp.flushSets = append(tp.flushSets, s)
	tp.changes.Ops += 2
	for _, e := range s.Elements {
		tp.changes.Bytes += elementBytes(e.Elems)
	}
	tp.changes.ElementsAdded = append(tp.changes.ElementsAdded, added...)
	tp.changes.ElementsRemoved = append(tp.changes.ElementsRemoved, removed...)
}

// trimSame drops the common head and tail of a and b, compared by
// pointer: pieces the encoding kept from the last model.
func trimSame[T comparable](a, b []T) (midA, midB []T) {
	head := 0
	for head < len(a) && head < len(b) && a[head] == b[head] {
		head++
	}
	tail := 0
	for tail < len(a)-head && tail < len(b)-head && a[len(a)-1-tail] == b[len(b)-1-tail] {
		tail++
	}
	return a[head : len(a)-tail], b[head : len(b)-tail]
}

// alignDiff compares two lists kept in one order by key: what only b has
// (added), what only a has (removed), and the pairs (a, b) that share a
// key but are not the same (none when same is nil: the key is the whole
// item). The common head and tail are compared in place; the middle goes
// through maps.
func alignDiff[T any](a, b []T, key func(T) string, same func(x, y T) bool) (added, removed []T, common [][2]T) {
	head := 0
	for head < len(a) && head < len(b) && key(a[head]) == key(b[head]) {
		if same != nil && !same(a[head], b[head]) {
			common = append(common, [2]T{a[head], b[head]})
		}
		head++
	}
	tail := 0
	for tail < len(a)-head && tail < len(b)-head && key(a[len(a)-1-tail]) == key(b[len(b)-1-tail]) {
		if x, y := a[len(a)-1-tail], b[len(b)-1-tail]; same != nil && !same(x, y) {
			common = append(common, [2]T{x, y})
		}
		tail++
	}
	midA, midB := a[head:len(a)-tail], b[head:len(b)-tail]
	if len(midA)+len(midB) == 0 {
		return nil, nil, common
	}
	mark := len(common)
	var match func(i, j int)
	if same != nil {
		match = func(i, j int) {
			if x, y := midA[i], midB[j]; !same(x, y) {
				common = append(common, [2]T{x, y})
			}
		}
	}
	del, ins, ok := myers.Eq(len(midA), len(midB), func(i, j int) bool { return key(midA[i]) == key(midB[j]) }, myersMaxD, match)
	if ok {
		for _, i := range del {
			removed = append(removed, midA[i])
		}
		for _, j := range ins {
			added = append(added, midB[j])
		}
		slices.Reverse(common[mark:]) // myers walks back from the end
		return added, removed, common
	}
	inA := make(map[string]T, len(midA))
	for _, x := range midA {
		inA[key(x)] = x
	}
	inB := make(map[string]bool, len(midB))
	for _, y := range midB {
		k := key(y)
		inB[k] = true
		if x, ok := inA[k]; ok {
			if same != nil && !same(x, y) {
				common = append(common, [2]T{x, y})
			}
		} else {
			added = append(added, y)
		}
	}
	for _, x := range midA {
		if !inB[key(x)] {
			removed = append(removed, x)
		}
	}
	return added, removed, common
}

// myersMaxD bounds the edits myers looks for before alignDiff falls back
// to maps: a change of a few services moves a few elements of each list.
const myersMaxD = 32

// addChain plans a new chain with its rules.
func (tp *tablePlan) addChain(ch *Chain, fam nftables.TableFamily) {
	tp.addChains = append(tp.addChains, ch)
	tp.changes.ChainsAdded = append(tp.changes.ChainsAdded, ch.Name)
	tp.changes.Ops += 1 + len(ch.Rules)
	tp.changes.Bytes += rulesBytes(ch, fam)
}

// changeChain plans to flush a chain and add its rules again.
func (tp *tablePlan) changeChain(ch *Chain, fam nftables.TableFamily) {
	tp.changedChains = append(tp.changedChains, ch)
	tp.changes.ChainsChanged = append(tp.changes.ChainsChanged, ch.Name)
	tp.changes.Ops += 1 + len(ch.Rules)
	tp.changes.Bytes += rulesBytes(ch, fam)
}

// addSet plans a new set or map with its elements.
func (tp *tablePlan) addSet(s *Set) {
	tp.addSets = append(tp.addSets, s)
	tp.changes.SetsAdded = append(tp.changes.SetsAdded, s.Name)
	tp.changes.Ops++
	for _, e := range s.Elements {
		tp.changes.Bytes += elementBytes(e.Elems)
	}
}

// removeSet plans to delete a set or map.
func (tp *tablePlan) removeSet(name string) {
	tp.delSetNames = append(tp.delSetNames, name)
	tp.changes.SetsRemoved = append(tp.changes.SetsRemoved, name)
	tp.changes.Ops++
}

// removeChain plans to flush and delete a chain.
func (tp *tablePlan) removeChain(name string) {
	tp.delChains = append(tp.delChains, name)
	tp.changes.ChainsRemoved = append(tp.changes.ChainsRemoved, name)
	tp.changes.Ops += 2
}
