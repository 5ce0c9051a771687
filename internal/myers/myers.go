// Package myers aligns two lists with Myers' greedy algorithm, bounded by
// a number of edits: the nftables applier aligns chains, rules and set
// elements with it, and the nftables model its elements (nftmodel's
// DiffElements), where a change of a few Services moves a few items of
// long sorted lists.
package myers

import "slices"

// Eq is Run with an equality of items: eq(i, j) tells whether the i-th
// of the first list equals the j-th of the second.
func Eq(n, m int, eq func(i, j int) bool, maxD int, match func(i, j int)) (del, ins []int, ok bool) {
	return Run(n, m, func(x, y int) int {
		k := 0
		for x+k < n && y+k < m && eq(x+k, y+k) {
			k++
		}
		return k
	}, maxD, match)
}

// Run aligns two lists of n and m items, run(x, y) telling how many
// items from the x-th of the first on equal those from the y-th of the
// second on (a function of whole runs, so that a long common run costs
// one call), with Myers' greedy algorithm when at most maxD deletions and insertions turn one into the
// other: the indexes of the first deleted and of the second inserted, in
// order; match, if not nil, is called for every pair (i, j) matched, last
// pair first, and only when ok. Its work is about (n + m) * edits
// comparisons, less than hashing every key when an element moves far in
// a long sorted list (say an endpoint's address in the hairpin set), and
// it allocates nothing per matched pair. ok is false when more edits are
// needed.
func Run(n, m int, run func(x, y int) int, maxD int, match func(i, j int)) (del, ins []int, ok bool) {
	if n+m > 0 && (n-m > maxD || m-n > maxD) {
		return nil, nil, false
	}
	off := maxD + 1
	v := make([]int, 2*maxD+3)
	var trace [][]int // v after each d
	for d := 0; d <= maxD; d++ {
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || k != d && v[off+k-1] < v[off+k+1] {
				x = v[off+k+1] // from the diagonal above: an insertion
			} else {
				x = v[off+k-1] + 1 // from the left: a deletion
			}
			y := x - k
			if x < n && y < m {
				r := run(x, y)
				x, y = x+r, y+r
			}
			v[off+k] = x
			if x >= n && y >= m {
				trace = append(trace, slices.Clone(v))
				del, ins = path(trace, off, n, m, match)
				return del, ins, true
			}
		}
		trace = append(trace, slices.Clone(v))
	}
	return nil, nil, false
}

// path walks the trace of Run back from (n, m), calling match (if
// not nil) for every matched pair on the way.
func path(trace [][]int, off, n, m int, match func(i, j int)) (del, ins []int) {
	x, y := n, m
	for d := len(trace) - 1; d > 0; d-- {
		v := trace[d-1]
		k := x - y
		var prevK int
		if k == -d || k != d && v[off+k-1] < v[off+k+1] {
			prevK = k + 1
		} else {
			prevK = k - 1
		}
		prevX := v[off+prevK]
		prevY := prevX - prevK
		if match == nil {
			n := min(x-prevX, y-prevY)
			x, y = x-n, y-n
		}
		for x > prevX && y > prevY {
			x, y = x-1, y-1
			match(x, y)
		}
		if x == prevX {
			ins = append(ins, prevY)
		} else {
			del = append(del, prevX)
		}
		x, y = prevX, prevY
	}
	for match != nil && x > 0 && y > 0 {
		x, y = x-1, y-1
		match(x, y)
	}
	slices.Reverse(del)
	slices.Reverse(ins)
	return del, ins
}
