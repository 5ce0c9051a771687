// Package heapprof writes the heap profiles of the memory benchmarks
// (render's and the compiler's MemoRetained, the daemon's TestWatchMemory),
// which each take the file's path from an environment variable, so that
// what a figure counts can be read with go tool pprof.
package heapprof

import (
	"os"
	"runtime/pprof"
	"testing"
)

// Write writes the heap profile of the test process to path, failing tb
// on an error.
func Write(tb testing.TB, path string) {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("heap profile: %s", path)
}
