package schema

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/build"
	"cuelang.org/go/cue/cuecontext"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/cue/token"

	"netspec.dev/netspec/internal/diag"
)

// maxCUEObjectDepth bounds the search for objects inside a CUE package value.
const maxCUEObjectDepth = 8

// splitCUE evaluates the .cue files of one directory as one package and
// returns the concrete objects it defines. Every regular top-level field is
// searched: a struct with apiVersion and kind is an object; other structs
// and lists are searched further. Hidden fields (_x) and definitions (#X)
// are templates and are not searched.
func splitCUE(u *unit, contents [][]byte, dl *diag.List) (objs []rawObject, ignored []Ignored) {
	v, ok := buildCUE(u, contents, dl)
	if !ok {
		return nil, nil
	}
	// Conflicts anywhere in the package are reported once here; objects
	// below a conflict are then skipped, so nothing is reported twice.
	bad := map[string]bool{}
	if err := v.Validate(); err != nil {
		for _, e := range cueerrors.Errors(err) {
			p := strings.Join(e.Path(), ".")
			bad[p] = true
		}
		addCUEErrors(dl, err, u.files[0])
	}
	w := cueWalker{file: u.files[0], dl: dl, bad: bad}
	w.search(v, cue.MakePath(), 0)
	return w.objs, w.ignored
}

// buildCUE parses and evaluates the files of a CUE package, whose contents
// are given in the order of u.files.
func buildCUE(u *unit, contents [][]byte, dl *diag.List) (cue.Value, bool) {
	ctx := cuecontext.New()
	inst := build.NewContext().NewInstance(u.cueDir(), nil)
	pkg := ""
	ok := true
	for i, name := range u.files {
		f, err := parser.ParseFile(name, contents[i], parser.ParseComments)
		if err != nil {
			addCUEErrors(dl, err, name)
			ok = false
			continue
		}
		if p := f.PackageName(); p != pkg && pkg != "" && p != "" {
			dl.Errorf(diag.Pos{File: name, Line: 1, Col: 1}, nil, "package %s differs from package %s of the other .cue files in %s (one package per directory)", p, pkg, u.cueDir())
			ok = false
			continue
		} else if p != "" {
			pkg = p
		}
		for imp := range f.ImportSpecs() {
			p := strings.Trim(imp.Path.Value, `"`)
			if strings.Contains(strings.SplitN(p, "/", 2)[0], ".") {
				pos := imp.Pos()
				dl.Errorf(diag.Pos{File: name, Line: pos.Line(), Col: pos.Column()}, nil, "import %q: only CUE's standard library can be imported; put shared definitions in the same directory", p)
				ok = false
			}
		}
		if err := inst.AddSyntax(f); err != nil {
			addCUEErrors(dl, err, name)
			ok = false
		}
	}
	if !ok {
		return cue.Value{}, false
	}
	// A conflict inside any field makes the package value an error too, but
	// its fields can still be read: the other objects are still checked.
	v := ctx.BuildInstance(inst)
	if _, err := v.Fields(); err != nil {
		addCUEErrors(dl, v.Err(), u.files[0])
		return cue.Value{}, false
	}
	return v, true
}

type cueWalker struct {
	bad     map[string]bool // paths (dot-joined) with a conflict already reported
	file    string
	dl      *diag.List
	objs    []rawObject
	ignored []Ignored
}

func (w *cueWalker) search(v cue.Value, p cue.Path, depth int) {
	if depth > maxCUEObjectDepth {
		return
	}
	if depth > 0 && (v.LookupPath(cue.MakePath(cue.Str("kind"))).Exists() || v.LookupPath(cue.MakePath(cue.Str("apiVersion"))).Exists()) {
		w.object(v, p)
		return
	}
	if it, err := v.Fields(); err == nil {
		for it.Next() {
			w.search(it.Value(), cue.MakePath(append(p.Selectors(), it.Selector())...), depth+1)
		}
		return
	}
	if it, err := v.List(); err == nil {
		for i := 0; it.Next(); i++ {
			w.search(it.Value(), cue.MakePath(append(p.Selectors(), cue.Index(i))...), depth+1)
		}
	}
}

