package schema_test

// Benchmarks of Load on generated trees (internal/gen/gentree): cold (no
// cache); warm as `netspec watch` reloads (in-memory cache, with and without
// the stat memo, one file replaced per reload); and warm from the disk
// cache, as a second `netspec validate` run, with no file or one file
// changed (an editor loop). Each disk iteration opens the cache again, as a
// new process does, and saves it, as the CLI does. scripts/bench runs them
// and the CLI side by side.
//
//	go test ./schema -run '^$' -bench . -benchtime 3x

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"netspec.dev/netspec/internal/cache"
	"netspec.dev/netspec/internal/gen/gentree"
	"netspec.dev/netspec/schema"
)

var benchSizes = []int{1000, 10000}

func benchConfig(services int) gentree.Config {
	return gentree.Config{Services: services, PodsPerService: 2, Seed: 1}
}

// benchTree writes a tree of the given size into a temporary directory.
// With b.Loop, a benchmark function runs once, so each benchmark generates
// its tree once (10,000 services take a few seconds).
func benchTree(b *testing.B, services int) string {
	b.Helper()
	root := filepath.Join(b.TempDir(), "tree")
	if err := gentree.Write(root, benchConfig(services)); err != nil {
		b.Fatal(err)
	}
	return root
}

func load(b *testing.B, root string, c schema.Cache) *schema.Tree {
	b.Helper()
	return loadOpt(b, root, schema.Options{Cache: c})
}

func loadOpt(b *testing.B, root string, opt schema.Options) *schema.Tree {
	b.Helper()
	t, err := schema.Load(root, opt)
	if err != nil {
		b.Fatal(err)
	}
	if n := t.Diags.Errors(); n > 0 {
		b.Fatalf("%d errors, first: %s", n, t.Diags[0])
	}
	return t
}

// peakHeap samples the heap in use while a benchmark runs and reports the
// largest value seen as MiB-heap (HeapInuse, sampled every 10 ms and at the
// end). The process's peak RSS is for scripts/bench to measure: runtime
// totals such as MemStats.Sys only grow over the sub-benchmarks of a run.
type peakHeap struct {
	stop chan struct{}
	done chan struct{}
	max  uint64
}

func startPeak() *peakHeap {
	runtime.GC()
	p := &peakHeap{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			p.max = max(p.max, ms.HeapInuse)
			select {
			case <-p.stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return p
}

func (p *peakHeap) report(b *testing.B) {
	close(p.stop)
	<-p.done
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	p.max = max(p.max, ms.HeapInuse)
	b.ReportMetric(float64(p.max)/(1<<20), "MiB-heap")
}

func BenchmarkLoadCold(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			root := benchTree(b, n)
			b.ReportAllocs()
			p := startPeak()
			b.ResetTimer()
			for b.Loop() {
				load(b, root, nil)
			}
			b.StopTimer()
			p.report(b)
		})
	}
}

// warmCache fills a fresh cache directory for root and returns it.
func warmCache(b *testing.B, root string) string {
	b.Helper()
	dir := b.TempDir()
	d, err := cache.OpenDisk(dir, root)
	if err != nil {
		b.Fatal(err)
	}
	load(b, root, d)
	if err := d.Save(); err != nil {
		b.Fatal(err)
	}
	return dir
}

