package main

import (
	"fmt"
	"strings"
	"testing"

	"netspec.dev/netspec/applier/nft"
)

// TestWriteDrift: drift is told chain by chain, a chain that differs with
// at most maxRuleLines of its own rules (those of other chains are not
// its), then sets and elements; a table replaced or deleted whole is not
// drift (writeNodeChanges tells it).
func TestWriteDrift(t *testing.T) {
	var rules []nft.RuleChange
	for i := 1; i <= maxRuleLines+2; i++ {
		rules = append(rules, nft.RuleChange{Chain: "services", Index: i, Old: fmt.Sprintf("old %d", i)})
	}
	rules = append(rules, nft.RuleChange{Chain: "other", Index: 1, New: "other's"})
	ch := &nft.Changes{Tables: []nft.TableChanges{
		{Family: "ip", ChainsAdded: []string{"a"}, ChainsChanged: []string{"services"}, Rules: rules,
			SetsRemoved:   []string{"by-hand"},
			ElementsAdded: []nft.ElementChange{{Set: "service-ips", Text: "10.96.0.1 . tcp . 80 : goto svc"}}},
		{Family: "ip6", Replace: true, Reason: nft.ReasonMissing, ChainsAdded: []string{"a"}},
	}}
	want := "+ drift: chain ip a is missing\n" +
		"~ drift: chain ip services differs from the plan\n"
	for i := 1; i <= maxRuleLines; i++ {
		want += fmt.Sprintf("    - rule %d: old %d\n", i, i)
	}
	want += "    … and 2 more rules that differ\n" +
		"- drift: set ip by-hand is not in the plan\n" +
		"+ drift: ip service-ips element 10.96.0.1 . tcp . 80 : goto svc is missing\n"
	var b strings.Builder
	writeDrift(&b, ch)
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
