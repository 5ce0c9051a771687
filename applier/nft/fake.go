package nft

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Fake is an in-memory Kernel for tests, in the manner of knftables'
// fake: it keeps tables, chains with their rules (as netlink expressions,
// read back as the kernel dumps them), sets and maps with their elements,
// and runs a batch as the kernel runs a transaction: every operation in
// order, all of them or, at the first one the kernel would refuse, none
// (the state stays as it was). It refuses, with the kernel's errors, what
// netspec could send wrongly: a rule or map element that jumps to a
// missing chain, a rule that looks up a missing set, elements of a
// missing set, deleting or flushing a missing object, deleting a chain
// that is jumped to (its own rules go with it, as in the kernel) or a set
// a rule uses, a set declared again differently, an element added again
// with other data, a base chain's hook changed in place. Adding a table,
// chain, set or element that exists as it is changes nothing, as NEW*
// messages without NLM_F_EXCL do. TestFakeRefusesAsKernel checks these
// answers against the kernel's.
//
// Tests inspect it with Dump and the Kernel reads, drift it with Run (as
// someone running nft by hand), and make a batch fail with FailNext.
// Make it with NewFake.
type Fake struct {
	mu       sync.Mutex
	tables   map[fakeTableKey]*fakeTable
	failNext bool
	batches  int
	last     []string
	sent     sentTables // what the last batch added, see Sent
	onSend   func()     // see Applier.OnSend
}

func (f *Fake) notifySend(fn func()) { f.onSend = fn }

var _ Kernel = (*Fake)(nil)

// ErrFakeFailure is the error of the batch a Fake was told to fail
// (FailNext).
var ErrFakeFailure = errors.New("fake: injected failure")

type fakeTableKey struct {
	fam  nftables.TableFamily
	name string
}

type fakeTable struct {
	table  nftables.Table
	chains map[string]*fakeChain
	sets   map[string]*fakeSet
	anon   int // the number of the next anonymous set (__set0, __set1…)
}

type fakeChain struct {
	chain nftables.Chain // Table nil
	rules []fakeRule
}

// fakeRule is a rule as the kernel keeps it: its expressions encoded, and
// what they refer to.
type fakeRule struct {
	exprs  [][]byte // each as expr.Marshal writes it
	chains []string // jumped to
	sets   []string // looked up (anonymous sets included)
	anon   string   // the anonymous set the rule owns: deleted with it
}

type fakeSet struct {
	set   nftables.Set // Table nil, ID 0
	elems map[string]nftables.SetElement
}

// NewFake returns a Fake without tables.
func NewFake() *Fake { return &Fake{tables: map[fakeTableKey]*fakeTable{}} }

// FailNext makes the next batch fail with ErrFakeFailure, changing
// nothing, as a batch the kernel refuses.
func (f *Fake) FailNext() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failNext = true
}

// Batches returns the number of batches the Fake applied (not those it
// refused).
func (f *Fake) Batches() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.batches
}

// LastBatch returns the operations of the last batch applied, one a line
// as "add rule ip netspec services".
func (f *Fake) LastBatch() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.last)
}

// Close implements Kernel.
func (f *Fake) Close() error { return nil }

// Tables implements Kernel.
func (f *Fake) Tables(fam nftables.TableFamily) ([]*nftables.Table, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*nftables.Table
	for _, k := range f.tableKeys() {
		if k.fam == fam {
			t := f.tables[k].table
			out = append(out, &t)
		}
	}
	return out, nil
}

func (f *Fake) tableKeys() []fakeTableKey {
	return slices.SortedFunc(maps.Keys(f.tables), func(a, b fakeTableKey) int {
		if a.fam != b.fam {
			return int(a.fam) - int(b.fam)
		}
		return strings.Compare(a.name, b.name)
	})
}

// Sets implements Kernel.
func (f *Fake) Sets(t *nftables.Table) ([]*nftables.Set, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft, ok := f.tables[fakeTableKey{t.Family, t.Name}]
	if !ok {
		return nil, unix.ENOENT
	}
	var out []*nftables.Set
	for _, name := range sortedKeys(ft.sets) {
		s := ft.sets[name].set
		s.Table = &ft.table
		out = append(out, &s)
	}
	return out, nil
}

