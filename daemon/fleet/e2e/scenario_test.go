package e2e

import (
	"testing"
	"time"
)

// fleetSize is the number of nodes of every test's fleet.
const fleetSize = 8

// TestPodServerStops (scenario a): when a pod's server stops, no new
// connection from any node reaches it within failureThreshold ×
// periodSeconds + 2 s, for an httpGet and a tcpSocket readiness probe,
// and it stays so. With gossip, only the pod's own node probes it and
// the others learn it from gossip; without, every node probes it.
func TestPodServerStops(t *testing.T) {
	netspecBin(t)
	f := newFleet(t, fleetSize)
	f.startAgents(built.gossip)
	all := f.podsOf(apps)
	f.waitRounds("every node reaches every pod", f.nodes, apps, time.Now(), deadline,
		func(c map[string]int) bool { return every(c, all) })

	gone := []*pod{f.node(3).pods["echo"], f.node(5).pods["web"]}
	t0 := time.Now()
	for _, p := range gone {
		p.srv.Stop()
	}
	bound := time.Duration(probeFailure*probePeriod)*time.Second + 2*time.Second
	rest := f.podsOf(apps, gone...)
	f.waitRounds("no connection reaches echo-3 and web-5, whose servers stopped", f.nodes, apps, t0, bound,
		func(c map[string]int) bool { return every(c, rest) })
	f.checkRounds("echo-3 and web-5 stay out", f.nodes, apps, func(c map[string]int) bool { return every(c, rest) })
}
