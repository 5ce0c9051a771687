package daemon

import (
	"net/netip"
	"time"

	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/plan"
)

// ProbeView is the daemon's readiness view as the node holds it, for
// netspec plan to compile in the terms netspec watch applies: the
// endpoints of the daemon's record (ProbeRecordFile) that the last
// applied plan last still holds not ready. Endpoints the record names but last has
// ready are left out: a one-shot apply since put the tree's readiness
// back. held lists the record's entries taken; the view is the tree's
// (zero Options) when there is no record, no last plan, or either is of
// another node than node.
func ProbeView(last *plan.Plan, rec *ProbeRecord, node string) (o compiler.Options, held []ProbeOut) {
	if last == nil || rec == nil || rec.Node != node || last.Node.Name != node {
		return compiler.Options{}, nil
	}
	notReady := map[string]bool{} // "namespace/name ip:port"
	eachProbedEndpoint(last, func(s *plan.Service, e *plan.Endpoint) {
		if !e.Ready {
			notReady[s.Key()+" "+e.AddrPort().String()] = true
		}
	})
	probes := map[netip.Addr]map[string]bool{} // failing probes (ProbeString) by address
	for _, out := range rec.Out {
		ap, err := netip.ParseAddrPort(out.Endpoint)
		if err != nil || !notReady[out.Service+" "+out.Endpoint] {
			continue
		}
		if probes[ap.Addr()] == nil {
			probes[ap.Addr()] = map[string]bool{}
		}
		probes[ap.Addr()][out.Probe] = true
		held = append(held, out)
	}
	if len(held) == 0 {
		return compiler.Options{}, nil
	}
	failing := make(map[netip.Addr]bool, len(probes))
	for a := range probes {
		failing[a] = true
	}
	return compiler.Options{
		Failing: failing,
		NotReady: func(ip netip.Addr, prs []plan.Probe) bool {
			for _, pr := range prs {
				if probes[ip][ProbeString(pr, ip)] {
					return true
				}
			}
			return false
		},
	}, held
}

// eachProbedEndpoint calls f with each endpoint of p that has a readiness
// probe, port by port, in plan order: an endpoint of several ports of a
// Service comes once for each.
func eachProbedEndpoint(p *plan.Plan, f func(s *plan.Service, e *plan.Endpoint)) {
	for i := range p.Services {
		s := &p.Services[i]
		for j := range s.Ports {
			for k := range s.Ports[j].Endpoints {
				if e := &s.Ports[j].Endpoints[k]; len(e.Probes) > 0 {
					f(s, e)
				}
			}
		}
	}
}

// Held is what the kernel holds out for failing readiness probes when no
// daemon runs, as netspec status tells it: the daemon's record of them
// (ProbeRecordFile), kept to those still not ready in the applied plan;
// without that record, the applied plan's probed endpoints that are not
// ready, for a probe or for the tree (the plan does not tell).
type Held struct {
	// Recorded tells that the daemon's record was read (Written is when
	// it wrote it); false: only the applied plan tells.
	Recorded bool      `json:"recorded"`
	Written  time.Time `json:"written,omitzero"`
	// Out are the endpoints held out by the daemon's probes (Recorded),
	// or not ready in the applied plan although probed (not Recorded);
	// FailOpen the Services the daemon kept whole (Recorded).
	Out      []ProbeOut `json:"out"`
	FailOpen []string   `json:"failOpen,omitempty"`
}

// HeldOut works out what the kernel holds out for failing probes from
// the applied plan p and the daemon's record rec (nil: none): the
// record's endpoints that p still has not ready (an apply since puts the
// tree's readiness back); without a record (or one of another node),
// p's probed endpoints that are not ready. nil when p has no probe.
func HeldOut(p *plan.Plan, rec *ProbeRecord) *Held {
	notReady := map[string]bool{} // service endpoint → p has it probed and not ready
	probed := false
	var unready []ProbeOut
	eachProbedEndpoint(p, func(s *plan.Service, e *plan.Endpoint) {
		probed = true
		key := s.Key() + " " + e.AddrPort().String()
		if e.Ready || notReady[key] {
			return
		}
		notReady[key] = true
		for _, pr := range e.Probes {
			unready = append(unready, ProbeOut{Service: s.Key(), Endpoint: e.AddrPort().String(), Probe: ProbeString(pr, e.IP)})
		}
	})
	if !probed {
		return nil
	}
	if rec == nil || rec.Node != p.Node.Name {
		return &Held{Out: unready}
	}
	h := &Held{Recorded: true, Written: rec.Written, Out: []ProbeOut{}, FailOpen: rec.FailOpen}
	for _, o := range rec.Out {
		if !o.FailOpen && notReady[o.Service+" "+o.Endpoint] {
			h.Out = append(h.Out, o)
		}
	}
	return h
}
