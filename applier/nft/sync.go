package nft

import (
	"fmt"
	"maps"
	"slices"

	"github.com/google/nftables"
	"netspec.dev/netspec/render/nftmodel"
)

// Changes is what a sync changed in netspec's tables, or what a plan
// would change.
type Changes struct {
	Tables []TableChanges
}

// TableChanges is the change of one table.
type TableChanges struct {
	Family string // "ip" or "ip6"
	// Replace tells that the table is (re)created in one step: it was
	// missing, or it differs in a way only a replace can fix (a set's
	// declaration or a base chain's hook).
	Replace bool
	Reason  string // why Replace
	Delete  bool   // the table goes: the plan has none of its family

	ChainsAdded, ChainsChanged, ChainsRemoved []string
	SetsAdded, SetsRemoved                    []string
	ElementsAdded, ElementsRemoved            []ElementChange
	// Rules are the rules that differ in the chains changed (the first
	// 100 of them), when the kernel was read back (plan, apply): drift,
	// rule by rule.
	Rules []RuleChange `json:",omitempty"`

	// Ops counts the netlink messages of the change; Bytes estimates
	// their payload (rule expressions and element keys). Both stay small
	// when little changes, whatever the size of the table.
	Ops, Bytes int
}

// ElementChange is one element added to or removed from a set or map.
type ElementChange struct {
	Set  string
	Text string // as rendered; for an element the plan does not have, as nft writes it
	// Element is the element of a set or verdict map as the model holds
	// it, Endpoint that of an endpoint map: what explain asks of an
	// element. Both are nil for a kernel element that does not decode
	// (made by hand). They are not part of the JSON form.
	Element  *nftmodel.Element         `json:"-"`
	Endpoint *nftmodel.EndpointElement `json:"-"`
}

// Empty tells whether nothing changes.
func (c *Changes) Empty() bool {
	return !slices.ContainsFunc(c.Tables, func(t TableChanges) bool { return !t.Empty() })
}

// Empty tells whether nothing changes in the table.
func (t *TableChanges) Empty() bool {
	return !t.Replace && !t.Delete && len(t.ChainsAdded)+len(t.ChainsChanged)+len(t.ChainsRemoved)+len(t.SetsAdded)+len(t.SetsRemoved)+len(t.ElementsAdded)+len(t.ElementsRemoved) == 0
}

// Difference is one chain, set or element in which the kernel's table
// differs from the plan, as TableChanges.Differences tells it.
type Difference struct {
	// Mark is '+' for what the kernel lacks, '~' for a chain whose rules
	// differ, '-' for what the kernel holds beyond the plan.
	Mark byte
	Kind string // "chain", "set" or "element"
	Name string // the chain or set; an element's set
	// Text says it: "chain ip svc-x is missing", "set ip6 y is not in
	// the plan", "ip svc-ips element 10.0.0.1 . tcp . 80 is missing".
	Text    string
	Element *ElementChange // an element's change
	Rules   []RuleChange   // a chain's rules that differ
}

// Differences are the chains, sets and elements that differ, in that
// order, each what the kernel lacks, then differs, then holds beyond the
// plan: drift (plan, apply) and what explain --live shows of a frontend.
// A table to be replaced or deleted whole has none: it differs as a
// whole (Replace, Delete).
func (t *TableChanges) Differences() []Difference {
	if t.Replace || t.Delete {
		return nil
	}
	var out []Difference
	names := func(mark byte, kind string, names []string, what string) {
		for _, name := range names {
			text := fmt.Sprintf("%s %s %s %s", kind, t.Family, name, what)
			d := Difference{Mark: mark, Kind: kind, Name: name, Text: text}
			if mark == '~' { // a chain changed: its rules that differ
				for _, r := range t.Rules {
					if r.Chain == name {
						d.Rules = append(d.Rules, r)
					}
				}
			}
			out = append(out, d)
		}
	}
	names('+', "chain", t.ChainsAdded, "is missing")
	names('~', "chain", t.ChainsChanged, "differs from the plan")
	names('-', "chain", t.ChainsRemoved, "is not in the plan")
	names('+', "set", t.SetsAdded, "is missing")
	names('-', "set", t.SetsRemoved, "is not in the plan")
	elements := func(mark byte, els []ElementChange, what string) {
		for i := range els {
			el := &els[i]
			text := fmt.Sprintf("%s %s element %s %s", t.Family, el.Set, el.Text, what)
			out = append(out, Difference{Mark: mark, Kind: "element", Name: el.Set, Text: text, Element: el})
		}
	}
	elements('+', t.ElementsAdded, "is missing")
	elements('-', t.ElementsRemoved, "is not in the plan")
	return out
}

