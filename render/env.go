package render

import (
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
	head := "# service environment of namespace " + f.Namespace + ", as the kubelet sets it — written by netspec\n"
	vars := f.Vars
	if !slices.IsSortedFunc(vars, compareEnvName) {
		vars = slices.Clone(vars)
		slices.SortStableFunc(vars, compareEnvName)
	}
	// Sized exactly: a daemon keeps its env files (FilesMemo).
	size := len(head)
	for _, v := range vars {
		size += len(v.Name) + len(envValue(v.Value)) + 2
	}
	b := make([]byte, 0, size)
	b = append(b, head...)
	for _, v := range vars {
		b = append(b, v.Name...)
		b = append(b, '=')
		b = append(b, envValue(v.Value)...)
		b = append(b, '\n')
	}
	return b
}

// compareEnvName orders variables by name.
func compareEnvName(x, y plan.EnvVar) int { return strings.Compare(x.Name, y.Name) }

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
