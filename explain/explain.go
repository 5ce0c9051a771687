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
// explanation cannot disagree with the rules installed. For explain
// --live, Frontend says what of the nftables model render builds a
// frontend's packets go through, so that the applier can keep the
// kernel's difference with the plan to what concerns it
// (applier.CheckKernel). The package is pure: it reads a Plan, the
// tree's objects and the model, and touches nothing.
package explain

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"netspec.dev/netspec/internal/suggest"

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
	// Hairpin are the targets whose address is the packet's source: a
	// packet DNATed to one of them is masqueraded (hairpin) when
	// Masquerade is false, as kube-proxy masquerades in the endpoint's own
	// chain; to the other targets it keeps its source.
	Hairpin []netip.AddrPort `json:"hairpin,omitempty"`
	// SessionAffinity is the Service's sessionAffinity ClientIP; nil
	// without.
	SessionAffinity *SessionAffinity `json:"sessionAffinity,omitempty"`
	// Cause is why the packet is rejected, dropped or not for a Service;
	// for dnat nil, unless the node's daemon left endpoints out for
	// failing readiness probes (Options.Probes).
	Cause *Cause `json:"cause,omitempty"`
	// Kernel is whether the node's kernel holds what the plan says for
	// this frontend (Options.Kernel); nil when it was not asked.
	Kernel *KernelCheck `json:"kernel,omitempty"`

	probes   map[probeKey]ProbeFailure // Options.Probes
	failOpen []string                  // Options.FailOpen
	execPods map[string]bool           // with Options.Probing: pods ("ns/name") with an exec readiness probe
}

