package nft

import (
	"cmp"
	"encoding/binary"
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
// fake: it keeps tables, chains with their rules, sets and maps with their
// elements, and runs a batch as the kernel runs a transaction: every
// operation in order, all of them or, at the first one the kernel would
// refuse, none (the state stays as it was). A batch is queued into
// google/nftables and staged as System stages it (batch.go), and the Fake
// reads the messages as the kernel would, with the decoders that read the
// kernel's dumps (dump.go): what it holds is what the kernel was sent. It
// refuses, with the kernel's errors, what netspec could send wrongly: a
// rule or map element that jumps to a missing chain, a rule that looks up
// a missing set, elements of a missing set, deleting or flushing a
// missing object, deleting a chain that is jumped to (its own rules go
// with it, as in the kernel) or a set a rule uses, a set declared again
// differently, an element added again with other data, a base chain's
// hook changed in place. Adding a table, chain, set or element that
// exists as it is changes nothing, as NEW* messages without NLM_F_EXCL
// do. TestFakeRefusesAsKernel checks these answers against the kernel's.
//
// Tests inspect it with Dump and the Kernel reads, drift it with Run (as
// someone running nft by hand), and make a batch fail with FailNext.
// Make it with NewFake.
type Fake struct {
	mu       sync.Mutex
	tables   map[tableKey]*fakeTable
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

// fakeRule is a rule as the kernel keeps it: its expressions, as a dump
// reads them, and what they refer to.
type fakeRule struct {
	KernelRule
	// uses are the chains it jumps to ("chain NAME") and the sets it looks
	// up ("set NAME"; anonymous sets included).
	uses []string
	anon string // the anonymous set the rule owns: deleted with it
}

type fakeSet struct {
	set   nftables.Set // as GetSets reads it; Table nil, ID 0
	elems map[string]nftables.SetElement
}

// NewFake returns a Fake without tables.
func NewFake() *Fake { return &Fake{tables: map[tableKey]*fakeTable{}} }

// FailNext makes the next batch fail with ErrFakeFailure, changing
// nothing, as a batch the kernel refuses.
func (f *Fake) FailNext() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failNext = true
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

func (f *Fake) tableKeys() []tableKey {
	return slices.SortedFunc(maps.Keys(f.tables), func(a, b tableKey) int {
		return cmp.Or(cmp.Compare(a.fam, b.fam), strings.Compare(a.name, b.name))
	})
}

// Sets implements Kernel.
func (f *Fake) Sets(t *nftables.Table) ([]*nftables.Set, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft, ok := f.tables[tableKey{t.Family, t.Name}]
	if !ok {
		return nil, unix.ENOENT
	}
	var out []*nftables.Set
	for _, name := range slices.Sorted(maps.Keys(ft.sets)) {
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
	ft := f.tables[tableKey{fam, table}]
	if ft == nil || ft.sets[set] == nil {
		return nil, unix.ENOENT
	}
	fs := ft.sets[set]
	var out []nftables.SetElement
	for _, k := range slices.Sorted(maps.Keys(fs.elems)) {
		out = append(out, fs.elems[k])
	}
	return out, nil
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
		for _, name := range slices.Sorted(maps.Keys(ft.chains)) {
			c := ft.chains[name].chain
			c.Table = &ft.table
			out = append(out, &c)
		}
	}
	return out, nil
}

// Rules implements Kernel.
func (f *Fake) Rules(fam nftables.TableFamily, table, chain string) (map[string][]KernelRule, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft := f.tables[tableKey{fam, table}]
	if ft == nil || chain != "" && ft.chains[chain] == nil {
		return nil, unix.ENOENT
	}
	out := map[string][]KernelRule{}
	for name, fc := range ft.chains {
		if chain != "" && name != chain {
			continue
		}
		for _, r := range fc.rules {
			out[name] = append(out[name], r.KernelRule)
		}
	}
	return out, nil
}

// Run implements Kernel: the batch is staged as System stages it, and its
// messages are applied to a copy of the state, which replaces the state
// only when every one of them succeeded.
func (f *Fake) Run(queue func(Batch) error) error {
	f.mu.Lock()
	f.sent = nil
	f.mu.Unlock()
	s := &batchSender{}
	s.stage()
	c, err := s.nftConn()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	b := &stagingBatch{Conn: c, sender: s}
	if err := queue(b); err != nil {
		return err
	}
	if err := b.flush(); err != nil {
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
	var ops []string
	anon := map[uint32]string{} // batch ID of a set -> its name in the table
	err = eachMessage(s.staged.chunks, func(typ uint16, fam nftables.TableFamily, attrs []byte) error {
		op, err := next.apply(typ, fam, attrs, anon)
		ops = append(ops, op)
		if err != nil {
			return fmt.Errorf("batch operation %d (%s): %w", len(ops), op, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sent, err := decodeSent(s.staged.chunks)
	if err != nil {
		return err
	}
	f.tables, f.sent, f.last = next.tables, sent, ops
	f.batches++
	return nil
}

// Sent implements Kernel: what the last batch applied sent, decoded as
// System decodes it.
func (f *Fake) Sent(fam nftables.TableFamily, table string) (*sentTable, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sent[tableKey{fam, table}], nil
}

// clone copies the state deep enough that a batch applied to the copy
// leaves f alone (rules are never changed in place).
func (f *Fake) clone() *Fake {
	c := &Fake{tables: make(map[tableKey]*fakeTable, len(f.tables))}
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
		for _, name := range slices.Sorted(maps.Keys(t.chains)) {
			c := t.chains[name]
			fmt.Fprintf(&b, "\tchain %s", name)
			if h, p := c.chain.Hooknum, c.chain.Priority; h != nil && p != nil {
				fmt.Fprintf(&b, " (type %s hook %d priority %d)", c.chain.Type, *h, *p)
			}
			fmt.Fprintf(&b, ": %d rules\n", len(c.rules))
		}
		for _, name := range slices.Sorted(maps.Keys(t.sets)) {
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

// fakeOps names the messages a batch holds, as LastBatch lists them.
var fakeOps = map[uint16]string{
	unix.NFT_MSG_NEWTABLE: "add table", unix.NFT_MSG_DELTABLE: "delete table",
	unix.NFT_MSG_NEWCHAIN: "add chain", unix.NFT_MSG_DELRULE: "flush chain", unix.NFT_MSG_DELCHAIN: "delete chain",
	unix.NFT_MSG_NEWRULE: "add rule", unix.NFT_MSG_NEWSET: "add set", unix.NFT_MSG_NEWSETELEM: "add element",
	unix.NFT_MSG_DELSETELEM: "delete element", unix.NFT_MSG_DELSET: "delete set",
}

// objectAttr is the attribute that names the object of a message of each
// type, after its table (attribute 1 of each).
var objectAttr = map[uint16]uint16{
	unix.NFT_MSG_NEWCHAIN: unix.NFTA_CHAIN_NAME, unix.NFT_MSG_DELCHAIN: unix.NFTA_CHAIN_NAME,
	unix.NFT_MSG_NEWRULE: unix.NFTA_RULE_CHAIN, unix.NFT_MSG_DELRULE: unix.NFTA_RULE_CHAIN,
	unix.NFT_MSG_NEWSET: unix.NFTA_SET_NAME, unix.NFT_MSG_DELSET: unix.NFTA_SET_NAME,
	unix.NFT_MSG_NEWSETELEM: unix.NFTA_SET_ELEM_LIST_SET, unix.NFT_MSG_DELSETELEM: unix.NFTA_SET_ELEM_LIST_SET,
}

// apply carries out the message of type typ with attributes attrs on f,
// the copy of a Fake's state that a batch changes, and names it (op);
// anon maps the batch IDs of the sets created so far to their names in
// the table.
func (f *Fake) apply(typ uint16, fam nftables.TableFamily, attrs []byte, anon map[uint32]string) (op string, err error) {
	table, err := stringAttr(attrs, unix.NFTA_TABLE_NAME)
	if err != nil {
		return "", err
	}
	name, _ := stringAttr(attrs, objectAttr[typ])
	list, _ := attr(attrs, unix.NFTA_SET_ELEM_LIST_ELEMENTS) // of an element list
	op = fakeOps[typ] + " " + familyName(fam) + " " + table
	if typ == unix.NFT_MSG_DELSETELEM && list == nil {
		op = "flush set " + familyName(fam) + " " + table
	}
	if name != "" {
		op += " " + name
	}
	key := tableKey{fam, table}
	t := f.tables[key]
	switch {
	case typ == unix.NFT_MSG_NEWTABLE && t == nil:
		f.tables[key] = &fakeTable{table: nftables.Table{Family: fam, Name: table}, chains: map[string]*fakeChain{}, sets: map[string]*fakeSet{}}
		return op, nil
	case typ == unix.NFT_MSG_NEWTABLE:
		return op, nil
	case t == nil:
		return op, unix.ENOENT
	}
	switch typ {
	case unix.NFT_MSG_DELTABLE:
		delete(f.tables, key)
	case unix.NFT_MSG_NEWCHAIN:
		c, err := parseChain(fam, attrs, map[string]*nftables.Table{})
		if err != nil {
			return op, fmt.Errorf("%w: %v", unix.EINVAL, err)
		}
		c.Table = nil
		return op, t.addChain(*c)
	case unix.NFT_MSG_DELRULE:
		c := t.chains[name]
		if c == nil {
			return op, unix.ENOENT
		}
		t.dropRules(c)
	case unix.NFT_MSG_DELCHAIN:
		// Its rules go with it (google/nftables does not ask for
		// NLM_F_NONREC); a jump to it from elsewhere keeps it.
		c := t.chains[name]
		if c == nil {
			return op, unix.ENOENT
		}
		rules := c.rules
		c.rules = nil
		if t.used("chain " + name) {
			return op, unix.EBUSY
		}
		t.dropRules(&fakeChain{rules: rules})
		delete(t.chains, name)
	case unix.NFT_MSG_NEWRULE:
		_, r, err := parseRule(byte(fam), attrs)
		if err != nil {
			return op, fmt.Errorf("%w: %v", unix.EINVAL, err)
		}
		return op, t.addRule(name, r, anon)
	case unix.NFT_MSG_NEWSET:
		s, err := parseSet(fam, attrs)
		if err != nil {
			return op, fmt.Errorf("%w: %v", unix.EINVAL, err)
		}
		return op, t.addSet(s, anon)
	case unix.NFT_MSG_NEWSETELEM, unix.NFT_MSG_DELSETELEM, unix.NFT_MSG_DELSET:
		if id, _ := attr(attrs, unix.NFTA_SET_ELEM_LIST_SET_ID); t.sets[name] == nil && len(id) == 4 {
			// The kernel finds a set of the batch by its ID.
			name = cmp.Or(anon[binary.BigEndian.Uint32(id)], name)
		}
		s := t.sets[name]
		if s == nil {
			return op, unix.ENOENT
		}
		if typ == unix.NFT_MSG_DELSET {
			if t.used("set " + name) {
				return op, unix.EBUSY
			}
			delete(t.sets, name)
			return op, nil
		}
		elems, err := appendElements(nil, attrs)
		if err != nil {
			return op, fmt.Errorf("%w: %v", unix.EINVAL, err)
		}
		if typ == unix.NFT_MSG_NEWSETELEM {
			return op, t.addElems(s, elems)
		}
		if list == nil {
			clear(s.elems)
		}
		for _, e := range elems {
			k := fakeElemKey(e)
			if _, ok := s.elems[k]; !ok {
				return op, unix.ENOENT
			}
			delete(s.elems, k)
		}
	}
	return op, nil
}

// parseSet reads a NEWSET message's attributes as System's Sets reads the
// kernel's dump (google/nftables' GetSets), through a connection whose
// only answer is that message.
func parseSet(fam nftables.TableFamily, attrs []byte) (*nftables.Set, error) {
	msg := netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_NEWSET)},
		Data:   append([]byte{byte(fam), unix.NFNETLINK_V0, 0, 0}, attrs...),
	}
	c, err := nftables.New(nftables.WithTestDial(func([]netlink.Message) ([]netlink.Message, error) {
		return []netlink.Message{msg}, nil
	}))
	if err != nil {
		return nil, err
	}
	sets, err := c.GetSets(&nftables.Table{Family: fam})
	if err != nil || len(sets) != 1 {
		return nil, fmt.Errorf("set message: %d sets, %v", len(sets), err)
	}
	return sets[0], nil
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

// dropRules empties a chain, with the anonymous sets its rules own.
func (t *fakeTable) dropRules(c *fakeChain) {
	for _, r := range c.rules {
		if r.anon != "" {
			delete(t.sets, r.anon)
		}
	}
	c.rules = nil
}

// used tells whether a rule uses what ref names ("chain NAME", "set
// NAME"), or, for a chain, a map element jumps to it.
func (t *fakeTable) used(ref string) bool {
	for _, c := range t.chains {
		for _, r := range c.rules {
			if slices.Contains(r.uses, ref) {
				return true
			}
		}
	}
	for _, s := range t.sets {
		for _, e := range s.elems {
			if v := s.verdict(e); v != nil && "chain "+v.Chain == ref {
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

func (t *fakeTable) addRule(chain string, kr KernelRule, anon map[uint32]string) error {
	c := t.chains[chain]
	if c == nil {
		return unix.ENOENT
	}
	r := fakeRule{KernelRule: kr}
	// refer finds the set a lookup or a dynset names, or a set of this
	// batch by its ID, and names it as the kernel does.
	refer := func(name *string, id *uint32) error {
		if t.sets[*name] == nil {
			if *id == 0 || anon[*id] == "" {
				return unix.ENOENT
			}
			*name = anon[*id]
		}
		*id = 0
		r.uses = append(r.uses, "set "+*name)
		return nil
	}
	for _, e := range kr.Exprs {
		var err error
		switch x := e.(type) {
		case *expr.Verdict:
			err = t.jumpTarget(x)
			if x.Kind == expr.VerdictJump || x.Kind == expr.VerdictGoto {
				r.uses = append(r.uses, "chain "+x.Chain)
			}
		case *expr.Lookup:
			if err = refer(&x.SetName, &x.SetID); err == nil && t.sets[x.SetName].set.Anonymous {
				r.anon = x.SetName
			}
		case *expr.Dynset:
			err = refer(&x.SetName, &x.SetID)
		}
		if err != nil {
			return err
		}
	}
	c.rules = append(c.rules, r)
	return nil
}

func (t *fakeTable) addSet(s *nftables.Set, anon map[uint32]string) error {
	if s.Anonymous {
		s.Name = fmt.Sprintf("__set%d", t.anon)
		t.anon++
	}
	if s.ID != 0 {
		anon[s.ID] = s.Name
	}
	s.ID, s.Table = 0, nil
	switch fs := t.sets[s.Name]; {
	case fs == nil:
		t.sets[s.Name] = &fakeSet{set: *s, elems: map[string]nftables.SetElement{}}
	case declDiffers(s, &fs.set) != "" || s.Dynamic != fs.set.Dynamic:
		return unix.EEXIST
	}
	return nil
}

func (t *fakeTable) addElems(s *fakeSet, elems []nftables.SetElement) error {
	for _, e := range elems {
		if n := int(s.set.KeyType.Bytes); n > 0 && !e.IntervalEnd && len(e.Key) != n && !(s.set.IsMap && s.set.KeyType.Name == nftables.TypeVerdict.Name) {
			return unix.EINVAL
		}
		if s.set.IsMap && !e.IntervalEnd {
			if len(e.Val) == 0 {
				return unix.EINVAL // a map's element needs data
			}
			if err := t.jumpTarget(s.verdict(e)); err != nil {
				return err
			}
		}
		k := fakeElemKey(e)
		if have, ok := s.elems[k]; ok && ElementKey(have) != ElementKey(e) {
			return unix.EEXIST // the key is there, with other data
		}
		s.elems[k] = e
	}
	return nil
}

// verdict is the verdict of an element of a verdict map (nil: none), as
// the kernel dumps it: its attributes in Val.
func (s *fakeSet) verdict(e nftables.SetElement) *expr.Verdict {
	if !s.set.IsMap || s.set.KeyType.Name != nftables.TypeVerdict.Name {
		return nil
	}
	return decodeVerdict(e.Val)
}

// fakeElemKey identifies an element in its set: its key, key end and
// interval end flag, as ElementKey writes them.
func fakeElemKey(e nftables.SetElement) string {
	return ElementKey(nftables.SetElement{Key: e.Key, KeyEnd: e.KeyEnd, IntervalEnd: e.IntervalEnd})
}
