package applier_test

import (
	"slices"
	"testing"

	"github.com/google/nftables"

	"netspec.dev/netspec/applier/nft"
	"netspec.dev/netspec/plan"
)

// TestDrift: drift is the kernel's difference with the last applied
// plan, whether the plan asked is that plan (its own changes) or another
// (the kernel read against the last one again, so that the new plan's
// changes are no drift); with nothing applied there is none.
func TestDrift(t *testing.T) {
	plans := besidePlans(t)
	p1, p2 := plans[0], plans[1]
	fake, _, n, _ := fakeNode(t)

	r, err := n.Plan(p1)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := n.Drift(r, p1, false); err != nil || d != nil {
		t.Fatalf("nothing applied: drift %+v, %v; want none", d, err)
	}

	if _, err := n.ApplyStaged(p1, nil); err != nil {
		t.Fatal(err)
	}
	table := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: nft.TableName}
	if err := fake.Run(func(b nft.Batch) error {
		b.FlushChain(&nftables.Chain{Table: table, Name: "services"})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		p    *plan.Plan
		same bool
	}{
		{name: "the last applied plan", p: p1, same: true},
		{name: "a plan with more Services", p: p2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := n.Plan(tc.p)
			if err != nil {
				t.Fatal(err)
			}
			d, err := n.Drift(r, tc.p, tc.same)
			if err != nil {
				t.Fatal(err)
			}
			var changed []string
			var added int
			for _, tb := range d.Tables {
				changed = append(changed, tb.ChainsChanged...)
				added += len(tb.ElementsAdded) + len(tb.ChainsAdded)
			}
			if !slices.Equal(changed, []string{"services"}) || added != 0 {
				t.Errorf("drift: chains changed %q, %d chains and elements added; want the chain services flushed by hand, nothing else", changed, added)
			}
		})
	}
	if r, err := n.Plan(p2); err != nil || r.NFT.Empty() {
		t.Fatalf("p2 changes nothing in the kernel (%v): the test proves nothing", err)
	}
}
