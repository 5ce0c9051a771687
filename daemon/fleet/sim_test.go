package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// TestSimulation runs a fleet in one process on an in-memory network that
// loses packets, each member with the real delegate and encryption, and
// prints its figures as a markdown table (scripts/bench-fleet). It is a
// measurement, not a test: it runs only when NETSPEC_FLEET_SIM is set,
// and asserts nothing of the figures. Settings (environment):
//
//	NETSPEC_FLEET_SIM         1 to run
//	NETSPEC_FLEET_MEMBERS     members (200)
//	NETSPEC_FLEET_ENDPOINTS   endpoints, spread over the members (20000)
//	NETSPEC_FLEET_DURATION    the measured run (60s)
//	NETSPEC_FLEET_FLIPS       share of endpoints flipping per minute (0.01)
//	NETSPEC_FLEET_RESTART     share of pods restarted in a rolling restart, each out for 5 s (0.10)
//	NETSPEC_FLEET_RESTART_OVER the rolling restart's length (10m); the run sees its first part
//	NETSPEC_FLEET_LOSS        share of packets lost (0.01)
//	NETSPEC_FLEET_SCALE       memberlist's timers multiplied by this (1)
//	NETSPEC_FLEET_KILL        members crashed during the run (2)
//	NETSPEC_FLEET_RETRANSMIT  memberlist's RetransmitMult (0: its default, 4)
func TestSimulation(t *testing.T) {
	if os.Getenv("NETSPEC_FLEET_SIM") == "" {
		t.Skip("a measurement: set NETSPEC_FLEET_SIM=1 (scripts/bench-fleet)")
	}
	p := simParams{
		members:    envInt("NETSPEC_FLEET_MEMBERS", 200),
		endpoints:  envInt("NETSPEC_FLEET_ENDPOINTS", 20000),
		duration:   envDuration("NETSPEC_FLEET_DURATION", time.Minute),
		flips:      envFloat("NETSPEC_FLEET_FLIPS", 0.01),
		restart:    envFloat("NETSPEC_FLEET_RESTART", 0.10),
		over:       envDuration("NETSPEC_FLEET_RESTART_OVER", 10*time.Minute),
		loss:       envFloat("NETSPEC_FLEET_LOSS", 0.01),
		scale:      envFloat("NETSPEC_FLEET_SCALE", 1),
		kill:       envInt("NETSPEC_FLEET_KILL", 2),
		retransmit: envInt("NETSPEC_FLEET_RETRANSMIT", 0),
	}
	r := runSimulation(t, p)
	fmt.Println(r.markdown(p))
	fmt.Println(r.summary(p))
}

type simParams struct {
	members, endpoints, kill int
	retransmit               int
	duration, over           time.Duration
	flips, restart, loss     float64
	scale                    float64
}

// flip is one endpoint going out or back, and when each member saw it.
type flip struct {
	key   string
	out   bool
	start time.Time
	seen  map[int]time.Duration
	// superseded: the key flipped again before all saw this one.
	superseded bool
}

// sim is the running simulation.
type sim struct {
	p       simParams
	net     *memNetwork
	members []*Fleet
	names   []string
	checks  []Check
	owner   map[string]int // check key → member index

	mu      sync.Mutex
	pending map[string]*flip // by key: flips not yet seen by all alive
	done    []*flip
	dead    map[int]bool
	// deaths: for each crashed member, when all others had its
	// endpoints out.
	deathStart map[string]time.Time
	deathSeen  map[string]map[int]time.Duration
	falseDead  int
}