// ReasonMissing is TableChanges.Reason when the table is not in the
// kernel (a first install).
const ReasonMissing = "the table is missing"

// tablePlan is the diff of one desired table with the kernel's, and the
// operations that carry it out.
type tablePlan struct {
	want *Table // nil: delete the table, or see model
	// model is the whole table the plan installs, as a model, when the
	// plan is verified against it (modelChecks) rather than against want;
	// with changes.Replace, the table is queued from it (queueModel) and
	// want is nil.
	model   *nftmodel.Table
	have    *kernelTable
	changes TableChanges

	addSets                  []*Set
	delSetNames              []string
	addChains, changedChains []*Chain
	delChains                []string
	addElems                 map[string][]Element             // by set name
	delElems                 map[string][]nftables.SetElement // by set name
	// flushSets are interval sets whose elements changed: they are
	// flushed and filled again, as intervals cannot be edited one by one.
	flushSets []*Set
}

func newTablePlan(want *Table, fam nftables.TableFamily) *tablePlan {
	tp := &tablePlan{want: want, delElems: map[string][]nftables.SetElement{}, addElems: map[string][]Element{}}
	tp.changes.Family = familyName(fam)
	return tp
}

// queue adds the operations of the plan to the connection's batch, in an
// order the kernel accepts within one transaction: new sets and chains
// first, then rules and elements that refer to them, and removals after
// the references to what they remove are gone.
func (tp *tablePlan) queue(c Batch, fam nftables.TableFamily) error {
	if tp.changes.Delete {
		c.DelTable(&nftables.Table{Family: fam, Name: tp.have.table.Name})
		return nil
	}
	if tp.changes.Replace && tp.model != nil {
		return tp.queueModel(c, fam)
	}
	t := tp.want
	table := &nftables.Table{Family: fam, Name: t.Name}
	chainRef := func(name string) *nftables.Chain { return &nftables.Chain{Name: name, Table: table} }

	// Chains first: a new map's elements may go to a new chain.
	for _, ch := range tp.addChains {
		c.AddChain(chainRef(ch.Name))
	}
	for _, s := range tp.addSets {
		if err := s.AddTo(c, table); err != nil {
			return err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(tp.delElems)) {
		if err := setOf(t, name).DeleteElements(c, table, elementsOf(tp.delElems[name])); err != nil {
			return err
		}
	}
	for _, ch := range tp.changedChains {
		c.FlushChain(chainRef(ch.Name))
	}
	for _, ch := range slices.Concat(tp.addChains, tp.changedChains) {
		ref := chainRef(ch.Name)
		for _, r := range ch.Rules {
			if err := r.AddTo(c, table, ref); err != nil {
				return fmt.Errorf("chain %s: %w", ch.Name, err)
			}
		}
	}
	for _, s := range tp.addSets {
		if err := s.AddElements(c, table, s.Elements); err != nil {
			return err
		}
	}
	for _, s := range tp.flushSets {
		c.FlushSet(&nftables.Set{Table: table, Name: s.Name})
		if err := s.AddElements(c, table, s.Elements); err != nil {
			return err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(tp.addElems)) {
		if err := setOf(t, name).AddElements(c, table, tp.addElems[name]); err != nil {
			return err
		}
	}
	for _, name := range tp.delChains {
		c.FlushChain(chainRef(name))
	}
	for _, name := range tp.delChains {
		c.DelChain(chainRef(name))
	}
	for _, name := range tp.delSetNames {
		c.DelSet(&nftables.Set{Table: table, Name: name})
	}
	return nil
}

// elementsOf wraps kernel elements for Set.DeleteElements.
func elementsOf(elems []nftables.SetElement) []Element {
	out := make([]Element, len(elems))
	for i, e := range elems {
		out[i] = Element{Elems: []nftables.SetElement{e}}
	}
	return out
}

func setOf(t *Table, name string) *Set {
	for _, s := range t.Sets {
		if s.Name == name {
			return s
		}
	}
	return &Set{Name: name}
}

// declDiffers tells how a set's declaration in the kernel differs from
// the wanted one, or "".
func declDiffers(want *nftables.Set, have *nftables.Set) string {
	switch {
	case want.IsMap != have.IsMap:
		return "map or set"
	case want.Interval != have.Interval:
		return "interval flag"
	case want.HasTimeout != have.HasTimeout || want.Timeout != have.Timeout:
		return "timeout"
	case have.IsMap && have.KeyType.Name == nftables.TypeVerdict.Name:
		// google/nftables v0.3.0 reads a verdict map's data type into
		// KeyType, and the key's type and length are lost. A key of
		// another shape still shows: no element would match.
	case want.KeyType.Bytes != have.KeyType.Bytes:
		return fmt.Sprintf("key of %d bytes, want %d", have.KeyType.Bytes, want.KeyType.Bytes)
	case want.KeyType.GetNFTMagic() != have.KeyType.GetNFTMagic():
		return fmt.Sprintf("key type %s, want %s", have.KeyType.Name, want.KeyType.Name)
	case want.IsMap && (want.DataType.Bytes != have.DataType.Bytes || want.DataType.GetNFTMagic() != have.DataType.GetNFTMagic()):
		return "data type"
	}
	return ""
}

// hookDiffers tells how a chain's hook in the kernel differs from the
// wanted one (nil: a regular chain), or "".
func hookDiffers(want *BaseChain, have *nftables.Chain) string {
	if want == nil {
		if have.Hooknum != nil {
			return "is a base chain"
		}
		return ""
	}
	switch {
	case have.Hooknum == nil || want.Hooknum == nil || *have.Hooknum != *want.Hooknum:
		return "hook"
	case have.Priority == nil || want.Priority == nil || *have.Priority != *want.Priority:
		return "priority"
	case have.Type != want.Type:
		return "type"
	case have.Policy == nil || *have.Policy != want.Policy:
		return "policy"
	}
	return ""
}

// ruleKeyOf is the key of a compiled rule (Rule.Key, then its anonymous
// set's elements), computed once: its bytes are what Changes.Bytes
// counts of the rule.
func ruleKeyOf(r *Rule, fam nftables.TableFamily) []byte {
	if r.key == nil {
		r.key = r.Key(fam)
		if r.Anon != nil {
			r.key = append(r.key, anonMark...)
			r.key = append(r.key, anonKey(r.Anon.Elements)...)
		}
	}
	return r.key
}

func rulesBytes(ch *Chain, fam nftables.TableFamily) int {
	n := 0
	for _, r := range ch.Rules {
		n += len(ruleKeyOf(r, fam))
	}
	return n
}

func elementBytes(elems []nftables.SetElement) int {
	n := 0
	for _, e := range elems {
		n += len(e.Key) + len(e.Val) + len(e.KeyEnd)
		if e.VerdictData != nil {
			n += 8 + len(e.VerdictData.Chain)
		}
	}
	return n
}
