package applier_test

import (
	"slices"
	"strings"
	"testing"

	"netspec.dev/netspec/applier"
	"netspec.dev/netspec/applier/nft"
	"netspec.dev/netspec/explain"
	"netspec.dev/netspec/plan"
)

// TestCheckKernel: CheckKernel reads the kernel as Plan does and keeps
// its difference to each frontend asked: a table missing before the
// first apply, nothing after it, the frontends a later tree adds missing
// while the ones applied hold; without a data plane, or with a kernel it
// cannot read, every frontend is "not checked" with the reason.
func TestCheckKernel(t *testing.T) {
	plans := besidePlans(t)
	p1, p2 := plans[0], plans[1]
	fake, dir := nft.NewFake(), t.TempDir()
	o := applier.Options{StateDir: dir, NFTables: fake}
	old := frontendsOf(p1)
	added := slices.DeleteFunc(frontendsOf(p2), func(pk plan.Packet) bool { return slices.Contains(old, pk) })
	if len(old) == 0 || len(added) == 0 {
		t.Fatalf("the plans' frontends: %d, then %d more; want some of each", len(old), len(added))
	}

	checks := applier.CheckKernel(o, p1, old[:1])
	want := []string{"table ip netspec is missing: the kernel holds none of the plan"}
	if len(checks) != 1 || !checks[0].Checked || checks[0].Dataplane != "nftables" || !slices.Equal(checks[0].Differences, want) {
		t.Fatalf("before apply: %+v, want one check of nftables with %q", checks, want)
	}

	n, err := applier.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.ApplyStaged(p1, nil); err != nil {
		t.Fatal(err)
	}
	n.Close()
	checks = applier.CheckKernel(o, p1, old)
	if len(checks) != len(old) {
		t.Fatalf("%d checks for %d frontends", len(checks), len(old))
	}
	for i, c := range checks {
		if c.To.Addr() != old[i].Dst || c.To.Port() != old[i].Port || c.Protocol != old[i].Protocol || !c.Checked || len(c.Differences) > 0 {
			t.Errorf("after apply, frontend %v: %+v, want it checked, with no difference", old[i], c)
		}
	}

	checks = applier.CheckKernel(o, p2, append(slices.Clone(old), added...))
	for i, c := range checks {
		if i < len(old) && len(c.Differences) > 0 {
			t.Errorf("a frontend applied, %s/%s: differs %q", c.To, c.Protocol, c.Differences)
		}
		if i >= len(old) && !slices.ContainsFunc(c.Differences, func(d string) bool { return strings.HasSuffix(d, " is missing") }) {
			t.Errorf("a frontend not applied, %s/%s: differences %q, want what is missing", c.To, c.Protocol, c.Differences)
		}
	}

	for _, tc := range []struct {
		name string
		o    applier.Options
		want explain.KernelCheck
	}{{
		name: "no data plane",
		o:    applier.Options{StateDir: dir, NoDataplane: true},
		want: explain.KernelCheck{Dataplane: "none", NotChecked: "the daemon runs with --dataplane none: netspec programs no kernel on this node"},
	}, {
		name: "IPVS over a given nftables",
		o:    applier.Options{StateDir: dir, NFTables: fake, IPVS: true},
		want: explain.KernelCheck{Dataplane: "ipvs", NotChecked: "reading the node's IPVS and nftables: the IPVS data plane needs the kernel, not a given nftables"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := applier.CheckKernel(tc.o, p1, old)
			if len(got) != 1 || got[0].Dataplane != tc.want.Dataplane || got[0].NotChecked != tc.want.NotChecked || got[0].Checked {
				t.Errorf("got %+v, want the one check %+v", got, tc.want)
			}
		})
	}
}

// frontendsOf lists the frontends of every Service of p, as explain
// lists a Service's.
func frontendsOf(p *plan.Plan) []plan.Packet {
	var out []plan.Packet
	for i := range p.Services {
		out = append(out, explain.Frontends(p, &p.Services[i])...)
	}
	return out
}
