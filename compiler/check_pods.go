package compiler

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"netspec.dev/netspec/internal/suggest"

	"netspec.dev/netspec/internal/diag"
	"netspec.dev/netspec/schema"
)

// The checks of this file find what makes a tree that validates fail at
// run time, each a cause netspec explain names for a refused packet: a
// selected pod that is no endpoint (no IP, not Ready, finished), a named
// targetPort no selected pod has, a Service without selector whose
// Endpoints and EndpointSlices give it no address at all, or none for one
// of its ports, endpoints without a node under a Local policy, two pods
// with one IP, a nodeName that names no Node, a pod IP outside its Node's
// podCIDRs.

var (
	pPodIP    = diag.Path{"status", "podIP"}
	pPhase    = diag.Path{"status", "phase"}
	pNodeName = diag.Path{"spec", "nodeName"}
)

// podObjects finds the object of a selected pod, for a finding at the
// pod's own position. The index is made on first use: only a selected pod
// that cannot serve needs it.
type podObjects struct {
	each func(yield func(*schema.Object) bool)
	m    map[*schema.Pod]*schema.Object
}

// newPodObjects returns the podObjects of objs.
func newPodObjects(objs []*schema.Object) *podObjects {
	return &podObjects{each: slices.Values(objs)}
}

func (po *podObjects) get(p *schema.Pod) *schema.Object {
	if po.m == nil {
		po.m = map[*schema.Pod]*schema.Object{}
		for o := range po.each {
			if o.Pod != nil {
				po.m[o.Pod] = o
			}
		}
	}
	return po.m[p]
}

// checkSelected warns about the pods a Service selects that are no
// endpoint of it (finished, without an IP, not Ready) and about its named
// targetPorts that no selected pod has.
func checkSelected(o *schema.Object, pods []*schema.Pod, po *podObjects, r *reporter) {
	svc := o.Service
	for _, p := range pods {
		if p.Metadata.DeletionTimestamp != "" {
			continue // terminating: on its way out, as meant
		}
		var path diag.Path
		var format string
		switch {
		case p.Terminal():
			path, format = pPhase, "Pod %[1]s/%[2]s has finished (phase %[4]s), so it is no endpoint of Service %[3]s, as in Kubernetes; delete the Pod, or make it phase Running"
		case len(p.IPs()) == 0:
			path, format = pPodIP, "Pod %[1]s/%[2]s has no status.podIP, so it is no endpoint of Service %[3]s; a Pod written by hand needs status.podIP and a Ready condition (README: What a Pod needs)"
		case !p.Ready() && !svc.Spec.PublishNotReadyAddresses:
			path, format = diag.Path{"status", "conditions"}, "Pod %[1]s/%[2]s is not Ready (no condition type Ready with status \"True\"), so Service %[3]s sends it no traffic; add that condition to status.conditions"
		default:
			continue
		}
		// The pod's object and the names are looked up only for a
		// finding; each format uses the arguments it needs.
		if obj := po.get(p); obj != nil {
			r.warnf(obj, path, format, p.Metadata.Namespace, p.Metadata.Name, objKey(o), p.Status.Phase)
		}
	}
	for i, sp := range svc.Spec.Ports {
		if sp.TargetPort.IsName() {
			checkNamedTarget(o, i, pods, r)
		}
	}
}

// checkNamedTarget warns when no selected pod that can serve has a
// container port of the name and protocol of port i's targetPort: the
// port then has no endpoints.
func checkNamedTarget(o *schema.Object, i int, pods []*schema.Pod, r *reporter) {
	sp := o.Service.Spec.Ports[i]
	var lacking, names []string
	for _, p := range pods {
		if p.Terminal() {
			continue
		}
		if _, why := PodTarget(p, sp); why == "" {
			return
		}
		lacking = append(lacking, p.Metadata.Name)
		p.Spec.ServingContainers(func(c *schema.Container, _ bool, _ int) bool {
			for _, cp := range c.Ports {
				if cp.Name != "" && cp.Protocol == sp.Protocol && !slices.Contains(names, cp.Name) {
					names = append(names, cp.Name)
				}
			}
			return true
		})
	}
	if len(lacking) == 0 {
		return
	}
	hint := "name a container port so, or give the port number"
	if best, ok := suggest.Closest(sp.TargetPort.Str, names); ok {
		hint = fmt.Sprintf("did you mean %q?", best)
	}
	r.warnf(o, pSpec.Key("ports").Index(i).Key("targetPort"), "no selected Pod has a container port named %s/%s (%s), so port %s has no endpoints; %s",
		sp.TargetPort.Str, sp.Protocol, strings.Join(lacking, ", "), cmp.Or(sp.Name, fmt.Sprint(sp.Port)), hint)
}

