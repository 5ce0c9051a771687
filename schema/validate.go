package schema

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"

	"netspec.dev/netspec/internal/diag"
)

//go:generate go run ./internal/k8sgen -o k8s_fields.cue

//go:embed netspec.cue
var handSource []byte

//go:embed k8s_fields.cue
var k8sFieldsSource []byte

// schemaSource is the schema as one CUE file: netspec.cue followed by the
// generated field sets of the Kubernetes types (k8s_fields.cue, written by
// internal/k8sgen from k8s.io/api) without their package clause.
var schemaSource = func() []byte {
	const clause = "\npackage netspec\n"
	i := bytes.Index(k8sFieldsSource, []byte(clause))
	if i < 0 {
		panic("k8s_fields.cue has no package clause") // a build defect, not user input
	}
	return slices.Concat(handSource, []byte("\n"), k8sFieldsSource[:i+1], k8sFieldsSource[i+len(clause):])
}()

// SchemaSource returns the embedded CUE schema, for `netspec schema` and for
// users who want to vet their files with cue directly.
func SchemaSource() []byte { return schemaSource }

// Version identifies the embedded schema; it changes when the schema does.
var Version = func() string {
	h := sha256.Sum256(schemaSource)
	return hex.EncodeToString(h[:8])
}()

// validator checks raw objects against the CUE schema. It is not safe for
// concurrent use: each worker has its own. The compiled schema it walks is
// the process's one (compiledSchema), which validators share.
type validator struct {
	c    *compiled
	used int // CUE evaluations made; memo holds at most as many values
	memo map[memoKey]string
	path diag.Path // the walk's path, reused from object to object
	keys []string  // the walk's stack of sorted keys
	in   *interner // shares values among the objects decoded
}

func newValidator() *validator {
	return &validator{c: compiledSchema(), memo: map[memoKey]string{}, path: make(diag.Path, 0, 32), in: newInterner()}
}

// compileSchema compiles the embedded schema into ctx.
func compileSchema(ctx *cue.Context) cue.Value {
	s := ctx.CompileBytes(schemaSource, cue.Filename("schema/netspec.cue"))
	if err := s.Err(); err != nil {
		panic(fmt.Sprintf("embedded schema does not compile: %v", err)) // a build defect, not user input
	}
	return s
}

// compiledSchema returns the embedded schema compiled into shapes, made
// once per process: compiling it costs 12-15 ms and 5 MB, most of what a
// small Load costs, and every worker of every Load, stream and reload
// shares the result. Sharing is safe: the shapes are never written after
// compile, and CUE values, and Encode on their context, may be used from
// several goroutines at once (cuelang.org/go since v0.17: "methods may be
// called concurrently"); a CUE context does not grow with the values
// evaluated in it. TestCompiledSchemaConcurrent runs Loads side by side
// under -race; TestCompiledSchemaEqualsFresh compares with fresh compiles.
var compiledSchema = sync.OnceValue(func() *compiled {
	ctx := cuecontext.New()
	return compile(ctx, compileSchema(ctx))
})

// use counts one CUE evaluation.
func (v *validator) use() { v.used++ }

// check validates one raw object: the schema first (shape and values),
// then the Go rules of rules.go on the decoded value. It returns the object
// when it decoded.
func (v *validator) check(r rawObject, dl *diag.List) *Object {
	var local diag.List
	v.walk(&local, r, r.raw, v.c.kinds[r.kind], v.path[:0])
	obj, err := decode(r, v.in)
	if err != nil && local.Errors() > 0 {
		checkPruned(r, &local)
	}
	if err != nil {
		if local.Errors() == 0 {
			local.Errorf(r.locate(nil), nil, "cannot decode %s: %v", r.kind, err)
		}
		dl.Add(local...)
		return nil
	}
	rep := &reporter{dl: &local, locate: r.locate, have: pathsOf(local)}
	checkObject(obj, rep)
	dl.Add(local...)
	return obj
}

// checkPruned runs the rules of rules.go on an object that cannot be
// decoded because the schema refused a value of the wrong type (port: "80"),
// so that its other mistakes are still reported in the same run: the
// refused values are left out, and findings at or below them are dropped.
func checkPruned(r rawObject, local *diag.List) {
	pruned := copyRaw(r.raw).(map[string]any)
	for _, d := range *local {
		deleteRaw(pruned, d.Path)
	}
	r.raw = pruned
	obj, err := decode(r, nil)
	if err != nil {
		return
	}
	var more diag.List
	checkObject(obj, &reporter{dl: &more, locate: r.locate, have: pathsOf(*local)})
	for _, d := range more {
		below := false
		for _, l := range *local {
			below = below || len(l.Path) > 0 && len(l.Path) <= len(d.Path) && l.Path.String() == d.Path[:len(l.Path)].String()
		}
		if !below {
			local.Add(d)
		}
	}
}

func copyRaw(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = copyRaw(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = copyRaw(e)
		}
		return l
	}
	return v
}

// deleteRaw removes the value at p (a list element becomes null).
func deleteRaw(v any, p diag.Path) {
	if len(p) == 0 {
		return
	}
	parent, ok := lookupRaw(v, p[:len(p)-1])
	if !ok {
		return
	}
	switch e := p[len(p)-1].(type) {
	case string:
		if m, ok := parent.(map[string]any); ok {
			delete(m, e)
		}
	case int:
		if l, ok := parent.([]any); ok && e >= 0 && e < len(l) {
			l[e] = nil
		}
	}
}

// decode turns a raw object into its typed form with the Kubernetes
// defaults applied. The defaults are the same as the schema's; a test
// checks that both agree on every example. in, when not nil, shares equal
// values with the objects decoded before (interner).
func decode(r rawObject, in *interner) (*Object, error) {
	o := &Object{Src: r.src, Kind: r.kind}
	o.APIVersion, _ = r.raw["apiVersion"].(string)
	var target any
	switch r.kind {
	case KindService:
		o.Service = &Service{}
		target = o.Service
	case KindEndpoints:
		o.Endpoints = &Endpoints{}
		target = o.Endpoints
	case KindEndpointSlice:
		o.EndpointSlice = &EndpointSlice{}
		target = o.EndpointSlice
	case KindPod:
		o.Pod = &Pod{}
		target = o.Pod
	case KindNode:
		o.Node = &Node{}
		target = o.Node
	case KindCluster:
		o.Cluster = &Cluster{Spec: DefaultClusterSpec()}
		target = o.Cluster
	}
	if err := decodeValue(reflect.ValueOf(target).Elem(), r.raw, in); err != nil {
		return nil, err
	}
	applyDefaults(o, r.raw)
	if in != nil {
		in.shareSlices(o)
	}
	return o, nil
}

func lookupRaw(v any, p diag.Path) (any, bool) {
	for _, e := range p {
		switch e := e.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil, false
			}
			if v, ok = m[e]; !ok {
				return nil, false
			}
		case int:
			l, ok := v.([]any)
			if !ok || e < 0 || e >= len(l) {
				return nil, false
			}
			v = l[e]
		}
	}
	return v, true
}

// formatValue prints a user's value for a message: strings quoted, maps and
// lists abbreviated.
func formatValue(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case nil:
		return "null"
	}
	return fmt.Sprint(v)
}

func pathsOf(l diag.List) map[string]bool {
	m := map[string]bool{}
	for _, d := range l {
		m[d.Path.String()] = true
	}
	return m
}
