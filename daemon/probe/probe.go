// Package probe is the readiness prober of the netspec daemon: it runs the
// readiness probes of a plan (plan.Endpoint.Probes) from the node against
// the endpoints' addresses and keeps, for each distinct check, whether it
// passes. In Kubernetes the kubelet runs a Pod's readinessProbe and the
// endpoints follow within seconds; without an API server nobody else
// would, and a crashed backend would keep its share of new connections
// until a person edits the tree.
//
// The semantics are the kubelet's (pkg/kubelet/prober and pkg/probe in
// kubernetes/kubernetes): an httpGet probe succeeds on a status from 200
// to 399, follows redirects to the same host only (a redirect elsewhere
// is a success with a warning), does not verify HTTPS certificates and
// uses no keep-alive; a tcpSocket probe succeeds when it connects; a grpc
// probe asks grpc.health.v1.Health/Check and succeeds on SERVING; each
// probe has TimeoutSeconds. FailureThreshold consecutive failures make a
// check not ready, then SuccessThreshold consecutive successes make it
// ready again.
//
// Where it differs from the kubelet, and why:
//   - A check starts ready, where the kubelet starts a container not
//     ready. The tree's readiness stands until probes say otherwise: a
//     daemon (re)start must not take every endpoint of the node out of
//     the data plane for a period while the first probes run.
//   - Probes go to the endpoint's address, never to a DNS name: the
//     probe's host only names the Host header (and TLS server name).
//   - The first probe of each check is offset within its period by a
//     hash of the check's key (the kubelet draws a random delay after a
//     restart): a daemon start with 20,000 checks does not fire them
//     together, and the schedule is reproducible. Probes start on 100 ms
//     slots, so that one wake-up of the process starts all the probes of
//     a slot.
//   - Each distinct check (Target.Key: address and probe) runs once per
//     period however many Services select the endpoint, at most
//     MaxConcurrent probes are in flight, and a check whose previous run
//     still waits for a worker or runs skips its tick, so that a slow
//     fleet never piles up runs.
//   - A tcpSocket probe closes its connection with a reset (SO_LINGER 0)
//     where the kubelet lingers 1 s: it sent no data, and the reset
//     spares the FIN exchange and a TIME-WAIT socket per probe.
//   - httpGet speaks HTTP/1.1 over its own connection instead of
//     net/http's client (same rules, a fifth less CPU at scale), and the
//     probe host is only a name (see above).
//   - tcpSocket and http httpGet probes run in one event loop (one
//     goroutine, its own epoll instance; see reactor), HTTPS and grpc in
//     workers; MaxConcurrent bounds the probes in flight in both
//     together. The loop's httpGet sockets set no SO_LINGER (the kubelet
//     sets 1 s): on Linux that only makes close wait for the FIN's
//     acknowledgment, with the same packets, and the loop must not wait.
//
// Cost: scripts/bench-probe runs 20,000 checks with a 10 s period (2,000
// probes a second) against a fleet of listeners in a network namespace;
// docs/performance.md ("The prober's own cost") has its figures. Most of a
// probe's cost is the kernel's connect and close, so a fleet's load is
// nodes × endpoints / period.
package probe

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/netip"
	"sort"
	"sync"
	"time"

	"netspec.dev/netspec/plan"
)

// Target is one distinct check: an address and the probe to run against it.
type Target struct {
	Addr  netip.Addr
	Probe plan.Probe
}

// Key identifies the check: targets with equal keys are one check, probed
// once per period.
func (t Target) Key() string {
	return t.Addr.String() + "\x00" + t.Probe.Key()
}

// Options configure a Prober. The zero value probes over the network with
// the real clock.
type Options struct {
	// Clock is the time source; nil is the real clock.
	Clock Clock
	// MaxConcurrent bounds the probes in flight at once (connecting or
	// waiting for an answer, in the event loop or in a worker); 0 is
	// DefaultMaxConcurrent.
	MaxConcurrent int
	// OnChange is called after a check's readiness flips. It is never
	// called with the Prober's lock held (it may call Ready and
	// Snapshot), never concurrently with itself, and calls may be merged:
	// one call can follow several flips. It must not call Close or
	// WaitIdle. Set does not call it.
	OnChange func()
	// Observe is called after each finished probe with its action,
	// duration and error (nil on success, also on a success with a
	// warning), for metrics. It may be called concurrently. A probe cut
	// short by Set (removing its check) or Close is not observed.
	Observe func(t Target, action plan.ProbeAction, d time.Duration, err error)
	// Check runs one probe; nil runs the network probes (httpGet,
	// tcpSocket, grpc). A non-empty warning with a nil error is a success
	// that deserves a note (an httpGet redirect not followed). ctx ends at
	// the probe's timeout, or when Set removes the check or Close stops
	// it (that result is discarded). For tests.
	Check func(ctx context.Context, t Target) (warning string, err error)
}

