package probe

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"netspec.dev/netspec/plan"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// target is a tcpSocket check of addr with the kubelet's default timing,
// changed by mod.
func target(addr string, mod func(*plan.Probe)) Target {
	pr := plan.Probe{
		Action: plan.ProbeTCPSocket, Port: 80,
		PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3,
	}
	if mod != nil {
		mod(&pr)
	}
	return Target{Addr: netip.MustParseAddr(addr), Probe: pr}
}

// scripted is a Check whose results are scripted per address: each probe
// takes the next result of its address (nil is a success), a success when
// none is left. When block is set, each probe first reports on entered and
// then waits for a value on release (buffered: a release may come first)
// or for its context to end.
type scripted struct {
	clock *FakeClock
	block bool

	mu      sync.Mutex
	results map[string][]error
	calls   []call
	running int
	max     int

	entered chan string
	release chan struct{}
}

type call struct {
	addr string
	at   time.Time
}

func newScripted(clock *FakeClock) *scripted {
	return &scripted{
		clock:   clock,
		results: map[string][]error{},
		entered: make(chan string, 100),
		release: make(chan struct{}, 10),
	}
}

func (s *scripted) script(addr string, results ...error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.results[addr] = append(s.results[addr], results...)
}

func (s *scripted) check(ctx context.Context, t Target) (string, error) {
	addr := t.Addr.String()
	s.mu.Lock()
	s.calls = append(s.calls, call{addr: addr, at: s.clock.Now()})
	s.running++
	s.max = max(s.max, s.running)
	var err error
	if r := s.results[addr]; len(r) > 0 {
		err, s.results[addr] = r[0], r[1:]
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.running--
		s.mu.Unlock()
	}()
	if s.block {
		s.entered <- addr
		select {
		case <-s.release:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	return "", err
}

func (s *scripted) callCount(addr string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		if addr == "" || c.addr == addr {
			n++
		}
	}
	return n
}

var errDown = errors.New("down")

// longTimeout keeps a blocked probe from timing out while a test advances
// the clock over other checks' ticks.
func longTimeout(pr *plan.Probe) { pr.TimeoutSeconds = 3600 }

// step advances the clock and waits for the probes it started.
func step(p *Prober, clk *FakeClock, d time.Duration) {
	clk.Advance(d)
	p.WaitIdle()
}

func statusOf(t *testing.T, p *Prober, key string) Status {
	t.Helper()
	for _, st := range p.Snapshot() {
		if st.Target.Key() == key {
			return st
		}
	}
	t.Fatalf("no status for %q", key)
	return Status{}
}

func TestThresholds(t *testing.T) {
	ok, fail := error(nil), errDown
	tests := []struct {
		name             string
		successThreshold int32
		failureThreshold int32
		results          []error
		// wantReady is Ready after each probe.
		wantReady   []bool
		wantChanges int
	}{
		{
			name:             "successes keep it ready",
			successThreshold: 1, failureThreshold: 3,
			results:   []error{ok, ok},
			wantReady: []bool{true, true},
		},
		{
			name:             "failureThreshold failures take it out, one success brings it back",
			successThreshold: 1, failureThreshold: 3,
			results:     []error{fail, fail, fail, fail, ok},
			wantReady:   []bool{true, true, false, false, true},
			wantChanges: 2,
		},
		{
			name:             "a success resets the failures",
			successThreshold: 1, failureThreshold: 3,
			results:     []error{fail, fail, ok, fail, fail, fail},
			wantReady:   []bool{true, true, true, true, true, false},
			wantChanges: 1,
		},
		{
			name:             "successThreshold successes in a row bring it back",
			successThreshold: 2, failureThreshold: 1,
			results:     []error{fail, ok, fail, ok, ok, ok},
			wantReady:   []bool{false, false, false, false, true, true},
			wantChanges: 2,
		},
		{
			name:             "failureThreshold 1",
			successThreshold: 1, failureThreshold: 1,
			results:     []error{fail, ok, fail},
			wantReady:   []bool{false, true, false},
			wantChanges: 3,
		},
		{
			name:             "zero thresholds are the kubelet's defaults 1 and 3",
			successThreshold: 0, failureThreshold: 0,
			results:     []error{fail, fail, fail, ok},
			wantReady:   []bool{true, true, false, true},
			wantChanges: 2,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := NewFakeClock(t0)
			s := newScripted(clk)
			tg := target("10.0.0.1", func(pr *plan.Probe) {
				pr.SuccessThreshold, pr.FailureThreshold = tc.successThreshold, tc.failureThreshold
			})
			key := tg.Key()
			s.script("10.0.0.1", tc.results...)
			var (
				p       *Prober
				mu      sync.Mutex
				changes []bool // Ready as OnChange sees it
				observe []error
			)
			p = New(Options{
				Clock: clk,
				Check: s.check,
				OnChange: func() {
					r := p.Ready(key) // would deadlock if called with the lock held
					_ = p.Snapshot()
					mu.Lock()
					changes = append(changes, r)
					mu.Unlock()
				},
				Observe: func(got Target, action plan.ProbeAction, d time.Duration, err error) {
					if got.Key() != key || action != plan.ProbeTCPSocket {
						t.Errorf("Observe(%v, %q)", got, action)
					}
					mu.Lock()
					observe = append(observe, err)
					mu.Unlock()
				},
			})
			defer p.Close()
			p.Set([]Target{tg})
			if !p.Ready(key) {
				t.Fatal("not ready before any probe: a check starts ready")
			}
			if st := statusOf(t, p, key); st.Probed || !st.Ready || !st.Since.Equal(t0) {
				t.Fatalf("status before any probe = %+v", st)
			}
			step(p, clk, offset(key, 10*time.Second))
			var wantChanges []bool
			for i, want := range tc.wantReady {
				if i > 0 {
					step(p, clk, 10*time.Second)
				}
				if got := p.Ready(key); got != want {
					t.Fatalf("after probe %d (%v): Ready = %v, want %v", i+1, tc.results[i], got, want)
				}
				if i == 0 && want != true || i > 0 && want != tc.wantReady[i-1] {
					wantChanges = append(wantChanges, want)
					if st := statusOf(t, p, key); !st.Since.Equal(clk.Now()) {
						t.Errorf("after probe %d: Since = %v, want the flip's time %v", i+1, st.Since, clk.Now())
					}
				}
			}
			if got := s.callCount(""); got != len(tc.results) {
				t.Errorf("probes = %d, want %d", got, len(tc.results))
			}
			mu.Lock()
			defer mu.Unlock()
			if len(changes) != tc.wantChanges || fmt.Sprint(changes) != fmt.Sprint(wantChanges) {
				t.Errorf("OnChange saw Ready %v, want %v", changes, wantChanges)
			}
			if fmt.Sprint(observe) != fmt.Sprint(tc.results) {
				t.Errorf("Observe errors = %v, want %v", observe, tc.results)
			}
			// The consecutive counters of the last run of equal results.
			last := tc.results[len(tc.results)-1]
			run := 0
			for i := len(tc.results) - 1; i >= 0 && (tc.results[i] == nil) == (last == nil); i-- {
				run++
			}
			st := statusOf(t, p, key)
			wantS, wantF := run, 0
			if last != nil {
				wantS, wantF = 0, run
			}
			if !st.Probed || st.Successes != wantS || st.Failures != wantF {
				t.Errorf("status = %+v, want Probed, Successes %d, Failures %d", st, wantS, wantF)
			}
			hadFailure := false
			for _, r := range tc.results {
				hadFailure = hadFailure || r != nil
			}
			if hadFailure != (st.LastError == "down") {
				t.Errorf("LastError = %q after results %v", st.LastError, tc.results)
			}
		})
	}
}

