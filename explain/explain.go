// Package explain says, in sentences, what a node does with a packet and
// why: the frontend it matches, the Service port, the traffic policy and
// topology, the endpoints taken and the ones left out, masquerading and
// the verdict, and for a packet that is rejected, dropped or not for a
// Service, the cause a person would look for (a selector that matches no
// pod, a missing named port, ...).
//
// The verdict is the Plan's own (plan.Plan.TraceDetail, which the
// renderers implement); the reasons about pods use the compiler's own
// selection rules (compiler.Selects, compiler.PodTarget), so an
// explanation cannot disagree with the rules installed. The package is
// pure: it reads a Plan and the tree's objects, and touches nothing.
package explain

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/schema"
)

// Explanation is what a node does with one packet, step by step.
type Explanation struct {
	Node      string         `json:"node"`
	From      netip.Addr     `json:"from"`
	To        netip.AddrPort `json:"to"`
	Protocol  string         `json:"protocol"`
	FromLocal bool           `json:"fromLocal,omitempty"`
	// Frontend is the kind of frontend matched ("cluster IP", "external
	// IP", "LoadBalancer IP", "node port"), "" for none.
	Frontend string `json:"frontend,omitempty"`
	Service  string `json:"service,omitempty"` // namespace/name
	Port     string `json:"port,omitempty"`    // the Service port's name
	// Steps are the walk through the plan, one sentence each.
	Steps []string `json:"steps"`
	// Endpoints are the endpoints of the Service port, each taken or left
	// out with the reason.
	Endpoints []Endpoint `json:"endpoints,omitempty"`
	// Verdict is dnat, reject, drop or accept (plan.Verdict.Action).
	Verdict    string           `json:"verdict"`
	Targets    []netip.AddrPort `json:"targets,omitempty"` // for dnat
	Masquerade bool             `json:"masquerade"`
	// Cause is why the packet is rejected, dropped or not for a Service;
	// for dnat nil, unless the node's daemon left endpoints out for
	// failing readiness probes (Options.Probes).
	Cause *Cause `json:"cause,omitempty"`
	// Kernel is whether the node's kernel holds what the plan says for
	// this frontend (Options.Kernel); nil when it was not asked.
	Kernel *KernelCheck `json:"kernel,omitempty"`

	probes   map[probeKey]ProbeFailure // Options.Probes
	failOpen []string                  // Options.FailOpen
}

// ProbeFailure is an endpoint that a node's daemon left out of a Service
// because it fails a readiness probe there (netspec status).
type ProbeFailure struct {
	Service   string // namespace/name
	Endpoint  netip.AddrPort
	Probe     string // the probe, described
	Since     time.Time
	LastError string
}

// Options are the optional inputs of an explanation.
type Options struct {
	// Probes are the endpoints the node's daemon left out for failing
	// readiness probes, and FailOpen the Services it kept whole because
	// every endpoint they use there fails (explain --live). p must be
	// compiled with the same view (compiler.Options.NotReady).
	Probes   []ProbeFailure
	FailOpen []string
	// Kernel is what the node's kernel holds of the plan, one check per
	// frontend (To and Protocol; a check with no To is every
	// frontend's), read on the node (explain --live): it is printed
	// after the verdict, with a cause of its own when the kernel
	// differs.
	Kernel []KernelCheck
}

// KernelCheck is whether a node's kernel holds what the plan says for one
// frontend: its difference with the plan (what `netspec plan` would
// change) kept to what concerns that frontend.
type KernelCheck struct {
	To       netip.AddrPort `json:"-"`
	Protocol string         `json:"-"`
	// Dataplane is the node's: nftables, ipvs or none.
	Dataplane string `json:"dataplane"`
	// Checked tells that the kernel was read; NotChecked says why not.
	Checked    bool   `json:"checked"`
	NotChecked string `json:"notChecked,omitempty"`
	// Differences are what the kernel lacks or holds beyond the plan for
	// the frontend, one line each; none: it holds what the plan says.
	Differences []string `json:"differences,omitempty"`
	// Cause is set when the kernel differs (CauseKernelDiffers). It does
	// not replace Explanation.Cause, the plan's own.
	Cause *Cause `json:"cause,omitempty"`
}