// Elements implements Kernel.
func (f *Fake) Elements(fam nftables.TableFamily, table, set string) ([]nftables.SetElement, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft, ok := f.tables[fakeTableKey{fam, table}]
	if !ok {
		return nil, unix.ENOENT
	}
	fs, ok := ft.sets[set]
	if !ok {
		return nil, unix.ENOENT
	}
	var out []nftables.SetElement
	for _, k := range sortedKeys(fs.elems) {
		e := fs.elems[k]
		if v := e.VerdictData; v != nil {
			// As the kernel dumps it: the verdict's attributes in Val.
			e.Val, e.VerdictData = verdictAttrs(v), nil
		}
		out = append(out, e)
	}
	return out, nil
}

// verdictAttrs encodes a verdict as NFTA_DATA_VERDICT holds it.
func verdictAttrs(v *expr.Verdict) []byte {
	attrs := []netlink.Attribute{{Type: unix.NFTA_VERDICT_CODE, Data: binary.BigEndian.AppendUint32(nil, uint32(int32(v.Kind)))}}
	if v.Chain != "" {
		attrs = append(attrs, netlink.Attribute{Type: unix.NFTA_VERDICT_CHAIN, Data: []byte(v.Chain + "\x00")})
	}
	b, err := netlink.MarshalAttributes(attrs)
	if err != nil {
		panic(err) // two fixed attributes
	}
	return b
}

// Chains implements Kernel.
func (f *Fake) Chains(fam nftables.TableFamily) ([]*nftables.Chain, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*nftables.Chain
	for _, k := range f.tableKeys() {
		if k.fam != fam {
			continue
		}
		ft := f.tables[k]
		for _, name := range sortedKeys(ft.chains) {
			c := ft.chains[name].chain
			c.Table = &ft.table
			out = append(out, &c)
		}
	}
	return out, nil
}

// Rules implements Kernel: the rules' expressions are decoded from what
// was sent, as a dump decodes the kernel's.
func (f *Fake) Rules(fam nftables.TableFamily, table, chain string) (map[string][]KernelRule, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft, ok := f.tables[fakeTableKey{fam, table}]
	if !ok {
		return nil, unix.ENOENT
	}
	if chain != "" && ft.chains[chain] == nil {
		return nil, unix.ENOENT
	}
	out := map[string][]KernelRule{}
	for name, fc := range ft.chains {
		if chain != "" && name != chain {
			continue
		}
		for _, r := range fc.rules {
			var kr KernelRule
			for _, b := range r.exprs {
				e, ename, err := parseExpr(byte(fam), b)
				if err != nil {
					return nil, err
				}
				if e == nil {
					kr.Opaque += ename + " "
					continue
				}
				kr.Exprs = append(kr.Exprs, e)
			}
			out[name] = append(out[name], kr)
		}
	}
	return out, nil
}

