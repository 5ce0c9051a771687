package nft

import (
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"netspec.dev/netspec/render/nftmodel"
)

// endpointRuleset is a ruleset with one endpoint map, holding elems
// ("LO-HI : ADDR . PORT," a line), and a chain that picks through it.
func endpointRuleset(t *testing.T, elems string) *Ruleset {
	t.Helper()
	set := &nftmodel.Set{Name: "endpoints-00", EndpointMod: 2520, Interval: true}
	for _, line := range strings.Split(strings.TrimSpace(elems), "\n") {
		var lo, hi uint32
		var addr string
		var port uint16
		if _, err := fmt.Sscanf(line, "%d-%d : %s . %d,", &lo, &hi, &addr, &port); err != nil {
			t.Fatalf("element %q: %v", line, err)
		}
		set.Endpoints = append(set.Endpoints, nftmodel.EndpointElement{Lo: lo, Hi: hi, To: netip.AddrPortFrom(netip.MustParseAddr(addr), port)})
	}
	t4 := &nftmodel.Table{Family: nftmodel.IPv4, Name: TableName}
	t4.AddSet("", set)
	t4.AddChain("", &nftmodel.Chain{Name: "pick", Rules: []nftmodel.Rule{{nftmodel.ProtoMatch{Proto: nftmodel.TCP}, nftmodel.DNATMap{Mod: 2520, Offset: 10000, Map: set.Name}}}})
	return Encode(&nftmodel.Ruleset{Tables: []*nftmodel.Table{t4, {Family: nftmodel.IPv6, Name: TableName}}})
}

// TestEndpointMapChanges: changing the endpoints of a pick, in every way
// its intervals can move (new data at the same bounds, a split, a merge,
// a shift of the bound between neighbours, a pick at key 0, a range
// reaching the last key), changes elements only, never a rule, and both
// the kernel diff (Apply) and the daemon's diff (Update) converge.
func TestEndpointMapChanges(t *testing.T) {
	steps := []struct{ name, elems string }{
		{"one endpoint", "10000-12519 : 10.0.0.1 . 80,\n"},
		{"replaced", "10000-12519 : 10.0.0.2 . 80,\n"},
		{"scaled to two", "10000-11259 : 10.0.0.2 . 80,\n11260-12519 : 10.0.0.3 . 80,\n"},
		{"bound moved", "10000-10899 : 10.0.0.2 . 80,\n10900-12519 : 10.0.0.3 . 80,\n"},
		{"neighbours swapped", "10000-10899 : 10.0.0.3 . 80,\n10900-12519 : 10.0.0.2 . 80,\n"},
		{"scaled to three", "10000-10839 : 10.0.0.1 . 80,\n10840-11679 : 10.0.0.2 . 80,\n11680-12519 : 10.0.0.3 . 80,\n"},
		{"a second pick", "0-2519 : 10.0.1.1 . 80,\n10000-10839 : 10.0.0.1 . 80,\n10840-11679 : 10.0.0.2 . 80,\n11680-12519 : 10.0.0.3 . 80,\n"},
		{"a pick at the last keys", "10000-10839 : 10.0.0.1 . 80,\n10840-11679 : 10.0.0.2 . 80,\n11680-12519 : 10.0.0.3 . 80,\n4294964776-4294967295 : 10.0.2.1 . 80,\n"},
		{"scaled to one", "10000-12519 : 10.0.0.3 . 80,\n"},
	}
	for _, path := range []string{"Apply", "Update"} {
		t.Run(path, func(t *testing.T) {
			_, a := syncApplier(t)
			for i, st := range steps {
				rs := endpointRuleset(t, st.elems)
				var ch *Changes
				var err error
				if path == "Apply" {
					ch, err = a.apply(rs)
				} else {
					ch, err = a.update(rs)
				}
				if err != nil {
					t.Fatalf("step %q: %v", st.name, err)
				}
				c := ch.Tables[0]
				if i > 0 && (c.Replace || len(c.ChainsAdded)+len(c.ChainsChanged)+len(c.ChainsRemoved) > 0 || len(c.ElementsAdded) == 0) {
					t.Errorf("step %q: %s, want elements changed and no chain", st.name, ch.Summary())
				}
				if full, err := a.plan(rs); err != nil || !full.Empty() {
					t.Fatalf("step %q: the kernel differs afterwards: %v %s", st.name, err, counts(full))
				}
			}
		})
	}
}

// TestTypeofUserdata: the user data of an endpoint map is what nft 1.0.6
// sends (captured with nft --debug=mnl), for both families.
func TestTypeofUserdata(t *testing.T) {
	for _, tt := range []struct {
		fam  string
		want string
	}{
		{"ip", "00040100 00000104 00000000 031a0004 17000000 01120004 01000000 0104d809 00000204 00000000 04340004 0d000000 012c0014 00040700 0000010c 00040c00 00000104 0c000000 01140004 07000000 010c0004 0b000000 01040200 00000604 00000000"},
		{"ip6", "00040100 00000104 00000000 031a0004 17000000 01120004 01000000 0104d809 00000204 00000000 04340004 0d000000 012c0014 00040700 0000010c 00040d00 00000104 09000000 01140004 07000000 010c0004 0b000000 01040200 00000604 00000000"},
	} {
		rs := endpointRuleset(t, "10000-12519 : 10.0.0.1 . 80,\n")
		fam := rs.Tables[0].Family
		if tt.fam == "ip6" {
			fam = rs.Tables[1].Family
		}
		got := typeofUserdata(fam, 2520)
		want := strings.ReplaceAll(tt.want, " ", "")
		if h := hex.EncodeToString(got); h != want {
			t.Errorf("%s: user data\n%s, want\n%s", tt.fam, h, want)
		}
	}
}