// maxKernelLines bounds the differences printed for one frontend.
const maxKernelLines = 10

type probeKey struct {
	service  string
	endpoint netip.AddrPort
}

// Endpoint is one endpoint of the Service port and what became of it.
type Endpoint struct {
	Addr  netip.AddrPort `json:"addr"`
	Pod   string         `json:"pod,omitempty"`
	Node  string         `json:"node,omitempty"`
	Taken bool           `json:"taken"`
	Why   string         `json:"why,omitempty"` // why it was left out
}

// Cause kinds.
const (
	CauseNoPodMatches       = "selector-matches-no-pod"
	CauseNoNamedPort        = "target-port-name-missing"
	CauseNoReadyEndpoint    = "no-ready-endpoint"
	CauseNoEndpointObjects  = "no-endpoints"
	CauseLocalNoEndpoint    = "local-policy-no-local-endpoint"
	CauseSourceOutside      = "source-outside-source-ranges"
	CausePortNotServed      = "port-not-served"
	CauseUnallocated        = "unallocated-address"
	CauseNodePortNotAddress = "node-port-address"
	CauseNotService         = "not-a-service-address"
	CauseProbeFailing       = "endpoint-probe-failing"
	CauseKernelDiffers      = "kernel-differs"
)

// Cause is the reason of a reject, drop or accept.
type Cause struct {
	Kind string `json:"kind"`
	Text string `json:"text"`
}

// Packet explains what the node of p does with pk. objs are the tree's
// objects p was compiled from.
func Packet(p *plan.Plan, objs []*schema.Object, pk plan.Packet) *Explanation {
	return PacketWith(p, objs, pk, Options{})
}

