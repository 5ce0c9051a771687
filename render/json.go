package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"

	"netspec.dev/netspec/plan"
)

// PlanJSON renders the Plan as plan.json: JSON indented by two spaces, with
// one line per endpoint, DNS record and variable (see indentJSON),
// "formatVersion" first, lowerCamelCase field names as Kubernetes spells
// them ("clusterIPs", "dnsTTL", "ips", "ttl"), addresses and prefixes as
// strings, fields in a fixed order and lists in the plan's order, every
// field present (lists as [], never null), no HTML escaping, and a
// trailing newline.
//
// A Plan whose FormatVersion is 0 is written as plan.FormatVersion; any
// other version than plan.FormatVersion is an error.
//
// The text is exactly what encoding/json makes of the json* mirror types
// below (with SetEscapeHTML(false)), laid out by indentJSON; it is written
// directly, without reflection or an intermediate compact form, because
// plans of ten thousand services make tens of megabytes of it. The tests
// check the two paths give the same bytes and that every field of plan's
// types is written.
func PlanJSON(p *plan.Plan) ([]byte, error) {
	if err := checkPlanJSON(p); err != nil {
		return nil, err
	}
	w := jsonWriter{b: make([]byte, 0, planJSONSize(p))}
	w.plan(p)
	return append(w.b, '\n'), nil
}

// WritePlanJSON writes PlanJSON's bytes to out as it makes them, holding a
// few hundred kilobytes rather than the whole (139 MB at 50,000
// Services). An error of out is returned as it is.
func WritePlanJSON(out io.Writer, p *plan.Plan) error {
	if err := checkPlanJSON(p); err != nil {
		return err
	}
	w := jsonWriter{b: make([]byte, 0, spillSize+64<<10), out: out}
	w.plan(p)
	w.b = append(w.b, '\n')
	w.flush()
	return w.err
}

// checkPlanJSON says why p cannot be written as plan.json, if it cannot.
func checkPlanJSON(p *plan.Plan) error {
	if p == nil {
		return errors.New("plan.json: no plan")
	}
	if p.FormatVersion != 0 && p.FormatVersion != plan.FormatVersion {
		return fmt.Errorf("plan.json: plan has format version %d, this netspec writes %d", p.FormatVersion, plan.FormatVersion)
	}
	return nil
}

// plan writes the Plan. Every object holds its fields in the order of
// plan's types, named as the json tags of the mirror types say. An object
// is laid out on one line when it holds no other object (see indentJSON):
// endpoints, records and variables always; a Service, port, zone or env
// file when its list of objects is empty.
func (w *jsonWriter) plan(p *plan.Plan) {
	w.open('{', false)
	w.int("formatVersion", plan.FormatVersion)

	w.key("node")
	w.open('{', true)
	w.str("name", p.Node.Name)
	w.str("zone", p.Node.Zone)
	w.addrs("ips", p.Node.IPs)
	w.close('}')

	w.key("cluster")
	w.open('{', true)
	w.str("domain", p.Cluster.Domain)
	w.prefixes("serviceCIDRs", p.Cluster.ServiceCIDRs)
	w.prefixes("podCIDRs", p.Cluster.PodCIDRs)
	w.prefixes("nodePortAddresses", p.Cluster.NodePortAddresses)
	w.uint("dnsTTL", uint64(p.Cluster.DNSTTL))
	if p.Cluster.DNSAddress.IsValid() {
		w.str("dnsAddress", p.Cluster.DNSAddress.String())
	}
	w.close('}')

	writeObjects(w, "services", p.Services, (*jsonWriter).service)

	w.key("dns")
	w.open('{', len(p.DNS.Zones) == 0)
	writeObjects(w, "zones", p.DNS.Zones, (*jsonWriter).zone)
	w.close('}')

	writeObjects(w, "env", p.Env, (*jsonWriter).envFile)
	w.close('}')
}

func (w *jsonWriter) service(s *plan.Service) {
	w.open('{', len(s.Ports) == 0)
	w.str("namespace", s.Namespace)
	w.str("name", s.Name)
	w.str("type", s.Type)
	w.addrs("clusterIPs", s.ClusterIPs)
	w.bool("headless", s.Headless)
	w.str("externalName", s.ExternalName)
	w.addrs("externalIPs", s.ExternalIPs)
	w.addrs("loadBalancerIPs", s.LoadBalancerIPs)
	w.prefixes("sourceRanges", s.SourceRanges)
	w.int("affinitySeconds", int64(s.AffinitySeconds))
	w.bool("internalLocal", s.InternalLocal)
	w.bool("externalLocal", s.ExternalLocal)
	w.uint("healthCheckNodePort", uint64(s.HealthCheckNodePort))
	w.str("ipvsScheduler", s.IPVSScheduler)
	if s.ProxyName != "" {
		// Only when set: most plans have none, and older records lack it.
		w.str("proxyName", s.ProxyName)
	}
	writeObjects(w, "ports", s.Ports, (*jsonWriter).port)
	w.close('}')
}

