package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"netspec.dev/netspec/daemon"
	"netspec.dev/netspec/daemon/fleet"
	"netspec.dev/netspec/treediff"
)

// fleetOut is the JSON of netspec status --fleet: the daemon's
// FleetStatus at the top level, with the node it is of.
type fleetOut struct {
	Node string `json:"node"`
	*daemon.FleetStatus
}

// runStatusFleet prints the fleet part of the daemon's status st (err:
// asking it failed).
func runStatusFleet(e *env, f *statusFlags, sock string, st *daemon.Status, err error) int {
	switch {
	case errors.Is(err, daemon.ErrNoDaemon), errors.Is(err, daemon.ErrStaleSocket):
		return e.fail("status", "--fleet: no daemon answers on %s", sock)
	case err != nil:
		return e.fail("status", "asking the daemon on %s: %v", sock, err)
	case st.Fleet == nil:
		return e.fail("status", "--fleet: the daemon of %s does not gossip (netspec watch --gossip-listen), or has not applied a tree yet", st.Node)
	}
	if f.json {
		return e.printJSON("status", fleetOut{Node: st.Node, FleetStatus: st.Fleet})
	}
	writeFleetStatus(e.stdout, st.Node, st.Fleet, time.Now())
	return exitOK
}

// writeFleetStatus prints the fleet as node sees it.
func writeFleetStatus(w io.Writer, node string, fs *daemon.FleetStatus, now time.Time) {
	suspects := ""
	if n := fs.Suspects(); n > 0 {
		suspects = fmt.Sprintf(", %d suspect", n)
	}
	fmt.Fprintf(w, "fleet of %s: %d members, %d alive%s\n", node, len(fs.Members), fs.Alive(), suspects)
	for _, m := range fs.Members {
		since := "-"
		if !m.Since.IsZero() {
			since = ago(m.Since, now)
		}
		fmt.Fprintf(w, "  %-20s %-7s %-22s revision %s, %d checks (%d failing), since %s\n",
			m.Name, m.State, m.Address, cmp.Or(m.Revision, "-"), m.Checks, m.Failing, since)
	}
	fmt.Fprintln(w, "revisions (nodes alive or suspect):")
	for _, r := range fs.Revisions {
		fmt.Fprintf(w, "  %s: %s\n", cmp.Or(r.Revision, "(none applied yet)"), treediff.Plural(r.Nodes, "node"))
	}
	if len(fs.Revisions) > 1 {
		fmt.Fprintln(w, "  the fleet is split across revisions: a rollout under way, or nodes that do not follow")
	}
	if len(fs.Out) == 0 {
		fmt.Fprintln(w, "endpoints out for the fleet: none")
	} else {
		fmt.Fprintln(w, "endpoints out for the fleet:")
		for _, o := range fs.Out {
			why := "probe fails on " + strings.Join(o.By, " and ")
			if o.Reason == fleet.ReasonDead {
				why = "node " + strings.Join(o.By, ",") + " is dead"
			}
			fmt.Fprintf(w, "  %s %s (%s): %s\n", o.Service, o.Endpoint, o.Probe, why)
		}
	}
	if fs.FailStatic {
		fmt.Fprintf(w, "FAIL STATIC: %d of %d nodes seen are dead or suspect (%d dead, %d suspect); dead nodes' endpoints are kept (this node is more likely cut off)\n",
			fs.Dead+fs.Suspect, fs.Ever, fs.Dead, fs.Suspect)
	} else {
		fmt.Fprintf(w, "fail static: no (%d of %d nodes seen are dead, %d suspect)\n", fs.Dead, fs.Ever, fs.Suspect)
	}
}
