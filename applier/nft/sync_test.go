package nft

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"netspec.dev/netspec/internal/testnet"
	"netspec.dev/netspec/render"
	"netspec.dev/netspec/render/nftmodel"
)

// These tests change nftables only inside network namespaces they create
// themselves, and delete them afterwards, also on failure.

// syncNetns makes a namespace with a unique name and returns an open fd
// of it, both released when the test ends; it skips loudly without root.
func syncNetns(t *testing.T) (name string, fd int) {
	t.Helper()
	testnet.Require(t, "nft")
	ns := testnet.New(t, "sync").NS("node")
	return ns.Name, ns.Fd()
}

// syncApplier is an Applier for a namespace of syncNetns, closed when
// the test ends.
func syncApplier(t *testing.T) (ns string, a *encodedApplier) {
	t.Helper()
	ns, fd := syncNetns(t)
	k, err := OpenSystem(fd)
	if err != nil {
		t.Fatal(err)
	}
	a = newEncoded(k)
	t.Cleanup(func() { a.Close() })
	return ns, a
}

func nsNFT(t *testing.T, ns string, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"netns", "exec", ns, "nft"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("nft %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// goldenRuleset is the encoding of the model render builds from the
// golden plan beside path (golden/<example>/<node>/nftables.nft, or
// ipvs-nftables.nft for the IPVS data plane's), whose text the golden
// test holds to that file.
func goldenRuleset(t *testing.T, path string) *Ruleset {
	t.Helper()
	return Encode(goldenModel(t, path))
}

// goldenModel is the model of goldenRuleset.
func goldenModel(t *testing.T, path string) *nftmodel.Ruleset {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "golden", filepath.Dir(path), "plan.json"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := render.ParsePlanJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(path) == "ipvs-nftables.nft" {
		return render.NFTablesIPVSModel(p)
	}
	return render.NFTablesModel(p)
}

func counts(c *Changes) string {
	var parts []string
	for _, t := range c.Tables {
		parts = append(parts, fmt.Sprintf("%s replace=%t delete=%t chains +%d ~%d -%d sets +%d -%d elements +%d -%d",
			t.Family, t.Replace, t.Delete, len(t.ChainsAdded), len(t.ChainsChanged), len(t.ChainsRemoved),
			len(t.SetsAdded), len(t.SetsRemoved), len(t.ElementsAdded), len(t.ElementsRemoved)))
	}
	return strings.Join(parts, "; ")
}

// TestApplyConverges: a first apply replaces, a second changes nothing,
// moving between examples changes only what differs, and every apply
// leaves exactly the wanted ruleset (Apply verifies it itself).
func TestApplyConverges(t *testing.T) {
	ns, a := syncApplier(t)

	basic := goldenRuleset(t, "basic/node-1/nftables.nft")
	ks := goldenRuleset(t, "kitchen-sink/node-1/nftables.nft")
	basic2 := goldenRuleset(t, "basic/node-2/nftables.nft")

	ch, err := a.apply(basic)
	if err != nil {
		t.Fatal(err)
	}
	if !ch.Tables[0].Replace || ch.Tables[0].Reason != ReasonMissing {
		t.Errorf("first apply: %s, want a replace of the missing table", counts(ch))
	}
	if ch, err = a.apply(basic); err != nil || !ch.Empty() {
		t.Fatalf("second apply: %v %s, want no changes", err, counts(ch))
	}
	// node-2 of the same tree: same services, other local endpoints.
	if ch, err = a.apply(basic2); err != nil {
		t.Fatal(err)
	}
	if ch.Tables[0].Replace || len(ch.Tables[0].ChainsAdded) > 0 {
		t.Errorf("basic node-1 -> node-2: %s, want chains rewritten in place", counts(ch))
	}
	// A bigger ruleset, with IPv6, and back.
	for _, rs := range []*Ruleset{ks, basic, ks} {
		if _, err := a.apply(rs); err != nil {
			t.Fatal(err)
		}
		if ch, err := a.plan(rs); err != nil || !ch.Empty() {
			t.Fatalf("plan after apply: %v %s", err, counts(ch))
		}
	}
	// Cleanup removes both tables, and only them.
	nsNFT(t, ns, "add", "table", "inet", "bystander")
	deleted, err := a.Cleanup()
	if err != nil {
		t.Fatal(err)
	}
	if len(deleted) != 2 {
		t.Errorf("cleanup deleted %q, want both tables", deleted)
	}
	if got := nsNFT(t, ns, "list", "tables"); strings.TrimSpace(got) != "table inet bystander" {
		t.Errorf("after cleanup the namespace holds:\n%s", got)
	}
}

// TestApplyRepairsDrift changes the kernel by hand in every way drift can
// take, and checks that Plan sees it and Apply puts it right.
func TestApplyRepairsDrift(t *testing.T) {
	ns, a := syncApplier(t)
	rs := goldenRuleset(t, "kitchen-sink/node-1/nftables.nft")
	if _, err := a.apply(rs); err != nil {
		t.Fatal(err)
	}
	var svcChain string
	for _, ch := range rs.Tables[0].Chains {
		if strings.HasPrefix(ch.Name, "service-") {
			svcChain = ch.Name
			break
		}
	}
	for _, tc := range []struct {
		name    string
		drift   [][]string
		want    string
		removed string // the text of the element removed, if one is
	}{
		{name: "rule deleted", drift: [][]string{{"flush", "chain", "ip", "netspec", svcChain}}, want: "~1"},
		{name: "rule added", drift: [][]string{{"add", "rule", "ip", "netspec", "services", "counter", "accept"}}, want: "~1"},
		{name: "chain added", drift: [][]string{{"add", "chain", "ip", "netspec", "by-hand"}}, want: "-1"},
		{name: "base chain deleted", drift: [][]string{{"delete", "chain", "ip", "netspec", "filter-output-pre-dnat"}}, want: "replace=true"},
		{name: "base chain added", drift: [][]string{{"add", "chain", "ip", "netspec", "by-hand", "{ type filter hook input priority 0; }"}}, want: "replace=true"},
		{name: "element added", drift: [][]string{{"add", "element", "ip", "netspec", "service-ips", "{ 192.0.2.99 . tcp . 1 : goto reject-chain }"}}, want: "elements +0 -1", removed: "192.0.2.99 . tcp . 1 : goto reject-chain"},
		// A verdict the model does not hold: the element is removed.
		{name: "element of another verdict", drift: [][]string{{"add", "element", "ip", "netspec", "service-ips", "{ 192.0.2.99 . tcp . 1 : continue }"}}, want: "elements +0 -1", removed: "0xc00002630600000000010000 : continue"},
		{name: "element deleted", drift: [][]string{{"flush", "map", "ip", "netspec", "service-ips"}}, want: "elements +"},
		// A range that is no prefix does not decode: it is removed.
		{name: "range in an interval set", drift: [][]string{{"add", "element", "ip", "netspec", "nodeport-ips", "{ 192.0.2.1-192.0.2.5 }"}}, want: "elements +0 -1", removed: "192.0.2.1-192.0.2.5"},
		{name: "table deleted", drift: [][]string{{"delete", "table", "ip", "netspec"}}, want: "replace=true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, args := range tc.drift {
				nsNFT(t, ns, args...)
			}
			ch, err := a.plan(rs)
			if err != nil {
				t.Fatal(err)
			}
			if ch.Empty() || !strings.Contains(counts(ch), tc.want) {
				t.Errorf("plan after drift: %s, want it to contain %q", counts(ch), tc.want)
			}
			if tc.removed != "" {
				if got := ch.Tables[0].ElementsRemoved; len(got) != 1 || got[0].Text != tc.removed {
					t.Errorf("elements removed: %+v, want one: %s", got, tc.removed)
				}
			}
			if _, err := a.apply(rs); err != nil {
				t.Fatal(err)
			}
			if ch, err := a.plan(rs); err != nil || !ch.Empty() {
				t.Fatalf("plan after repair: %v %s", err, counts(ch))
			}
		})
	}
}