// PacketWith is Packet with the node's live state (Options).
func PacketWith(p *plan.Plan, objs []*schema.Object, pk plan.Packet, o Options) *Explanation {
	d := p.TraceDetail(pk)
	x := &Explanation{
		Node: p.Node.Name, From: pk.Src, To: netip.AddrPortFrom(pk.Dst, pk.Port), Protocol: pk.Protocol,
		FromLocal: pk.FromLocal, Frontend: d.Frontend, Service: d.Service, Port: d.Port,
		Verdict: d.Action, Targets: d.Endpoints, Masquerade: d.Masquerade,
		failOpen: o.FailOpen,
	}
	defer x.kernel(o.Kernel)
	if len(o.Probes) > 0 {
		x.probes = map[probeKey]ProbeFailure{}
		for _, f := range o.Probes {
			if _, ok := x.probes[probeKey{f.Service, f.Endpoint}]; !ok {
				x.probes[probeKey{f.Service, f.Endpoint}] = f
			}
		}
	}
	to := fmt.Sprintf("%s/%s", x.To, pk.Protocol)
	if d.Service == "" {
		x.step("%s matches no Service frontend on node %s", to, p.Node.Name)
		x.Cause = notService(p, pk)
		x.verdict()
		return x
	}
	s := planService(p, d.Service)
	so := schemaService(objs, d.Service)
	x.step("frontend: %s %s of Service %s", d.Frontend, to, d.Service)
	port := portOf(s, d.Frontend, pk)
	if port == nil {
		x.Cause = &Cause{CausePortNotServed, fmt.Sprintf("Service %s does not serve %d/%s on its cluster IP; it serves %s",
			d.Service, pk.Port, pk.Protocol, servedPorts(s, false))}
		x.verdict()
		return x
	}
	var sp *schema.ServicePort
	if so != nil {
		for i := range so.Spec.Ports {
			if so.Spec.Ports[i].Name == port.Name && so.Spec.Ports[i].Protocol == port.Protocol {
				sp = &so.Spec.Ports[i]
			}
		}
	}
	name := port.Name
	if name == "" {
		name = "(unnamed)"
	}
	target := ""
	if sp != nil {
		target = ", targetPort " + sp.TargetPort.String()
	}
	x.step("Service port %s: %d/%s%s", name, port.Port, port.Protocol, target)
	if d.Frontend == "LoadBalancer IP" && len(s.SourceRanges) > 0 {
		if d.OutsideSourceRanges {
			x.Cause = &Cause{CauseSourceOutside, fmt.Sprintf("source %s is outside loadBalancerSourceRanges %s", pk.Src, prefixes(s.SourceRanges))}
			x.verdict()
			return x
		}
		x.step("source %s is inside loadBalancerSourceRanges %s", pk.Src, prefixes(s.SourceRanges))
	}
	x.step("traffic policy: internal %s, external %s%s", policy(s.InternalLocal), policy(s.ExternalLocal), topologyOf(so, port, p.Node))
	fam := func(set []int) int {
		n := 0
		for _, i := range set {
			if port.Endpoints[i].IP.Is4() == pk.Dst.Unmap().Is4() {
				n++
			}
		}
		return n
	}
	all := make([]int, len(port.Endpoints))
	for i := range all {
		all[i] = i
	}
	switch d.Set {
	case "cluster":
		switch {
		case d.Frontend == "cluster IP":
			x.step("endpoint set: cluster (internal traffic), %d of the port's %d endpoints of this IP family", fam(port.Cluster), fam(all))
		case port.ShortCircuit != nil:
			x.step("externalTrafficPolicy Local short-circuit: traffic from a pod or from this node is subject to neither traffic policy (as kube-proxy)")
			x.step("endpoint set: short-circuit, %d of the port's %d endpoints of this IP family", fam(port.ShortCircuit), fam(all))
		default:
			x.step("externalTrafficPolicy Local short-circuit: traffic from a pod or from this node uses the cluster set, as through the cluster IP")
			x.step("endpoint set: cluster (internal traffic), %d of the port's %d endpoints of this IP family", fam(port.Cluster), fam(all))
		}
	case "external":
		x.step("endpoint set: external, %d of the port's %d endpoints of this IP family", fam(port.External), fam(all))
	}
	x.endpoints(p, s, port, d, pk)
	x.pods(objs, so, sp, port)
	if x.Verdict == plan.ActionDNAT {
		// Every endpoint a node's probes fail is named, the first as the
		// cause: it is why the rules differ from the tree's.
		for _, e := range x.Endpoints {
			if f, ok := x.probes[probeKey{d.Service, e.Addr}]; ok && !e.Taken {
				x.Cause = &Cause{CauseProbeFailing, fmt.Sprintf("endpoint %s is %s", e.Addr, probeText(f))}
				break
			}
		}
	}
	if x.Verdict == plan.ActionReject {
		x.Cause = noEndpoints(objs, so, sp, port)
	}
	if x.Verdict == plan.ActionDrop {
		var nodes []string
		for _, e := range port.Endpoints {
			if (e.Ready || e.Serving && e.Terminating) && !slices.Contains(nodes, e.NodeName) {
				nodes = append(nodes, e.NodeName)
			}
		}
		x.Cause = &Cause{CauseLocalNoEndpoint, fmt.Sprintf("traffic policy Local and no usable endpoint on node %s (usable ones are on: %s)",
			p.Node.Name, orNone(nodes))}
	}
	x.verdict()
	return x
}

// ServiceWith is Service with the node's live state (Options).
func ServiceWith(p *plan.Plan, objs []*schema.Object, key string, src netip.Addr, o Options) ([]*Explanation, error) {
	s := planService(p, key)
	if s == nil {
		return nil, fmt.Errorf("no Service %s in the tree", key)
	}
	var out []*Explanation
	for _, pk := range Frontends(p, s) {
		if src.IsValid() && src.Is4() == pk.Dst.Is4() {
			pk.Src = src
		} else {
			pk.Src = DefaultSource(pk.Dst)
		}
		out = append(out, PacketWith(p, objs, pk, o))
	}
	return out, nil
}