// ProbeFailure is an endpoint that a node's daemon left out of a Service
// because it fails a readiness probe there (netspec status).
type ProbeFailure struct {
	Service   string // namespace/name
	Endpoint  netip.AddrPort
	Probe     string // the probe, described
	Since     time.Time
	LastError string
	// By are the nodes whose say took the endpoint out when the fleet
	// did (watch --gossip-listen): the node whose probe fails, or the
	// dead node the endpoint runs on (NodeDead); nil when this node's
	// own probe fails.
	By       []string
	NodeDead bool
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
	// Probing tells that the node's daemon runs readiness probes
	// (explain --live): an endpoint whose Pod has an exec readiness probe,
	// which the node cannot run, is then said to be unprobed.
	Probing bool
	// KernelDiffers is the cause given when the kernel differs from the
	// plan, by a caller that knows more (a daemon answered: drift, or it
	// applies another tree); "" asks whether netspec watch runs.
	KernelDiffers string
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

// SessionAffinity is a Service's sessionAffinity: a client that comes
// back within TimeoutSeconds goes to the endpoint it got before.
type SessionAffinity struct {
	Type           string `json:"type"` // ClientIP
	TimeoutSeconds int32  `json:"timeoutSeconds"`
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
	// CauseOtherFamily: an external IP, LoadBalancer IP or node port of a
	// Service that has no cluster IP of the packet's IP family.
	CauseOtherFamily = "other-ip-family"
	// CauseHealthCheckNodePort: the health check node port of a Service,
	// answered by netspec's health check server, not forwarded.
	CauseHealthCheckNodePort = "health-check-node-port"
	// CauseLoadBalancerProxy: a LoadBalancer ingress IP with ipMode Proxy,
	// which the nodes do not capture.
	CauseLoadBalancerProxy = "load-balancer-ip-mode-proxy"
	// CauseOtherProxy: an address or node port of a Service with the
	// label service.kubernetes.io/service-proxy-name, which another
	// proxy serves: the node has no rule for it, as kube-proxy has none.
	CauseOtherProxy = "service-proxy-name"
)

// Cause is the reason of a reject, drop or accept.
type Cause struct {
	Kind string `json:"kind"`
	Text string `json:"text"`
}

// PacketWith explains what the node of p does with pk, given the node's
// live state (Options; zero for none). objs are the tree's objects p was
// compiled from.
func PacketWith(p *plan.Plan, objs []*schema.Object, pk plan.Packet, o Options) *Explanation {
	d := p.TraceDetail(pk)
	x := &Explanation{
		Node: p.Node.Name, From: pk.Src, To: netip.AddrPortFrom(pk.Dst, pk.Port), Protocol: pk.Protocol,
		FromLocal: pk.FromLocal, Frontend: d.Frontend, Service: d.Service, Port: d.Port,
		Verdict: d.Action, Targets: d.Endpoints, Masquerade: d.Masquerade && !d.Hairpin,
		failOpen: o.FailOpen,
	}
	if d.Hairpin {
		for _, e := range d.Endpoints {
			if e.Addr() == pk.Src.Unmap() {
				x.Hairpin = append(x.Hairpin, e)
			}
		}
	}
	// The cause and the verdict end every explanation, then the kernel's
	// check.
	defer x.kernel(o.Kernel, o.KernelDiffers)
	defer x.verdict()
	if o.Probing {
		x.execPods = schema.ExecPodsByKey(objs)
	}
	x.probes = map[probeKey]ProbeFailure{}
	for _, f := range slices.Backward(o.Probes) { // an endpoint's first failure written last
		x.probes[probeKey{f.Service, f.Endpoint}] = f
	}
	to := fmt.Sprintf("%s/%s", x.To, pk.Protocol)
	if d.Service == "" {
		x.step("%s matches no Service frontend on node %s", to, p.Node.Name)
		x.Cause = notService(p, objs, pk)
		return x
	}
	s := planService(p, d.Service)
	so := schemaService(objs, d.Service)
	port := s.PortFor(pk.Protocol, pk.Port, d.Frontend == "node port")
	if port == nil {
		x.step("%s is a %s of Service %s, which has no port %d/%s", pk.Dst, d.Frontend, d.Service, pk.Port, pk.Protocol)
		x.Cause = &Cause{CausePortNotServed, fmt.Sprintf("Service %s does not serve %d/%s on its cluster IP; it serves %s",
			d.Service, pk.Port, pk.Protocol, servedPorts(s))}
		return x
	}
	x.step("frontend: %s %s of Service %s", d.Frontend, to, d.Service)
	var sp *schema.ServicePort
	if so != nil {
		for i := range so.Spec.Ports {
			if so.Spec.Ports[i].Name == port.Name && so.Spec.Ports[i].Protocol == port.Protocol {
				sp = &so.Spec.Ports[i]
			}
		}
	}
	name := cmp.Or(port.Name, "(unnamed)")
	target := ""
	if sp != nil {
		target = ", targetPort " + sp.TargetPort.String()
	}
	x.step("Service port %s: %d/%s%s", name, port.Port, port.Protocol, target)
	if d.Frontend == "LoadBalancer IP" && len(s.SourceRanges) > 0 {
		if d.OutsideSourceRanges {
			text := fmt.Sprintf("source %s is outside loadBalancerSourceRanges %s", pk.Src, list(s.SourceRanges))
			if !slices.ContainsFunc(s.SourceRanges, func(r netip.Prefix) bool { return r.Addr().Unmap().Is4() == pk.Src.Unmap().Is4() }) {
				fam := family(pk.Src)
				text = fmt.Sprintf("loadBalancerSourceRanges %s has no %s range, so no %s client is allowed (netspec fails closed here, unlike kube-proxy, which ignores the ranges of the other family and lets every %s client in)",
					list(s.SourceRanges), fam, fam, fam)
			} else if x.defaultSource(pk) {
				text += defaultSourceHint
			}
			x.Cause = &Cause{CauseSourceOutside, text}
			return x
		}
		x.step("source %s is inside loadBalancerSourceRanges %s", pk.Src, list(s.SourceRanges))
	}
	x.step("traffic policy: internal %s, external %s%s", plan.TrafficPolicy(s.InternalLocal), plan.TrafficPolicy(s.ExternalLocal), topologyOf(so, port, p.Node))
	if s.AffinitySeconds > 0 {
		x.SessionAffinity = &SessionAffinity{Type: "ClientIP", TimeoutSeconds: s.AffinitySeconds}
		x.step("session affinity: ClientIP, timeout %d s: a client that opens a new connection within %d s of its last one sticks to the endpoint it got (while that endpoint is still taken)",
			s.AffinitySeconds, s.AffinitySeconds)
	}
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
		x.Cause = noEndpoints(objs, so, sp, port, pk)
	}
	if x.Verdict == plan.ActionDrop {
		var nodes []string
		nameless := 0
		for _, e := range port.Endpoints {
			if !(e.Ready || e.Serving && e.Terminating) || e.IP.Is4() != pk.Dst.Unmap().Is4() {
				continue
			}
			if e.NodeName == "" {
				nameless++
			} else if !slices.Contains(nodes, e.NodeName) {
				nodes = append(nodes, e.NodeName)
			}
		}
		var where []string
		if len(nodes) > 0 {
			where = append(where, "usable ones are on: "+strings.Join(nodes, ", "))
		}
		if nameless > 0 {
			where = append(where, fmt.Sprintf("%d usable endpoint(s) have no node name, so are never local to any node", nameless))
		}
		usable := strings.Join(where, "; ")
		local := s.InternalLocal
		if d.Set == "external" {
			local = s.ExternalLocal
		}
		text := fmt.Sprintf("%s Local and no usable endpoint on node %s (%s)", policyName(d.Set), p.Node.Name, usable)
		if !local {
			text = fmt.Sprintf("the %s endpoint set of node %s is empty, although the port has usable endpoints (%s)", d.Set, p.Node.Name, usable)
		}
		if d.Set == "external" && x.defaultSource(pk) {
			text += defaultSourceHint
		}
		x.Cause = &Cause{CauseLocalNoEndpoint, text}
	}
	return x
}

