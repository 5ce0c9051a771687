package render

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"netspec.dev/netspec/plan"
)

// EnvFile renders the service environment of one namespace, as the kubelet
// sets it in a pod's containers: a header comment, then one KEY=value a
// line, sorted by key (stable, so a repeated key keeps the plan's order).
//
//	# service environment of namespace shop, as the kubelet sets it — written by netspec
//	WEB_PORT=tcp://10.96.0.10:80
//	WEB_SERVICE_HOST=10.96.0.10
//
// Values are written as they are, unquoted, unless they contain a space or
// other white space (newline included), a double or single quote, a
// backslash, a control character or invalid UTF-8: such a value is written
// double-quoted with Go escapes (strconv.Quote), e.g. A="x y\n". The
// kubelet's values (IPs, ports, tcp://ip:port URLs) never need it. A reader
// takes a value that starts with a double quote as a Go quoted string
// (strconv.Unquote), any other value literally up to the end of the line.
func EnvFile(f plan.EnvFile) []byte {
	var b bytes.Buffer
	b.WriteString("# service environment of namespace " + f.Namespace + ", as the kubelet sets it — written by netspec\n")
	vars := slices.Clone(f.Vars)
	slices.SortStableFunc(vars, func(x, y plan.EnvVar) int { return strings.Compare(x.Name, y.Name) })
	for _, v := range vars {
		b.WriteString(v.Name)
		b.WriteByte('=')
		b.WriteString(envValue(v.Value))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// envValue quotes v when it must be; see EnvFile.
func envValue(v string) string {
	if !utf8.ValidString(v) {
		return strconv.Quote(v)
	}
	for _, r := range v {
		if r == '"' || r == '\'' || r == '\\' || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return strconv.Quote(v)
		}
	}
	return v
}
