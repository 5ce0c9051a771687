package nft

import (
	"github.com/google/nftables"
	"netspec.dev/netspec/applier/nft/encoding"
	"netspec.dev/netspec/render/nftmodel"
)

// diffModel compares the model of a table the applier wants with the one
// it installed last (Update), without the kernel, and encodes only what
// the change sends: the chains added or changed, the sets added, the
// elements added and removed (an interval set that changed whole, as it
// is flushed and filled again). Pieces are immutable and shared between
// models (render.Memo reuses those of the Services that did not change),
// so the common head and tail of the table's items are skipped by
// pointer and only the middle, where a change is, is compared: chains by
// name, hook and rule text, sets by name and declaration, elements by
// typed key and value (nftmodel's comparison, which the tree diff uses
// too). The work and the memory follow the size of the
// change, not of the table; keeping the last model costs nothing beyond
// what render's memo holds. A change that only a replace can make (a
// set's declaration, a base chain) replaces the whole table from the
// model (modelReplaced).
func diffModel(want, last *nftmodel.Table, fam nftables.TableFamily) *tablePlan {
	return diffModels(want, last, fam, nil)
}

// diffModels is diffModel, of last as installed (km == nil) or as the
// kernel holds it (km.table, decoded: decodeKernel; its chains that hold
// a rule that does not decode differ from any).
func diffModels(want, last *nftmodel.Table, fam nftables.TableFamily, km *kernelModel) *tablePlan {
	switch {
	case want == nil && last == nil:
		return newTablePlan(nil, fam)
	case want == nil:
		tp := newTablePlan(nil, fam)
		tp.have = &kernelTable{table: &nftables.Table{Family: fam, Name: last.Name}}
		tp.changes.Delete = true
		return tp
	case last == nil || last.Name != want.Name:
		return modelReplaced(want, fam, ReasonMissing)
	}
	f := want.Family
	sparse := &Table{Name: want.Name}
	tp := newTablePlan(sparse, fam)

	lastItems, wantItems := trimSame(last.Items, want.Items)
	lastMid, wantMid := &nftmodel.Table{Items: lastItems}, &nftmodel.Table{Items: wantItems}

	// Sets.
	added, removed, common := alignDiff(lastMid.Sets(), wantMid.Sets(), func(s *nftmodel.Set) string { return s.Name },
		func(x, y *nftmodel.Set) bool { return x == y })
	for _, ms := range added {
		s := encodeSet(f, ms)
		sparse.Sets = append(sparse.Sets, s)
		tp.addSet(s)
	}
	for _, ms := range removed {
		tp.removeSet(ms.Name)
	}
	for _, pair := range common {
		old, ms := pair[0], pair[1]
		if !nftmodel.SameDecl(old, ms, f) {
			return modelReplaced(want, fam, "set "+ms.Name+": declaration changed")
		}
		if ms.Dynamic {
			continue
		}
		if ms.EndpointMod > 0 {
			mid, oldMid := endpointMiddles(f, old, ms)
			if len(mid.Elements)+len(oldMid.Elements) > 0 {
				sparse.Sets = append(sparse.Sets, mid)
				tp.diffEndpointElems(mid, oldMid)
			}
			continue
		}
		eAdded, eRemoved := nftmodel.DiffElements(old, ms)
		if len(eAdded)+len(eRemoved) == 0 {
			continue
		}
		if ms.Interval {
			s := encodeSet(f, ms)
			sparse.Sets = append(sparse.Sets, s)
			tp.flushSet(s, modelElementChanges(ms, eAdded), modelElementChanges(old, eRemoved))
			continue
		}
		s := setShell(f, ms)
		sparse.Sets = append(sparse.Sets, s)
		tp.changes.Ops++
		var text []byte
		for _, j := range eAdded {
			text = ms.AppendElementText(text[:0], j)
			el := modelElement(ms, j)
			el.Text, el.Elems = string(text), encoding.SetElement(f, ms, j)
			tp.addElems[s.Name] = append(tp.addElems[s.Name], el)
			tp.changes.ElementsAdded = append(tp.changes.ElementsAdded, el.change(s.Name))
			tp.changes.Bytes += elementBytes(el.Elems)
		}
		for _, i := range eRemoved {
			elems := encoding.SetElement(f, old, i)
			tp.delElems[s.Name] = append(tp.delElems[s.Name], elems...)
			el := modelElement(old, i)
			el.Text = old.ElementText(i)
			tp.changes.ElementsRemoved = append(tp.changes.ElementsRemoved, el.change(s.Name))
			tp.changes.Bytes += elementBytes(elems)
		}
	}

	// Chains.
	var cmp nftmodel.Comparer
	cAdded, cRemoved, cCommon := alignDiff(lastMid.Chains(), wantMid.Chains(), func(c *nftmodel.Chain) string { return c.Name },
		func(x, y *nftmodel.Chain) bool {
			return (km == nil || !km.foreignChains[x.Name]) && cmp.SameChain(x, y, f)
		})
	enc := encoding.NewEncoder(f)
	var text []byte
	missing, extra := " added", " removed"
	if km != nil {
		missing, extra = " is missing", " is not in the plan"
	}
	for _, mc := range cAdded {
		if mc.Hook != nil {
			return modelReplaced(want, fam, "base chain "+mc.Name+missing)
		}
		tp.addChain(encodeChain(enc, f, mc, &text), fam)
	}
	for _, pair := range cCommon {
		old, mc := pair[0], pair[1]
		if !nftmodel.SameHook(old.Hook, mc.Hook) {
			return modelReplaced(want, fam, "chain "+mc.Name+": hook changed")
		}
		tp.changeChain(encodeChain(enc, f, mc, &text), fam)
	}
	for _, mc := range cRemoved {
		if mc.Hook != nil {
			return modelReplaced(want, fam, "base chain "+mc.Name+extra)
		}
		tp.removeChain(mc.Name)
	}
	return tp
}

