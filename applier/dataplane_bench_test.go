package applier_test

import (
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"netspec.dev/netspec/applier"
	"netspec.dev/netspec/internal/gen/genplan"
	"netspec.dev/netspec/internal/testnet"
	"netspec.dev/netspec/internal/vmtest"
	"netspec.dev/netspec/plan"
)

// The data planes side by side, in the VM of internal/vmtest (the host
// kernel has no IPVS): scripts/bench-ipvs runs TestDataplaneBenchInVM,
// which runs these benchmarks there and prints their lines; the script
// makes the table.

// dataplanes are the modes compared.
var dataplanes = []struct {
	name string
	ipvs bool
}{{"nftables", false}, {"ipvs", true}}

// benchServices is the size of the compared plans: NETSPEC_BENCH_SERVICES
// services with two pods each, 1,000 by default.
func benchServices(b *testing.B) int {
	if s := os.Getenv("NETSPEC_BENCH_SERVICES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("NETSPEC_BENCH_SERVICES=%q: want a positive number", s)
		}
		return n
	}
	return 1000
}

// benchNode opens a Node of the mode in a new network namespace, without
// any state: a first Apply installs everything.
func benchNode(b *testing.B, withIPVS bool) *applier.Node {
	b.Helper()
	if !vmtest.InVM() {
		b.Skip("SKIPPED: the data planes are compared in the VM of internal/vmtest: scripts/bench-ipvs")
	}
	ns := testnet.New(b, "dpbench").NS("node")
	n, err := applier.Open(applier.Options{StateDir: b.TempDir(), NetNSFd: ns.Fd(), IPVS: withIPVS})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { n.Close() })
	return n
}

// BenchmarkDataplaneFullApply: Apply of the whole plan into a namespace
// that holds nothing of netspec's (Cleanup between runs, untimed).
func BenchmarkDataplaneFullApply(b *testing.B) {
	p := genplan.Plan(b, benchServices(b), "node-1")
	for _, dp := range dataplanes {
		b.Run(dp.name, func(b *testing.B) {
			n := benchNode(b, dp.ipvs)
			for b.Loop() {
				b.StopTimer()
				if _, _, err := n.Cleanup(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if _, err := n.ApplyStaged(p, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDataplaneChangeEndpoint: with the plan installed, Update to a
// plan in which one endpoint of one Service moved to another address, and
// back, alternately.
func BenchmarkDataplaneChangeEndpoint(b *testing.B) {
	base := genplan.Plan(b, benchServices(b), "node-1")
	moved := genplan.WithMovedEndpoint(b, base)
	for _, dp := range dataplanes {
		b.Run(dp.name, func(b *testing.B) {
			n := benchNode(b, dp.ipvs)
			if _, err := n.ApplyStaged(base, nil); err != nil {
				b.Fatal(err)
			}
			want := []*plan.Plan{moved, base}
			i := 0
			for b.Loop() {
				r, err := n.UpdateStaged(want[i%2], nil)
				if err != nil {
					b.Fatal(err)
				}
				if r.Empty() {
					b.Fatal("Update changed nothing")
				}
				i++
			}
		})
	}
}

// TestDataplaneBenchInVM runs the Dataplane benchmarks in the VM of
// internal/vmtest and logs their result lines. Opt-in, as it takes minutes:
// NETSPEC_VM_BENCH=1 (scripts/bench-ipvs sets it).
func TestDataplaneBenchInVM(t *testing.T) {
	if os.Getenv("NETSPEC_VM_BENCH") == "" || vmtest.InVM() {
		t.Skip("SKIPPED: opt-in benchmark (NETSPEC_VM_BENCH=1, or scripts/bench-ipvs)")
	}
	benchtime := os.Getenv("NETSPEC_VM_BENCHTIME")
	if benchtime == "" {
		benchtime = "5x"
	}
	console := vmtest.RunPackage(t, "netspec.dev/netspec/applier", vmtest.Options{
		Args:         []string{"-test.run", "^$", "-test.bench", "^BenchmarkDataplane", "-test.benchtime", benchtime},
		Env:          []string{"NETSPEC_BENCH_SERVICES=" + os.Getenv("NETSPEC_BENCH_SERVICES")},
		HostBinaries: []string{"/usr/sbin/ip", "/usr/sbin/nft"},
		Memory:       2048,
		Timeout:      30 * time.Minute,
	})
	for _, l := range regexp.MustCompile(`(?m)^Benchmark\S+\s+\d+\s+\d+ ns/op.*$`).FindAllString(console, -1) {
		t.Log(l)
	}
}