// Frontends returns a packet to each frontend of s on the node of p, with
// no source: each port on each cluster IP, external IP and LoadBalancer
// IP, then each node port on each node IP that is a node-port address.
// Headless and ExternalName Services have none.
func Frontends(p *plan.Plan, s *plan.Service) []plan.Packet {
	if s.Headless || s.Type == "ExternalName" {
		return nil
	}
	var out []plan.Packet
	for _, ips := range [][]netip.Addr{s.ClusterIPs, s.ExternalIPs, s.LoadBalancerIPs} {
		for _, ip := range ips {
			for _, pt := range s.Ports {
				out = append(out, plan.Packet{Dst: ip, Protocol: pt.Protocol, Port: pt.Port})
			}
		}
	}
	for _, ip := range p.Node.IPs {
		if !p.NodePortAddress(ip) {
			continue
		}
		for _, pt := range s.Ports {
			if pt.NodePort != 0 {
				out = append(out, plan.Packet{Dst: ip, Protocol: pt.Protocol, Port: pt.NodePort})
			}
		}
	}
	return out
}

// DefaultSource is the source of a packet when none is given: a client
// outside the cluster (TEST-NET-2 or the IPv6 documentation prefix).
func DefaultSource(dst netip.Addr) netip.Addr {
	if dst.Unmap().Is4() {
		return netip.MustParseAddr("198.51.100.10")
	}
	return netip.MustParseAddr("2001:db8::10")
}

func (x *Explanation) step(format string, a ...any) {
	x.Steps = append(x.Steps, fmt.Sprintf(format, a...))
}

// verdict adds the last steps: the cause and the verdict.
func (x *Explanation) verdict() {
	if x.Cause != nil {
		x.step("cause: %s", x.Cause.Text)
	}
	switch x.Verdict {
	case plan.ActionDNAT:
		m := "not masqueraded (the endpoint sees the client's address)"
		if x.Masquerade {
			m = "masqueraded (source rewritten to the node's address)"
		}
		x.step("verdict: dnat to one of %s; %s", addrPorts(x.Targets), m)
	case plan.ActionReject:
		x.step("verdict: reject (the client gets a refusal at once)")
	case plan.ActionDrop:
		x.step("verdict: drop (the client gets no answer)")
	case plan.ActionAccept:
		x.step("verdict: accept (not a service address: the service rules leave the packet alone)")
	}
}

// kernel adds the step of the kernel's check of the frontend, after the
// verdict.
func (x *Explanation) kernel(checks []KernelCheck) {
	var k *KernelCheck
	for i := range checks {
		c := &checks[i]
		if c.To == x.To && c.Protocol == x.Protocol || !c.To.IsValid() && k == nil {
			k = c
		}
	}
	if k == nil {
		return
	}
	kc := *k
	kc.To, kc.Protocol = x.To, x.Protocol
	kc.Differences = slices.Clone(k.Differences)
	x.Kernel = &kc
	switch {
	case !kc.Checked:
		x.step("kernel: not checked: %s", kc.NotChecked)
	case len(kc.Differences) == 0:
		x.step("kernel: holds what the plan says for this frontend (%s)", kc.Dataplane)
	default:
		x.step("kernel: differs from the plan for this frontend (%s):", kc.Dataplane)
		for i, d := range kc.Differences {
			if i == maxKernelLines {
				x.step("  and %d more", len(kc.Differences)-maxKernelLines)
				break
			}
			x.step("  %s", d)
		}
		kc.Cause = &Cause{CauseKernelDiffers, "the node's kernel does not hold the plan for this frontend: is netspec watch running and applying this tree? (netspec status)"}
		x.step("cause: %s", kc.Cause.Text)
	}
}

