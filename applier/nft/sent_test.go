package nft

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"

	"netspec.dev/netspec/applier/nft/encoding"
	"netspec.dev/netspec/internal/gen/genplan"
	"netspec.dev/netspec/render"
	"netspec.dev/netspec/render/nftmodel"
)

// stageModel serialises the replace of m's tables as System.Run stages
// it (no socket is used), and returns the staged messages.
func stageModel(t testing.TB, m *nftmodel.Ruleset) [][]byte {
	return stageTables(t, m.Tables, func(b Batch) Batch { return b })
}

// stageTables serialises the replace of tables into the Batch wrap
// makes of a staging one, and returns the staged messages.
func stageTables(t testing.TB, tables []*nftmodel.Table, wrap func(Batch) Batch) [][]byte {
	t.Helper()
	s := &batchSender{}
	s.stage()
	c, err := s.nftConn()
	if err != nil {
		t.Fatal(err)
	}
	sb := &stagingBatch{Conn: c, sender: s}
	for _, mt := range tables {
		fam := encoding.TableFamily(mt.Family)
		if err := modelReplaced(mt, fam, "test").queueModel(wrap(sb), fam); err != nil {
			t.Fatal(err)
		}
	}
	if err := sb.flush(); err != nil {
		t.Fatal(err)
	}
	return s.staged.chunks
}

// replacedSums are the element digests of m's tables, as a replace of
// each from the model is checked with.
func replacedSums(m *nftmodel.Ruleset) *modelSums {
	plans := make([]*tablePlan, len(m.Tables))
	for i, mt := range m.Tables {
		plans[i] = modelReplaced(mt, encoding.TableFamily(mt.Family), "test")
	}
	return newModelSums(plans)
}

// TestDecodeSent: the messages of a staged replace decode into exactly
// the model's chains and set elements.
func TestDecodeSent(t *testing.T) {
	m := render.NFTablesModel(genplan.Plan(t, 300, "node-1"))
	st, err := decodeSent(stageModel(t, m))
	if err != nil {
		t.Fatal(err)
	}
	sums := replacedSums(m)
	for i, mt := range m.Tables {
		fam := encoding.TableFamily(mt.Family)
		sent := st[tableKey{fam, mt.Name}]
		if sent == nil {
			t.Fatalf("table %s: nothing decoded", mt.Name)
		}
		want := sums.of(i)
		for name, w := range want {
			got := sent.sets[name]
			if got == nil {
				got = &setSum{}
			}
			if *got != w {
				t.Errorf("family %d set %s: decoded %d elements (sum %x), model %d (sum %x)", fam, name, got.n, got.sum, w.n, w.sum)
			}
		}
	}
}

