// Package plan defines the Plan: what one node must do for a tree of
// service specs. The compiler makes it, the renderers turn it into text and
// the applier installs it; it is the only thing that crosses from compile
// to apply. A Plan is data: sorted, comparable, with no kernel detail that
// a renderer could derive. A Plan is not changed once compiled: successive
// plans of a daemon share the memory of what did not change.
package plan

import "net/netip"

// FormatVersion is the version of plan.json; it changes when a field's
// meaning changes.
const FormatVersion = 1

// Plan is the compiled tree for one node.
type Plan struct {
	FormatVersion int
	Node          Node
	Cluster       Cluster
	// Services in namespace/name order, ExternalName Services included.
	Services []Service
	// DNS holds the records of the cluster domain and the reverse zones.
	DNS DNS
	// Env holds the service environment variables, one set per namespace.
	Env []EnvFile
}

// Node is the node a Plan is for.
type Node struct {
	Name string
	Zone string // topology.kubernetes.io/zone label, "" when absent
	// IPs are the node's InternalIP and ExternalIP addresses, sorted: the
	// addresses node ports are reached on, unless Cluster.NodePortAddresses
	// has prefixes of their family (Plan.NodePortAddress).
	IPs []netip.Addr
}

// Cluster holds the cluster-wide settings the data plane needs.
type Cluster struct {
	Domain       string         // clusterDomain, without trailing dot
	ServiceCIDRs []netip.Prefix // one per family
	// PodCIDRs: traffic to a cluster IP from outside these is masqueraded;
	// empty means all of it is (kube-proxy's masquerade-all).
	PodCIDRs []netip.Prefix
	// NodePortAddresses are the Cluster's nodePortAddresses: node ports
	// answer on the node's local addresses inside them. A family without
	// a prefix here answers on the node's IPs (Node.IPs) of that family
	// only.
	NodePortAddresses []netip.Prefix
	DNSTTL            uint32
	// DNSAddress is netspec's DNS server address (the Cluster's
	// dnsAddress), the nameserver of the pods' resolv.conf; invalid (the
	// zero Addr) when the Cluster gives none.
	DNSAddress netip.Addr
}

// Service is one Service with everything its ports share.
type Service struct {
	Namespace string
	Name      string
	Type      string // ClusterIP, NodePort, LoadBalancer, ExternalName
	// ClusterIPs in the Service's family order; empty for headless and
	// ExternalName Services.
	ClusterIPs   []netip.Addr
	Headless     bool
	ExternalName string       // for type ExternalName, without trailing dot
	ExternalIPs  []netip.Addr // sorted
	// LoadBalancerIPs are the status ingress IPs the nodes capture (not
	// spec.loadBalancerIP, nor ipMode Proxy ones, as kube-proxy), sorted.
	LoadBalancerIPs []netip.Addr
	// SourceRanges limit who may reach the LoadBalancer IPs; empty allows all.
	SourceRanges []netip.Prefix
	// AffinitySeconds > 0 keeps a client on one endpoint for that long
	// (sessionAffinity ClientIP).
	AffinitySeconds int32
	// InternalLocal and ExternalLocal are the traffic policies: Local means
	// only endpoints on this node serve, and none means drop.
	InternalLocal bool
	ExternalLocal bool
	// HealthCheckNodePort is the TCP port of a LoadBalancer Service with
	// ExternalLocal on which every node answers the load balancer's health
	// checks (200 with local ready endpoints, 503 without); 0 for others,
	// and for a Service another proxy serves (ProxyName).
	HealthCheckNodePort uint16
	// IPVSScheduler is the scheduler of the Service's IPVS virtual servers
	// (annotation netspec.dev/ipvs-scheduler); "" for the node's default.
	IPVSScheduler string
	// ProxyName is the Service's label service.kubernetes.io/service-proxy-name:
	// another proxy serves the Service, so the node's data plane leaves it
	// out, as kube-proxy does (its cluster IPs are then no frontend, and
	// dropped as unallocated ones are); its DNS records and env variables
	// stay, as CoreDNS and the kubelet do not look at the label. "" for
	// Services netspec serves.
	ProxyName string
	Ports     []Port // in spec order
}

// Key is namespace/name.
func (s *Service) Key() string { return s.Namespace + "/" + s.Name }

// HasCNAME tells whether an ExternalName Service's DNS name is a CNAME to
// its ExternalName: not when that reads as an IPv4 address, which
// Kubernetes takes as a name of digits and CoreDNS publishes no record
// for.
func (s *Service) HasCNAME() bool {
	if s.Type != "ExternalName" {
		return false
	}
	a, err := netip.ParseAddr(s.ExternalName)
	return err != nil || !a.Is4()
}

// Proxied tells whether the node's data plane serves s: it has frontends
// (it is neither headless nor an ExternalName Service) and no other proxy
// serves it (ProxyName).
func (s *Service) Proxied() bool {
	return !s.Headless && s.Type != "ExternalName" && s.ProxyName == ""
}

// TrafficPolicy names a traffic policy as a Service's spec does: Local
// for InternalLocal or ExternalLocal set, else Cluster.
func TrafficPolicy(local bool) string {
	if local {
		return "Local"
	}
	return "Cluster"
}