// DefaultMaxConcurrent is the bound on probes in flight when
// Options.MaxConcurrent is 0.
const DefaultMaxConcurrent = 64

// The kubelet's defaults for the probe's timing fields, used when a field
// is not positive (the compiler fills them in; this is a safety net).
const (
	defaultPeriod           = 10 * time.Second
	defaultTimeout          = 1 * time.Second
	defaultSuccessThreshold = 1
	defaultFailureThreshold = 3
)

// ErrTimeout is wrapped by the error of a probe that did not finish within
// its TimeoutSeconds.
var ErrTimeout = errors.New("probe timed out")

// Status is the state of one check, for status output and metrics.
type Status struct {
	Target Target
	// Ready is false only while the check is failing: from
	// FailureThreshold consecutive failures until SuccessThreshold
	// consecutive successes.
	Ready bool
	// Since is when Ready last flipped, or when the check was added.
	Since time.Time
	// LastError is the error of the most recent failed probe, "" when
	// none failed; it stays after later successes (Failures is 0 then),
	// so that a check coming back still says why it went out.
	LastError string
	// LastWarning is the warning of the most recent probe, "" when it had
	// none (an httpGet redirect to another host, counted as a success).
	LastWarning string
	// Failures and Successes count the consecutive failed and successful
	// probes up to now; one of them is 0.
	Failures, Successes int
	// LastDuration is how long the most recent probe took, and LastProbe
	// when it finished (zero before the first).
	LastDuration time.Duration
	LastProbe    time.Time
	// Probed reports whether at least one probe has finished.
	Probed bool
}

// Prober runs readiness checks on their schedules and keeps their state.
// Its methods are safe for concurrent use.
type Prober struct {
	clock    Clock
	check    func(ctx context.Context, t Target) (string, error)
	onChange func()
	observe  func(Target, plan.ProbeAction, time.Duration, error)

	max  int            // MaxConcurrent: the most probes in flight
	wg   sync.WaitGroup // the workers
	done chan struct{}  // closed when the notifier has returned
	// net runs the network probes when Options.Check is nil; the event
	// loop (reactor) then runs the tcpSocket and http httpGet ones.
	net *netChecker

	mu   sync.Mutex
	cond *sync.Cond // signals flips, finished runs and Close
	work *sync.Cond // signals queued runs and Close to the workers
	// checks by key; failing those of them that are not ready, so that
	// Failing costs what fails, not what is checked.
	checks  map[string]*check
	failing map[string]bool
	// queue holds the checks whose tick came, waiting for a free place
	// in flight (MaxConcurrent), in tick order; a check is in it at most
	// once (busy).
	queue []*check
	// slots holds the checks whose next tick is due at a time (Unix
	// nanoseconds, a multiple of slot), each time with one timer: the
	// checks due together tick in one call.
	slots map[int64]*slotTicks
	// ready holds the runs let in flight that wait for a worker.
	ready    []*check
	reactor  *reactor // started by the first run it takes; nil before
	noLoop   bool     // the event loop could not start: workers run all
	workers  int      // started; they run until Close
	idle     int      // workers waiting for work
	running  int      // probes in flight: in the event loop, ready or in a worker
	closed   bool
	inflight int  // runs queued or running
	dirty    bool // a flip OnChange has not been called for
	notified bool // OnChange is running
	skipped  int  // ticks skipped because the check's previous run was busy
}

// check is the state of one Target.
type check struct {
	key     string
	target  Target // immutable
	st      Status
	period  time.Duration
	timeout time.Duration
	// timeoutErr is the error of a probe that timed out, made once.
	timeoutErr error
	success    int // SuccessThreshold
	failure    int // FailureThreshold

	next    time.Time   // when its next tick is due: a slot in p.slots
	busy    bool        // a run is queued or running
	cancel  func(error) // ends the running probe with its cause, nil when none runs
	removed bool        // dropped by Set or Close: results are discarded

	// The request of an httpGet probe in the event loop, and its bytes,
	// made by its first run.
	httpReq      *http.Request
	httpReqBytes []byte
}

// errStopped ends the probe of a check that Set removed or Close stopped.
var errStopped = errors.New("check stopped")

