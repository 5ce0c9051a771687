package schema

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"netspec.dev/netspec/internal/diag"
)

// The rules in this file relate several fields of one object; the CUE
// schema has already checked each field on its own. Rules that need other
// objects or the Cluster settings live in the compiler.

type reporter struct {
	dl     *diag.List
	locate func(diag.Path) diag.Pos
	have   map[string]bool // paths the schema already reported
}

func (r *reporter) errorf(p diag.Path, format string, args ...any) {
	if r.have[p.String()] {
		return
	}
	r.dl.Errorf(r.locate(p), p, format, args...)
}

func (r *reporter) warnf(p diag.Path, format string, args ...any) {
	r.dl.Warnf(r.locate(p), p, format, args...)
}

func checkObject(o *Object, r *reporter) {
	checkLabels(o.Meta().Labels, diag.Path{"metadata", "labels"}, r)
	checkAnnotations(o.Meta().Annotations, r)
	switch {
	case o.Service != nil:
		checkMetaName(o, r, 63)
		checkService(o.Service, r)
		if a, ok := o.Service.Metadata.Annotations.Lookup(ReadinessProbeAnnotation); ok {
			if _, err := ParseProbeAnnotation(a); err != nil {
				r.errorf(diag.Path{"metadata", "annotations", ReadinessProbeAnnotation}, "%v", err)
			}
		}
	case o.Endpoints != nil:
		checkMetaName(o, r, 253)
		checkEndpoints(o.Endpoints, r)
	case o.EndpointSlice != nil:
		checkMetaName(o, r, 253)
		checkSlice(o.EndpointSlice, r)
	case o.Pod != nil:
		checkMetaName(o, r, 253)
		checkPod(o.Pod, r)
	case o.Node != nil:
		checkMetaName(o, r, 253)
		checkNode(o.Node, r)
	case o.Cluster != nil:
		checkCluster(o.Cluster, r)
	}
}

// checkLabels checks the keys (qualified names) and values (label values)
// of labels or of a selector, as the API server's ValidateLabels.
func checkLabels(m StringMap, base diag.Path, r *reporter) {
	for k, v := range m.All() {
		if why := QualifiedNameProblem(k); why != "" {
			r.errorf(base.Key(k), "%q is not a valid label key (%s)", k, why)
		}
		if why := LabelValueProblem(v); why != "" {
			r.errorf(base.Key(k), "%q is not a valid label value (%s)", v, why)
		}
	}
}

// maxAnnotationsSize is the most bytes the keys and values of an object's
// annotations may hold together, as the API server allows.
const maxAnnotationsSize = 256 * 1024

// lbSourceRangesAnnotation is the annotation that cloud providers read as
// loadBalancerSourceRanges when the field is empty.
const lbSourceRangesAnnotation = "service.beta.kubernetes.io/load-balancer-source-ranges"

// checkAnnotations checks the keys of annotations (qualified names, case
// aside) and their total size, as the API server's ValidateAnnotations.
func checkAnnotations(m StringMap, r *reporter) {
	base := diag.Path{"metadata", "annotations"}
	size := 0
	for k, v := range m.All() {
		size += len(k) + len(v)
		if why := QualifiedNameProblem(strings.ToLower(k)); why != "" {
			r.errorf(base.Key(k), "%q is not a valid annotation key (%s)", k, why)
		}
	}
	if size > maxAnnotationsSize {
		r.errorf(base, "hold %d bytes; at most %d are allowed", size, maxAnnotationsSize)
	}
}

func checkMetaName(o *Object, r *reporter, max int) {
	if n := o.Meta().Name; len(n) > max {
		r.errorf(diag.Path{"metadata", "name"}, "is %d characters long; at most %d are allowed", len(n), max)
	}
}

// ---- Service ----

// topologyHintsAnnotation returns the annotation that asks the EndpointSlice
// controller for topology-aware hints (the deprecated
// service.kubernetes.io/topology-aware-hints, else
// service.kubernetes.io/topology-mode), when it does: its value is Auto or
// auto, as the controller's hintsEnabled reads it.
func topologyHintsAnnotation(a StringMap) (string, bool) {
	// The deprecated key wins when both are set, as in hintsEnabled.
	for _, key := range []string{"service.kubernetes.io/topology-aware-hints", "service.kubernetes.io/topology-mode"} {
		if v, ok := a.Lookup(key); ok {
			return key, v == "Auto" || v == "auto"
		}
	}
	return "", false
}

var (
	pSpec      = diag.Path{"spec"}
	pClusterIP = diag.Path{"spec", "clusterIP"}
)

