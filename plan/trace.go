package plan

import (
	"net/netip"
	"slices"
)

// Packet is the first packet of a connection, as it arrives at the node's
// service rules.
type Packet struct {
	Src, Dst netip.Addr
	Protocol string // TCP, UDP, SCTP
	Port     uint16 // destination port
	// FromLocal: the packet was sent by a process on this node (host
	// network), not by a pod and not from another machine.
	FromLocal bool
}

// Verdict is what the node's service rules do with a Packet.
type Verdict struct {
	// Action is "dnat" (forwarded to one of Endpoints), "reject" (the
	// Service has no endpoints, or a cluster IP was reached on a port it
	// does not serve), "drop" (a Local traffic policy found no endpoint on
	// this node, the source is outside loadBalancerSourceRanges, or the
	// address is an unallocated one of a service CIDR) or "accept" (not a
	// service address: the rules leave the packet alone).
	Action string
	// Endpoints is the set the packet may be DNATed to, in Plan order;
	// only for "dnat".
	Endpoints []netip.AddrPort
	// Masquerade: the packet's source is rewritten to the node's address.
	Masquerade bool
	// Service is namespace/name of the Service whose frontend matched,
	// Port the name of its port ("" for an unnamed port).
	Service string
	Port    string
}

// Verdict actions.
const (
	ActionDNAT   = "dnat"
	ActionReject = "reject"
	ActionDrop   = "drop"
	ActionAccept = "accept"
)

// Trace walks a packet through the Plan and says what the node does with
// it. It is the specification the renderers (nftables, IPVS) implement:
// for any packet, the installed rules must give the same verdict. It
// follows kube-proxy (pkg/proxy/nftables), whose rule order it keeps:
//
//  1. Frontends: a cluster IP, external IP or LoadBalancer IP with the
//     packet's protocol and port; else, when Dst is a node-port address
//     (NodePortAddress), a node port. Headless and ExternalName Services
//     have no frontends: their traffic is accepted untouched; nor have
//     Services another proxy serves (ProxyName), whose cluster IPs are
//     dropped below, as kube-proxy knows nothing of them. A cluster
//     IP reached on a port it does not serve is rejected; an unallocated
//     address of a service CIDR is dropped; any other address (a node
//     port on another of the node's addresses among them) is accepted.
//     As kube-proxy, which keeps each family's addresses to that family's
//     rules, an external IP, LoadBalancer IP or node-port address of an IP
//     family the Service has no cluster IP of is no frontend: a
//     single-stack IPv4 Service has no IPv6 frontends.
//  2. LoadBalancer IPs of a Service with SourceRanges drop sources outside
//     them.
//  3. Only endpoints of the destination's IP family are candidates (an
//     IPv4 packet is never DNATed to an IPv6 endpoint).
//  4. Cluster IPs forward to Port.Cluster. The packet is masqueraded when
//     its source is outside Cluster.PodCIDRs (always when that is empty).
//  5. External frontends (external IPs, LoadBalancer IPs, node ports)
//     forward to Port.External and masquerade, under
//     externalTrafficPolicy Cluster. Under Local they do not masquerade,
//     except for kube-proxy's short-circuit: traffic from a pod CIDR goes
//     to Port.ShortCircuitSet (Port.Cluster unless internalTrafficPolicy
//     is Local too), and traffic from a process on the node goes there
//     masqueraded.
//  6. A port with no usable endpoint anywhere (ready, or serving and
//     terminating) rejects. A port that has endpoints but an empty set for
//     this frontend (a Local policy with no endpoint on this node) drops.
//  7. Hairpin: a packet whose source is one of the endpoints it may be
//     DNATed to is masqueraded when it is DNATed to that endpoint (kube-proxy
//     masquerades in the endpoint's own chain), so that the reply comes
//     back through the node; Masquerade is then set, and Detail.Hairpin
//     tells that it holds for that endpoint only.
func (p *Plan) Trace(pk Packet) Verdict { return p.TraceDetail(pk).Verdict }

