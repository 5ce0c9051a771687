package probe

import (
	"container/heap"
	"sync"
	"time"
)

// Clock is the prober's time source: the real clock in the daemon, a
// FakeClock in tests, so that periods, initial delays and timeouts are
// tested without sleeping.
type Clock interface {
	// Now is the current time.
	Now() time.Time
	// AfterFunc calls f once d has passed, as time.AfterFunc does.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending call of Clock.AfterFunc.
type Timer interface {
	// Stop cancels the call; it reports whether the call was still pending.
	Stop() bool
}

// realClock is the Clock of the daemon: package time.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// FakeClock is a Clock that moves only when told to (Advance), for tests of
// this package and of the packages that use a Prober. It is safe for
// concurrent use.
type FakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers fakeTimers
	seq    uint64
}

var _ Clock = (*FakeClock)(nil)

// NewFakeClock returns a FakeClock that reads now until advanced.
func NewFakeClock(now time.Time) *FakeClock { return &FakeClock{now: now} }

// Now returns the fake time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc arms a timer that Advance fires once the fake time reaches
// Now()+d. d <= 0 fires at the next Advance (even Advance(0)).
func (c *FakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &fakeTimer{c: c, when: c.now.Add(d), seq: c.seq, f: f}
	heap.Push(&c.timers, t)
	return t
}

// Advance moves the fake time forward by d. Every timer that falls due on
// the way is fired in order of its due time (then of arming), with Now
// reading that due time, and synchronously: when Advance returns, each
// due function has returned (functions that start goroutines are not
// waited for). Timers armed by a fired function fire in the same Advance
// if they fall due before its end.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	for len(c.timers) > 0 && !c.timers[0].when.After(end) {
		t := heap.Pop(&c.timers).(*fakeTimer)
		if t.when.After(c.now) {
			c.now = t.when
		}
		c.mu.Unlock()
		t.f()
		c.mu.Lock()
	}
	c.now = end
	c.mu.Unlock()
}

// Pending is the number of armed timers that have neither fired nor been
// stopped.
func (c *FakeClock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// NextDue is the due time of the earliest armed timer, and whether there
// is one.
func (c *FakeClock) NextDue() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) == 0 {
		return time.Time{}, false
	}
	return c.timers[0].when, true
}

type fakeTimer struct {
	c     *FakeClock
	when  time.Time
	seq   uint64
	f     func()
	index int // in c.timers; -1 once fired or stopped
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.index < 0 {
		return false
	}
	heap.Remove(&t.c.timers, t.index)
	return true
}

// fakeTimers is a heap of timers, earliest (then first armed) first.
type fakeTimers []*fakeTimer

func (h fakeTimers) Len() int { return len(h) }
func (h fakeTimers) Less(i, j int) bool {
	if !h[i].when.Equal(h[j].when) {
		return h[i].when.Before(h[j].when)
	}
	return h[i].seq < h[j].seq
}
func (h fakeTimers) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *fakeTimers) Push(x any) {
	t := x.(*fakeTimer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *fakeTimers) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	t.index = -1
	*h = old[:len(old)-1]
	return t
}