func checkService(s *Service, r *reporter) {
	sp := &s.Spec
	headless := sp.ClusterIP == "None" || len(sp.ClusterIPs) > 0 && sp.ClusterIPs[0] == "None"
	external := sp.Type == "ExternalName"

	if len(sp.Ports) == 0 && !headless && !external {
		r.errorf(pSpec.Key("ports"), "a Service needs at least one port (only headless and ExternalName Services may have none)")
	}
	checkServicePorts(sp, r)
	checkLabels(sp.Selector, pSpec.Key("selector"), r)

	switch {
	case external:
		checkExternalName(sp, r)
	default:
		checkClusterIPs(sp, r)
	}
	if headless && (sp.Type == "NodePort" || sp.Type == "LoadBalancer") {
		r.errorf(pClusterIP, "a %s Service cannot be headless (clusterIP: None)", sp.Type)
	}

	if v, ok := s.Metadata.Labels.Lookup(ServiceProxyNameLabel); ok && !headless && !external {
		r.warnf(diag.Path{"metadata", "labels", ServiceProxyNameLabel}, "gives the Service to the proxy %q: as kube-proxy, netspec installs no rule for it, so no node serves its cluster IPs, node ports or external addresses (its DNS records and env variables stay); remove the label for netspec to serve it", v)
	}
	if key, ok := topologyHintsAnnotation(s.Metadata.Annotations); ok && sp.Selector.Len() > 0 && !external {
		why := "so its traffic is not kept in zones; spec.trafficDistribution: PreferClose keeps it in the client's zone, and netspec follows it"
		if sp.TrafficDistribution != "" {
			why = "so netspec follows spec.trafficDistribution instead (Kubernetes ignores it while this annotation asks for hints)"
		}
		r.warnf(diag.Path{"metadata", "annotations", key}, "asks the EndpointSlice controller for topology-aware hints, which it allocates by the zones' CPU; netspec does not compute them for the endpoints it takes from a selector, %s", why)
	}
	if sp.SessionAffinity != "ClientIP" && sp.SessionAffinityConfig != nil {
		// The API server's defaulting clears it when sessionAffinity is
		// None, before validation: accepted, and without effect.
		r.warnf(pSpec.Key("sessionAffinityConfig"), "has no effect: sessionAffinity is %s, and the API server drops sessionAffinityConfig then; set sessionAffinity: ClientIP for client affinity", sp.SessionAffinity)
	}
	externallyAccessible := sp.Type == "NodePort" || sp.Type == "LoadBalancer" || sp.Type == "ClusterIP" && len(sp.ExternalIPs) > 0
	if sp.ExternalTrafficPolicy != "" && !externallyAccessible {
		r.errorf(pSpec.Key("externalTrafficPolicy"), "may only be set for NodePort and LoadBalancer Services, or ClusterIP Services with externalIPs")
	}
	if sp.HealthCheckNodePort != 0 && (sp.Type != "LoadBalancer" || sp.ExternalTrafficPolicy != "Local") {
		r.errorf(pSpec.Key("healthCheckNodePort"), "may only be set when type is LoadBalancer and externalTrafficPolicy is Local")
	}
	// As the API server: fields of a load balancer only on a LoadBalancer
	// Service (forbidden elsewhere, not ignored).
	if sp.AllocateLoadBalancerNodePorts != nil && sp.Type != "LoadBalancer" {
		r.errorf(pSpec.Key("allocateLoadBalancerNodePorts"), "may only be set for LoadBalancer Services")
	}
	if c := sp.LoadBalancerClass; c != nil {
		if sp.Type != "LoadBalancer" {
			r.errorf(pSpec.Key("loadBalancerClass"), "may only be set for LoadBalancer Services")
		} else if why := QualifiedNameProblem(*c); why != "" {
			r.errorf(pSpec.Key("loadBalancerClass"), "%q is not a qualified name (%s)", *c, why)
		}
	}
	if len(sp.LoadBalancerSourceRanges) > 0 && sp.Type != "LoadBalancer" {
		r.errorf(pSpec.Key("loadBalancerSourceRanges"), "may only be set for LoadBalancer Services")
	}
	for i, c := range sp.LoadBalancerSourceRanges {
		if _, err := netip.ParsePrefix(strings.TrimSpace(c)); err != nil {
			r.errorf(pSpec.Key("loadBalancerSourceRanges").Index(i), "%q is not a CIDR (such as 203.0.113.0/24)", c)
		}
	}
	// The cloud providers' older form of the field, which the API server
	// checks alike when the field is empty (kube-proxy reads the field
	// only, and so does netspec).
	if v, ok := s.Metadata.Annotations.Lookup(lbSourceRangesAnnotation); ok && len(sp.LoadBalancerSourceRanges) == 0 {
		at := diag.Path{"metadata", "annotations"}.Key(lbSourceRangesAnnotation)
		if sp.Type != "LoadBalancer" {
			r.errorf(at, "may only be set for LoadBalancer Services")
		}
		for _, c := range strings.Split(v, ",") {
			if _, err := netip.ParsePrefix(strings.TrimSpace(c)); err != nil {
				r.errorf(at, "%q is not a list of CIDRs (such as 10.240.0.0/24,10.250.0.0/24)", v)
				break
			}
		}
	}
	if sp.LoadBalancerIP != "" {
		if sp.Type != "LoadBalancer" {
			r.errorf(pSpec.Key("loadBalancerIP"), "may only be set for LoadBalancer Services")
		}
		if a, err := netip.ParseAddr(sp.LoadBalancerIP); err != nil || a.Zone() != "" {
			r.errorf(pSpec.Key("loadBalancerIP"), "%q is not an IP address", sp.LoadBalancerIP)
		}
	}
	for i, ing := range s.Status.LoadBalancer.Ingress {
		if ing.IP == "" {
			continue
		}
		if _, err := netip.ParseAddr(ing.IP); err != nil {
			r.errorf(diag.Path{"status", "loadBalancer", "ingress", i, "ip"}, "%q is not an IP address", ing.IP)
		}
	}
	for i, ip := range sp.ExternalIPs {
		p := pSpec.Key("externalIPs").Index(i)
		a, err := netip.ParseAddr(ip)
		if err != nil || a.Zone() != "" {
			r.errorf(p, "%q is not an IP address", ip)
			continue
		}
		if msg := EndpointIPProblem(a); msg != "" {
			r.errorf(p, "%s is %s and cannot be an external IP", ip, msg)
		}
	}
}