// Run implements Kernel: the batch is applied to a copy of the state,
// which replaces the state only when every operation succeeded.
func (f *Fake) Run(queue func(Batch) error) error {
	f.mu.Lock()
	f.sent = nil
	f.mu.Unlock()
	b := &fakeBatch{}
	if err := queue(b); err != nil {
		return err
	}
	if f.onSend != nil {
		f.onSend()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failNext {
		f.failNext = false
		return ErrFakeFailure
	}
	next := f.clone()
	anon := map[uint32]string{} // batch ID of an anonymous set -> its name in the table
	for i, op := range b.ops {
		if err := op.apply(next, anon); err != nil {
			return fmt.Errorf("batch operation %d (%s): %w", i+1, op, err)
		}
	}
	f.tables = next.tables
	f.batches++
	f.last = make([]string, len(b.ops))
	f.sent = sentTables{}
	for i, op := range b.ops {
		f.last[i] = op.String()
		switch op.kind {
		case opDelTable:
			f.sent.delTable(op.fam, op.table)
		case opAddChain:
			c := op.chain
			c.Table = &nftables.Table{Family: op.fam, Name: op.table}
			f.sent.addChain(op.fam, op.table, &c)
		case opAddElems:
			f.sent.addElems(op.fam, op.table, op.set.Name, op.elems)
		}
	}
	return nil
}

// Sent implements Kernel: what the last batch applied queued, as the
// kernel would have been sent it.
func (f *Fake) Sent(fam nftables.TableFamily, table string) (*sentTable, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sent[tableKey{fam, table}], nil
}

// clone copies the state deep enough that a batch applied to the copy
// leaves f alone (rules are never changed in place).
func (f *Fake) clone() *Fake {
	c := &Fake{tables: make(map[fakeTableKey]*fakeTable, len(f.tables))}
	for k, t := range f.tables {
		nt := &fakeTable{table: t.table, anon: t.anon, chains: make(map[string]*fakeChain, len(t.chains)), sets: make(map[string]*fakeSet, len(t.sets))}
		for name, ch := range t.chains {
			nt.chains[name] = &fakeChain{chain: ch.chain, rules: slices.Clone(ch.rules)}
		}
		for name, s := range t.sets {
			nt.sets[name] = &fakeSet{set: s.set, elems: maps.Clone(s.elems)}
		}
		c.tables[k] = nt
	}
	return c
}

// Dump returns the state as sorted text, for assertions: per table its
// chains (hook, number of rules) and sets (flags, number of elements).
func (f *Fake) Dump() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	for _, k := range f.tableKeys() {
		t := f.tables[k]
		fmt.Fprintf(&b, "table %s %s\n", familyName(k.fam), k.name)
		for _, name := range sortedKeys(t.chains) {
			c := t.chains[name]
			fmt.Fprintf(&b, "\tchain %s", name)
			if h, p := c.chain.Hooknum, c.chain.Priority; h != nil && p != nil {
				fmt.Fprintf(&b, " (type %s hook %d priority %d)", c.chain.Type, *h, *p)
			}
			fmt.Fprintf(&b, ": %d rules\n", len(c.rules))
		}
		for _, name := range sortedKeys(t.sets) {
			s := t.sets[name]
			kind := "set"
			if s.set.IsMap {
				kind = "map"
			}
			var flags []string
			for _, fl := range []struct {
				on   bool
				name string
			}{{s.set.Anonymous, "anonymous"}, {s.set.Interval, "interval"}, {s.set.Dynamic, "dynamic"}, {s.set.HasTimeout, "timeout"}} {
				if fl.on {
					flags = append(flags, fl.name)
				}
			}
			fmt.Fprintf(&b, "\t%s %s", kind, name)
			if len(flags) > 0 {
				fmt.Fprintf(&b, " (%s)", strings.Join(flags, ", "))
			}
			fmt.Fprintf(&b, ": %d elements\n", len(s.elems))
		}
	}
	return b.String()
}

// fakeBatch collects the operations of one Run.
type fakeBatch struct {
	ops    []fakeOp
	nextID uint32
}

var _ Batch = (*fakeBatch)(nil)

type fakeOpKind int

const (
	opAddTable fakeOpKind = iota
	opDelTable
	opAddChain
	opFlushChain
	opDelChain
	opAddRule
	opAddSet
	opAddElems
	opDelElems
	opFlushSet
	opDelSet
)

var fakeOpNames = [...]string{"add table", "delete table", "add chain", "flush chain", "delete chain", "add rule", "add set", "add element", "delete element", "flush set", "delete set"}

// fakeOp is one operation of a batch, with copies of what it was given.
type fakeOp struct {
	kind  fakeOpKind
	fam   nftables.TableFamily
	table string
	chain nftables.Chain // opAddChain; Name for the other chain and rule operations
	exprs []expr.Any     // opAddRule
	set   nftables.Set   // set and element operations
	elems []nftables.SetElement
}

func (op fakeOp) String() string {
	s := fakeOpNames[op.kind] + " " + familyName(op.fam) + " " + op.table
	switch op.kind {
	case opAddChain, opFlushChain, opDelChain, opAddRule:
		s += " " + op.chain.Name
	case opAddSet, opAddElems, opDelElems, opFlushSet, opDelSet:
		s += " " + op.set.Name
	}
	return s
}