func (w *jsonWriter) port(pt *plan.Port) {
	w.open('{', len(pt.Endpoints) == 0)
	w.str("name", pt.Name)
	w.str("protocol", pt.Protocol)
	w.uint("port", uint64(pt.Port))
	w.uint("nodePort", uint64(pt.NodePort))
	writeObjects(w, "endpoints", pt.Endpoints, (*jsonWriter).endpoint)
	w.ints("cluster", pt.Cluster)
	w.ints("external", pt.External)
	if pt.ShortCircuit != nil { // only when both traffic policies are Local
		w.ints("shortCircuit", pt.ShortCircuit)
	}
	w.close('}')
}

func (w *jsonWriter) endpoint(e *plan.Endpoint) {
	w.open('{', len(e.Probes) == 0)
	w.key("ip")
	w.b = appendJSONText(w.b, e.IP)
	w.uint("port", uint64(e.Port))
	w.bool("ready", e.Ready)
	w.bool("serving", e.Serving)
	w.bool("terminating", e.Terminating)
	w.str("nodeName", e.NodeName)
	w.str("zone", e.Zone)
	w.str("hostname", e.Hostname())
	w.strs("zoneHints", e.ZoneHints())
	w.strs("nodeHints", e.NodeHints())
	w.str("pod", e.Pod)
	writeObjects(w, "probes", e.Probes, (*jsonWriter).probe)
	w.close('}')
}

func (w *jsonWriter) probe(p *plan.Probe) {
	w.open('{', len(p.Headers) == 0)
	w.str("action", string(p.Action))
	w.uint("port", uint64(p.Port))
	if p.PortName != "" {
		// Only for a probe whose port name resolves to no port (rare):
		// plans without one read as before.
		w.str("portName", p.PortName)
	}
	w.str("scheme", p.Scheme)
	w.str("host", p.Host)
	w.str("path", p.Path)
	writeObjects(w, "headers", p.Headers, (*jsonWriter).probeHeader)
	w.str("grpcService", p.GRPCService)
	w.int("initialDelaySeconds", int64(p.InitialDelaySeconds))
	w.int("periodSeconds", int64(p.PeriodSeconds))
	w.int("timeoutSeconds", int64(p.TimeoutSeconds))
	w.int("successThreshold", int64(p.SuccessThreshold))
	w.int("failureThreshold", int64(p.FailureThreshold))
	w.close('}')
}

func (w *jsonWriter) probeHeader(h *plan.ProbeHeader) {
	w.open('{', true)
	w.str("name", h.Name)
	w.str("value", h.Value)
	w.close('}')
}

func (w *jsonWriter) zone(z *plan.Zone) {
	w.open('{', len(z.Records) == 0)
	w.str("name", z.Name)
	writeObjects(w, "records", z.Records, (*jsonWriter).record)
	w.close('}')
}

func (w *jsonWriter) record(r *plan.Record) {
	w.open('{', true)
	w.str("name", r.Name)
	w.str("type", r.Type)
	w.uint("ttl", uint64(r.TTL))
	w.str("data", r.Data)
	w.close('}')
}

func (w *jsonWriter) envFile(f *plan.EnvFile) {
	w.open('{', len(f.Vars) == 0)
	w.str("namespace", f.Namespace)
	writeObjects(w, "vars", f.Vars, (*jsonWriter).envVar)
	w.close('}')
}

func (w *jsonWriter) envVar(v *plan.EnvVar) {
	w.open('{', true)
	w.str("name", v.Name)
	w.str("value", v.Value)
	w.close('}')
}

// writeObjects writes the member key: a list with one object per element
// of xs, each written by f. The list is on one line only when empty.
func writeObjects[T any](w *jsonWriter, key string, xs []T, f func(*jsonWriter, *T)) {
	w.key(key)
	w.open('[', len(xs) == 0)
	for i := range xs {
		w.elem()
		f(w, &xs[i])
		w.spill()
	}
	w.close(']')
}

