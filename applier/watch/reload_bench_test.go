package watch

import (
	"testing"
	"time"
)

// BenchmarkReload times, stage by stage and without root, what the
// watcher does for a one-file change of a 10,000-service tree (reloader):
// the stages before the kernel, then finishing the plan and rendering the
// state dir's files, which follow the kernel; the kernel update and the
// state dir's writes are left out. Each stage is reported as
// <stage>-ms per reload.
func BenchmarkReload(b *testing.B) {
	tree, cfg := benchTree(b, 10000)
	ed := newEditor(b, tree, cfg)
	r := newReloader(tree)
	r.once(b) // cold: fills the cache and the parser's memo
	var total [len(stageNames)]time.Duration
	k := 0
	for b.Loop() {
		b.StopTimer()
		rename, _ := ed.prepare(b, ed.service(k))
		k++
		if err := rename(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		for i, d := range r.once(b) {
			total[i] += d
		}
	}
	for i, name := range stageNames {
		if name != "kernel" && name != "state_dir" {
			b.ReportMetric(float64(total[i].Microseconds())/1000/float64(b.N), name+"-ms")
		}
	}
}
