package nft

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// These tests run the sync logic against the Fake: no root needed. The
// same logic against the real kernel is tested in sync_test.go, and
// TestFakeRefusesAsKernel checks that the Fake refuses what the kernel
// refuses.

func fakeApplier(t *testing.T) (*Fake, *encodedApplier) {
	t.Helper()
	f := NewFake()
	a := newEncoded(f)
	t.Cleanup(func() { a.Close() })
	return f, a
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

// drift runs one batch on the Fake, as someone running nft by hand.
func drift(t *testing.T, f *Fake, queue func(b Batch)) {
	t.Helper()
	if err := f.Run(func(b Batch) error { queue(b); return nil }); err != nil {
		t.Fatalf("drift: %v", err)
	}
}

var (
	ipNetspec  = &nftables.Table{Family: nftables.TableFamilyIPv4, Name: TableName}
	ip6Netspec = &nftables.Table{Family: nftables.TableFamilyIPv6, Name: TableName}
)

func chainIn(t *nftables.Table, name string) *nftables.Chain {
	return &nftables.Chain{Table: t, Name: name}
}

// firstChain is the name of the first regular chain of the table ip of rs
// whose name starts with prefix and that has rules.
func firstChain(t *testing.T, rs *Ruleset, prefix string) string {
	t.Helper()
	for _, ch := range rs.Tables[0].Chains {
		if ch.Base == nil && strings.HasPrefix(ch.Name, prefix) && len(ch.Rules) > 0 {
			return ch.Name
		}
	}
	t.Fatalf("no chain %s* with rules", prefix)
	return ""
}

// TestFakeFirstInstall: on an empty kernel, Plan says the tables are
// missing and changes nothing; Apply creates them in one batch; then
// there is nothing to do, and nothing is sent.
func TestFakeFirstInstall(t *testing.T) {
	for _, path := range []string{"basic/node-1/nftables.nft", "kitchen-sink/node-1/nftables.nft", "cue/node-1/nftables.nft"} {
		t.Run(path, func(t *testing.T) {
			f, a := fakeApplier(t)
			rs := goldenRuleset(t, path)
			ch, err := a.plan(rs)
			if err != nil {
				t.Fatal(err)
			}
			if f.Dump() != "" || f.Batches() != 0 {
				t.Fatalf("plan changed the kernel:\n%s", f.Dump())
			}
			for i, tc := range ch.Tables {
				if !tc.Replace || tc.Reason != ReasonMissing {
					t.Errorf("plan: table %d: %s, want a replace of the missing table", i, counts(ch))
				}
			}
			if ch, err = a.apply(rs); err != nil {
				t.Fatal(err)
			}
			if !ch.Tables[0].Replace || f.Batches() != 1 {
				t.Errorf("apply: %s in %d batches, want one replace", counts(ch), f.Batches())
			}
			// Every chain and set of the ruleset is in the kernel.
			dump := f.Dump()
			for _, tb := range rs.Tables {
				for _, c := range tb.Chains {
					if !strings.Contains(dump, "\tchain "+c.Name) {
						t.Errorf("chain %s missing from the kernel", c.Name)
					}
				}
				for _, s := range tb.Sets {
					if !strings.Contains(dump, " "+s.Name+":") && !strings.Contains(dump, " "+s.Name+" (") {
						t.Errorf("set %s missing from the kernel", s.Name)
					}
				}
			}
			for _, sync := range []func(*Ruleset) (*Changes, error){a.plan, a.apply, a.update} {
				if ch, err := sync(rs); err != nil || !ch.Empty() {
					t.Fatalf("after the install: %v %s, want no changes", err, counts(ch))
				}
			}
			if f.Batches() != 1 {
				t.Errorf("%d batches, want none after the install", f.Batches()-1)
			}
		})
	}
}

// TestFakeSyncByDifference: moving between rulesets sends what differs,
// by Apply (read back) as by Update (diffed against the last), and leaves
// the kernel as a fresh install would.
func TestFakeSyncByDifference(t *testing.T) {
	basic1 := goldenRuleset(t, "basic/node-1/nftables.nft")
	basic2 := goldenRuleset(t, "basic/node-2/nftables.nft")
	ks1 := goldenRuleset(t, "kitchen-sink/node-1/nftables.nft")
	ks2 := goldenRuleset(t, "kitchen-sink/node-2/nftables.nft")
	for _, tc := range []struct {
		name     string
		from, to *Ruleset
		update   bool
		// check is the change expected of table ip.
		check func(c TableChanges) bool
		want  string
	}{
		{
			name: "apply other node of a tree", from: basic1, to: basic2,
			check: func(c TableChanges) bool { return !c.Replace && len(c.ChainsAdded) == 0 && !c.Empty() },
			want:  "chains rewritten in place",
		},
		{
			name: "update other node of a tree", from: ks1, to: ks2, update: true,
			check: func(c TableChanges) bool {
				return !c.Replace && len(c.ChainsChanged)+len(c.ChainsAdded)+len(c.ChainsRemoved) == 0 && len(c.ElementsAdded) > 0
			},
			want: "elements of endpoint maps only",
		},
		{
			name: "apply a bigger ruleset", from: basic1, to: ks1,
			check: func(c TableChanges) bool { return !c.Empty() },
			want:  "changes",
		},
		{
			name: "update to a smaller ruleset", from: ks1, to: basic1, update: true,
			check: func(c TableChanges) bool { return !c.Empty() },
			want:  "changes",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, a := fakeApplier(t)
			if _, err := a.apply(tc.from); err != nil {
				t.Fatal(err)
			}
			sync := a.apply
			if tc.update {
				sync = a.update
			}
			ch, err := sync(tc.to)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(ch.Tables[0]) {
				t.Errorf("%s, want %s", counts(ch), tc.want)
			}
			if f.Batches() != 2 {
				t.Errorf("%d batches, want 2 (one per sync)", f.Batches())
			}
			if tc.update {
				// Update sends only what changed: no rule of a chain that
				// is neither new nor changed.
				written := map[string]bool{}
				for _, tch := range ch.Tables {
					for _, c := range slices.Concat(tch.ChainsAdded, tch.ChainsChanged) {
						written["add rule "+tch.Family+" netspec "+c] = true
					}
				}
				for _, op := range f.LastBatch() {
					if strings.HasPrefix(op, "add rule") && !written[op] {
						t.Errorf("update sent %q, a rule of a chain that did not change", op)
					}
				}
			}
			if ch, err := a.plan(tc.to); err != nil || !ch.Empty() {
				t.Fatalf("after the sync the kernel differs: %v %s", err, counts(ch))
			}
			// The same state as a fresh install.
			g, b := fakeApplier(t)
			if _, err := b.apply(tc.to); err != nil {
				t.Fatal(err)
			}
			if got, want := f.Dump(), g.Dump(); got != want {
				t.Errorf("after the sync the kernel holds\n%s\nbut a fresh install\n%s", got, want)
			}
		})
	}
}

