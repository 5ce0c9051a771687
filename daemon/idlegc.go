package daemon

import (
	"runtime"
	rtmetrics "runtime/metrics"
	"sync/atomic"
)

// idleGC starts the garbage collections a reload would start, just after
// the reload before, while the watcher is idle. The runtime starts a
// collection when the heap has grown a share of the way to its goal
// (somewhere from 70 to 95 %); the reload whose allocations cross that
// line then pays for part of the marking and shares the CPU with the
// rest: a probe flip at 10,000 Services takes 4–6 ms, and 21–41 ms when
// it starts a collection (docs/performance.md, "A readiness probe flip"). So when
// the next reload, allocating as much as this one, could cross the
// earliest line, the collection is started now.
//
// Only after reloads applied by difference: a full sync allocates far
// more and returns its garbage's pages itself (debug.FreeOSMemory).
type idleGC struct {
	allocs  uint64      // bytes allocated before the current reload
	running atomic.Bool // a collection started here has not ended
}

// gcSamples are the runtime metrics idleGC reads.
var gcSamples = [...]string{
	"/gc/heap/allocs:bytes",              // allocated in all, ever
	"/gc/heap/goal:bytes",                // the heap size the runtime aims to collect at
	"/gc/heap/live:bytes",                // live after the last collection
	"/memory/classes/heap/objects:bytes", // the heap now, live and garbage
}

func readGC() (allocs, goal, live, heap uint64) {
	var s [len(gcSamples)]rtmetrics.Sample
	for i, name := range gcSamples {
		s[i].Name = name
	}
	rtmetrics.Read(s[:])
	for i := range s {
		if s[i].Value.Kind() != rtmetrics.KindUint64 {
			return 0, 0, 0, 0 // not this runtime's: never collect
		}
	}
	return s[0].Value.Uint64(), s[1].Value.Uint64(), s[2].Value.Uint64(), s[3].Value.Uint64()
}

// begin marks the start of a reload.
func (g *idleGC) begin() { g.allocs, _, _, _ = readGC() }

// end follows a reload applied by difference: it starts a collection in
// the background when the next such reload could start one (gcDue).
func (g *idleGC) end() {
	allocs, goal, live, heap := readGC()
	if g.running.Load() || !gcDue(allocs-g.allocs, goal, live, heap) {
		return
	}
	g.running.Store(true)
	go func() {
		runtime.GC()
		g.running.Store(false)
	}()
}

// gcDue tells whether a reload that allocates need bytes could make the
// runtime start a collection: whether the heap would grow past 45/64
// (70 %) of the way from the live heap to the goal, the earliest point at
// which the runtime starts one (minTriggerRatioNum in the runtime's
// mgcpacer.go).
func gcDue(need, goal, live, heap uint64) bool {
	if goal <= live || need > goal {
		return false // no goal known, or a counter that went back
	}
	// Divided first: with GOGC=off the goal is near the top of uint64.
	return heap+need >= live+(goal-live)/64*45
}