func runSimulation(t *testing.T, p simParams) *simResult {
	s := &sim{p: p, net: newMemNetwork(), owner: map[string]int{}, pending: map[string]*flip{}, dead: map[int]bool{},
		deathStart: map[string]time.Time{}, deathSeen: map[string]map[int]time.Duration{}}
	for i := range p.members {
		s.names = append(s.names, fmt.Sprintf("node-%04d", i))
	}
	for i := range p.endpoints {
		k := fmt.Sprintf("10.%d.%d.%d\x00tcp:8080", i>>16&255, i>>8&255, i&255)
		s.checks = append(s.checks, Check{Key: k, Node: s.names[i%p.members]})
		s.owner[k] = i % p.members
	}
	tree := NewTree(s.names, s.checks) // one for all: each agent has its own, in its own process
	key := [][]byte{[]byte("0123456789abcdef0123456789abcdef")}
	tune := func(c *memberlist.Config) {
		for _, d := range []*time.Duration{&c.ProbeInterval, &c.ProbeTimeout, &c.GossipInterval, &c.PushPullInterval,
			&c.TCPTimeout, &c.GossipToTheDeadTime} {
			*d = time.Duration(float64(*d) * p.scale)
		}
		if p.retransmit > 0 {
			c.RetransmitMult = p.retransmit
		}
	}
	start := time.Now()
	for i, name := range s.names {
		cfg := Config{Name: name, Keys: key, Tree: tree, Transport: s.net.transport(), Tune: tune,
			Logger: slog.New(&deathCounter{s: s}), OnChange: func(v *View) { s.seen(i, v) }}
		for j := range min(i, 3) {
			cfg.Join = append(cfg.Join, s.members[j].Addr())
		}
		f, err := New(cfg)
		if err != nil {
			t.Fatalf("member %d: %v", i, err)
		}
		s.members = append(s.members, f)
	}
	t.Cleanup(func() {
		for _, f := range s.members {
			f.Shutdown()
		}
	})
	deadline := time.Now().Add(5*time.Minute + time.Duration(p.members)*time.Second)
	progress := time.Now()
	for n := s.converged(); n < p.members; n = s.converged() {
		if time.Now().After(deadline) {
			t.Fatalf("%d members did not converge: %d see all", p.members, n)
		}
		if time.Since(progress) > 10*time.Second {
			fmt.Fprintf(os.Stderr, "bench-fleet: %s: %d of %d members see all\n", time.Since(start).Round(time.Second), n, p.members)
			progress = time.Now()
		}
		time.Sleep(200 * time.Millisecond)
	}
	converge := time.Since(start)
	// The members' first tables (empty) are still being gossiped, and
	// each member joins again through its join members for a push/pull
	// interval after joining: let the queues drain and the joins end,
	// so that the run measures a fleet at work, not one starting.
	settled := time.Now().Add(time.Duration(float64(30*time.Second)*p.scale) + time.Second)
	for drain := time.Now().Add(time.Minute); time.Now().Before(drain) && s.queued().total > 0 || time.Now().Before(settled); {
		time.Sleep(200 * time.Millisecond)
	}
	fmt.Fprintf(os.Stderr, "bench-fleet: converged in %s, queues drained and joins done in %s; running %s\n",
		converge.Round(time.Second), (time.Since(start) - converge).Round(time.Second), p.duration)
	s.net.setLoss(p.loss)
	s.mu.Lock()
	s.falseDead = 0
	s.mu.Unlock()

	r := s.run(t)
	r.converge = converge
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	r.heap = ms.HeapInuse
	r.rss = rss()
	return r
}

