package schema

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"iter"
	"maps"
	"slices"
	"strings"
)

// StringMap is an immutable map of strings to strings: the labels,
// annotations and selectors of objects. A tree's objects stay in memory
// for as long as a daemon watches it, and a Go map of a few entries costs
// about 340 bytes; a StringMap is one pointer to its entries, sorted by
// key and encoded in one string (each key and value as a uvarint length
// and its bytes): the three labels of a pod of internal/gen take 80
// bytes, a selector of one label 32. Equal ones are shared among the
// objects a validator decodes (interner), as the maps were.
//
// The zero StringMap is nil, as a nil map; an empty one (labels: {}) is
// kept apart from it, so that a map written empty stays empty. Len, Get,
// Lookup and All read it as a map is read; NewStringMap and Map convert
// from and to a Go map.
type StringMap struct {
	p *string // the entries, encoded; nil for a nil map
}

// emptyEntries is what every empty StringMap points to. It is never
// written.
var emptyEntries = ""

// NewStringMap returns a StringMap with m's entries; nil for a nil m.
func NewStringMap(m map[string]string) StringMap {
	if m == nil {
		return StringMap{}
	}
	var b []byte
	for _, k := range slices.Sorted(maps.Keys(m)) {
		b = appendEntry(b, k, m[k])
	}
	return stringMapOf(b)
}

// stringMapOf returns a non-nil StringMap of the encoded entries b.
func stringMapOf(b []byte) StringMap {
	if len(b) == 0 {
		return StringMap{&emptyEntries}
	}
	s := string(b)
	return StringMap{&s}
}

// appendEntry appends the encoding of one entry to b.
func appendEntry(b []byte, k, v string) []byte {
	b = binary.AppendUvarint(b, uint64(len(k)))
	b = append(b, k...)
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// nextEntry splits the first entry off the encoded entries s, which are
// well formed.
func nextEntry(s string) (k, v, rest string) {
	k, s = nextString(s)
	v, s = nextString(s)
	return k, v, s
}

// nextString splits a length-prefixed string off s.
func nextString(s string) (string, string) {
	n, w := uint64(s[0]), 1
	if n >= 0x80 {
		n, w = 0, 0
		for shift := 0; ; shift += 7 {
			c := s[w]
			w++
			n |= uint64(c&0x7f) << shift
			if c < 0x80 {
				break
			}
		}
	}
	return s[w : w+int(n)], s[w+int(n):]
}

func (m StringMap) entries() string {
	if m.p == nil {
		return ""
	}
	return *m.p
}

// IsNil reports whether m is nil, as a map that was never written: not
// even empty.
func (m StringMap) IsNil() bool { return m.p == nil }

// IsZero reports whether m has no entries, for the json option omitzero
// (which then omits a StringMap as omitempty omits an empty map).
func (m StringMap) IsZero() bool { return m.entries() == "" }

// Len returns the number of entries.
func (m StringMap) Len() int {
	n := 0
	for s := m.entries(); s != ""; n++ {
		_, _, s = nextEntry(s)
	}
	return n
}

// Lookup returns the value of key k and whether m has it.
func (m StringMap) Lookup(k string) (string, bool) {
	for s := m.entries(); s != ""; {
		var key, v string
		key, v, s = nextEntry(s)
		if key == k {
			return v, true
		}
		if key > k {
			break // sorted
		}
	}
	return "", false
}

// Get returns the value of key k, "" when m has none (as m[k] of a map).
func (m StringMap) Get(k string) string {
	v, _ := m.Lookup(k)
	return v
}

// All yields the entries in the order of their keys.
func (m StringMap) All() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for s := m.entries(); s != ""; {
			var k, v string
			k, v, s = nextEntry(s)
			if !yield(k, v) {
				return
			}
		}
	}
}

// Equal reports whether m and o have the same entries and are both nil or
// both not, as reflect.DeepEqual compares maps (go-cmp calls it).
func (m StringMap) Equal(o StringMap) bool {
	return (m.p == nil) == (o.p == nil) && m.entries() == o.entries()
}

// Map returns the entries as a new Go map; nil for a nil m.
func (m StringMap) Map() map[string]string {
	if m.p == nil {
		return nil
	}
	out := make(map[string]string, m.Len())
	for k, v := range m.All() {
		out[k] = v
	}
	return out
}

// String formats m as fmt formats a map: map[k1:v1 k2:v2], keys in order.
func (m StringMap) String() string {
	var b strings.Builder
	b.WriteString("map[")
	for k, v := range m.All() {
		if b.Len() > len("map[") {
			b.WriteByte(' ')
		}
		b.WriteString(k)
		b.WriteByte(':')
		b.WriteString(v)
	}
	b.WriteByte(']')
	return b.String()
}

// MarshalJSON writes m as a JSON object (keys in order) or null, as
// encoding/json writes a map.
func (m StringMap) MarshalJSON() ([]byte, error) {
	if m.p == nil {
		return []byte("null"), nil
	}
	b := []byte{'{'}
	for k, v := range m.All() {
		if len(b) > 1 {
			b = append(b, ',')
		}
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		vb, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, kb...), ':'), vb...)
	}
	return append(b, '}'), nil
}

// UnmarshalJSON reads a JSON object of strings, or null.
func (m *StringMap) UnmarshalJSON(b []byte) error {
	var x map[string]string
	if err := json.Unmarshal(b, &x); err != nil {
		return err
	}
	*m = NewStringMap(x)
	return nil
}

// MarshalBinary encodes m for the validation cache: a byte that tells nil
// (0) from not (1), then the entries.
func (m StringMap) MarshalBinary() ([]byte, error) {
	if m.p == nil {
		return []byte{0}, nil
	}
	return append([]byte{1}, *m.p...), nil
}

var errStringMap = errors.New("schema: malformed StringMap encoding")

// UnmarshalBinary decodes what MarshalBinary encoded. It checks that the
// entries are well formed and sorted by key, as the readers assume.
func (m *StringMap) UnmarshalBinary(b []byte) error {
	if len(b) == 0 || b[0] > 1 {
		return errStringMap
	}
	if b[0] == 0 {
		if len(b) != 1 {
			return errStringMap
		}
		*m = StringMap{}
		return nil
	}
	b = b[1:]
	var prev []byte
	for rest, first := b, true; len(rest) > 0; first = false {
		var k []byte
		var ok bool
		if k, rest, ok = splitString(rest); !ok {
			return errStringMap
		}
		if _, rest, ok = splitString(rest); !ok {
			return errStringMap
		}
		if !first && bytes.Compare(prev, k) >= 0 {
			return errStringMap
		}
		prev = k
	}
	*m = stringMapOf(b)
	return nil
}

// splitString splits a length-prefixed string off b; ok is false when b
// does not start with one.
func splitString(b []byte) (s, rest []byte, ok bool) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w) {
		return nil, nil, false
	}
	return b[w : w+int(n)], b[w+int(n):], true
}
