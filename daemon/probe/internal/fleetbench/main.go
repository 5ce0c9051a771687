// Command fleetbench measures what a probe.Prober costs: run by
// scripts/bench-probe inside a network namespace of its own, once as the
// fleet ("serve": one HTTP listener per port on the wildcard address, so
// that every 127.x.y.z of the namespace's loopback answers, and as many
// gRPC health servers on the ports after them) and once as
// the prober ("probe": N targets spread over addresses × ports, probed
// with the real clock for a bounded time), which prints one markdown
// table row with its CPU (getrusage, user + system, in % of one core) and
// peak RSS; "closecost" measures the close of an httpGet connection,
// graceful or reset (closeCost). The system time includes the kernel's
// work for both ends of each loopback connection that runs in the
// prober's context (the listener's half of the handshake and teardown);
// on a node that is so for pods behind veth pairs too (a packet is
// processed on its way in, in the sender's softirq), while the half of
// pods on other nodes runs there.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"netspec.dev/netspec/daemon/probe"
	"netspec.dev/netspec/plan"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: fleetbench serve|probe|closecost [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "probe":
		err = run(os.Args[2:])
	case "closecost":
		err = closeCost(os.Args[2:])
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleetbench:", err)
		os.Exit(1)
	}
}

// serve listens on ports base..base+ports-1 of every address and answers
// every HTTP request 200 with a short body, and on the next ports ports
// (grpcBase) serves grpc.health.v1 with every service SERVING, until
// killed.
func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	base := fs.Int("base", 20000, "first port")
	ports := fs.Int("ports", 100, "number of ports (of each kind)")
	fs.Parse(args)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	errc := make(chan error, 2**ports)
	for i := range *ports {
		lis, err := net.Listen("tcp", ":"+strconv.Itoa(*base+i))
		if err != nil {
			return err
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
		go func() { errc <- srv.Serve(lis) }()
	}
	hs := health.NewServer() // "" and any other service: SERVING
	for i := range *ports {
		lis, err := net.Listen("tcp", ":"+strconv.Itoa(grpcBase(*base, *ports)+i))
		if err != nil {
			return err
		}
		srv := grpc.NewServer()
		healthpb.RegisterHealthServer(srv, hs)
		go func() { errc <- srv.Serve(lis) }()
	}
	return <-errc
}

// grpcBase is the first port of the fleet's gRPC listeners.
func grpcBase(base, ports int) int { return base + ports }

func run(args []string) error {
	fs := flag.NewFlagSet("probe", flag.ExitOnError)
	targets := fs.Int("targets", 20000, "number of targets")
	base := fs.Int("base", 20000, "first port of the fleet")
	ports := fs.Int("ports", 100, "ports of the fleet")
	period := fs.Duration("period", 10*time.Second, "probe period (whole seconds)")
	duration := fs.Duration("duration", 30*time.Second, "how long to probe")
	action := fs.String("action", "tcpSocket", "tcpSocket, httpGet or grpc")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the probing to this file")
	fs.Parse(args)

	first := *base // of the listeners probed
	if *action == string(plan.ProbeGRPC) {
		first = grpcBase(*base, *ports)
	}
	if err := waitFleet(first, *ports); err != nil {
		return err
	}
	var probes, failed atomic.Int64
	var firstErr atomic.Value
	p := probe.New(probe.Options{Observe: func(_ probe.Target, _ plan.ProbeAction, _ time.Duration, err error) {
		probes.Add(1)
		if err != nil {
			failed.Add(1)
			firstErr.CompareAndSwap(nil, err.Error())
		}
	}})
	addr := netip.MustParseAddr("127.1.0.1")
	var ts []probe.Target
	for i := range *targets {
		if i > 0 && i%*ports == 0 {
			addr = addr.Next()
		}
		ts = append(ts, probe.Target{Addr: addr, Probe: plan.Probe{
			Action: plan.ProbeAction(*action), Port: uint16(first + i%*ports), Scheme: "HTTP", Path: "/healthz",
			PeriodSeconds: int32(*period / time.Second), TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3,
		}})
	}

	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	user0, sys0 := cpuTime()
	wall0 := time.Now()
	p.Set(ts)
	time.Sleep(*duration)
	user1, sys1 := cpuTime()
	wall := time.Since(wall0)
	user, sys := user1-user0, sys1-sys0
	p.Close()
	if *cpuprofile != "" {
		pprof.StopCPUProfile()
	}

	rss, err := peakRSS()
	if err != nil {
		return err
	}
	pct := func(d time.Duration) float64 { return 100 * d.Seconds() / wall.Seconds() }
	fmt.Printf("| %d | %s | %s | %s | %d | %d | %.1f | %.1f | %.1f | %.0f |\n",
		*targets, *period, *action, wall.Round(time.Second), probes.Load(), failed.Load(),
		pct(user+sys), pct(user), pct(sys), float64(rss)/(1<<20))
	if e, ok := firstErr.Load().(string); ok {
		fmt.Fprintln(os.Stderr, "fleetbench: first probe error:", e)
	}
	return nil
}

