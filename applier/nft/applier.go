package nft

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"netspec.dev/netspec/applier/nft/encoding"
	"netspec.dev/netspec/internal/stages"
	"netspec.dev/netspec/render/nftmodel"
)

// TableName is the name of netspec's tables. No other table is ever
// touched.
const TableName = "netspec"

// families are the tables netspec owns, one per family.
var families = []nftables.TableFamily{nftables.TableFamilyIPv4, nftables.TableFamilyIPv6}

// Applier installs rulesets (render's nftmodel) into the kernel of one network
// namespace and keeps them there.
type Applier struct {
	k Kernel
	// model is the model the applier last installed and verified: the
	// daemon's Update diffs the next one against it (diffModel) instead
	// of reading the kernel back. Its pieces are shared with render's
	// memo; its encoding is not kept.
	model *nftmodel.Ruleset
	// refused tells that the kernel refused the last batch: the next
	// sync replaces the tables whole rather than trust a diff.
	refused bool

	// sending is called as the commit in progress is sent (the kernel's
	// send hook), before onSend: work for the other cores while the
	// kernel takes the batch.
	sending func()
	onSend  func() // see OnSend
}

// Open connects to nftables in the network namespace nsFd (an open
// /var/run/netns/NAME or /proc/PID/ns/net; 0 for the current one).
func Open(nsFd int) (*Applier, error) {
	k, err := OpenSystem(nsFd)
	if err != nil {
		return nil, err
	}
	return New(k), nil
}

// New returns an Applier over any Kernel, such as a Fake.
func New(k Kernel) *Applier {
	a := &Applier{k: k}
	if k, ok := k.(interface{ notifySend(func()) }); ok {
		k.notifySend(a.sent)
	}
	return a
}

// OnSend has f called whenever a batch has been encoded and is being sent
// (System: the kernel then applies it within the sending system call, on
// the sending thread, for seconds at 50,000 Services, while the other
// cores are idle). A Kernel of another kind never calls it.
func (a *Applier) OnSend(f func()) { a.onSend = f }

// sent is the kernel's send hook.
func (a *Applier) sent() {
	if a.sending != nil {
		a.sending()
	}
	if a.onSend != nil {
		a.onSend()
	}
}

// Close releases the kernel's connections. The rules stay.
func (a *Applier) Close() error { return a.k.Close() }

// Plan compares want with the kernel's tables and returns what Apply
// would change, without changing anything.
func (a *Applier) Plan(m *nftmodel.Ruleset) (*Changes, error) {
	plans, err := a.diffKernel(m)
	if err != nil {
		return nil, err
	}
	for i, tp := range plans {
		if tp.changes.Replace && tp.model != nil {
			if err := tp.countModel(families[i]); err != nil {
				return nil, err
			}
		}
	}
	return changesOf(plans), nil
}

// Apply reads netspec's tables back from the kernel, and changes them
// into want in one transaction: only the chains and elements that differ,
// which also repairs drift (anything added, removed or changed by hand).
// The kernel applies all of it or none; after a rejected batch the next
// Apply replaces the tables whole. Afterwards what was written is read
// back (see verifyWritten): a difference is an error. A table replaced
// whole (a first install) is queued straight from the model, encoded a
// piece at a time (queueModel).
func (a *Applier) Apply(m *nftmodel.Ruleset) (*Changes, error) {
	end := stages.Start("read kernel")
	plans, err := a.diffKernel(m)
	end()
	if err != nil {
		a.installedModel(m, err)
		return nil, err
	}
	ch, err := a.commitVerified(plans)
	a.installedModel(m, err)
	return ch, err
}

// commitVerified commits plans and verifies what they wrote
// (verifyWritten).
func (a *Applier) commitVerified(plans []*tablePlan) (*Changes, error) {
	// While the kernel takes it (or when the check needs them):
	sums := newModelSums(plans)
	a.sending = sums.start
	ch, err := a.commit(plans)
	a.sending = nil
	if err != nil {
		return ch, err
	}
	defer stages.Start("verify")()
	return ch, a.verifyWritten(plans, sums)
}

// Update is Apply for a daemon that is the only writer of the tables: it
// diffs want against what it installed last instead of reading the whole
// kernel back, so that its work and its netlink traffic follow the size
// of the change, not of the ruleset. Only the changed chains are read
// back to verify. Without a last state it is Apply. A periodic Apply
// finds and repairs drift.
func (a *Applier) Update(m *nftmodel.Ruleset) (*Changes, error) {
	if a.model == nil {
		return a.Apply(m)
	}
	var plans []*tablePlan
	for _, fam := range families {
		plans = append(plans, diffModel(modelTable(m, fam), modelTable(a.model, fam), fam))
	}
	if !slices.ContainsFunc(plans, func(tp *tablePlan) bool { return tp.changes.Replace }) {
		ch, err := a.commit(plans)
		if err == nil {
			err = a.verifyChanged(plans)
		}
		a.installedModel(m, err)
		return ch, err
	}
	// A replace reads every set back to verify: against the whole
	// tables' models.
	for i, tp := range plans {
		if tp.want != nil {
			tp.model = modelTable(m, families[i])
		}
	}
	ch, err := a.commitVerified(plans)
	a.installedModel(m, err)
	return ch, err
}

