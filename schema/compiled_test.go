package schema

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"cuelang.org/go/cue/cuecontext"
	"github.com/google/go-cmp/cmp"
)

// compiledCorpus writes every rule and defaults case into one tree, a file
// each, and returns it with the example trees that have findings or CUE
// files: the trees whose findings the compiled schema is checked on; bulk
// rule cases are left out.
func compiledCorpus(t *testing.T) []string {
	t.Helper()
	files := map[string]string{}
	for i, c := range ruleCases {
		if !bulkCase(c.yaml) {
			files[fmt.Sprintf("rules/%03d-%s.yaml", i, c.rule)] = c.yaml
		}
	}
	for i, c := range defaultCases {
		files[fmt.Sprintf("defaults/%03d.yaml", i)] = c.yaml
	}
	return []string{writeTree(t, files), filepath.Join("..", "examples", "broken"), filepath.Join("..", "examples", "cue")}
}

// bulkCase tells the few rule cases of 64 KiB or more: they check a limit
// with thousands of values of one kind (20,000 ports). Tests that compare
// two ways of checking leave them out: they would cost most of the CPU and
// compare nothing the other cases do not.
func bulkCase(yaml string) bool { return len(yaml) >= 64<<10 }

// loadResult is what a Load says about a tree: every finding with its
// position, and every object as decoded.
type loadResult struct {
	Diags   []string
	Objects []*Object
}

func loadResultOf(t *testing.T, root string) loadResult {
	t.Helper()
	tr := loadTree(t, root, Options{})
	return loadResult{Diags: diagStrings(tr.Diags), Objects: tr.Objects}
}

// freshSchema makes every validator compile the schema anew, as each did
// before the compiled schema was shared, until the test ends.
func freshSchema(t *testing.T) {
	t.Helper()
	shared := compiledSchema
	compiledSchema = func() *compiled {
		ctx := cuecontext.New()
		return compile(ctx, compileSchema(ctx))
	}
	t.Cleanup(func() { compiledSchema = shared })
}

// TestCompiledSchemaEqualsFresh checks that Loads sharing the process's
// compiled schema, used by many Loads before, find what Loads with a
// schema compiled afresh for each validator find: the same findings at the
// same positions and the same objects, on the examples and on every rule
// and defaults case.
func TestCompiledSchemaEqualsFresh(t *testing.T) {
	roots := compiledCorpus(t)
	shared := map[string]loadResult{}
	for range 2 { // the second round reuses what the first evaluated
		for _, root := range roots {
			shared[root] = loadResultOf(t, root)
		}
	}
	freshSchema(t)
	findings := 0
	for _, root := range roots {
		fresh := loadResultOf(t, root)
		findings += len(fresh.Diags)
		if diff := cmp.Diff(fresh, shared[root]); diff != "" {
			t.Errorf("%s: the shared schema's Load differs from a fresh one (-fresh +shared):\n%s", root, diff)
		}
	}
	if findings < len(ruleCases)/2 {
		t.Errorf("only %d findings in the corpus: the comparison checks too little", findings)
	}
}

// TestCompiledSchemaConcurrent loads the corpus (half of the goroutines)
// and a stream of the rule cases (the other half) from several goroutines
// at once, each with validators of its own over the one compiled schema,
// and checks that each finds what a Load alone finds. Its point is `go test
// -race`: CUE evaluates the shared schema's values from all of them.
func TestCompiledSchemaConcurrent(t *testing.T) {
	roots := compiledCorpus(t)
	want := map[string]loadResult{}
	for _, root := range roots {
		want[root] = loadResultOf(t, root)
	}
	var docs []string
	for _, c := range ruleCases {
		if !bulkCase(c.yaml) {
			docs = append(docs, c.yaml)
		}
	}
	stream := strings.Join(docs, "\n---\n")
	wantStream := diagStrings(loadStream("stdin", []byte(stream)).Diags)

	const goroutines = 4
	errs := make(chan error, goroutines*len(roots))
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			if g%2 == 1 {
				got := diagStrings(loadStream("stdin", []byte(stream)).Diags)
				if diff := cmp.Diff(wantStream, got); diff != "" {
					errs <- fmt.Errorf("a concurrent stream differs from one alone (-alone +concurrent):\n%s", diff)
				}
				return
			}
			for i := range roots {
				root := roots[(i+g/2)%len(roots)] // each starts elsewhere
				tr, err := Load(root, Options{Workers: 2})
				if err != nil {
					errs <- err
					continue
				}
				got := loadResult{Diags: diagStrings(tr.Diags), Objects: tr.Objects}
				if diff := cmp.Diff(want[root], got); diff != "" {
					errs <- fmt.Errorf("%s: a concurrent Load differs from one alone (-alone +concurrent):\n%s", root, diff)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(wantStream) == 0 {
		t.Error("the stream of rule cases has no findings: the comparison checks too little")
	}
}

// TestCompiledSchemaOnce checks that validators share one compiled schema:
// the point of compiling it once per process.
func TestCompiledSchemaOnce(t *testing.T) {
	a, b := newValidator(), newValidator()
	if a.c != b.c {
		t.Error("two validators compiled the schema each")
	}
}

// BenchmarkCompileSchema measures what compiledSchema saves each validator
// after the first: compiling the embedded schema into shapes.
func BenchmarkCompileSchema(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		ctx := cuecontext.New()
		compile(ctx, compileSchema(ctx))
	}
}