// TestFakeRepairsDrift changes the kernel behind the applier's back in
// every way drift can take, and checks that Plan sees it and Apply puts it
// right (TestApplyRepairsDrift does the same with nft in a namespace).
func TestFakeRepairsDrift(t *testing.T) {
	rs := goldenRuleset(t, "kitchen-sink/node-1/nftables.nft")
	svcChain := firstChain(t, rs, "service-")
	for _, tc := range []struct {
		name  string
		drift func(b Batch)
		want  string // in counts of the plan
	}{
		{"rule deleted", func(b Batch) { b.FlushChain(chainIn(ipNetspec, svcChain)) }, "~1"},
		{"rule added", func(b Batch) {
			b.AddRule(&nftables.Rule{Table: ipNetspec, Chain: chainIn(ipNetspec, "services"), Exprs: []expr.Any{&expr.Counter{}, &expr.Verdict{Kind: expr.VerdictAccept}}})
		}, "~1"},
		{"chain added", func(b Batch) { b.AddChain(chainIn(ipNetspec, "by-hand")) }, "-1"},
		{"base chain deleted", func(b Batch) { b.DelChain(chainIn(ipNetspec, "filter-output-pre-dnat")) }, "replace=true"},
		{"element deleted", func(b Batch) { b.FlushSet(&nftables.Set{Table: ipNetspec, Name: "service-ips"}) }, "elements +"},
		{"ip6 table deleted", func(b Batch) { b.DelTable(ip6Netspec) }, "ip6 replace=true"},
		{"set added", func(b Batch) {
			b.AddSet(&nftables.Set{Table: ipNetspec, Name: "by-hand", KeyType: nftables.TypeIPAddr}, nil)
		}, "sets +0 -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, a := fakeApplier(t)
			if _, err := a.apply(rs); err != nil {
				t.Fatal(err)
			}
			before := f.Dump()
			drift(t, f, tc.drift)
			ch, err := a.plan(rs)
			if err != nil {
				t.Fatal(err)
			}
			if ch.Empty() || !strings.Contains(counts(ch), tc.want) {
				t.Errorf("plan after drift: %s, want it to contain %q", counts(ch), tc.want)
			}
			// Update trusts what it installed: only Apply reads the drift.
			if ch, err := a.update(rs); err != nil || !ch.Empty() {
				t.Errorf("update after drift: %v %s, want no changes (it does not read the kernel back)", err, counts(ch))
			}
			if _, err := a.apply(rs); err != nil {
				t.Fatal(err)
			}
			if ch, err := a.plan(rs); err != nil || !ch.Empty() {
				t.Fatalf("plan after repair: %v %s", err, counts(ch))
			}
			if got := f.Dump(); got != before {
				t.Errorf("after repair the kernel holds\n%s\nwant\n%s", got, before)
			}
		})
	}
}

