package schema

import (
	"encoding/json"
	"net/netip"
	"strconv"
)

// Kind names of the objects netspec reads.
const (
	KindService       = "Service"
	KindEndpoints     = "Endpoints"
	KindEndpointSlice = "EndpointSlice"
	KindPod           = "Pod"
	KindNode          = "Node"
	KindCluster       = "Cluster"
)

// Source says where an object was written, so that a position can be found
// again for any of its fields, also when the object came from the cache.
type Source struct {
	File string // slash path relative to the tree root; for CUE, the file that writes the object
	Doc  int    // YAML document index in the file (0-based)
	Item int    // index in a kind: List, -1 otherwise
	CUE  string // for CUE packages: the CUE path of the object, such as services.web
}

// ObjectMeta is the part of Kubernetes' metadata that netspec uses.
type ObjectMeta struct {
	Name              string    `json:"name"`
	Namespace         string    `json:"namespace,omitempty"`
	Labels            StringMap `json:"labels,omitzero"`
	Annotations       StringMap `json:"annotations,omitzero"`
	DeletionTimestamp string    `json:"deletionTimestamp,omitempty"`
}

// Object is one validated object with its kind-specific value set; exactly one
// of the pointers is non-nil.
type Object struct {
	Src           Source
	APIVersion    string
	Kind          string
	Service       *Service       `json:",omitempty"`
	Endpoints     *Endpoints     `json:",omitempty"`
	EndpointSlice *EndpointSlice `json:",omitempty"`
	Pod           *Pod           `json:",omitempty"`
	Node          *Node          `json:",omitempty"`
	Cluster       *Cluster       `json:",omitempty"`
}

// Meta returns the object's metadata.
func (o *Object) Meta() *ObjectMeta {
	switch {
	case o.Service != nil:
		return &o.Service.Metadata
	case o.Endpoints != nil:
		return &o.Endpoints.Metadata
	case o.EndpointSlice != nil:
		return &o.EndpointSlice.Metadata
	case o.Pod != nil:
		return &o.Pod.Metadata
	case o.Node != nil:
		return &o.Node.Metadata
	case o.Cluster != nil:
		return &o.Cluster.Metadata
	}
	return &ObjectMeta{}
}

// Namespaced reports whether objects of the kind live in a namespace.
func Namespaced(kind string) bool {
	return kind != KindNode && kind != KindCluster
}

// IntOrString is a targetPort: a port number or the name of a container port.
type IntOrString struct {
	Int int32
	Str string // set when the value is a name
}

// IsName reports whether the value names a container port.
func (v IntOrString) IsName() bool { return v.Str != "" }

func (v IntOrString) String() string {
	if v.IsName() {
		return v.Str
	}
	return strconv.Itoa(int(v.Int))
}

// MarshalJSON writes a number or a string, as Kubernetes does.
func (v IntOrString) MarshalJSON() ([]byte, error) {
	if v.IsName() {
		return json.Marshal(v.Str)
	}
	return json.Marshal(v.Int)
}

// UnmarshalJSON reads a number or a string.
func (v *IntOrString) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &v.Str)
	}
	return json.Unmarshal(b, &v.Int)
}

// Service is a Kubernetes v1 Service.
type Service struct {
	Metadata ObjectMeta    `json:"metadata"`
	Spec     ServiceSpec   `json:"spec"`
	Status   ServiceStatus `json:"status,omitempty"`
}

// ServiceSpec holds the fields of a Service spec that netspec implements.
type ServiceSpec struct {
	Type                          string                 `json:"type"`
	Ports                         []ServicePort          `json:"ports,omitempty"`
	Selector                      StringMap              `json:"selector,omitzero"`
	ClusterIP                     string                 `json:"clusterIP,omitempty"`
	ClusterIPs                    []string               `json:"clusterIPs,omitempty"`
	IPFamilies                    []string               `json:"ipFamilies,omitempty"`
	IPFamilyPolicy                string                 `json:"ipFamilyPolicy,omitempty"`
	ExternalIPs                   []string               `json:"externalIPs,omitempty"`
	ExternalName                  string                 `json:"externalName,omitempty"`
	SessionAffinity               string                 `json:"sessionAffinity"`
	SessionAffinityConfig         *SessionAffinityConfig `json:"sessionAffinityConfig,omitempty"`
	ExternalTrafficPolicy         string                 `json:"externalTrafficPolicy,omitempty"`
	InternalTrafficPolicy         string                 `json:"internalTrafficPolicy,omitempty"`
	LoadBalancerIP                string                 `json:"loadBalancerIP,omitempty"`
	LoadBalancerSourceRanges      []string               `json:"loadBalancerSourceRanges,omitempty"`
	PublishNotReadyAddresses      bool                   `json:"publishNotReadyAddresses,omitempty"`
	TrafficDistribution           string                 `json:"trafficDistribution,omitempty"`
	AllocateLoadBalancerNodePorts *bool                  `json:"allocateLoadBalancerNodePorts,omitempty"`
	// LoadBalancerClass names the load balancer's implementation; netspec
	// only checks it (a qualified name, LoadBalancer Services only).
	LoadBalancerClass   *string `json:"loadBalancerClass,omitempty"`
	HealthCheckNodePort int32   `json:"healthCheckNodePort,omitempty"`
}

