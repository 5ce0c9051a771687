package schema

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	cueerrors "cuelang.org/go/cue/errors"

	"netspec.dev/netspec/internal/diag"
)

//go:embed netspec.cue
var schemaSource []byte

// Source returns the embedded CUE schema, for `netspec schema` and for
// users who want to vet their files with cue directly.
func SchemaSource() []byte { return schemaSource }

// Version identifies the embedded schema; it changes when the schema does.
var Version = func() string {
	h := sha256.Sum256(schemaSource)
	return hex.EncodeToString(h[:8])
}()

// objectsPerContext bounds how many objects one CUE context evaluates
// before it is replaced: CUE keeps everything it evaluates, so a context
// per tree would grow without bound, and a context per object would pay
// the schema compile every time.
const objectsPerContext = 256

// validator checks raw objects against the CUE schema. It is not safe for
// concurrent use: each worker has its own.
type validator struct {
	ctx  *cue.Context
	defs map[string]cue.Value
	used int
}

func newValidator() *validator {
	v := &validator{}
	v.reset()
	return v
}

func (v *validator) reset() {
	v.ctx = cuecontext.New()
	s := v.ctx.CompileBytes(schemaSource, cue.Filename("schema/netspec.cue"))
	if err := s.Err(); err != nil {
		panic(fmt.Sprintf("embedded schema does not compile: %v", err)) // a build defect, not user input
	}
	v.defs = map[string]cue.Value{}
	for _, k := range []string{KindService, KindEndpoints, KindEndpointSlice, KindPod, KindNode, KindCluster} {
		v.defs[k] = s.LookupPath(cue.ParsePath("#" + k))
	}
	v.used = 0
}

