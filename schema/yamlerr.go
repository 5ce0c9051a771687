package schema

import (
	"bytes"
	"io"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"netspec.dev/netspec/internal/diag"
)

// yamlErrAt places a yaml.v3 parse error of data at the line and column
// of the mistake, and says what it is. yaml.v3 reports the line where the
// enclosing block began, often lines before the mistake, and no column:
// a tab in an indentation is found by looking for it from that line on,
// any other mistake as the first line whose prefix of the file fails to
// parse with the same error.
func yamlErrAt(file string, data []byte, err error) (diag.Pos, string) {
	pos, msg := yamlErrPos(file, err), yamlErrMsg(err)
	lines := bytes.SplitAfter(data, []byte("\n"))
	from := max(pos.Line, 1)
	if strings.Contains(msg, "tab") || strings.Contains(msg, "cannot start any token") {
		for i := from - 1; i < len(lines); i++ {
			indent := len(lines[i]) - len(bytes.TrimLeft(lines[i], " \t"))
			if t := bytes.IndexByte(lines[i][:indent], '\t'); t >= 0 {
				return diag.Pos{File: file, Line: i + 1, Col: t + 1}, "invalid YAML: a tab in the indentation (YAML indents with spaces only)"
			}
		}
	}
	if pos.Line == 0 {
		return pos, msg
	}
	// The first prefix of n lines that fails as the whole file does: its
	// last line holds the mistake.
	want := yamlErrMsg(err)
	n := from + sort.Search(len(lines)-from+1, func(i int) bool {
		return prefixFails(lines[:from+i], want)
	})
	if n > len(lines) {
		return pos, msg
	}
	line := lines[n-1]
	col := len(line) - len(bytes.TrimLeft(line, " ")) + 1
	if strings.Contains(msg, "expected key") || strings.Contains(msg, "mapping values are not allowed") || strings.Contains(msg, "expected '-'") {
		msg += " (is this line indented as the keys above it?)"
	}
	return diag.Pos{File: file, Line: n, Col: col}, msg
}

// prefixFails tells whether the YAML of lines fails to parse with the
// message want.
func prefixFails(lines [][]byte, want string) bool {
	dec := yaml.NewDecoder(bytes.NewReader(bytes.Join(lines, nil)))
	for {
		var n yaml.Node
		err := decodeNode(dec, &n)
		if err == io.EOF {
			return false
		}
		if err != nil {
			return yamlErrMsg(err) == want
		}
	}
}
