package schema

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"

	"netspec.dev/netspec/internal/diag"
)

// fullCUE validates a raw object the slow, obvious way: unify the whole
// object with its definition in the embedded schema. It returns the
// sorted field paths CUE reports, and whether CUE found the object valid.
func fullCUE(ctx *cue.Context, s cue.Value, kind string, raw map[string]any) (paths []string, valid bool) {
	u := s.LookupPath(cue.ParsePath("#" + kind)).Unify(ctx.Encode(raw))
	err := u.Validate(cue.Concrete(true), cue.All())
	if err == nil {
		return nil, true
	}
	var dl diag.List
	r := rawObject{raw: raw, kind: kind, locate: func(diag.Path) diag.Pos { return diag.Pos{} }}
	cueDiagnostics(&dl, u, r, err)
	for _, d := range dl {
		paths = append(paths, d.Path.String())
	}
	sort.Strings(paths)
	return paths, false
}

// shapeWalk validates a raw object the fast way (the shape walk alone,
// without the Go rules) and returns the sorted field paths it reports.
func shapeWalk(v *validator, kind string, raw map[string]any) diag.List {
	var dl diag.List
	r := rawObject{raw: raw, kind: kind, locate: func(diag.Path) diag.Pos { return diag.Pos{} }}
	v.walk(&dl, r, raw, v.c.kinds[kind], nil)
	return dl
}

// leaves lists the paths of every scalar in v.
func leaves(v any, at diag.Path, out *[]diag.Path) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			leaves(x[k], at.Key(k), out)
		}
	case []any:
		for i, e := range x {
			leaves(e, at.Index(i), out)
		}
	default:
		*out = append(*out, at)
	}
}

func setAt(v any, p diag.Path, x any) {
	for i, e := range p {
		last := i == len(p)-1
		switch e := e.(type) {
		case string:
			m := v.(map[string]any)
			if last {
				m[e] = x
				return
			}
			v = m[e]
		case int:
			l := v.([]any)
			if last {
				l[e] = x
				return
			}
			v = l[e]
		}
	}
}

// corpus returns the raw objects of the example trees.
func corpus(t *testing.T) []rawObject {
	t.Helper()
	var out []rawObject
	for _, dir := range []string{"../examples/basic", "../examples/cue", "../examples/broken"} {
		var dl diag.List
		units, err := walk(dir, &dl)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range units {
			contents, _ := u.read(DefaultMaxFileSize, &dl)
			var raws []rawObject
			if u.isCUE {
				raws, _ = splitCUE(u, contents, &dl)
			} else {
				raws, _ = splitYAML(u.files[0], contents[0], &dl)
			}
			out = append(out, raws...)
		}
	}
	if len(out) < 30 {
		t.Fatalf("corpus has only %d objects", len(out))
	}
	return out
}

// TestShapeAgreesWithCUE checks the fast shape walk against unifying whole
// objects with the schema: on every example object, and on every example
// object with each of its values replaced by values of other types and
// out-of-range values, and with an unknown field added at every level.
// Both must agree on validity, and every field CUE blames must be blamed
// by the walk too (the walk reports more: CUE stops at the first unknown
// field of a struct and hides missing required fields behind other errors).
func TestShapeAgreesWithCUE(t *testing.T) {
	ctx := cuecontext.New()
	s := compileSchema(ctx)
	v := newValidator()
	replacements := []any{"X_Y", int64(0), int64(70000), int64(-1), true, nil, "", "a--b", float64(1.5), map[string]any{"x": "y"}, []any{"z"}}
	cases := 0
	check := func(name, kind string, raw map[string]any) {
		cases++
		ref := copyRaw(raw).(map[string]any)
		nullsAbsent(ref, v.c.kinds[kind]) // as the API server reads null
		want, valid := fullCUE(ctx, s, kind, ref)
		got := shapeWalk(v, kind, copyRaw(raw).(map[string]any))
		if valid != (len(got) == 0) {
			t.Errorf("%s: CUE says valid=%v (%v), the shape walk reports %v", name, valid, want, got)
			return
		}
		for _, p := range want {
			if !blames(got, p) {
				t.Errorf("%s: CUE blames %s, the shape walk does not (it reports %v)", name, p, got)
			}
		}
	}
	for _, r := range corpus(t) {
		name := fmt.Sprintf("%s#%d%s", r.src.File, r.src.Doc, r.src.CUE)
		check(name, r.kind, r.raw)
		var ls []diag.Path
		leaves(r.raw, nil, &ls)
		for _, p := range ls {
			for _, x := range replacements {
				m := copyRaw(r.raw).(map[string]any)
				setAt(m, p, x)
				check(fmt.Sprintf("%s %s=%#v", name, p, x), r.kind, m)
			}
		}
		// An unknown field at the top and in every nested struct.
		var structs []diag.Path
		collectStructs(r.raw, nil, &structs)
		for _, p := range structs {
			m := copyRaw(r.raw).(map[string]any)
			target, _ := lookupRaw(m, p)
			target.(map[string]any)["zzUnknown"] = "x"
			check(fmt.Sprintf("%s %s.zzUnknown", name, p), r.kind, m)
		}
	}
	t.Logf("%d objects compared", cases)
}

// parentPath is the path of the struct holding the field at p.
func parentPath(p string) string {
	if i := strings.LastIndexAny(p, ".["); i >= 0 {
		return p[:i]
	}
	return ""
}

