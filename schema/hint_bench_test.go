package schema_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"netspec.dev/netspec/internal/cache"
	"netspec.dev/netspec/internal/gen/gentree"
	"netspec.dev/netspec/schema"
)

// BenchmarkLoadChanged is BenchmarkLoadWarm with the stat memo, told the
// path replaced (Options.Changed), as `netspec watch` reloads for a file
// event: no walk, no stat of the other files.
func BenchmarkLoadChanged(b *testing.B) {
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
		tmp := filepath.Join(b.TempDir(), "tmp")
		if err := os.WriteFile(tmp, fmt.Appendf(append([]byte(nil), orig...), "# edit %d\n", i), 0o644); err != nil {
			b.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			b.Fatal(err)
		}
	}
	c := cache.NewMemory()
	opt := schema.Options{Cache: c, Stats: schema.NewStatCache()}
	// The memo trusts only files older than a margin (2 s) at the Load
	// that saw them: reload until it knows all but one.
	for deadline := time.Now().Add(10 * time.Second); ; {
		replace()
		t := loadOpt(b, root, opt)
		c.Sweep()
		if t.Unread == t.Files-1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	opt.Changed = []string{file}
	b.ReportAllocs()
	p := startPeak()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		replace()
		b.StartTimer()
		t := loadOpt(b, root, opt)
		c.Sweep()
		if t.Cached != t.Files-1 || t.Unread != t.Files-1 {
			b.Fatalf("%d of %d files cached, %d unread; want all but one", t.Cached, t.Files, t.Unread)
		}
	}
	b.StopTimer()
	p.report(b)
}