func checkServicePorts(sp *ServiceSpec, r *reporter) {
	names := map[string]int{}
	ports := map[string]int{}
	nodePorts := map[string]int{}
	for i, p := range sp.Ports {
		pp := pSpec.Key("ports").Index(i)
		if p.Name == "" && len(sp.Ports) > 1 {
			r.errorf(pp.Key("name"), "is required when a Service has more than one port")
		}
		if p.Name != "" {
			if j, ok := names[p.Name]; ok {
				r.errorf(pp.Key("name"), "%q is already the name of ports[%d]", p.Name, j)
			} else {
				names[p.Name] = i
			}
		}
		checkAppProtocol(p.AppProtocol, pp.Key("appProtocol"), r)
		key := fmt.Sprintf("%d/%s", p.Port, p.Protocol)
		if j, ok := ports[key]; ok {
			r.errorf(pp.Key("port"), "%s is already used by ports[%d]", key, j)
		} else {
			ports[key] = i
		}
		if p.NodePort != 0 {
			if sp.Type != "NodePort" && sp.Type != "LoadBalancer" {
				r.errorf(pp.Key("nodePort"), "may only be set when type is NodePort or LoadBalancer, not %s", sp.Type)
			}
			nk := fmt.Sprintf("%d/%s", p.NodePort, p.Protocol)
			if j, ok := nodePorts[nk]; ok {
				r.errorf(pp.Key("nodePort"), "node port %s is already used by ports[%d]", nk, j)
			} else {
				nodePorts[nk] = i
			}
		}
	}
}

var dns1123Subdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// IsDNS1123Subdomain reports whether s is a DNS-1123 subdomain (at most 253
// characters of dot-separated labels).
func IsDNS1123Subdomain(s string) bool {
	return len(s) <= 253 && dns1123Subdomain.MatchString(s)
}

func checkExternalName(sp *ServiceSpec, r *reporter) {
	name := strings.TrimSuffix(sp.ExternalName, ".")
	switch {
	case sp.ExternalName == "":
		r.errorf(pSpec.Key("externalName"), "is required for an ExternalName Service")
	case !IsDNS1123Subdomain(name):
		r.errorf(pSpec.Key("externalName"), "%q is not a valid DNS name (a DNS-1123 subdomain, such as db.example.com)", sp.ExternalName)
	default:
		if a, err := netip.ParseAddr(name); err == nil && a.Is4() {
			// Accepted by the API server, as a name of digits.
			r.warnf(pSpec.Key("externalName"), "%q looks like an IPv4 address, but it is a DNS name of digits to Kubernetes and to DNS, which resolves nowhere: as CoreDNS, netspec gives the Service's name no record; for an address, use a Service without selector and an EndpointSlice that holds it", sp.ExternalName)
		}
	}
	if sp.ClusterIP != "" {
		r.errorf(pClusterIP, "must not be set for an ExternalName Service")
	}
	if len(sp.ClusterIPs) > 0 {
		r.errorf(pSpec.Key("clusterIPs"), "must not be set for an ExternalName Service")
	}
	if len(sp.IPFamilies) > 0 {
		r.errorf(pSpec.Key("ipFamilies"), "must not be set for an ExternalName Service")
	}
	if sp.IPFamilyPolicy != "" {
		r.errorf(pSpec.Key("ipFamilyPolicy"), "must not be set for an ExternalName Service")
	}
}

// Family returns "IPv4" or "IPv6" for an address.
func Family(a netip.Addr) string {
	if a.Is4() || a.Is4In6() {
		return "IPv4"
	}
	return "IPv6"
}