func TestInitialDelayAndPeriod(t *testing.T) {
	tests := []struct {
		name   string
		delay  int32
		period int32
	}{
		{name: "no delay", delay: 0, period: 10},
		{name: "delay longer than the period", delay: 30, period: 10},
		{name: "delay and a 1 s period", delay: 5, period: 1},
		{name: "zero period is the kubelet's 10 s", delay: 0, period: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := NewFakeClock(t0)
			s := newScripted(clk)
			p := New(Options{Clock: clk, Check: s.check})
			defer p.Close()
			tg := target("10.0.0.2", func(pr *plan.Probe) { pr.InitialDelaySeconds, pr.PeriodSeconds = tc.delay, tc.period })
			period := time.Duration(tc.period) * time.Second
			if period == 0 {
				period = 10 * time.Second
			}
			off := offset(tg.Key(), period)
			first := time.Duration(tc.delay)*time.Second + off
			p.Set([]Target{tg})
			if first > 0 {
				step(p, clk, first-time.Millisecond)
				if n := s.callCount(""); n != 0 {
					t.Fatalf("%d probes 1 ms before InitialDelaySeconds + offset (%v)", n, first)
				}
				step(p, clk, time.Millisecond)
			} else {
				step(p, clk, 0)
			}
			for i := 1; i <= 3; i++ {
				if n := s.callCount(""); n != i {
					t.Fatalf("at %v: %d probes, want %d", clk.Now().Sub(t0), n, i)
				}
				if at := s.calls[i-1].at; !at.Equal(t0.Add(first + time.Duration(i-1)*period)) {
					t.Fatalf("probe %d at %v, want %v", i, at.Sub(t0), first+time.Duration(i-1)*period)
				}
				step(p, clk, period-time.Millisecond)
				if n := s.callCount(""); n != i {
					t.Fatalf("at %v: %d probes before the period is over, want %d", clk.Now().Sub(t0), n, i)
				}
				step(p, clk, time.Millisecond)
			}
		})
	}
}

