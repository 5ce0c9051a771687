package main

import (
	"cmp"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"

	"netspec.dev/netspec/applier"
	"netspec.dev/netspec/applier/ipvs"
	"netspec.dev/netspec/applier/nft"
	"netspec.dev/netspec/explain"
	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/render"
	"netspec.dev/netspec/render/nftmodel"
)

// kernelFrontend is a frontend whose kernel state explain --live checks:
// what the kernel's difference with the plan (applier.Node.Plan) says of
// it. Which chains, sets and elements concern it is asked of the model
// render builds from the plan (frontendOf): the chains its packets go
// through, never a rule of how chains are named.
type kernelFrontend struct {
	Family   string // nftables family of the address: "ip" or "ip6"
	Addr     netip.Addr
	Port     uint16 // the packet's destination port (the node port for a node port)
	Protocol string // tcp, udp or sctp
	NodePort bool
	// Service (namespace/name) and PortID (the Service port's name, or
	// its number when unnamed) name the port, as the comments of the
	// no-endpoint maps' elements do; "" when the packet reaches no
	// Service port.
	Service, PortID string
	// Names are the chains the frontend's packets go through from the
	// elements keyed by it (service-ips, service-nodeports, …), and the
	// sets those chains update (affinity): reachChains.
	Names map[string]bool
	// PortChains are the chains reached from any element of a verdict
	// map: the Service ports' own. The others (services, nat-prerouting,
	// …) every frontend's packets go through.
	PortChains map[string]bool
	// Picks are the ranges of the endpoint maps' keys that the chains of
	// Names pick from (pickWindows).
	Picks []pickWindow
}

// pickWindow is the range of keys a chain picks in an endpoint map
// (`numgen random mod M offset O map @S`: keys O to O+M-1 of S).
type pickWindow struct {
	Family string
	Set    string
	Lo, Hi uint64
}

// names tells whether a chain or set is one the frontend's packets go
// through.
func (f *kernelFrontend) names(name string) bool { return f.Names[name] }

// keyed tells whether a key of a set or map is the frontend's: its
// address, protocol and port; its protocol and node port for a node
// port; or, for a node port, the node's address alone (nodeport-ips).
func (f *kernelFrontend) keyed(k nftmodel.Key) bool {
	proto, _ := nftmodel.ProtoOf(f.Protocol)
	switch {
	case f.NodePort && !k.Addr.IsValid():
		return k.Proto == proto && k.Port == f.Port
	case f.NodePort && k.Proto == 0 && k.Port == 0:
		return k.Addr == f.Addr && (k.Bits == 0 || int(k.Bits) == k.Addr.BitLen())
	}
	return !f.NodePort && k.Addr == f.Addr && k.Proto == proto && k.Port == f.Port
}

// element tells whether an element concerns the frontend: it is keyed by
// the frontend (service-ips, service-nodeports, no-endpoint-*,
// firewall-ips, cluster-frontends; nodeport-ips for a node port's
// address), it names one of the chains of Names (a verdict), its comment
// names the port (the no-endpoint maps), or it is in a range one of those
// chains picks from (the endpoint maps). It asks the element as the
// model holds it: one that does not decode (made by hand, of another
// type) concerns no frontend.
func (f *kernelFrontend) element(el nft.ElementChange) bool {
	if e := el.Endpoint; e != nil {
		for _, w := range f.Picks {
			if w.Family == f.Family && w.Set == el.Set && uint64(e.Lo) >= w.Lo && uint64(e.Lo) <= w.Hi {
				return true
			}
		}
		return false
	}
	e := el.Element
	if e == nil {
		return false
	}
	if f.keyed(e.Key) || e.Verdict.Chain != "" && f.names(e.Verdict.Chain) {
		return true
	}
	return f.Service != "" && f.PortID != "" && e.Comment != "" &&
		nftmodel.CommentText(e.Comment) == nftmodel.CommentText(f.Service+":"+f.PortID)
}

