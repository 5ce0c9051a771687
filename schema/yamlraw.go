package schema

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"netspec.dev/netspec/internal/diag"
)

// Limits that keep hostile YAML from exhausting memory or the stack.
const (
	maxDepth = 100
	// An alias expansion may grow a document to this many nodes, or to
	// aliasRatio times its written size, whichever is larger.
	minAliasBudget = 100_000
	aliasRatio     = 20
)

var errAliasBomb = errors.New("YAML aliases expand without bound (\"billion laughs\"); write the objects out instead of nesting anchors")

// converter turns a yaml.Node tree into plain Go values (map[string]any,
// []any, string, int64, float64, bool, nil), expanding aliases and merge
// keys within a budget.
type converter struct {
	budget int
	err    error
	errPos diag.Pos
	file   string
}

func countNodes(n *yaml.Node) int {
	if n == nil {
		return 0
	}
	c := 1
	for _, k := range n.Content {
		c += countNodes(k)
	}
	return c
}

func newConverter(file string, root *yaml.Node) *converter {
	budget := aliasRatio * countNodes(root)
	if budget < minAliasBudget {
		budget = minAliasBudget
	}
	return &converter{budget: budget, file: file}
}

func (c *converter) fail(n *yaml.Node, err error) {
	if c.err == nil {
		c.err = err
		c.errPos = diag.Pos{File: c.file, Line: n.Line, Col: n.Column}
	}
}

func (c *converter) value(n *yaml.Node, depth int) any {
	if c.err != nil {
		return nil
	}
	c.budget--
	if c.budget < 0 {
		c.fail(n, errAliasBomb)
		return nil
	}
	if depth > maxDepth {
		c.fail(n, fmt.Errorf("nesting deeper than %d levels", maxDepth))
		return nil
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil
		}
		return c.value(n.Content[0], depth)
	case yaml.AliasNode:
		return c.value(n.Alias, depth+1)
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, e := range n.Content {
			out = append(out, c.value(e, depth+1))
		}
		return out
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		c.mapping(m, n, depth)
		return m
	case yaml.ScalarNode:
		return c.scalar(n)
	}
	c.fail(n, fmt.Errorf("unsupported YAML node"))
	return nil
}

// mapping fills m from n. Merge keys (<<) are applied first so that the
// mapping's own keys win, as YAML 1.1 specifies.
func (c *converter) mapping(m map[string]any, n *yaml.Node, depth int) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
			c.merge(m, v, depth)
		}
	}
	seen := make(map[string]bool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
			continue
		}
		if k.Kind != yaml.ScalarNode {
			c.fail(k, fmt.Errorf("a mapping key must be a scalar"))
			return
		}
		if seen[k.Value] {
			if depth == 0 && (k.Value == "apiVersion" || k.Value == "kind") {
				// cat a.yaml b.yaml: two objects run together.
				c.fail(k, fmt.Errorf("key %q is repeated in this mapping: is this a second object? separate documents with a line \"---\"", k.Value))
				return
			}
			c.fail(k, fmt.Errorf("key %q is repeated in this mapping", k.Value))
			return
		}
		seen[k.Value] = true
		m[k.Value] = c.value(v, depth+1)
	}
}

func (c *converter) merge(m map[string]any, v *yaml.Node, depth int) {
	// Merges count against the alias budget and the depth limit as values
	// do: a mapping that merges itself (&m {<<: *m}) recurses forever, and
	// nested merge lists grow exponentially.
	if c.err != nil {
		return
	}
	c.budget--
	if c.budget < 0 {
		c.fail(v, errAliasBomb)
		return
	}
	if depth > maxDepth {
		c.fail(v, fmt.Errorf("nesting deeper than %d levels", maxDepth))
		return
	}
	at := v // report at the merge's value as written, not where an alias leads
	for v.Kind == yaml.AliasNode && v.Alias != nil {
		v = v.Alias
	}
	switch v.Kind {
	case yaml.MappingNode:
		sub := map[string]any{}
		c.mapping(sub, v, depth+1)
		for k, x := range sub {
			if _, ok := m[k]; !ok {
				m[k] = x
			}
		}
	case yaml.SequenceNode:
		for _, e := range v.Content {
			c.merge(m, e, depth+1)
		}
	default:
		c.fail(at, fmt.Errorf("a merge key (<<) needs a mapping or a list of mappings"))
	}
}

