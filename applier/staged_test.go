package applier_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"netspec.dev/netspec/applier"
	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/internal/testnet"
	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/schema"
)

// TestStaged: a plan compiled in two steps programs the kernel from its
// Services before finish runs, and writes the state dir from finish's
// complete plan; a finish that fails leaves the kernel updated and the
// state dir as it was.
func TestStaged(t *testing.T) {
	testnet.Require(t, "nft")
	tree := t.TempDir()
	copyDir(t, filepath.Join("testdata", "traffic", "common"), tree)
	copyDir(t, filepath.Join("testdata", "traffic", "cluster-ip"), filepath.Join(tree, "cluster-ip"))
	staged := func() *compiler.Staged {
		t.Helper()
		tr, err := schema.Load(tree, schema.Options{})
		if err != nil {
			t.Fatal(err)
		}
		checked := compiler.Validate(tr.Objects, nil, tr)
		if n := append(tr.Diags, checked.Diags...).Errors(); n > 0 {
			t.Fatalf("the tree is invalid: %d errors", n)
		}
		s, err := compiler.CompileStaged(tr.Objects, checked, "node-1")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ns := testnet.New(t, "staged").NS("node")
	dir := t.TempDir()
	n, err := applier.Open(applier.Options{StateDir: dir, NetNSFd: ns.Fd()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ruleset := func() string {
		t.Helper()
		out, err := ns.Run("nft", "list", "table", "ip", "netspec")
		if err != nil {
			t.Fatalf("nft list: %v\n%s", err, out)
		}
		return out
	}
	planJSON := func() string {
		data, _ := os.ReadFile(filepath.Join(dir, "plan.json"))
		return string(data)
	}

	s := staged()
	if s.Plan.DNS.Zones != nil || s.Plan.Env != nil {
		t.Fatal("CompileStaged made DNS records or env files")
	}
	var vip string
	for _, svc := range s.Plan.Services {
		if len(svc.ClusterIPs) > 0 {
			vip = svc.ClusterIPs[0].String()
		}
	}
	if vip == "" {
		t.Fatal("the tree has no cluster IP")
	}
	finished := false
	if _, err := n.ApplyStaged(s.Plan, func() (*plan.Plan, error) {
		finished = true
		if !strings.Contains(ruleset(), vip) {
			t.Errorf("finish ran before the kernel held %s", vip)
		}
		if planJSON() != "" {
			t.Error("the state dir was written before finish")
		}
		return s.Finish(), nil
	}); err != nil {
		t.Fatal(err)
	}
	if !finished {
		t.Fatal("finish was not called")
	}
	before := planJSON()
	if !strings.Contains(before, vip) {
		t.Fatalf("plan.json does not name %s:\n%s", vip, before)
	}
	zones, _ := filepath.Glob(filepath.Join(dir, "dns", "*.zone"))
	if len(zones) == 0 {
		t.Error("no zone files: finish's DNS records were not written")
	}

	// The Services gone from the next plan: the kernel follows even when
	// finish fails, and the state dir keeps the last complete plan.
	s = staged()
	s.Plan.Services = nil
	broken := errors.New("finish failed")
	if _, err := n.UpdateStaged(s.Plan, func() (*plan.Plan, error) { return nil, broken }); !errors.Is(err, broken) {
		t.Fatalf("UpdateStaged: %v, want %v", err, broken)
	}
	if strings.Contains(ruleset(), vip) {
		t.Errorf("the kernel still holds %s after the update", vip)
	}
	if got := planJSON(); got != before {
		t.Error("a failed finish changed plan.json")
	}
}