// ServicePort is one port of a Service.
type ServicePort struct {
	Name        string      `json:"name,omitempty"`
	Protocol    string      `json:"protocol"`
	Port        int32       `json:"port"`
	TargetPort  IntOrString `json:"targetPort"`
	NodePort    int32       `json:"nodePort,omitempty"`
	AppProtocol string      `json:"appProtocol,omitempty"`
}

// SessionAffinityConfig holds the ClientIP affinity timeout.
type SessionAffinityConfig struct {
	ClientIP *ClientIPConfig `json:"clientIP,omitempty"`
}

// ClientIPConfig holds the affinity timeout in seconds.
type ClientIPConfig struct {
	TimeoutSeconds int32 `json:"timeoutSeconds"`
}

// ServiceStatus carries the load balancer ingress addresses.
type ServiceStatus struct {
	LoadBalancer LoadBalancerStatus `json:"loadBalancer,omitempty"`
}

// LoadBalancerStatus lists the load balancer's ingress points.
type LoadBalancerStatus struct {
	Ingress []LoadBalancerIngress `json:"ingress,omitempty"`
}

// LoadBalancerIngress is one ingress point; netspec uses its IP.
type LoadBalancerIngress struct {
	IP       string `json:"ip,omitempty"`
	Hostname string `json:"hostname,omitempty"`
	IPMode   string `json:"ipMode,omitempty"`
}

// Endpoints is a Kubernetes v1 Endpoints object: manual endpoints of the
// selectorless Service of the same name.
type Endpoints struct {
	Metadata ObjectMeta       `json:"metadata"`
	Subsets  []EndpointSubset `json:"subsets,omitempty"`
}

// EndpointSubset is a group of addresses sharing ports.
type EndpointSubset struct {
	Addresses         []EndpointAddress `json:"addresses,omitempty"`
	NotReadyAddresses []EndpointAddress `json:"notReadyAddresses,omitempty"`
	Ports             []EndpointPort    `json:"ports,omitempty"`
}

// EndpointAddress is one backend address.
type EndpointAddress struct {
	IP        string           `json:"ip"`
	Hostname  string           `json:"hostname,omitempty"`
	NodeName  string           `json:"nodeName,omitempty"`
	TargetRef *ObjectReference `json:"targetRef,omitempty"`
}

// EndpointPort is a port of an Endpoints subset or an EndpointSlice.
type EndpointPort struct {
	Name        string `json:"name,omitempty"`
	Port        int32  `json:"port"`
	Protocol    string `json:"protocol"`
	AppProtocol string `json:"appProtocol,omitempty"`
}

// EndpointSlice is a discovery.k8s.io/v1 EndpointSlice, linked to its Service
// by the label kubernetes.io/service-name.
type EndpointSlice struct {
	Metadata    ObjectMeta      `json:"metadata"`
	AddressType string          `json:"addressType"`
	Endpoints   []SliceEndpoint `json:"endpoints"`
	Ports       []EndpointPort  `json:"ports,omitempty"`
}

// ServiceNameLabel links an EndpointSlice to its Service.
const ServiceNameLabel = "kubernetes.io/service-name"

// ServiceProxyNameLabel, on a Service, names the proxy that serves it
// instead of kube-proxy; kube-proxy, and netspec's data plane, leave such
// a Service alone.
const ServiceProxyNameLabel = "service.kubernetes.io/service-proxy-name"

// SliceEndpoint is one endpoint of an EndpointSlice.
type SliceEndpoint struct {
	Addresses  []string           `json:"addresses"`
	Conditions EndpointConditions `json:"conditions"`
	Hostname   string             `json:"hostname,omitempty"`
	NodeName   string             `json:"nodeName,omitempty"`
	Zone       string             `json:"zone,omitempty"`
	Hints      *EndpointHints     `json:"hints,omitempty"`
	TargetRef  *ObjectReference   `json:"targetRef,omitempty"`
}

