package nft

import (
	"testing"
)

// TestTableMatches: the quick check after a write says yes for a table
// exactly as sent (else every apply would take the slow path unnoticed),
// and no for every kind of difference it is meant to see.
func TestTableMatches(t *testing.T) {
	ns, a := syncApplier(t)
	rs := goldenRuleset(t, "kitchen-sink/node-1/nftables.nft")
	if len(rs.Tables) != 2 {
		t.Fatalf("kitchen-sink has %d tables, want ip and ip6", len(rs.Tables))
	}
	matches := func(t *testing.T) []bool {
		t.Helper()
		var got []bool
		for _, w := range rs.Tables {
			ok, err := a.tableMatches(modelChecks(w.model), w.Family)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, ok)
		}
		return got
	}
	var epMap, svcChain string
	for _, s := range rs.Tables[0].Sets {
		if s.udata != nil && len(s.Elements) > 0 && epMap == "" {
			epMap = s.Name
		}
	}
	for _, ch := range rs.Tables[0].Chains {
		if ch.Base == nil && svcChain == "" && len(ch.Rules) > 0 {
			svcChain = ch.Name
		}
	}
	if epMap == "" || svcChain == "" {
		t.Fatal("kitchen-sink has no endpoint map or no service chain")
	}

	for _, tc := range []struct {
		name  string
		drift [][]string
		want  bool // of table ip; ip6 is never touched
	}{
		{"as sent", nil, true},
		// Rules are not compared: the batch's acknowledgement is their proof.
		{"rule deleted", [][]string{{"flush", "chain", "ip", "netspec", svcChain}}, true},
		{"element added", [][]string{{"add", "element", "ip", "netspec", "service-ips", "{ 192.0.2.99 . tcp . 1 : goto reject-chain }"}}, false},
		{"elements deleted", [][]string{{"flush", "map", "ip", "netspec", "service-ips"}}, false},
		{"endpoint map emptied", [][]string{{"flush", "map", "ip", "netspec", epMap}}, false},
		{"chain added", [][]string{{"add", "chain", "ip", "netspec", "by-hand"}}, false},
		{"set added", [][]string{{"add", "set", "ip", "netspec", "by-hand", "{ type ipv4_addr; }"}}, false},
		{"base chain's hook changed", [][]string{
			{"delete", "chain", "ip", "netspec", "filter-output-pre-dnat"},
			{"add", "chain", "ip", "netspec", "filter-output-pre-dnat", "{ type filter hook output priority 10; }"},
		}, false},
		{"table deleted", [][]string{{"delete", "table", "ip", "netspec"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := a.apply(rs); err != nil {
				t.Fatal(err)
			}
			for _, args := range tc.drift {
				nsNFT(t, ns, args...)
			}
			got := matches(t)
			if got[0] != tc.want || !got[1] {
				t.Errorf("tableMatches (ip, ip6) = %v, want [%t true]", got, tc.want)
			}
		})
	}
}
