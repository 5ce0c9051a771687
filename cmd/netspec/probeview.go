package main

import (
	"net/netip"

	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/daemon"
	"netspec.dev/netspec/plan"
)

// probeView is the daemon's readiness view as the node holds it, for
// plan to compile in the terms netspec watch applies: the endpoints of
// the daemon's record (daemon.ProbeRecordFile) that the last applied plan
// last still holds not ready. Endpoints the record names but last has
// ready are left out: a one-shot apply since put the tree's readiness
// back. held lists the record's entries taken; the view is the tree's
// (zero Options) when there is no record, no last plan, or either is of
// another node than node.
func probeView(last *plan.Plan, rec *daemon.ProbeRecord, node string) (o compiler.Options, held []daemon.ProbeOut) {
	if last == nil || rec == nil || rec.Node != node || last.Node.Name != node {
		return compiler.Options{}, nil
	}
	notReady := map[string]bool{} // "namespace/name ip:port"
	eachProbedEndpoint(last, func(s *plan.Service, e *plan.Endpoint) {
		if !e.Ready {
			notReady[s.Key()+" "+e.AddrPort().String()] = true
		}
	})
	probes := map[netip.Addr]map[string]bool{} // failing probes (daemon.ProbeString) by address
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
				if probes[ip][daemon.ProbeString(pr, ip)] {
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