// ObjectReference is a Kubernetes v1 ObjectReference: the targetRef of an
// endpoint, naming the object behind it. Kubernetes' endpoint
// controllers set {kind: Pod, namespace, name, uid} on the endpoints of
// pods; netspec takes the readiness probe of such an endpoint from that
// Pod when the tree has it (PodRef).
type ObjectReference struct {
	Kind            string `json:"kind,omitempty"`
	Namespace       string `json:"namespace,omitempty"`
	Name            string `json:"name,omitempty"`
	UID             string `json:"uid,omitempty"`
	APIVersion      string `json:"apiVersion,omitempty"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
	FieldPath       string `json:"fieldPath,omitempty"`
}

// PodRef returns the namespace and name of the Pod that r refers to: r
// has kind Pod (the API version, when written, is v1), a name, and a
// namespace or, when it has none, ns (the namespace of the endpoints
// object). ok is false for a nil r, another kind or no name. Nothing
// else is assumed: an empty kind refers to no Pod.
func (r *ObjectReference) PodRef(ns string) (namespace, name string, ok bool) {
	if r == nil || r.Kind != KindPod || r.Name == "" || r.APIVersion != "" && r.APIVersion != "v1" {
		return "", "", false
	}
	if r.Namespace != "" {
		ns = r.Namespace
	}
	return ns, r.Name, true
}

// EndpointConditions are the endpoint's states; defaults are applied, so
// they are never nil after validation.
type EndpointConditions struct {
	Ready       bool `json:"ready"`
	Serving     bool `json:"serving"`
	Terminating bool `json:"terminating"`
}

// EndpointHints carry topology hints.
type EndpointHints struct {
	ForZones []ForZone `json:"forZones,omitempty"`
	ForNodes []ForNode `json:"forNodes,omitempty"`
}

// ForZone names a zone that should use the endpoint.
type ForZone struct {
	Name string `json:"name"`
}

// ForNode names a node that should use the endpoint.
type ForNode struct {
	Name string `json:"name"`
}

// Pod is the part of a Kubernetes v1 Pod that selectors and DNS need.
type Pod struct {
	Metadata ObjectMeta `json:"metadata"`
	Spec     PodSpec    `json:"spec"`
	Status   PodStatus  `json:"status,omitempty"`
}

// PodSpec holds placement, DNS identity and container ports.
type PodSpec struct {
	NodeName string `json:"nodeName,omitempty"`
	// HostNetwork pods have their node's IP: they share it with the node
	// and with each other, and lie outside the node's podCIDRs.
	HostNetwork bool        `json:"hostNetwork,omitempty"`
	Hostname    string      `json:"hostname,omitempty"`
	Subdomain   string      `json:"subdomain,omitempty"`
	Containers  []Container `json:"containers,omitempty"`
	// InitContainers matter only when they are native sidecars
	// (Container.Sidecar): those run beside the containers, and their
	// ports and readiness probes count as the pod's.
	InitContainers []Container `json:"initContainers,omitempty"`
}

// Container lists the ports a container exposes, for named targetPorts.
type Container struct {
	Name  string          `json:"name"`
	Image string          `json:"image,omitempty"`
	Ports []ContainerPort `json:"ports,omitempty"`
	// RestartPolicy is "Always" for an init container that is a native
	// sidecar; "" otherwise.
	RestartPolicy string `json:"restartPolicy,omitempty"`
	// ReadinessProbe is the check a node agent runs against the pod's
	// IP; nil when the container has none.
	ReadinessProbe *Probe `json:"readinessProbe,omitempty"`
}

// Sidecar tells whether c, an init container, is a native sidecar
// (restartPolicy Always): it keeps running beside the containers.
func (c *Container) Sidecar() bool { return c.RestartPolicy == "Always" }

// ServingContainers calls f for each container whose ports serve the pod,
// in the order Kubernetes' FindPort looks up a named port: the
// containers, then the native sidecars among the init containers. init is
// true for a sidecar, i its index in its list. f returns false to stop.
func (s *PodSpec) ServingContainers(f func(c *Container, init bool, i int) bool) {
	for i := range s.Containers {
		if !f(&s.Containers[i], false, i) {
			return
		}
	}
	for i := range s.InitContainers {
		if c := &s.InitContainers[i]; c.Sidecar() && !f(c, true, i) {
			return
		}
	}
}

// ReadinessProbeAnnotation names, on a Service, the readiness probe of its
// endpoints that have no Pod (those of Endpoints objects and
// EndpointSlices whose targetRef names no Pod of the tree): a Probe's
// fields as JSON or YAML.
const ReadinessProbeAnnotation = "netspec.dev/readiness-probe"

// Probe is a Kubernetes v1 Probe: one action and its timing. Zero timing
// fields take the kubelet's defaults (DefaultProbe).
type Probe struct {
	Exec                *ExecAction      `json:"exec,omitempty"`
	HTTPGet             *HTTPGetAction   `json:"httpGet,omitempty"`
	TCPSocket           *TCPSocketAction `json:"tcpSocket,omitempty"`
	GRPC                *GRPCAction      `json:"grpc,omitempty"`
	InitialDelaySeconds int32            `json:"initialDelaySeconds,omitempty"`
	TimeoutSeconds      int32            `json:"timeoutSeconds,omitempty"`
	PeriodSeconds       int32            `json:"periodSeconds,omitempty"`
	SuccessThreshold    int32            `json:"successThreshold,omitempty"`
	FailureThreshold    int32            `json:"failureThreshold,omitempty"`
	// TerminationGracePeriodSeconds is accepted and ignored (liveness
	// probes use it).
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`
}

