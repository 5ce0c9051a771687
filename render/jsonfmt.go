package render

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// indent and newline start a new line at a depth of nesting.
var indent = strings.Repeat("  ", 64)

func newline(out []byte, depth int) []byte {
	out = append(out, '\n')
	for depth > 64 {
		out = append(out, indent...)
		depth -= 64
	}
	return append(out, indent[:2*depth]...)
}

// jsonWriter appends JSON to b in indentJSON's layout. The caller says, as
// it opens each container, whether it is laid out on one line: it must be
// exactly when indentJSON would, that is when the container holds no
// object and no list that holds an object or a list. Lists of plain values
// (plainList: texts, ints, strings) are always on one line and written whole.
type jsonWriter struct {
	b     []byte
	stack []jsonFrame // the open containers, innermost last
	out   io.Writer   // when set, b is passed to it once it holds spillSize bytes
	err   error       // the first error of out
}

// spillSize is how much a jsonWriter with an out holds before writing it.
const spillSize = 256 << 10

// spill passes what w holds to out once it holds spillSize bytes.
func (w *jsonWriter) spill() {
	if w.out != nil && len(w.b) >= spillSize {
		w.flush()
	}
}

// flush passes what w holds to out.
func (w *jsonWriter) flush() {
	if w.err == nil {
		_, w.err = w.out.Write(w.b)
	}
	w.b = w.b[:0]
}

// jsonFrame is an open container.
type jsonFrame struct {
	inline bool // laid out on one line
	empty  bool // nothing written in it yet
}

// open starts a container: c is '{' or '['.
func (w *jsonWriter) open(c byte, inline bool) {
	w.b = append(w.b, c)
	w.stack = append(w.stack, jsonFrame{inline: inline, empty: true})
}

// close ends the innermost container: c is '}' or ']'.
func (w *jsonWriter) close(c byte) {
	f := w.stack[len(w.stack)-1]
	w.stack = w.stack[:len(w.stack)-1]
	if !f.inline {
		w.b = newline(w.b, len(w.stack))
	}
	w.b = append(w.b, c)
}

// elem starts the next member or element of the innermost container: a
// comma after the one before, then a space on one line, or a new line.
func (w *jsonWriter) elem() {
	f := &w.stack[len(w.stack)-1]
	if !f.empty {
		w.b = append(w.b, ',')
		if f.inline {
			w.b = append(w.b, ' ')
		}
	}
	f.empty = false
	if !f.inline {
		w.b = newline(w.b, len(w.stack))
	}
}

// key starts the next member of the innermost object. Keys are written
// as they are: they are Go identifiers, which need no escaping.
func (w *jsonWriter) key(k string) {
	w.elem()
	w.b = append(w.b, '"')
	w.b = append(w.b, k...)
	w.b = append(w.b, '"', ':', ' ')
}

func (w *jsonWriter) str(k, v string) {
	w.key(k)
	w.b = appendJSONString(w.b, v)
}

func (w *jsonWriter) int(k string, v int64) {
	w.key(k)
	w.b = strconv.AppendInt(w.b, v, 10)
}

func (w *jsonWriter) uint(k string, v uint64) {
	w.key(k)
	w.b = strconv.AppendUint(w.b, v, 10)
}

func (w *jsonWriter) bool(k string, v bool) {
	w.key(k)
	w.b = strconv.AppendBool(w.b, v)
}

// plainList writes the member k: a list of plain values on one line, each
// appended by add.
func plainList[T any](w *jsonWriter, k string, v []T, add func([]byte, T) []byte) {
	w.key(k)
	w.b = append(w.b, '[')
	for i, x := range v {
		if i > 0 {
			w.b = append(w.b, ',', ' ')
		}
		w.b = add(w.b, x)
	}
	w.b = append(w.b, ']')
}

func (w *jsonWriter) ints(k string, v []int) {
	plainList(w, k, v, func(b []byte, n int) []byte { return strconv.AppendInt(b, int64(n), 10) })
}

// texts writes the member k: a list of addresses or prefixes.
func texts[T interface{ AppendTo([]byte) []byte }](w *jsonWriter, k string, v []T) {
	plainList(w, k, v, appendJSONText[T])
}

// appendJSONText appends v's text form (what its MarshalText returns:
// AppendTo gives the same, "" for the zero value) as a JSON string, as
// encoding/json writes an encoding.TextMarshaler.
func appendJSONText[T interface{ AppendTo([]byte) []byte }](b []byte, v T) []byte {
	b = append(b, '"')
	start := len(b)
	b = v.AppendTo(b)
	for _, c := range b[start:] {
		if !jsonSafe[c] {
			// Only an IPv6 zone can hold such bytes: quote the text the slow way.
			s := string(b[start:])
			return appendJSONString(b[:start-1], s)
		}
	}
	return append(b, '"')
}

// appendJSONString appends s as a JSON string exactly as encoding/json
// writes it with SetEscapeHTML(false): '"' and '\\' escaped with a
// backslash; \b, \f, \n, \r and \t as such and other bytes below 0x20 as
// \u00XX; U+2028 and U+2029 as \u2028 and \u2029; each byte of invalid
// UTF-8 as \ufffd; everything else, '<', '>' and '&' included, as it is.
// Plain ASCII (jsonSafe), quotes and backslashes (a TXT record's data),
// which make nearly every string of a plan, are written here; a string
// with other bytes is left to encoding/json.
func appendJSONString(b []byte, s string) []byte {
	mark := len(b)
	b = append(b, '"')
	start := 0 // s[start:i] is still to be copied
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case jsonSafe[c]:
		case c == '"' || c == '\\':
			b = append(b, s[start:i]...)
			b = append(b, '\\', c)
			start = i + 1
		default:
			var out bytes.Buffer
			enc := json.NewEncoder(&out)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(s) // a string always encodes
			return append(b[:mark], bytes.TrimSuffix(out.Bytes(), []byte{'\n'})...)
		}
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// jsonSafe tells which bytes appendJSONString copies as they are: ASCII
// other than control characters, '"' and '\\'.
var jsonSafe = func() (t [256]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()
