package schema

import (
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCUEExampleEqualsYAML checks that examples/cue, which writes the
// services of examples/basic with a CUE template, yields the same objects.
func TestCUEExampleEqualsYAML(t *testing.T) {
	load := func(dir string) map[string]*Object {
		t.Helper()
		tr, err := Load(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if tr.Diags.Errors() > 0 {
			t.Fatalf("%s: %v", dir, tr.Diags.Err())
		}
		out := map[string]*Object{}
		for _, o := range tr.Objects {
			c := *o
			c.Src = Source{}
			out[o.Kind+"/"+o.Meta().Namespace+"/"+o.Meta().Name] = &c
		}
		return out
	}
	yaml := load("../examples/basic")
	cue := load("../examples/cue")
	var keys []string
	for k := range yaml {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) != 16 {
		t.Errorf("examples/basic has %d objects, want 16", len(keys))
	}
	for _, k := range keys {
		if diff := cmp.Diff(yaml[k], cue[k]); diff != "" {
			t.Errorf("%s differs between examples/basic and examples/cue (-yaml +cue):\n%s", k, diff)
		}
	}
	for k := range cue {
		if yaml[k] == nil {
			t.Errorf("examples/cue has %s, examples/basic does not", k)
		}
	}
}