// nftDifferences is what the kernel's nftables lack or hold beyond the
// plan for the frontend, one line each: c is the kernel's difference with
// the plan (applier.Result.NFT). A table missing or to be replaced whole
// is one line: the kernel holds none of the plan. The chains all
// frontends share count when missing or differing (shared).
func nftDifferences(c *nft.Changes, f *kernelFrontend) []string {
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
		mine := func(name string) bool { return f.names(name) || kn[name] }
		for _, name := range t.ChainsAdded {
			if f.names(name) || f.shared(name) {
				out = append(out, fmt.Sprintf("chain %s %s is missing", t.Family, name))
			}
		}
		for _, name := range t.ChainsChanged {
			if !f.names(name) && !f.shared(name) {
				continue
			}
			out = append(out, fmt.Sprintf("chain %s %s differs from the plan", t.Family, name))
			for _, r := range t.Rules {
				if r.Chain != name {
					continue
				}
				if r.Old != "" {
					out = append(out, fmt.Sprintf("chain %s %s rule %d in the kernel: %s", t.Family, name, r.Index, r.Old))
				}
				if r.New != "" {
					out = append(out, fmt.Sprintf("chain %s %s rule %d in the plan: %s", t.Family, name, r.Index, r.New))
				}
			}
		}
		for _, name := range t.ChainsRemoved {
			if mine(name) {
				out = append(out, fmt.Sprintf("chain %s %s is not in the plan", t.Family, name))
			}
		}
		for _, name := range t.SetsAdded {
			if f.names(name) {
				out = append(out, fmt.Sprintf("set %s %s is missing", t.Family, name))
			}
		}
		for _, name := range t.SetsRemoved {
			if mine(name) {
				out = append(out, fmt.Sprintf("set %s %s is not in the plan", t.Family, name))
			}
		}
		for _, el := range t.ElementsAdded {
			if f.element(el) {
				out = append(out, fmt.Sprintf("%s %s element %s is missing", t.Family, el.Set, el.Text))
			}
		}
		for _, el := range t.ElementsRemoved {
			if f.element(el) {
				out = append(out, fmt.Sprintf("%s %s element %s is not in the plan", t.Family, el.Set, el.Text))
			}
		}
	}
	return out
}

// kernelNames are the chains that the elements keyed by the frontend
// that the kernel holds beyond the plan (ElementsRemoved) jump to.
func kernelNames(t nft.TableChanges, f *kernelFrontend) map[string]bool {
	out := map[string]bool{}
	for _, el := range t.ElementsRemoved {
		if e := el.Element; e != nil && e.Verdict.Chain != "" && f.keyed(e.Key) {
			out[e.Verdict.Chain] = true
		}
	}
	return out
}

// shared tells whether a chain is one every frontend's packets go
// through (services, nat-prerouting, service-endpoints-check, …): not
// one of a Service port's. One missing or differing concerns every
// frontend; one the plan does not have (made by hand) is not jumped to
// by the plan's chains, and concerns none.
func (f *kernelFrontend) shared(chain string) bool { return !f.PortChains[chain] }