func tableOf(t *nftables.Table) (nftables.TableFamily, string) {
	if t == nil {
		return 0, ""
	}
	return t.Family, t.Name
}

func (b *fakeBatch) AddTable(t *nftables.Table) *nftables.Table {
	b.ops = append(b.ops, fakeOp{kind: opAddTable, fam: t.Family, table: t.Name})
	return t
}

func (b *fakeBatch) DelTable(t *nftables.Table) {
	b.ops = append(b.ops, fakeOp{kind: opDelTable, fam: t.Family, table: t.Name})
}

func (b *fakeBatch) chainOp(kind fakeOpKind, c *nftables.Chain) {
	fam, table := tableOf(c.Table)
	ch := *c
	ch.Table = nil
	if ch.Policy != nil {
		p := *ch.Policy
		ch.Policy = &p
	}
	b.ops = append(b.ops, fakeOp{kind: kind, fam: fam, table: table, chain: ch})
}

func (b *fakeBatch) AddChain(c *nftables.Chain) *nftables.Chain {
	b.chainOp(opAddChain, c)
	return c
}

func (b *fakeBatch) FlushChain(c *nftables.Chain) { b.chainOp(opFlushChain, c) }
func (b *fakeBatch) DelChain(c *nftables.Chain)   { b.chainOp(opDelChain, c) }

func (b *fakeBatch) AddRule(r *nftables.Rule) *nftables.Rule {
	fam, table := tableOf(r.Table)
	var chain string
	if r.Chain != nil {
		chain = r.Chain.Name
	}
	b.ops = append(b.ops, fakeOp{kind: opAddRule, fam: fam, table: table, chain: nftables.Chain{Name: chain}, exprs: slices.Clone(r.Exprs)})
	return r
}

func (b *fakeBatch) setOp(kind fakeOpKind, s *nftables.Set, elems []nftables.SetElement) {
	fam, table := tableOf(s.Table)
	ns := *s
	ns.Table = nil
	b.ops = append(b.ops, fakeOp{kind: kind, fam: fam, table: table, set: ns, elems: slices.Clone(elems)})
}

// AddSet names an anonymous set and gives a set its batch ID, as
// google/nftables does.
func (b *fakeBatch) AddSet(s *nftables.Set, elems []nftables.SetElement) error {
	if s.Anonymous && !s.Constant {
		return errors.New("anonymous structs must be constant")
	}
	if s.ID == 0 {
		b.nextID++
		s.ID = b.nextID
		if s.Anonymous {
			s.Name = "__set%d"
			if s.IsMap {
				s.Name = "__map%d"
			}
		}
	}
	b.setOp(opAddSet, s, elems)
	return nil
}

func (b *fakeBatch) SetAddElements(s *nftables.Set, elems []nftables.SetElement) error {
	if s.Anonymous {
		return errors.New("anonymous sets cannot be updated")
	}
	b.setOp(opAddElems, s, elems)
	return nil
}

func (b *fakeBatch) SetDeleteElements(s *nftables.Set, elems []nftables.SetElement) error {
	if s.Anonymous {
		return errors.New("anonymous sets cannot be updated")
	}
	b.setOp(opDelElems, s, elems)
	return nil
}

func (b *fakeBatch) FlushSet(s *nftables.Set) { b.setOp(opFlushSet, s, nil) }
func (b *fakeBatch) DelSet(s *nftables.Set)   { b.setOp(opDelSet, s, nil) }

