package plan

import (
	"strconv"
	"strings"
)

// ProbeAction is how a readiness probe checks an endpoint.
type ProbeAction string

// The probe actions netspec runs from the node. A container's exec probe
// cannot run from the node and is never in a plan.
const (
	ProbeHTTPGet   ProbeAction = "httpGet"
	ProbeTCPSocket ProbeAction = "tcpSocket"
	ProbeGRPC      ProbeAction = "grpc"
)

// Probe is a readiness probe that the node agent runs against an
// endpoint's address, as the kubelet runs a container's readinessProbe:
// from a container of the endpoint's Pod (picked by the Service's
// selector, or named by the endpoint's targetRef), or for endpoints
// without a Pod from the Service's annotation netspec.dev/readiness-probe. Ports are resolved
// (a named port becomes the container's number) and the kubelet's
// defaults are filled in, so that two endpoints with equal probes are
// probed once.
type Probe struct {
	Action ProbeAction
	Port   uint16
	// PortName is the port's name when it names no port of the probe's
	// container (Port is then 0). The kubelet fails such a probe at every
	// period ("port NAME not found"), and so does the node agent.
	PortName string
	// Scheme is "HTTP" or "HTTPS" (httpGet only).
	Scheme string
	// Host is the Host header and name to connect to; "" is the
	// endpoint's address (httpGet only).
	Host string
	// Path is the request path, "/" when the spec has none (httpGet only).
	Path string
	// Headers are the httpHeaders, in spec order (httpGet only).
	Headers []ProbeHeader
	// GRPCService is the service name sent in the grpc.health.v1 request;
	// "" asks about the server as a whole (grpc only).
	GRPCService string

	// The timing fields, with the kubelet's defaults: initialDelaySeconds
	// 0, periodSeconds 10, timeoutSeconds 1, successThreshold 1,
	// failureThreshold 3.
	InitialDelaySeconds int32
	PeriodSeconds       int32
	TimeoutSeconds      int32
	SuccessThreshold    int32
	FailureThreshold    int32
}

// ProbeHeader is one HTTP header an httpGet probe sends.
type ProbeHeader struct {
	Name  string
	Value string
}

// Key identifies the probe by value: two probes with the same key are the
// same check.
func (p *Probe) Key() string {
	var b strings.Builder
	b.WriteString(string(p.Action))
	for _, s := range []string{
		strconv.Itoa(int(p.Port)), p.PortName, p.Scheme, p.Host, p.Path, p.GRPCService,
		strconv.Itoa(int(p.InitialDelaySeconds)), strconv.Itoa(int(p.PeriodSeconds)),
		strconv.Itoa(int(p.TimeoutSeconds)), strconv.Itoa(int(p.SuccessThreshold)),
		strconv.Itoa(int(p.FailureThreshold)),
	} {
		b.WriteByte(0)
		b.WriteString(s)
	}
	for _, h := range p.Headers {
		b.WriteByte(0)
		b.WriteString(h.Name)
		b.WriteByte(0)
		b.WriteString(h.Value)
	}
	return b.String()
}

// String names the probe for people (logs, status, explain):
// "httpGet http://:8080/ready", "tcpSocket :5432", "grpc :9090 service
// health".
func (p Probe) String() string {
	var b strings.Builder
	b.WriteString(string(p.Action))
	b.WriteByte(' ')
	switch p.Action {
	case ProbeHTTPGet:
		b.WriteString(strings.ToLower(p.Scheme))
		b.WriteString("://")
		b.WriteString(p.Host)
		b.WriteByte(':')
		b.WriteString(p.portText())
		b.WriteString(p.Path)
	default:
		b.WriteByte(':')
		b.WriteString(p.portText())
		if p.GRPCService != "" {
			b.WriteString(" service ")
			b.WriteString(p.GRPCService)
		}
	}
	return b.String()
}

// portText is the port as String shows it: its number, or the name that
// named no port.
func (p Probe) portText() string {
	if p.PortName != "" {
		return p.PortName
	}
	return strconv.Itoa(int(p.Port))
}
