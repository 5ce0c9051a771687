package render

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"netspec.dev/netspec/render/nftmodel"
)

// TestPickMaps: the intervals of a pick cover its keys from its offset
// exactly once, in endpoint order, each endpoint getting 2520/k keys or
// one more; picks that hash to one slot get distinct ones; the rule
// draws from the pick's offset.
func TestPickMaps(t *testing.T) {
	rangeRE := regexp.MustCompile(`^\t\t\t(\d+)(?:-(\d+))? : (\S+) \. (\d+),$`)
	for _, k := range []int{1, 2, 3, 7, 11, 2520, 2521, 10000} {
		tbl := &nftTable{fam: nftFamilies[0]}
		eps := make([]nftEndpoint, k)
		for i := range eps {
			eps[i].addr = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 80)
		}
		tbl.addPick("service-X", eps, false)
		// A second pick forced onto the same bucket and slot.
		tbl.addPick("service-Y", eps[:1], false)
		tbl.picks[1].bucket, tbl.picks[1].slot = tbl.picks[0].bucket, tbl.picks[0].slot
		tbl.assignPicks()
		x, y := tbl.pickOf["service-X"], tbl.pickOf["service-Y"]
		if x == nil || y == nil || x.bucket != y.bucket || x.slot == y.slot {
			t.Fatalf("k=%d: picks %+v %+v share a slot", k, x, y)
		}
		text := string(tbl.appendPickMaps(nil))
		var got []string
		next := x.offset()
		in := false
		m := uint32(max(pickModulus, k))
		for _, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(line, "\t\t\t# ") {
				in = line == "\t\t\t# service-X"
				continue
			}
			r := rangeRE.FindStringSubmatch(line)
			if r == nil || !in {
				continue
			}
			lo, _ := strconv.ParseUint(r[1], 10, 32)
			hi := lo
			if r[2] != "" {
				hi, _ = strconv.ParseUint(r[2], 10, 32)
			}
			if uint32(lo) != next {
				t.Fatalf("k=%d: range %s starts at %d, want %d", k, r[0], lo, next)
			}
			if n := uint32(hi-lo) + 1; n != m/uint32(k) && n != m/uint32(k)+1 {
				t.Errorf("k=%d: endpoint %s gets %d keys of %d", k, r[3], n, m)
			}
			got = append(got, r[3])
			next = uint32(hi) + 1
		}
		if len(got) != k || next != x.offset()+m {
			t.Fatalf("k=%d: %d ranges ending at %d, want %d ending at %d", k, len(got), next, k, x.offset()+m)
		}
		for i, a := range got {
			if a != eps[i].addr.Addr().String() {
				t.Fatalf("k=%d: range %d goes to %s, want %s", k, i, a, eps[i].addr.Addr())
			}
		}
		rule := "\t\t" + mapPickRule(nftmodel.TCP, x).Text(nftmodel.IPv4) + "\n"
		want := fmt.Sprintf("\t\tmeta l4proto tcp dnat ip to numgen random mod %d offset %d map @%s\n", m, x.offset(), pickMapNames[x.bucket])
		if x.offset() == 0 {
			want = fmt.Sprintf("\t\tmeta l4proto tcp dnat ip to numgen random mod %d map @%s\n", m, pickMapNames[x.bucket])
		}
		if rule != want {
			t.Errorf("k=%d: rule %q, want %q", k, rule, want)
		}
	}
	// Past pickStride endpoints, and under affinity, no map.
	tbl := &nftTable{fam: nftFamilies[0]}
	tbl.addPick("service-Z", make([]nftEndpoint, pickStride+1), false)
	tbl.addPick("service-Z", make([]nftEndpoint, 2), true)
	tbl.addPick("service-Z", nil, false)
	if len(tbl.picks) > 0 {
		t.Errorf("addPick: picks that cannot use a map do: %+v", tbl.picks)
	}
}