func TestSpread(t *testing.T) {
	// The offsets of 2,000 checks fall within the period and fill each
	// tenth of it about evenly.
	const n = 2000
	period := 10 * time.Second
	buckets := make([]int, 10)
	for i := range n {
		tg := target(fmt.Sprintf("10.1.%d.%d", i/256, i%256), nil)
		off := offset(tg.Key(), period)
		if off < 0 || off >= period {
			t.Fatalf("offset(%v) = %v, outside [0, %v)", tg.Addr, off, period)
		}
		buckets[off/time.Second]++
	}
	for i, b := range buckets {
		if b < n/10*3/4 || b > n/10*5/4 {
			t.Errorf("%d of %d checks have their first probe in second %d of 10: not spread (%v)", b, n, i, buckets)
		}
	}

	// The prober fires each check at its offset, one check at a time.
	clk := NewFakeClock(t0)
	s := newScripted(clk)
	p := New(Options{Clock: clk, Check: s.check})
	defer p.Close()
	var targets []Target
	for i := range 20 {
		targets = append(targets, target(fmt.Sprintf("10.2.0.%d", i), nil))
	}
	p.Set(targets)
	sort.Slice(targets, func(i, j int) bool {
		return offset(targets[i].Key(), period) < offset(targets[j].Key(), period)
	})
	for i, tg := range targets {
		off := offset(tg.Key(), period)
		step(p, clk, t0.Add(off).Sub(clk.Now()))
		if n := s.callCount(""); n < i+1 {
			t.Fatalf("at offset %v: %d probes, want %d", off, n, i+1)
		}
		if n := s.callCount(tg.Addr.String()); n != 1 {
			t.Fatalf("at offset %v: %v probed %d times, want 1", off, tg.Addr, n)
		}
	}
	if n := s.callCount(""); n != len(targets) {
		t.Fatalf("%d probes in the first period, want %d", n, len(targets))
	}
}