func checkClusterIPs(sp *ServiceSpec, r *reporter) {
	pIPs := pSpec.Key("clusterIPs")
	if sp.ClusterIP != "" && len(sp.ClusterIPs) > 0 && sp.ClusterIP != sp.ClusterIPs[0] {
		r.errorf(pClusterIP, "%q differs from clusterIPs[0] %q; they must be equal", sp.ClusterIP, sp.ClusterIPs[0])
	}
	// As the API server: it fills clusterIPs from clusterIP, never the
	// reverse, and refuses clusterIPs without clusterIP.
	if sp.ClusterIP == "" && len(sp.ClusterIPs) > 0 {
		r.errorf(pIPs, "is set without clusterIP, which the API server refuses; set clusterIP to clusterIPs[0] (clusterIP: %s) too", cmp.Or(sp.ClusterIPs[0], `""`))
	}
	ips := sp.ClusterIPs
	base := pIPs
	if len(ips) == 0 && sp.ClusterIP != "" {
		ips = []string{sp.ClusterIP}
		base = nil
	}
	if len(ips) > 2 {
		r.errorf(pIPs, "has %d addresses; at most two are allowed, one per family", len(ips))
	}
	at := func(i int) diag.Path {
		if base == nil {
			return pClusterIP
		}
		return base.Index(i)
	}
	var fams []string
	for i, ip := range ips {
		if ip == "None" {
			if len(ips) > 1 {
				r.errorf(at(i), "None must be the only cluster IP")
			}
			continue
		}
		a, err := netip.ParseAddr(ip)
		if err != nil || a.Zone() != "" {
			r.errorf(at(i), "%q is not an IP address (nor None, for a headless Service)", ip)
			continue
		}
		f := Family(a)
		for j, g := range fams {
			if g == f {
				r.errorf(at(i), "%s is a second %s address (clusterIPs[%d] is one); dual-stack needs one IPv4 and one IPv6 address", ip, f, j)
			}
		}
		fams = append(fams, f)
		if i < len(sp.IPFamilies) && sp.IPFamilies[i] != f {
			r.errorf(pSpec.Key("ipFamilies").Index(i), "%s does not match clusterIPs[%d] %s, which is %s", sp.IPFamilies[i], i, ip, f)
		}
	}
	if len(sp.IPFamilies) > 2 {
		r.errorf(pSpec.Key("ipFamilies"), "has %d families; at most two are allowed", len(sp.IPFamilies))
	}
	if len(sp.IPFamilies) == 2 && sp.IPFamilies[0] == sp.IPFamilies[1] {
		r.errorf(pSpec.Key("ipFamilies").Index(1), "%s is listed twice", sp.IPFamilies[1])
	}
	if sp.IPFamilyPolicy == "SingleStack" && (len(ips) > 1 || len(sp.IPFamilies) > 1) {
		r.errorf(pSpec.Key("ipFamilyPolicy"), "SingleStack allows one cluster IP and one family; use PreferDualStack or RequireDualStack for two")
	}
}

// ---- endpoints ----

// EndpointIPProblem says why an address cannot be a backend, or "" when it
// can: the unspecified address, loopback, link-local and link-local
// multicast addresses are refused, as the Kubernetes API server does.
func EndpointIPProblem(a netip.Addr) string {
	a = a.Unmap()
	switch {
	case a.IsUnspecified():
		return "the unspecified address"
	case a.IsLoopback():
		return "a loopback address"
	case a.IsLinkLocalUnicast():
		return "a link-local address"
	case a.IsLinkLocalMulticast():
		return "a link-local multicast address"
	}
	return ""
}

func checkEndpointIP(r *reporter, p diag.Path, ip string, family string) {
	a, err := netip.ParseAddr(ip)
	if err != nil || a.Zone() != "" {
		r.errorf(p, "%q is not an IP address", ip)
		return
	}
	if msg := EndpointIPProblem(a); msg != "" {
		r.errorf(p, "%s is %s and cannot be an endpoint", ip, msg)
		return
	}
	if family != "" && Family(a) != family {
		r.errorf(p, "%s is not an %s address, as the slice's addressType says", ip, family)
	}
}

func checkEndpoints(e *Endpoints, r *reporter) {
	for i, s := range e.Subsets {
		ps := diag.Path{"subsets", i}
		if len(s.Addresses) == 0 && len(s.NotReadyAddresses) == 0 {
			// As the API server (Required): a subset without addresses.
			r.errorf(ps, "needs addresses or notReadyAddresses (at least one address)")
		}
		for j, a := range s.Addresses {
			checkEndpointIP(r, ps.Key("addresses").Index(j).Key("ip"), a.IP, "")
		}
		for j, a := range s.NotReadyAddresses {
			checkEndpointIP(r, ps.Key("notReadyAddresses").Index(j).Key("ip"), a.IP, "")
		}
		checkEndpointPorts(s.Ports, ps.Key("ports"), true, r)
	}
}

// checkAppProtocol checks a port's appProtocol: a qualified name, as the
// API server checks it ("" is none).
func checkAppProtocol(s string, p diag.Path, r *reporter) {
	if s == "" {
		return
	}
	if why := QualifiedNameProblem(s); why != "" {
		r.errorf(p, "%q is not a valid appProtocol, a qualified name such as http or kubernetes.io/h2c (%s)", s, why)
	}
}

