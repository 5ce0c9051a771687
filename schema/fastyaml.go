package schema

import (
	"bytes"
	"strconv"
	"strings"
)

// fastYAML reads the plain block YAML that generators and kubectl write
// (block mappings and sequences, one-line plain and quoted scalars, comments,
// "---" between documents) straight into the values the converter makes of
// yaml.v3's nodes, several times faster and without the node tree. It
// returns ok false for anything else (flow collections other than {} and [],
// anchors, tags, multi-line scalars, escapes, tabs, non-ASCII bytes, numbers
// other than plain decimal integers, duplicate keys, errors of any kind):
// such a file is read by yaml.v3 as before. docs holds the value of each
// document as yaml.v3's Decoder counts them (nil for an empty one), so that
// positions, needed only for findings, are taken from yaml.v3's nodes of the
// same document later. TestFastYAMLAgreesWithYAMLv3 holds it to that.
func fastYAML(data []byte) (docs []any, ok bool) { return readFast(data, nil) }

// readFast is fastYAML taking the strings it reads from in (and adding
// them to it), so that equal strings of the objects a validator decodes
// are one; in nil: only the common ones are shared.
func readFast(data []byte, in *interner) (docs []any, ok bool) {
	for _, c := range data {
		if c >= 0x7f || c < ' ' && c != '\n' {
			return nil, false
		}
	}
	p := &fastParser{in: in}
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		indent := 0
		for indent < len(line) && line[indent] == ' ' {
			indent++
		}
		text := bytes.TrimRight(line[indent:], " ")
		if len(text) == 0 || text[0] == '#' {
			continue // blank or comment
		}
		if indent == 0 && (bytes.HasPrefix(text, []byte("---")) || bytes.HasPrefix(text, []byte("...")) || text[0] == '%') {
			if string(text) != "---" {
				return nil, false
			}
			text = nil // a document starts
		}
		p.lines = append(p.lines, fastLine{indent: indent, text: text})
	}
	// Documents: one before the first "---" if anything is there, and one
	// after each "---".
	for len(p.lines) > 0 {
		if p.lines[0].text != nil {
			v, ok := p.document()
			if !ok {
				return nil, false
			}
			docs = append(docs, v)
		}
		for len(p.lines) > 0 && p.lines[0].text == nil {
			p.lines = p.lines[1:]
			if len(p.lines) == 0 || p.lines[0].text == nil {
				docs = append(docs, nil) // an empty document
			}
		}
	}
	return docs, true
}

type fastLine struct {
	indent int    // columns of spaces before text
	text   []byte // without indentation and trailing spaces; nil for "---"
}

type fastParser struct {
	lines []fastLine // the lines left to read, but blank and comment lines
	depth int
	in    *interner // nil: share only the common strings
}

// maxFastDepth bounds the nesting the fast reader follows; deeper
// documents go to yaml.v3 and the converter's limit.
const maxFastDepth = 50

// next returns the next line of the document, false at its end.
func (p *fastParser) next() (fastLine, bool) {
	if len(p.lines) == 0 || p.lines[0].text == nil {
		return fastLine{}, false
	}
	return p.lines[0], true
}

// document reads one document, which must be a block mapping.
func (p *fastParser) document() (any, bool) {
	l, _ := p.next()
	if isEntry(l.text) {
		return nil, false
	}
	m, ok := p.mapping(l.indent)
	if !ok {
		return nil, false
	}
	if _, more := p.next(); more {
		return nil, false // text after the mapping, less indented
	}
	return m, true
}

func isEntry(text []byte) bool {
	return len(text) > 0 && text[0] == '-' && (len(text) == 1 || text[1] == ' ')
}

// block reads the block node whose first line is indented by col.
func (p *fastParser) block(col int) (any, bool) {
	l, _ := p.next()
	if isEntry(l.text) {
		return p.sequence(col)
	}
	return p.mapping(col)
}

func (p *fastParser) mapping(col int) (map[string]any, bool) {
	if p.depth++; p.depth > maxFastDepth {
		return nil, false
	}
	defer func() { p.depth-- }()
	m := map[string]any{}
	for {
		l, ok := p.next()
		if !ok || l.indent < col {
			return m, true
		}
		if l.indent > col || isEntry(l.text) {
			return nil, false
		}
		key, rest, ok := p.fastKey(l.text)
		if !ok {
			return nil, false
		}
		if _, dup := m[key]; dup {
			return nil, false
		}
		p.lines = p.lines[1:]
		rest = bytes.TrimLeft(rest, " ")
		if len(rest) > 0 && rest[0] != '#' {
			v, ok := p.fastInline(rest)
			if !ok {
				return nil, false
			}
			m[key] = v
			continue
		}
		// The value is on the lines below: more indented, or a sequence
		// at the key's own indentation; else it is null.
		var v any
		if n, ok := p.next(); ok && (n.indent > col || n.indent == col && isEntry(n.text)) {
			if v, ok = p.block(n.indent); !ok {
				return nil, false
			}
		}
		m[key] = v
	}
}