func TestSet(t *testing.T) {
	clk := NewFakeClock(t0)
	s := newScripted(clk)
	p := New(Options{Clock: clk, Check: s.check})
	defer p.Close()
	a, b, c := target("10.0.0.1", nil), target("10.0.0.2", nil), target("10.0.0.3", nil)
	for _, tg := range []Target{a, b} {
		s.script(tg.Addr.String(), errDown, errDown, errDown)
	}
	// A duplicate is one check.
	p.Set([]Target{a, b, a})
	if n := len(p.Snapshot()); n != 2 {
		t.Fatalf("%d checks for a, b, a; want 2", n)
	}
	for range 3 {
		step(p, clk, 10*time.Second)
	}
	for _, tg := range []Target{a, b} {
		if p.Ready(tg.Key()) {
			t.Fatalf("%v ready after three failures", tg.Addr)
		}
	}
	if got, want := p.Failing(), map[string]Status{a.Key(): statusOf(t, p, a.Key()), b.Key(): statusOf(t, p, b.Key())}; !reflect.DeepEqual(got, want) || len(got) != 2 || got[a.Key()].Ready {
		t.Errorf("Failing after a and b failed = %v, want %v", got, want)
	}
	before := statusOf(t, p, a.Key())
	nextA := p.checks[a.Key()].next
	callsB := s.callCount("10.0.0.2")

	p.Set([]Target{c, a})
	if got := statusOf(t, p, a.Key()); !reflect.DeepEqual(got, before) {
		t.Errorf("kept check a: status %+v, want %+v", got, before)
	}
	if got := p.checks[a.Key()].next; !got.Equal(nextA) {
		t.Errorf("kept check a: next probe at %v, want %v", got, nextA)
	}
	if !p.Ready(b.Key()) {
		t.Error("removed check b: not ready; unknown keys are ready")
	}
	if got, want := p.Failing(), map[string]Status{a.Key(): before}; !reflect.DeepEqual(got, want) {
		t.Errorf("Failing after b was removed = %v, want %v", got, want)
	}
	if st := statusOf(t, p, c.Key()); !st.Ready || st.Probed || !st.Since.Equal(clk.Now()) {
		t.Errorf("new check c: %+v", st)
	}
	var keys []string
	for _, st := range p.Snapshot() {
		keys = append(keys, st.Target.Addr.String())
	}
	if want := []string{"10.0.0.1", "10.0.0.3"}; fmt.Sprint(keys) != fmt.Sprint(want) {
		t.Errorf("Snapshot = %v, want %v sorted by key", keys, want)
	}
	for range 3 {
		step(p, clk, 10*time.Second)
	}
	if n := s.callCount("10.0.0.2"); n != callsB {
		t.Errorf("removed check b probed %d more times", n-callsB)
	}
	if n := s.callCount("10.0.0.1"); n != 6 {
		t.Errorf("kept check a probed %d times in 60 s of a 10 s period, want 6", n)
	}
	if n := s.callCount("10.0.0.3"); n != 3 {
		t.Errorf("new check c probed %d times in 30 s of a 10 s period, want 3", n)
	}
	if !p.Ready(a.Key()) {
		t.Error("a not ready after successes")
	}
	if got := p.Failing(); len(got) != 0 {
		t.Errorf("Failing after a passed again = %v, want none", got)
	}
}

func TestSetDiscardsRemovedResult(t *testing.T) {
	clk := NewFakeClock(t0)
	s := newScripted(clk)
	s.block = true
	changes := 0
	p := New(Options{Clock: clk, Check: s.check, MaxConcurrent: 1, OnChange: func() { changes++ }})
	defer p.Close()
	a := target("10.0.0.1", func(pr *plan.Probe) { pr.FailureThreshold, pr.TimeoutSeconds = 1, 3600 })
	s.script("10.0.0.1", errDown)
	p.Set([]Target{a})
	clk.Advance(10 * time.Second)
	<-s.entered
	p.Set(nil) // cancels the probe: the scripted check returns
	p.WaitIdle()
	if !p.Ready(a.Key()) || len(p.Snapshot()) != 0 || changes != 0 {
		t.Errorf("after a removed check's failure: Ready %v, Snapshot %v, OnChange calls %d", p.Ready(a.Key()), p.Snapshot(), changes)
	}
	if n := clk.Pending(); n != 0 {
		t.Errorf("%d timers armed with no check", n)
	}
}