// checkEndpointPorts checks the port names of an Endpoints subset
// (requireNames: each is named when there are several, as the API server
// requires) or of an EndpointSlice, whose names are only unique: one port
// may be unnamed.
func checkEndpointPorts(ports []EndpointPort, base diag.Path, requireNames bool, r *reporter) {
	names := map[string]int{}
	for i, p := range ports {
		checkAppProtocol(p.AppProtocol, base.Index(i).Key("appProtocol"), r)
		j, dup := names[p.Name]
		switch {
		case requireNames && len(ports) > 1 && p.Name == "":
			r.errorf(base.Index(i).Key("name"), "is required when there is more than one port")
		case dup && p.Name != "":
			r.errorf(base.Index(i).Key("name"), "%q is already the name of ports[%d]", p.Name, j)
		case dup:
			r.errorf(base.Index(i).Key("name"), "ports[%d] is unnamed too; port names are unique in a slice, so at most one port may be unnamed", j)
		}
		if !dup {
			names[p.Name] = i
		}
	}
}

// MaxSliceEndpoints is the most endpoints one EndpointSlice may hold.
const MaxSliceEndpoints = 1000

func checkSlice(s *EndpointSlice, r *reporter) {
	if n := len(s.Endpoints); n > MaxSliceEndpoints {
		r.errorf(diag.Path{"endpoints"}, "has %d endpoints; a slice holds at most %d", n, MaxSliceEndpoints)
	}
	for i, ep := range s.Endpoints {
		pe := diag.Path{"endpoints", i}
		if len(ep.Addresses) == 0 {
			r.errorf(pe.Key("addresses"), "needs at least one address")
		}
		if len(ep.Addresses) > 100 {
			r.errorf(pe.Key("addresses"), "has %d addresses; at most 100 are allowed", len(ep.Addresses))
		}
		if ep.Hints != nil {
			checkHints(ep.Hints, pe.Key("hints"), r)
		}
		for j, a := range ep.Addresses {
			p := pe.Key("addresses").Index(j)
			if s.AddressType != "IPv4" && s.AddressType != "IPv6" && s.AddressType != "FQDN" {
				break // the schema reported the address type; the addresses cannot be judged
			}
			if s.AddressType == "FQDN" {
				if why := fqdnProblem(a); why != "" {
					r.errorf(p, "%q is not a valid DNS name (%s)", a, why)
				}
				continue
			}
			checkEndpointIP(r, p, a, s.AddressType)
		}
	}
	if n := len(s.Ports); n > maxSlicePorts {
		r.errorf(diag.Path{"ports"}, "has %d ports; a slice holds at most %d", n, maxSlicePorts)
		return
	}
	ports := make([]EndpointPort, len(s.Ports))
	copy(ports, s.Ports)
	checkEndpointPorts(ports, diag.Path{"ports"}, false, r)
}

// maxSlicePorts and maxHints are the API server's limits on an
// EndpointSlice's ports and on each list of an endpoint's hints.
const (
	maxSlicePorts = 20000
	maxHints      = 8
)

// checkHints checks an endpoint's topology hints as the API server does: at
// most maxHints zones and nodes, each named once; zone names are label
// values (the schema checks node names).
func checkHints(h *EndpointHints, base diag.Path, r *reporter) {
	zones := make([]string, len(h.ForZones))
	for j, z := range h.ForZones {
		zones[j] = z.Name
		if why := LabelValueProblem(z.Name); why != "" {
			r.errorf(base.Key("forZones").Index(j).Key("name"), "%q is not a valid zone name (a label value: %s)", z.Name, why)
		}
	}
	nodes := make([]string, len(h.ForNodes))
	for j, n := range h.ForNodes {
		nodes[j] = n.Name
	}
	checkHintList(zones, base, "forZones", "zones", r)
	checkHintList(nodes, base, "forNodes", "nodes", r)
}

// checkHintList reports a hint list (base.key, naming what) longer than
// maxHints, or a name it holds twice.
func checkHintList(names []string, base diag.Path, key, what string, r *reporter) {
	p := base.Key(key)
	if len(names) > maxHints {
		r.errorf(p, "has %d %s; at most %d are allowed", len(names), what, maxHints)
		return
	}
	seen := map[string]int{}
	for j, n := range names {
		if i, dup := seen[n]; dup {
			r.errorf(p.Index(j).Key("name"), "%q is already the name of %s[%d]", n, key, i)
			continue
		}
		seen[n] = j
	}
}

// fqdnProblem says why s is not a fully qualified domain name as the API
// server checks an FQDN slice's addresses (IsFullyQualifiedDomainName): a
// DNS-1123 subdomain of at least two labels of at most 63 characters, with
// one trailing dot allowed. "" when it is one.
func fqdnProblem(s string) string {
	name := strings.TrimSuffix(s, ".")
	if !IsDNS1123Subdomain(name) {
		return "a DNS-1123 subdomain, such as db.example.com"
	}
	labels := strings.Split(name, ".")
	if len(labels) < 2 {
		return "at least two labels separated by dots, such as db.example.com"
	}
	for _, l := range labels {
		if len(l) > 63 {
			return fmt.Sprintf("the label %q is %d characters long; at most 63 are allowed", l, len(l))
		}
	}
	return ""
}