// TestUpdateSmallChange: the daemon's path sends only what changed, and
// the kernel ends up as Apply would have left it.
func TestUpdateSmallChange(t *testing.T) {
	_, a := syncApplier(t)
	// Two nodes of one tree: a Local policy picks other endpoints.
	one := goldenRuleset(t, "kitchen-sink/node-1/nftables.nft")
	two := goldenRuleset(t, "kitchen-sink/node-2/nftables.nft")
	if _, err := a.update(one); err != nil {
		t.Fatal(err)
	}
	ch, err := a.update(two)
	if err != nil {
		t.Fatal(err)
	}
	full, err := a.plan(two)
	if err != nil || !full.Empty() {
		t.Fatalf("after Update the kernel differs: %v %s", err, counts(full))
	}
	// The Local policy's picks changed: elements of endpoint maps, and no
	// rule.
	if c := ch.Tables[0]; c.Replace || len(c.ChainsChanged)+len(c.ChainsAdded)+len(c.ChainsRemoved) != 0 ||
		len(c.ElementsAdded) == 0 || c.Ops == 0 || c.Ops > 10 {
		t.Errorf("update node-1 -> node-2: %s, %d ops", counts(ch), ch.Tables[0].Ops)
	}
	if ch, err := a.update(two); err != nil || !ch.Empty() {
		t.Errorf("same update again: %v %s", err, counts(ch))
	}
}