// closeCost measures what closing an httpGet probe's connection costs
// the prober's thread, gracefully (FIN) and with a reset (SO_LINGER 0 set
// once the response is read, as the event loop does): n GETs one after
// the other over a blocking socket, each response read to the server's
// FIN (where the event loop finds its connections: the server closes
// first), the closes alternating FIN, RST, RST, FIN so that a change of
// the machine's load weighs on both alike. It prints the thread CPU time
// (CLOCK_THREAD_CPUTIME_ID) of the close and of the whole GET, per kind.
func closeCost(args []string) error {
	fs := flag.NewFlagSet("closecost", flag.ExitOnError)
	n := fs.Int("n", 40000, "GETs")
	base := fs.Int("base", 20000, "first port of the fleet")
	ports := fs.Int("ports", 100, "ports of the fleet")
	fs.Parse(args)
	if err := waitFleet(*base, *ports); err != nil {
		return err
	}
	runtime.LockOSThread()
	req := []byte("GET /healthz HTTP/1.1\r\nHost: 127.1.0.1\r\nUser-Agent: " + probe.UserAgent + "\r\nAccept: */*\r\nConnection: close\r\n\r\n")
	buf := make([]byte, 4096)
	var closeTime, getTime [2]time.Duration // [0] FIN, [1] RST
	var count [2]int
	for i := range *n {
		reset := i%4 == 1 || i%4 == 2
		t0 := threadCPU()
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		if err := unix.Connect(fd, &unix.SockaddrInet4{Port: *base + i%*ports, Addr: [4]byte{127, 1, 0, 1}}); err != nil {
			unix.Close(fd)
			return err
		}
		if _, err := unix.Write(fd, req); err != nil {
			unix.Close(fd)
			return err
		}
		for {
			m, err := unix.Read(fd, buf)
			if err != nil {
				unix.Close(fd)
				return err
			}
			if m == 0 {
				break
			}
		}
		t1 := threadCPU()
		if reset {
			if err := unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0}); err != nil {
				return err
			}
		}
		unix.Close(fd)
		t2 := threadCPU()
		k := 0
		if reset {
			k = 1
		}
		closeTime[k] += t2 - t1
		getTime[k] += t2 - t0
		count[k]++
	}
	us := func(d time.Duration, n int) float64 { return float64(d.Nanoseconds()) / float64(n) / 1000 }
	fmt.Printf("| %d | %.1f | %.1f | %.1f | %.1f |\n", *n,
		us(closeTime[0], count[0]), us(closeTime[1], count[1]), us(getTime[0], count[0]), us(getTime[1], count[1]))
	return nil
}

// threadCPU is the CPU time of the calling thread so far.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		panic(err)
	}
	return time.Duration(ts.Nano())
}

// waitFleet waits (bounded) until every port of the fleet accepts.
func waitFleet(base, ports int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var d net.Dialer
	for i := range ports {
		for {
			c, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.1.0.1", strconv.Itoa(base+i)))
			if err == nil {
				c.Close()
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("the fleet does not answer on port %d: %w", base+i, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// cpuTime is the user and system CPU time of this process so far.
func cpuTime() (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// peakRSS is VmHWM of /proc/self/status, in bytes.
func peakRSS() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/self/status")
}