// check validates one raw object: the CUE schema first, then the Go rules
// of rules.go on the decoded value. It returns the object when it decoded.
func (v *validator) check(r rawObject, dl *diag.List) *Object {
	if v.used >= objectsPerContext {
		v.reset()
	}
	v.used++
	def := v.defs[r.kind]
	var local diag.List
	checkShape(&local, r, r.raw, kindShape(r.kind), nil)
	u := def.Unify(v.ctx.Encode(r.raw))
	if err := u.Validate(cue.Concrete(true), cue.All()); err != nil {
		cueDiagnostics(&local, u, r, err)
	}
	obj, err := decode(r)
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

// decode turns a raw object into its typed form with the Kubernetes
// defaults applied. The defaults are the same as the schema's; a test
// checks that both agree on every example.
func decode(r rawObject) (*Object, error) {
	b, err := json.Marshal(r.raw)
	if err != nil {
		return nil, err
	}
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
	if err := json.Unmarshal(b, target); err != nil {
		return nil, err
	}
	applyDefaults(o, r.raw)
	return o, nil
}

// cueDiagnostics turns CUE's errors into one diagnostic per field path,
// worded for a person: the schema's @msg for the field when it has one, an
// unknown-field message with a suggestion, or a cleaned-up CUE message.
func cueDiagnostics(dl *diag.List, u cue.Value, r rawObject, err error) {
	type group struct {
		path diag.Path
		msgs []string
	}
	groups := map[string]*group{}
	var order []string
	for _, e := range cueerrors.Errors(err) {
		var p diag.Path
		for i, s := range e.Path() {
			if i == 0 && strings.HasPrefix(s, "#") {
				continue
			}
			if n, err := strconv.Atoi(s); err == nil {
				p = append(p, n)
			} else {
				p = append(p, s)
			}
		}
		format, args := e.Msg()
		msg := fmt.Sprintf(format, args...)
		if strings.Contains(msg, "required but not present") {
			continue // reported by checkShape, which sees all of them
		}
		k := p.String()
		g := groups[k]
		if g == nil {
			g = &group{path: p}
			groups[k] = g
			order = append(order, k)
		}
		g.msgs = append(g.msgs, msg)
	}
	for _, k := range order {
		g := groups[k]
		val, has := lookupRaw(r.raw, g.path)
		dl.Errorf(r.locate(g.path), g.path, "%s", describe(u, g.path, val, has, g.msgs))
	}
}

func describe(u cue.Value, p diag.Path, val any, has bool, msgs []string) string {
	for _, m := range msgs {
		if strings.Contains(m, "field not allowed") {
			return unknownField(u, p)
		}
	}
	for _, m := range msgs {
		if i := strings.Index(m, "mismatched types "); i >= 0 {
			want := m[i+len("mismatched types "):]
			want = strings.TrimSuffix(want, ")")
			parts := strings.SplitN(want, " and ", 2)
			got := typeName(val)
			exp := parts[0]
			if len(parts) == 2 && strings.HasPrefix(got, "a") && strings.Contains(got, parts[0]) {
				exp = parts[1]
			}
			_ = exp
			if a := fieldMsg(u, p); a != "" {
				return fmt.Sprintf("%s %s", formatValue(val), a)
			}
			return fmt.Sprintf("%s is %s, which this field cannot hold", formatValue(val), got)
		}
	}
	if a := fieldMsg(u, p); a != "" && has {
		return fmt.Sprintf("%s %s", formatValue(val), a)
	}
	// Enumerations without a message: list the allowed values.
	var allowed []string
	for _, m := range msgs {
		if strings.HasPrefix(m, "conflicting values ") {
			rest := strings.TrimPrefix(m, "conflicting values ")
			if i := strings.Index(rest, " and "); i >= 0 {
				allowed = append(allowed, rest[:i])
			}
		}
	}
	if len(allowed) > 0 && has {
		sort.Strings(allowed)
		if len(allowed) == 1 {
			return fmt.Sprintf("%s must be %s", formatValue(val), allowed[0])
		}
		return fmt.Sprintf("%s is not one of %s", formatValue(val), strings.Join(allowed, ", "))
	}
	for _, m := range msgs {
		if !strings.Contains(m, "errors in empty disjunction") {
			return strings.TrimSpace(m)
		}
	}
	return strings.TrimSpace(msgs[0])
}

// fieldMsg returns the @msg attribute of the schema field at p.
func fieldMsg(u cue.Value, p diag.Path) string {
	f := u.LookupPath(cuePath(p))
	if !f.Exists() {
		return ""
	}
	a := f.Attribute("msg")
	if a.Err() != nil {
		return ""
	}
	s, err := a.String(0)
	if err != nil {
		return ""
	}
	return s
}

func unknownField(u cue.Value, p diag.Path) string {
	name := fmt.Sprint(p[len(p)-1])
	parent := u.LookupPath(cuePath(p[:len(p)-1]))
	var known []string
	if it, err := parent.Fields(cue.Optional(true)); err == nil {
		for it.Next() {
			s := it.Selector()
			if s.IsString() {
				known = append(known, s.Unquoted())
			}
		}
	}
	msg := fmt.Sprintf("unknown field %q", name)
	if best := closest(name, known); best != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", best)
	}
	return msg
}

// closest returns the known name nearest to name, if it is near enough to
// be a typo.
func closest(name string, known []string) string {
	best, bestD := "", 1<<30
	for _, k := range known {
		d := editDistance(strings.ToLower(name), strings.ToLower(k))
		if d < bestD || d == bestD && k < best {
			best, bestD = k, d
		}
	}
	if bestD <= 2 || bestD <= len(name)/3 {
		return best
	}
	return ""
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			c = min(c, prev[j]+1, cur[j-1]+1)
			cur[j] = c
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func cuePath(p diag.Path) cue.Path {
	sels := make([]cue.Selector, 0, len(p))
	for _, e := range p {
		switch e := e.(type) {
		case string:
			sels = append(sels, cue.Str(e))
		case int:
			sels = append(sels, cue.Index(e))
		}
	}
	return cue.MakePath(sels...)
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