// Detail is a Verdict with how Trace reached it, for explanations.
type Detail struct {
	Verdict
	// Frontend is the kind of frontend the packet matched: "cluster IP",
	// "external IP", "LoadBalancer IP", "node port", or "" for none.
	Frontend string
	// Set is the endpoint set of the Port the packet was given:
	// "cluster" (Port.Cluster, or Port.ShortCircuitSet for the
	// short-circuit) or "external" (Port.External); "" when it
	// was rejected or dropped before a set was chosen.
	Set string
	// OutsideSourceRanges: dropped by the LoadBalancer source ranges.
	OutsideSourceRanges bool
	// Hairpin: Masquerade is set only because the source is one of
	// Endpoints: the packet is masqueraded when it is DNATed to the
	// endpoints whose address is Src, and keeps its source when DNATed to
	// any other.
	Hairpin bool
}

// TraceDetail is Trace, also telling which frontend and endpoint set
// gave the verdict.
func (p *Plan) TraceDetail(pk Packet) Detail {
	src, dst := pk.Src.Unmap(), pk.Dst.Unmap()
	// 1. Service addresses first (kube-proxy's service-ips map).
	for i := range p.Services {
		s := &p.Services[i]
		if !s.Proxied() {
			continue
		}
		kind := frontendOf(s, dst)
		if kind != frontendClusterIP && !s.HasFamily(dst) {
			kind = frontendNone
		}
		if kind == frontendNone {
			continue
		}
		port := s.PortFor(pk.Protocol, pk.Port, false)
		if port == nil {
			if kind == frontendClusterIP {
				return Detail{Verdict: Verdict{Action: ActionReject, Service: s.Key()}, Frontend: kind.String()}
			}
			continue
		}
		return p.forward(s, port, kind, src, dst, pk.FromLocal)
	}
	// Then node ports on the node-port addresses.
	if p.NodePortAddress(dst) {
		for i := range p.Services {
			s := &p.Services[i]
			if !s.Proxied() || !s.HasFamily(dst) {
				continue
			}
			if port := s.PortFor(pk.Protocol, pk.Port, true); port != nil {
				return p.forward(s, port, frontendNodePort, src, dst, pk.FromLocal)
			}
		}
	}
	for _, c := range p.Cluster.ServiceCIDRs {
		if c.Contains(dst) {
			return Detail{Verdict: Verdict{Action: ActionDrop}}
		}
	}
	return Detail{Verdict: Verdict{Action: ActionAccept}}
}

// NodePortAddress tells whether node ports answer on a: with
// Cluster.NodePortAddresses of a's family, when a is inside one of them
// (and not loopback; the packet is taken to be addressed to the node, as
// the data plane serves only the node's local addresses there); without,
// when a is one of Node.IPs.
func (p *Plan) NodePortAddress(a netip.Addr) bool {
	a = a.Unmap()
	cidrs := false
	for _, c := range p.Cluster.NodePortAddresses {
		if c.Addr().Unmap().Is4() != a.Is4() {
			continue
		}
		cidrs = true
		if c.Contains(a) && !a.IsLoopback() {
			return true
		}
	}
	return !cidrs && slices.ContainsFunc(p.Node.IPs, func(n netip.Addr) bool { return n.Unmap() == a })
}

