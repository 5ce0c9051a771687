package applier

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"syscall"

	"netspec.dev/netspec/applier/ipvs"
	"netspec.dev/netspec/applier/nft"
	"netspec.dev/netspec/explain"
	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/render"
)

// CheckKernel reads what the node's kernel holds of p, as Plan does,
// changing nothing, and says for the frontend of each packet of pks
// whether it holds what p says (explain --live): the kernel's difference
// with p kept to that frontend (Result.Differences). o is the node's data
// plane (NoDataplane, IPVS, IPVSScheduler; NFTables for tests) and state
// dir. When the kernel cannot be read (no root), or o.NoDataplane leaves
// it alone, the one check returned is every frontend's "not checked",
// with the reason.
func CheckKernel(o Options, p *plan.Plan, pks []plan.Packet) []explain.KernelCheck {
	dataplane := dataplaneName(o)
	if o.NoDataplane {
		return []explain.KernelCheck{{Dataplane: dataplane, NotChecked: "the daemon runs with --dataplane none: netspec programs no kernel on this node"}}
	}
	o.NoCreateStateDir = true
	n, err := Open(o)
	var r *Result
	if err == nil {
		r, err = n.Plan(p)
		n.Close()
	}
	if err != nil {
		return []explain.KernelCheck{{Dataplane: dataplane, NotChecked: notCheckedWhy(err, o.IPVS, o.NFTables != nil)}}
	}
	model := render.NFTablesModel(p)
	if o.IPVS {
		model = render.NFTablesIPVSModel(p) // its tables pick no endpoints: no windows
	}
	var out []explain.KernelCheck
	for _, pk := range pks {
		fe := explain.FrontendOf(p, pk, model)
		out = append(out, explain.KernelCheck{To: netip.AddrPortFrom(pk.Dst, pk.Port), Protocol: pk.Protocol, Dataplane: dataplane, Checked: true, Differences: r.Differences(fe)})
	}
	return out
}

// dataplaneName is the data plane of o as the daemon names it: nftables,
// ipvs or none.
func dataplaneName(o Options) string {
	switch {
	case o.NoDataplane:
		return "none"
	case o.IPVS:
		return "ipvs"
	}
	return "nftables"
}

// notCheckedWhy says why the kernel could not be read: err, under the
// IPVS data plane or not; fake tells that the nftables were a given one
// (tests), which needs no root.
func notCheckedWhy(err error, withIPVS, fake bool) string {
	what := "the node's nftables"
	if withIPVS {
		what = "the node's IPVS and nftables"
	}
	if IsPermission(err) || !fake && os.Geteuid() != 0 {
		return "needs root (CAP_NET_ADMIN) to read " + what
	}
	return "reading " + what + ": " + err.Error()
}

// IsPermission tells an error of a missing privilege (not root, no
// CAP_NET_ADMIN), which the kernel reports in several ways.
func IsPermission(err error) bool {
	return errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES)
}

// Differences is what the kernel lacks or holds beyond the plan, as Plan
// found it, that concerns the frontend f, one line each: its nftables
// chains, sets and elements, and with IPVS its virtual server, real
// servers, address and interface.
func (r *Result) Differences(f *explain.Frontend) []string {
	return append(nftDifferences(r.NFT, f), ipvsDifferences(r.IPVS, f)...)
}

