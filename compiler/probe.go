package compiler

import (
	"net/netip"
	"slices"

	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/schema"
)

// podProbes returns the readiness probes of a pod's containers and then
// of its native sidecars (init containers with restartPolicy Always, whose
// readiness the pod's counts too), in container order: a named port
// becomes the port number of the probed container's own port of that
// name, as the kubelet resolves it, and the kubelet's defaults are filled
// in. A name that is no port of the container stays a name
// (plan.Probe.PortName): the kubelet fails such a probe, and so does the
// prober (the schema warns of it). Exec probes cannot run from the node
// and are left out (the schema warns of them), as are probes the schema
// rejected.
func podProbes(pod *schema.Pod) []plan.Probe {
	var out []plan.Probe
	pod.Spec.ServingContainers(func(ct *schema.Container, _ bool, _ int) bool {
		if ct.ReadinessProbe == nil {
			return true
		}
		if p, ok := planProbe(ct.ReadinessProbe, ct.Ports); ok {
			out = append(out, p)
		}
		return true
	})
	return out
}

// annotationProbes returns the probe of the Service annotation
// netspec.dev/readiness-probe, for its endpoints without a Pod (whose
// targetRef names no Pod of the tree); nil when it has none.
func annotationProbes(svc *schema.Service) []plan.Probe {
	a, ok := svc.Metadata.Annotations.Lookup(schema.ReadinessProbeAnnotation)
	if !ok {
		return nil
	}
	sp, err := schema.ParseProbeAnnotation(a)
	if err != nil {
		return nil // validation reported it
	}
	if p, ok := planProbe(sp, nil); ok {
		return []plan.Probe{p}
	}
	return nil
}

// planProbe turns a spec probe into the plan's: its action, the port as
// a number (ports, the container's, resolve a name; the annotation's
// probes have none, validation sees to it) and the timing with the
// kubelet's defaults. A name that is no port of the container is kept as
// PortName, port 0, as the kubelet keeps such a probe and fails it. ok is
// false for exec probes and ports out of range.
func planProbe(sp *schema.Probe, ports []schema.ContainerPort) (plan.Probe, bool) {
	var p plan.Probe
	port := func(v schema.IntOrString) (uint16, bool) {
		if !v.IsName() {
			return uint16(v.Int), v.Int >= 1 && v.Int <= 65535
		}
		for _, cp := range ports {
			if cp.Name == v.Str {
				return uint16(cp.ContainerPort), true
			}
		}
		p.PortName = v.Str
		return 0, true
	}
	var ok bool
	switch {
	case sp.HTTPGet != nil:
		h := sp.HTTPGet
		p.Action = plan.ProbeHTTPGet
		p.Port, ok = port(h.Port)
		p.Scheme, p.Host, p.Path = h.Scheme, h.Host, h.Path
		if p.Scheme == "" {
			p.Scheme = "HTTP"
		}
		if p.Path == "" {
			p.Path = "/"
		}
		for _, hd := range h.HTTPHeaders {
			p.Headers = append(p.Headers, plan.ProbeHeader{Name: hd.Name, Value: hd.Value})
		}
	case sp.TCPSocket != nil:
		p.Action = plan.ProbeTCPSocket
		p.Port, ok = port(sp.TCPSocket.Port)
	case sp.GRPC != nil:
		p.Action = plan.ProbeGRPC
		p.Port, ok = port(schema.IntOrString{Int: sp.GRPC.Port})
		if sp.GRPC.Service != nil {
			p.GRPCService = *sp.GRPC.Service
		}
	default:
		return plan.Probe{}, false
	}
	or := func(v, def int32) int32 {
		if v <= 0 {
			return def
		}
		return v
	}
	p.InitialDelaySeconds = max(sp.InitialDelaySeconds, schema.DefaultProbeInitDelay)
	p.PeriodSeconds = or(sp.PeriodSeconds, schema.DefaultProbePeriod)
	p.TimeoutSeconds = or(sp.TimeoutSeconds, schema.DefaultProbeTimeout)
	p.SuccessThreshold = or(sp.SuccessThreshold, schema.DefaultProbeSuccess)
	p.FailureThreshold = or(sp.FailureThreshold, schema.DefaultProbeFailure)
	return p, ok
}

