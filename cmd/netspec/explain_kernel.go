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
// it.
type kernelFrontend struct {
	Family   string // nftables family of the address: "ip" or "ip6"
	Addr     netip.Addr
	Port     uint16 // the packet's destination port (the node port for a node port)
	Protocol string // tcp, udp or sctp
	NodePort bool
	// Kind is the frontend's kind as plan.Detail.Frontend names it
	// ("cluster IP", "external IP", "LoadBalancer IP", "node port"): a
	// cluster IP goes through the service chain only, external frontends
	// through the external and local chains too, LoadBalancer IPs with
	// source ranges through the firewall chain. "": any.
	Kind string
	// Service (namespace/name) and PortID (the Service port's name, or
	// its number when unnamed) name the port's chains and sets; "" when
	// the packet reaches no Service port: then only elements keyed by
	// the frontend concern it.
	Service, PortID string
	// Picks are the ranges of the endpoint maps' keys that the port's
	// chains pick from (pickWindows).
	Picks []pickWindow
}

// pickWindow is the range of keys a chain picks in an endpoint map
// (`numgen random mod M offset O map @S`: keys O to O+M-1 of S).
type pickWindow struct {
	Family string
	Set    string
	Lo, Hi uint64
}

// chainPrefixes are the prefixes of the chains and sets of a Service
// port (render/nftables.go names them prefix HASH8-ns/name/proto/port).
var chainPrefixes = []string{"service-", "external-", "local-", "firewall-", "affinity-"}

// names tells whether a chain or set name is one of the port's: its
// readable part is the port's (for an affinity set, followed by
// "__" and the endpoint).
func (f *kernelFrontend) names(name string) bool {
	if f.Service == "" || f.PortID == "" {
		return false
	}
	readable := nftReadable(f.Service + "/" + f.Protocol + "/" + f.PortID)
	for _, prefix := range chainPrefixes {
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok || len(rest) < 9 || rest[8] != '-' {
			continue
		}
		switch {
		case f.Kind == "cluster IP" && (prefix == "external-" || prefix == "local-" || prefix == "firewall-"),
			f.Kind != "" && f.Kind != "LoadBalancer IP" && prefix == "firewall-":
			return false
		}
		rest = rest[9:]
		want := readable
		if prefix == "affinity-" {
			want += "__"
			if strings.HasPrefix(rest, want) {
				return true
			}
		} else if rest == want {
			return true
		}
		// A name longer than nftables allows is cut, ending in "...".
		if cut, ok := strings.CutSuffix(rest, "..."); ok && strings.HasPrefix(want, cut) {
			return true
		}
		return false
	}
	return false
}

// nftReadable is the readable part of a chain name as the renderer writes
// it: characters nftables names take kept, ':' as '.', others as '_'.
func nftReadable(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '/', c == '-', c == '_', c == '.':
		case c == ':':
			b[i] = '.'
		default:
			b[i] = '_'
		}
	}
	return string(b)
}

// key is the frontend as the service maps key it: "10.96.0.10 . tcp . 80",
// "tcp . 30080" for a node port.
func (f *kernelFrontend) key() string {
	if f.NodePort {
		return fmt.Sprintf("%s . %d", f.Protocol, f.Port)
	}
	return fmt.Sprintf("%s . %s . %d", f.Addr, f.Protocol, f.Port)
}

// element tells whether an element of set concerns the frontend: it is
// keyed by the frontend (service-ips, service-nodeports, no-endpoint-*,
// firewall-ips, cluster-frontends; nodeport-ips for a node port's
// address), it names one of the port's chains (a verdict), its comment
// names the port (the no-endpoint maps), or it is in a range one of the
// port's chains picks from (the endpoint maps).
func (f *kernelFrontend) element(set, text string) bool {
	if k := f.key(); text == k || strings.HasPrefix(text, k+" ") {
		return true
	}
	if f.NodePort && text == f.Addr.String() {
		return true
	}
	for _, verdict := range []string{" goto ", " jump "} {
		if _, chain, ok := strings.Cut(text, verdict); ok && f.names(strings.TrimSpace(chain)) {
			return true
		}
	}
	if f.Service != "" && f.PortID != "" && strings.Contains(text, `comment "`+f.Service+":"+f.PortID+`"`) {
		return true
	}
	if len(f.Picks) > 0 {
		start := text
		if i := strings.IndexAny(start, "- "); i >= 0 {
			start = start[:i]
		}
		n, err := strconv.ParseUint(start, 10, 64)
		if err != nil {
			return false
		}
		for _, w := range f.Picks {
			if w.Family == f.Family && w.Set == set && n >= w.Lo && n <= w.Hi {
				return true
			}
		}
	}
	return false
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
		for _, name := range t.ChainsAdded {
			if f.names(name) || shared(name) {
				out = append(out, fmt.Sprintf("chain %s %s is missing", t.Family, name))
			}
		}
		for _, name := range t.ChainsChanged {
			if !f.names(name) && !shared(name) {
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
			if f.names(name) {
				out = append(out, fmt.Sprintf("chain %s %s is not in the plan", t.Family, name))
			}
		}
		for _, name := range t.SetsAdded {
			if f.names(name) {
				out = append(out, fmt.Sprintf("set %s %s is missing", t.Family, name))
			}
		}
		for _, name := range t.SetsRemoved {
			if f.names(name) {
				out = append(out, fmt.Sprintf("set %s %s is not in the plan", t.Family, name))
			}
		}
		for _, el := range t.ElementsAdded {
			if f.element(el.Set, el.Text) {
				out = append(out, fmt.Sprintf("%s %s element %s is missing", t.Family, el.Set, el.Text))
			}
		}
		for _, el := range t.ElementsRemoved {
			if f.element(el.Set, el.Text) {
				out = append(out, fmt.Sprintf("%s %s element %s is not in the plan", t.Family, el.Set, el.Text))
			}
		}
	}
	return out
}

// shared tells whether a chain is one every frontend's packets go
// through (services, nat-prerouting, service-endpoints-check, …): not
// one of a Service port's. One missing or differing concerns every
// frontend; one the plan does not have (made by hand) is not jumped to
// by the plan's chains, and concerns none.
func shared(chain string) bool {
	for _, prefix := range chainPrefixes {
		if strings.HasPrefix(chain, prefix) {
			return false
		}
	}
	return true
}

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
	// The IPVS mode's tables pick no endpoints: no windows.
	var windows map[string][]pickWindow
	if dp == render.DataplaneNFTables {
		windows = pickWindows(render.NFTablesModel(p))
	}
	var out []explain.KernelCheck
	for _, pk := range pks {
		fe := frontendOf(p, pk, windows)
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

// frontendOf is the frontend of pk in p, as its kernel state is checked.
func frontendOf(p *plan.Plan, pk plan.Packet, windows map[string][]pickWindow) *kernelFrontend {
	dst := pk.Dst.Unmap()
	fe := &kernelFrontend{Family: "ip", Addr: dst, Port: pk.Port, Protocol: strings.ToLower(pk.Protocol)}
	if !dst.Is4() {
		fe.Family = "ip6"
	}
	d := p.TraceDetail(pk)
	fe.NodePort, fe.Kind = d.Frontend == "node port", d.Frontend
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
	for name, ws := range windows {
		fam, chain, _ := strings.Cut(name, " ")
		if fam == fe.Family && fe.names(chain) {
			fe.Picks = append(fe.Picks, ws...)
		}
	}
	slices.SortFunc(fe.Picks, func(a, b pickWindow) int { return cmp.Compare(a.Lo, b.Lo) })
	return fe
}