// BenchmarkLoadWarm reloads a tree of 10,000 services as `netspec watch`
// does: an in-memory cache holds every result, and before each Load one
// file is replaced by rename, as editors save. With the stat memo, the
// other files are stat'ed, not read.
func BenchmarkLoadWarm(b *testing.B) {
	const n = 10000
	root := benchTree(b, n)
	file := filepath.Join(root, filepath.FromSlash(gentree.ServiceFile(benchConfig(n), n/2)))
	orig, err := os.ReadFile(file)
	if err != nil {
		b.Fatal(err)
	}
	i := 0
	replace := func() {
		i++
		tmp := file + ".tmp"
		if err := os.WriteFile(tmp, fmt.Appendf(append([]byte(nil), orig...), "# edit %d\n", i), 0o644); err != nil {
			b.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			b.Fatal(err)
		}
	}
	for _, memo := range []bool{false, true} {
		b.Run(fmt.Sprintf("memo=%v", memo), func(b *testing.B) {
			c := cache.NewMemory()
			opt := schema.Options{Cache: c}
			if memo {
				opt.Stats = schema.NewStatCache()
			}
			// The memo trusts only files older than a margin (2 s) at the
			// Load that saw them: reload until it knows all but one.
			for deadline := time.Now().Add(10 * time.Second); ; {
				replace()
				t := loadOpt(b, root, opt)
				c.Sweep()
				if !memo || t.Unread == t.Files-1 || time.Now().After(deadline) {
					break
				}
				time.Sleep(500 * time.Millisecond)
			}
			b.ReportAllocs()
			p := startPeak()
			b.ResetTimer()
			for b.Loop() {
				b.StopTimer()
				replace()
				b.StartTimer()
				t := loadOpt(b, root, opt)
				c.Sweep()
				if t.Cached != t.Files-1 {
					b.Fatalf("%d of %d files cached, want all but one", t.Cached, t.Files)
				}
				if memo && t.Unread != t.Files-1 {
					b.Fatalf("%d of %d files unread, want all but one", t.Unread, t.Files)
				}
			}
			b.StopTimer()
			p.report(b)
		})
	}
}

// BenchmarkLoadWarmDisk loads an unchanged tree from the disk cache.
func BenchmarkLoadWarmDisk(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			root := benchTree(b, n)
			dir := warmCache(b, root)
			b.ReportAllocs()
			p := startPeak()
			b.ResetTimer()
			for b.Loop() {
				d, err := cache.OpenDisk(dir, root)
				if err != nil {
					b.Fatal(err)
				}
				t := load(b, root, d)
				if err := d.Save(); err != nil {
					b.Fatal(err)
				}
				if t.Cached != t.Files {
					b.Fatalf("%d of %d files cached", t.Cached, t.Files)
				}
			}
			b.StopTimer()
			p.report(b)
		})
	}
}

func BenchmarkLoadWarmOneChanged(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			root := benchTree(b, n)
			cfg := benchConfig(n)
			file := filepath.Join(root, filepath.FromSlash(gentree.ServiceFile(cfg, n/2)))
			orig, err := os.ReadFile(file)
			if err != nil {
				b.Fatal(err)
			}
			dir := warmCache(b, root)
			b.ReportAllocs()
			p := startPeak()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				b.StopTimer()
				i++
				edited := fmt.Appendf(append([]byte(nil), orig...), "# edit %d\n", i)
				if err := os.WriteFile(file, edited, 0o644); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				d, err := cache.OpenDisk(dir, root)
				if err != nil {
					b.Fatal(err)
				}
				t := load(b, root, d)
				if err := d.Save(); err != nil {
					b.Fatal(err)
				}
				if t.Cached != t.Files-1 {
					b.Fatalf("%d of %d files cached, want all but one", t.Cached, t.Files)
				}
			}
			b.StopTimer()
			p.report(b)
		})
	}
}

// BenchmarkLoadRetained loads a tree of 10,000 services as `netspec watch`
// does (an in-memory cache, swept, and a StatCache) and reports what the
// daemon keeps of it between reloads: retained-MB is the live heap after
// runtime.GC with the Tree, the cache and the StatCache alive, minus the
// heap before the Load. A measure, never asserted.
func BenchmarkLoadRetained(b *testing.B) {
	const n = 10000
	root := benchTree(b, n)
	var retained float64
	live := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		before := live()
		b.StartTimer()
		c := cache.NewMemory()
		stats := schema.NewStatCache()
		t := loadOpt(b, root, schema.Options{Cache: c, Stats: stats})
		c.Sweep()
		b.StopTimer()
		retained = float64(live()-before) / (1 << 20)
		runtime.KeepAlive(t)
		runtime.KeepAlive(c)
		runtime.KeepAlive(stats)
		b.StartTimer()
	}
	b.ReportMetric(retained, "retained-MB")
}
