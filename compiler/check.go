package compiler

import (
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"

	"netspec.dev/netspec/internal/diag"
	"netspec.dev/netspec/schema"
)

// Locator finds the file position of a field of an object, so that
// findings made after loading point at the right line (schema.*Tree
// implements it).
type Locator interface {
	Locate(src schema.Source, p diag.Path) diag.Pos
}

// Checked is what validation beyond the single-object schema yields.
type Checked struct {
	Cluster schema.ClusterSpec // the tree's Cluster spec, defaults when the tree has none
	Alloc   *Allocations
	Diags   diag.List // errors and warnings, unsorted

	pods *podIndex // the tree's pods by label, for Compile
}

// Validate runs the checks that need the Cluster settings or several
// objects, and allocates cluster IPs and node ports. lock is the tree's
// netspec.lock, nil when it has none. objs are assumed to have passed the
// schema; values the schema rejected are skipped, not reported again.
func Validate(objs []*schema.Object, lock *Lock, loc Locator) *Checked {
	return validate(nil, objs, lock, loc)
}

// validate is Validate, reusing m (nil: nothing).
func validate(m *Memo, objs []*schema.Object, lock *Lock, loc Locator) *Checked {
	if m != nil {
		return m.check.validate(objs, lock, loc)
	}
	return validateAll(objs, lock, loc)
}

// validateAll is Validate from scratch.
func validateAll(objs []*schema.Object, lock *Lock, loc Locator) *Checked {
	r := &reporter{loc: loc}
	cl := findCluster(objs, r)
	svcs := services(objs)
	// The allocation and the checks that need it run beside the others,
	// each with its own reporter; callers sort the diagnostics, so the
	// result does not depend on which finishes first.
	other, selectors, podR := &reporter{loc: loc}, &reporter{loc: loc}, &reporter{loc: loc}
	var pods *podIndex
	var wg sync.WaitGroup
	wg.Go(func() {
		checkDuplicates(objs, other)
		checkExternalIPs(objs, cl, other)
		checkEndpointLinks(objs, svcs, other)
		checkAllManualEndpoints(objs, svcs, other)
		for _, o := range objs {
			if o.Endpoints != nil {
				checkMirrored(o, other)
			}
		}
	})
	wg.Go(func() {
		pods = newPodIndex(objs)
		checkSelectors(objs, pods, newPodObjects(objs), selectors)
	})
	wg.Go(func() { checkPods(objs, podR) })
	alloc := allocate(svcs, cl, lock, r)
	checkEndpointIPs(objs, svcs, alloc, r)
	wg.Wait()
	r.dl = append(r.dl, other.dl...)
	r.dl = append(r.dl, selectors.dl...)
	r.dl = append(r.dl, podR.dl...)
	return &Checked{Cluster: cl.spec, Alloc: alloc, Diags: r.dl, pods: pods}
}

// reporter adds positioned diagnostics.
type reporter struct {
	loc Locator
	dl  diag.List
}

func (r *reporter) pos(o *schema.Object, p diag.Path) diag.Pos {
	if r.loc == nil {
		return diag.Pos{File: o.Src.File}
	}
	return r.loc.Locate(o.Src, p)
}

func (r *reporter) errorf(o *schema.Object, p diag.Path, format string, args ...any) {
	r.dl.Errorf(r.pos(o, p), p, format, args...)
}

func (r *reporter) warnf(o *schema.Object, p diag.Path, format string, args ...any) {
	r.dl.Warnf(r.pos(o, p), p, format, args...)
}

// where formats the position of a field as file:line, for messages that
// point at another object.
func (r *reporter) where(o *schema.Object, p diag.Path) string {
	pos := r.pos(o, p)
	pos.Col = 0
	return pos.String()
}

var (
	pSpec      = diag.Path{"spec"}
	pClusterIP = diag.Path{"spec", "clusterIP"}
)

