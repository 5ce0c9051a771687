package nft

import (
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables"
	"netspec.dev/netspec/applier/nft/encoding"
	"netspec.dev/netspec/internal/gen/genplan"
	"netspec.dev/netspec/render"
)

// TestQueueModelEqualsReplace: for every golden model, replacing a table
// from the model (queueModel, encoding a piece at a time) sends the
// batch that Replace of the whole encoding sends, operation by
// operation, leaves the same tables, and reports the same changes (Ops
// and Bytes included) as a replace of the encoding.
func TestQueueModelEqualsReplace(t *testing.T) {
	models := goldenModels(t)
	for _, name := range slices.Sorted(maps.Keys(models)) {
		m := models[name]
		t.Run(name, func(t *testing.T) {
			for _, mt := range m.Tables {
				fam := encoding.TableFamily(mt.Family)
				enc, streamed := NewFake(), NewFake()
				rs := &Ruleset{Tables: []*encodedTable{encodeTable(mt)}}
				if err := enc.Run(rs.Replace); err != nil {
					t.Fatalf("Replace: %v", err)
				}
				tp := modelReplaced(mt, fam, ReasonMissing)
				if err := streamed.Run(func(b Batch) error { return tp.queueModel(b, fam) }); err != nil {
					t.Fatalf("queueModel: %v", err)
				}
				if got, want := streamed.LastBatch(), enc.LastBatch(); !slices.Equal(got, want) {
					t.Errorf("%s: queueModel sent %d operations, Replace %d; first difference:\n%s", familyName(fam), len(got), len(want), firstDiff(got, want))
				}
				if got, want := streamed.Dump(), enc.Dump(); got != want {
					t.Errorf("%s: the tables differ after queueModel and after Replace", familyName(fam))
				}
				ref := newTablePlan(rs.Tables[0].Table, fam)
				ref.replace(rs.Tables[0], ReasonMissing)
				if !reflect.DeepEqual(tp.changes, ref.changes) {
					t.Errorf("%s: changes of the model's replace\n%+v\nwant (the encoding's)\n%+v", familyName(fam), tp.changes, ref.changes)
				}
				counted := modelReplaced(mt, fam, ReasonMissing)
				if err := counted.countModel(fam); err != nil || counted.changes.Bytes != ref.changes.Bytes {
					t.Errorf("%s: countModel: %v, %d bytes, want %d", familyName(fam), err, counted.changes.Bytes, ref.changes.Bytes)
				}
			}
		})
	}
}

// firstDiff shows where two lists of operations part.
func firstDiff(got, want []string) string {
	for i := range max(len(got), len(want)) {
		g, w := "(none)", "(none)"
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			return fmt.Sprintf("operation %d: %s\nwant %s", i+1, g, w)
		}
	}
	return "none"
}

// TestModelVerifyCatchesLoss: when the kernel does not hold what it
// acknowledged, Apply and Update of a model (a first install, verified
// against the model a set at a time) fail, and the applier keeps nothing
// it would trust next.
func TestModelVerifyCatchesLoss(t *testing.T) {
	m := goldenModels(t)["golden/kitchen-sink/node-1/nftables"]
	if m == nil {
		t.Fatal("no model of golden/kitchen-sink/node-1")
	}
	for _, update := range []bool{false, true} {
		a := New(droppingKernel{NewFake(), "service-ips"})
		sync := a.Apply
		if update {
			sync = a.Update
		}
		_, err := sync(m)
		if err == nil || !strings.Contains(err.Error(), "verify") || !regexp.MustCompile(`elements [1-9][0-9]* added`).MatchString(err.Error()) {
			t.Fatalf("update=%t: sync with lost elements: %v, want a verify error that counts them", update, err)
		}
		if a.model != nil {
			t.Errorf("update=%t: the applier trusts a ruleset the kernel does not hold", update)
		}
	}
}

// TestModelChecks: the read-back check against the model (modelChecks)
// says yes for a table exactly as sent, and no where its elements differ.
func TestModelChecks(t *testing.T) {
	m := goldenModels(t)["golden/kitchen-sink/node-1/nftables"]
	f, a := fakeApplier(t)
	if _, err := a.Apply(m); err != nil {
		t.Fatal(err)
	}
	matches := func() []bool {
		var got []bool
		for _, mt := range m.Tables {
			ok, err := a.tableMatches(modelChecks(mt), encoding.TableFamily(mt.Family))
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, ok)
		}
		return got
	}
	if got := matches(); !slices.Equal(got, []bool{true, true}) {
		t.Fatalf("tableMatches of the model as sent = %v, want [true true]", got)
	}
	drift(t, f, func(b Batch) {
		b.FlushSet(&nftables.Set{Table: ipNetspec, Name: "service-ips"})
	})
	if got := matches(); !slices.Equal(got, []bool{false, true}) {
		t.Fatalf("tableMatches after service-ips was flushed = %v, want [false true]", got)
	}
}

// TestStagedBatchAtomic: System.Run serialises a batch into its staged
// messages every flushEvery operations, and still sends it as one
// transaction: a batch of several flushes is applied whole, and one whose
// last operation the kernel refuses changes nothing.
func TestStagedBatchAtomic(t *testing.T) {
	_, fd := syncNetns(t)
	k, err := OpenSystem(fd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	n := 3*flushEvery + 7
	addChains := func(b Batch, prefix string) {
		for i := range n {
			b.AddChain(chainIn(ipNetspec, fmt.Sprintf("%s-%d", prefix, i)))
		}
	}
	ours := func() int {
		t.Helper()
		chains, err := k.Chains(nftables.TableFamilyIPv4)
		if err != nil {
			t.Fatal(err)
		}
		return len(chains)
	}
	if err := k.Run(func(b Batch) error {
		b.AddTable(ipNetspec)
		addChains(b, "first")
		return nil
	}); err != nil {
		t.Fatalf("a batch of %d operations: %v", n+1, err)
	}
	if got := ours(); got != n {
		t.Fatalf("after a batch of %d chains the kernel has %d", n, got)
	}
	err = k.Run(func(b Batch) error {
		addChains(b, "second")
		b.DelChain(chainIn(ipNetspec, "missing"))
		return nil
	})
	if err == nil {
		t.Fatal("a batch that deletes a missing chain was accepted")
	}
	if got := ours(); got != n {
		t.Fatalf("after a refused batch of %d chains the kernel has %d chains, want the %d it had", n, got, n)
	}
}

// TestApplyLargeModel: a first install of a model large enough for many
// staged flushes and set chunks converges: a plan right after it finds
// nothing to change, and the kernel holds every element.
func TestApplyLargeModel(t *testing.T) {
	_, a := syncApplier(t)
	m := render.NFTablesModel(genplan.Plan(t, 1000, "node-1"))
	ch, err := a.Apply(m)
	if err != nil {
		t.Fatal(err)
	}
	ops := 0
	for _, tc := range ch.Tables {
		ops += tc.Ops
	}
	if ops < 4*flushEvery || !ch.Tables[0].Replace {
		t.Fatalf("the first install: %s, %d operations; want a replace of more than %d", counts(ch), ops, 4*flushEvery)
	}
	if ch, err := a.Plan(m); err != nil || !ch.Empty() {
		t.Fatalf("a plan after the first install: %v %s, want nothing to do", err, counts(ch))
	}
}