// TestApplyRejectedBatch: a batch the kernel refuses changes nothing, the
// error says so, and the next apply converges.
func TestApplyRejectedBatch(t *testing.T) {
	_, fd := syncNetns(t)
	k, err := OpenSystem(fd)
	if err != nil {
		t.Fatal(err)
	}
	a := newEncoded(k)
	defer a.Close()
	good := goldenRuleset(t, "basic/node-1/nftables.nft")
	if _, err := a.apply(good); err != nil {
		t.Fatal(err)
	}
	// DNAT in a chain the filter hooks reach: the kernel refuses it (NAT
	// only in nat chains), and with it the whole batch.
	m := goldenModel(t, "kitchen-sink/node-1/nftables.nft")
	inserted := false
	for _, c := range m.Tables[0].Chains() {
		for i, r := range c.Rules {
			if len(r) == 1 && r[0] == (nftmodel.Reject{}) && !inserted {
				dnat := nftmodel.Rule{nftmodel.ProtoMatch{Proto: nftmodel.TCP}, nftmodel.DNAT{To: netip.MustParseAddrPort("10.0.0.1:80")}}
				c.Rules = append(c.Rules[:i:i], append([]nftmodel.Rule{dnat}, c.Rules[i:]...)...)
				inserted = true
				break
			}
		}
	}
	if !inserted {
		t.Fatal("kitchen-sink has no rule that only rejects")
	}
	bad := Encode(m)
	_, err = a.apply(bad)
	if err == nil || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("apply of a refused batch: %v, want an error saying nothing was changed", err)
	}
	t.Logf("refused: %v", err)
	if len(err.Error()) > 300 {
		t.Errorf("the error is %d bytes long: one cause, not one per message", len(err.Error()))
	}
	// The kernel is as it was (seen by an applier without that history).
	kb, err := OpenSystem(fd)
	if err != nil {
		t.Fatal(err)
	}
	b := newEncoded(kb)
	defer b.Close()
	if ch, err := b.plan(good); err != nil || !ch.Empty() {
		t.Fatalf("after the refused batch the kernel no longer holds the last good ruleset: %v %s", err, counts(ch))
	}
	ks := goldenRuleset(t, "kitchen-sink/node-1/nftables.nft")
	ch, err := a.apply(ks)
	if err != nil {
		t.Fatal(err)
	}
	if !ch.Tables[0].Replace {
		t.Errorf("the apply after a refused batch: %s, want the tables replaced whole", counts(ch))
	}
	if ch, err := a.plan(ks); err != nil || !ch.Empty() {
		t.Fatalf("apply after the refused batch did not converge: %v %s", err, counts(ch))
	}
}
