package nft_test

// Benchmarks of installing rendered rulesets into a kernel, and a
// first-packet connect-latency measurement (TestConnectLatency, run only
// with NETSPEC_LATENCY=1). scripts/bench-nft runs them all and prints a
// table.
//
// Everything here needs root. Every benchmark makes a network namespace of
// its own (netspec-bench-PID-RANDOM) and deletes it when it ends, also
// when it fails; the host's nftables are never touched.

import (
	"fmt"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"netspec.dev/netspec/applier/nft"
	"netspec.dev/netspec/internal/gen/genplan"
	"netspec.dev/netspec/internal/testnet"
	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/render"
	"netspec.dev/netspec/render/nftmodel"
)

// benchSizes are the sizes of the size-indexed benchmarks, in services
// (two pods each).
var benchSizes = []struct {
	name string
	n    int
}{{"1k", 1000}, {"10k", 10000}, {"20k", 20000}}

// requireRoot skips, loudly, unless the process is root and ip(8) and
// nft(8) are installed.
func requireRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("SKIPPED: benchmarking nftables in a network namespace needs root (run as root, e.g. sudo scripts/bench-nft)")
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			tb.Skipf("SKIPPED: benchmarking nftables needs %s: %v (apt-get install iproute2 nftables)", tool, err)
		}
	}
}

// benchNetns makes an empty network namespace netspec-bench-PID-RANDOM
// and returns its name and an open descriptor of it. Both are released
// when the benchmark ends, also when it fails; cleanups registered later
// (closing an Applier, say) run before.
func benchNetns(tb testing.TB) (name string, fd int) {
	tb.Helper()
	requireRoot(tb)
	ns := testnet.New(tb, "bench").NS("node")
	return ns.Name, ns.Fd()
}

// openApplier opens an Applier in the namespace fd, closed when the
// benchmark ends.
func openApplier(tb testing.TB, fd int) *nft.Applier {
	tb.Helper()
	a, err := nft.Open(fd)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { a.Close() })
	return a
}

// inNetns runs fn on an OS thread switched into the namespace fd; a
// process fn starts (exec.Cmd) is born in that namespace.
func inNetns(fd int, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// The thread goes back to its namespace before it is unlocked;
		// when that fails it stays locked and Go ends it with the goroutine.
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		defer unix.Close(orig)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns: %w", err)
			return
		}
		err = fn()
		if unix.Setns(orig, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// The compiled plans and rendered rulesets are shared by the benchmarks
// of one process: compiling 20,000 services takes seconds.
var cache struct {
	sync.Mutex
	plans    map[int]*plan.Plan
	rulesets map[int]*rendered
}

// rendered is a plan's ruleset as a model and as text, with the plan.
type rendered struct {
	p    *plan.Plan
	text []byte
	rs   *nftmodel.Ruleset
}

// compilePlan compiles the Plan of node-1 for a generated tree of n
// Services with two pods each, or returns it from the cache.
func compilePlan(tb testing.TB, n int) *plan.Plan {
	tb.Helper()
	cache.Lock()
	defer cache.Unlock()
	if p := cache.plans[n]; p != nil {
		return p
	}
	p := genplan.Plan(tb, n, "node-1")
	if cache.plans == nil {
		cache.plans = map[int]*plan.Plan{}
	}
	cache.plans[n] = p
	return p
}

// renderPlan renders p's ruleset.
func renderPlan(tb testing.TB, p *plan.Plan) *rendered {
	tb.Helper()
	rs := render.NFTablesModel(p)
	return &rendered{p: p, text: rs.AppendText(nil), rs: rs}
}

// benchRuleset is the rendered ruleset of compilePlan(n), cached.
func benchRuleset(tb testing.TB, n int) *rendered {
	tb.Helper()
	p := compilePlan(tb, n)
	cache.Lock()
	defer cache.Unlock()
	if r := cache.rulesets[n]; r != nil {
		return r
	}
	r := renderPlan(tb, p)
	if cache.rulesets == nil {
		cache.rulesets = map[int]*rendered{}
	}
	cache.rulesets[n] = r
	return r
}

// total sums the netlink messages and payload bytes of a change.
func total(ch *nft.Changes) (ops, bytes int) {
	if ch == nil {
		return 0, 0
	}
	for _, t := range ch.Tables {
		ops += t.Ops
		bytes += t.Bytes
	}
	return ops, bytes
}

// BenchmarkFullSync: Apply of the N-service ruleset into a namespace
// without netspec's tables (deleted, untimed, before every iteration): a
// read of the empty kernel, one batch, and the read back that verifies it.
// It reports the process's user and system CPU time of Apply too.
func BenchmarkFullSync(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(size.name, func(b *testing.B) {
			requireRoot(b)
			r := benchRuleset(b, size.n)
			_, fd := benchNetns(b)
			a := openApplier(b, fd)
			var ch *nft.Changes
			var cpu cpuTime
			runtime.GC() // not the garbage of compiling the plan
			for b.Loop() {
				b.StopTimer()
				if _, err := a.Cleanup(); err != nil {
					b.Fatal(err)
				}
				before := processCPU(b)
				b.StartTimer()
				var err error
				if ch, err = a.Apply(r.rs); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				cpu = cpu.add(processCPU(b).sub(before))
				b.StartTimer()
			}
			ops, bytes := total(ch)
			b.ReportMetric(float64(ops), "ops")
			b.ReportMetric(float64(bytes), "bytes")
			b.ReportMetric(float64(len(r.text)), "file-bytes")
			cpu.report(b)
		})
	}
}

