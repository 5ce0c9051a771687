package explain

import (
	"cmp"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/render/nftmodel"
)

// Frontend is a frontend whose kernel state explain --live checks, with
// what the model render builds from the plan says of it: the chains its
// packets go through, the sets those chains update and the ranges of the
// endpoint maps they pick from, never a rule of how chains are named.
// The applier keeps its difference with the kernel to what concerns the
// frontend (applier.Result.Differences); a Frontend itself reads no
// kernel.
type Frontend struct {
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
	Picks []PickWindow
}

// PickWindow is the range of keys a chain picks in an endpoint map
// (`numgen random mod M offset O map @S`: keys O to O+M-1 of S).
type PickWindow struct {
	Family string
	Set    string
	Lo, Hi uint64
}

// FrontendOf is the frontend of pk in p, as its kernel state is checked,
// with what model, the nftables model render builds from p for the
// node's data plane, says of it.
func FrontendOf(p *plan.Plan, pk plan.Packet, model *nftmodel.Ruleset) *Frontend {
	dst := pk.Dst.Unmap()
	fe := &Frontend{Family: "ip", Addr: dst, Port: pk.Port, Protocol: strings.ToLower(pk.Protocol)}
	if !dst.Is4() {
		fe.Family = "ip6"
	}
	d := p.TraceDetail(pk)
	fe.NodePort = d.Frontend == "node port"
	if s := planService(p, d.Service); s != nil {
		if pt := s.PortFor(pk.Protocol, pk.Port, fe.NodePort); pt != nil {
			fe.Service, fe.PortID = d.Service, cmp.Or(pt.Name, strconv.Itoa(int(pt.Port)))
		}
	}
	for _, t := range model.Tables {
		if t.Family.Keyword() != fe.Family {
			continue
		}
		fe.Names = reachChains(t, fe.Keyed)
		fe.PortChains = reachChains(t, func(nftmodel.Key) bool { return true })
		for _, c := range t.Chains() {
			if fe.Names[c.Name] {
				fe.Picks = append(fe.Picks, pickWindows(fe.Family, c)...)
			}
		}
	}
	slices.SortFunc(fe.Picks, func(a, b PickWindow) int { return cmp.Compare(a.Lo, b.Lo) })
	return fe
}

// Reaches tells whether a chain or set is one the frontend's packets go
// through (Names).
func (f *Frontend) Reaches(name string) bool { return f.Names[name] }

// Shared tells whether a chain is one every frontend's packets go
// through (services, nat-prerouting, service-endpoints-check, …): not
// one of a Service port's. One missing or differing concerns every
// frontend; one the plan does not have (made by hand) is not jumped to
// by the plan's chains, and concerns none.
func (f *Frontend) Shared(chain string) bool { return !f.PortChains[chain] }

// Keyed tells whether a key of a set or map is the frontend's: its
// address, protocol and port; its protocol and node port for a node
// port; or, for a node port, the node's address alone (nodeport-ips).
func (f *Frontend) Keyed(k nftmodel.Key) bool {
	proto, _ := nftmodel.ProtoOf(f.Protocol)
	switch {
	case f.NodePort && !k.Addr.IsValid():
		return k.Proto == proto && k.Port == f.Port
	case f.NodePort && k.Proto == 0 && k.Port == 0:
		return k.Addr == f.Addr && (k.Bits == 0 || int(k.Bits) == k.Addr.BitLen())
	}
	return !f.NodePort && k.Addr == f.Addr && k.Proto == proto && k.Port == f.Port
}

// Element tells whether an element of set concerns the frontend, asked
// of the element as the model holds it: e for a set or verdict map, ep
// for an endpoint map. It does when keyed by the frontend (service-ips,
// service-nodeports, no-endpoint-*, firewall-ips, cluster-frontends;
// nodeport-ips for a node port's address), when its verdict names one of
// the chains of Names, when its comment names the port (the no-endpoint
// maps), or when it is in a range one of those chains picks from (the
// endpoint maps). With both nil (a kernel element that does not decode:
// made by hand, of another type) it concerns no frontend.
func (f *Frontend) Element(set string, e *nftmodel.Element, ep *nftmodel.EndpointElement) bool {
	if ep != nil {
		for _, w := range f.Picks {
			if w.Family == f.Family && w.Set == set && uint64(ep.Lo) >= w.Lo && uint64(ep.Lo) <= w.Hi {
				return true
			}
		}
		return false
	}
	if e == nil {
		return false
	}
	if f.Keyed(e.Key) || e.Verdict.Chain != "" && f.Reaches(e.Verdict.Chain) {
		return true
	}
	return f.Service != "" && f.PortID != "" && e.Comment != "" &&
		nftmodel.CommentText(e.Comment) == nftmodel.CommentText(f.Service+":"+f.PortID)
}

// pickWindows lists the ranges of the endpoint maps that a chain of the
// model render builds, in a table of family, picks from (its DNATMap
// statements).
func pickWindows(family string, c *nftmodel.Chain) []PickWindow {
	var out []PickWindow
	for _, r := range c.Rules {
		for _, st := range r {
			if d, ok := st.(nftmodel.DNATMap); ok && d.Mod > 0 {
				out = append(out, PickWindow{Family: family, Set: d.Map, Lo: uint64(d.Offset), Hi: uint64(d.Offset) + uint64(d.Mod) - 1})
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
	rules := map[string][]nftmodel.Rule{}
	for _, c := range t.Chains() {
		rules[c.Name] = c.Rules
	}
	out := map[string]bool{}
	var visit func(name string)
	visit = func(name string) {
		if out[name] {
			return
		}
		out[name] = true
		for _, r := range rules[name] {
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
	for _, s := range t.Sets() {
		for _, e := range s.Elements {
			if s.Verdicts && e.Verdict.Chain != "" && from(e.Key) {
				visit(e.Verdict.Chain)
			}
		}
	}
	return out
}