// planJSONSize estimates the length of plan.json, on the generous side, so
// that PlanJSON allocates its buffer once. Each constant is the length of
// an element's line(s) with empty strings and lists and the longest
// numbers, rounded up; strings count their own length (escapes aside) and
// addresses their longest form.
func planJSONSize(p *plan.Plan) int {
	const (
		plan    = 256
		service = 392
		port    = 220
		endp    = 190
		// An endpoint with probes has a line per field, and a probe
		// with headers too.
		endpLines = 280
		probe     = 300
		header    = 96
		zone      = 64
		record    = 68
		envFile   = 64
		envVar    = 36
		number    = len(`-9223372036854775808, `)
		hint      = len(`"", `)
	)
	n := plan + len(p.Node.Name) + len(p.Node.Zone) + len(p.Cluster.Domain) +
		addrsSize(p.Node.IPs) + prefixesSize(p.Cluster.ServiceCIDRs) + prefixesSize(p.Cluster.PodCIDRs) + prefixesSize(p.Cluster.NodePortAddresses)
	for i := range p.Services {
		s := &p.Services[i]
		n += service + len(s.Namespace) + len(s.Name) + len(s.Type) + len(s.ExternalName) + len(s.ProxyName) +
			addrsSize(s.ClusterIPs) + addrsSize(s.ExternalIPs) + addrsSize(s.LoadBalancerIPs) + prefixesSize(s.SourceRanges)
		for j := range s.Ports {
			pt := &s.Ports[j]
			n += port + len(pt.Name) + len(pt.Protocol) + number*(len(pt.Cluster)+len(pt.External)+len(pt.ShortCircuit))
			for k := range pt.Endpoints {
				e := &pt.Endpoints[k]
				n += endp + addrSize(e.IP) + len(e.NodeName) + len(e.Zone) + len(e.Hostname()) + len(e.Pod)
				if len(e.Probes) > 0 {
					n += endpLines
				}
				for _, pr := range e.Probes {
					n += probe + len(pr.Action) + len(pr.Scheme) + len(pr.Host) + len(pr.Path) + len(pr.GRPCService)
					if len(pr.Headers) > 0 {
						n += endpLines
					}
					for _, h := range pr.Headers {
						n += header + len(h.Name) + len(h.Value)
					}
				}
				for _, h := range e.ZoneHints() {
					n += hint + len(h)
				}
				for _, h := range e.NodeHints() {
					n += hint + len(h)
				}
			}
		}
	}
	for i := range p.DNS.Zones {
		z := &p.DNS.Zones[i]
		n += zone + len(z.Name)
		for j := range z.Records {
			r := &z.Records[j]
			n += record + len(r.Name) + len(r.Type) + len(r.Data)
		}
	}
	for i := range p.Env {
		f := &p.Env[i]
		n += envFile + len(f.Namespace)
		for j := range f.Vars {
			n += envVar + len(f.Vars[j].Name) + len(f.Vars[j].Value)
		}
	}
	return n
}

// addrSize is the most an address takes in a list of plan.json.
func addrSize(a netip.Addr) int {
	if a.Is4() {
		return len(`"255.255.255.255", `)
	}
	return len(`"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", `) + len(a.Zone())
}

func addrsSize(as []netip.Addr) int {
	n := 0
	for _, a := range as {
		n += addrSize(a)
	}
	return n
}

func prefixesSize(ps []netip.Prefix) int {
	n := 0
	for _, p := range ps {
		n += addrSize(p.Addr()) + len("/128")
	}
	return n
}

// ParsePlanJSON reads what PlanJSON wrote (for the applier, which keeps the
// last applied plan.json). Unknown fields and other format versions are
// errors. Lists come back non-nil.
func ParsePlanJSON(data []byte) (*plan.Plan, error) {
	var v struct {
		FormatVersion int `json:"formatVersion"`
	}
	// Unmarshal, unlike Decode, also rejects data after the plan.
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("plan.json: %w", err)
	}
	if v.FormatVersion != plan.FormatVersion {
		return nil, fmt.Errorf("plan.json: format version %d, this netspec reads %d", v.FormatVersion, plan.FormatVersion)
	}
	var jp jsonPlan
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&jp); err != nil {
		return nil, fmt.Errorf("plan.json: %w", err)
	}
	return fromJSONPlan(&jp), nil
}

// The json* types mirror plan's types field by field, in the same order,
// with the JSON names: ParsePlanJSON decodes into them, and they define
// what PlanJSON writes. A field added to plan must be added here, to
// fromJSONPlan and to the jsonWriter methods above: the tests catch one
// that is not.