// cpuTime is CPU time spent in user space and in the kernel. Netlink
// batches are processed by the kernel in the sender's sendmsg, so the
// system time of a full sync is mostly the kernel taking the batch (for
// netspec, plus the reads before and after it).
type cpuTime struct{ user, sys time.Duration }

func (c cpuTime) add(d cpuTime) cpuTime { return cpuTime{c.user + d.user, c.sys + d.sys} }
func (c cpuTime) sub(d cpuTime) cpuTime { return cpuTime{c.user - d.user, c.sys - d.sys} }

// report adds the mean user and system CPU time per iteration, in ns, as
// the metrics user-ns/op and sys-ns/op.
func (c cpuTime) report(b *testing.B) {
	if b.N == 0 {
		return
	}
	b.ReportMetric(float64(c.user)/float64(b.N), "user-ns/op")
	b.ReportMetric(float64(c.sys)/float64(b.N), "sys-ns/op")
}

// processCPU is the CPU time of this process so far, all threads (the
// garbage collector's too).
func processCPU(tb testing.TB) cpuTime {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return cpuTime{user: time.Duration(ru.Utime.Nano()), sys: time.Duration(ru.Stime.Nano())}
}

// BenchmarkNFTFile: `nft -f` of the same rendered file into a namespace
// without netspec's tables, for the ratio with BenchmarkFullSync. nft is
// started on a thread inside the namespace (no `ip netns exec` overhead).
// It reports nft's user and system CPU time too.
func BenchmarkNFTFile(b *testing.B) {
	nftPath, err := exec.LookPath("nft")
	if err != nil {
		b.Skipf("SKIPPED: needs nft: %v", err)
	}
	for _, size := range benchSizes {
		b.Run(size.name, func(b *testing.B) {
			requireRoot(b)
			r := benchRuleset(b, size.n)
			file := filepath.Join(b.TempDir(), "nftables.nft")
			if err := os.WriteFile(file, r.text, 0o644); err != nil {
				b.Fatal(err)
			}
			_, fd := benchNetns(b)
			run := func(args ...string) (cpuTime, error) {
				var cpu cpuTime
				err := inNetns(fd, func() error {
					cmd := exec.Command(nftPath, args...)
					out, err := cmd.CombinedOutput()
					if err != nil {
						return fmt.Errorf("nft %s: %v\n%s", strings.Join(args, " "), err, out)
					}
					cpu = cpuTime{user: cmd.ProcessState.UserTime(), sys: cmd.ProcessState.SystemTime()}
					return nil
				})
				return cpu, err
			}
			var cpu cpuTime
			runtime.GC()
			for b.Loop() {
				b.StopTimer()
				// The namespace is ours alone: flushing it all is the
				// same as deleting netspec's tables.
				if _, err := run("flush", "ruleset"); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				c, err := run("-f", file)
				if err != nil {
					b.Fatal(err)
				}
				cpu = cpu.add(c)
			}
			b.ReportMetric(float64(len(r.text)), "file-bytes")
			cpu.report(b)
		})
	}
}

