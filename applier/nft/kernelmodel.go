package nft

import (
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"reflect"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"netspec.dev/netspec/applier/nft/encoding"
	"netspec.dev/netspec/internal/myers"
	"netspec.dev/netspec/render/nftmodel"
)

// What the kernel holds is compared with the plan as models: the table
// read back is decoded into the model (decodeKernel, with package
// encoding's decoder) and diffed against the model the plan wants by the
// model's one comparison (diffModel: nftmodel's SameChain, SameDecl,
// DiffElements, DiffEndpoints), which decides what to send. What plan
// and apply say of drift is the decoded model printed by the model's
// printer (`10.1.2.3 . tcp . 99 : goto service-…`, `ip daddr . meta
// l4proto . th dport vmap @service-ips`), never the bytes netlink
// carries. What does not decode (a rule or an element made by hand, of a
// form netspec never writes) has no place in the model: such a rule makes
// its chain differ and is named by its expressions, such an element is
// deleted and written from its bytes.

// RuleChange is one rule of a chain that differs between the kernel and
// the plan: Old is the kernel's rule, New the plan's, as nft writes them;
// Old is empty for a rule the kernel lacks, New for one the plan does not
// have. Index is the rule's position in the plan's chain (from 1), or,
// for a rule only the kernel has, in the kernel's.
type RuleChange struct {
	Chain string
	Index int
	Old   string `json:",omitempty"`
	New   string `json:",omitempty"`
}

// kernelModel is a table read back from the kernel, decoded into the
// model: its items in the order of the wanted table's (those the plan
// does not have after them, by name), so that the comparison finds them
// in place.
type kernelModel struct {
	table *nftmodel.Table
	// foreignChains are the chains that hold a rule that does not decode:
	// they differ from any chain of the plan.
	foreignChains map[string]bool
	// foreign are, by set, the kernel's elements that do not decode, a
	// unit at a time (intervalUnits for an interval set).
	foreign map[string][][]nftables.SetElement
}