// service is a Service object with its namespace/name.
type service struct {
	obj  *schema.Object
	key  string
	plan *svcPlan // its slots, nil when it needs none; kept by a memo only
}

func (s *service) spec() *schema.ServiceSpec { return &s.obj.Service.Spec }

// services returns the first Service object of each namespace/name (later
// ones are duplicates, reported by checkDuplicates), sorted by key.
func services(objs []*schema.Object) []*service {
	seen := map[string]bool{}
	var out []*service
	for _, o := range objs {
		if o.Service == nil {
			continue
		}
		key := objKey(o)
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, &service{obj: o, key: key})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

// objKey returns namespace/name, or name for cluster-scoped kinds.
func objKey(o *schema.Object) string {
	m := o.Meta()
	if schema.Namespaced(o.Kind) {
		return m.Namespace + "/" + m.Name
	}
	return m.Name
}

// checkDuplicates reports every object whose kind and name an earlier
// object already has. Cluster objects are findCluster's business.
func checkDuplicates(objs []*schema.Object, r *reporter) {
	seen := map[string]*schema.Object{}
	for _, o := range objs {
		if o.Cluster != nil || o.Meta().Name == "" {
			continue
		}
		key := o.Kind + "/" + objKey(o)
		if first, ok := seen[key]; ok {
			reportDuplicate(o, first, r)
			continue
		}
		seen[key] = o
	}
}

// reportDuplicate reports o, which has the kind and name of first.
func reportDuplicate(o, first *schema.Object, r *reporter) {
	r.errorf(o, pName, "%s %s is already defined at %s", o.Kind, objKey(o), r.where(first, pName))
}

func isHeadless(sp *schema.ServiceSpec) bool {
	return sp.ClusterIP == "None" || len(sp.ClusterIPs) > 0 && sp.ClusterIPs[0] == "None"
}

// clusterIPSlots works out which families a Service gets cluster IPs in, as
// the API server does, and checks its explicit cluster IPs against the
// service CIDRs.
func clusterIPSlots(s *service, cl *cluster, r *reporter) []ipSlot {
	sp := s.spec()
	if sp.Type == "ExternalName" || len(cl.serviceCIDRs) == 0 {
		return nil
	}
	if isHeadless(sp) {
		checkHeadlessFamilies(s, cl, r)
		return nil
	}
	type explicitIP struct {
		addr   netip.Addr
		family string
		path   diag.Path
		index  int32 // in spec.clusterIPs; -1: spec.clusterIP
	}
	var exps []explicitIP
	list, base := sp.ClusterIPs, pSpec.Key("clusterIPs")
	if len(list) == 0 && sp.ClusterIP != "" {
		list, base = []string{sp.ClusterIP}, nil
	}
	for i, ip := range list {
		a, err := netip.ParseAddr(ip)
		if err != nil || a.Zone() != "" {
			continue // the schema reported it
		}
		a = a.Unmap()
		p, index := pClusterIP, int32(-1)
		if base != nil {
			p, index = base.Index(i), int32(i)
		}
		exps = append(exps, explicitIP{addr: a, family: schema.Family(a), path: p, index: index})
	}
	explicitOf := func(f string) *explicitIP {
		for i := range exps {
			if exps[i].family == f {
				return &exps[i]
			}
		}
		return nil
	}
	for _, e := range exps {
		if _, ok := cl.cidr(e.family); !ok {
			r.errorf(s.obj, e.path, "%s is an %s address, but the cluster has no %s service CIDR (serviceCIDRs: %s)",
				e.addr, e.family, e.family, cl.cidrList())
		}
	}

	// The families asked for: ipFamilies, else those of the explicit IPs.
	var fams []string
	var famPaths []diag.Path
	add := func(f string, p diag.Path) {
		if !slices.Contains(fams, f) {
			fams = append(fams, f)
			famPaths = append(famPaths, p)
		}
	}
	if len(sp.IPFamilies) > 0 {
		for i, f := range sp.IPFamilies {
			add(f, pSpec.Key("ipFamilies").Index(i))
		}
	} else {
		for _, e := range exps {
			add(e.family, e.path)
		}
	}
	policy := sp.IPFamilyPolicy
	singleCluster := len(cl.serviceCIDRs) < 2
	var keep []string
	for i, f := range fams {
		switch _, ok := cl.cidr(f); {
		case ok:
			keep = append(keep, f)
		case explicitOf(f) != nil:
			// reported above
		case i > 0 && (policy == "PreferDualStack" || policy == "RequireDualStack" && singleCluster):
			// PreferDualStack falls back to the primary family; RequireDualStack is reported below
		default:
			r.errorf(s.obj, famPaths[i], "the cluster has no %s service CIDR (serviceCIDRs: %s)", f, cl.cidrList())
		}
	}
	if len(fams) > 0 && len(keep) == 0 {
		return nil
	}
	if len(keep) == 0 {
		keep = cl.families()[:1]
	}
	if (policy == "PreferDualStack" || policy == "RequireDualStack") && len(keep) == 1 && !singleCluster {
		for _, f := range cl.families() {
			if f != keep[0] {
				keep = append(keep, f)
			}
		}
	}
	if policy == "RequireDualStack" && singleCluster {
		r.errorf(s.obj, pSpec.Key("ipFamilyPolicy"), "RequireDualStack needs an IPv4 and an IPv6 service CIDR, but the cluster has only %s; use PreferDualStack or SingleStack",
			cl.cidrList())
	}
	if policy != "PreferDualStack" && policy != "RequireDualStack" && len(keep) > 1 {
		keep = keep[:1] // SingleStack with two families: the schema reported it
	}

	checkOtherFamily(s, keep, r)
	slots := make([]ipSlot, len(keep))
	for i, f := range keep {
		slots[i] = ipSlot{family: f}
		e := explicitOf(f)
		if e == nil {
			continue
		}
		cidr, _ := cl.cidr(f)
		slots[i].explicit, slots[i].index = e.addr, e.index
		if msg := newIPPool(cidr).problem(e.addr); msg != "" {
			r.errorf(s.obj, e.path, "%s", msg)
		} else {
			slots[i].valid = true
		}
	}
	return slots
}

// checkHeadlessFamilies checks the IP families of a headless Service with
// a selector against the cluster's, as the API server does (its families
// decide which endpoints the Service gets): each must have a service CIDR,
// and RequireDualStack needs both. A headless Service without selector may
// name any families, as there.
func checkHeadlessFamilies(s *service, cl *cluster, r *reporter) {
	sp := s.spec()
	if sp.Selector.Len() == 0 {
		return
	}
	for i, f := range sp.IPFamilies {
		if _, ok := cl.cidr(f); !ok && (f == "IPv4" || f == "IPv6") {
			r.errorf(s.obj, pSpec.Key("ipFamilies").Index(i), "the cluster has no %s service CIDR (serviceCIDRs: %s); a headless Service with a selector gets endpoints of the cluster's families only",
				f, cl.cidrList())
		}
	}
	if sp.IPFamilyPolicy == "RequireDualStack" && len(cl.serviceCIDRs) < 2 {
		r.errorf(s.obj, pSpec.Key("ipFamilyPolicy"), "RequireDualStack needs an IPv4 and an IPv6 service CIDR, but the cluster has only %s; use PreferDualStack or SingleStack",
			cl.cidrList())
	}
}

// nodePortSlots lists the node ports a Service needs and checks its
// explicit ones against the node port range.
func nodePortSlots(s *service, cl *cluster, r *reporter) []portSlot {
	sp := s.spec()
	if sp.Type != "NodePort" && sp.Type != "LoadBalancer" || !cl.hasNodePorts() {
		return nil
	}
	allocate := sp.Type == "NodePort" || sp.AllocateLoadBalancerNodePorts == nil || *sp.AllocateLoadBalancerNodePorts
	var slots []portSlot
	for i, p := range sp.Ports {
		if p.NodePort == 0 && !allocate {
			continue
		}
		sl := portSlot{index: int32(i), key: portKey(p), protocol: p.Protocol}
		if n := int(p.NodePort); n != 0 {
			sl.explicit = n
			if n < cl.nodePortFrom || n > cl.nodePortTo {
				r.errorf(s.obj, sl.path(), "%d is outside the cluster's node port range %s", n, cl.spec.NodePortRange)
			} else {
				sl.valid = true
			}
		}
		slots = append(slots, sl)
	}
	return slots
}

// checkExternalIPs requires every external IP to fall inside one of the
// Cluster's externalIPCIDRs, and every LoadBalancer IP the nodes capture
// inside one of its loadBalancerIPCIDRs: anyone who may write a Service
// could otherwise capture traffic to any address (CVE-2020-8554).
func checkExternalIPs(objs []*schema.Object, cl *cluster, r *reporter) {
	for _, o := range objs {
		if o.Service != nil {
			checkServiceExternalIPs(o, cl, r)
			checkServiceLoadBalancerIPs(o, cl, r)
		}
	}
}

// checkServiceExternalIPs is checkExternalIPs's check of the external IPs
// of one Service object.
func checkServiceExternalIPs(o *schema.Object, cl *cluster, r *reporter) {
	for i, ip := range o.Service.Spec.ExternalIPs {
		a, err := netip.ParseAddr(ip)
		if err != nil || a.Zone() != "" || schema.EndpointIPProblem(a) != "" {
			continue // the schema reported it
		}
		a = a.Unmap()
		if inside(cl.externalIPCIDRs, a) {
			continue
		}
		p := pSpec.Key("externalIPs").Index(i)
		if len(cl.externalIPCIDRs) == 0 {
			r.errorf(o, p, "%s is not inside any externalIPCIDRs of the Cluster object; add a CIDR that contains it to spec.externalIPCIDRs to allow it (none are allowed by default, which closes CVE-2020-8554)", a)
			continue
		}
		r.errorf(o, p, "%s is not inside any externalIPCIDRs of the Cluster object (%s); add a CIDR that contains it to spec.externalIPCIDRs to allow it",
			a, prefixList(cl.externalIPCIDRs))
	}
}

// checkServiceLoadBalancerIPs is checkExternalIPs's check of the
// LoadBalancer IPs of one Service object: the ingress IPs of its status
// that the nodes capture (those of a LoadBalancer Service whose ipMode is
// not Proxy) must lie inside the Cluster's loadBalancerIPCIDRs. As
// kube-proxy, netspec does not program spec.loadBalancerIP: a warning says
// so when no ingress IP is that address.
func checkServiceLoadBalancerIPs(o *schema.Object, cl *cluster, r *reporter) {
	s := o.Service
	if s.Spec.Type != "LoadBalancer" {
		return // the schema refuses a loadBalancerIP; ingress IPs are not programmed
	}
	lbIP, lbErr := netip.ParseAddr(s.Spec.LoadBalancerIP)
	lbIP = lbIP.Unmap()
	matched := false
	for i, ing := range s.Status.LoadBalancer.Ingress {
		a, err := netip.ParseAddr(ing.IP)
		if err != nil || a.Zone() != "" {
			continue // empty (a hostname), or the schema reported it
		}
		a = a.Unmap()
		if lbErr == nil && a == lbIP {
			matched = true
		}
		if ing.IPMode == "Proxy" || inside(cl.lbIPCIDRs, a) {
			continue
		}
		p := diag.Path{"status", "loadBalancer", "ingress", i, "ip"}
		if len(cl.lbIPCIDRs) == 0 {
			r.errorf(o, p, "%s is not inside any loadBalancerIPCIDRs of the Cluster object; add a CIDR that contains it to spec.loadBalancerIPCIDRs to allow it (none are allowed by default: every node captures the traffic to a LoadBalancer IP, as it does to an external IP, CVE-2020-8554)", a)
			continue
		}
		r.errorf(o, p, "%s is not inside any loadBalancerIPCIDRs of the Cluster object (%s); add a CIDR that contains it to spec.loadBalancerIPCIDRs to allow it",
			a, prefixList(cl.lbIPCIDRs))
	}
	if lbErr == nil && !matched {
		r.warnf(o, pSpec.Key("loadBalancerIP"), "%s is not programmed: as kube-proxy, netspec captures only the addresses of status.loadBalancer.ingress, and none of them is %s; add it there once the load balancer answers on it", lbIP, lbIP)
	}
}

// inside reports whether a lies inside one of cidrs.
func inside(cidrs []netip.Prefix, a netip.Addr) bool {
	return slices.ContainsFunc(cidrs, func(p netip.Prefix) bool { return p.Contains(a) })
}

// prefixList formats CIDRs for messages.
func prefixList(cidrs []netip.Prefix) string {
	s := make([]string, len(cidrs))
	for i, c := range cidrs {
		s[i] = c.String()
	}
	return strings.Join(s, ", ")
}

// checkEndpointIPs refuses endpoint IPs that are a Service's own
// addresses: traffic would loop through the load balancer.
func checkEndpointIPs(objs []*schema.Object, svcs []*service, alloc *Allocations, r *reporter) {
	owner := serviceAddrs(nil, svcs, alloc)
	if len(owner) == 0 {
		return
	}
	var addrs []endpointAddr
	for _, o := range objs {
		addrs = appendEndpointAddrs(addrs[:0], o)
		checkAddrs(o, addrs, owner, r)
	}
}

// addrOwner says whose address an address is, for checkEndpointIPs: a
// cluster IP of an allocation, or another address of a Service. It holds
// pointers rather than the names, as a memo keeps one per address.
type addrOwner struct {
	alloc *ServiceAlloc // the Service's allocation, for a cluster IP
	svc   *service      // the Service, for the other addresses
	what  addrKind
}

// addrKind says which address of a Service an addrOwner is.
type addrKind uint8

const (
	ownerClusterIP addrKind = iota
	ownerExternalIP
	ownerLoadBalancerIP
	ownerIngressIP
)

var addrKindText = [...]string{
	ownerClusterIP:      "the cluster IP of",
	ownerExternalIP:     "an external IP of",
	ownerLoadBalancerIP: "the load balancer IP of",
	ownerIngressIP:      "a load balancer ingress IP of",
}

// String says whose address it is: "the cluster IP of ns/name", ...
func (w addrOwner) String() string {
	ns, name := "", ""
	if w.alloc != nil {
		ns, name = w.alloc.Namespace, w.alloc.Name
	} else {
		m := &w.svc.obj.Service.Metadata
		ns, name = m.Namespace, m.Name
	}
	return addrKindText[w.what] + " " + ns + "/" + name
}

// serviceAddrs returns the addresses of the Services, each with the first
// Service that has it: the cluster IPs in namespace/name order, then the
// external, load balancer and ingress IPs in that order. It fills owner,
// emptied first, or a new map when owner is nil.
func serviceAddrs(owner map[netip.Addr]addrOwner, svcs []*service, alloc *Allocations) map[netip.Addr]addrOwner {
	if owner == nil {
		n := len(svcs)
		if alloc != nil {
			n = max(n, len(alloc.services))
		}
		owner = make(map[netip.Addr]addrOwner, n)
	}
	clear(owner)
	note := func(a netip.Addr, w addrOwner) {
		if _, ok := owner[a]; !ok {
			owner[a] = w
		}
	}
	noteString := func(ip string, what addrKind, s *service) {
		if a, err := netip.ParseAddr(ip); err == nil {
			note(a.Unmap(), addrOwner{svc: s, what: what})
		}
	}
	if alloc != nil {
		for i := range alloc.services {
			s := &alloc.services[i]
			for _, ip := range s.ClusterIPs {
				// Allocated addresses have no zone: parsing their text
				// gives them back.
				note(ip.Addr.Unmap(), addrOwner{alloc: s, what: ownerClusterIP})
			}
		}
	}
	for _, s := range svcs {
		for _, ip := range s.spec().ExternalIPs {
			noteString(ip, ownerExternalIP, s)
		}
		if s.spec().LoadBalancerIP != "" {
			noteString(s.spec().LoadBalancerIP, ownerLoadBalancerIP, s)
		}
		for _, ing := range s.obj.Service.Status.LoadBalancer.Ingress {
			if ing.IP != "" {
				noteString(ing.IP, ownerIngressIP, s)
			}
		}
	}
	return owner
}

// endpointAddr is an endpoint IP of an object: of an Endpoints object,
// an EndpointSlice or a Pod.
type endpointAddr struct {
	ip    string     // as written
	addr  netip.Addr // parsed and unmapped
	field addrField  // where it is written, with i and j
	i, j  int
}

// addrField says which field of its object an endpointAddr is.
type addrField uint8

const (
	fieldAddress         addrField = iota // Endpoints subsets[i].addresses[j].ip
	fieldNotReadyAddress                  // Endpoints subsets[i].notReadyAddresses[j].ip
	fieldSliceAddress                     // EndpointSlice endpoints[i].addresses[j]
	fieldPodIP                            // Pod status.podIP
	fieldPodIPs                           // Pod status.podIPs[i].ip
)

// path returns the address's field path.
func (a *endpointAddr) path() diag.Path {
	switch a.field {
	case fieldAddress:
		return diag.Path{"subsets", a.i}.Key("addresses").Index(a.j).Key("ip")
	case fieldNotReadyAddress:
		return diag.Path{"subsets", a.i}.Key("notReadyAddresses").Index(a.j).Key("ip")
	case fieldSliceAddress:
		return diag.Path{"endpoints", a.i, "addresses", a.j}
	case fieldPodIP:
		return diag.Path{"status", "podIP"}
	}
	return diag.Path{"status", "podIPs", a.i, "ip"}
}

// appendEndpointAddrs appends the endpoint IPs of o that parse to out, in
// the order checkEndpointIPs reports them.
func appendEndpointAddrs(out []endpointAddr, o *schema.Object) []endpointAddr {
	add := func(ip string, field addrField, i, j int) {
		if a, err := netip.ParseAddr(ip); err == nil {
			out = append(out, endpointAddr{ip: ip, addr: a.Unmap(), field: field, i: i, j: j})
		}
	}
	switch {
	case o.Endpoints != nil:
		for i, ss := range o.Endpoints.Subsets {
			for j, a := range ss.Addresses {
				add(a.IP, fieldAddress, i, j)
			}
			for j, a := range ss.NotReadyAddresses {
				add(a.IP, fieldNotReadyAddress, i, j)
			}
		}
	case o.EndpointSlice != nil:
		if t := o.EndpointSlice.AddressType; t != "IPv4" && t != "IPv6" {
			return out
		}
		for i, ep := range o.EndpointSlice.Endpoints {
			for j, a := range ep.Addresses {
				add(a, fieldSliceAddress, i, j)
			}
		}
	case o.Pod != nil:
		st := o.Pod.Status
		if st.PodIP != "" {
			add(st.PodIP, fieldPodIP, 0, 0)
		}
		for i, ip := range st.PodIPs {
			if ip.IP != st.PodIP {
				add(ip.IP, fieldPodIPs, i, 0)
			}
		}
	}
	return out
}

// checkAddrs reports the addresses of o that owner has.
func checkAddrs(o *schema.Object, addrs []endpointAddr, owner map[netip.Addr]addrOwner, r *reporter) {
	for i := range addrs {
		a := &addrs[i]
		if w, ok := owner[a.addr]; ok {
			r.errorf(o, a.path(), "%s is %s and cannot be an endpoint", a.ip, w)
		}
	}
}

// checkEndpointLinks warns about manual endpoints that no Service uses.
func checkEndpointLinks(objs []*schema.Object, svcs []*service, r *reporter) {
	byKey := map[string]*service{}
	for _, s := range svcs {
		byKey[s.key] = s
	}
	for _, o := range objs {
		checkEndpointLink(o, byKey, r)
	}
}

// linkKey returns the namespace/name of the Service an Endpoints object or
// an EndpointSlice belongs to; false for other objects and for a slice
// without the service name label.
func linkKey(o *schema.Object) (string, bool) {
	switch {
	case o.Endpoints != nil:
		return objKey(o), true
	case o.EndpointSlice != nil:
		m := o.EndpointSlice.Metadata
		if name, ok := m.Labels.Lookup(schema.ServiceNameLabel); ok {
			return m.Namespace + "/" + name, true
		}
	}
	return "", false
}

// checkEndpointLink is checkEndpointLinks for one object; byKey holds the
// Services by namespace/name.
func checkEndpointLink(o *schema.Object, byKey map[string]*service, r *reporter) {
	switch {
	case o.Endpoints != nil:
		key := objKey(o)
		s := byKey[key]
		switch {
		case s == nil:
			r.warnf(o, pName, "no Service %s exists, so these endpoints are unused", key)
		case s.spec().Selector.Len() > 0:
			r.warnf(o, pName, "Service %s has a selector, so Kubernetes ignores these manual endpoints and takes them from the selected Pods", key)
		}
	case o.EndpointSlice != nil:
		m := o.EndpointSlice.Metadata
		key, ok := linkKey(o)
		if !ok {
			p := pName
			if m.Labels.Len() > 0 {
				p = diag.Path{"metadata", "labels"}
			}
			r.warnf(o, p, "has no label %s, so the slice belongs to no Service and is unused", schema.ServiceNameLabel)
			return
		}
		s := byKey[key]
		switch {
		case s == nil:
			r.warnf(o, diag.Path{"metadata", "labels", schema.ServiceNameLabel}, "no Service %s exists, so this slice is unused", key)
		case OtherProxySlice(o.EndpointSlice, s.obj.Service) && s.spec().Selector.Len() == 0:
			if _, ok := s.obj.Service.Metadata.Labels.Lookup(schema.ServiceProxyNameLabel); !ok {
				// (A Service with the label is warned about itself.)
				r.warnf(o, diag.Path{"metadata", "labels", schema.ServiceProxyNameLabel}, "gives this slice to another proxy: kube-proxy leaves it out, and netspec's data plane too, so Service %s does not forward to its endpoints", key)
			}
		}
	}
}

// checkSelectors warns about Services whose selector matches no Pod: they
// have no endpoints, which is legal but usually a typo.
func checkSelectors(objs []*schema.Object, idx *podIndex, po *podObjects, r *reporter) {
	for _, o := range objs {
		if selects(o) {
			checkSelector(o, idx, po, r)
		}
	}
}

// selects reports whether o is a Service whose selector picks its
// endpoints.
func selects(o *schema.Object) bool {
	return o.Service != nil && o.Service.Spec.Type != "ExternalName" && o.Service.Spec.Selector.Len() > 0
}

// checkSelector selects the pods of a Service that selects, remembers
// them in idx and warns when there are none, or about those that cannot
// serve it (checkSelected).
func checkSelector(o *schema.Object, idx *podIndex, po *podObjects, r *reporter) {
	pods := idx.remember(o.Service)
	if len(pods) == 0 {
		r.warnf(o, pSpec.Key("selector"), "matches no Pod in namespace %s, so the Service has no endpoints", o.Service.Metadata.Namespace)
		return
	}
	checkSelected(o, pods, po, r)
}
