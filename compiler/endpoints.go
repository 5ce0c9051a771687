package compiler

import (
	"net/netip"
	"slices"
	"sort"

	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/schema"
)

// selection is a selecting Service's pods with what the endpoints of
// every port of the Service share: each pod's namespace/name and probes,
// made once.
type selection struct {
	pods   []*schema.Pod
	keys   []string
	probes [][]plan.Probe
}

func (c *compilation) selection(svc *schema.Service) *selection {
	pods := c.pods.servicePods(svc)
	sel := &selection{pods: pods, keys: make([]string, len(pods)), probes: make([][]plan.Probe, len(pods))}
	for i, pod := range pods {
		sel.keys[i] = pod.Metadata.Namespace + "/" + pod.Metadata.Name
		sel.probes[i] = podProbes(pod)
	}
	return sel
}

// endpointsOf returns the endpoints of one Service port, sorted by address:
// from the pods the selector matches (sel), or for a Service without
// selector from its Endpoints object and EndpointSlices (with the probes
// of the Pods their targetRefs name, else the Service's annotation's).
// The slice has no room to spare: a plan keeps it.
func (c *compilation) endpointsOf(svc *schema.Service, port schema.ServicePort, fams map[string]bool, sel *selection) []plan.Endpoint {
	var eps []plan.Endpoint
	if svc.Spec.Selector.Len() > 0 {
		eps = make([]plan.Endpoint, 0, len(sel.pods)) // mostly one address of the Service's families per pod
		for i, pod := range sel.pods {
			eps = c.podEndpoints(eps, svc, pod, sel.keys[i], sel.probes[i], port, fams)
		}
	} else {
		key := svc.Metadata.Namespace + "/" + svc.Metadata.Name
		if e := c.endpoints[key]; e != nil {
			eps = append(eps, c.manualEndpoints(e, port, fams)...)
		}
		for _, s := range c.slices[key] {
			if OtherProxySlice(s, svc) {
				continue
			}
			eps = append(eps, c.sliceEndpoints(s, port, fams)...)
		}
		// The annotation's probe is for the endpoints without a Pod:
		// those whose targetRef names a Pod of the tree have its probes
		// (refPod), or none when its containers have none.
		if probes := annotationProbes(svc); probes != nil {
			for i := range eps {
				if eps[i].Pod == "" {
					eps[i].Probes = probes
				}
			}
		}
	}
	slices.SortStableFunc(eps, func(a, b plan.Endpoint) int {
		if c := a.AddrPort().Compare(b.AddrPort()); c != 0 {
			return c
		}
		return state(b) - state(a)
	})
	// One address and port once: the most usable copy wins (ready, then
	// serving), whatever order the files came in.
	eps = slices.CompactFunc(eps, func(a, b plan.Endpoint) bool { return a.AddrPort() == b.AddrPort() })
	if cap(eps) > len(eps) {
		eps = slices.Clone(eps)
	}
	return eps
}

// OtherProxySlice tells whether kube-proxy leaves out slice s of svc, and
// netspec with it: the slice has the label service.kubernetes.io/service-proxy-name
// (kube-proxy's informers filter such slices out) and svc is not headless.
// A headless Service's slices are for DNS only, and CoreDNS reads them all.
func OtherProxySlice(s *schema.EndpointSlice, svc *schema.Service) bool {
	_, ok := s.Metadata.Labels.Lookup(schema.ServiceProxyNameLabel)
	return ok && !isHeadless(&svc.Spec)
}

// state ranks an endpoint's usefulness: ready, serving, then neither.
func state(e plan.Endpoint) int {
	switch {
	case e.Ready:
		return 2
	case e.Serving:
		return 1
	}
	return 0
}

func (c *compilation) zoneOf(node string) string {
	if n := c.nodes[node]; n != nil {
		return n.Metadata.Labels.Get(schema.ZoneLabel)
	}
	return ""
}