// The kubelet's defaults of a probe's timing fields (the API server fills
// them in for a zero value).
const (
	DefaultProbePeriod    = 10
	DefaultProbeTimeout   = 1
	DefaultProbeSuccess   = 1
	DefaultProbeFailure   = 3
	DefaultProbeInitDelay = 0
)

// ExecAction runs a command in the container: a node cannot, so netspec
// does not probe it.
type ExecAction struct {
	Command []string `json:"command,omitempty"`
}

// HTTPGetAction is a GET request; 200 to 399 is success.
type HTTPGetAction struct {
	Path        string       `json:"path,omitempty"`
	Port        IntOrString  `json:"port"`
	Host        string       `json:"host,omitempty"`
	Scheme      string       `json:"scheme,omitempty"` // HTTP (default) or HTTPS
	HTTPHeaders []HTTPHeader `json:"httpHeaders,omitempty"`
}

// HTTPHeader is one header of an httpGet probe.
type HTTPHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// TCPSocketAction opens a TCP connection.
type TCPSocketAction struct {
	Port IntOrString `json:"port"`
	Host string      `json:"host,omitempty"`
}

// GRPCAction asks grpc.health.v1 Health/Check.
type GRPCAction struct {
	Port    int32   `json:"port"`
	Service *string `json:"service,omitempty"`
}

// Port is the probe's port as written (a number or a container port
// name); the zero IntOrString when it has no network action.
func (p *Probe) Port() IntOrString {
	switch {
	case p.HTTPGet != nil:
		return p.HTTPGet.Port
	case p.TCPSocket != nil:
		return p.TCPSocket.Port
	case p.GRPC != nil:
		return IntOrString{Int: p.GRPC.Port}
	}
	return IntOrString{}
}

// ContainerPort is a port a container listens on.
type ContainerPort struct {
	Name          string `json:"name,omitempty"`
	ContainerPort int32  `json:"containerPort"`
	Protocol      string `json:"protocol"`
}

// PodStatus holds the pod's phase, IPs and conditions.
type PodStatus struct {
	// Phase is Pending, Running, Succeeded, Failed or Unknown; a pod that
	// has Succeeded or Failed is terminal (see Pod.Terminal).
	Phase      string         `json:"phase,omitempty"`
	PodIP      string         `json:"podIP,omitempty"`
	PodIPs     []PodIP        `json:"podIPs,omitempty"`
	Conditions []PodCondition `json:"conditions,omitempty"`
}

// PodIP is one of the pod's IPs.
type PodIP struct {
	IP string `json:"ip"`
}

// PodCondition is a pod condition such as Ready.
type PodCondition struct {
	Type   string `json:"type"`
	Status string `json:"status"`
}

// Ready reports whether the pod's Ready condition is True.
func (p *Pod) Ready() bool {
	for _, c := range p.Status.Conditions {
		if c.Type == "Ready" {
			return c.Status == "True"
		}
	}
	return false
}

// Terminal reports whether the pod has run to completion (phase Succeeded
// or Failed): Kubernetes never makes such a pod an endpoint, whatever its
// Ready condition still says.
func (p *Pod) Terminal() bool {
	return p.Status.Phase == "Succeeded" || p.Status.Phase == "Failed"
}