func (c *converter) scalar(n *yaml.Node) any {
	switch n.ShortTag() {
	case "!!null":
		return nil
	case "!!bool":
		b, err := strconv.ParseBool(strings.ToLower(n.Value))
		if err != nil {
			return n.Value
		}
		return b
	case "!!int":
		s := strings.ReplaceAll(n.Value, "_", "")
		i, err := strconv.ParseInt(s, 0, 64)
		if err != nil {
			if u, err2 := strconv.ParseUint(s, 0, 64); err2 == nil && u > math.MaxInt64 {
				c.fail(n, fmt.Errorf("integer %s is too large", n.Value))
				return nil
			}
			return n.Value
		}
		return i
	case "!!float":
		f, err := strconv.ParseFloat(n.Value, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			c.fail(n, fmt.Errorf("%s is not a finite number", n.Value))
			return nil
		}
		if f == math.Trunc(f) && math.Abs(f) < 1<<63 {
			// kubectl turns YAML into JSON (sigs.k8s.io/yaml), which
			// writes 80.0 and 8e1 as 80: an integer to the API server.
			return int64(f)
		}
		return f
	case "!!str":
		if n.Style == 0 { // plain, as written: kubectl reads YAML 1.1
			if b, ok := yaml11Bool(n.Value); ok {
				return b
			}
		}
	}
	return n.Value
}

// locateYAML finds the node at path below root and returns its position,
// or the position of the deepest node on the way when the path goes on
// past what the document holds (a missing field is reported at its parent).
func locateYAML(file string, root *yaml.Node, p diag.Path) diag.Pos {
	return locateYAMLNode(file, root, p, false)
}

// locateYAMLKey is locateYAML for a map key: it points at the key itself,
// for findings about the field rather than its value (unknown fields).
func locateYAMLKey(file string, root *yaml.Node, p diag.Path) diag.Pos {
	return locateYAMLNode(file, root, p, true)
}

func locateYAMLNode(file string, root *yaml.Node, p diag.Path, key bool) diag.Pos {
	n := root
	for n != nil && (n.Kind == yaml.DocumentNode) && len(n.Content) > 0 {
		n = n.Content[0]
	}
	if n == nil {
		return diag.Pos{File: file}
	}
	for i, e := range p {
		for n.Kind == yaml.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		if key && i == len(p)-1 {
			if k, ok := e.(string); ok && n.Kind == yaml.MappingNode {
				for j := 0; j+1 < len(n.Content); j += 2 {
					if n.Content[j].Value == k {
						return diag.Pos{File: file, Line: n.Content[j].Line, Col: n.Content[j].Column}
					}
				}
			}
		}
		next := childNode(n, e)
		if next == nil {
			break
		}
		n = next
	}
	return diag.Pos{File: file, Line: n.Line, Col: n.Column}
}

func childNode(n *yaml.Node, e any) *yaml.Node {
	switch e := e.(type) {
	case string:
		if n.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == e && n.Content[i].Tag != "!!merge" {
				return n.Content[i+1]
			}
		}
		for i := 0; i+1 < len(n.Content); i += 2 { // a key that came from a merge
			if n.Content[i].Tag == "!!merge" {
				v := n.Content[i+1]
				for v.Kind == yaml.AliasNode && v.Alias != nil {
					v = v.Alias
				}
				if c := childNode(v, e); c != nil {
					return c
				}
			}
		}
	case int:
		if n.Kind == yaml.SequenceNode && e >= 0 && e < len(n.Content) {
			return n.Content[e]
		}
	}
	return nil
}