// podEndpoints appends to out a selected pod's endpoints of a port: one
// per pod IP of the Service's families, at the target port (a named
// targetPort is looked up in the pod's container ports; a pod without it
// is left out). A terminal pod (Succeeded or Failed) is never an
// endpoint, not even a not-ready one, as the EndpointSlice controller
// decides (ShouldPodBeInEndpoints). key and probes are the pod's
// namespace/name and podProbes.
func (c *compilation) podEndpoints(out []plan.Endpoint, svc *schema.Service, pod *schema.Pod, key string, probes []plan.Probe, port schema.ServicePort, fams map[string]bool) []plan.Endpoint {
	target, why := PodTarget(pod, port)
	if why != "" {
		return out
	}
	terminating := pod.Metadata.DeletionTimestamp != ""
	serving := pod.Ready()
	ready := serving && !terminating
	if svc.Spec.PublishNotReadyAddresses {
		ready = true
	}
	var extra *plan.EndpointExtra
	if pod.Spec.Hostname != "" && pod.Spec.Subdomain == svc.Metadata.Name {
		extra = &plan.EndpointExtra{Hostname: pod.Spec.Hostname}
	}
	for _, s := range pod.IPs() {
		ip, err := netip.ParseAddr(s)
		if err != nil || !fams[schema.Family(ip)] {
			continue
		}
		out = append(out, plan.Endpoint{
			IP: ip.Unmap(), Port: target,
			Ready: ready, Serving: serving, Terminating: terminating,
			NodeName: pod.Spec.NodeName, Zone: c.zoneOf(pod.Spec.NodeName),
			Pod:    key,
			Probes: probes,
			Extra:  extra,
		})
	}
	return out
}

// PodTarget returns the port a pod serves a Service port on, or why the pod
// is no endpoint of that port: it is terminal (Succeeded or Failed), or
// the named targetPort is no container port of the pod with the port's
// protocol. A name is looked up as Kubernetes' FindPort does: in the
// containers, then in the native sidecars (init containers with
// restartPolicy Always); the first port of that name and protocol wins.
// It is the compiler's own rule, exported so that explanations cannot
// disagree with the plan.
func PodTarget(pod *schema.Pod, port schema.ServicePort) (target uint16, why string) {
	if pod.Terminal() {
		return 0, "the pod is terminal (phase " + pod.Status.Phase + ")"
	}
	if !port.TargetPort.IsName() {
		return uint16(port.TargetPort.Int), ""
	}
	// The first port of that name and protocol in FindPort's order: names
	// may repeat across containers.
	var t int32
	pod.Spec.ServingContainers(func(ct *schema.Container, _ bool, _ int) bool {
		for _, cp := range ct.Ports {
			if cp.Name == port.TargetPort.Str && cp.Protocol == port.Protocol {
				t = cp.ContainerPort
				return false
			}
		}
		return true
	})
	if t == 0 {
		return 0, "the pod has no container port named " + port.TargetPort.Str + "/" + port.Protocol
	}
	return uint16(t), ""
}

// Selects reports whether a Service selector selects a pod with labels,
// as the compiler selects: every key and value of sel, and an empty
// selector selects nothing.
func Selects(sel, labels schema.StringMap) bool { return sel.Len() > 0 && matches(sel, labels) }

// endpointPort finds the port of an Endpoints subset or EndpointSlice that
// serves a Service port: the one of the same name and protocol. For the
// sentinel port of a headless Service without ports (port 0) every subset
// and slice serves, at port 0, whatever ports it lists, as CoreDNS
// answers for it.
func endpointPort(ports []schema.EndpointPort, port schema.ServicePort) (uint16, bool) {
	if port.Port == 0 {
		return 0, true
	}
	for _, p := range ports {
		if p.Name == port.Name && p.Protocol == port.Protocol && p.Port > 0 {
			return uint16(p.Port), true
		}
	}
	return 0, false
}