// nftDifferences is what the kernel's nftables lack or hold beyond the
// plan for the frontend, one line each: c is the kernel's difference with
// the plan (Result.NFT). A table missing or to be replaced whole is one
// line: the kernel holds none of the plan. The chains all frontends share
// count when missing or differing (Frontend.Shared).
func nftDifferences(c *nft.Changes, f *explain.Frontend) []string {
	if c == nil {
		return nil
	}
	var out []string
	for _, t := range c.Tables {
		if t.Family != f.Family {
			continue
		}
		switch {
		case t.Replace && t.Reason == nft.ReasonMissing:
			return []string{fmt.Sprintf("table %s netspec is missing: the kernel holds none of the plan", t.Family)}
		case t.Replace:
			return []string{fmt.Sprintf("table %s netspec must be replaced whole (%s): the kernel holds none of the plan", t.Family, t.Reason)}
		case t.Delete:
			out = append(out, fmt.Sprintf("table %s netspec is not in the plan", t.Family))
			continue
		}
		// A chain the kernel's own elements keyed by the frontend jump to
		// is the frontend's too, though the plan has it no more.
		kn := kernelNames(t, f)
		for _, d := range t.Differences() {
			if !concerns(f, kn, d) {
				continue
			}
			out = append(out, d.Text)
			for _, r := range d.Rules {
				if r.Old != "" {
					out = append(out, fmt.Sprintf("chain %s %s rule %d in the kernel: %s", t.Family, d.Name, r.Index, r.Old))
				}
				if r.New != "" {
					out = append(out, fmt.Sprintf("chain %s %s rule %d in the plan: %s", t.Family, d.Name, r.Index, r.New))
				}
			}
		}
	}
	return out
}

// concerns tells whether the difference d concerns the frontend f: an
// element f's traffic matches; a chain or set f reaches, or the kernel's
// elements keyed by f jump to (kn) when the kernel holds it beyond the
// plan; a chain all frontends share, missing or differing.
func concerns(f *explain.Frontend, kn map[string]bool, d nft.Difference) bool {
	switch {
	case d.Element != nil:
		return f.Element(d.Name, d.Element.Element, d.Element.Endpoint)
	case f.Reaches(d.Name):
		return true
	case d.Mark == '-':
		return kn[d.Name]
	}
	return d.Kind == "chain" && f.Shared(d.Name)
}

// kernelNames are the chains that the elements keyed by the frontend
// that the kernel holds beyond the plan (ElementsRemoved) jump to.
func kernelNames(t nft.TableChanges, f *explain.Frontend) map[string]bool {
	out := map[string]bool{}
	for _, el := range t.ElementsRemoved {
		if e := el.Element; e != nil && e.Verdict.Chain != "" && f.Keyed(e.Key) {
			out[e.Verdict.Chain] = true
		}
	}
	return out
}

// ipvsDifferences is what the kernel's IPVS lacks or holds beyond the
// plan for the frontend: its virtual server, its real servers, its
// address on the interface, the interface itself.
func ipvsDifferences(c *ipvs.Changes, f *explain.Frontend) []string {
	if c == nil {
		return nil
	}
	var out []string
	switch c.Interface {
	case "":
	case "added":
		out = append(out, "interface "+ipvs.LinkName+" is missing")
	default:
		out = append(out, "interface "+ipvs.LinkName+": "+c.Interface)
	}
	addr := func(items []string, what string) {
		for _, s := range items {
			if p, err := netip.ParsePrefix(s); err == nil && p.Addr().Unmap() == f.Addr {
				out = append(out, fmt.Sprintf("address %s on %s %s", s, ipvs.LinkName, what))
			}
		}
	}
	addr(c.AddressesAdded, "is missing")
	addr(c.AddressesRemoved, "is not in the plan")
	vs := f.Protocol + " " + netip.AddrPortFrom(f.Addr, f.Port).String()
	mine := func(s string) bool {
		return s == vs || strings.HasPrefix(s, vs+": ") || strings.HasPrefix(s, vs+" -> ")
	}
	lines := func(items []string, format string) {
		for _, s := range items {
			if mine(s) {
				out = append(out, fmt.Sprintf(format, s))
			}
		}
	}
	lines(c.ServicesAdded, "virtual server %s is missing")
	lines(c.ServicesChanged, "virtual server %s (the kernel's -> the plan's)")
	lines(c.ServicesRemoved, "virtual server %s is not in the plan")
	lines(c.RealsAdded, "real server %s is missing")
	lines(c.RealsChanged, "real server %s (the kernel's -> the plan's)")
	lines(c.RealsRemoved, "real server %s is not in the plan")
	return out
}