// checkManualEndpoints warns about the ports of a Service without
// selector for which its Endpoints objects and EndpointSlices (links,
// those of its name), which give addresses to others, have none: such a
// port refuses every connection, usually for a port name that differs.
func checkManualEndpoints(s *service, links []*schema.Object, r *reporter) {
	svc := s.obj.Service
	if svc.Spec.Selector.Len() > 0 || svc.Spec.Type == "ExternalName" {
		return
	}
	if _, ok := svc.Metadata.Labels.Lookup(schema.ServiceProxyNameLabel); ok {
		return // another proxy's, warned about itself
	}
	checkLocalNodeNames(svc, links, r)
	var ports [][]schema.EndpointPort
	for _, o := range links {
		switch {
		case o.Endpoints != nil:
			for _, sub := range o.Endpoints.Subsets {
				if len(sub.Addresses)+len(sub.NotReadyAddresses) > 0 {
					ports = append(ports, sub.Ports)
				}
			}
		case o.EndpointSlice != nil && !OtherProxySlice(o.EndpointSlice, svc):
			if len(o.EndpointSlice.Endpoints) > 0 {
				ports = append(ports, o.EndpointSlice.Ports)
			}
		}
	}
	if len(ports) == 0 {
		checkNoEndpoints(s, r)
		return
	}
	for i, sp := range svc.Spec.Ports {
		found := false
		for _, ps := range ports {
			if _, ok := endpointPort(ps, sp); ok {
				found = true
				break
			}
		}
		if !found {
			r.warnf(s.obj, pSpec.Key("ports").Index(i).Key("name"), "no Endpoints object or EndpointSlice of Service %s has an address for a port named %q/%s, so this port refuses every connection; an endpoint port serves the Service port of its name and protocol",
				s.key, sp.Name, sp.Protocol)
		}
	}
}

// checkNoEndpoints warns about a Service without selector that no
// Endpoints object or EndpointSlice gives an address at all (its ports
// have no endpoints): every port of it refuses connections, as explain
// names it (no-endpoints).
//
// Kubernetes accepts such a Service, as a controller may write its
// endpoints later; in netspec the tree is the only writer, so the
// warning is right, but it stays a warning: the tree compiles, and the
// Service is then what a cluster would have before that controller ran.
//
// A headless Service is left out, as explain leaves it out: it has no
// frontend for a packet to be refused at, and its DNS name, which then
// does not exist, is no cause explain names.
func checkNoEndpoints(s *service, r *reporter) {
	name := s.obj.Service.Metadata.Name
	if isHeadless(&s.obj.Service.Spec) || name == "" {
		return // (no name: the schema's error, and no Endpoints can match it)
	}
	r.warnf(s.obj, pName, msgNoEndpoints+", so every port of it refuses connections; write an Endpoints object named %s or an EndpointSlice labelled %s: %s with the addresses, or give the Service a selector",
		name, schema.ServiceNameLabel, name)
}

// msgNoEndpoints begins the finding of checkNoEndpoints.
const msgNoEndpoints = "the Service has no selector and no Endpoints object or EndpointSlice with an address"

// nodeLookup is what checkPodNode knows of the tree's Nodes.
type nodeLookup interface {
	// node returns the first Node of the name, nil when there is none.
	node(name string) *schema.Node
	// nodeNames lists the names of the tree's Nodes, sorted.
	nodeNames() []string
}

// nodeIndex is a nodeLookup of a tree's objects.
type nodeIndex struct {
	byName map[string]*schema.Node
	names  []string
}

func newNodeIndex(objs []*schema.Object) *nodeIndex {
	idx := &nodeIndex{byName: map[string]*schema.Node{}}
	for _, o := range objs {
		if n := o.Node; n != nil {
			if _, ok := idx.byName[n.Metadata.Name]; !ok {
				idx.byName[n.Metadata.Name] = n
				idx.names = append(idx.names, n.Metadata.Name)
			}
		}
	}
	slices.Sort(idx.names)
	return idx
}

