package daemon

import "testing"

func TestGCDue(t *testing.T) {
	const MB = 1 << 20
	for _, tc := range []struct {
		name                   string
		need, goal, live, heap uint64
		want                   bool
	}{
		{name: "just collected", need: 7 * MB, goal: 200 * MB, live: 100 * MB, heap: 100 * MB, want: false},
		{name: "the next reload stays short of 45/64 of the way", need: 7 * MB, goal: 200 * MB, live: 100 * MB, heap: 163 * MB, want: false},
		{name: "the next reload goes past it", need: 7 * MB, goal: 200 * MB, live: 100 * MB, heap: 164 * MB, want: true},
		{name: "already past it", need: 1 * MB, goal: 200 * MB, live: 100 * MB, heap: 190 * MB, want: true},
		{name: "a big reload collects early", need: 60 * MB, goal: 200 * MB, live: 100 * MB, heap: 111 * MB, want: true},
		{name: "GOGC=off: the goal is near the top of uint64", need: 7 * MB, goal: 8946670875744906740, live: 100 * MB, heap: 190 * MB, want: false},
		{name: "a goal whose distance times 45 wraps around", need: 7 * MB, goal: 409927646187292081, live: 100 * MB, heap: 190 * MB, want: false},
		{name: "no goal known", need: 7 * MB, goal: 0, live: 0, heap: 190 * MB, want: false},
		{name: "a counter that went back", need: ^uint64(0) - 5, goal: 200 * MB, live: 100 * MB, heap: 150 * MB, want: false},
	} {
		if got := gcDue(tc.need, tc.goal, tc.live, tc.heap); got != tc.want {
			t.Errorf("%s: gcDue(need %d, goal %d, live %d, heap %d) = %v, want %v",
				tc.name, tc.need, tc.goal, tc.live, tc.heap, got, tc.want)
		}
	}
}

// TestIdleGCReads: the runtime has every metric idleGC reads, so that it
// is not silently off.
func TestIdleGCReads(t *testing.T) {
	allocs, goal, live, heap := readGC()
	if allocs == 0 || goal == 0 || heap == 0 {
		t.Fatalf("readGC() = allocs %d, goal %d, live %d, heap %d: a metric is missing", allocs, goal, live, heap)
	}
}