// ---- Pod and Node ----

func checkPod(p *Pod, r *reporter) {
	ips := p.Status.PodIPs
	if p.Status.PodIP != "" {
		checkEndpointIP(r, diag.Path{"status", "podIP"}, p.Status.PodIP, "")
		if len(ips) > 0 && ips[0].IP != p.Status.PodIP {
			r.errorf(diag.Path{"status", "podIPs", 0, "ip"}, "%q differs from status.podIP %q; they must be equal", ips[0].IP, p.Status.PodIP)
		}
	}
	if len(ips) > 2 {
		r.errorf(diag.Path{"status", "podIPs"}, "has %d addresses; at most two are allowed, one per family", len(ips))
	}
	fams := map[string]int{}
	for i, ip := range ips {
		pp := diag.Path{"status", "podIPs", i, "ip"}
		checkEndpointIP(r, pp, ip.IP, "")
		if a, err := netip.ParseAddr(ip.IP); err == nil {
			if j, ok := fams[Family(a)]; ok {
				r.errorf(pp, "%s is a second %s address (podIPs[%d] is one)", ip.IP, Family(a), j)
			}
			fams[Family(a)] = i
		}
	}
	// A port name is unique within its container (an error, as the API
	// server says); across containers Kubernetes only warns, and a named
	// targetPort takes the first port of that name in container order.
	// Native sidecars count after the containers, in the order Kubernetes
	// resolves a named targetPort in.
	names := map[string]string{} // port name → the first port of that name in the pod
	p.Spec.ServingContainers(func(c *Container, init bool, i int) bool {
		list := containerList(init)
		own := map[string]int{}
		for j, cp := range c.Ports {
			if cp.Name == "" {
				continue
			}
			path := diag.Path{"spec", list, i, "ports", j, "name"}
			if k, ok := own[cp.Name]; ok {
				r.errorf(path, "%q is already the name of ports[%d] of this container; port names are unique in a container", cp.Name, k)
				continue
			}
			own[cp.Name] = j
			if first, ok := names[cp.Name]; ok {
				r.warnf(path, "%q is also the name of %s; a Service's targetPort %q takes the first port of that name (with the Service port's protocol) in container order, as in Kubernetes", cp.Name, first, cp.Name)
				continue
			}
			names[cp.Name] = fmt.Sprintf("%s[%d].ports[%d]", list, i, j)
		}
		return true
	})
	// The readiness probes of the containers and native sidecars: a named
	// port is one of the probed container's own, as the kubelet resolves
	// it.
	var exec diag.Path
	p.Spec.ServingContainers(func(c *Container, init bool, i int) bool {
		if c.ReadinessProbe == nil {
			return true
		}
		list := containerList(init)
		pp := diag.Path{"spec", list, i, "readinessProbe"}
		ports := map[string]bool{}
		for _, cp := range c.Ports {
			if cp.Name != "" {
				ports[cp.Name] = true
			}
		}
		for _, pr := range probeProblems(c.ReadinessProbe, ports) {
			if pr.warn {
				r.warnf(append(slices.Clone(pp), pr.path...), "%s", pr.msg)
				continue
			}
			r.errorf(append(slices.Clone(pp), pr.path...), "%s", pr.msg)
		}
		if c.ReadinessProbe.Exec != nil && exec == nil {
			exec = append(pp, "exec")
		}
		return true
	})
	if exec != nil {
		// Once per pod: the pod's readiness is what the tree says.
		r.warnf(exec,
			"an exec readiness probe runs inside the container; netspec cannot run it from the node, so it is not probed (the pod's Ready condition in the tree stands)")
	}
}

// probeProblem is one finding of probeProblems, at a path inside the probe.
type probeProblem struct {
	path diag.Path
	msg  string
	warn bool // the API server accepts it; the kubelet fails the probe
}