// ServiceWith explains a packet to each frontend of the Service key
// (namespace/name), from src (DefaultSource when src is not given or is
// of the other family), with the node's live state (Options).
func ServiceWith(p *plan.Plan, objs []*schema.Object, key string, src netip.Addr, o Options) ([]*Explanation, error) {
	s := planService(p, key)
	if s == nil {
		if best := nearestService(p, key); best != "" {
			return nil, fmt.Errorf("no Service %s in the tree; did you mean %s?", key, best)
		}
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

// nearestService is the Service of p that key (namespace/name) is a
// typo of: a name close to key's in its namespace, else key's name in a
// namespace close to key's; "" for none.
func nearestService(p *plan.Plan, key string) string {
	ns, name, _ := strings.Cut(key, "/")
	var names, namespaces []string
	for i := range p.Services {
		s := &p.Services[i]
		if s.Namespace == ns {
			names = append(names, s.Name)
		} else if s.Name == name {
			namespaces = append(namespaces, s.Namespace)
		}
	}
	if best, ok := suggest.Closest(name, names); ok {
		return ns + "/" + best
	}
	if best, ok := suggest.Closest(ns, namespaces); ok {
		return best + "/" + name
	}
	return ""
}

// Frontends returns a packet to each frontend of s on the node of p, with
// no source: each port on each cluster IP, external IP and LoadBalancer
// IP, then each node port on each node IP that is a node-port address.
// Headless and ExternalName Services have none. A Service another proxy
// serves (ProxyName) has its would-be frontends listed: packets to them
// show what the node does without rules for it.
func Frontends(p *plan.Plan, s *plan.Service) []plan.Packet {
	if s.Headless || s.Type == "ExternalName" {
		return nil
	}
	var out []plan.Packet
	for _, ips := range [][]netip.Addr{s.ClusterIPs, s.ExternalIPs, s.LoadBalancerIPs} {
		for _, ip := range ips {
			if !s.HasFamily(ip) {
				continue // kube-proxy installs no rules for it
			}
			for _, pt := range s.Ports {
				out = append(out, plan.Packet{Dst: ip, Protocol: pt.Protocol, Port: pt.Port})
			}
		}
	}
	for _, ip := range p.Node.IPs {
		if !p.NodePortAddress(ip) || !s.HasFamily(ip) {
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
		switch {
		case x.Masquerade:
			m = "masqueraded (source rewritten to the node's address)"
		case len(x.Hairpin) > 0:
			m = fmt.Sprintf("not masqueraded (the endpoint sees the client's address), except to %s, the source itself: hairpin, masqueraded so that the reply comes back through the node", list(x.Hairpin))
		}
		x.step("verdict: dnat to one of %s; %s", list(x.Targets), m)
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
func (x *Explanation) kernel(checks []KernelCheck, differs string) {
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
		kc.Cause = &Cause{CauseKernelDiffers, cmp.Or(differs, "the node's kernel does not hold the plan for this frontend: is netspec watch running and applying this tree? (netspec status)")}
		x.step("cause: %s", kc.Cause.Text)
	}
}

// endpoints notes each endpoint of port, taken or left out and why.
func (x *Explanation) endpoints(p *plan.Plan, s *plan.Service, port *plan.Port, d plan.Detail, pk plan.Packet) {
	anyReady := slices.ContainsFunc(port.Endpoints, func(e plan.Endpoint) bool {
		return e.Ready && e.IP.Is4() == pk.Dst.Unmap().Is4()
	})
	local := s.InternalLocal
	switch {
	case d.Set == "external":
		local = s.ExternalLocal
	case d.Frontend != "cluster IP" && port.ShortCircuit != nil:
		local = false // the short-circuit is subject to neither policy
	}
	pol := policyName(d.Set)
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
		case local && e.NodeName == "":
			n.Why = fmt.Sprintf("no node name, so never local to any node, and the %s is Local", pol)
		case local && e.NodeName != p.Node.Name:
			n.Why = fmt.Sprintf("on node %s, and the %s is Local", e.NodeName, pol)
		default:
			n.Why = "topology: " + topologyWhy(e, p.Node)
		}
		x.Endpoints = append(x.Endpoints, n)
		if n.Taken {
			var notes []string
			if !e.Ready {
				notes = append(notes, "terminating (draining: no endpoint is ready, so serving terminating ones are used)")
			}
			if slices.Contains(x.Hairpin, e.AddrPort()) {
				notes = append(notes, "it is the source: hairpin, so a packet DNATed to it is masqueraded")
			}
			if x.execPods[e.Pod] {
				notes = append(notes, "its readiness probe is exec: not probed from the node, the tree's Ready stands")
			}
			if len(notes) > 0 {
				x.step("endpoint %s%s: taken, %s", e.AddrPort(), who(e), strings.Join(notes, "; "))
			} else {
				x.step("endpoint %s%s: taken", e.AddrPort(), who(e))
			}
		} else {
			x.step("endpoint %s%s: left out, %s", e.AddrPort(), who(e), n.Why)
		}
	}
}

// pods notes the pods the selector matches that are no endpoint of the
// port, with the compiler's reason, or that have no IP yet.
func (x *Explanation) pods(objs []*schema.Object, so *schema.Service, sp *schema.ServicePort, port *plan.Port) {
	if so == nil || sp == nil || so.Spec.Selector.Len() == 0 {
		return
	}
	for _, pod := range selected(objs, so) {
		if why := podWhy(pod, sp); why != "" {
			x.step("pod %s/%s: selected but no endpoint, %s", pod.Metadata.Namespace, pod.Metadata.Name, why)
		}
	}
}

// podWhy says why a selected pod is no endpoint of sp, "" when it is one:
// the compiler's reason (compiler.PodTarget), or that it has no IP yet.
func podWhy(pod *schema.Pod, sp *schema.ServicePort) string {
	_, why := compiler.PodTarget(pod, *sp)
	if pod.Terminal() || len(pod.IPs()) > 0 {
		return why
	}
	phase := cmp.Or(pod.Status.Phase, "none")
	if why != "" {
		return fmt.Sprintf("no IP yet (phase %s); %s", phase, why)
	}
	return fmt.Sprintf("no IP yet (phase %s)", phase)
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

// noEndpoints finds why a port has no usable endpoint of the packet's IP
// family.
func noEndpoints(objs []*schema.Object, so *schema.Service, sp *schema.ServicePort, port *plan.Port, pk plan.Packet) *Cause {
	if so == nil || sp == nil {
		return &Cause{CauseNoReadyEndpoint, "the port has no ready endpoint"}
	}
	key := so.Metadata.Namespace + "/" + so.Metadata.Name
	is4 := pk.Dst.Unmap().Is4()
	usable := func(e plan.Endpoint) bool { return e.Ready || e.Serving && e.Terminating }
	if slices.ContainsFunc(port.Endpoints, usable) && !slices.ContainsFunc(port.Endpoints, func(e plan.Endpoint) bool { return usable(e) && e.IP.Is4() == is4 }) {
		return &Cause{CauseNoReadyEndpoint, fmt.Sprintf("port %s of Service %s has usable endpoints, but none of them is %s (the destination's family)",
			portName(sp), key, family(pk.Dst))}
	}
	if so.Spec.Selector.Len() == 0 {
		if len(port.Endpoints) == 0 {
			return &Cause{CauseNoEndpointObjects, fmt.Sprintf("Service %s has no selector and no Endpoints or EndpointSlice gives port %s an address%s",
				key, portName(sp), endpointObjects(objs, so, sp))}
		}
		return &Cause{CauseNoReadyEndpoint, fmt.Sprintf("none of the %d endpoints of Service %s port %s is ready", len(port.Endpoints), key, portName(sp))}
	}
	pods := selected(objs, so)
	if len(pods) == 0 {
		return &Cause{CauseNoPodMatches, fmt.Sprintf("selector %s of Service %s matches no pod in namespace %s%s",
			labels(so.Spec.Selector), key, so.Metadata.Namespace, nearest(objs, so))}
	}
	// Each selected pod is an endpoint (not ready, or of the other
	// family), lacks the named targetPort, or cannot be an endpoint at all
	// (finished, no IP yet).
	var named, others, endpoints []string
	for _, pod := range pods {
		_, why := compiler.PodTarget(pod, *sp)
		switch {
		case pod.Terminal():
			others = append(others, fmt.Sprintf("%s (finished, phase %s)", pod.Metadata.Name, pod.Status.Phase))
		case len(pod.IPs()) == 0:
			others = append(others, fmt.Sprintf("%s (no IP yet, phase %s)", pod.Metadata.Name, cmp.Or(pod.Status.Phase, "none")))
		case why != "":
			named = append(named, pod.Metadata.Name)
		default:
			endpoints = append(endpoints, pod.Metadata.Name)
		}
	}
	rest := ""
	if len(others) > 0 {
		rest = "; selected but no endpoint either: " + strings.Join(others, ", ")
	}
	if len(named) > 0 && len(endpoints) == 0 {
		return &Cause{CauseNoNamedPort, fmt.Sprintf("targetPort %s: no container port named %s/%s in the selected pods (%s)%s",
			sp.TargetPort.Str, sp.TargetPort.Str, sp.Protocol, strings.Join(named, ", "), rest)}
	}
	if len(endpoints) == 0 {
		return &Cause{CauseNoReadyEndpoint, fmt.Sprintf("the selector matches %d pod(s) but none can be an endpoint of port %s: %s",
			len(pods), portName(sp), strings.Join(others, ", "))}
	}
	if len(named) > 0 {
		rest = fmt.Sprintf("; %s lack the named targetPort %s/%s", strings.Join(named, ", "), sp.TargetPort.Str, sp.Protocol) + rest
	}
	return &Cause{CauseNoReadyEndpoint, fmt.Sprintf("the selector matches %d pod(s) but none is a ready endpoint of port %s: %s not ready (see above)%s",
		len(pods), portName(sp), strings.Join(endpoints, ", "), rest)}
}

// endpointObjects names the Endpoints object and the EndpointSlices of a
// Service without selector, and their ports, for a port they give no
// address: an endpoint port is the Service port's by name and protocol.
func endpointObjects(objs []*schema.Object, so *schema.Service, sp *schema.ServicePort) string {
	ports := func(ps []schema.EndpointPort) string {
		var out []string
		for _, p := range ps {
			out = append(out, fmt.Sprintf("%s %d/%s", cmp.Or(p.Name, "(unnamed)"), p.Port, cmp.Or(p.Protocol, "TCP")))
		}
		return orNone(out)
	}
	var found []string
	named := false // an object has the Service port's name and protocol
	has := func(ps []schema.EndpointPort) bool {
		return slices.ContainsFunc(ps, func(p schema.EndpointPort) bool {
			return p.Name == sp.Name && cmp.Or(p.Protocol, "TCP") == sp.Protocol
		})
	}
	for _, o := range objs {
		switch {
		case o.EndpointSlice != nil:
			m := o.EndpointSlice.Metadata
			switch {
			case m.Namespace != so.Metadata.Namespace || m.Labels.Get(schema.ServiceNameLabel) != so.Metadata.Name:
			case compiler.OtherProxySlice(o.EndpointSlice, so):
				found = append(found, fmt.Sprintf("EndpointSlice %s is left out, as kube-proxy leaves it (label %s=%s: another proxy's)",
					m.Name, schema.ServiceProxyNameLabel, m.Labels.Get(schema.ServiceProxyNameLabel)))
			default:
				named = named || has(o.EndpointSlice.Ports)
				found = append(found, fmt.Sprintf("EndpointSlice %s has port(s) %s", m.Name, ports(o.EndpointSlice.Ports)))
			}
		case o.Endpoints != nil:
			m := o.Endpoints.Metadata
			if m.Namespace == so.Metadata.Namespace && m.Name == so.Metadata.Name {
				var ps []schema.EndpointPort
				for _, sub := range o.Endpoints.Subsets {
					ps = append(ps, sub.Ports...)
				}
				named = named || has(ps)
				found = append(found, fmt.Sprintf("Endpoints %s has port(s) %s", m.Name, ports(ps)))
			}
		}
	}
	want := fmt.Sprintf("%s/%s", cmp.Or(sp.Name, "(unnamed)"), sp.Protocol)
	if len(found) == 0 {
		return fmt.Sprintf(" (no Endpoints object %s, and no EndpointSlice labeled %s=%s in namespace %s)",
			so.Metadata.Name, schema.ServiceNameLabel, so.Metadata.Name, so.Metadata.Namespace)
	}
	if named {
		return fmt.Sprintf(": %s; those with port %s hold no address for it", strings.Join(found, "; "), want)
	}
	return fmt.Sprintf(": %s; none is named %s (an endpoint port serves the Service port of its name and protocol)", strings.Join(found, "; "), want)
}

// nearest names the pod of the namespace whose labels are nearest the
// selector's (labelScore), and the labels that differ.
func nearest(objs []*schema.Object, so *schema.Service) string {
	var best *schema.Pod
	bestScore := -1.0
	for _, o := range objs {
		pod := o.Pod
		if pod == nil || pod.Metadata.Namespace != so.Metadata.Namespace {
			continue
		}
		score := labelScore(so.Spec.Selector, pod.Metadata.Labels)
		if score > bestScore || score == bestScore && pod.Metadata.Name < best.Metadata.Name {
			best, bestScore = pod, score
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

// labelScore says how near a pod's labels are to a selector, the typo
// a person looks for first. Per selector label: 3 when the pod has it;
// 1 to 2 when it has the key, more the closer the value (edit distance),
// so that the key with any value beats another key; below 1 when it has a
// key close to the selector's, more the closer key and value.
func labelScore(sel, labels schema.StringMap) float64 {
	score := 0.0
	for k, want := range sel.All() {
		if has, ok := labels.Lookup(k); ok {
			if has == want {
				score += 3
			} else {
				score += 1 + similarity(want, has)
			}
			continue
		}
		near := 0.0
		for lk, lv := range labels.All() {
			if ks := similarity(k, lk); ks > 0.5 {
				near = max(near, 0.9*ks*similarity(want, lv))
			}
		}
		score += near
	}
	return score
}

// similarity is 1 for equal strings, falling to 0 as the edit distance
// reaches the longer one's length.
func similarity(a, b string) float64 {
	n := max(len(a), len(b))
	if n == 0 {
		return 1
	}
	return 1 - float64(suggest.Distance(a, b))/float64(n)
}

// notService finds why a packet matched no frontend.
func notService(p *plan.Plan, objs []*schema.Object, pk plan.Packet) *Cause {
	dst := pk.Dst.Unmap()
	fam := family(dst)
	npa := p.NodePortAddress(dst)
	// A health check node port first: it answers on every node-port
	// address, one that is also an external IP of a Service included.
	var hc *plan.Service
	for i := range p.Services {
		if s := &p.Services[i]; pk.Protocol == "TCP" && s.HealthCheckNodePort != 0 && s.HealthCheckNodePort == pk.Port {
			hc = s
			break
		}
	}
	if hc != nil && npa {
		return &Cause{CauseHealthCheckNodePort, fmt.Sprintf("%d/TCP is the health check node port of Service %s: the health check server of netspec watch answers it on the node (200 with local endpoints, 503 without); it is not forwarded",
			pk.Port, hc.Key())}
	}
	if c := otherProxy(p, pk, npa); c != nil {
		return c
	}
	for i := range p.Services {
		s := &p.Services[i]
		if !s.Proxied() {
			continue
		}
		kind := ""
		switch {
		case slices.Contains(s.ExternalIPs, dst):
			kind = "an external IP"
		case slices.Contains(s.LoadBalancerIPs, dst):
			kind = "a LoadBalancer IP"
		}
		if kind == "" {
			continue
		}
		if !s.HasFamily(dst) {
			return &Cause{CauseOtherFamily, fmt.Sprintf("%s is %s of Service %s, which has no %s cluster IP (its families: %s): as kube-proxy, the node installs no %s rules for the Service, so %s is no frontend of it",
				dst, kind, s.Key(), fam, families(s), fam, dst)}
		}
		return &Cause{CausePortNotServed, fmt.Sprintf("%s is an address of Service %s, which does not serve %d/%s on it; it serves %s",
			dst, s.Key(), pk.Port, pk.Protocol, servedPorts(s))}
	}
	for _, o := range objs {
		so := o.Service
		if so == nil {
			continue
		}
		for _, in := range so.Status.LoadBalancer.Ingress {
			if a, err := netip.ParseAddr(in.IP); err == nil && a.Unmap() == dst && in.IPMode == "Proxy" {
				return &Cause{CauseLoadBalancerProxy, fmt.Sprintf("%s is a LoadBalancer IP of Service %s/%s with ipMode Proxy, which the node does not capture (as kube-proxy): traffic to it goes to the load balancer, which proxies it to the node ports",
					dst, so.Metadata.Namespace, so.Metadata.Name)}
			}
		}
	}
	for _, c := range p.Cluster.ServiceCIDRs {
		if c.Contains(dst) {
			return &Cause{CauseUnallocated, fmt.Sprintf("%s is in the service CIDR %s but no Service holds it", dst, c)}
		}
	}
	if hc != nil {
		return &Cause{CauseNodePortNotAddress, fmt.Sprintf("%d/TCP is the health check node port of Service %s, but %s is not a node-port address of node %s (%s)",
			pk.Port, hc.Key(), dst, p.Node.Name, nodePortAddrs(p, dst))}
	}
	for i := range p.Services {
		s := &p.Services[i]
		if !s.Proxied() {
			continue
		}
		for _, pt := range s.Ports {
			if pt.NodePort != pk.Port || pt.Protocol != pk.Protocol {
				continue
			}
			if !npa {
				return &Cause{CauseNodePortNotAddress, fmt.Sprintf("%d/%s is a node port of Service %s, but %s is not a node-port address of node %s (%s)",
					pk.Port, pk.Protocol, s.Key(), dst, p.Node.Name, nodePortAddrs(p, dst))}
			}
			if !s.HasFamily(dst) {
				return &Cause{CauseOtherFamily, fmt.Sprintf("%d/%s is a node port of Service %s, which has no %s cluster IP (its families: %s): as kube-proxy, the node installs no %s rules for the Service, so it has no node port on %s",
					pk.Port, pk.Protocol, s.Key(), fam, families(s), fam, dst)}
			}
		}
	}
	if npa {
		return &Cause{CauseNotService, fmt.Sprintf("%s is a node-port address of node %s, but no Service has node port %d/%s", dst, p.Node.Name, pk.Port, pk.Protocol)}
	}
	return &Cause{CauseNotService, fmt.Sprintf("%s is no cluster IP, external IP or LoadBalancer IP of any Service", dst)}
}

// otherProxy is the cause of a packet to an address of a Service another
// proxy serves (a cluster IP, external IP or LoadBalancer IP; a node port
// on a node-port address), nil for any other packet.
func otherProxy(p *plan.Plan, pk plan.Packet, npa bool) *Cause {
	dst := pk.Dst.Unmap()
	for i := range p.Services {
		s := &p.Services[i]
		if s.ProxyName == "" || s.Headless || s.Type == "ExternalName" {
			continue
		}
		what := ""
		switch {
		case slices.Contains(s.ClusterIPs, dst):
			what = fmt.Sprintf("%s is a cluster IP", dst)
		case slices.Contains(s.ExternalIPs, dst):
			what = fmt.Sprintf("%s is an external IP", dst)
		case slices.Contains(s.LoadBalancerIPs, dst):
			what = fmt.Sprintf("%s is a LoadBalancer IP", dst)
		case npa && slices.ContainsFunc(s.Ports, func(pt plan.Port) bool { return pt.NodePort == pk.Port && pt.Protocol == pk.Protocol }):
			what = fmt.Sprintf("%d/%s is a node port", pk.Port, pk.Protocol)
		default:
			continue
		}
		verdict := "the node routes its packets as any others"
		if slices.ContainsFunc(p.Cluster.ServiceCIDRs, func(c netip.Prefix) bool { return c.Contains(dst) }) {
			verdict = "the node drops its packets as those to an unallocated address of the service CIDR"
		}
		return &Cause{CauseOtherProxy, fmt.Sprintf("%s of Service %s, whose label service.kubernetes.io/service-proxy-name=%s gives it to another proxy: as kube-proxy, netspec installs no rule for it, and %s",
			what, s.Key(), s.ProxyName, verdict)}
	}
	return nil
}

// nodePortAddrs says where node ports answer in the family of dst, and
// why: the Cluster's nodePortAddresses of that family, or without any the
// addresses of the Node object.
func nodePortAddrs(p *plan.Plan, dst netip.Addr) string {
	is4 := dst.Unmap().Is4()
	var cidrs, addrs []string
	for _, c := range p.Cluster.NodePortAddresses {
		if c.Addr().Unmap().Is4() == is4 {
			cidrs = append(cidrs, c.String())
		}
	}
	for _, ip := range p.NodePortAddrs(nil) {
		if ip.Is4() == is4 {
			addrs = append(addrs, ip.String())
		}
	}
	if len(cidrs) > 0 {
		return fmt.Sprintf("the Cluster's nodePortAddresses for %s are %s: node ports answer only on the node's addresses inside them (of its Node object's: %s)",
			family(dst), strings.Join(cidrs, ", "), orNone(addrs))
	}
	return fmt.Sprintf("the Cluster names no nodePortAddresses for %s, so node ports answer on the Node object's %s addresses: %s",
		family(dst), family(dst), orNone(addrs))
}

func family(a netip.Addr) string {
	if a.Unmap().Is4() {
		return "IPv4"
	}
	return "IPv6"
}

// families names the IP families of a Service's cluster IPs.
func families(s *plan.Service) string {
	var out []string
	for _, c := range s.ClusterIPs {
		if f := family(c); !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return orNone(out)
}

// policyName is the traffic policy that chose the endpoint set.
func policyName(set string) string {
	if set == "external" {
		return "externalTrafficPolicy"
	}
	return "internalTrafficPolicy"
}

// defaultSourceHint follows a cause that the default source (a client
// outside the cluster) may be for.
const defaultSourceHint = "; the source is explain's default, a client outside the cluster: pass --from to explain a packet from a pod or from the node"

// defaultSource tells whether the packet comes from DefaultSource.
func (x *Explanation) defaultSource(pk plan.Packet) bool {
	return pk.Src.Unmap() == DefaultSource(pk.Dst)
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

// servedPorts lists the ports of s, port/protocol.
func servedPorts(s *plan.Service) string {
	var out []string
	for _, pt := range s.Ports {
		out = append(out, fmt.Sprintf("%d/%s", pt.Port, pt.Protocol))
	}
	return orNone(out)
}

func topologyOf(so *schema.Service, port *plan.Port, n plan.Node) string {
	zone := cmp.Or(n.Zone, "none")
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
	if f.NodeDead {
		return "out: the node it runs on, " + strings.Join(f.By, ",") + ", is dead (the fleet's gossip says so)"
	}
	s := "out for its readiness probe " + f.Probe
	var parts []string
	if len(f.By) > 0 {
		parts = append(parts, "failing on "+strings.Join(f.By, " and ")+", as the fleet's gossip says")
	}
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

func portName(sp *schema.ServicePort) string {
	return cmp.Or(sp.Name, fmt.Sprintf("%d/%s", sp.Port, sp.Protocol))
}

func labels(m schema.StringMap) string {
	var out []string
	for k, v := range m.All() { // in key order
		out = append(out, k+"="+v)
	}
	return "{" + strings.Join(out, ",") + "}"
}

// list writes xs comma-separated.
func list[T fmt.Stringer](xs []T) string {
	var out []string
	for _, x := range xs {
		out = append(out, x.String())
	}
	return strings.Join(out, ", ")
}

// orNone writes the words of ss that are not "" comma-separated, or
// "none".
func orNone(ss []string) string {
	words := slices.DeleteFunc(slices.Clone(ss), func(s string) bool { return s == "" })
	return cmp.Or(strings.Join(words, ", "), "none")
}