// ExecPodsByKey lists the pods of objs ("namespace/name") with an exec
// readinessProbe in a container that serves them (ServingContainers): a
// probe that runs inside the container, which a node cannot run.
func ExecPodsByKey(objs []*Object) map[string]bool {
	out := map[string]bool{}
	for _, o := range objs {
		pod := o.Pod
		if pod == nil {
			continue
		}
		pod.Spec.ServingContainers(func(c *Container, _ bool, _ int) bool {
			if c.ReadinessProbe != nil && c.ReadinessProbe.Exec != nil {
				out[pod.Metadata.Namespace+"/"+pod.Metadata.Name] = true
				return false
			}
			return true
		})
	}
	return out
}

// IPs returns the pod's IPs: status.podIPs, or status.podIP when podIPs is empty.
func (p *Pod) IPs() []string {
	if len(p.Status.PodIPs) > 0 {
		out := make([]string, len(p.Status.PodIPs))
		for i, ip := range p.Status.PodIPs {
			out[i] = ip.IP
		}
		return out
	}
	if p.Status.PodIP != "" {
		return []string{p.Status.PodIP}
	}
	return nil
}

// Node is the part of a Kubernetes v1 Node that node ports and traffic
// policies need.
type Node struct {
	Metadata ObjectMeta `json:"metadata"`
	Spec     NodeSpec   `json:"spec,omitempty"`
	Status   NodeStatus `json:"status,omitempty"`
}

// NodeSpec holds the node's pod CIDRs, which its pods' IPs come from.
type NodeSpec struct {
	PodCIDR  string   `json:"podCIDR,omitempty"`
	PodCIDRs []string `json:"podCIDRs,omitempty"`
}

// CIDRs returns the node's pod CIDRs that parse: spec.podCIDRs, or
// spec.podCIDR when podCIDRs is empty, as the API server keeps them.
func (s *NodeSpec) CIDRs() []netip.Prefix {
	list := s.PodCIDRs
	if len(list) == 0 && s.PodCIDR != "" {
		list = []string{s.PodCIDR}
	}
	var out []netip.Prefix
	for _, c := range list {
		if p, err := netip.ParsePrefix(c); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}

// NodeStatus lists the node's addresses.
type NodeStatus struct {
	Addresses []NodeAddress `json:"addresses,omitempty"`
}

// NodeAddress is one address of a node (InternalIP, ExternalIP, Hostname, ...).
type NodeAddress struct {
	Type    string `json:"type"`
	Address string `json:"address"`
}

// ZoneLabel is the well-known label that gives a node's zone.
const ZoneLabel = "topology.kubernetes.io/zone"

// Cluster is netspec's own cluster-wide configuration.
type Cluster struct {
	Metadata ObjectMeta  `json:"metadata"`
	Spec     ClusterSpec `json:"spec"`
}

// ClusterSpec holds the cluster-wide settings; DefaultClusterSpec gives the
// values used when a tree has no Cluster object.
type ClusterSpec struct {
	ServiceCIDRs    []string `json:"serviceCIDRs"`
	NodePortRange   string   `json:"nodePortRange"`
	ClusterDomain   string   `json:"clusterDomain"`
	DNSTTL          int32    `json:"dnsTTL"`
	ExternalIPCIDRs []string `json:"externalIPCIDRs"`
	// LoadBalancerIPCIDRs hold the LoadBalancer ingress IPs that may be
	// programmed; none by default.
	LoadBalancerIPCIDRs []string `json:"loadBalancerIPCIDRs"`
	PodCIDRs            []string `json:"podCIDRs"`
	// NodePortAddresses limit node ports to the node's local addresses
	// inside these CIDRs, as kube-proxy's --nodeport-addresses; empty
	// (the default) serves them on the Node object's addresses only.
	NodePortAddresses []string `json:"nodePortAddresses"`
	// DNSAddress is the IP address of netspec's DNS server (watch
	// --dns-listen), the nameserver of the pods' resolv.conf the nodes
	// render (as the kubelet's clusterDNS); empty: none.
	DNSAddress string `json:"dnsAddress,omitempty"`
}

// DefaultClusterSpec returns the settings of a tree without a Cluster object.
func DefaultClusterSpec() ClusterSpec {
	return ClusterSpec{
		ServiceCIDRs:        []string{"10.96.0.0/12"},
		NodePortRange:       "30000-32767",
		ClusterDomain:       "cluster.local",
		DNSTTL:              5,
		ExternalIPCIDRs:     []string{},
		LoadBalancerIPCIDRs: []string{},
		PodCIDRs:            []string{},
		NodePortAddresses:   []string{},
	}
}