// Port is one port of a Service with its endpoints as seen from this node.
// A headless Service without ports has one Port without name, protocol or
// port number (Port 0), whose endpoints (also at port 0) are those its
// DNS records name, as CoreDNS's sentinel port; it has no frontend.
type Port struct {
	Name     string // "" for the only, unnamed port
	Protocol string // TCP, UDP, SCTP
	Port     uint16
	NodePort uint16 // 0 when none
	// Endpoints are every endpoint of this port, sorted by IP and port,
	// with their state. The sets below index into it.
	Endpoints []Endpoint
	// Cluster lists the endpoints internal traffic (to the cluster IPs)
	// goes to on this node, after internalTrafficPolicy, topology and the
	// terminating fallback.
	Cluster []int
	// External lists the endpoints external traffic (node ports, external
	// and LoadBalancer IPs) goes to on this node, after
	// externalTrafficPolicy.
	External []int
	// ShortCircuit lists, when it differs from Cluster, the endpoints
	// that traffic from pods and from the node itself to the external
	// frontends goes to under externalTrafficPolicy Local: kube-proxy's
	// short-circuit, subject to neither traffic policy (topology and the
	// terminating fallback apply). It differs only when
	// internalTrafficPolicy is Local too; nil means Cluster.
	ShortCircuit []int
}

// ShortCircuitSet is the set kube-proxy's short-circuit picks from:
// ShortCircuit, or Cluster when ShortCircuit is nil.
func (p *Port) ShortCircuitSet() []int {
	if p.ShortCircuit != nil {
		return p.ShortCircuit
	}
	return p.Cluster
}

// Endpoint is one backend of a port. A plan holds one per port and
// address, so the fields few endpoints have are behind one pointer
// (Extra).
type Endpoint struct {
	IP          netip.Addr
	Port        uint16
	Ready       bool
	Serving     bool
	Terminating bool
	NodeName    string
	Zone        string
	// Extra holds the DNS hostname and the topology hints; nil when the
	// endpoint has none of them (NewEndpointExtra).
	Extra *EndpointExtra
	// Pod is namespace/name of the pod behind it: the pod a selector
	// picked, or the Pod of the tree that the targetRef of an Endpoints
	// address or EndpointSlice endpoint names; "" for other endpoints.
	Pod string
	// Probes are the readiness probes the node agent runs against IP: one
	// per container of the Pod (when Pod is set) that has a
	// readinessProbe, or the Service's netspec.dev/readiness-probe for an
	// endpoint without a Pod; nil when none. The endpoint is ready on a
	// node only while all of them pass there.
	Probes []Probe
}

// EndpointExtra are the fields of an Endpoint that few endpoints have.
type EndpointExtra struct {
	Hostname  string   // DNS hostname (pod hostname+subdomain, or slice hostname)
	ZoneHints []string // hints.forZones, sorted
	NodeHints []string // hints.forNodes, sorted
}

// NewEndpointExtra returns an Endpoint's Extra: nil when every field is
// empty, as an Endpoint's Extra is then.
func NewEndpointExtra(hostname string, zoneHints, nodeHints []string) *EndpointExtra {
	if hostname == "" && len(zoneHints) == 0 && len(nodeHints) == 0 {
		return nil
	}
	return &EndpointExtra{Hostname: hostname, ZoneHints: zoneHints, NodeHints: nodeHints}
}

// AddrPort is the endpoint's address and port.
func (e Endpoint) AddrPort() netip.AddrPort { return netip.AddrPortFrom(e.IP, e.Port) }

// Hostname is Extra's Hostname, "" without Extra.
func (e Endpoint) Hostname() string {
	if e.Extra == nil {
		return ""
	}
	return e.Extra.Hostname
}

// ZoneHints are Extra's ZoneHints, nil without Extra.
func (e Endpoint) ZoneHints() []string {
	if e.Extra == nil {
		return nil
	}
	return e.Extra.ZoneHints
}

// NodeHints are Extra's NodeHints, nil without Extra.
func (e Endpoint) NodeHints() []string {
	if e.Extra == nil {
		return nil
	}
	return e.Extra.NodeHints
}

// DNS holds the records netspec serves and writes as zone files.
type DNS struct {
	// Zones in name order: the cluster domain and the reverse zones that
	// hold PTR records (in-addr.arpa and ip6.arpa zones of the service and
	// pod CIDRs).
	Zones []Zone
}

// Zone is one authoritative zone.
type Zone struct {
	Name    string   // fully qualified, with trailing dot
	Records []Record // sorted by name, type, data
}

// Record is one resource record.
type Record struct {
	Name string // fully qualified, with trailing dot, lower case
	Type string // A, AAAA, SRV, PTR, CNAME, TXT, SOA, NS
	TTL  uint32
	// Data is the record's RDATA in master-file form, e.g. "10.96.0.10",
	// "0 50 80 web.shop.svc.cluster.local.", "\"1.1.0\"".
	Data string
}

// EnvFile is the service environment of one namespace, as the kubelet
// gives it to a pod's containers.
type EnvFile struct {
	Namespace string
	Vars      []EnvVar // sorted by name
}

// EnvVar is one KEY=value.
type EnvVar struct {
	Name, Value string
}

// Counts returns the plan's services and endpoints, an endpoint counted
// once per service and address (a pod serving two ports is one), as the
// apply and watch summaries report them.
func (p *Plan) Counts() (services, endpoints int) {
	services = len(p.Services)
	for i := range p.Services {
		addrs := map[netip.Addr]bool{}
		for j := range p.Services[i].Ports {
			for _, ep := range p.Services[i].Ports[j].Endpoints {
				addrs[ep.IP] = true
			}
		}
		endpoints += len(addrs)
	}
	return services, endpoints
}