func (idx *nodeIndex) node(name string) *schema.Node { return idx.byName[name] }
func (idx *nodeIndex) nodeNames() []string           { return idx.names }

// checkPodNode warns about a pod whose nodeName names no Node of a tree
// that has Nodes (its endpoints are local to no node and have no zone),
// and about its IPs outside the podCIDRs of its Node.
func checkPodNode(o *schema.Object, nodes nodeLookup, addrs []endpointAddr, r *reporter) {
	p := o.Pod
	name := p.Spec.NodeName
	if name == "" {
		return
	}
	n := nodes.node(name)
	if n == nil {
		names := nodes.nodeNames()
		if len(names) == 0 {
			return // a tree without Nodes
		}
		hint := "known: " + strings.Join(names[:min(len(names), 5)], ", ")
		if len(names) > 5 {
			hint += ", ..."
		}
		if best, ok := suggest.Closest(name, names); ok {
			hint = fmt.Sprintf("did you mean %q?", best)
		}
		r.warnf(o, pNodeName, "no Node %s in the tree, so the Pod's endpoints are local to no node and have no zone (Local traffic policies, topology); %s", name, hint)
		return
	}
	if p.Spec.HostNetwork || p.Terminal() {
		return
	}
	cidrs := n.Spec.CIDRs()
	for _, a := range addrs {
		family, in := false, false // a CIDR of the address's family; one holds it
		for _, c := range cidrs {
			if c.Addr().Is4() == a.addr.Is4() {
				family, in = true, in || c.Contains(a.addr)
			}
		}
		if family && !in {
			r.warnf(o, a.path(), "%s is outside the podCIDRs of its Node %s (%s), which its pods' IPs come from; is the IP or the nodeName wrong?",
				a.ip, name, prefixList(cidrs))
		}
	}
}

// podAddrs appends to out the IPs of a pod that the IP uniqueness check
// holds to: none for a pod on the host's network (it has its node's
// address) or one that has finished or is terminating (its IP may be
// another pod's already, as a cluster dump shows it). Each address once.
func podAddrs(out []endpointAddr, o *schema.Object) []endpointAddr {
	p := o.Pod
	if p == nil || p.Spec.HostNetwork || p.Terminal() || p.Metadata.DeletionTimestamp != "" {
		return out
	}
	n := len(out)
	out = appendEndpointAddrs(out, o)
	for i := len(out) - 1; i > n; i-- {
		if slices.ContainsFunc(out[n:i], func(e endpointAddr) bool { return e.addr == out[i].addr }) {
			out = slices.Delete(out, i, i+1)
		}
	}
	return out
}

// checkPodIPs reports the IPs of a pod (addrs, podAddrs) that an earlier
// pod has (first): the cluster's IP allocation gives every pod its own,
// and the compiler would keep one endpoint of the two.
func checkPodIPs(o *schema.Object, addrs []endpointAddr, first func(netip.Addr) *schema.Object, r *reporter) {
	for _, a := range addrs {
		f := first(a.addr)
		if f == nil || f == o {
			continue
		}
		m := f.Pod.Metadata
		r.errorf(o, a.path(), "%s is also the IP of Pod %s/%s at %s: two Pods cannot have one IP (the cluster's IP allocation gives each its own), and only one of them would be an endpoint; correct one of them",
			a.ip, m.Namespace, m.Name, r.where(f, pPodIP))
	}
}

// checkPods runs checkPodNode and checkPodIPs on every pod of objs.
func checkPods(objs []*schema.Object, r *reporter) {
	nodes := newNodeIndex(objs)
	firsts := map[netip.Addr]*schema.Object{}
	first := func(a netip.Addr) *schema.Object { return firsts[a] }
	var addrs []endpointAddr
	for _, o := range objs {
		if o.Pod == nil {
			continue
		}
		addrs = podAddrs(addrs[:0], o)
		for _, a := range addrs {
			if _, ok := firsts[a.addr]; !ok {
				firsts[a.addr] = o
			}
		}
		checkPodNode(o, nodes, addrs, r)
		checkPodIPs(o, addrs, first, r)
	}
}

