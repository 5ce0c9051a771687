package nftmodel

import (
	"fmt"
	"net/netip"
	"testing"
)

// TestMergeRanges: prefixes in any order become their ranges merged where
// they overlap or touch, and each range the fewest prefixes that cover it
// exactly, up to the last address of the family.
func TestMergeRanges(t *testing.T) {
	tests := []struct {
		name   string
		in     []string
		ranges string
		cover  string
	}{
		{name: "none", in: nil, ranges: "[]", cover: "[]"},
		{name: "unsorted, overlapping", in: []string{"10.0.1.0/24", "12.0.0.0/8", "10.0.0.0/16"}, ranges: "[{10.0.0.0 10.0.255.255} {12.0.0.0 12.255.255.255}]", cover: "[10.0.0.0/16 12.0.0.0/8]"},
		{name: "touching /8s, not a /7", in: []string{"10.0.0.0/8", "9.0.0.0/8"}, ranges: "[{9.0.0.0 10.255.255.255}]", cover: "[9.0.0.0/8 10.0.0.0/8]"},
		{name: "touching, not a prefix", in: []string{"10.0.0.2/31", "10.0.0.1/32"}, ranges: "[{10.0.0.1 10.0.0.3}]", cover: "[10.0.0.1/32 10.0.0.2/31]"},
		{name: "host bits masked", in: []string{"10.0.0.9/30"}, ranges: "[{10.0.0.8 10.0.0.11}]", cover: "[10.0.0.8/30]"},
		{name: "up to the last address", in: []string{"255.255.255.254/31", "0.0.0.0/1", "128.0.0.0/2"}, ranges: "[{0.0.0.0 191.255.255.255} {255.255.255.254 255.255.255.255}]", cover: "[0.0.0.0/1 128.0.0.0/2 255.255.255.254/31]"},
		{name: "IPv6, whole space", in: []string{"::/1", "8000::/1"}, ranges: "[{:: ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff}]", cover: "[::/0]"},
	}
	for _, tt := range tests {
		rs := MergeRanges(prefixes(tt.in...))
		var cover []netip.Prefix
		for _, r := range rs {
			cover = r.AppendPrefixes(cover)
		}
		if got := fmt.Sprint(rs); got != tt.ranges {
			t.Errorf("%s: MergeRanges = %s, want %s", tt.name, got, tt.ranges)
		}
		if got := fmt.Sprint(cover); got != tt.cover {
			t.Errorf("%s: AppendPrefixes of the ranges = %s, want %s", tt.name, got, tt.cover)
		}
	}
}