// benchUpdate installs base (untimed), then times Updates alternating
// between other and base, and reports the mean netlink messages and
// bytes of one Update. The two models are built by one render.Memo, as a
// daemon's successive models are: they share the chains and sets of the
// Services that did not change, which Update does not encode again.
func benchUpdate(b *testing.B, base, other *rendered) {
	b.Helper()
	_, fd := benchNetns(b)
	a := openApplier(b, fd)
	var memo render.Memo
	baseM := memo.NFTablesModel(base.p)
	otherM := memo.NFTablesModel(other.p)
	if _, err := a.Apply(baseM); err != nil {
		b.Fatal(err)
	}
	want := []*rendered{{rs: otherM}, {rs: baseM}}
	var ops, bytes, i int
	runtime.GC() // not the garbage of compiling and installing
	for b.Loop() {
		ch, err := a.Update(want[i%2].rs)
		if err != nil {
			b.Fatal(err)
		}
		for _, t := range ch.Tables {
			if t.Replace || t.Delete {
				b.Fatalf("Update replaced or deleted table %s (%s): not an incremental change", t.Family, t.Reason)
			}
		}
		o, by := total(ch)
		if o == 0 {
			b.Fatalf("Update sent nothing: %s", ch.Summary())
		}
		if i == 0 {
			b.Logf("first update: %s; %d netlink messages, %d bytes", ch.Summary(), o, by)
		}
		ops += o
		bytes += by
		i++
	}
	// The kernel holds exactly the last ruleset sent (a full read, untimed).
	ch, err := a.Plan(want[(i-1)%2].rs)
	if err != nil {
		b.Fatal(err)
	}
	if !ch.Empty() {
		b.Fatalf("after the updates the kernel differs from the last ruleset: %s", ch.Summary())
	}
	b.ReportMetric(float64(ops)/float64(i), "ops")
	b.ReportMetric(float64(bytes)/float64(i), "bytes")
}

// BenchmarkAddOneService: with 10,000 services installed, Update to a
// ruleset with one more service, then back (alternately).
func BenchmarkAddOneService(b *testing.B) {
	b.Run("10k", func(b *testing.B) {
		requireRoot(b)
		base := benchRuleset(b, 10000)
		plus := renderPlan(b, genplan.WithExtraService(b, compilePlan(b, 10000)))
		benchUpdate(b, base, plus)
	})
}

// BenchmarkChangeEndpoints: with N services installed, Update to a
// ruleset in which one endpoint of one service moved to another IP, then
// back (alternately). Its ops and bytes do not depend on N.
func BenchmarkChangeEndpoints(b *testing.B) {
	for _, size := range benchSizes[:2] {
		b.Run(size.name, func(b *testing.B) {
			base, moved := movedRulesets(b, size.n)
			benchUpdate(b, base, moved)
		})
	}
}

// movedRulesets are, for root, the ruleset of N services and one in
// which one endpoint of one service moved to another IP.
func movedRulesets(b *testing.B, n int) (base, moved *rendered) {
	requireRoot(b)
	return benchRuleset(b, n), renderPlan(b, genplan.WithMovedEndpoint(b, compilePlan(b, n)))
}

// BenchmarkResync: with N services installed, Apply (which reads the
// kernel's tables back, decodes and diffs them with the model, sends the
// difference and verifies it, as a periodic resync does) alternately of
// a ruleset in which one endpoint of one service moved and of the
// installed one. It reports the process's user and system CPU time too.
func BenchmarkResync(b *testing.B) {
	for _, size := range benchSizes[:2] {
		b.Run(size.name, func(b *testing.B) {
			base, moved := movedRulesets(b, size.n)
			_, fd := benchNetns(b)
			a := openApplier(b, fd)
			if _, err := a.Apply(base.rs); err != nil {
				b.Fatal(err)
			}
			want := []*nftmodel.Ruleset{moved.rs, base.rs}
			var cpu cpuTime
			i := 0
			runtime.GC() // not the garbage of compiling and installing
			for b.Loop() {
				before := processCPU(b)
				ch, err := a.Apply(want[i%2])
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				cpu = cpu.add(processCPU(b).sub(before))
				for _, t := range ch.Tables {
					if t.Replace || t.Delete {
						b.Fatalf("Apply replaced or deleted table %s (%s): not an incremental change", t.Family, t.Reason)
					}
				}
				if ch.Empty() {
					b.Fatalf("Apply found nothing to change")
				}
				i++
				b.StartTimer()
			}
			cpu.report(b)
		})
	}
}