// New returns a Prober with no checks; Set gives it some. Close stops it.
func New(o Options) *Prober {
	p := &Prober{
		clock:    o.Clock,
		check:    o.Check,
		onChange: o.OnChange,
		observe:  o.Observe,
		checks:   map[string]*check{},
		slots:    map[int64]*slotTicks{},
		done:     make(chan struct{}),
	}
	if p.clock == nil {
		p.clock = realClock{}
	}
	if p.check == nil {
		p.net = newNetChecker()
		p.check = p.net.check
	}
	p.max = o.MaxConcurrent
	if p.max <= 0 {
		p.max = DefaultMaxConcurrent
	}
	p.cond = sync.NewCond(&p.mu)
	p.work = sync.NewCond(&p.mu)
	if p.onChange != nil {
		go p.notify()
	} else {
		close(p.done)
	}
	return p
}

// Set makes targets the checks to run from now on. A target whose key is
// new starts ready and is first probed after its InitialDelaySeconds plus
// its offset in the period; a check whose key is gone stops (its probe in
// flight is cancelled, a queued one dropped); a kept check keeps its state
// and schedule. Duplicate keys are one check. Set does not call OnChange:
// the caller knows what it removed.
func (p *Prober) Set(targets []Target) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	now := p.clock.Now()
	keep := make(map[string]*check, len(targets))
	for _, t := range targets {
		k := t.Key()
		if keep[k] != nil {
			continue
		}
		if c := p.checks[k]; c != nil {
			keep[k] = c
			continue
		}
		c := newCheck(t, k, now)
		c.next = onSlot(now.Add(time.Duration(t.Probe.InitialDelaySeconds)*time.Second + offset(k, c.period)))
		p.arm(c, now)
		keep[k] = c
	}
	for k, c := range p.checks {
		if keep[k] == nil {
			p.stop(c)
			delete(p.failing, k)
		}
	}
	p.checks = keep
}

// stop ends a check: no more ticks, its probe in flight is cancelled and
// its result discarded. The caller holds p.mu.
func (p *Prober) stop(c *check) {
	c.removed = true
	p.disarm(c)
	if c.cancel != nil {
		c.cancel(errStopped)
	}
}

func newCheck(t Target, key string, now time.Time) *check {
	c := &check{
		key:     key,
		target:  t,
		st:      Status{Target: t, Ready: true, Since: now},
		period:  seconds(t.Probe.PeriodSeconds, defaultPeriod),
		timeout: seconds(t.Probe.TimeoutSeconds, defaultTimeout),
		success: positive(t.Probe.SuccessThreshold, defaultSuccessThreshold),
		failure: positive(t.Probe.FailureThreshold, defaultFailureThreshold),
	}
	c.timeoutErr = fmt.Errorf("%w after %s", ErrTimeout, c.timeout)
	return c
}

func seconds(n int32, def time.Duration) time.Duration {
	if n <= 0 {
		return def
	}
	return time.Duration(n) * time.Second
}

func positive(n int32, def int) int {
	if n <= 0 {
		return def
	}
	return int(n)
}

// slot is the grain of the schedule: every probe starts on a multiple of
// it (in Unix time), so that the probes of a slot start together after
// one wake-up of the process instead of one each. Waking a sleeping
// process costs more than a probe on a node that probes thousands of
// endpoints (docs/performance.md, "The prober's own cost"); 100 ms keeps
// a period of 10 s spread over 100 slots.
const slot = 100 * time.Millisecond

// offset is where in its period a check's first probe falls: a hash of its
// key, in whole slots in [0, period), so that checks added together
// spread over the period, the same way on every start.
func offset(key string, period time.Duration) time.Duration {
	n := uint64(period / slot)
	if n == 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(key))
	return time.Duration(h.Sum64()%n) * slot
}

// onSlot is t rounded up to a multiple of slot in Unix time (t keeps its
// monotonic reading). Periods are whole seconds, so a check stays on
// slots.
func onSlot(t time.Time) time.Time {
	if r := time.Duration(t.UnixNano() % int64(slot)); r > 0 {
		return t.Add(slot - r)
	}
	return t
}

// slotTicks are the checks due at one time, and the timer that ticks them.
type slotTicks struct {
	checks []*check
	timer  Timer
}

// arm puts c in the slot of c.next, arming the slot's timer if it is the
// first check there. The caller holds p.mu.
func (p *Prober) arm(c *check, now time.Time) {
	key := c.next.UnixNano()
	s := p.slots[key]
	if s == nil {
		s = &slotTicks{}
		s.timer = p.clock.AfterFunc(c.next.Sub(now), func() { p.tickSlot(key) })
		p.slots[key] = s
	}
	s.checks = append(s.checks, c)
}

