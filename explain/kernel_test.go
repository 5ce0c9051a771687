package explain_test

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/explain"
	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/schema"
)

// TestPacketWithKernel: the kernel's check of the frontend is the last
// steps, after the verdict: holds, differs (each difference a line, at
// most ten, a cause of its own that leaves the plan's in place), or not
// checked with the reason; a check of another frontend is not this one's.
func TestPacketWithKernel(t *testing.T) {
	dir := filepath.Join("..", "compiler", "testdata", "readiness-probes")
	tree, err := schema.Load(dir, schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	checked := compiler.Validate(tree.Objects, nil, tree)
	p, err := compiler.Compile(tree.Objects, checked, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	web := findService(t, p, "shop/web")
	to := netip.AddrPortFrom(web.ClusterIPs[0], 80)
	pk := plan.Packet{Src: explain.DefaultSource(to.Addr()), Dst: to.Addr(), Port: to.Port(), Protocol: "TCP"}
	var many []string
	for i := range 13 {
		many = append(many, fmt.Sprintf("difference %d", i))
	}
	const cause = "cause: the node's kernel does not hold the plan for this frontend: is netspec watch running and applying this tree? (netspec status)"
	plain := explain.PacketWith(p, tree.Objects, pk, explain.Options{})
	for _, tc := range []struct {
		name   string
		checks []explain.KernelCheck
		want   []string // the steps after the plan's own
		kind   string   // of the kernel check's cause
	}{{
		name: "no check",
	}, {
		name:   "another frontend's check",
		checks: []explain.KernelCheck{{To: netip.MustParseAddrPort("10.96.0.1:80"), Protocol: "TCP", Dataplane: "nftables", Checked: true, Differences: []string{"x"}}},
	}, {
		name:   "holds",
		checks: []explain.KernelCheck{{To: netip.MustParseAddrPort("10.96.0.1:80"), Protocol: "TCP", Dataplane: "nftables", Checked: true, Differences: []string{"x"}}, {To: to, Protocol: "TCP", Dataplane: "nftables", Checked: true}},
		want:   []string{"kernel: holds what the plan says for this frontend (nftables)"},
	}, {
		name:   "not checked, for every frontend",
		checks: []explain.KernelCheck{{Dataplane: "nftables", NotChecked: "needs root (CAP_NET_ADMIN) to read the node's nftables"}},
		want:   []string{"kernel: not checked: needs root (CAP_NET_ADMIN) to read the node's nftables"},
	}, {
		name:   "differs",
		checks: []explain.KernelCheck{{To: to, Protocol: "TCP", Dataplane: "ipvs", Checked: true, Differences: []string{"virtual server tcp 10.96.0.10:80 is missing", "interface netspec-ipvs0 is missing"}}},
		want:   []string{"kernel: differs from the plan for this frontend (ipvs):", "  virtual server tcp 10.96.0.10:80 is missing", "  interface netspec-ipvs0 is missing", cause},
		kind:   explain.CauseKernelDiffers,
	}, {
		name:   "differs a lot",
		checks: []explain.KernelCheck{{To: to, Protocol: "TCP", Dataplane: "nftables", Checked: true, Differences: many}},
		want: append(append([]string{"kernel: differs from the plan for this frontend (nftables):"}, func() (out []string) {
			for _, d := range many[:10] {
				out = append(out, "  "+d)
			}
			return out
		}()...), "  and 3 more", cause),
		kind: explain.CauseKernelDiffers,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			x := explain.PacketWith(p, tree.Objects, pk, explain.Options{Kernel: tc.checks})
			if !slices.Equal(x.Steps[:len(plain.Steps)], plain.Steps) {
				t.Fatalf("the plan's steps changed:\n%s\nwant\n%s", strings.Join(x.Steps, "\n"), strings.Join(plain.Steps, "\n"))
			}
			if got := x.Steps[len(plain.Steps):]; !slices.Equal(got, tc.want) {
				t.Errorf("kernel steps:\n%q\nwant\n%q", got, tc.want)
			}
			if (x.Cause == nil) != (plain.Cause == nil) || x.Verdict != plain.Verdict {
				t.Errorf("cause %+v, verdict %s; want the plan's %+v, %s", x.Cause, x.Verdict, plain.Cause, plain.Verdict)
			}
			switch {
			case tc.want == nil && x.Kernel != nil:
				t.Errorf("Kernel %+v, want none", x.Kernel)
			case tc.want != nil && x.Kernel == nil:
				t.Errorf("no Kernel")
			case x.Kernel != nil && tc.kind == "" && x.Kernel.Cause != nil:
				t.Errorf("kernel cause %+v, want none", x.Kernel.Cause)
			case x.Kernel != nil && tc.kind != "" && (x.Kernel.Cause == nil || x.Kernel.Cause.Kind != tc.kind):
				t.Errorf("kernel cause %+v, want kind %s", x.Kernel.Cause, tc.kind)
			}
		})
	}

	// A reject keeps its own cause beside the kernel's.
	x := explain.PacketWith(p, tree.Objects, plan.Packet{Src: pk.Src, Dst: to.Addr(), Port: 81, Protocol: "TCP"},
		explain.Options{Kernel: []explain.KernelCheck{{Dataplane: "nftables", Checked: true, Differences: []string{"d"}}}})
	if x.Cause == nil || x.Cause.Kind != explain.CausePortNotServed || x.Kernel == nil || x.Kernel.Cause == nil {
		t.Errorf("port not served, kernel differs: cause %+v, kernel %+v; want both causes", x.Cause, x.Kernel)
	}
	if n := strings.Count(strings.Join(x.Steps, "\n"), "cause: "); n != 2 {
		t.Errorf("%d cause lines, want 2:\n%s", n, strings.Join(x.Steps, "\n"))
	}
}