// TestConnectLatency measures first-packet TCP connect latency through an
// installed ruleset: client namespace → node namespace (the ruleset,
// installed with Apply) → backend namespace, where the whole pod CIDR is
// a local route, so that one listener answers for every endpoint. It
// connects, each time with a fresh socket (so a new conntrack entry and a
// trip through the NAT chains), to the cluster IP of service svc-1 and of
// the last service, alternately, and logs p50 and p99 of connect() of
// each as
//
//	latency-result svc-1 10.x.y.z:80 n=1000 p50_us=… p99_us=…
//
// Opt-in: NETSPEC_LATENCY=1. NETSPEC_LATENCY_SERVICES (default 10000)
// and NETSPEC_LATENCY_CONNECTS (default 1000) choose the sizes.
func TestConnectLatency(t *testing.T) {
	if os.Getenv("NETSPEC_LATENCY") == "" {
		t.Skip("SKIPPED: set NETSPEC_LATENCY=1 to measure connect latency through a big ruleset (root, about a minute)")
	}
	testnet.Require(t, "nft")
	n := envInt(t, "NETSPEC_LATENCY_SERVICES", 10000)
	connects := envInt(t, "NETSPEC_LATENCY_CONNECTS", 1000)

	p := compilePlan(t, n)
	r := renderPlan(t, p)
	type target struct {
		name string
		addr string // VIP:port
	}
	var targets []target
	ports := map[uint16]bool{}
	for _, name := range []string{"svc-1", "svc-" + strconv.Itoa(n)} {
		k := slices.IndexFunc(p.Services, func(s plan.Service) bool { return s.Name == name })
		if k < 0 {
			t.Fatalf("no service %s in the plan", name)
		}
		s := &p.Services[k]
		pi := slices.IndexFunc(s.Ports, func(port plan.Port) bool { return port.Protocol == "TCP" && len(port.Cluster) > 0 })
		if len(s.ClusterIPs) == 0 || pi < 0 {
			t.Fatalf("service %s has no cluster IP or no TCP port with endpoints", s.Key())
		}
		port := &s.Ports[pi]
		for _, e := range port.Cluster {
			ports[port.Endpoints[e].Port] = true
		}
		targets = append(targets, target{s.Key(), netip.AddrPortFrom(s.ClusterIPs[0], port.Port).String()})
	}
	if len(p.Cluster.PodCIDRs) == 0 || len(p.Cluster.ServiceCIDRs) == 0 {
		t.Fatal("the plan has no pod or service CIDR")
	}
	podCIDR, svcCIDR := p.Cluster.PodCIDRs[0].String(), p.Cluster.ServiceCIDRs[0].String()

	tn := testnet.New(t, "bench")
	client, node, backend := tn.NS("client"), tn.NS("node"), tn.NS("backend")
	testnet.Link(client, []string{"192.0.2.1/24"}, node, []string{"192.0.2.2/24"})
	testnet.Link(node, []string{"198.51.100.1/24"}, backend, []string{"198.51.100.2/24"})
	node.Forwarding()
	client.Route(svcCIDR, "192.0.2.2")
	node.Route(podCIDR, "198.51.100.2")
	backend.Route("default", "198.51.100.1")
	backend.MustRun("ip", "route", "add", "local", podCIDR, "dev", "lo")
	var listen []string
	for port := range ports {
		listen = append(listen, fmt.Sprintf("0.0.0.0:%d", port))
	}
	backend.Serve(t, "backend", listen...)

	a := openApplier(t, node.Fd())
	start := time.Now()
	if _, err := a.Apply(r.rs); err != nil {
		t.Fatal(err)
	}
	t.Logf("installed %d services in %s (netns %s)", n, time.Since(start).Round(time.Millisecond), node.Name)

	for _, tg := range targets {
		if got := client.DialTCP(tg.addr, 5*time.Second); !strings.HasPrefix(got, "backend ") {
			t.Fatalf("dial %s (%s): %q, want the backend's answer", tg.addr, tg.name, got)
		}
	}

	const warmup = 50
	lat := make([][]time.Duration, len(targets))
	err := client.Do(func() error {
		for i := range warmup + connects {
			for j, tg := range targets {
				d, err := connectOnce(netip.MustParseAddrPort(tg.addr))
				if err != nil {
					return fmt.Errorf("connect %s (%s), attempt %d: %w", tg.addr, tg.name, i+1, err)
				}
				if i >= warmup {
					lat[j] = append(lat[j], d)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var p50s []float64
	for j, tg := range targets {
		d := lat[j]
		slices.Sort(d)
		p50, p99 := percentile(d, 50), percentile(d, 99)
		p50s = append(p50s, us(p50))
		t.Logf("latency-result %s %s n=%d p50_us=%.1f p99_us=%.1f", tg.name, tg.addr, len(d), us(p50), us(p99))
	}
	if len(p50s) == 2 {
		t.Logf("latency-spread p50 of %s is %+.1f%% of %s's", targets[1].name, 100*(p50s[1]-p50s[0])/p50s[0], targets[0].name)
	}
}

// connectOnce connects a fresh blocking TCP socket of the calling thread's
// namespace to dst and returns how long connect() took. The socket is
// closed with a reset (no TIME_WAIT).
func connectOnce(dst netip.AddrPort) (time.Duration, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &unix.Timeval{Sec: 5})
	sa := &unix.SockaddrInet4{Port: int(dst.Port()), Addr: dst.Addr().As4()}
	start := time.Now()
	err = unix.Connect(fd, sa)
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
	return d, nil
}

// percentile returns the q-th percentile of sorted d (nearest rank).
func percentile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(math.Ceil(q/100*float64(len(d)))) - 1
	return d[max(i, 0)]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}
