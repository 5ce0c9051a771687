package nft

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// TestAlignDiff: for lists of unique keys edited at random (keys removed,
// inserted, and values changed), alignDiff finds exactly the keys only b
// has, only a has, and the changed pairs (none without a same func),
// whether myers finds the alignment or the maps do.
func TestAlignDiff(t *testing.T) {
	type kv struct{ k, v string }
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 500 {
		n := rng.IntN(200)
		a := make([]kv, n)
		for i := range a {
			a[i] = kv{strconv.Itoa(i * 2), "x"}
		}
		b := slices.Clone(a)
		edits := rng.IntN(3 * myersMaxD / 2)
		for range edits {
			switch op := rng.IntN(3); {
			case op == 0 && len(b) > 0:
				i := rng.IntN(len(b))
				b = slices.Delete(b, i, i+1)
			case op == 1:
				i := rng.IntN(len(b) + 1)
				b = slices.Insert(b, i, kv{"n" + strconv.Itoa(rng.IntN(1<<30)), "x"})
			case len(b) > 0:
				b[rng.IntN(len(b))].v = "changed"
			}
		}
		b = slices.CompactFunc(b, func(x, y kv) bool { return x.k == y.k })
		added, removed, common := alignDiff(a, b, func(e kv) string { return e.k }, func(x, y kv) bool { return x.v == y.v })

		inA, inB := map[string]kv{}, map[string]kv{}
		for _, e := range a {
			inA[e.k] = e
		}
		for _, e := range b {
			inB[e.k] = e
		}
		var wantAdded, wantRemoved, wantChanged []string
		for _, e := range b {
			if x, ok := inA[e.k]; !ok {
				wantAdded = append(wantAdded, e.k)
			} else if x.v != e.v {
				wantChanged = append(wantChanged, e.k)
			}
		}
		for _, e := range a {
			if _, ok := inB[e.k]; !ok {
				wantRemoved = append(wantRemoved, e.k)
			}
		}
		keys := func(es []kv) []string {
			var out []string
			for _, e := range es {
				out = append(out, e.k)
			}
			slices.Sort(out)
			return out
		}
		var gotChanged []string
		for _, p := range common {
			if p[0].k != p[1].k || p[1].v == p[0].v {
				t.Fatalf("round %d: bad pair %v", round, p)
			}
			gotChanged = append(gotChanged, p[1].k)
		}
		slices.Sort(wantAdded)
		slices.Sort(wantRemoved)
		slices.Sort(wantChanged)
		slices.Sort(gotChanged)
		if !slices.Equal(keys(added), wantAdded) || !slices.Equal(keys(removed), wantRemoved) || !slices.Equal(gotChanged, wantChanged) {
			t.Fatalf("round %d (%d edits): added %v removed %v changed %v; want %v %v %v", round, edits,
				keys(added), keys(removed), gotChanged, wantAdded, wantRemoved, wantChanged)
		}
		// Without same (the key is the whole item, as for set
		// elements): the same keys added and removed, no pairs.
		added, removed, common = alignDiff(a, b, func(e kv) string { return e.k }, nil)
		if !slices.Equal(keys(added), wantAdded) || !slices.Equal(keys(removed), wantRemoved) || len(common) != 0 {
			t.Fatalf("round %d (%d edits), same nil: added %v removed %v pairs %v; want %v %v none", round, edits,
				keys(added), keys(removed), common, wantAdded, wantRemoved)
		}
	}
}
