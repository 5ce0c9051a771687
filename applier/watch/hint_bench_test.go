package watch

import (
	"path/filepath"
	"testing"
	"time"

	"netspec.dev/netspec/internal/gen/gentree"
)

// BenchmarkReloadHinted is BenchmarkReload as the watcher reloads for a
// file event: the reloader is told the path changed (the rename's
// target, named in the tree's real directory as fsnotify names it), so
// that it neither rescans the directories nor walks the tree
// (schema.Options.Changed). BenchmarkReload times the full path, as after
// SIGHUP or an event that the paths do not describe; its first reload also
// reads the whole tree again (see below).
func BenchmarkReloadHinted(b *testing.B) {
	tree, cfg := benchTree(b, 10000)
	real, err := filepath.EvalSymlinks(tree)
	if err != nil {
		b.Fatal(err)
	}
	ed := newEditor(b, tree, cfg)
	r := newReloader(tree)
	start := time.Now()
	r.once(b) // cold: fills the cache and the parser's memo
	// The stat memo trusts a file only once it is 2 s older than the Load
	// that read it (schema's racyMargin): the next Load reads the whole
	// new tree again. A watcher that has run for a while trusts its files;
	// so does this one after a second load.
	time.Sleep(2*time.Second + 100*time.Millisecond - time.Since(start))
	k := 0
	rename, _ := ed.prepare(b, ed.service(k))
	k++
	if err := rename(); err != nil {
		b.Fatal(err)
	}
	r.once(b)
	var total [len(stageNames)]time.Duration
	for b.Loop() {
		b.StopTimer()
		i := ed.service(k)
		rename, _ := ed.prepare(b, i)
		k++
		if err := rename(); err != nil {
			b.Fatal(err)
		}
		r.changed = []string{filepath.Join(real, filepath.FromSlash(gentree.ServiceFile(cfg, i)))}
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
