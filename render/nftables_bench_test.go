package render_test

import (
	"testing"

	"netspec.dev/netspec/internal/gen/genplan"
	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/render"
)

// benchPlan compiles the Plan of node-1 for a generated tree of n Services
// with two pods each. Building it is not measured.
func benchPlan(b *testing.B, n int) *plan.Plan {
	b.Helper()
	return genplan.Plan(b, n, "node-1")
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