// run drives flips, the rolling restart and the crashes for the run's
// duration, then waits for the last flips to land.
func (s *sim) run(t *testing.T) *simResult {
	p := s.p
	rng := rand.New(rand.NewPCG(1, 2))
	failing := map[string]bool{} // by key
	perOwner := make([]map[string]bool, p.members)
	for i := range perOwner {
		perOwner[i] = map[string]bool{}
	}
	set := func(key string, out bool) {
		o := s.owner[key]
		s.mu.Lock()
		if s.dead[o] {
			s.mu.Unlock()
			return
		}
		if old := s.pending[key]; old != nil {
			old.superseded = true
			s.done = append(s.done, old)
		}
		s.pending[key] = &flip{key: key, out: out, start: time.Now(), seen: map[int]time.Duration{}}
		s.mu.Unlock()
		if out {
			perOwner[o][key] = true
		} else {
			delete(perOwner[o], key)
		}
		failing[key] = out
		keys := make([]string, 0, len(perOwner[o]))
		for k := range perOwner[o] {
			keys = append(keys, k)
		}
		s.members[o].SetLocal(keys)
	}
	// Events in time order: random flips, restarts (out, then back 5 s
	// later), crashes spread over the first half.
	type event struct {
		at     time.Duration
		key    string
		toggle bool // a random flip: out if in, in if out
		out    bool // else: a restart's out, or its back
		kill   int  // else a member to crash, or -1
	}
	var events []event
	nFlips := int(float64(p.endpoints) * p.flips * p.duration.Minutes())
	for range nFlips {
		events = append(events, event{at: time.Duration(rng.Int64N(int64(p.duration))), key: s.checks[rng.IntN(p.endpoints)].Key, toggle: true, kill: -1})
	}
	nRestart := int(float64(p.endpoints) * p.restart * min(1, p.duration.Seconds()/p.over.Seconds()))
	for _, i := range rng.Perm(p.endpoints)[:nRestart] {
		at := time.Duration(rng.Int64N(int64(p.duration - 5*time.Second)))
		k := s.checks[i].Key
		events = append(events, event{at: at, key: k, out: true, kill: -1}, event{at: at + 5*time.Second, key: k, kill: -1})
	}
	for i := range p.kill {
		events = append(events, event{at: p.duration / 2 * time.Duration(i+1) / time.Duration(p.kill+1), kill: p.members - 1 - i})
	}
	slices.SortFunc(events, func(a, b event) int { return int(a.at - b.at) })
	// The counts, the CPU and the bytes are those of the events' time;
	// the latencies of the flips are followed after it too.
	before := s.stats()
	lost0, over0 := s.net.lost.Load(), s.net.overflow.Load()
	cpu0 := cpuTime()
	start := time.Now()
	stop := make(chan struct{})
	sampled := make(chan []queueSample)
	go s.sampleQueues(time.Second, stop, sampled)
	for _, e := range events {
		if d := time.Until(start.Add(e.at)); d > 0 {
			time.Sleep(d)
		}
		switch {
		case e.kill >= 0:
			s.crash(e.kill)
		case e.toggle:
			set(e.key, !failing[e.key])
		case failing[e.key] != e.out:
			set(e.key, e.out)
		}
	}
	close(stop)
	samples := <-sampled
	measured := time.Since(start)
	cpu := cpuTime() - cpu0
	delta := s.stats().combine(before, sub)
	lost, overflow := s.net.lost.Load()-lost0, s.net.overflow.Load()-over0
	// Let the last flips land (or not: they count as unseen).
	deadline := time.Now().Add(30 * time.Second * time.Duration(max(1, int(p.scale))))
	for time.Now().Before(deadline) {
		s.mu.Lock()
		n := len(s.pending)
		s.mu.Unlock()
		if n == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	r := s.result(measured, len(events))
	r.queue, r.cpu, r.delta, r.bytesOut, r.lost, r.overflow = samples, cpu, delta, delta.BytesOut, lost, overflow
	return r
}

// queueSample is the members' broadcast queues at one moment.
type queueSample struct {
	total, max, members int
}

// queued sums the alive members' broadcast queues.
func (s *sim) queued() queueSample {
	var q queueSample
	for i, f := range s.members {
		s.mu.Lock()
		dead := s.dead[i]
		s.mu.Unlock()
		if dead {
			continue
		}
		n := f.queue.NumQueued()
		q.total += n
		q.max = max(q.max, n)
		q.members++
	}
	return q
}

// sampleQueues samples the queues every period until stop, then hands
// the samples over.
func (s *sim) sampleQueues(period time.Duration, stop <-chan struct{}, out chan<- []queueSample) {
	var samples []queueSample
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-stop:
			out <- samples
			return
		case <-t.C:
			samples = append(samples, s.queued())
		}
	}
}

// stats sums the members' counts, the crashed ones' included (their
// counts stop).
func (s *sim) stats() Stats {
	var sum Stats
	for _, f := range s.members {
		sum = sum.combine(f.Stats(), add)
	}
	return sum
}

