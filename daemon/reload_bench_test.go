package daemon

import (
	"path/filepath"
	"testing"
	"time"

	"netspec.dev/netspec/internal/gen/gentree"
)

// BenchmarkReload times, stage by stage and without root, what the
// watcher does for a one-file change of a 10,000-service tree (reloader),
// reading the whole tree as after SIGHUP or an event the paths do not
// describe: the stages before the kernel, then finishing the plan and
// rendering the state dir's files, which follow the kernel; the kernel
// update and the state dir's writes are left out. Each stage is reported
// as <stage>-ms per reload.
func BenchmarkReload(b *testing.B) { benchReload(b, false) }

// BenchmarkReloadHinted is BenchmarkReload as the watcher reloads for a
// file event: the reloader is told the path changed (the rename's target,
// named in the tree's real directory as fsnotify names it), so that it
// neither rescans the directories nor walks the tree
// (schema.Options.Changed).
func BenchmarkReloadHinted(b *testing.B) { benchReload(b, true) }

func benchReload(b *testing.B, hinted bool) {
	tree, cfg := benchTree(b, 10000)
	real, err := filepath.EvalSymlinks(tree)
	if err != nil {
		b.Fatal(err)
	}
	ed := newEditor(b, tree, cfg)
	r := newReloader(tree)
	k := 0
	change := func() {
		i := ed.service(k)
		rename, _ := ed.prepare(b, i)
		k++
		if err := rename(); err != nil {
			b.Fatal(err)
		}
		if hinted {
			r.changed = []string{filepath.Join(real, filepath.FromSlash(gentree.ServiceFile(cfg, i)))}
		}
	}
	start := time.Now()
	r.once(b) // cold: fills the cache and the memos
	// The stat memo trusts a file only once it is 2 s older than the Load
	// that read it (schema's racyMargin): the next Load reads the whole
	// new tree again. A watcher that has run for a while trusts its files;
	// so does this one after a second load.
	time.Sleep(2*time.Second + 100*time.Millisecond - time.Since(start))
	change()
	r.once(b)
	var total [len(stageNames)]time.Duration
	for b.Loop() {
		b.StopTimer()
		change()
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
