package suggest

import "testing"

func TestClosest(t *testing.T) {
	commands := []string{"apply", "cleanup", "completion", "diff", "explain", "lock", "plan", "render", "schema", "status", "validate", "version", "watch"}
	flags := []string{"cache-dir", "dataplane", "detailed-exitcode", "ipvs-scheduler", "json", "max-file-size", "no-cache", "node", "state-dir"}
	for _, tc := range []struct {
		name       string
		word       string
		candidates []string
		want       string
		wantOK     bool
	}{
		{name: "letter dropped", word: "valdate", candidates: commands, want: "validate", wantOK: true},
		{name: "letter added", word: "applly", candidates: commands, want: "apply", wantOK: true},
		{name: "letter replaced", word: "statis", candidates: commands, want: "status", wantOK: true},
		{name: "neighbours swapped", word: "plna", candidates: commands, want: "plan", wantOK: true},
		{name: "two edits in a long word", word: "explian", candidates: commands, want: "explain", wantOK: true},
		{name: "case ignored", word: "Validate", candidates: commands, wantOK: false},
		{name: "flag letter dropped", word: "dataplan", candidates: flags, want: "dataplane", wantOK: true},
		{name: "flag two edits", word: "state-dri", candidates: flags, want: "state-dir", wantOK: true},
		{name: "nearest wins", word: "nod", candidates: flags, want: "node", wantOK: true},
		{name: "too far", word: "frobnicate", candidates: commands, wantOK: false},
		{name: "two edits in a short word is too far", word: "lpan", candidates: []string{"plane"}, wantOK: false},
		{name: "exact is no typo", word: "plan", candidates: commands, wantOK: false},
		{name: "empty word", word: "", candidates: commands, wantOK: false},
		{name: "no candidates", word: "plan", candidates: nil, wantOK: false},
		{name: "a tie goes to the one that sorts first, whatever the order", word: "lan", candidates: []string{"plan", "lane"}, want: "lane", wantOK: true},
		{name: "a third of a long word", word: "sessionaffinityconfg", candidates: []string{"sessionAffinityConfig"}, want: "sessionAffinityConfig", wantOK: true},
		{name: "three edits in a word of eight is too far", word: "dataplxy", candidates: []string{"dataplane"}, wantOK: false},
		{name: "runes, not bytes", word: "dïff", candidates: commands, want: "diff", wantOK: true},
	} {
		got, ok := Closest(tc.word, tc.candidates)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("%s: Closest(%q) = %q, %v; want %q, %v", tc.name, tc.word, got, ok, tc.want, tc.wantOK)
		}
	}
}

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{a: "", b: "", want: 0},
		{a: "", b: "abc", want: 3},
		{a: "abc", b: "", want: 3},
		{a: "kitten", b: "sitting", want: 3},
		{a: "ab", b: "ba", want: 1},
		{a: "ca", b: "abc", want: 3}, // optimal string alignment: no edit of a swapped pair
		{a: "validate", b: "valdate", want: 1},
	} {
		if got := Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := Distance(tc.b, tc.a); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d (symmetric)", tc.b, tc.a, got, tc.want)
		}
	}
}