// NotReady is a node agent's view of its endpoints: whether the endpoint
// at ip fails one of its readiness probes on this node. A compilation
// given one treats such endpoints as not ready (and not serving) on this
// node, as if the tree said so, unless that would leave a Service port
// without the endpoints it uses (fail open: see Staged.FailOpen).
type NotReady func(ip netip.Addr, probes []plan.Probe) bool

// Options are the optional inputs of a compilation.
type Options struct {
	// NotReady, when set, is the node's view of its probed endpoints;
	// nil: readiness is the tree's.
	NotReady NotReady
	// Failing, when not nil, holds every address NotReady may say true
	// of (it says false of any other). A Memo's Restage then works out
	// again only the Services with an endpoint at an address failing now
	// or at the last compilation or Restage (their views may change), not
	// every Service. It must not be changed after the call.
	Failing map[netip.Addr]bool
}

// probedRef names a failing endpoint of a Service: its port and its
// index in that port's endpoints.
type probedRef struct{ port, ep int }

// probedService is a Service compiled with a NotReady view: the failing
// endpoints it was made for and the result, so that a view unchanged for
// this Service gives the same plan.Service again.
type probedService struct {
	failing  []probedRef
	out      plan.Service
	failOpen bool
}

// withView applies a NotReady view to base, a Service compiled with the
// tree's readiness: its failing endpoints become not ready and not
// serving, and the ports' picks are made again. A port whose Cluster or
// External endpoints of an IP family would become none while the tree's
// view has some keeps the tree's view (fail open): each family is a data
// plane of its own, as the endpoints are picked per family. last, when not nil, is the result of
// an earlier call for the same base; it is returned when the same
// endpoints fail. The result is nil when no endpoint of base fails.
func withView(o *schema.Service, base *plan.Service, node plan.Node, notReady NotReady, last *probedService) *probedService {
	if notReady == nil || o.Spec.PublishNotReadyAddresses {
		// publishNotReadyAddresses: endpoints are ready whatever their
		// pods' readiness, as in Kubernetes.
		return nil
	}
	var failing []probedRef
	for i := range base.Ports {
		for j, e := range base.Ports[i].Endpoints {
			if len(e.Probes) > 0 && e.Ready && notReady(e.IP, e.Probes) {
				failing = append(failing, probedRef{i, j})
			}
		}
	}
	if len(failing) == 0 {
		return nil
	}
	if last != nil && slices.Equal(last.failing, failing) {
		return last
	}
	ps := &probedService{failing: failing, out: *base}
	ps.out.Ports = slices.Clone(base.Ports)
	for k := 0; k < len(failing); {
		i := failing[k].port
		bp := &base.Ports[i]
		eps := slices.Clone(bp.Endpoints)
		for ; k < len(failing) && failing[k].port == i; k++ {
			e := &eps[failing[k].ep]
			e.Ready, e.Serving = false, false
		}
		np := *bp
		np.Endpoints = eps
		np.Cluster, np.External, np.ShortCircuit = pick(eps, &ps.out, o.Spec.TrafficDistribution, node)
		if emptiedFamily(eps, bp.Cluster, np.Cluster) || emptiedFamily(eps, bp.External, np.External) ||
			emptiedFamily(eps, bp.ShortCircuitSet(), np.ShortCircuitSet()) {
			ps.failOpen = true
			continue // the tree's view stands for this port
		}
		ps.out.Ports[i] = np
	}
	return ps
}

// emptiedFamily tells whether an IP family has endpoints in before and
// none in after (indexes into eps).
func emptiedFamily(eps []plan.Endpoint, before, after []int) bool {
	var had, has [2]bool // IPv4, IPv6
	for _, i := range before {
		had[family(eps[i])] = true
	}
	for _, i := range after {
		has[family(eps[i])] = true
	}
	return had[0] && !has[0] || had[1] && !has[1]
}