type jsonPlan struct {
	FormatVersion int           `json:"formatVersion"`
	Node          jsonNode      `json:"node"`
	Cluster       jsonCluster   `json:"cluster"`
	Services      []jsonService `json:"services"`
	DNS           jsonDNS       `json:"dns"`
	Env           []jsonEnvFile `json:"env"`
}

type jsonNode struct {
	Name string       `json:"name"`
	Zone string       `json:"zone"`
	IPs  []netip.Addr `json:"ips"`
}

type jsonCluster struct {
	Domain            string         `json:"domain"`
	ServiceCIDRs      []netip.Prefix `json:"serviceCIDRs"`
	PodCIDRs          []netip.Prefix `json:"podCIDRs"`
	NodePortAddresses []netip.Prefix `json:"nodePortAddresses"`
	DNSTTL            uint32         `json:"dnsTTL"`
	DNSAddress        netip.Addr     `json:"dnsAddress,omitzero"`
}

type jsonService struct {
	Namespace           string         `json:"namespace"`
	Name                string         `json:"name"`
	Type                string         `json:"type"`
	ClusterIPs          []netip.Addr   `json:"clusterIPs"`
	Headless            bool           `json:"headless"`
	ExternalName        string         `json:"externalName"`
	ExternalIPs         []netip.Addr   `json:"externalIPs"`
	LoadBalancerIPs     []netip.Addr   `json:"loadBalancerIPs"`
	SourceRanges        []netip.Prefix `json:"sourceRanges"`
	AffinitySeconds     int32          `json:"affinitySeconds"`
	InternalLocal       bool           `json:"internalLocal"`
	ExternalLocal       bool           `json:"externalLocal"`
	HealthCheckNodePort uint16         `json:"healthCheckNodePort"`
	IPVSScheduler       string         `json:"ipvsScheduler"`
	ProxyName           string         `json:"proxyName,omitempty"`
	Ports               []jsonPort     `json:"ports"`
}

type jsonPort struct {
	Name         string         `json:"name"`
	Protocol     string         `json:"protocol"`
	Port         uint16         `json:"port"`
	NodePort     uint16         `json:"nodePort"`
	Endpoints    []jsonEndpoint `json:"endpoints"`
	Cluster      []int          `json:"cluster"`
	External     []int          `json:"external"`
	ShortCircuit []int          `json:"shortCircuit,omitempty"`
}

type jsonEndpoint struct {
	IP          netip.Addr  `json:"ip"`
	Port        uint16      `json:"port"`
	Ready       bool        `json:"ready"`
	Serving     bool        `json:"serving"`
	Terminating bool        `json:"terminating"`
	NodeName    string      `json:"nodeName"`
	Zone        string      `json:"zone"`
	Hostname    string      `json:"hostname"`
	ZoneHints   []string    `json:"zoneHints"`
	NodeHints   []string    `json:"nodeHints"`
	Pod         string      `json:"pod"`
	Probes      []jsonProbe `json:"probes"`
}

type jsonProbe struct {
	Action              plan.ProbeAction  `json:"action"`
	Port                uint16            `json:"port"`
	PortName            string            `json:"portName,omitempty"`
	Scheme              string            `json:"scheme"`
	Host                string            `json:"host"`
	Path                string            `json:"path"`
	Headers             []jsonProbeHeader `json:"headers"`
	GRPCService         string            `json:"grpcService"`
	InitialDelaySeconds int32             `json:"initialDelaySeconds"`
	PeriodSeconds       int32             `json:"periodSeconds"`
	TimeoutSeconds      int32             `json:"timeoutSeconds"`
	SuccessThreshold    int32             `json:"successThreshold"`
	FailureThreshold    int32             `json:"failureThreshold"`
}

type jsonProbeHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type jsonDNS struct {
	Zones []jsonZone `json:"zones"`
}

type jsonZone struct {
	Name    string       `json:"name"`
	Records []jsonRecord `json:"records"`
}

type jsonRecord struct {
	Name string `json:"name"`
	Type string `json:"type"`
	TTL  uint32 `json:"ttl"`
	Data string `json:"data"`
}

type jsonEnvFile struct {
	Namespace string       `json:"namespace"`
	Vars      []jsonEnvVar `json:"vars"`
}

type jsonEnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// jsonList converts a slice element by element into a non-nil slice, so that an
// empty list is written as [] and not null.
func jsonList[T, U any](in []T, f func(T) U) []U {
	out := make([]U, 0, len(in))
	for _, x := range in {
		out = append(out, f(x))
	}
	return out
}

func jsonSame[T any](x T) T { return x }