// Forget drops what the applier keeps of what it installed: the next
// Update reads the kernel back, as Apply does. A one-shot apply calls it
// so that the model is garbage once installed.
func (a *Applier) Forget() { a.model = nil }

// installedModel keeps m as what the kernel holds after a sync of it
// that ended with err: with an error, nothing is trusted and the next
// sync reads the kernel back.
func (a *Applier) installedModel(m *nftmodel.Ruleset, err error) {
	a.model = nil
	if err == nil {
		a.model = m
	}
}

// modelTable returns the table of a family in m, or nil.
func modelTable(m *nftmodel.Ruleset, fam nftables.TableFamily) *nftmodel.Table {
	if m == nil {
		return nil
	}
	for _, t := range m.Tables {
		if encoding.TableFamily(t.Family) == fam {
			return t
		}
	}
	return nil
}

// Cleanup deletes netspec's tables, if present, in one transaction.
func (a *Applier) Cleanup() (deleted []string, err error) {
	var del []nftables.TableFamily
	for _, fam := range families {
		kt, err := findTable(a.k, fam, TableName)
		if err != nil {
			return nil, err
		}
		if kt != nil {
			del = append(del, fam)
			deleted = append(deleted, familyName(fam)+" "+TableName)
		}
	}
	if len(del) > 0 {
		err := a.k.Run(func(b Batch) error {
			for _, fam := range del {
				b.DelTable(&nftables.Table{Family: fam, Name: TableName})
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("delete tables: %w", explain(err))
		}
	}
	a.model = nil
	return deleted, nil
}

// diffKernel compares the model m with the kernel's tables, read back
// and decoded into the model (diffKernelTable). A table the kernel lacks,
// or that only a replace can change, is replaced from the model
// (modelReplaced).
func (a *Applier) diffKernel(m *nftmodel.Ruleset) ([]*tablePlan, error) {
	var plans []*tablePlan
	for _, fam := range families {
		have, err := readTable(a.k, fam, TableName, true)
		if err != nil {
			return nil, err
		}
		plans = append(plans, a.diffOne(modelTable(m, fam), have, fam))
	}
	return plans, nil
}

// diffOne compares the model of the table of family fam (nil: none) with
// the kernel's (have), and replaces it whole after the kernel refused a
// batch.
func (a *Applier) diffOne(want *nftmodel.Table, have *kernelTable, fam nftables.TableFamily) *tablePlan {
	tp := diffKernelTable(want, have, fam)
	if a.refused && want != nil && !tp.changes.Replace {
		tp = modelReplaced(want, fam, "the kernel refused the last change")
	}
	return tp
}

// commit sends the plans in one batch. The changes are reported after
// the plans are queued: a replace from the model counts its Bytes then.
func (a *Applier) commit(plans []*tablePlan) (*Changes, error) {
	if ch := changesOf(plans); ch.Empty() {
		return ch, nil
	}
	var qerr error // an error of queueing: nothing was sent
	err := a.k.Run(func(b Batch) error {
		for i, tp := range plans {
			if qerr = tp.queue(b, families[i]); qerr != nil {
				return qerr
			}
		}
		return nil
	})
	ch := changesOf(plans)
	if qerr != nil {
		return ch, qerr
	}
	if err != nil {
		a.model, a.refused = nil, true
		// google/nftables repeats the batch's one error for every message.
		var errno syscall.Errno
		if errors.As(err, &errno) {
			err = errno
		}
		return ch, fmt.Errorf("the kernel rejected the change, nothing was changed (the next apply replaces the tables): %w", explain(err))
	}
	a.refused = false
	return ch, nil
}

// verifyWritten checks that the kernel holds what a commit wrote, since
// google/nftables v0.3.0 is known to drop set elements silently (they are
// sent in chunks, but this is the proof). A table replaced whole from its
// model is checked against what was sent of it (sentMatches, with the
// digests sums holds; see sent.go): its chains and every set's elements,
// as decoded from the bytes the kernel acknowledged, and the kernel's
// list of its sets. Any other table is read back: every set's elements
// and the chains' names, compared with its model a set at a time
// (modelChecks). Rules are compared for the chains an
// incremental change wrote; after a replace, the rules of all chains are
// not read again (a dump of 30,000 rules takes about a second), as the
// kernel acknowledged each rule of the all-or-nothing batch. When a check
// says no, the table is read back whole and diffKernelTable says what
// differs.
func (a *Applier) verifyWritten(plans []*tablePlan, sums *modelSums) error {
	for i, tp := range plans {
		fam := families[i]
		if tp.changes.Delete || tp.changes.Empty() {
			continue
		}
		w := tp.model
		if w == nil {
			return fmt.Errorf("verify: no model of table %s %s", familyName(fam), TableName)
		}
		// The quick answer first (verify.go); diffKernelTable says what
		// differs.
		matches := func() (bool, error) { return a.tableMatches(modelChecks(w), fam) }
		if sentChecked(tp) {
			matches = func() (bool, error) { return a.sentMatches(modelChecks(w), sums.of(i), fam) }
		}
		if ok, err := matches(); err != nil {
			return fmt.Errorf("verify: %w", err)
		} else if ok {
			continue
		}
		have, err := readTable(a.k, fam, TableName, true)
		if err != nil {
			return fmt.Errorf("verify: %w", err)
		}
		if have == nil {
			return fmt.Errorf("verify: table %s %s is missing after the change", familyName(fam), TableName)
		}
		check := diffKernelTable(w, have, fam)
		c := check.changes
		if c.Replace || len(c.ChainsAdded)+len(c.ChainsRemoved)+len(c.SetsAdded)+len(c.SetsRemoved)+len(c.ElementsAdded)+len(c.ElementsRemoved) > 0 {
			return fmt.Errorf("verify: the kernel does not hold what was sent: %s", changesOf([]*tablePlan{check}).Summary())
		}
	}
	return a.verifyChanged(plans)
}

// verifyChanged reads back the rules of the chains an incremental change
// wrote, decodes them into the model (with the elements of the anonymous
// sets they look up, which a read of one chain does not give) and
// compares them with the model's (nftmodel.Comparer.SameRule).
func (a *Applier) verifyChanged(plans []*tablePlan) error {
	var cmp nftmodel.Comparer
	for i, tp := range plans {
		if tp.changes.Replace || tp.changes.Delete {
			continue
		}
		fam := families[i]
		for _, ch := range slices.Concat(tp.addChains, tp.changedChains) {
			rules, err := a.k.Rules(fam, TableName, ch.Name)
			if err != nil {
				return fmt.Errorf("verify chain %s: %w", ch.Name, err)
			}
			if !a.sameRules(&cmp, ch.model, rules[ch.Name], fam) {
				return fmt.Errorf("verify: chain %s in the kernel is not what was sent", ch.Name)
			}
		}
	}
	return nil
}

// sameRules tells whether the kernel's rules of a chain (have) decode to
// the rules of want, in order.
func (a *Applier) sameRules(cmp *nftmodel.Comparer, want *nftmodel.Chain, have []KernelRule, fam nftables.TableFamily) bool {
	if len(have) != len(want.Rules) {
		return false
	}
	f := modelFamily(fam)
	for i, kr := range have {
		anon := map[string][]nftables.SetElement{}
		for _, x := range kr.Exprs {
			if l, ok := x.(*expr.Lookup); ok && strings.HasPrefix(l.SetName, "__set") {
				elems, err := a.k.Elements(fam, TableName, l.SetName)
				if err != nil {
					return false
				}
				anon[l.SetName] = elems
			}
		}
		r, err := decodeKernelRule(f, kr, anon)
		if err != nil || !cmp.SameRule(r, want.Rules[i], f) {
			return false
		}
	}
	return true
}

// modelFamily is the model's family of a table family.
func modelFamily(fam nftables.TableFamily) nftmodel.Family {
	if fam == nftables.TableFamilyIPv6 {
		return nftmodel.IPv6
	}
	return nftmodel.IPv4
}

func changesOf(plans []*tablePlan) *Changes {
	ch := &Changes{}
	for _, tp := range plans {
		ch.Tables = append(ch.Tables, tp.changes)
	}
	return ch
}

// Summary is a one-line account of the changes.
func (c *Changes) Summary() string {
	if c.Empty() {
		return "no changes"
	}
	var parts []string
	for _, t := range c.Tables {
		switch {
		case t.Delete:
			parts = append(parts, fmt.Sprintf("table %s %s deleted", t.Family, TableName))
		case t.Replace:
			parts = append(parts, fmt.Sprintf("table %s %s replaced (%s): %d chains, %d sets", t.Family, TableName, t.Reason, len(t.ChainsAdded), len(t.SetsAdded)))
		default:
			if !t.Empty() {
				parts = append(parts, fmt.Sprintf("table %s %s: chains %d added, %d changed, %d removed; elements %d added, %d removed; sets %d added, %d removed",
					t.Family, TableName, len(t.ChainsAdded), len(t.ChainsChanged), len(t.ChainsRemoved), len(t.ElementsAdded), len(t.ElementsRemoved), len(t.SetsAdded), len(t.SetsRemoved)))
			}
		}
	}
	return strings.Join(parts, "; ")
}
