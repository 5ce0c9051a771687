// Package suggest finds the word a user probably meant: the command,
// flag or name closest to a mistyped one by edit distance, for "did you
// mean …?" hints. It is pure and small so that every part of netspec that
// reports an unknown name can use the same rule.
package suggest

import "strings"

// Closest returns the candidate nearest to word, and true, when one is
// near enough to be a typo of it: at most one edit for words of up to
// five letters, else two or a third of the word, whichever is more (an
// edit is a letter inserted, deleted, replaced, or two neighbours
// swapped), compared without case. Of equally near candidates the one
// that sorts first wins, so that the answer does not depend on their
// order. A word equal to a candidate is no typo: ok is false then, as it
// is for an empty word.
func Closest(word string, candidates []string) (string, bool) {
	w := strings.ToLower(word)
	if w == "" {
		return "", false
	}
	limit := 1
	if n := len([]rune(w)); n > 5 {
		limit = max(2, n/3)
	}
	best, bestDist := "", limit+1
	for _, c := range candidates {
		lc := strings.ToLower(c)
		if lc == w {
			return "", false
		}
		if d := Distance(w, lc); d < bestDist || d == bestDist && c < best {
			best, bestDist = c, d
		}
	}
	return best, best != ""
}

// Distance is the optimal string alignment distance of a and b (in
// runes): Levenshtein's, with a swap of two neighbours counting as one
// edit, the commonest typo.
func Distance(a, b string) int {
	s, t := []rune(a), []rune(b)
	// Three rows of the matrix: two back (for swaps), one back, this one.
	prev2 := make([]int, len(t)+1)
	prev := make([]int, len(t)+1)
	cur := make([]int, len(t)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(s); i++ {
		cur[0] = i
		for j := 1; j <= len(t); j++ {
			cost := 1
			if s[i-1] == t[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && s[i-1] == t[j-2] && s[i-2] == t[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(t)]
}
