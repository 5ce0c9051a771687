// Package stages reports how long the steps of one netspec command take,
// for performance work: with NETSPEC_STAGES=1 in the environment, each
// step ends with a line "stage NAME N ms" on standard error, so that a
// slow apply can be taken apart (load, compile, render, encode, the
// kernel's batch, the read-back, the state dir) without a profiler, whose
// samples miss most of a long system call. Off, a step costs a branch.
package stages

import (
	"fmt"
	"io"
	"os"
	"time"
)

// out is where the lines go; nil when NETSPEC_STAGES is not set.
var out io.Writer = func() io.Writer {
	if os.Getenv("NETSPEC_STAGES") != "" {
		return os.Stderr
	}
	return nil
}()

// Start begins the step name; calling the function it returns ends it.
func Start(name string) func() {
	if out == nil {
		return func() {}
	}
	t := time.Now()
	return func() {
		fmt.Fprintf(out, "stage %-18s %6d ms\n", name, time.Since(t).Milliseconds())
	}
}