// probeProblems checks the values of a readiness probe's fields, as the
// API server and the kubelet would take them: one action, ports in range
// (a name that is no port of the container, whose named ports are ports,
// is a warning: the API server checks only its format, and the kubelet
// fails the probe; nil ports: no Pod, so no name can resolve), scheme
// HTTP or HTTPS, timing fields not negative (zero takes the kubelet's
// default).
func probeProblems(p *Probe, ports map[string]bool) []probeProblem {
	var out []probeProblem
	add := func(msg string, path ...any) {
		out = append(out, probeProblem{path: diag.Path(path), msg: msg})
	}
	actions := 0
	for _, set := range []bool{p.Exec != nil, p.HTTPGet != nil, p.TCPSocket != nil, p.GRPC != nil} {
		if set {
			actions++
		}
	}
	switch {
	case actions == 0:
		add("needs an action: httpGet, tcpSocket, grpc or exec")
	case actions > 1:
		add(fmt.Sprintf("has %d actions; exactly one of httpGet, tcpSocket, grpc and exec is allowed", actions))
	}
	port := func(v IntOrString, path ...any) {
		switch {
		case !v.IsName():
			if v.Int < 1 || v.Int > 65535 {
				add(fmt.Sprintf("%d is out of range 1..65535", v.Int), path...)
			}
		case !ianaSvcName.MatchString(v.Str) || !strings.ContainsAny(v.Str, "abcdefghijklmnopqrstuvwxyz") || len(v.Str) > 15:
			add(fmt.Sprintf("%q is not a port number 1..65535 nor a port name", v.Str), path...)
		case ports == nil:
			add(fmt.Sprintf("%q is a port name, which only a Pod's container can resolve; give the port number", v.Str), path...)
		case !ports[v.Str]:
			out = append(out, probeProblem{path: diag.Path(path), warn: true,
				msg: fmt.Sprintf("%q names no port of this container: the kubelet fails this probe at every period (port %s not found), so the container never becomes ready; netspec watch fails it too, and takes the endpoint out on its node after failureThreshold failures", v.Str, v.Str)})
		}
	}
	if h := p.HTTPGet; h != nil {
		port(h.Port, "httpGet", "port")
		if h.Scheme != "" && h.Scheme != "HTTP" && h.Scheme != "HTTPS" {
			add(fmt.Sprintf("%q is not a scheme (HTTP or HTTPS)", h.Scheme), "httpGet", "scheme")
		}
		for i, hd := range h.HTTPHeaders {
			if hd.Name == "" || strings.ContainsAny(hd.Name, " \t:\r\n") {
				add(fmt.Sprintf("%q is not an HTTP header name", hd.Name), "httpGet", "httpHeaders", i, "name")
			}
		}
	}
	if t := p.TCPSocket; t != nil {
		port(t.Port, "tcpSocket", "port")
	}
	if g := p.GRPC; g != nil {
		port(IntOrString{Int: g.Port}, "grpc", "port")
	}
	for _, f := range []struct {
		name string
		v    int32
	}{
		{"initialDelaySeconds", p.InitialDelaySeconds}, {"timeoutSeconds", p.TimeoutSeconds},
		{"periodSeconds", p.PeriodSeconds}, {"successThreshold", p.SuccessThreshold},
		{"failureThreshold", p.FailureThreshold},
	} {
		if f.v < 0 {
			add(fmt.Sprintf("%d is negative; give at least 1 (or leave it out for the kubelet's default)", f.v), f.name)
		}
	}
	return out
}

var ianaSvcName = regexp.MustCompile(`^[a-z0-9]([a-z0-9]|-[a-z0-9])*$`)