// combine applies op to the counts the simulation reads, field by field.
func (a Stats) combine(b Stats, op func(x, y uint64) uint64) Stats {
	return Stats{BytesOut: op(a.BytesOut, b.BytesOut), StreamBytesOut: op(a.StreamBytesOut, b.StreamBytesOut),
		Received: op(a.Received, b.Received), Applied: op(a.Applied, b.Applied), Published: op(a.Published, b.Published),
		Merged: op(a.Merged, b.Merged), Relayed: op(a.Relayed, b.Relayed), Sent: op(a.Sent, b.Sent),
		SentBytes: op(a.SentBytes, b.SentBytes), PushPulls: op(a.PushPulls, b.PushPulls)}
}

func add(x, y uint64) uint64 { return x + y }
func sub(x, y uint64) uint64 { return x - y }

// crash stops member i without a leave, as a crashed node.
func (s *sim) crash(i int) {
	s.mu.Lock()
	s.dead[i] = true
	s.deathStart[s.names[i]] = time.Now()
	s.deathSeen[s.names[i]] = map[int]time.Duration{}
	for k, f := range s.pending {
		if s.owner[k] == i {
			delete(s.pending, k) // its flips die with it
			f.superseded = true
			s.done = append(s.done, f)
		}
	}
	s.mu.Unlock()
	s.members[i].Shutdown()
}

// seen records what member i's new view shows of the pending flips and
// the crashed members.
func (s *sim) seen(i int, v *View) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead[i] {
		return
	}
	alive := len(s.members) - len(s.dead)
	for k, f := range s.pending {
		if _, ok := f.seen[i]; ok {
			continue
		}
		if _, out := v.Out[k]; out == f.out {
			f.seen[i] = now.Sub(f.start)
			if len(f.seen) >= alive {
				delete(s.pending, k)
				s.done = append(s.done, f)
			}
		}
	}
	for name, st := range s.deathStart {
		seen := s.deathSeen[name]
		if _, ok := seen[i]; ok {
			continue
		}
		if w, ok := v.Out[s.checks[slices.Index(s.names, name)].Key]; ok && w.Reason == ReasonDead {
			seen[i] = now.Sub(st)
		}
	}
}

// converged counts the members that see all alive.
func (s *sim) converged() int {
	n := 0
	for _, f := range s.members {
		if f.ml.NumMembers() == len(s.members) {
			n++
		}
	}
	return n
}

// deathCounter is a slog handler that counts members declared dead that
// were not crashed: false deaths.
type deathCounter struct{ s *sim }

func (h *deathCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h *deathCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "gossip: member dead" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "node" {
			h.s.mu.Lock()
			if _, crashed := h.s.deathStart[a.Value.String()]; !crashed {
				h.s.falseDead++
			}
			h.s.mu.Unlock()
		}
		return true
	})
	return nil
}
func (h *deathCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *deathCounter) WithGroup(string) slog.Handler      { return h }

type simResult struct {
	elapsed, converge, cpu time.Duration
	events                 int
	flips, superseded      int
	unseen                 int
	p99, all               []time.Duration // per flip: seen by 99 %, by all
	deathAll               []time.Duration
	deathMissing           int
	falseDead              int
	bytesOut               uint64
	heap, rss              uint64
	lost, overflow         uint64
	queue                  queueSamples
	delta                  Stats // the members' counts over the run
}

func (s *sim) result(elapsed time.Duration, events int) *simResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &simResult{elapsed: elapsed, events: events, falseDead: s.falseDead}
	alive := len(s.members) - len(s.dead)
	all := append(slices.Clone(s.done), func() []*flip {
		var out []*flip
		for _, f := range s.pending {
			out = append(out, f)
		}
		return out
	}()...)
	for _, f := range all {
		if f.superseded {
			r.superseded++
			continue
		}
		r.flips++
		var ds []time.Duration
		for _, d := range f.seen {
			ds = append(ds, d)
		}
		slices.Sort(ds)
		if n99 := int(math.Ceil(0.99 * float64(alive))); len(ds) >= n99 {
			r.p99 = append(r.p99, ds[n99-1])
		}
		if len(ds) >= alive {
			r.all = append(r.all, ds[alive-1])
		} else {
			r.unseen++
		}
	}
	for name, seen := range s.deathSeen {
		_ = name
		if len(seen) >= alive {
			var m time.Duration
			for _, d := range seen {
				m = max(m, d)
			}
			r.deathAll = append(r.deathAll, m)
		} else {
			r.deathMissing++
		}
	}
	slices.Sort(r.p99)
	slices.Sort(r.all)
	slices.Sort(r.deathAll)
	return r
}

