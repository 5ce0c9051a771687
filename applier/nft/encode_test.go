package nft

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"netspec.dev/netspec/internal/gen/genplan"
	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/render"
	"netspec.dev/netspec/render/nftmodel"
)

// withEndpointPort returns a copy of p in which every endpoint of the
// first port of Service i has port 1+ its port: the Service's picks
// change, no other Service's.
func withEndpointPort(p *plan.Plan, i int) *plan.Plan {
	q := *p
	q.Services = slices.Clone(p.Services)
	s := &q.Services[i]
	if len(s.Ports) == 0 {
		return &q
	}
	s.Ports = slices.Clone(s.Ports)
	pt := &s.Ports[0]
	pt.Endpoints = slices.Clone(pt.Endpoints)
	for k := range pt.Endpoints {
		pt.Endpoints[k].Port++
	}
	return &q
}

// TestEncodeCacheEqualsFresh: over random edits of a plan, the Applier's
// incremental encoding of render.Memo's models (encodeCache) equals
// Encode of a fresh model, field by field; and after a one-Service edit
// it reuses the encoding of nearly every chain.
func TestEncodeCacheEqualsFresh(t *testing.T) {
	base := genplan.Plan(t, 120, "node-1")
	r := rand.New(rand.NewPCG(3, 5))
	var memo render.Memo
	var c encodeCache
	p := base
	var last *Ruleset
	for step := range 40 {
		what := "start"
		if step > 0 {
			switch k := r.IntN(4); k {
			case 0:
				p, what = genplan.WithExtraService(t, base), "service added" // once: the plan stays valid
			case 1:
				p, what = genplan.WithMovedEndpoint(t, p), "endpoint moved"
			case 2:
				p, what = base, "back to the start"
			default:
				p, what = withEndpointPort(p, r.IntN(len(p.Services))), "endpoint ports changed"
			}
		}
		got := c.encode(memo.NFTablesModel(p))
		want := Encode(render.NFTablesModel(p))
		compareEncoded(t, step, what, got, want)
		if what == "endpoint ports changed" && last != nil {
			reused, all := 0, 0
			for i, tb := range got.Tables {
				old := map[*Chain]bool{}
				for _, ch := range last.Tables[i].Chains {
					old[ch] = true
				}
				for _, ch := range tb.Chains {
					all++
					if old[ch] {
						reused++
					}
				}
			}
			if reused < all*9/10 {
				t.Errorf("step %d (%s): %d of %d chains reused, want nearly all", step, what, reused, all)
			}
		}
		last = got
	}
}

// compareEncoded compares two encoded rulesets field by field.
func compareEncoded(t *testing.T, step int, what string, got, want *Ruleset) {
	t.Helper()
	if len(got.Tables) != len(want.Tables) {
		t.Fatalf("step %d (%s): %d tables, want %d", step, what, len(got.Tables), len(want.Tables))
	}
	for i, gt := range got.Tables {
		wt := want.Tables[i]
		if gt.chainSum != wt.chainSum || len(gt.Chains) != len(wt.Chains) || len(gt.Sets) != len(wt.Sets) {
			t.Fatalf("step %d (%s): table %d: sum %x, %d chains, %d sets; want %x, %d, %d", step, what, i,
				gt.chainSum, len(gt.Chains), len(gt.Sets), wt.chainSum, len(wt.Chains), len(wt.Sets))
		}
		for j, gc := range gt.Chains {
			wc := wt.Chains[j]
			if gc.Name != wc.Name || gc.Text != wc.Text || gc.hash != wc.hash || !reflect.DeepEqual(gc.Base, wc.Base) || len(gc.Rules) != len(wc.Rules) {
				t.Fatalf("step %d (%s): chain %s differs from a fresh encoding", step, what, wc.Name)
			}
			for k, gr := range gc.Rules {
				wr := wc.Rules[k]
				if gr.Text != wr.Text || gr.anonAt != wr.anonAt || !reflect.DeepEqual(gr.Exprs, wr.Exprs) || !reflect.DeepEqual(gr.Anon, wr.Anon) {
					t.Fatalf("step %d (%s): chain %s rule %q differs from a fresh encoding", step, what, wc.Name, wr.Text)
				}
			}
		}
		for j, gs := range gt.Sets {
			ws := wt.Sets[j]
			if gs.Name != ws.Name || gs.Decl != ws.Decl || !reflect.DeepEqual(gs.Template, ws.Template) || !reflect.DeepEqual(gs.udata, ws.udata) || !reflect.DeepEqual(gs.Elements, ws.Elements) {
				t.Fatalf("step %d (%s): set %s differs from a fresh encoding", step, what, ws.Name)
			}
		}
	}
}

// BenchmarkEncodeChange encodes, with one cache, the model of a
// 10,000-Service plan (render.Memo) in which one Service's endpoints
// change per iteration, as the daemon's Update does after a one-file
// change.
func BenchmarkEncodeChange(b *testing.B) {
	p := genplan.Plan(b, 10000, "node-1")
	var memo render.Memo
	var c encodeCache
	c.encode(memo.NFTablesModel(p))
	models := make([]*nftmodel.Ruleset, 2)
	for i := range models {
		p = withEndpointPort(p, 100+i)
		models[i] = memo.NFTablesModel(p)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		c.encode(models[i%2])
	}
}

// BenchmarkUpdateDiff is the user-space part of the daemon's Update after
// one endpoint of one Service moved, at 10,000 Services (render.Memo's
// models, as BenchmarkChangeEndpoints): encoding the next model with the
// last's cache and diffing it against the last encoding, without a
// kernel. Its work should follow the change, not the ruleset.
func BenchmarkUpdateDiff(b *testing.B) {
	p := genplan.Plan(b, 10000, "node-1")
	var memo render.Memo
	models := []*nftmodel.Ruleset{memo.NFTablesModel(p), memo.NFTablesModel(genplan.WithMovedEndpoint(b, p))}
	var c encodeCache
	last := c.encode(models[0])
	b.ReportAllocs()
	b.ResetTimer()
	i := 1
	for b.Loop() {
		want := c.encode(models[i%2])
		for _, fam := range families {
			if tp := diffKnown(want.table(fam), last.table(fam), fam); tp.changes.Replace {
				b.Fatalf("replace: %s", tp.changes.Reason)
			}
		}
		last = want
		i++
	}
}
