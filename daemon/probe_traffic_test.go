package daemon

// A real daemon with real probes, proven by real packets: the watcher
// runs as a process of its own inside a node namespace (the probes go out
// from there, as they would on a node), programs that namespace's kernel,
// and a client namespace sends TCP and UDP through a cluster IP to two
// pods, each a namespace of its own with a data server (TCP and UDP 8080)
// and a health server (TCP 8081) that its readinessProbe checks. Every
// namespace is the test's own and is removed afterwards.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"netspec.dev/netspec/internal/testnet"
)

// probeDaemonEnv, when set in the environment of this test binary, makes
// it the daemon of TestProbeTraffic instead of running tests: its value
// is the JSON of the Options (init below).
const probeDaemonEnv = "NETSPEC_TEST_PROBE_DAEMON"

func init() {
	s := os.Getenv(probeDaemonEnv)
	if s == "" {
		return
	}
	var o Options
	if err := json.Unmarshal([]byte(s), &o); err != nil {
		fmt.Fprintln(os.Stderr, "probe daemon:", err)
		os.Exit(2)
	}
	o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	w, err := New(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe daemon:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "probe daemon:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

const (
	probeTrafficPeriod  = 1 // periodSeconds of the pods' probes
	probeTrafficFailure = 2 // failureThreshold
)

// probeTrafficTree has the Service api (TCP and UDP, cluster IP
// 10.96.0.20) and its headless twin api-hl over pods p1 and p2, whose
// readinessProbe is tcpSocket 8081.
var probeTrafficTree = trafficCluster + fmt.Sprintf(`---
apiVersion: v1
kind: Service
metadata: {name: api, namespace: probed}
spec:
  clusterIP: 10.96.0.20
  selector: {app: api}
  ports:
  - {name: tcp, port: 80, targetPort: 8080, protocol: TCP}
  - {name: udp, port: 80, targetPort: 8080, protocol: UDP}
---
apiVersion: v1
kind: Service
metadata: {name: api-hl, namespace: probed}
spec:
  clusterIP: None
  selector: {app: api}
  ports: [{name: tcp, port: 8080}]
---
apiVersion: v1
kind: Pod
metadata: {name: p1, namespace: probed, labels: {app: api}}
spec:
  nodeName: node-1
  containers: [{name: app, readinessProbe: {tcpSocket: {port: 8081}, periodSeconds: %[1]d, failureThreshold: %[2]d}}]
status: {podIP: 10.244.1.11, conditions: [{type: Ready, status: "True"}]}
---
apiVersion: v1
kind: Pod
metadata: {name: p2, namespace: probed, labels: {app: api}}
spec:
  nodeName: node-1
  containers: [{name: app, readinessProbe: {tcpSocket: {port: 8081}, periodSeconds: %[1]d, failureThreshold: %[2]d}}]
status: {podIP: 10.244.1.21, conditions: [{type: Ready, status: "True"}]}
`, probeTrafficPeriod, probeTrafficFailure)

// backend is a pod's servers, each stopped and started again at will:
// "data" (TCP and UDP 8080, answering "NAME CLIENT-IP") and "health"
// (TCP 8081, which the probe connects to).
type backend struct {
	t    *testing.T
	name string
	ns   *testnet.NS
	ip   string
	mu   sync.Mutex
	open map[string][]func()
}

func (b *backend) start(what string) {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open[what] != nil {
		return
	}
	port := map[string]string{"data": "8080", "health": "8081"}[what]
	addr := net.JoinHostPort(b.ip, port)
	var closers []func()
	err := b.ns.Do(func() error {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		closers = append(closers, func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				fmt.Fprintf(c, "%s %s\n", b.name, hostOf(c.RemoteAddr()))
				c.Close()
			}
		}()
		if what != "data" {
			return nil
		}
		p, err := net.ListenPacket("udp", addr)
		if err != nil {
			return err
		}
		closers = append(closers, func() { p.Close() })
		go func() {
			buf := make([]byte, 2048)
			for {
				_, from, err := p.ReadFrom(buf)
				if err != nil {
					if strings.Contains(err.Error(), "use of closed") {
						return
					}
					continue
				}
				p.WriteTo([]byte(b.name+" "+hostOf(from)+"\n"), from)
			}
		}()
		return nil
	})
	if err != nil {
		b.t.Fatalf("%s: serve %s on %s: %v", b.name, what, addr, err)
	}
	b.open[what] = closers
	b.t.Cleanup(func() { b.stop(what) })
}

func (b *backend) stop(what string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.open[what] {
		c()
	}
	delete(b.open, what)
}

func hostOf(a net.Addr) string {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.AddrPort().Addr().Unmap().String()
	case *net.UDPAddr:
		return a.AddrPort().Addr().Unmap().String()
	}
	return a.String()
}

