package daemon

import "time"

// Settle is how long the tree must be quiet before a change is applied:
// long enough to gather the events of one save (create, write, rename) or
// of a checkout that writes its files back to back, short enough not to
// count in the network programming latency.
const Settle = 10 * time.Millisecond

// pacer decides when a reload runs after file events. A change after a
// quiet spell is applied as soon as the tree has been quiet for settle;
// a burst that goes on is applied at most window after its first event;
// and reloads for changes start at least window apart, so that a long
// checkout is applied at most once per window, whatever its length.
//
// kube-proxy paces its syncs the same way (minSyncPeriod): the first
// change goes at once, the ones that follow closely are batched. A
// trailing-only debounce would add the whole window to every change.
type pacer struct {
	settle time.Duration // quiet time before a reload
	window time.Duration // the debounce: the most a burst waits, the least between reloads

	first time.Time // first event of the pending burst; zero: none pending
	last  time.Time // start of the last reload for a change; zero: none yet
}

// newPacer returns a pacer of the given debounce window; a window ≤ 0
// reloads at once after every event.
func newPacer(window time.Duration) *pacer {
	window = max(window, 0)
	return &pacer{settle: min(Settle, window), window: window}
}

// event records a file event at now and returns how long from now the
// reload should run (the timer is reset to it).
func (p *pacer) event(now time.Time) time.Duration {
	if p.first.IsZero() {
		p.first = now
	}
	due := now.Add(p.settle)
	if limit := p.first.Add(p.window); due.After(limit) {
		due = limit // a burst that goes on waits no longer than the window
	}
	if !p.last.IsZero() {
		if next := p.last.Add(p.window); due.Before(next) {
			due = next // reloads stay a window apart
		}
	}
	return max(due.Sub(now), 0)
}

// pending tells whether events wait for a reload.
func (p *pacer) pending() bool { return !p.first.IsZero() }

// fire records that the reload starts at now and returns the time of the
// burst's first event.
func (p *pacer) fire(now time.Time) (first time.Time) {
	first, p.first, p.last = p.first, time.Time{}, now
	return first
}
