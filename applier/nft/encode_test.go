package nft

import (
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

// BenchmarkUpdateDiff is the user-space part of the daemon's Update after
// one endpoint of one Service moved, at 10,000 Services (render.Memo's
// models, as BenchmarkChangeEndpoints): diffing the next model against
// the last and encoding what changes (diffModel), without a kernel. Its
// work should follow the change, not the ruleset.
func BenchmarkUpdateDiff(b *testing.B) {
	p := genplan.Plan(b, 10000, "node-1")
	var memo render.Memo
	models := []*nftmodel.Ruleset{memo.NFTablesModel(p), memo.NFTablesModel(genplan.WithMovedEndpoint(b, p))}
	b.ReportAllocs()
	b.ResetTimer()
	i := 1
	for b.Loop() {
		want, last := models[i%2], models[(i+1)%2]
		for _, fam := range families {
			if tp := diffModel(modelTable(want, fam), modelTable(last, fam), fam); tp.changes.Replace {
				b.Fatalf("replace: %s", tp.changes.Reason)
			}
		}
		i++
	}
}

// BenchmarkEncode encodes the whole model of a 10,000-Service plan, as a
// full sync does.
func BenchmarkEncode(b *testing.B) {
	m := render.NFTablesModel(genplan.Plan(b, 10000, "node-1"))
	b.ReportAllocs()
	for b.Loop() {
		Encode(m)
	}
}
