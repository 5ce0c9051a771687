package compiler_test

import (
	"fmt"
	"os"
	"runtime"
	"testing"

	"netspec.dev/netspec/internal/heapprof"

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

// BenchmarkMemoRetained measures what a Memo holds after one Validate,
// CompileStaged and Finish of a generated 10,000-service tree, as a
// watcher's Memo does between reloads: the live heap (after two GCs)
// with the Memo, less that before it, split by stage (check: after
// Validate, with its Checked; compile: after CompileStaged, with its
// Staged; finish: after Finish, holding the Memo alone). The tree's
// loaded objects are outside the figures. Reported, not asserted. With
// NETSPEC_MEMO_HEAPPROFILE=FILE it writes a heap profile taken while the
// Memo is held (-memprofilerate=4096 or finer for a useful one).
func BenchmarkMemoRetained(b *testing.B) {
	tr := loadGenerated(b, 10000)
	heap := func() float64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return float64(m.HeapAlloc)
	}
	var check, compile, held float64
	for b.Loop() {
		base := heap()
		memo := compiler.NewMemo()
		c := memo.Validate(tr.Objects, nil, tr)
		if c.Diags.Errors() > 0 {
			b.Fatal(c.Diags.Err())
		}
		check = heap() - base
		st, err := memo.CompileStaged(tr.Objects, c, "node-1")
		if err != nil {
			b.Fatal(err)
		}
		compile = heap() - base
		st.Finish()
		st, c = nil, nil
		held = heap() - base
		if out := os.Getenv("NETSPEC_MEMO_HEAPPROFILE"); out != "" {
			heapprof.Write(b, out)
		}
		runtime.KeepAlive(memo)
	}
	b.ReportMetric(check/1e6, "check-MB")
	b.ReportMetric(compile/1e6, "compile-MB")
	b.ReportMetric(held/1e6, "held-MB")
}