// disarm takes c out of its slot, stopping the slot's timer if it was the
// last check there. The caller holds p.mu.
func (p *Prober) disarm(c *check) {
	key := c.next.UnixNano()
	s := p.slots[key]
	if s == nil {
		return
	}
	for i, x := range s.checks {
		if x == c {
			s.checks = append(s.checks[:i], s.checks[i+1:]...)
			break
		}
	}
	if len(s.checks) == 0 {
		s.timer.Stop()
		delete(p.slots, key)
	}
}

// tickSlot is a slot's timer: it ticks the slot's checks, in the order
// they were armed, then lets their runs in flight.
func (p *Prober) tickSlot(key int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.slots[key]
	delete(p.slots, key)
	if p.closed || s == nil {
		return
	}
	now := p.clock.Now()
	for _, c := range s.checks {
		if !c.removed {
			p.tick(c, now)
		}
	}
	p.dispatch()
}

// tick is a check's turn: it arms the next tick, one period after this
// one, and queues a run unless the previous one is still busy. The caller
// holds p.mu and calls dispatch.
func (p *Prober) tick(c *check, now time.Time) {
	for !c.next.After(now) {
		c.next = c.next.Add(c.period)
	}
	p.arm(c, now)
	if c.busy {
		p.skipped++
		return
	}
	c.busy = true
	p.inflight++
	p.queue = append(p.queue, c)
}

// dispatch lets queued runs in flight, in tick order, while fewer than
// MaxConcurrent are: tcpSocket and http httpGet probes of the network
// checker to the event loop, the others to a worker. The caller holds
// p.mu.
func (p *Prober) dispatch() {
	for len(p.queue) > 0 && p.running < p.max && !p.closed {
		c := p.queue[0]
		p.queue[0] = nil
		p.queue = p.queue[1:]
		if c.removed { // by Set while queued
			c.busy = false
			p.inflight--
			p.cond.Broadcast()
			continue
		}
		p.running++
		if p.net != nil && !p.noLoop && reactorCheck(&c.target) {
			if p.reactor == nil {
				r, err := newReactor(p, p.net)
				if err != nil {
					p.noLoop = true // the workers run them, as they can
				}
				p.reactor = r
			}
			if p.reactor != nil {
				c.cancel = p.reactor.submit(c, p.clock.Now())
				continue
			}
		}
		p.ready = append(p.ready, c)
		switch {
		case p.idle > 0:
			p.work.Signal()
		case p.workers < p.max:
			p.workers++
			p.wg.Add(1)
			go p.worker()
		}
	}
}

// worker runs the probes let in flight for a worker, one at a time, until
// Close. At most MaxConcurrent workers exist; they are started on demand
// and kept, so that a probe costs no goroutine start or stack growth.
func (p *Prober) worker() {
	defer p.wg.Done()
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		for len(p.ready) == 0 && !p.closed {
			p.idle++
			p.work.Wait()
			p.idle--
		}
		if p.closed {
			return
		}
		c := p.ready[0]
		p.ready[0] = nil
		p.ready = p.ready[1:]
		if c.removed { // by Set since dispatch
			c.busy = false
			p.running--
			p.inflight--
			p.dispatch()
			p.cond.Broadcast()
			continue
		}
		ctx, cancel := context.WithCancelCause(context.Background())
		c.cancel = cancel
		p.mu.Unlock()

		p.run(ctx, cancel, c)

		p.mu.Lock()
		p.release(c)
	}
}

// release frees c's place in flight after a run and lets the next due check
// go. p.mu is held.
func (p *Prober) release(c *check) {
	c.cancel = nil
	c.busy = false
	p.running--
	p.inflight--
	p.dispatch()
	p.cond.Broadcast()
}

// finish takes the result of a run in the event loop, started at start:
// warning and err, or its cause when it was cut short (errStopped, or
// c.timeoutErr). As a worker's run, it records and observes the result,
// then frees its place in flight.
func (p *Prober) finish(c *check, start time.Time, warning string, err, cause error) {
	if cause != errStopped {
		d := p.clock.Now().Sub(start)
		if cause != nil {
			err = cause
		}
		if err != nil {
			warning = ""
		}
		p.record(c, warning, err, d)
		if p.observe != nil {
			p.observe(c.target, c.target.Probe.Action, d, err)
		}
	}
	p.mu.Lock()
	p.release(c)
	p.mu.Unlock()
}