// TestFakeFailedBatch: a batch the kernel refuses changes nothing, the
// error says so, and the next sync replaces the tables whole and
// converges; by Apply as by Update.
func TestFakeFailedBatch(t *testing.T) {
	good := goldenRuleset(t, "basic/node-1/nftables.nft")
	next := goldenRuleset(t, "kitchen-sink/node-1/nftables.nft")
	for _, tc := range []struct {
		name   string
		update bool
	}{
		{name: "apply"},
		{name: "update", update: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, a := fakeApplier(t)
			sync := a.apply
			if tc.update {
				sync = a.update
			}
			if _, err := sync(good); err != nil {
				t.Fatal(err)
			}
			before := f.Dump()
			f.FailNext()
			_, err := sync(next)
			if err == nil || !strings.Contains(err.Error(), "nothing was changed") || !errors.Is(err, ErrFakeFailure) {
				t.Fatalf("sync of a refused batch: %v, want an error saying nothing was changed", err)
			}
			if got := f.Dump(); got != before {
				t.Fatalf("the refused batch changed the kernel:\n%s\nwas\n%s", got, before)
			}
			if ch, err := newEncoded(f).plan(good); err != nil || !ch.Empty() {
				t.Fatalf("after the refused batch the kernel no longer holds the last good ruleset: %v %s", err, counts(ch))
			}
			ch, err := sync(next)
			if err != nil {
				t.Fatal(err)
			}
			if !ch.Tables[0].Replace || !strings.Contains(ch.Tables[0].Reason, "refused") {
				t.Errorf("the sync after a refused batch: %s (%s), want the tables replaced whole", counts(ch), ch.Tables[0].Reason)
			}
			if ch, err := a.plan(next); err != nil || !ch.Empty() {
				t.Fatalf("the sync after the refused batch did not converge: %v %s", err, counts(ch))
			}
		})
	}
}

// droppingKernel is a Fake that loses the elements of one set, as
// google/nftables v0.3.0 has been seen to do: the read-back must catch it.
type droppingKernel struct {
	*Fake
	set string
}

func (k droppingKernel) Run(queue func(Batch) error) error {
	return k.Fake.Run(func(b Batch) error { return queue(droppingBatch{b, k.set}) })
}

type droppingBatch struct {
	Batch
	set string
}

func (b droppingBatch) SetAddElements(s *nftables.Set, elems []nftables.SetElement) error {
	if s.Name == b.set {
		return nil
	}
	return b.Batch.SetAddElements(s, elems)
}