func (c *compilation) manualEndpoints(e *schema.Endpoints, port schema.ServicePort, fams map[string]bool) []plan.Endpoint {
	var out []plan.Endpoint
	for _, s := range e.Subsets {
		target, ok := endpointPort(s.Ports, port)
		if !ok {
			continue
		}
		add := func(addrs []schema.EndpointAddress, ready bool) {
			for _, a := range addrs {
				ip, err := netip.ParseAddr(a.IP)
				if err != nil || !fams[schema.Family(ip)] {
					continue
				}
				pe := plan.Endpoint{
					IP: ip.Unmap(), Port: target, Ready: ready, Serving: ready,
					NodeName: a.NodeName, Zone: c.zoneOf(a.NodeName), Extra: plan.NewEndpointExtra(a.Hostname, nil, nil),
				}
				c.fromRefPod(&pe, a.TargetRef, e.Metadata.Namespace)
				out = append(out, pe)
			}
		}
		ready, notReady, _ := mirrored(s)
		add(ready, true)
		add(notReady, false)
	}
	return out
}

// MaxMirrored is how many addresses of one subset of an Endpoints object
// Kubernetes' EndpointSlice mirroring controller copies into
// EndpointSlices (its maxEndpointsPerSubset); kube-proxy reads only the
// slices, so it never sees the others.
const MaxMirrored = 1000

// mirrored returns the addresses of an Endpoints subset that Kubernetes
// mirrors, as its mirroring controller takes them: the ready addresses
// in order, then the not-ready ones, up to MaxMirrored valid IPs (one
// that does not parse is skipped, not counted); left is how many valid
// IPs were left out.
func mirrored(s schema.EndpointSubset) (ready, notReady []schema.EndpointAddress, left int) {
	n := 0
	take := func(addrs []schema.EndpointAddress) []schema.EndpointAddress {
		for i, a := range addrs {
			if _, err := netip.ParseAddr(a.IP); err != nil {
				continue
			}
			if n == MaxMirrored {
				for _, b := range addrs[i:] {
					if _, err := netip.ParseAddr(b.IP); err == nil {
						left++
					}
				}
				return addrs[:i]
			}
			n++
		}
		return addrs
	}
	ready = take(s.Addresses)
	notReady = take(s.NotReadyAddresses)
	return ready, notReady, left
}

func (c *compilation) sliceEndpoints(s *schema.EndpointSlice, port schema.ServicePort, fams map[string]bool) []plan.Endpoint {
	if s.AddressType == "FQDN" {
		return nil // kube-proxy does not route to FQDN slices either
	}
	target, ok := endpointPort(s.Ports, port)
	if !ok {
		return nil
	}
	var out []plan.Endpoint
	for _, e := range s.Endpoints {
		if len(e.Addresses) == 0 {
			continue
		}
		// Kubernetes uses the first address of a slice endpoint.
		ip, err := netip.ParseAddr(e.Addresses[0])
		if err != nil || !fams[schema.Family(ip)] {
			continue
		}
		zone := e.Zone
		if zone == "" {
			zone = c.zoneOf(e.NodeName)
		}
		pe := plan.Endpoint{
			IP: ip.Unmap(), Port: target,
			Ready: e.Conditions.Ready, Serving: e.Conditions.Serving, Terminating: e.Conditions.Terminating,
			NodeName: e.NodeName, Zone: zone,
		}
		c.fromRefPod(&pe, e.TargetRef, s.Metadata.Namespace)
		var zoneHints, nodeHints []string
		if e.Hints != nil {
			for _, z := range e.Hints.ForZones {
				zoneHints = append(zoneHints, z.Name)
			}
			for _, n := range e.Hints.ForNodes {
				nodeHints = append(nodeHints, n.Name)
			}
			sort.Strings(zoneHints)
			sort.Strings(nodeHints)
		}
		pe.Extra = plan.NewEndpointExtra(e.Hostname, zoneHints, nodeHints)
		out = append(out, pe)
	}
	return out
}