func pct(ds []time.Duration, q float64) string {
	if len(ds) == 0 {
		return "–"
	}
	return ds[min(len(ds)-1, int(q*float64(len(ds))))].Round(time.Millisecond).String()
}

func (r *simResult) markdown(p simParams) string {
	n := float64(p.members)
	d := r.delta
	secs := r.elapsed.Seconds()
	suspicion := time.Duration(float64(4*time.Second) * p.scale * math.Max(1, math.Log10(n)))
	rows := [][2]string{
		{"members (one process, in-memory network)", fmt.Sprintf("%d, timers ×%g", p.members, p.scale)},
		{"endpoints; flipping per minute; rolling restart", fmt.Sprintf("%d; %g %%; %g %% of pods over %s, each out 5 s", p.endpoints, p.flips*100, p.restart*100, p.over)},
		{"packet loss", fmt.Sprintf("%.1f %% (%d packets lost); %d more lost to full receive queues", p.loss*100, r.lost, r.overflow)},
		{"run (rates, bytes and CPU are of it)", fmt.Sprintf("%s after convergence in %s; %d events", r.elapsed.Round(time.Second), r.converge.Round(time.Second), r.events)},
		{"update rate", fmt.Sprintf("%.1f flips/s, %.1f table versions/s fleet-wide", float64(r.flips+r.superseded)/secs, float64(d.Published)/secs)},
		{"flip seen by 99 % of members: p50 / p99 / max", fmt.Sprintf("%s / %s / %s", pct(r.p99, .5), pct(r.p99, .99), pct(r.p99, 1))},
		{"flip seen by all: p50 / p99 / max", fmt.Sprintf("%s / %s / %s", pct(r.all, .5), pct(r.all, .99), pct(r.all, 1))},
		{"flips measured; superseded before all saw them; never seen by all; seen by all after 5 s", fmt.Sprintf("%d; %d; %d; %d", r.flips, r.superseded, r.unseen, r.slow(5*time.Second))},
		{"tables applied by gossip; by push/pull or join (before gossip brought them)", fmt.Sprintf("%d; %d", d.Applied-d.Merged, d.Merged)},
		{"parts sent per part queued (own and relayed); receipts per part applied", fmt.Sprintf("%.1f (limit %d); %.1f", ratio(d.Sent, d.Published+d.Relayed), retransmits(p.members, p.retransmit), ratio(d.Received, d.Applied-d.Merged))},
		{"crashed member's endpoints out on all: each", fmt.Sprintf("%v (suspicion bound %s to %s; %d not on all)", roundAll(r.deathAll), suspicion.Round(time.Millisecond), (6 * suspicion).Round(time.Second), r.deathMissing)},
		{"false deaths over the run", strconv.Itoa(r.falseDead)},
		{"bytes sent per member per second (all gossip, encrypted)", fmt.Sprintf("%.0f B/s", float64(r.bytesOut)/n/secs)},
		{"of which: table parts (unencrypted); push/pull and joins (TCP); push/pulls per member per minute", fmt.Sprintf("%.0f B/s; %.0f B/s; %.1f", float64(d.SentBytes)/n/secs, float64(d.StreamBytesOut)/n/secs, float64(d.PushPulls)/n/secs*60)},
		{"CPU per member", fmt.Sprintf("%.1f ms/s (%.0f %% of a core for the process)", float64(r.cpu.Milliseconds())/n/secs, r.cpu.Seconds()/secs*100)},
		{"memory per member", fmt.Sprintf("heap %.1f MB, RSS %.1f MB (process / members)", float64(r.heap)/n/1e6, float64(r.rss)/n/1e6)},
		{"broadcast queue per member, mean (max), each tenth of the run", r.queueSeries()},
		{"queue growing", r.growing()},
	}
	out := "| fleet simulation | |\n|---|---|\n"
	for _, row := range rows {
		out += "| " + row[0] + " | " + row[1] + " |\n"
	}
	return out
}

