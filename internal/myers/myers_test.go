package myers

import (
	"slices"
	"strings"
	"testing"
)

// TestEq: the deletions and insertions that turn a into b, fewest first;
// not ok when more than maxD are needed.
func TestEq(t *testing.T) {
	tests := []struct {
		name     string
		a, b     string
		maxD     int
		del, ins []int
		notOK    bool
	}{
		{name: "same", a: "abc", b: "abc", maxD: 2},
		{name: "empty", a: "", b: "", maxD: 0},
		{name: "insert in the middle", a: "ac", b: "abc", maxD: 2, ins: []int{1}},
		{name: "delete at the end", a: "abc", b: "ab", maxD: 2, del: []int{2}},
		{name: "replace", a: "abc", b: "axc", maxD: 2, del: []int{1}, ins: []int{1}},
		{name: "move far", a: "abcdefgh", b: "bcdefgha", maxD: 2, del: []int{0}, ins: []int{7}},
		{name: "too many edits", a: "abcd", b: "wxyz", maxD: 3, notOK: true},
		{name: "lengths too far apart", a: "a", b: "abcde", maxD: 3, notOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var matched []string
			del, ins, ok := Eq(len(tt.a), len(tt.b), func(i, j int) bool { return tt.a[i] == tt.b[j] }, tt.maxD,
				func(i, j int) { matched = append(matched, string(tt.a[i])+string(tt.b[j])) })
			if ok == tt.notOK {
				t.Fatalf("ok = %v, want %v", ok, !tt.notOK)
			}
			if !slices.Equal(del, tt.del) || !slices.Equal(ins, tt.ins) {
				t.Errorf("del %v ins %v, want %v %v", del, ins, tt.del, tt.ins)
			}
			for _, m := range matched {
				if m[0] != m[1] {
					t.Errorf("matched %q, which differ", m)
				}
			}
			if ok && len(matched) != len(tt.a)-len(tt.del) {
				t.Errorf("%d pairs matched (%s), want %d", len(matched), strings.Join(matched, " "), len(tt.a)-len(tt.del))
			}
		})
	}
}
