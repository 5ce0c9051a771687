package nftmodel

import (
	"net/netip"
	"slices"
	"testing"
	"time"
)

// TestDiff: chains are counted by table and name, changed when a rule or
// the hook differs; elements by set and key, a changed value counting as
// removed and added; a table of the other family is another table.
func TestDiff(t *testing.T) {
	addr := func(s string) Key { return Key{Addr: netip.MustParseAddr(s)} }
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
		{Key: addr("10.0.0.1"), Verdict: GoTo("a")},
		{Key: addr("10.0.0.2"), Verdict: GoTo("a")},
	}, nil, []EndpointElement{
		{Lo: 0, Hi: 9, To: ep("10.244.0.1:80")},
		{Lo: 10, Hi: 19, To: ep("10.244.0.2:80")},
	})}}
	new := &Ruleset{Tables: []*Table{
		table(IPv4, map[string]Rule{
			"a": {Verdict{Kind: Drop}},             // same
			"c": {Verdict{Kind: Jump, Chain: "a"}}, // b removed, c added
		}, []Element{
			{Key: addr("10.0.0.1"), Verdict: GoTo("a")},
			{Key: addr("10.0.0.2"), Verdict: GoTo("c")}, // value changed
			{Key: addr("10.0.0.3"), Verdict: GoTo("a")}, // added
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
	// A set declared otherwise (a session affinity's timeout) is created
	// anew: it counts though it has no element.
	affinity := func(timeout time.Duration) *Ruleset {
		tb := &Table{Family: IPv4, Name: "netspec"}
		tb.AddSet("", &Set{Name: "affinity-x", Key: []KeyPart{AddrPart}, Dynamic: true, Timeout: timeout})
		return &Ruleset{Tables: []*Table{tb}}
	}
	if got, want := Diff(affinity(3*time.Hour), affinity(time.Minute)), (Delta{SetsChanged: 1}); got != want {
		t.Errorf("timeout changed: Diff = %+v, want %+v", got, want)
	}
	if got := Diff(affinity(time.Minute), affinity(time.Minute)); got != (Delta{}) {
		t.Errorf("same timeout: Diff = %+v", got)
	}
	if got := Diff(nil, nil); got != (Delta{}) {
		t.Errorf("Diff(nil, nil) = %+v", got)
	}
	if got := Diff(new, new); got != (Delta{}) {
		t.Errorf("Diff(new, new) = %+v", got)
	}
}

// TestDiffElements: elements are compared by value in any order (the
// kernel's sets have none); a changed value is removed and added; a
// set that is not there has no elements; an endpoint element's note is
// the file's only.
func TestDiffElements(t *testing.T) {
	el := func(addr, chain, comment string) Element {
		return Element{Key: Key{Addr: netip.MustParseAddr(addr)}, Verdict: Verdict{Kind: Goto, Chain: chain}, Comment: comment}
	}
	a, b, c := el("10.0.0.1", "x", ""), el("10.0.0.2", "x", ""), el("10.0.0.3", "x", "")
	tests := []struct {
		name           string
		old, new       []Element
		added, removed []int
		oldNil, newNil bool
	}{
		{name: "same", old: []Element{a, b}, new: []Element{a, b}},
		{name: "reordered", old: []Element{a, b, c}, new: []Element{c, a, b}},
		{name: "added in the middle", old: []Element{a, c}, new: []Element{a, b, c}, added: []int{1}},
		{name: "removed", old: []Element{a, b, c}, new: []Element{a, c}, removed: []int{1}},
		{name: "verdict changed", old: []Element{a, b}, new: []Element{a, el("10.0.0.2", "y", "")}, added: []int{1}, removed: []int{1}},
		{name: "comment changed", old: []Element{a}, new: []Element{el("10.0.0.1", "x", "ns/web:http")}, added: []int{0}, removed: []int{0}},
		{name: "comment as the kernel keeps it", old: []Element{el("10.0.0.1", "x", "a \"b\"")}, new: []Element{el("10.0.0.1", "x", "a _b_")}},
		{name: "set added", new: []Element{a, b}, oldNil: true, added: []int{0, 1}},
		{name: "set removed", old: []Element{a}, newNil: true, removed: []int{0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var oldSet, newSet *Set
			if !tt.oldNil {
				oldSet = &Set{Name: "m", Verdicts: true, Key: []KeyPart{AddrPart}, Elements: tt.old}
			}
			if !tt.newNil {
				newSet = &Set{Name: "m", Verdicts: true, Key: []KeyPart{AddrPart}, Elements: tt.new}
			}
			added, removed := DiffElements(oldSet, newSet)
			if !slices.Equal(added, tt.added) || !slices.Equal(removed, tt.removed) {
				t.Errorf("DiffElements = %v, %v; want %v, %v", added, removed, tt.added, tt.removed)
			}
		})
	}
	// More edits than myers looks for: the maps align them, in order.
	var many, other []Element
	var all []int
	for i := range 2 * maxEdits {
		many = append(many, el(netip.AddrFrom4([4]byte{10, 1, 0, byte(i)}).String(), "x", ""))
		other = append(other, el(netip.AddrFrom4([4]byte{10, 2, 0, byte(i)}).String(), "x", ""))
		all = append(all, i)
	}
	other[0] = many[0]
	sm, so := &Set{Elements: many}, &Set{Elements: other}
	if added, removed := DiffElements(sm, so); !slices.Equal(added, all[1:]) || !slices.Equal(removed, all[1:]) {
		t.Errorf("many edits: DiffElements = %v, %v; want 1..%d twice", added, removed, len(all)-1)
	}
	ep := func(lo uint32, to, note string) EndpointElement {
		return EndpointElement{Lo: lo, Hi: lo + 9, To: netip.MustParseAddrPort(to), Note: note}
	}
	old := &Set{EndpointMod: 30, Endpoints: []EndpointElement{ep(0, "10.244.0.1:80", ""), ep(10, "10.244.0.2:80", ""), ep(20, "10.244.0.3:80", "")}}
	new := &Set{EndpointMod: 30, Endpoints: []EndpointElement{ep(0, "10.244.0.1:80", "a note"), ep(10, "10.244.0.9:80", ""), ep(20, "10.244.0.3:80", "")}}
	if added, removed := DiffEndpoints(old, new); !slices.Equal(added, []int{1}) || !slices.Equal(removed, []int{1}) {
		t.Errorf("DiffEndpoints = %v, %v; want [1], [1]", added, removed)
	}
}

// TestSameChain: chains are alike when hook and rules' text are; a
// chain is alike to itself.
func TestSameChain(t *testing.T) {
	nat := &Hook{Type: NAT, Hook: Prerouting, Priority: PriorityDstNAT}
	rules := []Rule{{ProtoMatch{Proto: TCP}, Verdict{Kind: Jump, Chain: "x"}}}
	tests := []struct {
		name string
		a, b *Chain
		want bool
	}{
		{name: "same rules", a: &Chain{Name: "c", Rules: rules}, b: &Chain{Name: "c", Rules: []Rule{{ProtoMatch{Proto: TCP}, Verdict{Kind: Jump, Chain: "x"}}}}, want: true},
		{name: "comment is the file's", a: &Chain{Name: "c", Rules: rules}, b: &Chain{Name: "c", Comment: "hi", Rules: rules}, want: true},
		{name: "rule differs", a: &Chain{Name: "c", Rules: rules}, b: &Chain{Name: "c", Rules: []Rule{{ProtoMatch{Proto: UDP}, Verdict{Kind: Jump, Chain: "x"}}}}},
		{name: "rule missing", a: &Chain{Name: "c", Rules: rules}, b: &Chain{Name: "c"}},
		{name: "hook added", a: &Chain{Name: "c", Rules: rules}, b: &Chain{Name: "c", Hook: nat, Rules: rules}},
		{name: "hook priority", a: &Chain{Name: "c", Hook: nat}, b: &Chain{Name: "c", Hook: &Hook{Type: NAT, Hook: Prerouting}}},
		{name: "addresses in another order", want: true,
			a: &Chain{Name: "c", Rules: []Rule{{AddrMatch{Field: SAddr, Prefixes: prefixes("10.0.0.2/32", "10.0.0.1/32"), Braces: true}}}},
			b: &Chain{Name: "c", Rules: []Rule{{AddrMatch{Field: SAddr, Prefixes: prefixes("10.0.0.1/32", "10.0.0.2/32"), Braces: true}}}}},
		{name: "other addresses",
			a: &Chain{Name: "c", Rules: []Rule{{AddrMatch{Field: SAddr, Prefixes: prefixes("10.0.0.2/32", "10.0.0.1/32"), Braces: true}}}},
			b: &Chain{Name: "c", Rules: []Rule{{AddrMatch{Field: SAddr, Prefixes: prefixes("10.0.0.1/32", "10.0.0.3/32"), Braces: true}}}}},
	}
	var cmp Comparer
	for _, tt := range tests {
		if got := cmp.SameChain(tt.a, tt.b, IPv4); got != tt.want {
			t.Errorf("%s: SameChain = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// prefixes parses prefixes.
func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

// TestCanonical: an address match as the kernel's anonymous set keeps
// it; other statements as they are.
func TestCanonical(t *testing.T) {
	match := func(braces bool, ps ...string) Rule {
		return Rule{AddrMatch{Field: DAddr, Neq: true, Prefixes: prefixes(ps...), Braces: braces}, Verdict{Kind: Drop}}
	}
	tests := []struct {
		name string
		rule Rule
		want string
	}{
		{name: "no address match", rule: Rule{ProtoMatch{Proto: TCP}, Verdict{Kind: Accept}}, want: "meta l4proto tcp accept"},
		{name: "one prefix in braces is bare", rule: match(true, "10.0.0.0/8"), want: "ip daddr != 10.0.0.0/8 drop"},
		{name: "addresses sorted, once each", rule: match(true, "10.0.0.3/32", "10.0.0.1/32", "10.0.0.3/32"), want: "ip daddr != { 10.0.0.1, 10.0.0.3 } drop"},
		{name: "prefixes merged", rule: match(false, "10.0.1.0/24", "10.0.0.0/24", "10.0.0.7/32", "192.168.0.0/16"), want: "ip daddr != { 10.0.0.0/23, 192.168.0.0/16 } drop"},
		{name: "merged into one, still a set", rule: match(false, "10.0.0.128/25", "10.0.0.0/25"), want: "ip daddr != { 10.0.0.0/24 } drop"},
		{name: "touching ranges not a prefix", rule: match(false, "10.0.0.1/32", "10.0.0.2/31"), want: "ip daddr != { 10.0.0.1, 10.0.0.2/31 } drop"},
	}
	for _, tt := range tests {
		if got := tt.rule.Canonical().Text(IPv4); got != tt.want {
			t.Errorf("%s: Canonical = %s, want %s", tt.name, got, tt.want)
		}
	}
}

// benchDiffSets are two versions of a verdict map of 20,000 elements,
// one element's verdict changed in the middle.
func benchDiffSets() (*Set, *Set) {
	a := &Set{Verdicts: true}
	for i := range 20000 {
		a.Elements = append(a.Elements, Element{Key: Key{Addr: netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), Proto: TCP, Port: 80}, Verdict: GoTo("service-ABCDEFGH-ns/name/tcp/http")})
	}
	b := &Set{Verdicts: true, Elements: append([]Element(nil), a.Elements...)}
	b.Elements[10000].Verdict = GoTo("other")
	return a, b
}

// BenchmarkDiffElements measures the diff of a big map with one change:
// the common head and tail are most of the work.
func BenchmarkDiffElements(bm *testing.B) {
	a, b := benchDiffSets()
	for bm.Loop() {
		ad, rm := DiffElements(a, b)
		if len(ad) != 1 || len(rm) != 1 {
			bm.Fatal(ad, rm)
		}
	}
}

// BenchmarkDiffEndpoints is BenchmarkDiffElements for an endpoint map.
func BenchmarkDiffEndpoints(bm *testing.B) {
	a := &Set{EndpointMod: 2520}
	for i := range 20000 {
		a.Endpoints = append(a.Endpoints, EndpointElement{Lo: uint32(i * 10), Hi: uint32(i*10 + 9), To: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)}), 8080)})
	}
	b := &Set{EndpointMod: 2520, Endpoints: append([]EndpointElement(nil), a.Endpoints...)}
	b.Endpoints[10000].Hi++
	for bm.Loop() {
		ad, rm := DiffEndpoints(a, b)
		if len(ad) != 1 || len(rm) != 1 {
			bm.Fatal(ad, rm)
		}
	}
}