// summary is one line of the summary over flip rates (bench-fleet
// FLIPS=a,b,c): the rate, the latencies, the queues, the bytes.
func (r *simResult) summary(p simParams) string {
	secs := r.elapsed.Seconds()
	return fmt.Sprintf("summary| %g %% | %.1f | %.1f | %s / %s | %s / %s | %d | %s | %.0f B/s |", p.flips*100,
		float64(r.flips+r.superseded)/secs, float64(r.delta.Published)/secs, pct(r.p99, .5), pct(r.p99, .99),
		pct(r.all, .5), pct(r.all, .99), r.delta.Merged, r.growing(), float64(r.bytesOut)/float64(p.members)/secs)
}

// slow counts the flips seen by all later than d, or never.
func (r *simResult) slow(d time.Duration) int {
	i, _ := slices.BinarySearch(r.all, d)
	return len(r.all) - i + r.unseen
}

// queueSeries is the mean and largest queue per member for each tenth
// of the run.
func (r *simResult) queueSeries() string {
	var out []string
	for i := range 10 {
		part := queueSamples(r.queue[i*len(r.queue)/10 : (i+1)*len(r.queue)/10])
		if len(part) == 0 {
			continue
		}
		mean, mx := part.mean(), 0
		for _, q := range part {
			mx = max(mx, q.max)
		}
		out = append(out, fmt.Sprintf("%.0f (%d)", mean, mx))
	}
	return strings.Join(out, ", ")
}

// growing tells whether the queues grew over the run: full when the
// mean queue per member over a tenth of the run came near one entry per
// owner (a newer version replaces a queued one: the queues can grow no
// further, and updates wait instead); yes when the mean over the last
// third is more than a quarter (and more than one entry) above the
// middle third's.
func (r *simResult) growing() string {
	n := len(r.queue)
	if n < 10 {
		return "– (run too short)"
	}
	mid, last := queueSamples(r.queue[n/3:2*n/3]).mean(), queueSamples(r.queue[2*n/3:]).mean()
	members := r.queue[n-1].members
	top := 0.0
	for i := range 10 {
		top = max(top, queueSamples(r.queue[i*n/10:(i+1)*n/10]).mean())
	}
	switch {
	case top > 0.8*float64(members):
		return fmt.Sprintf("full (%.0f per member in a tenth of the run: about one per owner)", top)
	case last > 1.25*mid+1:
		return fmt.Sprintf("yes (%.1f → %.1f per member)", mid, last)
	}
	return fmt.Sprintf("no (%.1f → %.1f per member)", mid, last)
}

type queueSamples []queueSample

// mean is the mean queue per member.
func (qs queueSamples) mean() float64 {
	var total, members int
	for _, q := range qs {
		total += q.total
		members += q.members
	}
	return float64(total) / float64(max(1, members))
}

func ratio(a, b uint64) float64 { return float64(a) / float64(max(1, b)) }

// retransmits is memberlist's RetransmitMult · ceil(log10(n+1)).
func retransmits(n, mult int) int {
	if mult == 0 {
		mult = memberlist.DefaultLANConfig().RetransmitMult
	}
	return mult * int(math.Ceil(math.Log10(float64(n+1))))
}

func roundAll(ds []time.Duration) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Round(100*time.Millisecond).String())
	}
	return out
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rss is the process's resident memory (0 when /proc says nothing).
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	var size, res uint64
	fmt.Sscan(string(b), &size, &res)
	return res * uint64(os.Getpagesize())
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func envFloat(name string, def float64) float64 {
	if v, err := strconv.ParseFloat(os.Getenv(name), 64); err == nil {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return v
	}
	return def
}
