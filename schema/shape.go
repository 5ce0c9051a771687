package schema

import (
	"fmt"
	"sort"
	"sync"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"

	"netspec.dev/netspec/internal/diag"
)

// CUE reports at most one error for a struct that has a field it does not
// allow, and a missing required field (name!) only when an object has no
// other error. So that a user sees every mistake in one run, the shape of
// each kind (which fields exist, which are required) is read from the
// schema once; unknown and missing fields are reported from that, and
// unknown fields are removed before CUE checks the values.

// shape is the structure the schema allows at one place in an object.
type shape struct {
	open     bool              // any field name is allowed (labels, or "...")
	fields   map[string]*shape // allowed fields; a nil shape allows anything below
	required []string          // sorted
	elem     *shape            // for lists: the shape of each element
}

var (
	shapesOnce sync.Once
	shapes     map[string]*shape // by kind
)

func kindShape(kind string) *shape {
	shapesOnce.Do(func() {
		shapes = map[string]*shape{}
		s := cuecontext.New().CompileBytes(schemaSource)
		for _, k := range []string{KindService, KindEndpoints, KindEndpointSlice, KindPod, KindNode, KindCluster} {
			shapes[k] = shapeOf(s.LookupPath(cue.ParsePath("#"+k)), 0)
		}
	})
	return shapes[kind]
}

func shapeOf(v cue.Value, depth int) *shape {
	if depth > 12 {
		return nil
	}
	switch v.IncompleteKind() {
	case cue.StructKind:
		sh := &shape{fields: map[string]*shape{}, open: v.Allows(cue.AnyString)}
		it, err := v.Fields(cue.Optional(true))
		if err != nil {
			return nil
		}
		for it.Next() {
			sel := it.Selector()
			if !sel.IsString() {
				continue
			}
			name := sel.Unquoted()
			sh.fields[name] = shapeOf(it.Value(), depth+1)
			if sel.ConstraintType() == cue.RequiredConstraint {
				sh.required = append(sh.required, name)
			}
		}
		sort.Strings(sh.required)
		return sh
	case cue.ListKind:
		return &shape{elem: shapeOf(v.LookupPath(cue.MakePath(cue.AnyIndex)), depth+1)}
	}
	return nil
}

// checkShape reports fields the schema does not know and required fields
// that are missing, and deletes the unknown fields from v so that CUE
// reports the remaining value errors in full.
func checkShape(dl *diag.List, r rawObject, v any, sh *shape, at diag.Path) {
	if sh == nil {
		return
	}
	switch x := v.(type) {
	case map[string]any:
		if sh.fields == nil {
			return // a list shape given a map: CUE reports the type
		}
		if !sh.open {
			var unknown []string
			for k := range x {
				if _, ok := sh.fields[k]; !ok {
					unknown = append(unknown, k)
				}
			}
			sort.Strings(unknown)
			for _, k := range unknown {
				p := at.Key(k)
				msg := fmt.Sprintf("unknown field %q", k)
				if best := closest(k, sh.names()); best != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", best)
				}
				loc := r.locateKey
				if loc == nil {
					loc = r.locate
				}
				dl.Errorf(loc(p), p, "%s", msg)
				delete(x, k)
			}
		}
		for _, k := range sh.required {
			if _, ok := x[k]; !ok {
				p := at.Key(k)
				dl.Errorf(r.locate(at), p, "is required")
			}
		}
		for k, e := range x {
			if f, ok := sh.fields[k]; ok {
				checkShape(dl, r, e, f, at.Key(k))
			}
		}
	case []any:
		if sh.elem == nil && sh.fields != nil {
			return
		}
		for i, e := range x {
			checkShape(dl, r, e, sh.elem, at.Index(i))
		}
	}
}

func (sh *shape) names() []string {
	out := make([]string, 0, len(sh.fields))
	for k := range sh.fields {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