// decodeKernel decodes have into the model, with the declarations of
// want's sets: google/nftables v0.3.0 reads neither a verdict map's key
// type nor a set's user data (an endpoint map's typeof), so a set is
// decoded as declared like want's when the kernel's declaration agrees
// with want's encoding (declDiffers), and a chain as hanging on want's
// hook when the kernel's agrees (hookDiffers). When one does not, only a
// replace makes have into want, and why says so.
func decodeKernel(have *kernelTable, want *nftmodel.Table) (km *kernelModel, why string) {
	f := want.Family
	km = &kernelModel{table: &nftmodel.Table{Family: f, Name: want.Name}, foreignChains: map[string]bool{}, foreign: map[string][][]nftables.SetElement{}}
	wantChains, wantSets := map[string]bool{}, map[string]bool{}
	for _, it := range want.Items {
		switch {
		case it.Chain != nil:
			wantChains[it.Chain.Name] = true
			kc := have.chains[it.Chain.Name]
			if kc == nil {
				continue
			}
			if why := hookDiffers(baseChain(it.Chain.Hook), kc.chain); why != "" {
				return nil, "chain " + it.Chain.Name + ": " + why
			}
			km.table.AddChain("", km.decodeChain(f, kc, it.Chain.Hook, have.anon))
		case it.Set != nil:
			wantSets[it.Set.Name] = true
			ks := have.sets[it.Set.Name]
			if ks == nil {
				continue
			}
			tmpl := encoding.SetTemplate(f, it.Set)
			if why := declDiffers(&tmpl, ks.set); why != "" {
				return nil, "set " + it.Set.Name + ": " + why
			}
			if tmpl.Dynamic != ks.set.Dynamic {
				return nil, "set " + it.Set.Name + ": dynamic flag"
			}
			km.table.AddSet("", km.decodeSet(f, it.Set, ks))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(have.chains)) {
		if !wantChains[name] {
			kc := have.chains[name]
			km.table.AddChain("", km.decodeChain(f, kc, decodeHook(kc.chain), have.anon))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(have.sets)) {
		if !wantSets[name] {
			km.table.AddSet("", &nftmodel.Set{Name: name})
		}
	}
	return km, ""
}

// decodeChain decodes a chain of the kernel, hanging on hook, with the
// rules that decode; a rule that does not marks the chain foreign.
func (km *kernelModel) decodeChain(f nftmodel.Family, kc *kernelChain, hook *nftmodel.Hook, anon map[string][]nftables.SetElement) *nftmodel.Chain {
	c := &nftmodel.Chain{Name: kc.chain.Name, Hook: hook, Rules: make([]nftmodel.Rule, 0, len(kc.rules))}
	for _, kr := range kc.rules {
		r, err := decodeKernelRule(f, kr, anon)
		if err != nil {
			km.foreignChains[c.Name] = true
			continue
		}
		c.Rules = append(c.Rules, r)
	}
	return c
}

// decodeKernelRule decodes a rule of the kernel, with the elements of the
// anonymous set it looks up (anon, by name).
func decodeKernelRule(f nftmodel.Family, kr KernelRule, anon map[string][]nftables.SetElement) (nftmodel.Rule, error) {
	if kr.Opaque != "" {
		return nil, errors.New("expressions " + strings.TrimSpace(kr.Opaque))
	}
	var elems []nftables.SetElement
	for _, x := range kr.Exprs {
		if l, ok := x.(*expr.Lookup); ok && strings.HasPrefix(l.SetName, "__set") {
			elems = anon[l.SetName]
			break
		}
	}
	return encoding.DecodeRule(f, kr.Exprs, elems)
}

// decodeHook decodes the hook of a kernel chain: nil for a regular
// chain, and for a hook the model cannot hold (another hook, type or
// policy) the zero Hook, which is no chain's of the plan.
func decodeHook(c *nftables.Chain) *nftmodel.Hook {
	if c.Hooknum == nil {
		return nil
	}
	t := slices.Index(chainTypes[:], c.Type)
	k := slices.IndexFunc(hookNums[:], func(n *nftables.ChainHook) bool { return n != nil && *n == *c.Hooknum })
	if t <= 0 || k <= 0 || c.Policy != nil && *c.Policy != nftables.ChainPolicyAccept {
		return &nftmodel.Hook{}
	}
	h := &nftmodel.Hook{Type: nftmodel.ChainType(t), Hook: nftmodel.HookPoint(k)}
	if c.Priority != nil {
		h.Priority = int32(*c.Priority)
	}
	return h
}

// decodeSet decodes a set of the kernel declared as w (its elements
// aside): the elements that decode, in the kernel's order; those that do
// not go to km.foreign.
func (km *kernelModel) decodeSet(f nftmodel.Family, w *nftmodel.Set, ks *kernelSet) *nftmodel.Set {
	s := &nftmodel.Set{Name: w.Name, Key: w.Key, Verdicts: w.Verdicts, EndpointMod: w.EndpointMod,
		Interval: w.Interval, Dynamic: w.Dynamic, Timeout: w.Timeout}
	if s.Dynamic || encoding.DecodeElements(f, s, ks.elems, decodeVerdict) == nil {
		return s
	}
	// A unit at a time: those that do not decode are foreign.
	var units [][]nftables.SetElement
	if s.Interval || s.EndpointMod > 0 {
		units = intervalUnits(ks.elems)
	} else {
		for i := range ks.elems {
			units = append(units, ks.elems[i:i+1])
		}
	}
	var elems []nftmodel.Element
	var eps []nftmodel.EndpointElement
	for _, u := range units {
		if err := encoding.DecodeElements(f, s, u, decodeVerdict); err != nil {
			km.foreign[s.Name] = append(km.foreign[s.Name], u)
			continue
		}
		elems, eps = append(elems, s.Elements...), append(eps, s.Endpoints...)
	}
	s.Elements, s.Endpoints = elems, eps
	return s
}

// addForeign plans the removal of the kernel's elements that do not
// decode, and reports them: from a set or a map one by one, from an
// interval set by filling it again (flushSet).
func (km *kernelModel) addForeign(tp *tablePlan, want *nftmodel.Table) {
	f := want.Family
	for _, ms := range want.Sets() {
		units := km.foreign[ms.Name]
		if len(units) == 0 {
			continue
		}
		var removed []ElementChange
		for _, u := range units {
			if len(u) == 1 && u[0].IntervalEnd {
				continue // a lone end: it goes with the set's flush or stays
			}
			removed = append(removed, ElementChange{Set: ms.Name, Text: rawText(u)})
		}
		tp.changes.ElementsRemoved = append(tp.changes.ElementsRemoved, removed...)
		s := setOf(tp.want, ms.Name)
		known := s.Template.Name != ""
		if ms.Interval && ms.EndpointMod == 0 {
			if !known || !slices.Contains(tp.flushSets, s) {
				s = encodeSet(f, ms)
				replaceSet(tp.want, s)
				tp.flushSet(s, nil, nil)
			}
			continue
		}
		if !known {
			replaceSet(tp.want, setShell(f, ms))
		}
		if len(tp.delElems[ms.Name])+len(tp.addElems[ms.Name]) == 0 {
			tp.changes.Ops++
		}
		for _, u := range units {
			tp.delElems[ms.Name] = append(tp.delElems[ms.Name], u...)
			tp.changes.Bytes += elementBytes(u)
		}
	}
}

// replaceSet puts s in t in place of the set of its name.
func replaceSet(t *Table, s *Set) {
	for i := range t.Sets {
		if t.Sets[i].Name == s.Name {
			t.Sets[i] = s
			return
		}
	}
	t.Sets = append(t.Sets, s)
}

// rawText writes a unit of elements that does not decode from its bytes:
// its key (an address when it has an address's length, else hex), the
// last key of an interval, and a verdict.
func rawText(u []nftables.SetElement) string {
	text := rawValue(u[0].Key)
	if len(u) > 1 {
		if last, ok := netip.AddrFromSlice(u[1].Key); ok && len(u[1].Key) == len(u[0].Key) {
			text += "-" + last.Prev().String()
		} else {
			text += "-" + rawValue(u[1].Key)
		}
	}
	v := u[0].VerdictData
	if v == nil {
		v = decodeVerdict(u[0].Val)
	}
	if v != nil {
		text += " : " + verdictName(v)
	}
	return text
}

// verdictName writes a verdict as nft does, also one the model does not
// hold.
func verdictName(v *expr.Verdict) string {
	if mv, err := encoding.DecodeVerdict(v); err == nil {
		return mv.String()
	}
	switch v.Kind {
	case expr.VerdictContinue:
		return "continue"
	case expr.VerdictBreak:
		return "break"
	}
	return fmt.Sprintf("verdict %d", v.Kind)
}

// rawValue writes a key of an element that does not decode: an address
// when it has an address's length, else its bytes in hex.
func rawValue(b []byte) string {
	if len(b) == 4 || len(b) == 16 {
		if a, ok := netip.AddrFromSlice(b); ok {
			return a.String()
		}
	}
	return "0x" + hex.EncodeToString(b)
}

// maxDescribedChains bounds the chains whose rules describeRules names:
// the report is for people, and a change of thousands of chains is not
// drift to read rule by rule.
const maxDescribedChains = 100

// describeRules names, for each chain the plan rewrites (the first
// maxDescribedChains), the rules that differ between the kernel (have,
// read with its rules) and the plan (want).
func (tp *tablePlan) describeRules(have *kernelTable, want *nftmodel.Table) {
	if have == nil || tp.changes.Replace || len(tp.changedChains) == 0 {
		return
	}
	chains := map[string]*nftmodel.Chain{}
	for _, c := range want.Chains() {
		chains[c.Name] = c
	}
	for _, ch := range tp.changedChains[:min(len(tp.changedChains), maxDescribedChains)] {
		if kc, mc := have.chains[ch.Name], chains[ch.Name]; kc != nil && mc != nil {
			tp.changes.Rules = append(tp.changes.Rules, ruleChanges(mc, kc.rules, want.Family, have.anon)...)
		}
	}
}

// ruleChanges aligns a chain's rules in the kernel (have) with the
// plan's (want), compared as the model compares them (their canonical
// text), and names those that differ: a kernel rule and a plan rule at
// the same place are one rule changed; the rest are rules the kernel
// lacks or the plan does not have. The kernel's rules are printed by the
// model; one that does not decode is named by its expressions.
func ruleChanges(want *nftmodel.Chain, have []KernelRule, f nftmodel.Family, anon map[string][]nftables.SetElement) []RuleChange {
	a := make([]string, len(have))
	for i, kr := range have {
		if r, err := decodeKernelRule(f, kr, anon); err == nil {
			a[i] = r.Text(f)
		} else {
			a[i] = "(not a form netspec writes: " + exprNames(kr) + ")"
		}
	}
	b := make([]string, len(want.Rules))
	for i, r := range want.Rules {
		b[i] = r.Canonical().Text(f)
	}
	del, ins, ok := myers.Eq(len(a), len(b), func(i, j int) bool { return a[i] == b[j] }, myersMaxD, nil)
	if !ok {
		// Too many edits to align: compare place by place.
		del, ins = nil, nil
		for i := range max(len(a), len(b)) {
			if i < len(a) && i < len(b) && a[i] == b[i] {
				continue
			}
			if i < len(a) {
				del = append(del, i)
			}
			if i < len(b) {
				ins = append(ins, i)
			}
		}
	}
	// A deletion and an insertion are at the same place when as many
	// rules match before each (gap): the k-th deletion and the k-th
	// insertion at a place are one rule changed.
	gap := func(xs []int, k int) int {
		if k < len(xs) {
			return xs[k] - k
		}
		return math.MaxInt
	}
	var out []RuleChange
	for d, n := 0, 0; d < len(del) || n < len(ins); {
		g := min(gap(del, d), gap(ins, n))
		c := RuleChange{Chain: want.Name}
		if gap(del, d) == g {
			c.Index, c.Old = del[d]+1, a[del[d]]
			d++
		}
		if gap(ins, n) == g {
			c.Index, c.New = ins[n]+1, want.Rules[ins[n]].Text(f)
			n++
		}
		out = append(out, c)
	}
	return out
}

// exprNames names the expressions of a kernel rule as the kernel calls
// their types ("counter"), a verdict by its text ("accept"), then those
// of types no parser here knows (KernelRule.Opaque).
func exprNames(kr KernelRule) string {
	var names []string
	for _, x := range kr.Exprs {
		if v, ok := x.(*expr.Verdict); ok {
			names = append(names, verdictName(v))
			continue
		}
		names = append(names, exprName(x))
	}
	if kr.Opaque != "" {
		names = append(names, strings.Fields(kr.Opaque)...)
	}
	return strings.Join(names, " ")
}

// exprName is the kernel's name of an expression's type: expr.Counter is
// "counter".
func exprName(x expr.Any) string {
	return strings.ToLower(reflect.TypeOf(x).Elem().Name())
}
