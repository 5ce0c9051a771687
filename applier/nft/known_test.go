package nft

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/google/nftables"
	"netspec.dev/netspec/internal/gen/genplan"
	"netspec.dev/netspec/render"
	"netspec.dev/netspec/render/nftmodel"
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

// TestDiffModelEqualsFresh: over random edits of a plan, diffModel of
// render.Memo's models (pieces shared by pointer, only what changes
// encoded) plans exactly what diffKnown plans for fresh encodings of the
// same models, which share nothing and are compared by text; also
// against a model older than the last.
func TestDiffModelEqualsFresh(t *testing.T) {
	base := genplan.Plan(t, 120, "node-1")
	r := rand.New(rand.NewPCG(7, 11))
	var memo render.Memo
	p := base
	type version struct {
		m     *nftmodel.Ruleset
		fresh *Ruleset
	}
	var history []version
	for step := range 60 {
		what := "start"
		if step > 0 {
			switch k := r.IntN(4); k {
			case 0:
				p, what = genplan.WithExtraService(t, base), "service added"
			case 1:
				p, what = genplan.WithMovedEndpoint(t, p), "endpoint moved"
			case 2:
				p, what = base, "back to the start"
			default:
				p, what = withEndpointPort(p, r.IntN(len(p.Services))), "endpoint ports changed"
			}
		}
		v := version{m: memo.NFTablesModel(p), fresh: Encode(render.NFTablesModel(p))}
		for back := 1; back <= 2 && back <= len(history); back++ {
			old := history[len(history)-back]
			for _, fam := range families {
				got := diffModel(modelTable(v.m, fam), modelTable(old.m, fam), fam)
				want := diffKnown(v.fresh.table(fam), old.fresh.table(fam), fam)
				if g, w := planSummary(got), planSummary(want); !reflect.DeepEqual(g, w) {
					t.Fatalf("step %d (%s), against %d back, %s: plan of the models\n%+v\nwant (fresh encodings)\n%+v", step, what, back, familyName(fam), g, w)
				}
			}
		}
		history = append(history, v)
	}
}

// planSummary is what a table plan sends and reports, by value.
func planSummary(tp *tablePlan) any {
	names := func(chains []*Chain) (out []string) {
		for _, c := range chains {
			out = append(out, c.Name+"\n"+chainText(c))
		}
		return out
	}
	var sets []string
	for _, s := range slices.Concat(tp.addSets, tp.flushSets) {
		sets = append(sets, s.Name)
	}
	return struct {
		Changes                             TableChanges
		Sets, DelSets                       []string
		AddChains, ChangedChains, DelChains []string
		AddElems                            map[string][]Element
		DelElems                            map[string][]nftables.SetElement
	}{tp.changes, sets, tp.delSetNames, names(tp.addChains), names(tp.changedChains), tp.delChains, tp.addElems, tp.delElems}
}

// TestUpdateModelEqualsFresh: over random edits of a plan, Update of
// render.Memo's models (diffModel against the model installed last)
// leaves the Fake holding exactly what a fresh Apply of the same plan
// installs: a Plan of a fresh model by another applier finds nothing to
// change, whether the kernel is read back or not. Each change sends
// less than the whole table.
func TestUpdateModelEqualsFresh(t *testing.T) {
	base := genplan.Plan(t, 120, "node-1")
	r := rand.New(rand.NewPCG(13, 17))
	var memo render.Memo
	f, a := fakeApplier(t)
	p := base
	for step := range 40 {
		what := "start"
		if step > 0 {
			switch k := r.IntN(4); k {
			case 0:
				p, what = genplan.WithExtraService(t, base), "service added"
			case 1:
				p, what = genplan.WithMovedEndpoint(t, p), "endpoint moved"
			case 2:
				p, what = base, "back to the start"
			default:
				p, what = withEndpointPort(p, r.IntN(len(p.Services))), "endpoint ports changed"
			}
		}
		ch, err := a.Update(memo.NFTablesModel(p))
		if err != nil {
			t.Fatalf("step %d (%s): %v", step, what, err)
		}
		if step > 0 {
			for _, tc := range ch.Tables {
				if tc.Replace {
					t.Fatalf("step %d (%s): table %s replaced (%s), want a change by difference", step, what, tc.Family, tc.Reason)
				}
			}
		}
		if a.model == nil {
			t.Fatalf("step %d (%s): the applier keeps no model after a sync", step, what)
		}
		fresh, err := New(f).Plan(render.NFTablesModel(p))
		if err != nil {
			t.Fatal(err)
		}
		if !fresh.Empty() {
			t.Fatalf("step %d (%s): after Update the kernel differs from a fresh apply: %s", step, what, fresh.Summary())
		}
	}
}