// ParseProbeAnnotation reads the annotation netspec.dev/readiness-probe: a
// Probe's fields as JSON or YAML, with a network action (an endpoint
// without a Pod has no container to exec in nor named ports). The error
// names the first problem.
func ParseProbeAnnotation(s string) (*Probe, error) {
	var raw any
	if err := yaml.Unmarshal([]byte(s), &raw); err != nil {
		return nil, fmt.Errorf("is neither JSON nor YAML: %s", yamlErrMsg(err))
	}
	if _, ok := raw.(map[string]any); !ok {
		return nil, fmt.Errorf("must be a probe's fields (a mapping such as {\"tcpSocket\": {\"port\": 8080}}), not %s", typeName(raw))
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, fmt.Errorf("cannot be read: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	p := new(Probe)
	if err := dec.Decode(p); err != nil {
		msg := strings.TrimPrefix(err.Error(), "json: ")
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			msg = fmt.Sprintf("%s: want %s, not %s", te.Field, te.Type, te.Value)
		}
		return nil, fmt.Errorf("is no probe: %s", msg)
	}
	if p.Exec != nil {
		return nil, errors.New("exec: cannot run from the node; use httpGet, tcpSocket or grpc")
	}
	if pr := probeProblems(p, nil); len(pr) > 0 {
		where := pr[0].path.String()
		if where != "" {
			where += ": "
		}
		return nil, fmt.Errorf("%s%s", where, pr[0].msg)
	}
	return p, nil
}

func checkNode(n *Node, r *reporter) {
	for i, a := range n.Status.Addresses {
		if a.Type != "InternalIP" && a.Type != "ExternalIP" {
			continue
		}
		if ip, err := netip.ParseAddr(a.Address); err != nil || ip.Zone() != "" {
			r.errorf(diag.Path{"status", "addresses", i, "address"}, "%q is not an IP address, as type %s needs", a.Address, a.Type)
		}
	}
}

// ---- Cluster ----

func checkCluster(c *Cluster, r *reporter) {
	sp := &c.Spec
	ps := diag.Path{"spec", "serviceCIDRs"}
	if len(sp.ServiceCIDRs) == 0 {
		r.errorf(ps, "needs at least one CIDR")
	}
	fams := map[string]int{}
	for i, s := range sp.ServiceCIDRs {
		pf, ok := checkCIDR(r, ps.Index(i), s)
		if !ok {
			continue
		}
		f := Family(pf.Addr())
		if j, dup := fams[f]; dup {
			r.errorf(ps.Index(i), "%s is a second %s CIDR (serviceCIDRs[%d] is one); at most one per family", s, f, j)
		}
		fams[f] = i
		bits := pf.Addr().BitLen() - pf.Bits()
		if bits < 2 {
			r.errorf(ps.Index(i), "%s is too small to allocate service IPs from", s)
		}
	}
	if _, _, err := ParsePortRange(sp.NodePortRange); err != nil {
		r.errorf(diag.Path{"spec", "nodePortRange"}, "%q %v", sp.NodePortRange, err)
	}
	for i, s := range sp.ExternalIPCIDRs {
		checkCIDR(r, diag.Path{"spec", "externalIPCIDRs", i}, s)
	}
	for i, s := range sp.LoadBalancerIPCIDRs {
		checkCIDR(r, diag.Path{"spec", "loadBalancerIPCIDRs", i}, s)
	}
	for i, s := range sp.PodCIDRs {
		checkCIDR(r, diag.Path{"spec", "podCIDRs", i}, s)
	}
	for i, s := range sp.NodePortAddresses {
		checkCIDR(r, diag.Path{"spec", "nodePortAddresses", i}, s)
	}
	if s := sp.DNSAddress; s != "" {
		if ip, err := netip.ParseAddr(s); err != nil || ip.Zone() != "" || ip.IsUnspecified() || ip.IsMulticast() {
			r.errorf(diag.Path{"spec", "dnsAddress"}, "%q is not a unicast IP address (such as 169.254.20.10)", s)
		}
	}
}

func checkCIDR(r *reporter, p diag.Path, s string) (netip.Prefix, bool) {
	pf, err := netip.ParsePrefix(s)
	if err != nil {
		r.errorf(p, "%q is not a CIDR (such as 10.96.0.0/12)", s)
		return pf, false
	}
	if pf.Masked() != pf {
		r.errorf(p, "%s has host bits set; write %s", s, pf.Masked())
		return pf, false
	}
	return pf, true
}

// ParsePortRange parses a node port range such as 30000-32767.
func ParsePortRange(s string) (from, to int, err error) {
	if _, e := fmt.Sscanf(s, "%d-%d", &from, &to); e != nil || fmt.Sprintf("%d-%d", from, to) != s {
		return 0, 0, fmt.Errorf("is not a port range (FROM-TO, such as 30000-32767)")
	}
	if from < 1 || to > 65535 || from > to {
		return 0, 0, fmt.Errorf("is not a port range within 1-65535 with FROM <= TO")
	}
	return from, to, nil
}

// ---- names and labels ----

var (
	qualifiedNamePart = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)
	labelValue        = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)
)

// QualifiedNameProblem says why s is not a qualified name, as the API
// server checks label and annotation keys, loadBalancerClass and
// appProtocol: an optional prefix, a DNS-1123 subdomain, and "/", then a
// name of at most 63 letters, digits, '-', '_' and '.', starting and
// ending with a letter or digit. "" when it is one.
func QualifiedNameProblem(s string) string {
	name := s
	if prefix, rest, ok := strings.Cut(s, "/"); ok {
		if strings.Contains(rest, "/") {
			return "at most one '/', between a DNS subdomain prefix and the name (such as example.com/MyName)"
		}
		switch {
		case prefix == "":
			return "the prefix before '/' is empty"
		case !IsDNS1123Subdomain(prefix):
			return fmt.Sprintf("the prefix %q is not a DNS-1123 subdomain: lowercase letters, digits, '-' and '.'", prefix)
		}
		name = rest
	}
	switch {
	case name == "":
		return "the name is empty"
	case len(name) > 63:
		return fmt.Sprintf("the name is %d characters long; at most 63 are allowed", len(name))
	case !qualifiedNamePart.MatchString(name):
		return "the name takes letters, digits, '-', '_' and '.', and starts and ends with a letter or digit"
	}
	return ""
}

// containerList names the list of a Pod's spec a container is in: a
// native sidecar's is initContainers.
func containerList(init bool) string {
	if init {
		return "initContainers"
	}
	return "containers"
}

// LabelValueProblem says why s is not a label value, as the API server
// checks labels and selectors: at most 63 letters, digits, '-', '_' and
// '.', starting and ending with a letter or digit, or empty. "" when it
// is one.
func LabelValueProblem(s string) string {
	switch {
	case len(s) > 63:
		return fmt.Sprintf("it is %d characters long; at most 63 are allowed", len(s))
	case !labelValue.MatchString(s):
		return "it takes letters, digits, '-', '_' and '.', and starts and ends with a letter or digit"
	}
	return ""
}
