package nft

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSummarize: an empty kernel has neither table; after an install the
// counts are those of the ruleset installed: its chains, named sets and
// rendered elements (an interval is one).
func TestSummarize(t *testing.T) {
	f, a := fakeApplier(t)
	got, err := Summarize(f)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]TableSummary{{Family: "ip"}, {Family: "ip6"}}, got); diff != "" {
		t.Errorf("empty kernel (-want +got):\n%s", diff)
	}
	rs := goldenRuleset(t, "kitchen-sink/node-1/nftables.nft")
	if _, err := a.apply(rs); err != nil {
		t.Fatal(err)
	}
	var want []TableSummary
	for i, tb := range rs.Tables {
		s := TableSummary{Family: []string{"ip", "ip6"}[i], Present: true, Chains: len(tb.Chains), Sets: len(tb.Sets)}
		for _, set := range tb.Sets {
			s.Elements += len(set.Elements)
		}
		want = append(want, s)
	}
	if got, err = Summarize(f); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after install (-want +got):\n%s", diff)
	}
	if want[0].Elements == 0 || want[0].Chains == 0 {
		t.Fatalf("the golden ruleset has no chains or elements: %+v", want[0])
	}
}
