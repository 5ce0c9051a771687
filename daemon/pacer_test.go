package daemon

import (
	"testing"
	"time"
)

func TestPacer(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	// Steps are events (at ms) and reloads (fire at ms); each event's
	// wait is checked.
	type step struct {
		at   int  // ms since the start
		fire bool // a reload starts at `at` (else an event comes)
		wait int  // for an event: the wait the pacer asks for, in ms
	}
	for _, tc := range []struct {
		name   string
		window time.Duration
		steps  []step
	}{
		{"lone change waits only the settle", ms(200), []step{
			{at: 1000, wait: 10},
			{at: 1010, fire: true},
		}},
		{"events of one save are gathered", ms(200), []step{
			{at: 1000, wait: 10},
			{at: 1003, wait: 10},
			{at: 1008, wait: 10},
			{at: 1018, fire: true},
		}},
		{"a burst waits at most the window", ms(200), []step{
			{at: 1000, wait: 10},
			{at: 1100, wait: 10},
			{at: 1195, wait: 5},
			{at: 1200, fire: true},
		}},
		{"reloads stay a window apart", ms(200), []step{
			{at: 1000, wait: 10},
			{at: 1010, fire: true},
			{at: 1050, wait: 160}, // next reload no sooner than 1210
			{at: 1100, wait: 110},
			{at: 1210, fire: true},
			{at: 1500, wait: 10}, // quiet again: at once
		}},
		{"a short window shortens the settle", ms(4), []step{
			{at: 1000, wait: 4},
			{at: 1004, fire: true},
			{at: 1005, wait: 4},
		}},
		{"no window: at once", 0, []step{
			{at: 1000, wait: 0},
			{at: 1000, fire: true},
			{at: 1000, wait: 0},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPacer(tc.window)
			base := time.Unix(1_700_000_000, 0)
			var first time.Time
			for i, s := range tc.steps {
				now := base.Add(ms(s.at))
				if s.fire {
					if !p.pending() {
						t.Fatalf("step %d: fire with nothing pending", i)
					}
					if got := p.fire(now); !got.Equal(first) {
						t.Errorf("step %d: fire returned first event %v, want %v", i, got.Sub(base), first.Sub(base))
					}
					first = time.Time{}
					if p.pending() {
						t.Errorf("step %d: still pending after fire", i)
					}
					continue
				}
				if first.IsZero() {
					first = now
				}
				if got := p.event(now); got != ms(s.wait) {
					t.Errorf("step %d: event at %d ms: wait %v, want %v", i, s.at, got, ms(s.wait))
				}
			}
		})
	}
}
