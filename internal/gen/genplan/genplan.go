// Package genplan loads and compiles generated trees (gentree) for
// benchmarks and tests that need big inputs: one place that knows how a
// tree becomes a Plan without the CLI.
package genplan

import (
	"os"
	"testing"

	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/internal/gen/gentree"
	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/schema"
)

// Tree writes a generated tree of n Services with two pods each into a
// temporary directory, loads it and fails tb if it is not valid.
func Tree(tb testing.TB, n int) *schema.Tree {
	tb.Helper()
	dir, err := os.MkdirTemp("", "netspec-gen-")
	if err != nil {
		tb.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := gentree.Write(dir, gentree.Config{Services: n, PodsPerService: 2}); err != nil {
		tb.Fatal(err)
	}
	tr, err := schema.Load(dir, schema.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	if tr.Diags.Errors() > 0 {
		tb.Fatal(tr.Diags.Err())
	}
	return tr
}

// Plan compiles Tree(tb, n) for node.
func Plan(tb testing.TB, n int, node string) *plan.Plan {
	tb.Helper()
	tr := Tree(tb, n)
	checked := compiler.Validate(tr.Objects, nil, tr)
	if checked.Diags.Errors() > 0 {
		tb.Fatal(checked.Diags.Err())
	}
	p, err := compiler.Compile(tr.Objects, checked, node)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}