func (w *cueWalker) object(v cue.Value, p cue.Path) {
	loc := cueLocator(v, w.file)
	prefix := strings.Join(selectorStrings(p), ".")
	for b := range w.bad {
		if b == prefix || strings.HasPrefix(b, prefix+".") {
			return
		}
	}
	if err := v.Validate(cue.Concrete(true)); err != nil {
		addCUEErrors(w.dl, err, w.file)
		return
	}
	var m map[string]any
	if err := v.Decode(&m); err != nil {
		w.dl.Errorf(loc(nil), nil, "%s: cannot read object: %v", p, err)
		return
	}
	normalizeNumbers(m)
	file := w.file
	if pos := v.Pos(); pos.IsValid() {
		file = pos.Filename()
	}
	src := Source{File: file, Item: -1, CUE: p.String()}
	o, ig, ok := classify(src, m, loc, w.dl)
	if ok {
		w.objs = append(w.objs, o)
	} else if ig != nil {
		w.ignored = append(w.ignored, *ig)
	}
}

func selectorStrings(p cue.Path) []string {
	var out []string
	for _, s := range p.Selectors() {
		if s.Type() == cue.IndexLabel {
			out = append(out, strconv.Itoa(s.Index()))
		} else {
			out = append(out, s.Unquoted())
		}
	}
	return out
}

// normalizeNumbers turns the float64 and json.Number values that a CUE
// decode yields into int64 where they are whole, as the YAML reader does.
func normalizeNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalizeNumbers(e)
		}
	case float64:
		if x == float64(int64(x)) {
			return int64(x)
		}
	case int:
		return int64(x)
	}
	return v
}

func cueLocator(v cue.Value, file string) func(diag.Path) diag.Pos {
	return func(p diag.Path) diag.Pos {
		cur := v
		best := posOf(v, file)
		for _, e := range p {
			var sel cue.Selector
			switch e := e.(type) {
			case string:
				sel = cue.Str(e)
			case int:
				sel = cue.Index(e)
			}
			next := cur.LookupPath(cue.MakePath(sel))
			if !next.Exists() {
				break
			}
			cur = next
			if pos := posOf(cur, file); pos.Line > 0 {
				best = pos
			}
		}
		return best
	}
}

func posOf(v cue.Value, file string) diag.Pos {
	pos := v.Pos()
	if !pos.IsValid() {
		return diag.Pos{File: file}
	}
	return diag.Pos{File: pos.Filename(), Line: pos.Line(), Col: pos.Column()}
}

// addCUEErrors reports CUE errors at their positions in the tree's files.
func addCUEErrors(dl *diag.List, err error, fallback string) {
	for _, e := range cueerrors.Errors(err) {
		pos := diag.Pos{File: fallback}
		for _, p := range append([]token.Pos{e.Position()}, e.InputPositions()...) {
			if p.IsValid() && p.Filename() != "" && !strings.HasPrefix(p.Filename(), "/") {
				pos = diag.Pos{File: path.Clean(p.Filename()), Line: p.Line(), Col: p.Column()}
				break
			}
		}
		format, args := e.Msg()
		msg := fmt.Sprintf(format, args...)
		if strings.Contains(msg, "errors in empty disjunction") {
			continue // a header; the errors of the branches follow
		}
		if strings.HasPrefix(msg, "incomplete value ") {
			msg = "has no concrete value (" + msg + "); an object must be fully specified"
		}
		var dp diag.Path
		for _, s := range e.Path() {
			if n, err := strconv.Atoi(s); err == nil {
				dp = append(dp, n)
			} else if u, err := strconv.Unquote(s); err == nil {
				dp = append(dp, u)
			} else {
				dp = append(dp, s)
			}
		}
		dl.Errorf(pos, dp, "%s", msg)
	}
}