// refPod returns the Pod of the tree that a targetRef names
// (ObjectReference.PodRef; ns is the namespace of the Endpoints object or
// EndpointSlice), nil when it names none or the tree has no such Pod.
func (c *compilation) refPod(r *schema.ObjectReference, ns string) *schema.Pod {
	pns, name, ok := r.PodRef(ns)
	if !ok {
		return nil
	}
	c.podNamesOnce.Do(func() {
		c.podNames = map[string]*schema.Pod{}
		for _, o := range c.objs {
			if p := o.Pod; p != nil {
				k := p.Metadata.Namespace + "/" + p.Metadata.Name
				if _, dup := c.podNames[k]; !dup {
					c.podNames[k] = p
				}
			}
		}
	})
	return c.podNames[pns+"/"+name]
}

// fromRefPod gives an endpoint of an Endpoints object or EndpointSlice
// whose targetRef names a Pod of the tree what a selector-built endpoint
// of that Pod has from it: its namespace/name and its containers'
// readiness probes, named ports resolved against its containers
// (podProbes). The Pod is the source of readiness, as in Kubernetes: a
// Pod without a readinessProbe leaves the endpoint without probes, and
// the Service's annotation does not apply. The probes still go to the
// endpoint's address, also when the Pod's IPs differ from it: that
// address is what the node forwards to, so it is what must answer.
// Without such a Pod the endpoint is left as it is.
func (c *compilation) fromRefPod(e *plan.Endpoint, r *schema.ObjectReference, ns string) {
	pod := c.refPod(r, ns)
	if pod == nil {
		return
	}
	e.Pod = pod.Metadata.Namespace + "/" + pod.Metadata.Name
	e.Probes = podProbes(pod)
}

// refPods lists, in order, the Pod each targetRef of e's and ss's
// endpoints that names a Pod resolves to (nil when the tree has none):
// the endpoints' probes are made from them, so a compilation that
// resolves them otherwise is another input (compileMemo).
func (c *compilation) refPods(e *schema.Endpoints, ss []*schema.EndpointSlice) []*schema.Pod {
	var out []*schema.Pod
	add := func(r *schema.ObjectReference, ns string) {
		if _, _, ok := r.PodRef(ns); ok {
			out = append(out, c.refPod(r, ns))
		}
	}
	if e != nil {
		for _, s := range e.Subsets {
			ready, notReady, _ := mirrored(s)
			for i := range ready {
				add(ready[i].TargetRef, e.Metadata.Namespace)
			}
			for i := range notReady {
				add(notReady[i].TargetRef, e.Metadata.Namespace)
			}
		}
	}
	for _, s := range ss {
		for i := range s.Endpoints {
			add(s.Endpoints[i].TargetRef, s.Metadata.Namespace)
		}
	}
	return out
}

// pick chooses the endpoints internal (Cluster) and external traffic use
// on this node, as kube-proxy does:
//   - ready endpoints; when none is ready, the serving and terminating
//     ones (the terminating fallback, so that connections drain);
//   - none at all for a Service another proxy serves (ProxyName);
//   - a Local traffic policy keeps only this node's endpoints (and then no
//     endpoint means drop, which the renderer decides); when both policies
//     are Local, short is what kube-proxy's short-circuit of pod and node
//     traffic to the external frontends picks from (plan.Port.ShortCircuit);
//   - topology, for Cluster policies: trafficDistribution PreferSameNode
//     keeps this node's endpoints when it has ready ones, PreferSameZone
//     and PreferClose this zone's; zone hints of EndpointSlices are used
//     when every candidate carries hints and one names this node's zone
//     (node hints likewise, before zone hints). Topology never narrows the
//     terminating fallback.
//
// Each IP family is chosen on its own, as kube-proxy runs one proxier per
// family: the IPv6 endpoints of a dual-stack Service neither hide the
// IPv4 ones' terminating fallback nor take their place in a zone.
func pick(eps []plan.Endpoint, svc *plan.Service, distribution string, node plan.Node) (cluster, external, short []int) {
	if svc.ProxyName != "" {
		return nil, nil, nil // another proxy serves it: no traffic of this node's
	}
	c4, x4, t4 := pickFamily(eps, 0, svc, distribution, node)
	c6, x6, t6 := pickFamily(eps, 1, svc, distribution, node)
	cluster = joinSorted(c4, c6)
	external = cluster
	if !slices.Equal(x4, c4) || !slices.Equal(x6, c6) {
		external = joinSorted(x4, x6)
	}
	if svc.InternalLocal && svc.ExternalLocal && (!slices.Equal(t4, c4) || !slices.Equal(t6, c6)) {
		// kube-proxy's short-circuit of pod and node traffic to external
		// frontends is subject to neither policy.
		short = joinSorted(t4, t6)
	}
	return cluster, external, short
}

