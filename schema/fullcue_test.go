package schema

import (
	"fmt"
	"strconv"
	"strings"

	"netspec.dev/netspec/internal/suggest"

	"cuelang.org/go/cue"
	cueerrors "cuelang.org/go/cue/errors"

	"netspec.dev/netspec/internal/diag"
)

// The reference validator: whole-object unification, as the schema would be
// used without netspec's shape walk. TestShapeAgreesWithCUE compares the two.

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
			} else if u, err := strconv.Unquote(s); err == nil {
				p = append(p, u)
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
	return describeLeaf(fieldMsg(u, p), val, msgs)
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
	if best, ok := suggest.Closest(name, known); ok {
		msg += fmt.Sprintf(" (did you mean %q?)", best)
	}
	return msg
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