// TestFakeVerifyCatchesLoss: when the kernel does not hold what it
// acknowledged, Apply and Update fail, and the next Update reads the
// kernel back rather than trust what it sent.
func TestFakeVerifyCatchesLoss(t *testing.T) {
	rs := goldenRuleset(t, "kitchen-sink/node-1/nftables.nft")
	for _, update := range []bool{false, true} {
		f := NewFake()
		a := newEncoded(droppingKernel{f, "service-ips"})
		sync := a.apply
		if update {
			sync = a.update
		}
		_, err := sync(rs)
		if err == nil || !strings.Contains(err.Error(), "verify") {
			t.Fatalf("update=%t: sync with lost elements: %v, want a verify error", update, err)
		}
		if a.last != nil {
			t.Errorf("update=%t: the applier trusts a ruleset the kernel does not hold", update)
		}
	}
}

// TestFakeCleanup: Cleanup deletes netspec's tables in one batch and
// leaves others; with none, it sends nothing.
func TestFakeCleanup(t *testing.T) {
	f, a := fakeApplier(t)
	if _, err := a.Apply(goldenModel(t, "kitchen-sink/node-1/nftables.nft")); err != nil {
		t.Fatal(err)
	}
	drift(t, f, func(b Batch) { b.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: "bystander"}) })
	batches := f.Batches()
	deleted, err := a.Cleanup()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"ip netspec", "ip6 netspec"}; !slices.Equal(deleted, want) {
		t.Errorf("cleanup deleted %q, want %q", deleted, want)
	}
	if got := f.Dump(); got != "table inet bystander\n" {
		t.Errorf("after cleanup the kernel holds:\n%s", got)
	}
	if f.Batches() != batches+1 {
		t.Errorf("cleanup sent %d batches, want 1", f.Batches()-batches)
	}
	if deleted, err := a.Cleanup(); err != nil || len(deleted) != 0 || f.Batches() != batches+1 {
		t.Errorf("second cleanup: %q %v, %d batches, want nothing", deleted, err, f.Batches()-batches-1)
	}
	if ch, err := a.Update(goldenModel(t, "basic/node-1/nftables.nft")); err != nil || !ch.Tables[0].Replace {
		t.Errorf("update after cleanup: %v %s, want the tables installed again", err, counts(ch))
	}
}