// family is 0 for an IPv4 endpoint, 1 for an IPv6 one.
func family(e plan.Endpoint) int {
	if e.IP.Unmap().Is4() {
		return 0
	}
	return 1
}

// joinSorted joins two sorted index lists into one sorted list (a new
// one when both hold indexes).
func joinSorted(a, b []int) []int {
	switch {
	case len(b) == 0:
		return a
	case len(a) == 0:
		return b
	}
	out := append(slices.Clip(a), b...)
	if a[len(a)-1] > b[0] {
		slices.Sort(out)
	}
	return out
}

// pickFamily is pick over the endpoints of one IP family, fam (0 for
// IPv4, 1 for IPv6); topo is the set of policy Cluster.
func pickFamily(eps []plan.Endpoint, fam int, svc *plan.Service, distribution string, node plan.Node) (cluster, external, topo []int) {
	all := usable(eps, func(e plan.Endpoint) bool { return family(e) == fam })
	local := usable(eps, func(e plan.Endpoint) bool { return family(e) == fam && e.NodeName == node.Name })
	topo = all
	if len(all) > 0 && eps[all[0]].Ready {
		// Topology narrows ready endpoints only: the terminating fallback
		// uses every draining endpoint, as kube-proxy does.
		topo = topology(eps, all, distribution, node)
	}
	cluster, external = topo, topo
	if svc.InternalLocal {
		cluster = local
	}
	if svc.ExternalLocal {
		external = local
	}
	return cluster, external, topo
}

// usable returns the indexes of the ready endpoints that keep holds for,
// or, when none is ready, of the serving and terminating ones.
func usable(eps []plan.Endpoint, keep func(plan.Endpoint) bool) []int {
	var ready, draining []int
	for i, e := range eps {
		if !keep(e) {
			continue
		}
		switch {
		case e.Ready:
			ready = append(ready, i)
		case e.Serving && e.Terminating:
			draining = append(draining, i)
		}
	}
	if len(ready) > 0 {
		return ready
	}
	return draining
}

func topology(eps []plan.Endpoint, cand []int, distribution string, node plan.Node) []int {
	filter := func(keep func(plan.Endpoint) bool) []int {
		var out []int
		for _, i := range cand {
			if keep(eps[i]) {
				out = append(out, i)
			}
		}
		return out
	}
	switch distribution {
	case "PreferSameNode":
		if l := filter(func(e plan.Endpoint) bool { return e.NodeName == node.Name }); len(l) > 0 {
			return l
		}
		fallthrough
	case "PreferSameZone", "PreferClose":
		if node.Zone != "" {
			if z := filter(func(e plan.Endpoint) bool { return e.Zone == node.Zone }); len(z) > 0 {
				return z
			}
		}
		return cand
	}
	// Hints written in EndpointSlices: all or nothing, as kube-proxy. Node
	// hints (PreferSameNode) first, then zone hints.
	if len(cand) == 0 {
		return cand
	}
	allNodeHints := true
	for _, i := range cand {
		allNodeHints = allNodeHints && len(eps[i].NodeHints()) > 0
	}
	if allNodeHints {
		if h := filter(func(e plan.Endpoint) bool { return slices.Contains(e.NodeHints(), node.Name) }); len(h) > 0 {
			return h
		}
	}
	if node.Zone == "" {
		return cand
	}
	for _, i := range cand {
		if len(eps[i].ZoneHints()) == 0 {
			return cand
		}
	}
	if h := filter(func(e plan.Endpoint) bool { return slices.Contains(e.ZoneHints(), node.Zone) }); len(h) > 0 {
		return h
	}
	return cand
}