// nilIfEmpty is l, or nil when l is empty: a list whose absence means
// something (plan.Port.ShortCircuit).
func nilIfEmpty[T any](l []T) []T {
	if len(l) == 0 {
		return nil
	}
	return l
}

func fromJSONPlan(jp *jsonPlan) *plan.Plan {
	return &plan.Plan{
		FormatVersion: jp.FormatVersion,
		Node:          plan.Node{Name: jp.Node.Name, Zone: jp.Node.Zone, IPs: jsonList(jp.Node.IPs, jsonSame)},
		Cluster: plan.Cluster{
			Domain:            jp.Cluster.Domain,
			ServiceCIDRs:      jsonList(jp.Cluster.ServiceCIDRs, jsonSame),
			PodCIDRs:          jsonList(jp.Cluster.PodCIDRs, jsonSame),
			NodePortAddresses: jsonList(jp.Cluster.NodePortAddresses, jsonSame),
			DNSTTL:            jp.Cluster.DNSTTL,
			DNSAddress:        jp.Cluster.DNSAddress,
		},
		Services: jsonList(jp.Services, func(s jsonService) plan.Service {
			return plan.Service{
				Namespace:           s.Namespace,
				Name:                s.Name,
				Type:                s.Type,
				ClusterIPs:          jsonList(s.ClusterIPs, jsonSame),
				Headless:            s.Headless,
				ExternalName:        s.ExternalName,
				ExternalIPs:         jsonList(s.ExternalIPs, jsonSame),
				LoadBalancerIPs:     jsonList(s.LoadBalancerIPs, jsonSame),
				SourceRanges:        jsonList(s.SourceRanges, jsonSame),
				AffinitySeconds:     s.AffinitySeconds,
				InternalLocal:       s.InternalLocal,
				ExternalLocal:       s.ExternalLocal,
				HealthCheckNodePort: s.HealthCheckNodePort,
				IPVSScheduler:       s.IPVSScheduler,
				ProxyName:           s.ProxyName,
				Ports: jsonList(s.Ports, func(pt jsonPort) plan.Port {
					return plan.Port{
						Name:     pt.Name,
						Protocol: pt.Protocol,
						Port:     pt.Port,
						NodePort: pt.NodePort,
						Endpoints: jsonList(pt.Endpoints, func(e jsonEndpoint) plan.Endpoint {
							return plan.Endpoint{
								IP:          e.IP,
								Port:        e.Port,
								Ready:       e.Ready,
								Serving:     e.Serving,
								Terminating: e.Terminating,
								NodeName:    e.NodeName,
								Zone:        e.Zone,
								Extra:       plan.NewEndpointExtra(e.Hostname, jsonList(e.ZoneHints, jsonSame), jsonList(e.NodeHints, jsonSame)),
								Pod:         e.Pod,
								Probes: jsonList(e.Probes, func(p jsonProbe) plan.Probe {
									return plan.Probe{
										Action: p.Action, Port: p.Port, PortName: p.PortName, Scheme: p.Scheme, Host: p.Host, Path: p.Path,
										Headers: jsonList(p.Headers, func(h jsonProbeHeader) plan.ProbeHeader {
											return plan.ProbeHeader{Name: h.Name, Value: h.Value}
										}),
										GRPCService:         p.GRPCService,
										InitialDelaySeconds: p.InitialDelaySeconds,
										PeriodSeconds:       p.PeriodSeconds,
										TimeoutSeconds:      p.TimeoutSeconds,
										SuccessThreshold:    p.SuccessThreshold,
										FailureThreshold:    p.FailureThreshold,
									}
								}),
							}
						}),
						Cluster:      jsonList(pt.Cluster, jsonSame),
						External:     jsonList(pt.External, jsonSame),
						ShortCircuit: nilIfEmpty(pt.ShortCircuit),
					}
				}),
			}
		}),
		DNS: plan.DNS{Zones: jsonList(jp.DNS.Zones, func(z jsonZone) plan.Zone {
			return plan.Zone{Name: z.Name, Records: jsonList(z.Records, func(r jsonRecord) plan.Record {
				return plan.Record{Name: r.Name, Type: r.Type, TTL: r.TTL, Data: r.Data}
			})}
		})},
		Env: jsonList(jp.Env, func(f jsonEnvFile) plan.EnvFile {
			return plan.EnvFile{Namespace: f.Namespace, Vars: jsonList(f.Vars, func(v jsonEnvVar) plan.EnvVar {
				return plan.EnvVar{Name: v.Name, Value: v.Value}
			})}
		}),
	}
}
