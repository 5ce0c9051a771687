package render_test

import (
	"testing"

	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/internal/gen/gentree"
	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/render"
	"netspec.dev/netspec/schema"
)

// benchPlan compiles the Plan of node-1 for a generated tree of n Services
// with two pods each. Building it is not measured.
func benchPlan(b *testing.B, n int) *plan.Plan {
	b.Helper()
	dir := b.TempDir()
	if err := gentree.Write(dir, gentree.Config{Services: n, PodsPerService: 2}); err != nil {
		b.Fatal(err)
	}
	tr, err := schema.Load(dir, schema.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if tr.Diags.Errors() > 0 {
		b.Fatal(tr.Diags.Err())
	}
	checked := compiler.Validate(tr.Objects, nil, tr)
	if checked.Diags.Errors() > 0 {
		b.Fatal(checked.Diags.Err())
	}
	p, err := compiler.Compile(tr.Objects, checked, "node-1")
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkNFTables renders the nftables ruleset of a 10,000-Service plan
// (about 20,000 endpoints).
func BenchmarkNFTables(b *testing.B) {
	p := benchPlan(b, 10000)
	b.ReportAllocs()
	var size int
	for b.Loop() {
		size = len(render.NFTables(p))
	}
	b.ReportMetric(float64(size), "bytes")
}