// checkAllManualEndpoints runs checkManualEndpoints on every Service.
func checkAllManualEndpoints(objs []*schema.Object, svcs []*service, r *reporter) {
	links := map[string][]*schema.Object{}
	for _, o := range objs {
		if key, ok := linkKey(o); ok {
			links[key] = append(links[key], o)
		}
	}
	for _, s := range svcs {
		checkManualEndpoints(s, links[s.key], r)
	}
}

// checkMirrored warns about the subsets of an Endpoints object with more
// addresses than Kubernetes mirrors into EndpointSlices: netspec, as
// kube-proxy, uses only the first MaxMirrored (mirrored).
func checkMirrored(o *schema.Object, r *reporter) {
	for i, s := range o.Endpoints.Subsets {
		if _, _, left := mirrored(s); left > 0 {
			r.warnf(o, diag.Path{"subsets", i}, "this subset has %d addresses; Kubernetes' EndpointSlice mirroring controller copies at most %d per subset (ready ones first), so kube-proxy, and netspec as it, use the first %d and leave out %d; split the addresses over EndpointSlices",
				MaxMirrored+left, MaxMirrored, MaxMirrored, left)
		}
	}
}

// checkOtherFamily warns about the external IPs and LoadBalancer ingress
// IPs of a Service in a family it has no cluster IP of (fams): as
// kube-proxy, which installs the rules of a Service per family, the nodes
// never capture them.
func checkOtherFamily(s *service, fams []string, r *reporter) {
	svc := s.obj.Service
	if _, ok := svc.Metadata.Labels.Lookup(schema.ServiceProxyNameLabel); ok {
		return
	}
	check := func(ip string, p diag.Path) {
		a, err := netip.ParseAddr(ip)
		if err != nil {
			return
		}
		if f := schema.Family(a.Unmap()); !slices.Contains(fams, f) {
			r.warnf(s.obj, p, "%s is an %s address, but the Service has no %s cluster IP (ipFamilies: %s), so no node captures it, as kube-proxy installs a Service's rules per family; add %s to ipFamilies with ipFamilyPolicy PreferDualStack",
				ip, f, f, strings.Join(fams, ", "), f)
		}
	}
	for i, ip := range svc.Spec.ExternalIPs {
		check(ip, pSpec.Key("externalIPs").Index(i))
	}
	if svc.Spec.Type == "LoadBalancer" {
		for i, in := range svc.Status.LoadBalancer.Ingress {
			if in.IP != "" && in.IPMode != "Proxy" {
				check(in.IP, diag.Path{"status", "loadBalancer", "ingress", i, "ip"})
			}
		}
	}
}

// checkLocalNodeNames warns about the addresses without nodeName of the
// Endpoints objects and EndpointSlices (links) of a Service with a Local
// traffic policy: such an endpoint is local to no node, so the policy
// never uses it. One finding per object, at its first such address.
func checkLocalNodeNames(svc *schema.Service, links []*schema.Object, r *reporter) {
	external := (svc.Spec.Type == "NodePort" || svc.Spec.Type == "LoadBalancer") && svc.Spec.ExternalTrafficPolicy == "Local"
	policy := ""
	switch {
	case svc.Spec.InternalTrafficPolicy == "Local":
		policy = "internalTrafficPolicy"
	case external:
		policy = "externalTrafficPolicy"
	default:
		return
	}
	for _, o := range links {
		n, first := 0, diag.Path(nil)
		switch {
		case o.Endpoints != nil:
			for i, sub := range o.Endpoints.Subsets {
				for j, a := range sub.Addresses {
					if a.NodeName == "" {
						if n++; first == nil {
							first = diag.Path{"subsets", i}.Key("addresses").Index(j)
						}
					}
				}
			}
		case o.EndpointSlice != nil:
			for i, e := range o.EndpointSlice.Endpoints {
				if e.NodeName == "" {
					if n++; first == nil {
						first = diag.Path{"endpoints", i}
					}
				}
			}
		}
		if n > 0 {
			r.warnf(o, first, "%d address(es) without nodeName: Service %s/%s has %s Local, under which an endpoint serves only its own node's traffic, and one without nodeName is local to no node; add each address's nodeName",
				n, svc.Metadata.Namespace, svc.Metadata.Name, policy)
		}
	}
}
