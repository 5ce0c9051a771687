package nft

import (
	"fmt"
	"hash/maphash"
	"slices"
	"strings"

	"github.com/google/nftables"
	"netspec.dev/netspec/applier/nft/encoding"
	"netspec.dev/netspec/render/nftmodel"
)

// The encoded path: a ruleset encoded whole (Encode) and diffed against
// the encoded ruleset installed last by text (diffKnown), as the applier
// worked before the model. Production code diffs models (diffModel); the
// tests keep this path as its oracle and to install rulesets parsed from
// the golden files.

// Ruleset is an encoded ruleset: the tables it replaces, in the model's
// order (ip, then ip6).
type Ruleset struct {
	Tables []*encodedTable
}

// encodedTable is a table encoded whole (encodeTable), with the model it
// was encoded from and what diffKnown compares by text: the sets'
// declarations and the chains' rule lines.
type encodedTable struct {
	*Table
	Family nftables.TableFamily // nftables.TableFamilyIPv4 or TableFamilyIPv6
	Chains []*Chain             // in file order
	model  *nftmodel.Table
	// decls are the sets' declarations without the elements, by name,
	// one normalised statement a line ("type ipv4_addr\nflags
	// interval"): when one changes, the set must be created anew rather
	// than updated.
	decls map[string]string
	// texts are the chains' rule lines joined by "\n", by name: a cheap
	// way to tell that a chain did not change.
	texts map[string]string
}

// encodedApplier is an Applier that also syncs encoded rulesets, by the
// oracle's path. It keeps the encoded ruleset it installed last, for
// update, as the Applier keeps the model it installed last; a test syncs
// an encodedApplier by one path or the other, not both.
type encodedApplier struct {
	*Applier
	last *Ruleset
}

// newEncoded returns an encodedApplier over k.
func newEncoded(k Kernel) *encodedApplier { return &encodedApplier{Applier: New(k)} }

// plan is Plan of an encoded ruleset.
func (a *encodedApplier) plan(want *Ruleset) (*Changes, error) {
	plans, err := a.diff(want)
	if err != nil {
		return nil, err
	}
	return changesOf(plans), nil
}

// apply is Apply of an encoded ruleset.
func (a *encodedApplier) apply(want *Ruleset) (*Changes, error) {
	plans, err := a.diff(want)
	if err != nil {
		a.installed(want, err)
		return nil, err
	}
	ch, err := a.commitVerified(plans)
	a.installed(want, err)
	return ch, err
}

// update is Update of an encoded ruleset, diffed against the encoded
// ruleset installed last (diffKnown).
func (a *encodedApplier) update(want *Ruleset) (*Changes, error) {
	if a.last == nil {
		return a.apply(want)
	}
	var plans []*tablePlan
	for _, fam := range families {
		plans = append(plans, diffKnown(want.table(fam), a.last.table(fam), fam))
	}
	if !slices.ContainsFunc(plans, func(tp *tablePlan) bool { return tp.changes.Replace }) {
		ch, err := a.commit(plans)
		if err == nil {
			err = a.verifyChanged(plans)
		}
		a.installed(want, err)
		return ch, err
	}
	ch, err := a.commitVerified(plans)
	a.installed(want, err)
	return ch, err
}

// installed keeps want, encoded, as what the kernel holds after a sync
// of it that ended with err (installedModel of an encoded ruleset).
func (a *encodedApplier) installed(want *Ruleset, err error) {
	a.Forget()
	a.last = nil
	if err == nil {
		a.last = want
	}
}

// diff compares an encoded ruleset with the kernel's tables, as Apply
// does: through the model it was encoded from.
func (a *encodedApplier) diff(want *Ruleset) ([]*tablePlan, error) {
	var plans []*tablePlan
	for _, fam := range families {
		have, err := readTable(a.k, fam, TableName, true)
		if err != nil {
			return nil, err
		}
		var mt *nftmodel.Table
		if t := want.table(fam); t != nil {
			mt = t.model
		}
		plans = append(plans, a.diffOne(mt, have, fam))
	}
	return plans, nil
}