// refusals are batches the kernel refuses (errno), each after a valid
// setup batch, and look-alikes it accepts (errno 0). TestFakeRefuses runs
// them against the Fake, TestFakeRefusesAsKernel against the kernel.
var refusals = []struct {
	name  string
	setup func(b Batch)
	bad   func(b Batch)
	errno unix.Errno
}{
	{
		name:  "accepted: add an existing table, chain and set again",
		setup: func(b Batch) { b.AddTable(ipNetspec); b.AddChain(chainIn(ipNetspec, "a")) },
		bad: func(b Batch) {
			b.AddTable(ipNetspec)
			b.AddChain(chainIn(ipNetspec, "a"))
			b.AddSet(&nftables.Set{Table: ipNetspec, Name: "s", KeyType: nftables.TypeIPAddr}, nil)
			b.AddSet(&nftables.Set{Table: ipNetspec, Name: "s", KeyType: nftables.TypeIPAddr}, nil)
		},
	},
	{
		name: "accepted: add an element again with the same data",
		setup: func(b Batch) {
			b.AddTable(ipNetspec)
			b.AddChain(chainIn(ipNetspec, "a"))
			b.AddSet(&nftables.Set{Table: ipNetspec, Name: "m", IsMap: true, KeyType: nftables.TypeIPAddr, DataType: nftables.TypeVerdict},
				[]nftables.SetElement{{Key: []byte{10, 0, 0, 1}, VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: "a"}}})
		},
		bad: func(b Batch) {
			b.SetAddElements(&nftables.Set{Table: ipNetspec, Name: "m", IsMap: true, KeyType: nftables.TypeIPAddr, DataType: nftables.TypeVerdict},
				[]nftables.SetElement{{Key: []byte{10, 0, 0, 1}, VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: "a"}}})
		},
	},
	{
		name: "accepted: delete a chain with rules, and the chain it alone jumped to",
		setup: func(b Batch) {
			b.AddTable(ipNetspec)
			b.AddChain(chainIn(ipNetspec, "a"))
			b.AddChain(chainIn(ipNetspec, "b"))
			b.AddRule(&nftables.Rule{Table: ipNetspec, Chain: chainIn(ipNetspec, "a"), Exprs: []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: "b"}}})
		},
		bad: func(b Batch) { b.DelChain(chainIn(ipNetspec, "a")); b.DelChain(chainIn(ipNetspec, "b")) },
	},
	{
		name:  "rule jumps to a missing chain",
		setup: func(b Batch) { b.AddTable(ipNetspec); b.AddChain(chainIn(ipNetspec, "a")) },
		bad: func(b Batch) {
			b.AddRule(&nftables.Rule{Table: ipNetspec, Chain: chainIn(ipNetspec, "a"), Exprs: []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: "missing"}}})
		},
		errno: unix.ENOENT,
	},
	{
		name:  "rule in a missing chain",
		setup: func(b Batch) { b.AddTable(ipNetspec) },
		bad: func(b Batch) {
			b.AddRule(&nftables.Rule{Table: ipNetspec, Chain: chainIn(ipNetspec, "missing"), Exprs: []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}}})
		},
		errno: unix.ENOENT,
	},
	{
		name:  "rule looks up a missing set",
		setup: func(b Batch) { b.AddTable(ipNetspec); b.AddChain(chainIn(ipNetspec, "a")) },
		bad: func(b Batch) {
			b.AddRule(&nftables.Rule{Table: ipNetspec, Chain: chainIn(ipNetspec, "a"), Exprs: []expr.Any{
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
				&expr.Lookup{SourceRegister: 1, SetName: "missing"},
			}})
		},
		errno: unix.ENOENT,
	},
	{
		name:  "element of a missing set",
		setup: func(b Batch) { b.AddTable(ipNetspec) },
		bad: func(b Batch) {
			b.SetAddElements(&nftables.Set{Table: ipNetspec, Name: "missing", KeyType: nftables.TypeIPAddr}, []nftables.SetElement{{Key: []byte{10, 0, 0, 1}}})
		},
		errno: unix.ENOENT,
	},
	{
		name: "map element goes to a missing chain",
		setup: func(b Batch) {
			b.AddTable(ipNetspec)
			b.AddSet(&nftables.Set{Table: ipNetspec, Name: "m", IsMap: true, KeyType: nftables.TypeIPAddr, DataType: nftables.TypeVerdict}, nil)
		},
		bad: func(b Batch) {
			b.SetAddElements(&nftables.Set{Table: ipNetspec, Name: "m", IsMap: true, KeyType: nftables.TypeIPAddr, DataType: nftables.TypeVerdict},
				[]nftables.SetElement{{Key: []byte{10, 0, 0, 1}, VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: "missing"}}})
		},
		errno: unix.ENOENT,
	},
	{
		name:  "delete a missing table",
		setup: func(b Batch) { b.AddTable(ipNetspec) },
		bad:   func(b Batch) { b.DelTable(ip6Netspec) },
		errno: unix.ENOENT,
	},
	{
		name:  "delete a missing chain",
		setup: func(b Batch) { b.AddTable(ipNetspec) },
		bad:   func(b Batch) { b.DelChain(chainIn(ipNetspec, "missing")) },
		errno: unix.ENOENT,
	},
	{
		name:  "flush a missing chain",
		setup: func(b Batch) { b.AddTable(ipNetspec) },
		bad:   func(b Batch) { b.FlushChain(chainIn(ipNetspec, "missing")) },
		errno: unix.ENOENT,
	},
	{
		name:  "delete a missing set",
		setup: func(b Batch) { b.AddTable(ipNetspec) },
		bad:   func(b Batch) { b.DelSet(&nftables.Set{Table: ipNetspec, Name: "missing"}) },
		errno: unix.ENOENT,
	},
	{
		name: "delete a missing element",
		setup: func(b Batch) {
			b.AddTable(ipNetspec)
			b.AddSet(&nftables.Set{Table: ipNetspec, Name: "s", KeyType: nftables.TypeIPAddr}, []nftables.SetElement{{Key: []byte{10, 0, 0, 1}}})
		},
		bad: func(b Batch) {
			b.SetDeleteElements(&nftables.Set{Table: ipNetspec, Name: "s", KeyType: nftables.TypeIPAddr}, []nftables.SetElement{{Key: []byte{10, 0, 0, 2}}})
		},
		errno: unix.ENOENT,
	},
	{
		name: "delete a chain that is jumped to",
		setup: func(b Batch) {
			b.AddTable(ipNetspec)
			b.AddChain(chainIn(ipNetspec, "a"))
			b.AddChain(chainIn(ipNetspec, "b"))
			b.AddRule(&nftables.Rule{Table: ipNetspec, Chain: chainIn(ipNetspec, "a"), Exprs: []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: "b"}}})
		},
		bad:   func(b Batch) { b.DelChain(chainIn(ipNetspec, "b")) },
		errno: unix.EBUSY,
	},
	{
		name: "delete a set a rule uses",
		setup: func(b Batch) {
			b.AddTable(ipNetspec)
			b.AddChain(chainIn(ipNetspec, "a"))
			b.AddSet(&nftables.Set{Table: ipNetspec, Name: "s", KeyType: nftables.TypeIPAddr}, nil)
			b.AddRule(&nftables.Rule{Table: ipNetspec, Chain: chainIn(ipNetspec, "a"), Exprs: []expr.Any{
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
				&expr.Lookup{SourceRegister: 1, SetName: "s"},
			}})
		},
		bad:   func(b Batch) { b.DelSet(&nftables.Set{Table: ipNetspec, Name: "s"}) },
		errno: unix.EBUSY,
	},
	{
		name: "set declared again as a map",
		setup: func(b Batch) {
			b.AddTable(ipNetspec)
			b.AddSet(&nftables.Set{Table: ipNetspec, Name: "s", KeyType: nftables.TypeIPAddr}, nil)
		},
		bad: func(b Batch) {
			b.AddSet(&nftables.Set{Table: ipNetspec, Name: "s", IsMap: true, KeyType: nftables.TypeIPAddr, DataType: nftables.TypeVerdict}, nil)
		},
		errno: unix.EEXIST,
	},
	{
		name: "element added again with other data",
		setup: func(b Batch) {
			b.AddTable(ipNetspec)
			b.AddChain(chainIn(ipNetspec, "a"))
			b.AddChain(chainIn(ipNetspec, "b"))
			b.AddSet(&nftables.Set{Table: ipNetspec, Name: "m", IsMap: true, KeyType: nftables.TypeIPAddr, DataType: nftables.TypeVerdict},
				[]nftables.SetElement{{Key: []byte{10, 0, 0, 1}, VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: "a"}}})
		},
		bad: func(b Batch) {
			b.SetAddElements(&nftables.Set{Table: ipNetspec, Name: "m", IsMap: true, KeyType: nftables.TypeIPAddr, DataType: nftables.TypeVerdict},
				[]nftables.SetElement{{Key: []byte{10, 0, 0, 1}, VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: "b"}}})
		},
		errno: unix.EEXIST,
	},
}