// endpoints notes each endpoint of port, taken or left out and why.
func (x *Explanation) endpoints(p *plan.Plan, s *plan.Service, port *plan.Port, d plan.Detail, pk plan.Packet) {
	anyReady := false
	for _, e := range port.Endpoints {
		anyReady = anyReady || e.Ready && e.IP.Is4() == pk.Dst.Unmap().Is4()
	}
	local := s.InternalLocal
	switch {
	case d.Set == "external":
		local = s.ExternalLocal
	case d.Frontend != "cluster IP" && port.ShortCircuit != nil:
		local = false // the short-circuit is subject to neither policy
	}
	failOpen := slices.Contains(x.failOpen, s.Key())
	for _, e := range port.Endpoints {
		n := Endpoint{Addr: e.AddrPort(), Pod: e.Pod, Node: e.NodeName}
		n.Taken = slices.Contains(d.Endpoints, e.AddrPort())
		f, failing := x.probes[probeKey{s.Key(), e.AddrPort()}]
		switch {
		case n.Taken && failing && failOpen:
			x.step("endpoint %s%s: taken, although it fails its readiness probe %s on this node: every endpoint the port uses here fails, so all are kept (fail open)", e.AddrPort(), who(e), f.Probe)
			x.Endpoints = append(x.Endpoints, n)
			continue
		case n.Taken:
		case failing && e.IP.Is4() == pk.Dst.Unmap().Is4():
			n.Why = probeText(f)
		case e.IP.Is4() != pk.Dst.Unmap().Is4():
			n.Why = "other IP family than the destination"
		case !e.Ready && !(e.Serving && e.Terminating):
			n.Why = "not ready" + terminating(e)
		case !e.Ready && anyReady:
			n.Why = "terminating: only used when no endpoint is ready"
		case d.Set == "":
			n.Why = "no endpoint set was chosen"
		case local && e.NodeName != p.Node.Name:
			n.Why = fmt.Sprintf("on node %s, and the traffic policy is Local", orNone([]string{e.NodeName}))
		default:
			n.Why = "topology: " + topologyWhy(e, p.Node)
		}
		x.Endpoints = append(x.Endpoints, n)
		if n.Taken {
			x.step("endpoint %s%s: taken", e.AddrPort(), who(e))
		} else {
			x.step("endpoint %s%s: left out, %s", e.AddrPort(), who(e), n.Why)
		}
	}
}

// pods notes the pods the selector matches that are no endpoint of the
// port, with the compiler's reason.
func (x *Explanation) pods(objs []*schema.Object, so *schema.Service, sp *schema.ServicePort, port *plan.Port) {
	if so == nil || sp == nil || so.Spec.Selector.Len() == 0 {
		return
	}
	for _, pod := range selected(objs, so) {
		if _, why := compiler.PodTarget(pod, *sp); why != "" {
			x.step("pod %s/%s: selected but no endpoint, %s", pod.Metadata.Namespace, pod.Metadata.Name, why)
		}
	}
}

func selected(objs []*schema.Object, so *schema.Service) []*schema.Pod {
	var out []*schema.Pod
	for _, o := range objs {
		if pod := o.Pod; pod != nil && pod.Metadata.Namespace == so.Metadata.Namespace && compiler.Selects(so.Spec.Selector, pod.Metadata.Labels) {
			out = append(out, pod)
		}
	}
	return out
}

// noEndpoints finds why a port has no usable endpoint.
func noEndpoints(objs []*schema.Object, so *schema.Service, sp *schema.ServicePort, port *plan.Port) *Cause {
	if so == nil || sp == nil {
		return &Cause{CauseNoReadyEndpoint, "the port has no ready endpoint"}
	}
	key := so.Metadata.Namespace + "/" + so.Metadata.Name
	if so.Spec.Selector.Len() == 0 {
		if len(port.Endpoints) == 0 {
			return &Cause{CauseNoEndpointObjects, fmt.Sprintf("Service %s has no selector and no Endpoints or EndpointSlice gives port %s an address", key, portName(sp))}
		}
		return &Cause{CauseNoReadyEndpoint, fmt.Sprintf("none of the %d endpoints of Service %s port %s is ready", len(port.Endpoints), key, portName(sp))}
	}
	pods := selected(objs, so)
	if len(pods) == 0 {
		return &Cause{CauseNoPodMatches, fmt.Sprintf("selector %s of Service %s matches no pod in namespace %s%s",
			labels(so.Spec.Selector), key, so.Metadata.Namespace, nearest(objs, so))}
	}
	var named []string
	for _, pod := range pods {
		if _, why := compiler.PodTarget(pod, *sp); why != "" && sp.TargetPort.IsName() && !pod.Terminal() {
			named = append(named, pod.Metadata.Name)
		}
	}
	if len(named) == len(pods) {
		return &Cause{CauseNoNamedPort, fmt.Sprintf("targetPort %s: no container port named %s/%s in the selected pods (%s)",
			sp.TargetPort.Str, sp.TargetPort.Str, sp.Protocol, strings.Join(named, ", "))}
	}
	return &Cause{CauseNoReadyEndpoint, fmt.Sprintf("the selector matches %d pod(s) but none is a ready endpoint of port %s (see above)", len(pods), portName(sp))}
}