func TestSetStopsRuns(t *testing.T) {
	// x ticks before y in each period; with one worker y queues behind x.
	x, y := target("10.0.0.1", longTimeout), target("10.0.0.2", longTimeout)
	if offset(x.Key(), 10*time.Second) > offset(y.Key(), 10*time.Second) {
		x, y = y, x
	}
	tests := []struct {
		name      string
		keep      Target
		wantCalls map[string]int
	}{
		{name: "removing the queued check drops its run", keep: x, wantCalls: map[string]int{x.Addr.String(): 1, y.Addr.String(): 0}},
		{name: "removing the running check cancels it, the queued one runs", keep: y, wantCalls: map[string]int{x.Addr.String(): 1, y.Addr.String(): 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := NewFakeClock(t0)
			s := newScripted(clk)
			s.block = true
			p := New(Options{Clock: clk, Check: s.check, MaxConcurrent: 1})
			defer p.Close()
			p.Set([]Target{x, y})
			clk.Advance(10 * time.Second)
			if got := <-s.entered; got != x.Addr.String() {
				t.Fatalf("first probe of %s, want %s", got, x.Addr)
			}
			p.Set([]Target{tc.keep})
			if tc.keep.Key() == y.Key() {
				<-s.entered // x was cancelled: y has the worker
			}
			s.release <- struct{}{}
			s.release <- struct{}{} // a spare: a wrongly started run ends too
			p.WaitIdle()
			for addr, want := range tc.wantCalls {
				if n := s.callCount(addr); n != want {
					t.Errorf("%s probed %d times, want %d", addr, n, want)
				}
			}
			if st := p.Snapshot(); len(st) != 1 || st[0].Target.Key() != tc.keep.Key() {
				t.Errorf("Snapshot %+v, want only %s", st, tc.keep.Addr)
			}
		})
	}
}

func TestConcurrencyBound(t *testing.T) {
	clk := NewFakeClock(t0)
	s := newScripted(clk)
	s.block = true
	p := New(Options{Clock: clk, Check: s.check, MaxConcurrent: 2})
	defer p.Close()
	var targets []Target
	for i := range 5 {
		targets = append(targets, target(fmt.Sprintf("10.0.0.%d", i+1), longTimeout))
	}
	p.Set(targets)
	clk.Advance(10 * time.Second) // every check's first tick
	<-s.entered
	<-s.entered
	p.mu.Lock()
	inflight, running, queued := p.inflight, p.running, len(p.queue)
	p.mu.Unlock()
	if inflight != 5 || running != 2 || queued != 3 {
		t.Fatalf("%d runs, %d running, %d queued; want 5, 2, 3", inflight, running, queued)
	}
	for range 3 {
		s.release <- struct{}{}
		<-s.entered // a queued run takes the free worker
	}
	s.release <- struct{}{}
	s.release <- struct{}{}
	p.WaitIdle()
	if n := s.callCount(""); n != 5 {
		t.Errorf("%d probes, want 5", n)
	}
	if s.max != 2 {
		t.Errorf("at most %d probes ran at once, want 2 (MaxConcurrent)", s.max)
	}
}

