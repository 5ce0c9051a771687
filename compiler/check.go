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
	r := &reporter{loc: loc}
	cl := findCluster(objs, r)
	svcs := services(objs)
	// The allocation and the checks that need it run beside the others,
	// each with its own reporter; callers sort the diagnostics, so the
	// result does not depend on which finishes first.
	other, selectors := &reporter{loc: loc}, &reporter{loc: loc}
	var pods *podIndex
	var wg sync.WaitGroup
	wg.Go(func() {
		checkDuplicates(objs, other)
		checkExternalIPs(objs, cl, other)
		checkEndpointLinks(objs, svcs, other)
	})
	wg.Go(func() {
		pods = newPodIndex(objs)
		checkSelectors(objs, pods, selectors)
	})
	alloc := allocate(svcs, cl, lock, r)
	checkEndpointIPs(objs, svcs, alloc, r)
	wg.Wait()
	r.dl = append(r.dl, other.dl...)
	r.dl = append(r.dl, selectors.dl...)
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
	spec *schema.ServiceSpec
}

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
		out = append(out, &service{obj: o, key: key, spec: &o.Service.Spec})
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
			r.errorf(o, pName, "%s %s is already defined at %s", o.Kind, objKey(o), r.where(first, pName))
			continue
		}
		seen[key] = o
	}
}

func isHeadless(sp *schema.ServiceSpec) bool {
	return sp.ClusterIP == "None" || len(sp.ClusterIPs) > 0 && sp.ClusterIPs[0] == "None"
}

