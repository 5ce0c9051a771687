package schema

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"strings"
)

// Digest hashes the spec files of the tree: the slash path (relative to
// the root) and the content hash of every file read, in path order. Two
// Trees of the same files have the same Digest, however they were read
// (whole, by changed paths, through a StatCache).
func (t *Tree) Digest() [32]byte {
	sums := slices.Clone(t.sums)
	slices.SortFunc(sums, func(a, b fileSum) int { return strings.Compare(a.file, b.file) })
	h := sha256.New()
	var n [8]byte
	for _, s := range sums {
		binary.LittleEndian.PutUint64(n[:], uint64(len(s.file)))
		h.Write(n[:])
		h.Write([]byte(s.file))
		h.Write(s.meta.sum[:])
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}
