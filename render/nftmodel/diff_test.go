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
	ep := func(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }
	table := func(f Family, rules map[string]Rule, elems []Element, dropped map[Key][]Verdict, eps []EndpointElement) *Table {
		tb := &Table{Family: f, Name: "netspec"}
		for _, name := range []string{"a", "b", "c"} {
			if r, ok := rules[name]; ok {
				tb.AddChain("", &Chain{Name: name, Rules: []Rule{r}})
			}
		}
		tb.AddSet("", &Set{Name: "m", Key: []KeyPart{AddrPart}, Verdicts: true, Elements: elems, Dropped: dropped})
		tb.AddSet("", &Set{Name: "e", EndpointMod: 2520, Interval: true, Endpoints: eps})
		return tb
	}
	old := &Ruleset{Tables: []*Table{table(IPv4, map[string]Rule{
		"a": {Verdict{Kind: Drop}},
		"b": {Verdict{Kind: Jump, Chain: "a"}},
	}, []Element{
		{Key: addr("10.0.0.1"), Verdict: goTo("a")},
		{Key: addr("10.0.0.2"), Verdict: goTo("a")},
	}, nil, []EndpointElement{
		{Lo: 0, Hi: 9, To: ep("10.244.0.1:80")},
		{Lo: 10, Hi: 19, To: ep("10.244.0.2:80")},
	})}}
	new := &Ruleset{Tables: []*Table{
		table(IPv4, map[string]Rule{
			"a": {Verdict{Kind: Drop}},             // same
			"c": {Verdict{Kind: Jump, Chain: "a"}}, // b removed, c added
		}, []Element{
			{Key: addr("10.0.0.1"), Verdict: goTo("a")},
			{Key: addr("10.0.0.2"), Verdict: goTo("c")}, // value changed
			{Key: addr("10.0.0.3"), Verdict: goTo("a")}, // added
		}, map[Key][]Verdict{addr("10.0.0.1"): {{Kind: Drop}}}, // a dropped duplicate is the file's only
			[]EndpointElement{
				{Lo: 0, Hi: 9, To: ep("10.244.0.1:80"), Note: "a note is the file's only"},
				{Lo: 10, Hi: 19, To: ep("10.244.0.3:80")}, // value changed
				{Lo: 20, Hi: 29, To: ep("10.244.0.1:80")}, // added
			}),
		table(IPv6, map[string]Rule{"a": {Reject{}}}, nil, nil, nil),
	}}
	want := Delta{ChainsAdded: 2, ChainsRemoved: 1, ElementsAdded: 4, ElementsRemoved: 2}
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