// BenchmarkDecodeSent decodes the staged replace of a 10,000-Service
// plan's tables, as the check after a first install does while the kernel
// takes the batch.
func BenchmarkDecodeSent(b *testing.B) {
	chunks := stageModel(b, render.NFTablesModel(genplan.Plan(b, 10000, "node-1")))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeSent(chunks); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDecodeSentCatchesLoss: elements missing from the messages (here
// lost before they were serialised) show in the decoded digest.
func TestDecodeSentCatchesLoss(t *testing.T) {
	m := goldenModels(t)["golden/kitchen-sink/node-1/nftables"]
	mt := m.Tables[0]
	fam := encoding.TableFamily(mt.Family)
	st, err := decodeSent(stageTables(t, m.Tables[:1], func(b Batch) Batch { return droppingBatch{b, "service-ips"} }))
	if err != nil {
		t.Fatal(err)
	}
	want := replacedSums(&nftmodel.Ruleset{Tables: m.Tables[:1]}).of(0)
	if want["service-ips"].n == 0 {
		t.Fatal("the golden model has no service-ips elements to lose")
	}
	sent := st[tableKey{fam, mt.Name}]
	if got := sent.sets["service-ips"]; got != nil {
		t.Fatalf("service-ips: %d elements decoded, want none", got.n)
	}
	for name, w := range want {
		if name == "service-ips" {
			continue
		}
		if got := sent.sets[name]; (got == nil && w.n > 0) || (got != nil && *got != w) {
			t.Errorf("set %s: decoded %+v, want %+v", name, got, w)
		}
	}
}

// TestSentMatchesAfterReplace: after a first install, the check against
// what was sent says yes for the Fake and the kernel (so the read-back
// is not needed), and no once an element is missing from what was sent.
func TestSentMatchesAfterReplace(t *testing.T) {
	m := render.NFTablesModel(genplan.Plan(t, 300, "node-1"))
	check := func(t *testing.T, a *Applier) {
		t.Helper()
		if _, err := a.Apply(m); err != nil {
			t.Fatal(err)
		}
		sums := replacedSums(m)
		for i, mt := range m.Tables {
			ok, err := a.sentMatches(modelChecks(mt), sums.of(i), encoding.TableFamily(mt.Family))
			if err != nil || !ok {
				t.Fatalf("table %s after a replace: sentMatches = %t, %v; want true", mt.Name, ok, err)
			}
			short := map[string]setSum{}
			for name, s := range sums.of(i) {
				short[name] = s
			}
			s := short["service-ips"]
			s.n++
			short["service-ips"] = s
			if ok, err := a.sentMatches(modelChecks(mt), short, encoding.TableFamily(mt.Family)); err != nil || ok {
				t.Fatalf("table %s, one element more wanted than sent: sentMatches = %t, %v; want false", mt.Name, ok, err)
			}
		}
	}
	t.Run("fake", func(t *testing.T) {
		_, a := fakeApplier(t)
		check(t, a.Applier)
	})
	t.Run("kernel", func(t *testing.T) {
		_, a := syncApplier(t)
		check(t, a.Applier)
	})
}

// encodeInParts runs f with every replace from a model encoded in three
// parts at once, a set's elements in pieces of two.
func encodeInParts[T any](f func() (T, error)) (T, error) {
	min, pieces, enc := parallelEncodeMin, pieceElems, encoders
	parallelEncodeMin, pieceElems, encoders = 1, 2, func() int { return 3 }
	defer func() { parallelEncodeMin, pieceElems, encoders = min, pieces, enc }()
	return f()
}

// TestQueueModelInParts: a replace encoded in parts stages the same
// chains, rules, sets and elements as one encoded on one goroutine.
func TestQueueModelInParts(t *testing.T) {
	m := render.NFTablesModel(genplan.Plan(t, 300, "node-1"))
	one := stageModel(t, m)
	parts, _ := encodeInParts(func() ([][]byte, error) { return stageModel(t, m), nil })
	a, err := decodeSent(one)
	if err != nil {
		t.Fatal(err)
	}
	b, err := decodeSent(parts)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != len(b) {
		t.Fatalf("%d tables decoded in parts, %d in one", len(b), len(a))
	}
	for k, ta := range a {
		tb := b[k]
		if tb == nil || len(ta.chains) != len(tb.chains) || len(ta.sets) != len(tb.sets) {
			t.Fatalf("table %v: in parts %v, in one %v", k, tb, ta)
		}
		for name, s := range ta.sets {
			if got := tb.sets[name]; got == nil || *got != *s {
				t.Errorf("table %v set %s: in parts %+v, in one %+v", k, name, got, s)
			}
		}
	}
	ca, cb := messageTypes(t, one), messageTypes(t, parts)
	for typ, n := range ca {
		if typ != unix.NFT_MSG_NEWSETELEM && cb[typ] != n {
			t.Errorf("message type %d: %d in parts, %d in one", typ, cb[typ], n)
		}
	}
	if ca[unix.NFT_MSG_NEWRULE] == 0 {
		t.Fatal("no rule staged")
	}
}

// messageTypes counts the staged messages by nftables message type.
func messageTypes(t *testing.T, chunks [][]byte) map[uint16]int {
	t.Helper()
	out := map[uint16]int{}
	for _, c := range chunks {
		for off := 0; off < len(c); {
			n := int(binary.NativeEndian.Uint32(c[off:]))
			if n < nlmsgHeaderLen {
				t.Fatalf("message of %d bytes", n)
			}
			out[binary.NativeEndian.Uint16(c[off+4:])&0xff]++
			off += nlmsgAlign(n)
		}
	}
	return out
}