// probeRig is the topology and the daemon of TestProbeTraffic.
type probeRig struct {
	client, node *testnet.NS
	pods         map[string]*backend
	socket       string
	dnsAddr      string
	metricsAddr  string
}

func newProbeRig(t *testing.T) *probeRig {
	t.Helper()
	testnet.Require(t, "nft", "conntrack")
	n := testnet.New(t, "prbt")
	r := &probeRig{client: n.NS("client"), node: n.NS("node"), pods: map[string]*backend{}}
	testnet.Link(r.client, []string{"192.168.10.100/24"}, r.node, []string{"192.168.10.11/24"})
	r.client.Route("default", "192.168.10.11")
	r.node.Forwarding()
	for name, ip := range map[string]string{"p1": "10.244.1.11", "p2": "10.244.1.21"} {
		a := netip.MustParseAddr(ip).As4()
		gw := netip.AddrFrom4([4]byte{a[0], a[1], a[2], a[3] ^ 1}).String()
		ns := n.NS(name)
		testnet.Link(r.node, []string{gw + "/31"}, ns, []string{ip + "/31"})
		ns.Route("default", gw)
		b := &backend{t: t, name: name, ns: ns, ip: ip, open: map[string][]func(){}}
		b.start("data")
		b.start("health")
		r.pods[name] = b
	}

	tree := filepath.Join(t.TempDir(), "tree")
	writeFile(t, filepath.Join(tree, "tree.yaml"), probeTrafficTree)
	state := filepath.Join(t.TempDir(), "state")
	r.socket = filepath.Join(state, SocketName)
	r.dnsAddr, r.metricsAddr = "127.0.0.1:5353", "127.0.0.1:9253" // inside the node namespace
	opts, err := json.Marshal(Options{Tree: tree, Node: "node-1", StateDir: state, DNSListen: r.dnsAddr,
		MetricsListen: r.metricsAddr, Resync: -1, Debounce: 50 * time.Millisecond, Probes: true})
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", r.node.Name, exe)
	cmd.Env = append(os.Environ(), probeDaemonEnv+"="+string(opts))
	cmd.Stdout, cmd.Stderr = tlog{t}, tlog{t}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the daemon: %v", err)
			}
		case <-time.After(deadline):
			cmd.Process.Kill()
			t.Errorf("the daemon did not stop within %s of SIGTERM", deadline)
		}
	})
	r.status(t, "the first sync", func(s *Status) bool { return s.LastSync != nil && s.LastSync.Result == ResultApplied })
	return r
}

// status waits until the daemon's status satisfies cond.
func (r *probeRig) status(t *testing.T, what string, cond func(*Status) bool) *Status {
	t.Helper()
	var st *Status
	waitFor(t, what, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		if st, err = QueryStatus(ctx, r.socket); err != nil {
			return false, err.Error()
		}
		b, _ := json.Marshal(st)
		return cond(st), string(b)
	})
	return st
}

// out lists "service endpoint" of the endpoints out for their probes.
func out(s *Status) []string {
	var o []string
	if s.Probes != nil {
		for _, p := range s.Probes.Out {
			o = append(o, p.Service+" "+p.Endpoint)
		}
	}
	return o
}