func (p *fastParser) sequence(col int) ([]any, bool) {
	if p.depth++; p.depth > maxFastDepth {
		return nil, false
	}
	defer func() { p.depth-- }()
	out := make([]any, 0, 2)
	for {
		l, ok := p.next()
		if !ok || l.indent < col {
			return out, true
		}
		if l.indent > col {
			return nil, false
		}
		if !isEntry(l.text) {
			return out, true // the mapping this sequence is a value of goes on
		}
		rest := l.text[1:]
		sp := 0
		for sp < len(rest) && rest[sp] == ' ' {
			sp++
		}
		rest = rest[sp:]
		if len(rest) == 0 || rest[0] == '#' {
			// "-" alone: the item is on the lines below, or null.
			p.lines = p.lines[1:]
			var v any
			if n, ok := p.next(); ok && n.indent > col {
				if v, ok = p.block(n.indent); !ok {
					return nil, false
				}
			}
			out = append(out, v)
			continue
		}
		if isEntry(rest) {
			return nil, false // "- - x"
		}
		if _, _, isKey := p.fastKey(rest); isKey {
			// "- key: value": a mapping whose keys line up after "- ".
			p.lines[0] = fastLine{indent: col + 1 + sp, text: rest}
			v, ok := p.mapping(col + 1 + sp)
			if !ok {
				return nil, false
			}
			out = append(out, v)
			continue
		}
		v, ok := p.fastInline(rest)
		if !ok {
			return nil, false
		}
		p.lines = p.lines[1:]
		out = append(out, v)
	}
}

// fastKey splits "key: rest" (or "key:" at the end of the line); ok is false
// when text is not such a line with a plain or quoted key fastYAML reads.
func (p *fastParser) fastKey(text []byte) (key string, rest []byte, ok bool) {
	if len(text) == 0 {
		return "", nil, false
	}
	var after []byte
	switch text[0] {
	case '"', '\'':
		k, n, ok := p.fastQuoted(text)
		if !ok {
			return "", nil, false
		}
		if len(k) > maxFastKey {
			return "", nil, false
		}
		key, after = k, bytes.TrimLeft(text[n:], " ")
		if len(after) == 0 || after[0] != ':' || len(after) > 1 && after[1] != ' ' {
			return "", nil, false
		}
		return key, after[1:], true
	}
	if isIndicator(text[0]) {
		return "", nil, false
	}
	i := 0
	for ; i < len(text); i++ {
		if text[i] == ':' && (i+1 == len(text) || text[i+1] == ' ') {
			break
		}
		if text[i] == '#' && text[i-1] == ' ' {
			return "", nil, false // a comment: text is no key
		}
	}
	if i == len(text) {
		return "", nil, false
	}
	k := bytes.TrimRight(text[:i], " ")
	if string(k) == "<<" || len(k) > maxFastKey {
		return "", nil, false // a merge key; a key longer than YAML's simple keys
	}
	return p.intern(k), text[i+1:], true
}

// common are the keys and values that most objects repeat: fastYAML
// shares one string for each instead of allocating it per object.
var common = func() map[string]string {
	m := map[string]string{}
	for _, s := range strings.Fields(`apiVersion kind metadata name namespace labels annotations spec status
		type selector ports protocol port targetPort nodePort appProtocol containerPort containers image
		nodeName podIP podIPs ip conditions phase addresses address hostname subdomain clusterIP clusterIPs
		ipFamilies ipFamilyPolicy sessionAffinity externalTrafficPolicy internalTrafficPolicy endpoints
		addressType ready serving terminating subsets zone readinessProbe httpGet tcpSocket path
		app team pod-template-hash app.kubernetes.io/name app.kubernetes.io/instance app.kubernetes.io/component
		v1 discovery.k8s.io/v1 Service Pod Node Endpoints EndpointSlice TCP UDP SCTP True False Ready
		Running Pending Succeeded Failed ClusterIP NodePort LoadBalancer None Cluster Local IPv4 IPv6
		SingleStack InternalIP http https grpc metrics dns default`) {
		m[s] = s
	}
	return m
}()

// intern returns b as a string: the shared one when it is common or, with
// an interner, when it was read before.
func (p *fastParser) intern(b []byte) string {
	if p.in != nil {
		return p.in.bytes(b)
	}
	if s, ok := common[string(b)]; ok {
		return s
	}
	return string(b)
}

// maxFastKey is the longest key fastYAML reads (YAML limits implicit keys
// to 1024 characters).
const maxFastKey = 1000