// diffKernelTable compares the model of a table the applier wants (nil:
// none) with what the kernel holds of it (have; nil: no table): have is
// decoded into the model (decodeKernel) and the two are diffed
// (diffModels). The plan names the rules that differ in the chains it
// rewrites (describeRules) and removes the kernel's elements that do not
// decode. A plan that keeps the table is verified against want.
func diffKernelTable(want *nftmodel.Table, have *kernelTable, fam nftables.TableFamily) *tablePlan {
	switch {
	case want == nil:
		tp := newTablePlan(nil, fam)
		tp.have = have
		tp.changes.Delete = have != nil
		return tp
	case have == nil:
		return modelReplaced(want, fam, ReasonMissing)
	}
	km, why := decodeKernel(have, want)
	if why != "" {
		return modelReplaced(want, fam, why)
	}
	tp := diffModels(want, km.table, fam, km)
	if tp.changes.Replace {
		return tp
	}
	tp.have, tp.model = have, want
	km.addForeign(tp, want)
	tp.describeRules(have, want)
	return tp
}

// modelElementChanges reports the elements of s at the indexes idx.
func modelElementChanges(s *nftmodel.Set, idx []int) []ElementChange {
	var out []ElementChange
	for _, i := range idx {
		el := modelElement(s, i)
		el.Text = s.ElementText(i)
		out = append(out, el.change(s.Name))
	}
	return out
}

// leadingEndAt is the index of the element of an endpoint map that carries
// the end element at zero nft sends first (the one with the lowest start,
// unless it starts at zero; see encoding.SetElements), or -1.
func leadingEndAt(s *nftmodel.Set) int {
	low := -1
	for i := range s.Endpoints {
		if low < 0 || s.Endpoints[i].Lo < s.Endpoints[low].Lo {
			low = i
		}
	}
	if low < 0 || s.Endpoints[low].Lo == 0 {
		return -1
	}
	return low
}

// endpointMiddles encodes the middle of two versions of an endpoint map
// (b's and a's) that differs: the elements at the head and at the tail
// that the two have alike, the leading end element included, are left
// out. Elements equal in the model and in their netlink elements are
// equal intervals, so diffEndpointElems of the middles plans what it
// plans for the whole maps.
func endpointMiddles(f nftmodel.Family, a, b *nftmodel.Set) (mid, oldMid *Set) {
	ea, eb := a.Endpoints, b.Endpoints
	la, lb := leadingEndAt(a), leadingEndAt(b)
	same := func(i, j int) bool { return nftmodel.SameEndpoint(&ea[i], &eb[j]) && (i == la) == (j == lb) }
	head, tail := 0, 0
	for head < len(ea) && head < len(eb) && same(head, head) {
		head++
	}
	for tail < len(ea)-head && tail < len(eb)-head && same(len(ea)-1-tail, len(eb)-1-tail) {
		tail++
	}
	encode := func(s *nftmodel.Set, lead, from, to int) []Element {
		out := make([]Element, 0, to-from)
		var text []byte
		for i := from; i < to; i++ {
			elems := encoding.SetElement(f, s, i)
			if i == lead {
				elems = append([]nftables.SetElement{{Key: make([]byte, len(elems[0].Key)), IntervalEnd: true}}, elems...)
			}
			text = s.AppendElementText(text[:0], i)
			el := modelElement(s, i)
			el.Text, el.Elems = string(text), elems
			out = append(out, el)
		}
		return out
	}
	mid = setShell(f, b)
	mid.Elements = encode(b, lb, head, len(eb)-tail)
	oldMid = &Set{Elements: encode(a, la, head, len(ea)-tail)}
	return mid, oldMid
}
