package fleet

import (
	"sort"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// The reasons a message is dropped.
const (
	dropMalformed = iota // does not read
	dropOversized        // larger than any message we send
	dropOld              // a version older than the one known: replayed or late
	dropStranger         // from an owner no Node of the tree names
	dropReasons
)

var dropNames = [dropReasons]string{"malformed", "oversized", "old", "stranger"}

// counters are the fleet's counts since New.
type counters struct {
	received   atomic.Uint64 // table parts received
	duplicates atomic.Uint64 // parts received again (gossip's redundancy)
	applied    atomic.Uint64 // tables applied: a newer version of an owner's
	merged     atomic.Uint64 // of applied, those from a push/pull: gossip missed them
	relayed    atomic.Uint64 // parts queued again on first receipt
	sent       atomic.Uint64 // parts handed to memberlist (each transmission)
	sentBytes  atomic.Uint64 // their bytes
	pushPulls  atomic.Uint64 // states sent (LocalState: push/pull and join)
	published  atomic.Uint64 // versions of this node's table published
	views      atomic.Uint64 // views made that differ from the one before
	claims     atomic.Uint64 // claims dropped: a check of another, alive node
	refused    atomic.Uint64 // members refused: not named by the tree
	dropped    [dropReasons]atomic.Uint64
}

func (c *counters) drop(reason int) { c.dropped[reason].Add(1) }

var (
	descMembers   = prometheus.NewDesc("netspec_fleet_members", "Members of the fleet as this node knows them, by state (alive, suspect, dead, left); this node included.", []string{"state"}, nil)
	descRevisions = prometheus.NewDesc("netspec_fleet_nodes_per_revision", "Alive and suspect members by the revision of the tree they applied last (from their gossiped metadata).", []string{"revision"}, nil)
	descBytes     = prometheus.NewDesc("netspec_fleet_gossip_bytes_total", "Bytes of gossip (UDP and TCP, encrypted, membership included) by direction.", []string{"direction"}, nil)
	descMsgs      = prometheus.NewDesc("netspec_fleet_gossip_messages_total", "Gossip packets and TCP streams by direction.", []string{"direction"}, nil)
	descRefused   = prometheus.NewDesc("netspec_fleet_refused_members_total", "Members refused because no Node of the tree names them.", nil, nil)
	descClaims    = prometheus.NewDesc("netspec_fleet_dropped_claims_total", "Failing checks dropped from a table because its owner may not speak for them (an endpoint of another, alive node).", nil, nil)
	descDropped   = prometheus.NewDesc("netspec_fleet_dropped_messages_total", "Readiness messages dropped, by reason: malformed, oversized, old (a version older than the one known: replayed or late), stranger (an owner not in the tree).", []string{"reason"}, nil)
	descApplied   = prometheus.NewDesc("netspec_fleet_readiness_updates_applied_total", "Newer versions of members' tables of failing checks applied.", nil, nil)
	descQueue     = prometheus.NewDesc("netspec_fleet_broadcast_queue", "Readiness messages queued for gossip.", nil, nil)
	descStatic    = prometheus.NewDesc("netspec_fleet_fail_static", "1 while more than half of the tree's nodes seen as members are dead or suspect: dead nodes' endpoints are not taken out for their death.", nil, nil)
	descOut       = prometheus.NewDesc("netspec_fleet_checks_out", "Checks out of their Services by the fleet's view, by reason: probe (a probe fails on its owner, or on both probers of an agentless endpoint), nodeDead.", []string{"reason"}, nil)
)

var _ prometheus.Collector = (*Fleet)(nil)

// Describe is prometheus.Collector's: a Fleet is registered on the
// watcher's registry.
func (f *Fleet) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descMembers, descRevisions, descBytes, descMsgs, descRefused,
		descClaims, descDropped, descApplied, descQueue, descStatic, descOut} {
		ch <- d
	}
}

// Collect is prometheus.Collector's.
func (f *Fleet) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	states := map[MemberState]int{}
	revs := map[string]int{}
	for _, m := range f.Members() {
		states[m.State]++
		if m.State == StateAlive || m.State == StateSuspect {
			revs[m.Revision]++
		}
	}
	for _, s := range []MemberState{StateAlive, StateSuspect, StateDead, StateLeft} {
		gauge(descMembers, float64(states[s]), string(s))
	}
	names := make([]string, 0, len(revs))
	for r := range revs {
		names = append(names, r)
	}
	sort.Strings(names)
	for _, r := range names {
		gauge(descRevisions, float64(revs[r]), r)
	}
	counter(descBytes, f.t.bytesIn.Load(), "in")
	counter(descBytes, f.t.bytesOut.Load(), "out")
	counter(descMsgs, f.t.msgsIn.Load(), "in")
	counter(descMsgs, f.t.msgsOut.Load(), "out")
	counter(descRefused, f.c.refused.Load())
	counter(descClaims, f.c.claims.Load())
	for i, n := range dropNames {
		counter(descDropped, f.c.dropped[i].Load(), n)
	}
	counter(descApplied, f.c.applied.Load())
	gauge(descQueue, float64(f.queue.NumQueued()))
	v := f.View()
	static := 0.0
	if v.FailStatic {
		static = 1
	}
	gauge(descStatic, static)
	out := map[string]int{ReasonProbe: 0, ReasonDead: 0}
	for _, w := range v.Out {
		out[w.Reason]++
	}
	gauge(descOut, float64(out[ReasonProbe]), ReasonProbe)
	gauge(descOut, float64(out[ReasonDead]), ReasonDead)
}

// Stats are the fleet's counts, for tests and the simulation.
type Stats struct {
	BytesIn, BytesOut, MsgsIn, MsgsOut          uint64
	StreamBytesIn, StreamBytesOut               uint64 // of the bytes: TCP (push/pull, join)
	Received, Duplicates, Applied, Published    uint64
	Merged, Relayed, Sent, SentBytes, PushPulls uint64
	Claims, Refused                             uint64
	Malformed, Oversized, Old, Stranger, Queued uint64
}

// Stats returns the fleet's counts now.
func (f *Fleet) Stats() Stats {
	return Stats{BytesIn: f.t.bytesIn.Load(), BytesOut: f.t.bytesOut.Load(), MsgsIn: f.t.msgsIn.Load(), MsgsOut: f.t.msgsOut.Load(),
		StreamBytesIn: f.t.streamIn.Load(), StreamBytesOut: f.t.streamOut.Load(),
		Received: f.c.received.Load(), Duplicates: f.c.duplicates.Load(), Applied: f.c.applied.Load(), Published: f.c.published.Load(),
		Merged: f.c.merged.Load(), Relayed: f.c.relayed.Load(), Sent: f.c.sent.Load(), SentBytes: f.c.sentBytes.Load(), PushPulls: f.c.pushPulls.Load(),
		Claims: f.c.claims.Load(), Refused: f.c.refused.Load(),
		Malformed: f.c.dropped[dropMalformed].Load(), Oversized: f.c.dropped[dropOversized].Load(),
		Old: f.c.dropped[dropOld].Load(), Stranger: f.c.dropped[dropStranger].Load(), Queued: uint64(f.queue.NumQueued())}
}