// NodePortAddrs returns the addresses node ports answer on, sorted and
// without repeats: of the node's own addresses (Node.IPs) and local (the
// addresses its interfaces hold, needed only when the Cluster names
// nodePortAddresses), those that NodePortAddress accepts.
func (p *Plan) NodePortAddrs(local []netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, a := range slices.Concat(p.Node.IPs, local) {
		if p.NodePortAddress(a) {
			out = append(out, a.Unmap())
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// HasFamily tells whether s has a cluster IP of a's IP family: only then
// are its external IPs, LoadBalancer IPs and node ports of that family
// frontends (kube-proxy filters a Service's addresses by the families of
// its cluster IPs, and netspec's tables of a family hold only the Services
// with a cluster IP of it).
func (s *Service) HasFamily(a netip.Addr) bool {
	is4 := a.Unmap().Is4()
	return slices.ContainsFunc(s.ClusterIPs, func(c netip.Addr) bool { return c.Unmap().Is4() == is4 })
}

type frontend int

const (
	frontendNone frontend = iota
	frontendClusterIP
	frontendExternalIP
	frontendLoadBalancerIP
	frontendNodePort
)

func (f frontend) String() string {
	return [...]string{"", "cluster IP", "external IP", "LoadBalancer IP", "node port"}[f]
}

func frontendOf(s *Service, dst netip.Addr) frontend {
	switch {
	case slices.Contains(s.ClusterIPs, dst):
		return frontendClusterIP
	case slices.Contains(s.ExternalIPs, dst):
		return frontendExternalIP
	case slices.Contains(s.LoadBalancerIPs, dst):
		return frontendLoadBalancerIP
	}
	return frontendNone
}

// PortFor finds the Service port serving protocol and port: its Port, or
// with nodePort its NodePort. It is the port Trace gives a packet
// (explain asks it again of the Service and frontend a trace found).
func (s *Service) PortFor(protocol string, port uint16, nodePort bool) *Port {
	for i := range s.Ports {
		sp := &s.Ports[i]
		if sp.Protocol != protocol {
			continue
		}
		if nodePort && sp.NodePort != 0 && sp.NodePort == port || !nodePort && sp.Port == port {
			return sp
		}
	}
	return nil
}

func (p *Plan) forward(s *Service, port *Port, kind frontend, src, dst netip.Addr, fromLocal bool) Detail {
	d := Detail{Verdict: Verdict{Service: s.Key(), Port: port.Name}, Frontend: kind.String()}
	v := &d.Verdict
	// 2. The LoadBalancer firewall.
	if kind == frontendLoadBalancerIP && len(s.SourceRanges) > 0 &&
		!slices.ContainsFunc(s.SourceRanges, func(r netip.Prefix) bool { return r.Contains(src) }) {
		v.Action = ActionDrop
		d.OutsideSourceRanges = true
		return d
	}
	// 3. Candidates of the destination's family.
	sameFamily := func(e Endpoint) bool { return e.IP.Is4() == dst.Is4() }
	usable := slices.ContainsFunc(port.Endpoints, func(e Endpoint) bool {
		return sameFamily(e) && (e.Ready || e.Serving && e.Terminating)
	})
	if !usable {
		v.Action = ActionReject
		return d
	}
	// 4. and 5. The set and masquerading.
	var set []int
	switch {
	case kind == frontendClusterIP:
		set, d.Set = port.Cluster, "cluster"
		v.Masquerade = !p.inPodCIDRs(src)
	case !s.ExternalLocal:
		set, d.Set = port.External, "external"
		v.Masquerade = true
	case p.inPodCIDRs(src):
		set, d.Set = port.ShortCircuitSet(), "cluster"
	case fromLocal:
		set, d.Set = port.ShortCircuitSet(), "cluster"
		v.Masquerade = true
	default:
		set, d.Set = port.External, "external"
	}
	for _, i := range set {
		if e := port.Endpoints[i]; sameFamily(e) {
			v.Endpoints = append(v.Endpoints, e.AddrPort())
		}
	}
	// 6. Nothing on this node under a Local policy.
	if len(v.Endpoints) == 0 {
		v.Action, v.Masquerade = ActionDrop, false
		return d
	}
	// 7. Hairpin.
	if !v.Masquerade && slices.ContainsFunc(v.Endpoints, func(e netip.AddrPort) bool { return e.Addr() == src }) {
		v.Masquerade, d.Hairpin = true, true
	}
	v.Action = ActionDNAT
	return d
}

// inPodCIDRs reports whether traffic from src counts as pod traffic, which
// is not masqueraded on its way to a cluster IP; with no PodCIDRs nothing
// does (kube-proxy's masquerade-all).
func (p *Plan) inPodCIDRs(src netip.Addr) bool {
	return slices.ContainsFunc(p.Cluster.PodCIDRs, func(c netip.Prefix) bool { return c.Contains(src) })
}