// run probes once within the timeout and records the result. ctx ends at
// the timeout (cancel's cause c.timeoutErr) or when the check is stopped
// (errStopped).
func (p *Prober) run(ctx context.Context, cancel context.CancelCauseFunc, c *check) {
	t := c.target
	timer := p.clock.AfterFunc(c.timeout, func() { cancel(c.timeoutErr) })
	start := p.clock.Now()
	var warning string
	var err error
	if t.Probe.PortName != "" {
		err = PortNotFoundError(t.Probe.PortName)
	} else {
		warning, err = p.check(ctx, t)
	}
	d := p.clock.Now().Sub(start)
	timer.Stop()
	cause := context.Cause(ctx)
	cancel(nil)
	if cause == errStopped {
		return // removed or closing: not a result
	}
	if err != nil && cause == c.timeoutErr {
		err = c.timeoutErr
	}
	if err != nil {
		warning = ""
	}
	p.record(c, warning, err, d)
	if p.observe != nil {
		p.observe(t, t.Probe.Action, d, err)
	}
}

// PortNotFoundError is the failure of a probe whose port name is no port
// of its container (plan.Probe.PortName): it fails at every period, as the
// kubelet fails it, without touching the network.
type PortNotFoundError string

// Error says which port, as the kubelet's "port NAME not found".
func (e PortNotFoundError) Error() string {
	return fmt.Sprintf("port %s not found: no port of the container has that name (the kubelet fails this probe too)", string(e))
}

// record applies one result to the check's counters and thresholds.
func (p *Prober) record(c *check, warning string, err error, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || c.removed {
		return
	}
	st := &c.st
	st.Probed = true
	st.LastDuration = d
	st.LastProbe = p.clock.Now()
	st.LastWarning = warning
	flip := false
	if err != nil {
		st.LastError = err.Error()
		st.Failures++
		st.Successes = 0
		flip = st.Ready && st.Failures >= c.failure
	} else {
		st.Successes++
		st.Failures = 0
		flip = !st.Ready && st.Successes >= c.success
	}
	if !flip {
		return
	}
	st.Ready = !st.Ready
	st.Since = p.clock.Now()
	if st.Ready {
		delete(p.failing, c.key)
	} else {
		if p.failing == nil {
			p.failing = map[string]bool{}
		}
		p.failing[c.key] = true
	}
	if p.onChange != nil {
		p.dirty = true
		p.cond.Broadcast()
	}
}

// notify calls OnChange after flips, outside the lock, one call at a time.
func (p *Prober) notify() {
	defer close(p.done)
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		for !p.dirty && !p.closed {
			p.cond.Wait()
		}
		if p.closed {
			return
		}
		p.dirty = false
		p.notified = true
		p.mu.Unlock()
		p.onChange()
		p.mu.Lock()
		p.notified = false
		p.cond.Broadcast()
	}
}

// Ready reports whether the check with this key passes: false only while
// it is failing (see Status.Ready). Unknown keys are ready.
func (p *Prober) Ready(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.checks[key]
	return c == nil || c.st.Ready
}

// Failing returns the status of each check that fails now (those Ready
// says false of), by key, in a map of its own: one lock and a copy of
// what fails, however many checks there are.
func (p *Prober) Failing() map[string]Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]Status, len(p.failing))
	for k := range p.failing {
		out[k] = p.checks[k].st
	}
	return out
}

// Snapshot returns the status of every check, sorted by key.
func (p *Prober) Snapshot() []Status {
	p.mu.Lock()
	keys := make([]string, 0, len(p.checks))
	for k := range p.checks {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]Status, len(keys))
	for i, k := range keys {
		out[i] = p.checks[k].st
	}
	p.mu.Unlock()
	return out
}

// WaitIdle blocks until no probe is waiting or running and OnChange has
// been called for every flip so far. It is for tests with a FakeClock,
// after Advance: with a probe that waits for the fake clock (a timeout)
// it blocks until another goroutine advances the clock.
func (p *Prober) WaitIdle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.inflight > 0 || p.dirty || p.notified {
		if p.closed && p.inflight == 0 {
			return
		}
		p.cond.Wait()
	}
}

// Close stops every check, aborts the probes in flight and waits for them
// and for a running OnChange to return. The Prober is then empty: Ready
// reports every key ready, Set does nothing.
func (p *Prober) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	for _, c := range p.checks {
		p.stop(c)
	}
	p.checks = map[string]*check{}
	for _, s := range p.slots {
		s.timer.Stop()
	}
	p.slots = map[int64]*slotTicks{}
	for _, c := range p.queue {
		c.busy = false
		p.inflight--
	}
	p.queue = nil
	for _, c := range p.ready {
		c.busy = false
		p.running--
		p.inflight--
	}
	p.ready = nil
	p.work.Broadcast()
	p.cond.Broadcast()
	r := p.reactor
	p.mu.Unlock()
	p.wg.Wait()
	if r != nil {
		r.close() // its runs end as stopped (stop cancelled them)
	}
	<-p.done
}