// diffKnown compares the desired encoded table with the encoded one the
// applier installed last (update of an encoded ruleset, such as one parsed
// from text), without the kernel: chains by name and text, sets by name,
// elements by text. A model is diffed by diffModel instead, which encodes
// only what it sends; diffKnown of the two models' encodings is its
// oracle (TestDiffModelEqualsFresh).
func diffKnown(want, last *encodedTable, fam nftables.TableFamily) *tablePlan {
	switch {
	case want == nil && last == nil:
		return newTablePlan(nil, fam)
	case want == nil:
		tp := newTablePlan(nil, fam)
		tp.have = &kernelTable{table: &nftables.Table{Family: fam, Name: last.Name}}
		tp.changes.Delete = true
		return tp
	case last == nil:
		return modelReplaced(want.model, fam, ReasonMissing)
	}
	tp := newTablePlan(want.Table, fam)

	// Sets.
	lastSets, wantSets := trimSame(last.Sets, want.Sets)
	added, removed, common := alignDiff(lastSets, wantSets, func(s *Set) string { return s.Name },
		func(x, y *Set) bool { return x == y })
	for _, s := range added {
		tp.addSet(s)
	}
	for _, s := range removed {
		tp.removeSet(s.Name)
	}
	for _, pair := range common {
		old, s := pair[0], pair[1]
		if last.decls[old.Name] != want.decls[s.Name] {
			return modelReplaced(want.model, fam, "set "+s.Name+": declaration changed")
		}
		if s.Template.Dynamic {
			continue
		}
		if s.udata != nil {
			tp.diffEndpointElems(s, old)
			continue
		}
		eAdded, eRemoved := diffElems(old, s)
		if len(eAdded)+len(eRemoved) == 0 {
			continue
		}
		if s.Template.Interval {
			tp.flushSet(s, elementChanges(s.Name, eAdded), elementChanges(s.Name, eRemoved))
			continue
		}
		tp.changes.Ops++
		for _, e := range eAdded {
			tp.addElems[s.Name] = append(tp.addElems[s.Name], e)
			tp.changes.ElementsAdded = append(tp.changes.ElementsAdded, e.change(s.Name))
			tp.changes.Bytes += elementBytes(e.Elems)
		}
		for _, e := range eRemoved {
			tp.delElems[s.Name] = append(tp.delElems[s.Name], e.Elems...)
			tp.changes.ElementsRemoved = append(tp.changes.ElementsRemoved, e.change(s.Name))
			tp.changes.Bytes += elementBytes(e.Elems)
		}
	}

	// Chains.
	if chainsSum(want) == chainsSum(last) && len(want.Chains) == len(last.Chains) {
		return tp
	}
	lastChains, wantChains := trimSame(last.Chains, want.Chains)
	cAdded, cRemoved, cCommon := alignDiff(lastChains, wantChains, func(c *Chain) string { return c.Name },
		func(x, y *Chain) bool {
			return x == y || last.texts[x.Name] == want.texts[y.Name] && !baseDiffers(x.Base, y.Base)
		})
	for _, ch := range cAdded {
		if ch.Base != nil {
			return modelReplaced(want.model, fam, "base chain "+ch.Name+" added")
		}
		tp.addChain(ch, fam)
	}
	for _, pair := range cCommon {
		old, ch := pair[0], pair[1]
		if baseDiffers(old.Base, ch.Base) {
			return modelReplaced(want.model, fam, "chain "+ch.Name+": hook changed")
		}
		if last.texts[old.Name] != want.texts[ch.Name] {
			tp.changeChain(ch, fam)
		}
	}
	for _, ch := range cRemoved {
		if ch.Base != nil {
			return modelReplaced(want.model, fam, "base chain "+ch.Name+" removed")
		}
		tp.removeChain(ch.Name)
	}
	return tp
}

// diffElems compares two versions of a set's encoded elements by text
// (the text is the element): those only b has (added, in b's order) and
// those only a has (removed, in a's order).
func diffElems(a, b *Set) (added, removed []Element) {
	added, removed, _ = alignDiff(a.Elements, b.Elements, func(e Element) string { return e.Text }, nil)
	return added, removed
}

// baseDiffers tells whether two parsed chains hang on different hooks.
func baseDiffers(a, b *BaseChain) bool {
	if a == nil || b == nil {
		return a != b
	}
	return a.Type != b.Type || a.Policy != b.Policy ||
		a.Hooknum == nil || b.Hooknum == nil || *a.Hooknum != *b.Hooknum ||
		a.Priority == nil || b.Priority == nil || *a.Priority != *b.Priority
}

// Encode returns the ruleset of the model m with every rule, set and
// element encoded for netlink (nftmodel's encoding: what nft sends for the
// model's text). Tables, chains and sets keep the model's order. The
// encoding is transient: the applier keeps the model it installed, not
// its encoding (see diffModel), and encodes whole only what it sends
// whole (a full sync, a replace).
func Encode(m *nftmodel.Ruleset) *Ruleset {
	rs := &Ruleset{}
	for _, mt := range m.Tables {
		rs.Tables = append(rs.Tables, encodeTable(mt))
	}
	return rs
}

// elementChanges reports elements of a set.
func elementChanges(set string, elems []Element) []ElementChange {
	var out []ElementChange
	for _, e := range elems {
		out = append(out, e.change(set))
	}
	return out
}

