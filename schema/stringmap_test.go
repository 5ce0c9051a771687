package schema

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"testing"
)

// TestStringMapReadsAsMap checks that a StringMap answers as the Go map it
// was made from: length, look-ups of present and absent keys, the entries
// in key order, fmt's formatting and the conversion back.
func TestStringMapReadsAsMap(t *testing.T) {
	long := strings.Repeat("v", 300) // a length of two varint bytes
	tests := []struct {
		name string
		m    map[string]string
	}{
		{name: "nil", m: nil},
		{name: "empty", m: map[string]string{}},
		{name: "one", m: map[string]string{"app": "web"}},
		{name: "empty key and value", m: map[string]string{"": "", "app": ""}},
		{name: "several", m: map[string]string{"tier": "front", "app": "web", "pod-template-hash": "abc", "app.kubernetes.io/name": "x"}},
		{name: "long value", m: map[string]string{"a": long, strings.Repeat("k", 200): "b", "\x00\x80": "\xff"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStringMap(tc.m)
			if got, want := s.IsNil(), tc.m == nil; got != want {
				t.Errorf("IsNil() = %v, want %v", got, want)
			}
			if got, want := s.IsZero(), len(tc.m) == 0; got != want {
				t.Errorf("IsZero() = %v, want %v", got, want)
			}
			if got := s.Len(); got != len(tc.m) {
				t.Errorf("Len() = %d, want %d", got, len(tc.m))
			}
			for k, v := range tc.m {
				if got, ok := s.Lookup(k); !ok || got != v {
					t.Errorf("Lookup(%q) = %q, %v; want %q, true", k, got, ok, v)
				}
				if got := s.Get(k); got != v {
					t.Errorf("Get(%q) = %q, want %q", k, got, v)
				}
			}
			for _, k := range []string{"absent", "a\x00", "zzz", "ap"} {
				if _, in := tc.m[k]; in {
					continue
				}
				if got, ok := s.Lookup(k); ok || got != "" {
					t.Errorf("Lookup(%q) = %q, %v; want \"\", false", k, got, ok)
				}
			}
			var keys []string
			for k, v := range s.All() {
				keys = append(keys, k)
				if v != tc.m[k] {
					t.Errorf("All() yields %q: %q, want %q", k, v, tc.m[k])
				}
			}
			for i := 1; i < len(keys); i++ {
				if keys[i-1] >= keys[i] {
					t.Errorf("All() yields keys out of order: %q", keys)
				}
			}
			if got := s.Map(); !reflect.DeepEqual(got, tc.m) {
				t.Errorf("Map() = %#v, want %#v", got, tc.m)
			}
			if got, want := s.String(), fmt.Sprint(tc.m); got != want {
				t.Errorf("String() = %q, want %q as fmt prints the map", got, want)
			}
		})
	}
}

// TestStringMapEqual checks that equal entries compare equal, also for
// reflect.DeepEqual, and that nil and empty stay apart, as for maps.
func TestStringMapEqual(t *testing.T) {
	a := NewStringMap(map[string]string{"app": "web", "tier": "front"})
	b := NewStringMap(map[string]string{"tier": "front", "app": "web"})
	c := NewStringMap(map[string]string{"app": "web"})
	for _, tc := range []struct {
		name string
		x, y StringMap
		want bool
	}{
		{name: "same entries", x: a, y: b, want: true},
		{name: "fewer entries", x: a, y: c, want: false},
		{name: "nil and empty", x: StringMap{}, y: NewStringMap(map[string]string{}), want: false},
		{name: "nil and nil", x: StringMap{}, y: NewStringMap(nil), want: true},
		{name: "empty and empty", x: NewStringMap(map[string]string{}), y: NewStringMap(map[string]string{}), want: true},
	} {
		if got := tc.x.Equal(tc.y); got != tc.want {
			t.Errorf("%s: Equal = %v, want %v", tc.name, got, tc.want)
		}
		if got := reflect.DeepEqual(tc.x, tc.y); got != tc.want {
			t.Errorf("%s: reflect.DeepEqual = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestStringMapEncodings round-trips StringMaps through JSON (as a map
// would print) and the binary form of the validation cache, which keeps
// nil and empty apart.
func TestStringMapEncodings(t *testing.T) {
	for _, m := range []map[string]string{nil, {}, {"app": "web"}, {"b": "2", "a": "1", "": strings.Repeat("x", 200)}} {
		s := NewStringMap(m)
		got, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(m)
		if string(got) != string(want) {
			t.Errorf("json: %s, want %s", got, want)
		}
		var back StringMap
		if err := json.Unmarshal(got, &back); err != nil || !back.Equal(s) {
			t.Errorf("json round trip of %s: %v, %v", got, back, err)
		}
		b, err := s.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		back = NewStringMap(map[string]string{"stale": "x"})
		if err := back.UnmarshalBinary(b); err != nil || !back.Equal(s) {
			t.Errorf("binary round trip of %v: %v, %v", m, back, err)
		}
	}
	type meta struct {
		Labels StringMap `json:"labels,omitzero"`
	}
	for _, m := range []map[string]string{nil, {}} {
		if b, _ := json.Marshal(meta{NewStringMap(m)}); string(b) != "{}" {
			t.Errorf("omitzero of %#v: %s, want {}", m, b)
		}
	}
}

// TestStringMapRejectsMalformed checks that UnmarshalBinary refuses what
// MarshalBinary cannot have written: the readers assume well-formed entries
// in key order.
func TestStringMapRejectsMalformed(t *testing.T) {
	good, _ := NewStringMap(map[string]string{"a": "1", "b": "2"}).MarshalBinary()
	for n := range len(good) {
		if n == 1 || n == 5 {
			continue // no entry, or the first: well formed
		}
		var s StringMap
		if err := s.UnmarshalBinary(good[:n]); err == nil {
			t.Errorf("a %d-byte prefix of %q decoded to %v", n, good, s)
		}
	}
	for _, b := range [][]byte{
		{2},                                 // no such tag
		{0, 0},                              // nil with entries
		{1, 1, 'b', 1, '2', 1, 'a', 1, '1'}, // keys out of order
		{1, 1, 'a', 1, '1', 1, 'a', 1, '2'}, // a key twice
		{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0}, // a length beyond the bytes
	} {
		var s StringMap
		if err := s.UnmarshalBinary(b); err == nil {
			t.Errorf("%q decoded to %v", b, s)
		}
	}
	if m := maps.Collect(NewStringMap(map[string]string{"x": "y"}).All()); m["x"] != "y" {
		t.Errorf("All() collects to %v", m)
	}
}
