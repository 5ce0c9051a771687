package compiler_test

import (
	"fmt"
	"testing"

	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/internal/gen/genplan"
	"netspec.dev/netspec/render"
	"netspec.dev/netspec/schema"
)

// BenchmarkCompileRender measures what render does after loading: the
// cross-object checks, the Plan of one node and its text artifacts.
func BenchmarkCompileRender(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			tr := loadGenerated(b, n)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				c := compiler.Validate(tr.Objects, nil, tr)
				p, err := compiler.Compile(tr.Objects, c, "node-1")
				if err != nil {
					b.Fatal(err)
				}
				if _, err := render.Files(p, render.DataplaneNFTables); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func loadGenerated(b *testing.B, n int) *schema.Tree {
	b.Helper()
	return genplan.Tree(b, n)
}

// BenchmarkCompile measures the cross-object checks, the allocation and
// the Plan of one node, on trees loaded beforehand (loading is measured in
// package schema). The sizes show that compile time grows linearly.
func BenchmarkCompile(b *testing.B) {
	for _, n := range []int{1000, 10000, 50000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			tr := loadGenerated(b, n)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				c := compiler.Validate(tr.Objects, nil, tr)
				if _, err := compiler.Compile(tr.Objects, c, "node-1"); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/service")
		})
	}
}

// BenchmarkCompileStagedMemo measures CompileStaged of an unchanged
// 10,000-service tree with a warm Memo: the floor of a watcher's compile
// after a change that touches no Service (checks excluded).
func BenchmarkCompileStagedMemo(b *testing.B) {
	tr := loadGenerated(b, 10000)
	c := compiler.Validate(tr.Objects, nil, tr)
	memo := compiler.NewMemo()
	if _, err := memo.CompileStaged(tr.Objects, c, "node-1"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := memo.CompileStaged(tr.Objects, c, "node-1"); err != nil {
			b.Fatal(err)
		}
	}
}
