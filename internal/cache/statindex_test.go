package cache

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"netspec.dev/netspec/schema"
)

// TestStatIndexCodec: the stat index round-trips, and one that is
// truncated, extended, unsorted or claims too many records is corrupt.
func TestStatIndexCodec(t *testing.T) {
	recs := []schema.StatRecord{
		{Path: "/t/b.yaml", Dev: 2049, Ino: 1 << 40, StatSize: 100, Mtime: 1700000000123456789, Ctime: 1700000000987654321, Size: 101, Sum: [32]byte{1, 2, 3}},
		{Path: "/t/a.yaml", Dev: 1, Ino: 2, StatSize: 0, Mtime: -5, Ctime: 0, Size: 0, Sum: [32]byte{31: 9}},
	}
	b := appendStatIndex(nil, slices.Clone(recs))
	got, err := decodeStatIndex(b)
	if err != nil {
		t.Fatal(err)
	}
	wantRecs := []schema.StatRecord{recs[1], recs[0]} // by path
	if diff := cmp.Diff(wantRecs, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if got, err := decodeStatIndex(appendStatIndex(nil, nil)); err != nil || len(got) != 0 {
		t.Errorf("empty index: %v, %v", got, err)
	}
	dup := appendStatIndex(nil, []schema.StatRecord{recs[0], recs[0]})
	unsorted := []byte{2}
	for _, r := range []schema.StatRecord{recs[0], recs[1]} {
		unsorted = append(unsorted, appendStatIndex(nil, []schema.StatRecord{r})[1:]...)
	}
	for name, bad := range map[string][]byte{
		"empty":      {},
		"truncated":  b[:len(b)-1],
		"extended":   append(slices.Clone(b), 0),
		"duplicate":  dup,
		"unsorted":   unsorted,
		"too many":   append([]byte{0xff, 0xff, 0xff, 0x0f}, b[1:]...),
		"empty path": appendStatIndex(nil, []schema.StatRecord{{}}),
	} {
		if got, err := decodeStatIndex(bad); err == nil {
			t.Errorf("%s: decoded %v, want corrupt", name, got)
		}
	}
}
