// Package diag holds positioned diagnostics: the errors and warnings that
// netspec reports about a tree, each pointing at a file, line and column.
//
// Every stage (loading, schema validation, cross-object checks, allocation)
// reports into a List so that a user sees all mistakes of a tree in one run,
// sorted by file and position.
package diag

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Severity says whether a diagnostic makes a tree invalid.
type Severity int

const (
	// Error makes the tree invalid: validate exits 1 and nothing is applied.
	Error Severity = iota
	// Warning is reported but never changes the exit code.
	Warning
)

// Pos is a position in a file of the tree. File is slash-separated and
// relative to the tree root; Line and Col are 1-based, 0 when unknown.
type Pos struct {
	File string
	Line int
	Col  int
}

// String formats the position as file:line:col, leaving out unknown parts.
func (p Pos) String() string {
	switch {
	case p.File == "":
		return "-"
	case p.Line == 0:
		return p.File
	case p.Col == 0:
		return fmt.Sprintf("%s:%d", p.File, p.Line)
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// Path is a field path inside an object: string elements are keys, int
// elements are list indexes. Its String form is spec.ports[1].name.
type Path []any

// Key returns a copy of p extended by one map key.
func (p Path) Key(k string) Path { return p.append(k) }

// Index returns a copy of p extended by one list index.
func (p Path) Index(i int) Path { return p.append(i) }

func (p Path) append(e any) Path {
	q := make(Path, len(p), len(p)+1)
	copy(q, p)
	return append(q, e)
}

// String formats the path the way kubectl explain and Kubernetes API errors
// do: keys joined by dots, indexes in brackets; keys that are not plain
// identifiers (label keys such as app.kubernetes.io/name) are quoted.
func (p Path) String() string {
	var b strings.Builder
	for _, e := range p {
		switch e := e.(type) {
		case int:
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(e))
			b.WriteByte(']')
		case string:
			if plainKey(e) {
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(e)
			} else {
				b.WriteByte('[')
				b.WriteString(strconv.Quote(e))
				b.WriteByte(']')
			}
		}
	}
	return b.String()
}

func plainKey(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '_', r == '$':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// Diagnostic is one finding about the tree.
type Diagnostic struct {
	Pos      Pos
	Path     Path // field path inside the object; empty for file-level findings
	Severity Severity
	Msg      string // lower-case, no trailing period
}

// String formats the diagnostic as "file:line:col: path: message", with
// "warning: " before the path for warnings.
func (d Diagnostic) String() string {
	var b strings.Builder
	b.WriteString(d.Pos.String())
	b.WriteString(": ")
	if d.Severity == Warning {
		b.WriteString("warning: ")
	}
	if len(d.Path) > 0 {
		b.WriteString(d.Path.String())
		b.WriteString(": ")
	}
	b.WriteString(d.Msg)
	return b.String()
}

// Error makes a Diagnostic usable as an error.
func (d Diagnostic) Error() string { return d.String() }

// List collects diagnostics. The zero value is ready to use.
type List []Diagnostic

// Errorf adds an error at pos and path.
func (l *List) Errorf(pos Pos, path Path, format string, args ...any) {
	*l = append(*l, Diagnostic{Pos: pos, Path: path, Severity: Error, Msg: fmt.Sprintf(format, args...)})
}

// Warnf adds a warning at pos and path.
func (l *List) Warnf(pos Pos, path Path, format string, args ...any) {
	*l = append(*l, Diagnostic{Pos: pos, Path: path, Severity: Warning, Msg: fmt.Sprintf(format, args...)})
}

// Add appends diagnostics.
func (l *List) Add(ds ...Diagnostic) { *l = append(*l, ds...) }

// Errors counts the diagnostics of severity Error.
func (l List) Errors() int {
	n := 0
	for _, d := range l {
		if d.Severity == Error {
			n++
		}
	}
	return n
}

// Warnings counts the diagnostics of severity Warning.
func (l List) Warnings() int { return len(l) - l.Errors() }

// Files counts the distinct files that have at least one error.
func (l List) Files() int {
	seen := map[string]bool{}
	for _, d := range l {
		if d.Severity == Error {
			seen[d.Pos.File] = true
		}
	}
	return len(seen)
}

// Sort orders the list by file, line, column, path and message, and drops
// exact duplicates, so that output is stable whatever order checks ran in.
func (l *List) Sort() {
	s := *l
	sort.SliceStable(s, func(i, j int) bool { return less(s[i], s[j]) })
	out := s[:0]
	for i, d := range s {
		if i > 0 && d.String() == s[i-1].String() {
			continue
		}
		out = append(out, d)
	}
	*l = out
}

func less(a, b Diagnostic) bool {
	if a.Pos.File != b.Pos.File {
		return a.Pos.File < b.Pos.File
	}
	if a.Pos.Line != b.Pos.Line {
		return a.Pos.Line < b.Pos.Line
	}
	if a.Pos.Col != b.Pos.Col {
		return a.Pos.Col < b.Pos.Col
	}
	if ps, qs := a.Path.String(), b.Path.String(); ps != qs {
		return ps < qs
	}
	if a.Severity != b.Severity {
		return a.Severity < b.Severity
	}
	return a.Msg < b.Msg
}

// Err returns the list as an error when it holds at least one error, else nil.
func (l List) Err() error {
	if l.Errors() == 0 {
		return nil
	}
	return ListError(l)
}

// ListError is a List used as an error value.
type ListError List

func (e ListError) Error() string {
	var b strings.Builder
	n := 0
	for _, d := range e {
		if d.Severity != Error {
			continue
		}
		if n > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(d.String())
		n++
	}
	return b.String()
}