// isIndicator reports the characters that cannot start a plain scalar
// fastYAML reads.
func isIndicator(c byte) bool {
	switch c {
	case '-', '?', ':', ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`':
		return true
	}
	return false
}

// fastQuoted reads a quoted scalar that ends on its line, without escapes
// but ” in single quotes; n is the length read.
func (p *fastParser) fastQuoted(text []byte) (s string, n int, ok bool) {
	q := text[0]
	var b []byte
	for i := 1; i < len(text); i++ {
		c := text[i]
		switch {
		case c == '\\' && q == '"':
			return "", 0, false
		case c == q && q == '\'' && i+1 < len(text) && text[i+1] == '\'':
			if b == nil {
				b = append([]byte{}, text[1:i]...)
			}
			b = append(b, '\'')
			i++
		case c == q:
			if b == nil {
				return p.intern(text[1:i]), i + 1, true
			}
			return string(b), i + 1, true
		case b != nil:
			b = append(b, c)
		}
	}
	return "", 0, false
}

// fastInline reads a value written on the line of its key or "-".
func (p *fastParser) fastInline(text []byte) (any, bool) {
	var v any
	var rest []byte
	switch {
	case text[0] == '"' || text[0] == '\'':
		s, n, ok := p.fastQuoted(text)
		if !ok {
			return nil, false
		}
		v, rest = s, text[n:]
	case bytes.HasPrefix(text, []byte("{}")):
		v, rest = map[string]any{}, text[2:]
	case bytes.HasPrefix(text, []byte("[]")):
		v, rest = make([]any, 0), text[2:]
	default:
		if isIndicator(text[0]) && !(text[0] == '-' && len(text) > 1 && text[1] >= '0' && text[1] <= '9') {
			return nil, false
		}
		end := len(text)
		if i := bytes.Index(text, []byte(" #")); i >= 0 {
			end = i
		}
		s := bytes.TrimRight(text[:end], " ")
		if bytes.Contains(s, []byte(": ")) || s[len(s)-1] == ':' {
			return nil, false // "a: b: c" is no plain scalar
		}
		return fastPlain(p.intern(s))
	}
	rest = bytes.TrimLeft(rest, " ")
	if len(rest) > 0 && rest[0] != '#' {
		return nil, false
	}
	if len(rest) > 0 && text[len(text)-len(rest)-1] != ' ' {
		return nil, false // "#" right after the value is no comment
	}
	return v, true
}

// fastPlain resolves a plain scalar as yaml.v3 and the converter do: null,
// booleans, decimal integers and strings; other numbers (and what might be
// a timestamp or a number in another base) are left to yaml.v3.
func fastPlain(s string) (any, bool) {
	switch s {
	case "~", "null", "Null", "NULL":
		return nil, true
	}
	if b, ok := yaml11Bool(s); ok {
		return b, true
	}
	c := s[0]
	if c != '-' && c != '+' && c != '.' && (c < '0' || c > '9') {
		return s, true
	}
	if isDecimal(s) {
		i, err := strconv.ParseInt(s, 10, 64)
		return i, err == nil
	}
	if c < '0' || c > '9' {
		return nil, false
	}
	if len(s) > 4 && s[4] == '-' && isDigits(s[:4]) {
		return nil, false // perhaps a timestamp
	}
	dots, other := 0, false
	for i := 0; i < len(s); i++ {
		switch b := s[i]; {
		case b == '.':
			dots++
		case b >= '0' && b <= '9':
		case b >= 'a' && b <= 'f', b >= 'A' && b <= 'F', b == '+', b == '-', b == '_', b == 'x', b == 'X', b == 'o', b == 'O':
			// could belong to a number in some base or notation
		default:
			other = true
		}
	}
	if other {
		// No number, in any base or notation yaml.v3 reads, holds this
		// character: a string (8080/TCP, 1.2.5-rc1, 3m).
		return s, true
	}
	if dots >= 2 && isDigitsDots(s) {
		return s, true // an IPv4 address, a version: no number has two dots
	}
	return nil, false
}

// yaml11Bool reads the booleans of YAML 1.1, which kubectl reads
// manifests as (sigs.k8s.io/yaml, through go-yaml v2): true, yes, on and
// y, false, no, off and n, each in lower, title or upper case, unquoted.
// yaml.v3 reads YAML 1.2, where only true and false are booleans: "on" or
// "no" would be a string to netspec and a boolean to the API server.
func yaml11Bool(s string) (b, ok bool) {
	switch s {
	case "true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "y", "Y":
		return true, true
	case "false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF", "n", "N":
		return false, true
	}
	return false, false
}

// isDecimal reports 0 or a decimal integer without leading zeros of at most
// 18 digits, optionally negative: what yaml.v3 and the converter read as
// the same int64.
func isDecimal(s string) bool {
	if s == "0" {
		return true
	}
	if s[0] == '-' {
		s = s[1:]
	}
	return len(s) > 0 && len(s) <= 18 && s[0] != '0' && isDigits(s)
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isDigitsDots(s string) bool {
	for i := 0; i < len(s); i++ {
		if (s[i] < '0' || s[i] > '9') && s[i] != '.' {
			return false
		}
	}
	return true
}