// nearest names the pod of the namespace that carries the most of the
// selector's labels, and the labels that differ.
func nearest(objs []*schema.Object, so *schema.Service) string {
	var best *schema.Pod
	bestN := -1
	for _, o := range objs {
		pod := o.Pod
		if pod == nil || pod.Metadata.Namespace != so.Metadata.Namespace {
			continue
		}
		n := 0
		for k, v := range so.Spec.Selector.All() {
			if pod.Metadata.Labels.Get(k) == v {
				n++
			}
		}
		if n > bestN || n == bestN && pod.Metadata.Name < best.Metadata.Name {
			best, bestN = pod, n
		}
	}
	if best == nil {
		return " (the namespace has no pods)"
	}
	var diff []string
	for k, want := range so.Spec.Selector.All() { // in key order
		has, ok := best.Metadata.Labels.Lookup(k)
		switch {
		case !ok:
			diff = append(diff, fmt.Sprintf("%s=%s wanted, the pod has no %s", k, want, k))
		case has != want:
			diff = append(diff, fmt.Sprintf("%s=%s wanted, the pod has %s=%s", k, want, k, has))
		}
	}
	return fmt.Sprintf("; nearest pod %s (labels %s): %s", best.Metadata.Name, labels(best.Metadata.Labels), strings.Join(diff, "; "))
}

// notService finds why a packet matched no frontend.
func notService(p *plan.Plan, pk plan.Packet) *Cause {
	dst := pk.Dst.Unmap()
	for i := range p.Services {
		s := &p.Services[i]
		if slices.Contains(s.ExternalIPs, dst) || slices.Contains(s.LoadBalancerIPs, dst) {
			return &Cause{CausePortNotServed, fmt.Sprintf("%s is an address of Service %s, which does not serve %d/%s on it; it serves %s",
				dst, s.Key(), pk.Port, pk.Protocol, servedPorts(s, false))}
		}
	}
	for _, c := range p.Cluster.ServiceCIDRs {
		if c.Contains(dst) {
			return &Cause{CauseUnallocated, fmt.Sprintf("%s is in the service CIDR %s but no Service holds it", dst, c)}
		}
	}
	if !p.NodePortAddress(dst) {
		for i := range p.Services {
			s := &p.Services[i]
			for _, pt := range s.Ports {
				if pt.NodePort == pk.Port && pt.Protocol == pk.Protocol && !s.Headless {
					var addrs []string
					for _, ip := range p.Node.IPs {
						if p.NodePortAddress(ip) {
							addrs = append(addrs, ip.String())
						}
					}
					return &Cause{CauseNodePortNotAddress, fmt.Sprintf("%d/%s is a node port of Service %s, but %s is not a node-port address of node %s (node ports answer on: %s)",
						pk.Port, pk.Protocol, s.Key(), dst, p.Node.Name, orNone(addrs))}
				}
			}
		}
	}
	if p.NodePortAddress(dst) {
		return &Cause{CauseNotService, fmt.Sprintf("%s is a node-port address of node %s, but no Service has node port %d/%s", dst, p.Node.Name, pk.Port, pk.Protocol)}
	}
	return &Cause{CauseNotService, fmt.Sprintf("%s is no cluster IP, external IP or LoadBalancer IP of any Service", dst)}
}

func planService(p *plan.Plan, key string) *plan.Service {
	for i := range p.Services {
		if p.Services[i].Key() == key {
			return &p.Services[i]
		}
	}
	return nil
}