func TestBusyCheckSkipsTicks(t *testing.T) {
	clk := NewFakeClock(t0)
	s := newScripted(clk)
	s.block = true
	p := New(Options{Clock: clk, Check: s.check, MaxConcurrent: 1})
	defer p.Close()
	a, b := target("10.0.0.1", longTimeout), target("10.0.0.2", longTimeout)
	p.Set([]Target{a, b})
	clk.Advance(10 * time.Second)
	first := <-s.entered
	// One run holds the only worker, the other is queued; four more
	// periods add no run of either.
	clk.Advance(40 * time.Second)
	p.mu.Lock()
	inflight, skipped := p.inflight, p.skipped
	p.mu.Unlock()
	if inflight != 2 || skipped != 8 || s.callCount("") != 1 {
		t.Fatalf("runs %d, skipped ticks %d, probes %d; want 2, 8, 1", inflight, skipped, s.callCount(""))
	}
	s.release <- struct{}{}
	second := <-s.entered
	s.release <- struct{}{}
	p.WaitIdle()
	if first == second {
		t.Fatalf("%s probed twice while the other waited", first)
	}
	clk.Advance(10 * time.Second)
	for range 2 {
		<-s.entered
		s.release <- struct{}{}
	}
	p.WaitIdle()
	if n := s.callCount(""); n != 4 {
		t.Errorf("%d probes, want 4: one each per period again once idle", n)
	}
}

func TestTimeout(t *testing.T) {
	clk := NewFakeClock(t0)
	s := newScripted(clk)
	s.block = true
	var (
		mu  sync.Mutex
		got error
	)
	p := New(Options{Clock: clk, Check: s.check, Observe: func(_ Target, _ plan.ProbeAction, d time.Duration, err error) {
		mu.Lock()
		got = err
		mu.Unlock()
		if d != 2*time.Second {
			t.Errorf("observed duration %v, want the 2 s timeout", d)
		}
	}})
	defer p.Close()
	a := target("10.0.0.1", func(pr *plan.Probe) { pr.TimeoutSeconds = 2 })
	p.Set([]Target{a})
	clk.Advance(offset(a.Key(), 10*time.Second))
	<-s.entered // the timeout is armed before the probe starts
	clk.Advance(2*time.Second - time.Millisecond)
	// Not timed out yet: the run is still in flight.
	p.mu.Lock()
	inflight := p.inflight
	p.mu.Unlock()
	if inflight != 1 {
		t.Fatalf("probe ended before its timeout")
	}
	step(p, clk, time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if !errors.Is(got, ErrTimeout) {
		t.Fatalf("error %v, want ErrTimeout", got)
	}
	if st := statusOf(t, p, a.Key()); st.LastError != "probe timed out after 2s" || st.LastDuration != 2*time.Second || st.Failures != 1 {
		t.Errorf("status %+v", st)
	}
}

func TestClose(t *testing.T) {
	clk := NewFakeClock(t0)
	s := newScripted(clk)
	s.block = true
	observed := 0
	p := New(Options{Clock: clk, Check: s.check, MaxConcurrent: 1, OnChange: func() {},
		Observe: func(Target, plan.ProbeAction, time.Duration, error) { observed++ }})
	a, b := target("10.0.0.1", longTimeout), target("10.0.0.2", longTimeout)
	p.Set([]Target{a, b})
	clk.Advance(10 * time.Second)
	<-s.entered
	p.Close() // aborts the running probe and drops the queued one
	if n := clk.Pending(); n != 0 {
		t.Errorf("%d timers armed after Close", n)
	}
	if n := len(p.Snapshot()); n != 0 || observed != 0 {
		t.Errorf("after Close: %d checks, %d probes observed", n, observed)
	}
	p.Set([]Target{a})
	clk.Advance(time.Hour)
	if n := s.callCount(""); n != 1 || len(p.Snapshot()) != 0 {
		t.Errorf("Set after Close started checks: %d probes", n)
	}
	p.Close() // twice is fine
}

func TestKey(t *testing.T) {
	base := target("10.0.0.1", func(pr *plan.Probe) {
		pr.Action, pr.Path = plan.ProbeHTTPGet, "/healthz"
		pr.Headers = []plan.ProbeHeader{{Name: "X", Value: "1"}}
	})
	tests := []struct {
		name string
		mod  func(*Target)
		same bool
	}{
		{name: "equal values", mod: func(*Target) {}, same: true},
		{name: "headers copied", mod: func(t *Target) { t.Probe.Headers = []plan.ProbeHeader{{Name: "X", Value: "1"}} }, same: true},
		{name: "address", mod: func(t *Target) { t.Addr = netip.MustParseAddr("10.0.0.2") }},
		{name: "port", mod: func(t *Target) { t.Probe.Port = 81 }},
		{name: "path", mod: func(t *Target) { t.Probe.Path = "/" }},
		{name: "header value", mod: func(t *Target) { t.Probe.Headers = []plan.ProbeHeader{{Name: "X", Value: "2"}} }},
		{name: "period", mod: func(t *Target) { t.Probe.PeriodSeconds = 5 }},
		{name: "action", mod: func(t *Target) { t.Probe.Action = plan.ProbeTCPSocket }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			other := base
			other.Probe.Headers = append([]plan.ProbeHeader(nil), base.Probe.Headers...)
			tc.mod(&other)
			if same := other.Key() == base.Key(); same != tc.same {
				t.Errorf("keys equal = %v, want %v", same, tc.same)
			}
			if !strings.HasPrefix(other.Key(), other.Addr.String()+"\x00") {
				t.Errorf("key %q does not start with the address", other.Key())
			}
		})
	}
}