// tcp asks the cluster IP over TCP from the client: the pod's name, or
// what went wrong.
func (r *probeRig) tcp() string {
	a := r.client.DialTCP("10.96.0.20:80", 2*time.Second)
	name, _, _ := strings.Cut(a, " ")
	if strings.HasPrefix(a, "p") {
		return name
	}
	return a
}

// lookup asks the daemon's DNS server (in the node namespace) for name's
// A records, sorted.
func (r *probeRig) lookup(t *testing.T, name string) string {
	t.Helper()
	var got string
	err := r.node.Do(func() error {
		got = lookup(t, r.dnsAddr, name)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ips := strings.Split(got, ",")
	slices.Sort(ips)
	return strings.Join(ips, ",")
}

// metrics reads the daemon's /metrics (in the node namespace), the lines
// of the netspec_probe_ metrics but the histogram's buckets.
func (r *probeRig) metrics(t *testing.T) string {
	t.Helper()
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := r.node.Do(func() error {
			var err error
			c, err = (&net.Dialer{Timeout: 5 * time.Second}).Dial(network, addr)
			return err
		})
		return c, err
	}, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("http://" + r.metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 64<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	var lines []string
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(l, "netspec_probe_") && !strings.Contains(l, "_bucket{") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

// TestProbeTraffic: a backend whose server stops leaves its Service within
// failureThreshold × periodSeconds + 1 s, for TCP and UDP (its conntrack
// entries cleared) and in the headless Service's DNS answer, and comes
// back when it answers again; when every backend fails its probe, the
// Service keeps them all (fail open), traffic flows, and status and
// metrics say so.
func TestProbeTraffic(t *testing.T) {
	r := newProbeRig(t)
	const hl = "api-hl.probed.svc.cluster.local"

	// Both pods answer, over TCP and in DNS.
	seen := map[string]bool{}
	for i := 0; i < 40 && len(seen) < 2; i++ {
		seen[r.tcp()] = true
	}
	if !seen["p1"] || !seen["p2"] {
		t.Fatalf("before any failure, 40 connections reached %v; want p1 and p2", seen)
	}
	waitFor(t, "both pods in DNS", func() (bool, string) { got := r.lookup(t, hl); return got == "10.244.1.11,10.244.1.21", got })

	// A UDP client whose flow (fixed source port, one conntrack entry)
	// goes to p1.
	udpFrom := ""
	for port := 40000; port < 40064 && udpFrom == ""; port++ {
		src := fmt.Sprintf("192.168.10.100:%d", port)
		if a := r.client.DialUDPFrom(src, "10.96.0.20:80", 2*time.Second); strings.HasPrefix(a, "p1 ") {
			udpFrom = src
		}
	}
	if udpFrom == "" {
		t.Fatal("no UDP flow of 64 source ports went to p1")
	}

	// p1 stops: its servers go, its probe fails.
	stopped := time.Now()
	r.pods["p1"].stop("data")
	r.pods["p1"].stop("health")
	// Connections, one after another, until the daemon says p1 is out:
	// those that still went to p1 were refused.
	bound := time.Duration(probeTrafficFailure*probeTrafficPeriod)*time.Second + time.Second
	var lastRefused time.Time
	end := stopped.Add(deadline)
	for {
		at := time.Now()
		switch a := r.tcp(); a {
		case "p2":
		case "refused":
			lastRefused = at
		default:
			t.Fatalf("a connection while p1 goes out: %s", a)
		}
		st := r.status(t, "a status", func(*Status) bool { return true })
		if slices.Contains(out(st), "probed/api 10.244.1.11:8080") {
			break
		}
		if at.After(end) {
			t.Fatalf("p1 not out within %s of its server stopping; status %+v", deadline, st.Probes)
		}
	}
	if !lastRefused.IsZero() && lastRefused.Sub(stopped) > bound {
		t.Errorf("a connection reached p1 %s after its server stopped; want none after failureThreshold × periodSeconds + 1s = %s",
			lastRefused.Sub(stopped).Round(time.Millisecond), bound)
	}
	t.Logf("the last connection refused by p1 was %s after it stopped", lastRefused.Sub(stopped).Round(time.Millisecond))
	for i := range 20 {
		if a := r.tcp(); a != "p2" {
			t.Fatalf("connection %d with p1 out: %s, want p2", i, a)
		}
	}
	// UDP: the flow that went to p1 is answered by p2 (its conntrack entry
	// was cleared), and new flows too.
	if a := r.client.DialUDPFrom(udpFrom, "10.96.0.20:80", 2*time.Second); !strings.HasPrefix(a, "p2 ") {
		t.Errorf("the UDP flow from %s that went to p1: %s, want p2 (its conntrack entry cleared)", udpFrom, a)
	}
	for i := range 10 {
		if a := r.client.DialUDP("10.96.0.20:80", 2*time.Second); !strings.HasPrefix(a, "p2 ") {
			t.Errorf("UDP datagram %d with p1 out: %s, want p2", i, a)
		}
	}
	waitFor(t, "p1 out of DNS", func() (bool, string) { got := r.lookup(t, hl); return got == "10.244.1.21", got })
	st := r.status(t, "p1 out", func(s *Status) bool { return len(s.Probes.Out) > 0 })
	if o := st.Probes.Out[0]; o.LastError == "" || o.Since.IsZero() || o.Probe != "tcpSocket :8081" {
		t.Errorf("status of p1: %+v", o)
	}
	if m := r.metrics(t); !strings.Contains(m, `netspec_probe_endpoints{state="failing"} 1`) ||
		!strings.Contains(m, `netspec_probe_service_failing_endpoints{namespace="probed",service="api"} 1`) ||
		!strings.Contains(m, `netspec_probe_duration_seconds_count{action="tcpSocket",result="failure"}`) {
		t.Errorf("metrics with p1 out:\n%s", m)
	}

	// p1 is back: it gets connections again, and is in DNS.
	r.pods["p1"].start("data")
	r.pods["p1"].start("health")
	r.status(t, "p1 back", func(s *Status) bool { return len(out(s)) == 0 })
	seen = map[string]bool{}
	for i := 0; i < 40 && !seen["p1"]; i++ {
		seen[r.tcp()] = true
	}
	if !seen["p1"] {
		t.Errorf("p1 back: 40 connections reached %v, none p1", seen)
	}
	waitFor(t, "p1 back in DNS", func() (bool, string) { got := r.lookup(t, hl); return got == "10.244.1.11,10.244.1.21", got })

	// Every pod's health fails (their data servers still answer): the
	// Service fails open, traffic flows, and it shows.
	r.pods["p1"].stop("health")
	r.pods["p2"].stop("health")
	st = r.status(t, "api failing open", func(s *Status) bool {
		return s.Probes != nil && slices.Equal(s.Probes.FailOpen, []string{"probed/api", "probed/api-hl"}) && s.Probes.Failing == 2
	})
	seen = map[string]bool{}
	for i := 0; i < 40; i++ {
		a := r.tcp()
		if a != "p1" && a != "p2" {
			t.Fatalf("connection %d with every pod failing its probe: %s; want it answered (fail open)", i, a)
		}
		seen[a] = true
	}
	if !seen["p1"] || !seen["p2"] {
		t.Errorf("failing open: 40 connections reached %v; want both pods", seen)
	}
	if a := r.client.DialUDP("10.96.0.20:80", 2*time.Second); !strings.HasPrefix(a, "p") {
		t.Errorf("UDP failing open: %s", a)
	}
	if got := r.lookup(t, hl); got != "10.244.1.11,10.244.1.21" {
		t.Errorf("DNS failing open: %s, want both pods", got)
	}
	// api-hl, over the same pods, fails open too.
	if m := r.metrics(t); !strings.Contains(m, "netspec_probe_fail_open_services 2") ||
		!strings.Contains(m, `netspec_probe_endpoints{state="failing"} 2`) {
		t.Errorf("metrics failing open:\n%s", m)
	}
	for _, o := range st.Probes.Out {
		if !o.FailOpen {
			t.Errorf("failing open, %s %s not marked kept", o.Service, o.Endpoint)
		}
	}
}