func schemaService(objs []*schema.Object, key string) *schema.Service {
	for _, o := range objs {
		if s := o.Service; s != nil && s.Metadata.Namespace+"/"+s.Metadata.Name == key {
			return s
		}
	}
	return nil
}

// portOf finds the port the packet reached, as Trace does.
func portOf(s *plan.Service, frontend string, pk plan.Packet) *plan.Port {
	for i := range s.Ports {
		pt := &s.Ports[i]
		if pt.Protocol != pk.Protocol {
			continue
		}
		if frontend == "node port" && pt.NodePort == pk.Port || frontend != "node port" && pt.Port == pk.Port {
			return pt
		}
	}
	return nil
}

func servedPorts(s *plan.Service, nodePorts bool) string {
	var out []string
	for _, pt := range s.Ports {
		n := pt.Port
		if nodePorts {
			n = pt.NodePort
		}
		out = append(out, fmt.Sprintf("%d/%s", n, pt.Protocol))
	}
	return orNone(out)
}

func topologyOf(so *schema.Service, port *plan.Port, n plan.Node) string {
	zone := n.Zone
	if zone == "" {
		zone = "none"
	}
	if so != nil && so.Spec.TrafficDistribution != "" {
		return fmt.Sprintf("; topology: trafficDistribution %s (node %s, zone %s)", so.Spec.TrafficDistribution, n.Name, zone)
	}
	if slices.ContainsFunc(port.Endpoints, func(e plan.Endpoint) bool {
		return e.Extra != nil && (len(e.Extra.ZoneHints) > 0 || len(e.Extra.NodeHints) > 0)
	}) {
		return fmt.Sprintf("; topology: EndpointSlice hints, used when every endpoint has them (node %s, zone %s)", n.Name, zone)
	}
	return "; topology: none"
}

func topologyWhy(e plan.Endpoint, n plan.Node) string {
	switch {
	case len(e.NodeHints()) > 0 && !slices.Contains(e.NodeHints(), n.Name):
		return fmt.Sprintf("hinted for nodes %s, not %s", strings.Join(e.NodeHints(), ","), n.Name)
	case len(e.ZoneHints()) > 0 && !slices.Contains(e.ZoneHints(), n.Zone):
		return fmt.Sprintf("hinted for zones %s, not %s", strings.Join(e.ZoneHints(), ","), n.Zone)
	case e.Zone != n.Zone:
		return fmt.Sprintf("in zone %s, endpoints of zone %s are preferred", orNone([]string{e.Zone}), n.Zone)
	}
	return fmt.Sprintf("on node %s, endpoints of node %s are preferred", e.NodeName, n.Name)
}

// probeText says why an endpoint is out for its probe.
func probeText(f ProbeFailure) string {
	s := "out for its readiness probe " + f.Probe
	var parts []string
	if !f.Since.IsZero() {
		parts = append(parts, "since "+f.Since.UTC().Format(time.RFC3339))
	}
	if f.LastError != "" {
		parts = append(parts, "last error "+f.LastError)
	}
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return s
}

func terminating(e plan.Endpoint) string {
	if e.Terminating {
		return " (terminating)"
	}
	return ""
}

func who(e plan.Endpoint) string {
	var parts []string
	if e.Pod != "" {
		parts = append(parts, "pod "+e.Pod)
	}
	if e.NodeName != "" {
		parts = append(parts, "node "+e.NodeName)
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

func policy(local bool) string {
	if local {
		return "Local"
	}
	return "Cluster"
}

func portName(sp *schema.ServicePort) string {
	if sp.Name != "" {
		return sp.Name
	}
	return fmt.Sprintf("%d/%s", sp.Port, sp.Protocol)
}

func labels(m schema.StringMap) string {
	var out []string
	for k, v := range m.All() { // in key order
		out = append(out, k+"="+v)
	}
	return "{" + strings.Join(out, ",") + "}"
}

func prefixes(ps []netip.Prefix) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	return strings.Join(out, ", ")
}

func addrPorts(as []netip.AddrPort) string {
	var out []string
	for _, a := range as {
		out = append(out, a.String())
	}
	return strings.Join(out, ", ")
}

func orNone(ss []string) string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}
