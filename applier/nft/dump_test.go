package nft

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/google/nftables"
)

// TestChainsAsGoogleNftables lists the chains of a namespace that holds a
// golden ruleset and a foreign table with base chains of every kind and
// more chains than one big read holds, and compares System.Chains with
// google/nftables' ListChainsOfTableFamily.
func TestChainsAsGoogleNftables(t *testing.T) {
	_, fd := syncNetns(t)
	k, err := OpenSystem(fd)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if _, err := newEncoded(k).apply(goldenRuleset(t, "kitchen-sink/node-1/nftables.nft")); err != nil {
		t.Fatal(err)
	}
	accept, drop := nftables.ChainPolicyAccept, nftables.ChainPolicyDrop
	other := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: "other"}
	if err := k.Run(func(b Batch) error {
		b.AddTable(other)
		b.AddChain(&nftables.Chain{Table: other, Name: "in", Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityRef(-150), Policy: &drop})
		b.AddChain(&nftables.Chain{Table: other, Name: "pre", Type: nftables.ChainTypeNAT,
			Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityNATDest, Policy: &accept})
		for i := range 20000 {
			b.AddChain(&nftables.Chain{Table: other, Name: fmt.Sprintf("chain-with-a-longer-name-%d", i)})
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ref, err := dial(fd)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.CloseLasting()
	for _, fam := range families {
		got, err := k.Chains(fam)
		if err != nil {
			t.Fatal(err)
		}
		want, err := ref.ListChainsOfTableFamily(fam)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d chains, google/nftables lists %d", familyName(fam), len(got), len(want))
		}
		if fam == nftables.TableFamilyIPv4 && len(got) < 20002 {
			t.Fatalf("%s: %d chains, want at least 20002", familyName(fam), len(got))
		}
		for i := range got {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Errorf("%s: chain %d: %+v (table %+v), google/nftables %+v (table %+v)",
					familyName(fam), i, got[i], got[i].Table, want[i], want[i].Table)
			}
		}
	}
}