// apply carries out op on f, the copy of a Fake's state that a batch
// changes; anon maps the batch IDs of the anonymous sets created so far to
// their names in the table.
func (op fakeOp) apply(f *Fake, anon map[uint32]string) error {
	key := fakeTableKey{op.fam, op.table}
	t := f.tables[key]
	switch op.kind {
	case opAddTable:
		if t == nil {
			f.tables[key] = &fakeTable{table: nftables.Table{Family: op.fam, Name: op.table}, chains: map[string]*fakeChain{}, sets: map[string]*fakeSet{}}
		}
		return nil
	}
	if t == nil {
		return unix.ENOENT
	}
	switch op.kind {
	case opDelTable:
		delete(f.tables, key)
	case opAddChain:
		return t.addChain(op.chain)
	case opFlushChain:
		c := t.chains[op.chain.Name]
		if c == nil {
			return unix.ENOENT
		}
		for _, r := range c.rules {
			if r.anon != "" {
				delete(t.sets, r.anon)
			}
		}
		c.rules = nil
	case opDelChain:
		// Its rules go with it (google/nftables does not ask for
		// NLM_F_NONREC); a jump to it from elsewhere keeps it.
		c := t.chains[op.chain.Name]
		if c == nil {
			return unix.ENOENT
		}
		rules := c.rules
		c.rules = nil
		if t.chainUsed(op.chain.Name) {
			return unix.EBUSY
		}
		for _, r := range rules {
			if r.anon != "" {
				delete(t.sets, r.anon)
			}
		}
		delete(t.chains, op.chain.Name)
	case opAddRule:
		return t.addRule(op.fam, op.chain.Name, op.exprs, anon)
	case opAddSet:
		return t.addSet(op.set, op.elems, anon)
	case opAddElems, opDelElems, opFlushSet, opDelSet:
		name := op.set.Name
		if t.sets[name] == nil && anon[op.set.ID] != "" {
			name = anon[op.set.ID] // the kernel finds a set of the batch by its ID
		}
		s := t.sets[name]
		if s == nil {
			return unix.ENOENT
		}
		switch op.kind {
		case opAddElems:
			return t.addElems(s, op.elems)
		case opDelElems:
			for _, e := range op.elems {
				k := fakeElemKey(e)
				if _, ok := s.elems[k]; !ok {
					return unix.ENOENT
				}
				delete(s.elems, k)
			}
		case opFlushSet:
			clear(s.elems)
		case opDelSet:
			if t.setUsed(name) {
				return unix.EBUSY
			}
			delete(t.sets, name)
		}
	}
	return nil
}

func (t *fakeTable) addChain(c nftables.Chain) error {
	have := t.chains[c.Name]
	if have == nil {
		t.chains[c.Name] = &fakeChain{chain: c}
		return nil
	}
	// NEWCHAIN of an existing chain updates it: only a base chain's
	// policy may change.
	h := have.chain
	switch {
	case (c.Hooknum == nil) != (h.Hooknum == nil):
		return unix.EBUSY
	case c.Hooknum == nil:
		return nil
	case *c.Hooknum != *h.Hooknum, c.Type != h.Type, c.Priority == nil || *c.Priority != *h.Priority:
		return unix.EOPNOTSUPP
	}
	if c.Policy != nil {
		have.chain.Policy = c.Policy
	}
	return nil
}

// chainUsed tells whether a rule or a map element jumps to the chain.
func (t *fakeTable) chainUsed(name string) bool {
	for _, c := range t.chains {
		for _, r := range c.rules {
			if slices.Contains(r.chains, name) {
				return true
			}
		}
	}
	for _, s := range t.sets {
		for _, e := range s.elems {
			if e.VerdictData != nil && e.VerdictData.Chain == name {
				return true
			}
		}
	}
	return false
}

// setUsed tells whether a rule looks the set up.
func (t *fakeTable) setUsed(name string) bool {
	for _, c := range t.chains {
		for _, r := range c.rules {
			if slices.Contains(r.sets, name) {
				return true
			}
		}
	}
	return false
}

// jumpTarget checks the chain a verdict jumps or goes to.
func (t *fakeTable) jumpTarget(v *expr.Verdict) error {
	if v == nil || (v.Kind != expr.VerdictJump && v.Kind != expr.VerdictGoto) {
		return nil
	}
	c := t.chains[v.Chain]
	switch {
	case c == nil:
		return unix.ENOENT
	case c.chain.Hooknum != nil:
		return unix.EOPNOTSUPP // no jump to a base chain
	}
	return nil
}