// TestFakeRefuses: each refused batch fails with the kernel's error and
// leaves the state as it was, though its first operations were valid.
func TestFakeRefuses(t *testing.T) {
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFake()
			drift(t, f, tc.setup)
			before := f.Dump()
			err := f.Run(func(b Batch) error {
				// A valid operation first: it must not stay.
				b.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: "before"})
				tc.bad(b)
				return nil
			})
			if tc.errno == 0 {
				if err != nil {
					t.Errorf("error %v, want none", err)
				}
				return
			}
			if !errors.Is(err, tc.errno) {
				t.Errorf("error %v, want %v", err, tc.errno)
			}
			if got := f.Dump(); got != before {
				t.Errorf("the refused batch changed the state:\n%s\nwas\n%s", got, before)
			}
		})
	}
}

// TestFakeRefusesAsKernel runs the refused batches against the kernel of a
// fresh namespace too: the Fake must refuse what the kernel refuses, with
// the same error, and accept the setups the kernel accepts.
func TestFakeRefusesAsKernel(t *testing.T) {
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			_, fd := syncNetns(t)
			k, err := OpenSystem(fd)
			if err != nil {
				t.Fatal(err)
			}
			defer k.Close()
			if err := k.Run(func(b Batch) error { tc.setup(b); return nil }); err != nil {
				t.Fatalf("the kernel refuses the setup: %v", err)
			}
			err = k.Run(func(b Batch) error { tc.bad(b); return nil })
			if tc.errno == 0 {
				if err != nil {
					t.Errorf("the kernel answers %v, the Fake accepts the batch", err)
				}
				return
			}
			if !errors.Is(err, tc.errno) {
				t.Errorf("the kernel answers %v, the Fake %v", err, tc.errno)
			}
		})
	}
}

