package explain_test

import (
	"path/filepath"
	"slices"
	"testing"

	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/explain"
	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/schema"
)

// TestExamplesAgreeWithTrace explains a packet to every frontend of every
// Service of the examples, on every node, and checks that the explanation
// is the plan's trace: the same verdict, targets and masquerade; every
// endpoint of the port listed, taken exactly when it is a target, with a
// reason when it is not; a cause exactly when the verdict is not dnat.
func TestExamplesAgreeWithTrace(t *testing.T) {
	for _, ex := range []string{"basic", "kitchen-sink"} {
		dir := filepath.Join("..", "examples", ex)
		tree, err := schema.Load(dir, schema.Options{})
		if err != nil {
			t.Fatal(err)
		}
		checked := compiler.Validate(tree.Objects, nil, tree)
		if n := checked.Diags.Errors(); n > 0 {
			t.Fatalf("%s: %d errors", ex, n)
		}
		for _, o := range tree.Objects {
			if o.Node == nil {
				continue
			}
			node := o.Node.Metadata.Name
			p, err := compiler.Compile(tree.Objects, checked, node)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for i := range p.Services {
				for _, pk := range explain.Frontends(p, &p.Services[i]) {
					pk.Src = explain.DefaultSource(pk.Dst)
					checkAgrees(t, ex+"/"+node, p, tree.Objects, pk)
					n++
					// From each endpoint of the Service: hairpin.
					for _, pt := range p.Services[i].Ports {
						for _, e := range pt.Endpoints {
							if e.IP.Is4() == pk.Dst.Is4() {
								pk.Src = e.IP
								checkAgrees(t, ex+"/"+node+" from "+e.IP.String(), p, tree.Objects, pk)
							}
						}
					}
				}
			}
			if n == 0 {
				t.Errorf("%s on %s: no frontends", ex, node)
			}
		}
	}
}

func checkAgrees(t *testing.T, where string, p *plan.Plan, objs []*schema.Object, pk plan.Packet) {
	t.Helper()
	x := explain.PacketWith(p, objs, pk, explain.Options{})
	v := p.Trace(pk)
	what := where + " " + x.To.String() + "/" + x.Protocol
	d := p.TraceDetail(pk)
	if (len(x.Hairpin) > 0) != d.Hairpin || x.Masquerade != (d.Masquerade && !d.Hairpin) {
		t.Errorf("%s: explained masquerade=%v hairpin=%v, trace masquerade=%v hairpin=%v", what, x.Masquerade, x.Hairpin, d.Masquerade, d.Hairpin)
	}
	if x.Verdict != v.Action || !slices.Equal(x.Targets, v.Endpoints) || (x.Masquerade || len(x.Hairpin) > 0) != v.Masquerade || x.Service != v.Service {
		t.Errorf("%s: explained %s %v masq=%v %s, trace %s %v masq=%v %s", what, x.Verdict, x.Targets, x.Masquerade, x.Service, v.Action, v.Endpoints, v.Masquerade, v.Service)
	}
	if (x.Cause == nil) != (x.Verdict == plan.ActionDNAT) {
		t.Errorf("%s: verdict %s with cause %v", what, x.Verdict, x.Cause)
	}
	for _, e := range x.Endpoints {
		if e.Taken != slices.Contains(v.Endpoints, e.Addr) {
			t.Errorf("%s: endpoint %s taken=%v, trace targets %v", what, e.Addr, e.Taken, v.Endpoints)
		}
		if !e.Taken && e.Why == "" {
			t.Errorf("%s: endpoint %s left out without a reason", what, e.Addr)
		}
	}
	if len(x.Steps) == 0 || x.Steps[len(x.Steps)-1][:8] != "verdict:" {
		t.Errorf("%s: the last step is not the verdict: %q", what, x.Steps)
	}
}