// table returns the table of a family, or nil.
func (rs *Ruleset) table(fam nftables.TableFamily) *encodedTable {
	if rs == nil {
		return nil
	}
	for _, t := range rs.Tables {
		if t.Family == fam {
			return t
		}
	}
	return nil
}

// chainsSum sums a hash of every chain of t (name, hook and rules), in any
// order: two tables with equal sums have, but for a 2^-64 chance, the same
// chains (diffKnown skips comparing them one by one).
func chainsSum(t *encodedTable) uint64 {
	var sum uint64
	for _, ch := range t.Chains {
		sum += chainHash(ch, t.texts[ch.Name])
	}
	return sum
}

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

// encodeTable encodes one table of a model.
func encodeTable(mt *nftmodel.Table) *encodedTable {
	f := mt.Family
	enc := encoding.NewEncoder(f)
	var text []byte
	t := &encodedTable{Table: &Table{Name: mt.Name}, Family: encoding.TableFamily(f), model: mt, decls: map[string]string{}, texts: map[string]string{}}
	for _, it := range mt.Items {
		switch {
		case it.Chain != nil:
			ch := encodeChain(enc, f, it.Chain, &text)
			t.Chains = append(t.Chains, ch)
			t.texts[ch.Name] = chainText(ch)
		case it.Set != nil:
			t.Sets = append(t.Sets, encodeSet(f, it.Set))
			t.decls[it.Set.Name] = it.Set.Decl(f)
		}
	}
	return t
}

// chainText is the chain's rule lines joined by "\n".
func chainText(ch *Chain) string {
	lines := make([]string, len(ch.Rules))
	for i, r := range ch.Rules {
		lines[i] = r.Text
	}
	return strings.Join(lines, "\n")
}

// replace makes the plan replace the encoded table t whole
// (Ruleset.Replace), as the applier did before the model: the oracle of
// modelReplaced's counts (TestQueueModelEqualsReplace).
func (tp *tablePlan) replace(t *encodedTable, why string) {
	tp.changes.Replace, tp.changes.Reason = true, why
	tp.addSets, tp.delSetNames, tp.addChains, tp.changedChains, tp.delChains, tp.flushSets = nil, nil, nil, nil, nil, nil
	clear(tp.delElems)
	tp.changes.ChainsAdded, tp.changes.SetsAdded = nil, nil
	tp.changes.ChainsChanged, tp.changes.ChainsRemoved, tp.changes.SetsRemoved = nil, nil, nil
	tp.changes.ElementsAdded, tp.changes.ElementsRemoved, tp.changes.Rules = nil, nil, nil
	tp.changes.Ops, tp.changes.Bytes = 3, 0
	for _, s := range t.Sets {
		tp.changes.SetsAdded = append(tp.changes.SetsAdded, s.Name)
		tp.changes.Ops++
		for _, e := range s.Elements {
			tp.changes.Bytes += elementBytes(e.Elems)
		}
	}
	for _, ch := range t.Chains {
		tp.changes.ChainsAdded = append(tp.changes.ChainsAdded, ch.Name)
		tp.changes.Ops += 1 + len(ch.Rules)
		tp.changes.Bytes += rulesBytes(ch, t.Family)
	}
}

// Replace queues, without flushing, a batch that replaces the tables of rs
// in one transaction, as `nft -f` of the rendered file does: for each
// table, add it (a no-op when it exists), delete it and add it again, then
// its chains, its sets and maps (empty), its rules, then the elements of
// the sets and maps (see AddTo). Other tables are not touched.
func (rs *Ruleset) Replace(c Batch) error {
	for _, t := range rs.Tables {
		tbl := &nftables.Table{Family: t.Family, Name: t.Name}
		c.AddTable(tbl)
		c.DelTable(tbl)
		c.AddTable(tbl)
		chains := make([]*nftables.Chain, len(t.Chains))
		for i, ch := range t.Chains {
			nc := &nftables.Chain{Name: ch.Name, Table: tbl}
			if b := ch.Base; b != nil {
				pol := b.Policy
				nc.Type, nc.Hooknum, nc.Priority, nc.Policy = b.Type, b.Hooknum, b.Priority, &pol
			}
			chains[i] = c.AddChain(nc)
		}
		for _, s := range t.Sets {
			if err := s.AddTo(c, tbl); err != nil {
				return fmt.Errorf("table %s: %w", t.Name, err)
			}
		}
		for i, ch := range t.Chains {
			for _, r := range ch.Rules {
				if err := r.AddTo(c, tbl, chains[i]); err != nil {
					return fmt.Errorf("table %s: chain %s: %w", t.Name, ch.Name, err)
				}
			}
		}
		for _, s := range t.Sets {
			if err := s.AddElements(c, tbl, s.Elements); err != nil {
				return fmt.Errorf("table %s: %w", t.Name, err)
			}
		}
	}
	return nil
}
