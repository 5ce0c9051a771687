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
// The text is exactly what encoding/json makes of the tests' json* mirror
// types (with SetEscapeHTML(false)), laid out by indentJSON; it is written
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
// plan's types, named as the json tags of the tests' mirror types say.
// An object is laid out on one line when it holds no other object (see
// indentJSON): endpoints, records and variables always; a Service, port,
// zone or env file when its list of objects is empty.
func (w *jsonWriter) plan(p *plan.Plan) {
	w.open('{', false)
	w.int("formatVersion", plan.FormatVersion)

	w.key("node")
	w.open('{', true)
	w.str("name", p.Node.Name)
	w.str("zone", p.Node.Zone)
	texts(w, "ips", p.Node.IPs)
	w.close('}')

	w.key("cluster")
	w.open('{', true)
	w.str("domain", p.Cluster.Domain)
	texts(w, "serviceCIDRs", p.Cluster.ServiceCIDRs)
	texts(w, "podCIDRs", p.Cluster.PodCIDRs)
	texts(w, "nodePortAddresses", p.Cluster.NodePortAddresses)
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
	texts(w, "clusterIPs", s.ClusterIPs)
	w.bool("headless", s.Headless)
	w.str("externalName", s.ExternalName)
	texts(w, "externalIPs", s.ExternalIPs)
	texts(w, "loadBalancerIPs", s.LoadBalancerIPs)
	texts(w, "sourceRanges", s.SourceRanges)
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
	plainList(w, "zoneHints", e.ZoneHints(), appendJSONString)
	plainList(w, "nodeHints", e.NodeHints(), appendJSONString)
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

func (w *jsonWriter) probeHeader(h *plan.ProbeHeader) { w.nameValue(h.Name, h.Value) }

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

func (w *jsonWriter) envVar(v *plan.EnvVar) { w.nameValue(v.Name, v.Value) }

// nameValue writes an object of a name and a value on one line.
func (w *jsonWriter) nameValue(name, value string) {
	w.open('{', true)
	w.str("name", name)
	w.str("value", value)
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
// errors. Lists come back non-nil (PlanJSON writes every list, as []
// when empty; a Port's shortCircuit only when it has one).
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
	var dp decodedPlan
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&dp); err != nil {
		return nil, fmt.Errorf("plan.json: %w", err)
	}
	p := dp.Plan
	p.Services = jsonList(dp.Services, func(s decodedService) plan.Service {
		s.Service.Ports = jsonList(s.Ports, func(pt decodedPort) plan.Port {
			pt.Port.Endpoints = jsonList(pt.Endpoints, func(e decodedEndpoint) plan.Endpoint {
				return plan.Endpoint{IP: e.IP, Port: e.Port, Ready: e.Ready, Serving: e.Serving, Terminating: e.Terminating,
					NodeName: e.NodeName, Zone: e.Zone, Extra: plan.NewEndpointExtra(e.Hostname, e.ZoneHints, e.NodeHints),
					Pod: e.Pod, Probes: e.Probes}
			})
			if len(pt.Port.ShortCircuit) == 0 {
				pt.Port.ShortCircuit = nil // its absence means something
			}
			return pt.Port
		})
		return s.Service
	})
	return &p, nil
}

// The decoded* types are what ParsePlanJSON decodes plan.json into:
// plan's own types, whose fields plan.json names in lowerCamelCase
// (encoding/json matches a name whatever its case; the tests hold every
// name to its field), but for the lists that lead to endpoints, which
// they replace (a field of the outer struct hides the embedded one of its
// name): plan.json writes an endpoint's Extra as its fields hostname,
// zoneHints and nodeHints.
type (
	decodedPlan struct {
		plan.Plan
		Services []decodedService
	}
	decodedService struct {
		plan.Service
		Ports []decodedPort
	}
	decodedPort struct {
		plan.Port
		Endpoints []decodedEndpoint
	}
	decodedEndpoint struct {
		IP                          netip.Addr
		Port                        uint16
		Ready, Serving, Terminating bool
		NodeName, Zone, Hostname    string
		ZoneHints, NodeHints        []string
		Pod                         string
		Probes                      []plan.Probe
	}
)

// jsonList converts a slice element by element into a non-nil slice, so that an
// empty list is written as [] and not null.
func jsonList[T, U any](in []T, f func(T) U) []U {
	out := make([]U, 0, len(in))
	for _, x := range in {
		out = append(out, f(x))
	}
	return out
}
