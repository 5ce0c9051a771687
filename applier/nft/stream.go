package nft

import (
	"fmt"

	"github.com/google/nftables"
	"netspec.dev/netspec/render/nftmodel"
)

// A table that is replaced whole (a first install, or a change only a
// replace can make) is queued straight from its model: each chain's rules
// and each set's elements are encoded when they are queued and dropped
// once queued, and the check after the batch encodes each set again for
// its digest (modelSums, sent.go). At 50,000 services the whole encoding
// was 165 MB held across the batch; a piece is at most one set.

// modelReplaced is the plan that replaces the table of family fam whole
// with mt, because of why. Nothing is encoded yet: queueModel encodes as
// it queues. Its Bytes are counted then (or by countModel, for a plan that
// is not sent).
func modelReplaced(mt *nftmodel.Table, fam nftables.TableFamily, why string) *tablePlan {
	tp := newTablePlan(nil, fam)
	tp.model = mt
	tp.changes.Replace, tp.changes.Reason = true, why
	tp.changes.Ops = 3
	for _, it := range mt.Items {
		if it.Set != nil {
			tp.changes.SetsAdded = append(tp.changes.SetsAdded, it.Set.Name)
			tp.changes.Ops++
		}
	}
	for _, it := range mt.Items {
		if it.Chain != nil {
			tp.changes.ChainsAdded = append(tp.changes.ChainsAdded, it.Chain.Name)
			tp.changes.Ops += 1 + len(it.Chain.Rules)
		}
	}
	return tp
}

// queueModel queues the replace of tp's table from its model, as
// Ruleset.Replace queues an encoded table (the same messages, in the same
// order), and sets the plan's Bytes as replace counts them.
func (tp *tablePlan) queueModel(c Batch, fam nftables.TableFamily) error {
	mt := tp.model
	f := mt.Family
	tbl := &nftables.Table{Family: fam, Name: mt.Name}
	c.AddTable(tbl)
	c.DelTable(tbl)
	c.AddTable(tbl)
	for _, it := range mt.Items {
		if ch := it.Chain; ch != nil {
			nc := &nftables.Chain{Name: ch.Name, Table: tbl}
			if b := baseChain(ch.Hook); b != nil {
				pol := b.Policy
				nc.Type, nc.Hooknum, nc.Priority, nc.Policy = b.Type, b.Hooknum, b.Priority, &pol
			}
			c.AddChain(nc)
		}
	}
	var shells []*Set
	for _, it := range mt.Items {
		if it.Set != nil {
			s := setShell(f, it.Set)
			shells = append(shells, s)
			if err := s.AddTo(c, tbl); err != nil {
				return fmt.Errorf("table %s: %w", mt.Name, err)
			}
		}
	}
	n := 0
	enc := nftmodel.NewEncoder(f)
	for _, it := range mt.Items {
		ch := it.Chain
		if ch == nil {
			continue
		}
		ref := &nftables.Chain{Name: ch.Name, Table: tbl}
		for _, mr := range ch.Rules {
			exprs, anon := enc.Encode(mr)
			n += len(ruleKey(fam, exprs))
			var as *AnonSet
			at := -1
			if anon != nil {
				as, at = &AnonSet{Template: anon.Template, Elements: anon.Elements}, anon.At
				n += len(anonMark) + len(anonKey(anon.Elements))
			}
			if err := addRule(c, tbl, ref, exprs, as, at); err != nil {
				return fmt.Errorf("table %s: chain %s: rule %q: %w", mt.Name, ch.Name, mr.Text(f), err)
			}
		}
	}
	i := 0
	for _, it := range mt.Items {
		if it.Set == nil {
			continue
		}
		s := shells[i]
		i++
		elems := s.kernelOrder(flatElems(it.Set.EncodeAll(f)))
		n += elementBytes(elems)
		if err := s.addKernelElems(c, tbl, elems); err != nil {
			return fmt.Errorf("table %s: %w", mt.Name, err)
		}
	}
	tp.changes.Bytes = n
	return nil
}

// countModel sets the Bytes of a plan that replaces its table from the
// model (modelReplaced) without sending it: Plan's count.
func (tp *tablePlan) countModel(fam nftables.TableFamily) error {
	return tp.queueModel(discardBatch{}, fam)
}

// anonMark separates a rule's key from its anonymous set's elements
// (ruleKeyOf, kernelRuleKey).
const anonMark = "|anon:"

// flatElems lists the netlink elements of a set's elements (EncodeAll)
// in order.
func flatElems(all [][]nftables.SetElement) []nftables.SetElement {
	n := 0
	for _, e := range all {
		n += len(e)
	}
	out := make([]nftables.SetElement, 0, n)
	for _, e := range all {
		out = append(out, e...)
	}
	return out
}

// discardBatch is a Batch that queues nothing.
type discardBatch struct{}

func (discardBatch) AddTable(t *nftables.Table) *nftables.Table                   { return t }
func (discardBatch) DelTable(*nftables.Table)                                     {}
func (discardBatch) AddChain(c *nftables.Chain) *nftables.Chain                   { return c }
func (discardBatch) FlushChain(*nftables.Chain)                                   {}
func (discardBatch) DelChain(*nftables.Chain)                                     {}
func (discardBatch) AddRule(r *nftables.Rule) *nftables.Rule                      { return r }
func (discardBatch) AddSet(*nftables.Set, []nftables.SetElement) error            { return nil }
func (discardBatch) SetAddElements(*nftables.Set, []nftables.SetElement) error    { return nil }
func (discardBatch) SetDeleteElements(*nftables.Set, []nftables.SetElement) error { return nil }
func (discardBatch) FlushSet(*nftables.Set)                                       {}
func (discardBatch) DelSet(*nftables.Set)                                         {}

// modelChecks is what the read-back check compares the kernel's table
// with, from the model of the table: its sets (declarations) and chains
// (names and hooks), and each static set's element keys, encoded only
// when that set is compared.
func modelChecks(mt *nftmodel.Table) *tableChecks {
	f := mt.Family
	tc := &tableChecks{name: mt.Name}
	var models []*nftmodel.Set
	for _, it := range mt.Items {
		switch {
		case it.Set != nil:
			tc.sets = append(tc.sets, setShell(f, it.Set))
			models = append(models, it.Set)
		case it.Chain != nil:
			tc.chains = append(tc.chains, &Chain{Name: it.Chain.Name, Base: baseChain(it.Chain.Hook)})
		}
	}
	tc.keys = func(i int) []string { return sortedElementKeys(flatElems(models[i].EncodeAll(f))) }
	return tc
}

// encodedChecks is tableChecks of an encoded table, with its element keys
// as wantKeys computed them.
func encodedChecks(t *Table, keys map[string][]string) *tableChecks {
	return &tableChecks{name: t.Name, sets: t.Sets, chains: t.Chains,
		keys: func(i int) []string { return keys[t.Sets[i].Name] }}
}