// ipvsDifferences is what the kernel's IPVS lacks or holds beyond the
// plan for the frontend: its virtual server, its real servers, its
// address on the interface, the interface itself.
func ipvsDifferences(c *ipvs.Changes, f *kernelFrontend) []string {
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

// pickWindows lists, from the model render builds, the ranges of the
// endpoint maps that each chain picks from (its DNATMap statements), by
// family and chain name ("ip service-…").
func pickWindows(rs *nftmodel.Ruleset) map[string][]pickWindow {
	out := map[string][]pickWindow{}
	for _, t := range rs.Tables {
		family := t.Family.Keyword()
		for _, c := range t.Chains() {
			for _, r := range c.Rules {
				for _, st := range r {
					if d, ok := st.(nftmodel.DNATMap); ok && d.Mod > 0 {
						k := family + " " + c.Name
						out[k] = append(out[k], pickWindow{Family: family, Set: d.Map, Lo: uint64(d.Offset), Hi: uint64(d.Offset) + uint64(d.Mod) - 1})
					}
				}
			}
		}
	}
	return out
}

// reachChains lists, in a table of the model, the chains reached from
// the verdicts of the elements of its verdict maps for which from
// returns true, and from those chains' rules: the chains they jump or go
// to and the sets they update (a Service port's affinity sets).
func reachChains(t *nftmodel.Table, from func(nftmodel.Key) bool) map[string]bool {
	chains := map[string]*nftmodel.Chain{}
	for _, c := range t.Chains() {
		chains[c.Name] = c
	}
	out := map[string]bool{}
	var queue []string
	visit := func(name string) {
		if !out[name] {
			out[name] = true
			queue = append(queue, name)
		}
	}
	for _, s := range t.Sets() {
		for _, e := range s.Elements {
			if s.Verdicts && e.Verdict.Chain != "" && from(e.Key) {
				visit(e.Verdict.Chain)
			}
		}
	}
	for len(queue) > 0 {
		c := chains[queue[0]]
		queue = queue[1:]
		if c == nil {
			continue
		}
		for _, r := range c.Rules {
			for _, st := range r {
				switch st := st.(type) {
				case nftmodel.Verdict:
					if st.Chain != "" {
						visit(st.Chain)
					}
				case nftmodel.Update:
					out[st.Set] = true
				}
			}
		}
	}
	return out
}

// kernelChecks reads what this node's kernel holds of p (as plan does,
// through applier.Node.Plan, changing nothing) and says, for the frontend
// of each packet, whether it holds what p says (explain --live).
// Reading the kernel may fail (no root): every frontend is then "not
// checked", with the reason.
func kernelChecks(e *env, f *explainFlags, dataplane string, p *plan.Plan, pks []plan.Packet) []explain.KernelCheck {
	if dataplane == "none" {
		return []explain.KernelCheck{{Dataplane: dataplane, NotChecked: "the daemon runs with --dataplane none: netspec programs no kernel on this node"}}
	}
	dp := render.DataplaneNFTables
	if dataplane == "ipvs" {
		dp = render.DataplaneIPVS
	}
	n, err := applier.Open(applier.Options{StateDir: f.stateDir, NoCreateStateDir: true, IPVS: dp == render.DataplaneIPVS, IPVSScheduler: f.ipvsScheduler, NFTables: e.nftables})
	var r *applier.Result
	if err == nil {
		r, err = n.Plan(p)
		n.Close()
	}
	if err != nil {
		return []explain.KernelCheck{{Dataplane: dataplane, NotChecked: notCheckedWhy(err, dataplane, e.nftables != nil)}}
	}
	model := render.NFTablesModel(p)
	if dp == render.DataplaneIPVS {
		model = render.NFTablesIPVSModel(p) // its tables pick no endpoints: no windows
	}
	var out []explain.KernelCheck
	for _, pk := range pks {
		fe := frontendOf(p, pk, model)
		diffs := nftDifferences(r.NFT, fe)
		diffs = append(diffs, ipvsDifferences(r.IPVS, fe)...)
		out = append(out, explain.KernelCheck{To: netip.AddrPortFrom(pk.Dst, pk.Port), Protocol: pk.Protocol, Dataplane: dataplane, Checked: true, Differences: diffs})
	}
	return out
}

// notCheckedWhy says why the kernel could not be read.
func notCheckedWhy(err error, dataplane string, fake bool) string {
	what := "the node's nftables"
	if dataplane == "ipvs" {
		what = "the node's IPVS and nftables"
	}
	if isPermission(err) || !fake && os.Geteuid() != 0 {
		return "needs root (CAP_NET_ADMIN) to read " + what
	}
	return "reading " + what + ": " + err.Error()
}

// frontendOf is the frontend of pk in p, as its kernel state is checked,
// with what the model of p's tables says of it.
func frontendOf(p *plan.Plan, pk plan.Packet, model *nftmodel.Ruleset) *kernelFrontend {
	dst := pk.Dst.Unmap()
	fe := &kernelFrontend{Family: "ip", Addr: dst, Port: pk.Port, Protocol: strings.ToLower(pk.Protocol)}
	if !dst.Is4() {
		fe.Family = "ip6"
	}
	d := p.TraceDetail(pk)
	fe.NodePort = d.Frontend == "node port"
	for i := range p.Services {
		s := &p.Services[i]
		if d.Service == "" || s.Key() != d.Service {
			continue
		}
		for _, pt := range s.Ports {
			if pt.Protocol != pk.Protocol || fe.NodePort && pt.NodePort != pk.Port || !fe.NodePort && pt.Port != pk.Port {
				continue
			}
			fe.Service, fe.PortID = d.Service, pt.Name
			if fe.PortID == "" {
				fe.PortID = strconv.Itoa(int(pt.Port))
			}
		}
	}
	windows := pickWindows(model)
	for _, t := range model.Tables {
		if t.Family.Keyword() != fe.Family {
			continue
		}
		fe.Names = reachChains(t, fe.keyed)
		fe.PortChains = reachChains(t, func(nftmodel.Key) bool { return true })
		for name := range fe.Names {
			fe.Picks = append(fe.Picks, windows[fe.Family+" "+name]...)
		}
	}
	slices.SortFunc(fe.Picks, func(a, b pickWindow) int { return cmp.Compare(a.Lo, b.Lo) })
	return fe
}