// TestFakeReadsAsKernel installs golden rulesets into a namespace and into
// a Fake, and compares what the applier reads back from each.
func TestFakeReadsAsKernel(t *testing.T) {
	for _, path := range []string{"basic/node-1/nftables.nft", "kitchen-sink/node-1/nftables.nft"} {
		t.Run(path, func(t *testing.T) {
			_, fd := syncNetns(t)
			k, err := OpenSystem(fd)
			if err != nil {
				t.Fatal(err)
			}
			defer k.Close()
			f := NewFake()
			rs := goldenRuleset(t, path)
			for _, kern := range []Kernel{k, f} {
				if _, err := newEncoded(kern).apply(rs); err != nil {
					t.Fatalf("%T: %v", kern, err)
				}
			}
			for _, fam := range families {
				kt, err := readTable(k, fam, TableName, true)
				if err != nil {
					t.Fatal(err)
				}
				ft, err := readTable(f, fam, TableName, true)
				if err != nil {
					t.Fatal(err)
				}
				if (kt == nil) != (ft == nil) {
					t.Fatalf("%s: kernel table %v, fake table %v", familyName(fam), kt != nil, ft != nil)
				}
				if kt == nil {
					continue
				}
				if got, want := sortedKeys(ft.chains), sortedKeys(kt.chains); !slices.Equal(got, want) {
					t.Errorf("%s: chains %q, the kernel's %q", familyName(fam), got, want)
				}
				for name, kc := range kt.chains {
					fc := ft.chains[name]
					if fc == nil || !slices.Equal(readRules(fam, fc, ft.anon), readRules(fam, kc, kt.anon)) {
						t.Errorf("%s: chain %s: the Fake's rules differ from the kernel's", familyName(fam), name)
					}
				}
				if got, want := sortedKeys(ft.sets), sortedKeys(kt.sets); !slices.Equal(got, want) {
					t.Errorf("%s: sets %q, the kernel's %q", familyName(fam), got, want)
				}
				for name, ks := range kt.sets {
					fs := ft.sets[name]
					if fs == nil {
						continue
					}
					if !slices.Equal(sortedElementKeys(fs.elems), sortedElementKeys(ks.elems)) {
						t.Errorf("%s: set %s: the Fake's elements differ from the kernel's", familyName(fam), name)
					}
					if why := declDiffers(fs.set, ks.set); why != "" {
						t.Errorf("%s: set %s: %s", familyName(fam), name, why)
					}
				}
			}
		})
	}
}

// readRules is what the applier reads of a chain's rules: each rule's
// expressions as netlink encodes them, and the rule decoded into the
// model (with its anonymous set's elements, anon) and printed.
func readRules(fam nftables.TableFamily, kc *kernelChain, anon map[string][]nftables.SetElement) []string {
	var out []string
	for _, kr := range kc.rules {
		text := "(not a form netspec writes: " + exprNames(kr) + ")"
		if r, err := decodeKernelRule(modelFamily(fam), kr, anon); err == nil {
			text = r.Text(modelFamily(fam))
		}
		out = append(out, string(ruleKey(fam, kr.Exprs))+"\n"+text)
	}
	return out
}

// TestOnSend: the function given to OnSend is called once per batch sent,
// after it was queued (a failing queue sends nothing) and before the
// kernel holds it; never when there is nothing to send.
func TestOnSend(t *testing.T) {
	f, a := fakeApplier(t)
	rs := goldenModels(t)["golden/basic/node-1/nftables"]
	if rs == nil {
		t.Fatal("no golden model of basic/node-1")
	}
	sent := 0
	a.OnSend(func() {
		if f.Batches() != 0 {
			t.Error("called after the kernel took the batch")
		}
		sent++
	})
	if _, err := a.Apply(rs); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Apply(rs); err != nil {
		t.Fatal(err)
	}
	if sent != 1 || f.Batches() != 1 {
		t.Errorf("%d calls for %d batches, want 1 and 1", sent, f.Batches())
	}
}
