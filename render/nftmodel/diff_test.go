package nftmodel

import (
	"net/netip"
	"testing"
)

// TestDiff: chains are counted by table and name, changed when a rule or
// the hook differs; elements by set and key, a changed value counting as
// removed and added; a table of the other family is another table.
func TestDiff(t *testing.T) {
	addr := func(s string) Key { return Key{Addr: netip.MustParseAddr(s)} }
	goTo := func(c string) Verdict { return Verdict{Kind: Goto, Chain: c} }
	table := func(f Family, rules map[string]Rule, elems []Element) *Table {
		tb := &Table{Family: f, Name: "netspec"}
		for _, name := range []string{"a", "b", "c"} {
			if r, ok := rules[name]; ok {
				tb.AddChain("", &Chain{Name: name, Rules: []Rule{r}})
			}
		}
		tb.AddSet("", &Set{Name: "m", Key: []KeyPart{AddrPart}, Verdicts: true, Elements: elems})
		return tb
	}
	old := &Ruleset{Tables: []*Table{table(IPv4, map[string]Rule{
		"a": {Verdict{Kind: Drop}},
		"b": {Verdict{Kind: Jump, Chain: "a"}},
	}, []Element{
		{Key: addr("10.0.0.1"), Verdict: goTo("a")},
		{Key: addr("10.0.0.2"), Verdict: goTo("a")},
	})}}
	new := &Ruleset{Tables: []*Table{
		table(IPv4, map[string]Rule{
			"a": {Verdict{Kind: Drop}},             // same
			"c": {Verdict{Kind: Jump, Chain: "a"}}, // b removed, c added
		}, []Element{
			{Key: addr("10.0.0.1"), Verdict: goTo("a"), Note: "a note is the file's only"},
			{Key: addr("10.0.0.2"), Verdict: goTo("c")}, // value changed
			{Key: addr("10.0.0.3"), Verdict: goTo("a")}, // added
		}),
		table(IPv6, map[string]Rule{"a": {Reject{}}}, nil),
	}}
	want := Delta{ChainsAdded: 2, ChainsRemoved: 1, ElementsAdded: 2, ElementsRemoved: 1}
	if got := Diff(old, new); got != want {
		t.Errorf("Diff = %+v, want %+v", got, want)
	}
	old.Tables[0].Items[0].Chain.Rules = []Rule{{Reject{}}}
	want.ChainsChanged = 1
	if got := Diff(old, new); got != want {
		t.Errorf("after a rule changed: Diff = %+v, want %+v", got, want)
	}
	if got := Diff(nil, nil); got != (Delta{}) {
		t.Errorf("Diff(nil, nil) = %+v", got)
	}
	if got := Diff(new, new); got != (Delta{}) {
		t.Errorf("Diff(new, new) = %+v", got)
	}
}