// nullsAbsent is the reference for what the shape walk does with nulls:
// what shape.null says, at every struct of v.
func nullsAbsent(v any, sh *shape) {
	if sh == nil {
		return
	}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if e == nil {
				if n, keep := sh.null(k); !keep {
					delete(x, k)
				} else if n != nil {
					x[k] = n
				}
				continue
			}
			if f, ok := sh.fields[k]; ok {
				nullsAbsent(e, f)
			} else {
				nullsAbsent(e, sh.pattern)
			}
		}
	case []any:
		for _, e := range x {
			nullsAbsent(e, sh.elem)
		}
	}
}

func collectStructs(v any, at diag.Path, out *[]diag.Path) {
	switch x := v.(type) {
	case map[string]any:
		*out = append(*out, at)
		for k, e := range x {
			collectStructs(e, at.Key(k), out)
		}
	case []any:
		for i, e := range x {
			collectStructs(e, at.Index(i), out)
		}
	}
}

// blames reports whether the walk blamed s, a field below it, or the
// unknown field that holds it (CUE blames the inside of an unknown field).
//
// A field missing (or null) that another field's default refers to (port,
// for targetPort's default) makes CUE blame the other field; the walk
// blames the missing one, in the same struct.
func blames(dl diag.List, s string) bool {
	for _, d := range dl {
		x := d.Path.String()
		if d.Msg == "is required" && len(d.Path) > 0 && parentPath(x) == parentPath(s) {
			return true
		}
		if x == s || strings.HasPrefix(x, s+".") || strings.HasPrefix(x, s+"[") {
			return true
		}
		if strings.HasPrefix(d.Msg, "unknown field") && (strings.HasPrefix(s, x+".") || strings.HasPrefix(s, x+"[")) {
			return true
		}
	}
	return false
}

// TestPlainKinds pins which schema fields are checked by their Go type
// alone, so that a constraint added to such a field is not skipped.
func TestPlainKinds(t *testing.T) {
	v := newValidator()
	var plain []string
	var visit func(sh *shape, at string)
	visit = func(sh *shape, at string) {
		if sh == nil {
			return
		}
		if sh.plain != notPlain {
			plain = append(plain, at+"="+plainSource[sh.plain])
		}
		for _, k := range sh.names() {
			visit(sh.fields[k], at+"."+k)
		}
		visit(sh.pattern, at+".*")
		visit(sh.elem, at+"[]")
	}
	visit(v.c.kinds[KindPod], "Pod")
	got := strings.Join(plain, "\n")
	for _, want := range []string{"Pod.status.podIP=string", "Pod.spec.schedulerName=string", "Pod.metadata.labels.*=string"} {
		if !strings.Contains(got, want) {
			t.Errorf("%s is not plain; plain fields:\n%s", want, got)
		}
	}
	for _, notWant := range []string{"Pod.metadata.name=", "Pod.metadata.namespace=", "Pod.spec.hostname=", "Pod.spec.nodeName=", "containerPort="} {
		if strings.Contains(got, notWant) {
			t.Errorf("%s is checked as a plain type, but the schema constrains it further; plain fields:\n%s", notWant, got)
		}
	}
}

// TestPatternsAgreeWithCUE checks the shortcut of checkLeaf for fields
// whose constraint is string and regular expressions only: on every such
// field, for names valid and invalid, matching the patterns in Go must be
// exactly CUE's verdict, so that a value the shortcut accepts is one CUE
// accepts (and the values it does not accept go to CUE for the message).
func TestPatternsAgreeWithCUE(t *testing.T) {
	v := newValidator()
	values := []string{
		"", "a", "z", "0", "9", "-", "a-", "-a", "a-b", "a--b", "svc-1", "svc-4032-sx9drzcq75-lw8wm",
		"Svc", "sVc", "a.b", "a..b", ".a", "a.", "a_b", "a b", "a\nb", "ä", "http", "http-alt",
		"web-0.web.default", "node-1.example.com", "1abc", "12345", "abcdefghijklmno", "abcdefghijklmnop",
		"a-very-long-name-that-is-longer-than-sixty-three-characters-long-x",
		strings.Repeat("a", 63), strings.Repeat("a", 64), strings.Repeat("a", 253), strings.Repeat("a", 254),
		strings.Repeat("ab.", 80) + "c", "p9090", "9090",
	}
	var fields []string
	var visit func(sh *shape, at string)
	seen := map[*shape]bool{}
	visit = func(sh *shape, at string) {
		if sh == nil || seen[sh] {
			return
		}
		seen[sh] = true
		if sh.patterns != nil {
			fields = append(fields, at)
			for _, s := range values {
				u := sh.leaf.Unify(v.c.ctx.Encode(s))
				cueOK := u.Validate(cue.Concrete(true)) == nil
				if got := sh.matches(s); got != cueOK {
					t.Errorf("%s: %q: the patterns say %v, CUE says %v", at, s, got, cueOK)
				}
			}
		}
		for _, k := range sh.names() {
			visit(sh.fields[k], at+"."+k)
		}
		visit(sh.pattern, at+".*")
		visit(sh.elem, at+"[]")
	}
	for _, k := range []string{KindService, KindEndpoints, KindEndpointSlice, KindPod, KindNode, KindCluster} {
		visit(v.c.kinds[k], k)
	}
	got := strings.Join(fields, "\n")
	for _, want := range []string{"Service.metadata.name", "Pod.metadata.name", "Pod.spec.containers[].ports[].name", "Node.metadata.name"} {
		if !strings.Contains(got, want+"\n") && !strings.HasSuffix(got, want) {
			t.Errorf("%s is not checked by its patterns; fields with patterns:\n%s", want, got)
		}
	}
}
