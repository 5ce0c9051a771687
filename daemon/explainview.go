package daemon

import (
	"fmt"
	"net/netip"
	"time"

	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/daemon/fleet"
	"netspec.dev/netspec/explain"
	"netspec.dev/netspec/plan"
)

// ExplainView is what explain --live takes from the status st of the
// node's daemon: the explanation's options (the endpoints out for failing
// probes, the node's own or the fleet's, the Services failing open, and
// the cause of a kernel that differs while the daemon runs) and the
// readiness view to compile the plan with, in which each endpoint address
// and probe the daemon reports failing is not ready. A daemon that does
// not probe (st.Probes nil) leaves readiness to the tree: the view is
// zero. An error is a status that does not parse.
func ExplainView(st *Status) (o explain.Options, view compiler.Options, err error) {
	o.KernelDiffers = driftCause(st)
	if st.Probes == nil {
		return o, view, nil
	}
	o.Probing = true
	failing := map[string]bool{} // "ip probe"
	for _, out := range st.Probes.Out {
		ap, err := netip.ParseAddrPort(out.Endpoint)
		if err != nil {
			return o, view, fmt.Errorf("the daemon's status: endpoint %q: %v", out.Endpoint, err)
		}
		o.Probes = append(o.Probes, explain.ProbeFailure{Service: out.Service, Endpoint: ap, Probe: out.Probe, Since: out.Since, LastError: out.LastError})
		failing[ap.Addr().String()+" "+out.Probe] = true
	}
	if st.Fleet != nil {
		// Out because the fleet says so: a probe failing on another
		// node, or the node the endpoint runs on dead.
		for _, out := range st.Fleet.Out {
			ap, err := netip.ParseAddrPort(out.Endpoint)
			if err != nil {
				return o, view, fmt.Errorf("the daemon's status: endpoint %q: %v", out.Endpoint, err)
			}
			o.Probes = append(o.Probes, explain.ProbeFailure{Service: out.Service, Endpoint: ap, Probe: out.Probe,
				By: out.By, NodeDead: out.Reason == fleet.ReasonDead})
			failing[ap.Addr().String()+" "+out.Probe] = true
		}
	}
	o.FailOpen = st.Probes.FailOpen
	if len(failing) > 0 {
		view.NotReady = func(ip netip.Addr, probes []plan.Probe) bool {
			for _, p := range probes {
				// The daemon names an httpGet's URL with the address it
				// asks; one before did not.
				if failing[ip.String()+" "+ProbeString(p, ip)] || failing[ip.String()+" "+p.String()] {
					return true
				}
			}
			return false
		}
	}
	return o, view, nil
}

// driftCause is the cause of a kernel that differs from the plan while
// the daemon runs: a change made since its last sync (drift, which its
// next resync repairs), or a daemon that applies another tree.
func driftCause(st *Status) string {
	b := "the node's kernel does not hold the plan for this frontend, yet netspec watch runs: changed by hand or by another program"
	if st.LastSync != nil && !st.LastSync.Ended.IsZero() {
		b += " since its last sync at " + st.LastSync.Ended.UTC().Format(time.RFC3339)
	}
	b += " (drift: its next resync repairs it, or run netspec apply), or the daemon applies another tree or revision than this one (netspec status)"
	return b
}