func (t *fakeTable) addRule(fam nftables.TableFamily, chain string, exprs []expr.Any, anon map[uint32]string) error {
	c := t.chains[chain]
	if c == nil {
		return unix.ENOENT
	}
	// resolve finds a set by name, or a set of this batch by its ID.
	resolve := func(name string, id uint32) (string, error) {
		if t.sets[name] != nil {
			return name, nil
		}
		if n := anon[id]; n != "" && id != 0 {
			return n, nil
		}
		return "", unix.ENOENT
	}
	var r fakeRule
	for _, e := range exprs {
		switch x := e.(type) {
		case *expr.Verdict:
			if err := t.jumpTarget(x); err != nil {
				return err
			}
			if x.Kind == expr.VerdictJump || x.Kind == expr.VerdictGoto {
				r.chains = append(r.chains, x.Chain)
			}
		case *expr.Lookup:
			name, err := resolve(x.SetName, x.SetID)
			if err != nil {
				return err
			}
			if t.sets[name].set.Anonymous {
				r.anon = name
			}
			r.sets = append(r.sets, name)
			l := *x
			l.SetName, l.SetID = name, 0
			e = &l
		case *expr.Dynset:
			name, err := resolve(x.SetName, x.SetID)
			if err != nil {
				return err
			}
			r.sets = append(r.sets, name)
			d := *x
			d.SetName, d.SetID = name, 0
			e = &d
		}
		b, err := expr.Marshal(byte(fam), e)
		if err != nil {
			return fmt.Errorf("%w: %v", unix.EINVAL, err)
		}
		r.exprs = append(r.exprs, b)
	}
	c.rules = append(c.rules, r)
	return nil
}

func (t *fakeTable) addSet(s nftables.Set, elems []nftables.SetElement, anon map[uint32]string) error {
	if s.Anonymous {
		name := fmt.Sprintf("__set%d", t.anon)
		t.anon++
		anon[s.ID] = name
		s.Name = name
	}
	id := s.ID
	s.ID = 0
	if strings.HasPrefix(s.Comment, typeofMark) {
		s.Comment = "" // user data the batch sender swaps in; GetSets shows no comment
	}
	fs := t.sets[s.Name]
	switch {
	case fs == nil:
		fs = &fakeSet{set: s, elems: map[string]nftables.SetElement{}}
		t.sets[s.Name] = fs
	case declDiffers(&s, &fs.set) != "" || s.Dynamic != fs.set.Dynamic:
		return unix.EEXIST
	}
	if id != 0 && !s.Anonymous {
		anon[id] = s.Name
	}
	return t.addElems(fs, elems)
}

func (t *fakeTable) addElems(s *fakeSet, elems []nftables.SetElement) error {
	for _, e := range elems {
		if n := int(s.set.KeyType.Bytes); n > 0 && !e.IntervalEnd && len(e.Key) != n && !(s.set.IsMap && s.set.KeyType.Name == nftables.TypeVerdict.Name) {
			return unix.EINVAL
		}
		if s.set.IsMap && !e.IntervalEnd {
			if e.VerdictData == nil && len(e.Val) == 0 {
				return unix.EINVAL // a map's element needs data
			}
			if err := t.jumpTarget(e.VerdictData); err != nil {
				return err
			}
		}
		e.Val = slices.Clone(e.Val)
		if e.VerdictData != nil {
			v := *e.VerdictData
			e.VerdictData, e.Val = &v, nil
		}
		k := fakeElemKey(e)
		if have, ok := s.elems[k]; ok && ElementKey(have) != ElementKey(e) {
			return unix.EEXIST // the key is there, with other data
		}
		s.elems[k] = e
	}
	return nil
}

// fakeElemKey identifies an element in its set: its key, key end and
// interval end flag.
func fakeElemKey(e nftables.SetElement) string {
	k := hex.EncodeToString(e.Key)
	if len(e.KeyEnd) > 0 {
		k += "-" + hex.EncodeToString(e.KeyEnd)
	}
	if e.IntervalEnd {
		k += " end"
	}
	return k
}