// clusterIPSlots works out which families a Service gets cluster IPs in, as
// the API server does, and checks its explicit cluster IPs against the
// service CIDRs.
func clusterIPSlots(s *service, cl *cluster, r *reporter) []ipSlot {
	sp := s.spec
	if sp.Type == "ExternalName" || isHeadless(sp) || len(cl.serviceCIDRs) == 0 {
		return nil
	}
	type explicitIP struct {
		addr   netip.Addr
		family string
		path   diag.Path
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
		p := pClusterIP
		if base != nil {
			p = base.Index(i)
		}
		exps = append(exps, explicitIP{addr: a, family: schema.Family(a), path: p})
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

	slots := make([]ipSlot, len(keep))
	for i, f := range keep {
		slots[i] = ipSlot{family: f}
		e := explicitOf(f)
		if e == nil {
			continue
		}
		cidr, _ := cl.cidr(f)
		slots[i].explicit, slots[i].path = e.addr, e.path
		if msg := newIPPool(cidr).problem(e.addr); msg != "" {
			r.errorf(s.obj, e.path, "%s", msg)
		} else {
			slots[i].valid = true
		}
	}
	return slots
}

// nodePortSlots lists the node ports a Service needs and checks its
// explicit ones against the node port range.
func nodePortSlots(s *service, cl *cluster, r *reporter) []portSlot {
	sp := s.spec
	if sp.Type != "NodePort" && sp.Type != "LoadBalancer" || !cl.hasNodePorts() {
		return nil
	}
	allocate := sp.Type == "NodePort" || sp.AllocateLoadBalancerNodePorts == nil || *sp.AllocateLoadBalancerNodePorts
	var slots []portSlot
	for i, p := range sp.Ports {
		if p.NodePort == 0 && !allocate {
			continue
		}
		sl := portSlot{index: i, key: portKey(p), protocol: p.Protocol, path: pSpec.Key("ports").Index(i).Key("nodePort")}
		if n := int(p.NodePort); n != 0 {
			sl.explicit = n
			if n < cl.nodePortFrom || n > cl.nodePortTo {
				r.errorf(s.obj, sl.path, "%d is outside the cluster's node port range %s", n, cl.spec.NodePortRange)
			} else {
				sl.valid = true
			}
		}
		slots = append(slots, sl)
	}
	return slots
}

// checkExternalIPs requires every external IP to fall inside one of the
// Cluster's externalIPCIDRs: anyone who may write a Service could otherwise
// capture traffic to any address (CVE-2020-8554).
func checkExternalIPs(objs []*schema.Object, cl *cluster, r *reporter) {
	for _, o := range objs {
		if o.Service == nil {
			continue
		}
		for i, ip := range o.Service.Spec.ExternalIPs {
			a, err := netip.ParseAddr(ip)
			if err != nil || a.Zone() != "" || schema.EndpointIPProblem(a) != "" {
				continue // the schema reported it
			}
			a = a.Unmap()
			if slices.ContainsFunc(cl.externalIPCIDRs, func(p netip.Prefix) bool { return p.Contains(a) }) {
				continue
			}
			p := pSpec.Key("externalIPs").Index(i)
			if len(cl.externalIPCIDRs) == 0 {
				r.errorf(o, p, "%s is not inside any externalIPCIDRs of the Cluster object; add a CIDR that contains it to spec.externalIPCIDRs to allow it (none are allowed by default, which closes CVE-2020-8554)", a)
				continue
			}
			cidrs := make([]string, len(cl.externalIPCIDRs))
			for j, c := range cl.externalIPCIDRs {
				cidrs[j] = c.String()
			}
			r.errorf(o, p, "%s is not inside any externalIPCIDRs of the Cluster object (%s); add a CIDR that contains it to spec.externalIPCIDRs to allow it",
				a, strings.Join(cidrs, ", "))
		}
	}
}

// checkEndpointIPs refuses endpoint IPs that are a Service's own
// addresses: traffic would loop through the load balancer.
func checkEndpointIPs(objs []*schema.Object, svcs []*service, alloc *Allocations, r *reporter) {
	owner := map[netip.Addr]string{}
	note := func(ip, what string) {
		a, err := netip.ParseAddr(ip)
		if err != nil {
			return
		}
		if _, ok := owner[a.Unmap()]; !ok {
			owner[a.Unmap()] = what
		}
	}
	for _, s := range alloc.Services() {
		for _, ip := range s.ClusterIPs {
			note(ip.Addr.String(), "the cluster IP of "+s.Key())
		}
	}
	for _, s := range svcs {
		for _, ip := range s.spec.ExternalIPs {
			note(ip, "an external IP of "+s.key)
		}
		if s.spec.LoadBalancerIP != "" {
			note(s.spec.LoadBalancerIP, "the load balancer IP of "+s.key)
		}
		for _, ing := range s.obj.Service.Status.LoadBalancer.Ingress {
			if ing.IP != "" {
				note(ing.IP, "a load balancer ingress IP of "+s.key)
			}
		}
	}
	if len(owner) == 0 {
		return
	}
	check := func(o *schema.Object, p diag.Path, ip string) {
		a, err := netip.ParseAddr(ip)
		if err != nil {
			return
		}
		if what, ok := owner[a.Unmap()]; ok {
			r.errorf(o, p, "%s is %s and cannot be an endpoint", ip, what)
		}
	}
	for _, o := range objs {
		switch {
		case o.Endpoints != nil:
			for i, ss := range o.Endpoints.Subsets {
				ps := diag.Path{"subsets", i}
				for j, a := range ss.Addresses {
					check(o, ps.Key("addresses").Index(j).Key("ip"), a.IP)
				}
				for j, a := range ss.NotReadyAddresses {
					check(o, ps.Key("notReadyAddresses").Index(j).Key("ip"), a.IP)
				}
			}
		case o.EndpointSlice != nil:
			if t := o.EndpointSlice.AddressType; t != "IPv4" && t != "IPv6" {
				continue
			}
			for i, ep := range o.EndpointSlice.Endpoints {
				for j, a := range ep.Addresses {
					check(o, diag.Path{"endpoints", i, "addresses", j}, a)
				}
			}
		case o.Pod != nil:
			st := o.Pod.Status
			if st.PodIP != "" {
				check(o, diag.Path{"status", "podIP"}, st.PodIP)
			}
			for i, ip := range st.PodIPs {
				if ip.IP != st.PodIP {
					check(o, diag.Path{"status", "podIPs", i, "ip"}, ip.IP)
				}
			}
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
		switch {
		case o.Endpoints != nil:
			key := objKey(o)
			s := byKey[key]
			switch {
			case s == nil:
				r.warnf(o, pName, "no Service %s exists, so these endpoints are unused", key)
			case len(s.spec.Selector) > 0:
				r.warnf(o, pName, "Service %s has a selector, so Kubernetes ignores these manual endpoints and takes them from the selected Pods", key)
			}
		case o.EndpointSlice != nil:
			m := o.EndpointSlice.Metadata
			name, ok := m.Labels[schema.ServiceNameLabel]
			if !ok {
				p := pName
				if len(m.Labels) > 0 {
					p = diag.Path{"metadata", "labels"}
				}
				r.warnf(o, p, "has no label %s, so the slice belongs to no Service and is unused", schema.ServiceNameLabel)
				continue
			}
			if key := m.Namespace + "/" + name; byKey[key] == nil {
				r.warnf(o, diag.Path{"metadata", "labels", schema.ServiceNameLabel}, "no Service %s exists, so this slice is unused", key)
			}
		}
	}
}

// checkSelectors warns about Services whose selector matches no Pod: they
// have no endpoints, which is legal but usually a typo.
func checkSelectors(objs []*schema.Object, idx *podIndex, r *reporter) {
	for _, o := range objs {
		if o.Service == nil || o.Service.Spec.Type == "ExternalName" || len(o.Service.Spec.Selector) == 0 {
			continue
		}
		ns := o.Service.Metadata.Namespace
		if len(idx.remember(o.Service)) == 0 {
			r.warnf(o, pSpec.Key("selector"), "matches no Pod in namespace %s, so the Service has no endpoints", ns)
		}
	}
}
