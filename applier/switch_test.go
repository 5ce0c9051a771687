package applier_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"netspec.dev/netspec/applier"
	"netspec.dev/netspec/applier/ipvs"
	"netspec.dev/netspec/internal/testnet"
	"netspec.dev/netspec/internal/vmtest"
)

// TestInVMSwitchDataplane: switching a node between nftables and ipvs with
// Apply leaves nothing of the other mode, and Cleanup leaves nothing at
// all. It runs in the VM of internal/vmtest (package applier/vmsuite).
func TestInVMSwitchDataplane(t *testing.T) {
	tree := clusterIPTreeInVM(t)
	_, p := compileTree(t, tree)
	ns := testnet.New(t, "switch").NS("node")
	dir := t.TempDir()
	open := func(withIPVS bool) *applier.Node {
		t.Helper()
		n, err := applier.Open(applier.Options{StateDir: dir, NetNSFd: ns.Fd(), IPVS: withIPVS})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		return n
	}
	// What the namespace holds: netspec's chains, its virtual servers and
	// its interface.
	state := func() (ruleset string, virtual int, link bool) {
		t.Helper()
		out, _ := ns.Run("nft", "list", "table", "ip", "netspec")
		s, err := ipvs.OpenSystem(ns.Fd())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		svcs, err := s.Services()
		if err != nil {
			t.Fatal(err)
		}
		st, err := s.Link()
		if err != nil {
			t.Fatal(err)
		}
		return out, len(svcs), st.Exists
	}
	for i, step := range []struct {
		ipvs bool
		mark string // a chain only this mode's tables have
	}{{true, "ipvs-mark"}, {false, "chain services"}, {true, "ipvs-mark"}} {
		if _, err := open(step.ipvs).ApplyStaged(p, nil); err != nil {
			t.Fatalf("step %d (ipvs %t): %v", i, step.ipvs, err)
		}
		ruleset, virtual, link := state()
		if !strings.Contains(ruleset, step.mark) {
			t.Errorf("step %d (ipvs %t): the tables are not this mode's (no %q):\n%s", i, step.ipvs, step.mark, ruleset)
		}
		if step.ipvs && (virtual == 0 || !link) {
			t.Errorf("step %d: ipvs mode with %d virtual servers, interface %t", i, virtual, link)
		}
		if !step.ipvs && (virtual != 0 || link) {
			t.Errorf("step %d: nftables mode left %d virtual servers, interface %t", i, virtual, link)
		}
	}
	if _, _, err := open(false).Cleanup(); err != nil {
		t.Fatal(err)
	}
	if ruleset, virtual, link := state(); ruleset != "" || virtual != 0 || link {
		t.Errorf("after Cleanup: table %q, %d virtual servers, interface %t", ruleset, virtual, link)
	}
}

// TestInVMRemovalAfterPublish: when a Service leaves the plan, its IPVS
// virtual server is deleted only after the node's files (and a daemon's
// DNS, at Options.Published) no longer name it. It runs in the VM of
// internal/vmtest (package applier/vmsuite).
func TestInVMRemovalAfterPublish(t *testing.T) {
	tree := clusterIPTreeInVM(t)
	_, with := compileTree(t, tree)
	if err := os.Remove(filepath.Join(tree, "cluster-ip", "service.yaml")); err != nil {
		t.Fatal(err)
	}
	_, without := compileTree(t, tree)

	ns := testnet.New(t, "prune").NS("node")
	dir := t.TempDir()
	frontends := func() []string {
		t.Helper()
		s, err := ipvs.OpenSystem(ns.Fd())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		svcs, err := s.Services()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, v := range svcs {
			out = append(out, v.Key.String())
		}
		return out
	}
	var atPublish []string
	var zoneAtPublish string
	n, err := applier.Open(applier.Options{StateDir: dir, NetNSFd: ns.Fd(), IPVS: true, Published: func() {
		atPublish = frontends()
		b, _ := os.ReadFile(filepath.Join(dir, "dns", "cluster.local.zone"))
		zoneAtPublish = string(b)
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if _, err := n.ApplyStaged(with, nil); err != nil {
		t.Fatal(err)
	}
	const web = "tcp 10.96.0.10:80"
	if !slices.Contains(atPublish, web) {
		t.Fatalf("adding: at Published the kernel has %v, want %s already there", atPublish, web)
	}
	for _, update := range []bool{false, true} {
		apply := n.ApplyStaged
		if update {
			if _, err := n.ApplyStaged(with, nil); err != nil {
				t.Fatal(err)
			}
			apply = n.UpdateStaged
		}
		if _, err := apply(without, nil); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(atPublish, web) {
			t.Errorf("removing (update %t): at Published the kernel has %v: %s went before DNS dropped it", update, atPublish, web)
		}
		if strings.Contains(zoneAtPublish, "web.shop.svc") {
			t.Errorf("removing (update %t): at Published the zone still names web.shop.svc", update)
		}
		if slices.Contains(frontends(), web) {
			t.Errorf("removing (update %t): %s is still in the kernel after the apply", update, web)
		}
	}
}

// clusterIPTreeInVM skips unless the test runs in the VM of
// internal/vmtest, and returns a copy of the traffic tests' cluster-ip
// tree.
func clusterIPTreeInVM(t *testing.T) string {
	t.Helper()
	if !vmtest.InVM() {
		t.Skip("SKIPPED: runs in the VM of internal/vmtest (package applier/vmsuite); the host kernel has no IPVS")
	}
	testnet.Require(t, "nft")
	tree := t.TempDir()
	copyDir(t, filepath.Join("testdata", "traffic", "common"), tree)
	copyDir(t, filepath.Join("testdata", "traffic", "cluster-ip"), filepath.Join(tree, "cluster-ip"))
	return tree
}