// TestPortNameNotFound: a probe whose port name is no port of its
// container (plan.Probe.PortName, port 0) fails at every period with an
// error that names the port, as the kubelet's "port NAME not found",
// without running the check (no connection to port 0), with the network
// checker as with any other; failureThreshold failures take it out.
func TestPortNameNotFound(t *testing.T) {
	for _, tc := range []struct {
		name   string
		action plan.ProbeAction
		custom bool // a Check of the test; else the network checker
	}{
		{name: "tcpSocket, scripted check", action: plan.ProbeTCPSocket, custom: true},
		{name: "tcpSocket, network checker", action: plan.ProbeTCPSocket},
		{name: "httpGet, network checker", action: plan.ProbeHTTPGet},
		{name: "grpc, network checker", action: plan.ProbeGRPC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := NewFakeClock(t0)
			s := newScripted(clk)
			tg := target("127.0.0.1", func(pr *plan.Probe) {
				pr.Action, pr.Port, pr.PortName = tc.action, 0, "metrics"
				if tc.action == plan.ProbeHTTPGet {
					pr.Scheme, pr.Path = "HTTP", "/"
				}
			})
			key := tg.Key()
			var mu sync.Mutex
			var observed []error
			o := Options{Clock: clk, Observe: func(_ Target, _ plan.ProbeAction, _ time.Duration, err error) {
				mu.Lock()
				observed = append(observed, err)
				mu.Unlock()
			}}
			if tc.custom {
				o.Check = s.check
			}
			p := New(o)
			defer p.Close()
			p.Set([]Target{tg})
			step(p, clk, offset(key, 10*time.Second))
			for range 2 {
				step(p, clk, 10*time.Second)
			}
			if p.Ready(key) {
				t.Errorf("ready after 3 failures")
			}
			st := statusOf(t, p, key)
			if want := "port metrics not found: no port of the container has that name (the kubelet fails this probe too)"; st.LastError != want || st.Failures != 3 {
				t.Errorf("status = %+v, want LastError %q and 3 failures", st, want)
			}
			if n := s.callCount(""); n != 0 {
				t.Errorf("the check ran %d times; want none", n)
			}
			mu.Lock()
			defer mu.Unlock()
			var nf PortNotFoundError
			if len(observed) != 3 || !errors.As(observed[0], &nf) || nf != "metrics" {
				t.Errorf("observed %v, want 3 PortNotFoundError(metrics)", observed)
			}
		})
	}
}
