package probe

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"netspec.dev/netspec/plan"
)

// probeAll runs one probe of each target through a Prober with the
// network checker (the event loop, and workers for HTTPS) and a fake
// clock, at most max in flight, and returns each check's status by key.
func probeAll(t *testing.T, targets []Target, max int) map[string]Status {
	t.Helper()
	clk := NewFakeClock(t0)
	p := New(Options{Clock: clk, MaxConcurrent: max})
	defer p.Close()
	p.Set(targets)
	// Every first tick is at an offset in [0, period) in whole slots, and
	// the earliest second one a period after t0: advancing by a period
	// less a slot runs each check once (advancing by the whole period
	// would tick a check at offset 0 again, or not, depending on whether
	// its first probe had finished by then). The targets' period is 10 s.
	clk.Advance(10*time.Second - slot)
	p.WaitIdle()
	out := map[string]Status{}
	for _, st := range p.Snapshot() {
		out[st.Target.Key()] = st
	}
	return out
}

// TestLoop runs many probes in one batch through the event loop and
// checks each result against the worker path's on the same target:
// successes, refusals, statuses, redirects (also to HTTPS, which leaves
// the loop), interim responses, oversized heads and cut bodies.
func TestLoop(t *testing.T) {
	srv, _ := newHTTPServer(t, false)
	tlsSrv, _ := newHTTPServer(t, true)
	mux := http.NewServeMux()
	mux.HandleFunc("/cut-body", func(w http.ResponseWriter, r *http.Request) {
		conn, bw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		bw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
		bw.Flush()
		conn.Close()
	})
	mux.HandleFunc("/redirect/https", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, tlsSrv.URL+"/status/503", http.StatusFound)
	})
	extra := httptest.NewServer(mux)
	t.Cleanup(extra.Close)

	addr, port := addrPort(t, srv.Listener.Addr().String())
	_, tlsPort := addrPort(t, tlsSrv.Listener.Addr().String())
	_, extraPort := addrPort(t, extra.Listener.Addr().String())
	refused := refusedPort(t, "127.0.0.1")
	get := func(port uint16, scheme, path, host string) Target {
		return Target{Addr: addr, Probe: plan.Probe{Action: plan.ProbeHTTPGet, Port: port, Scheme: scheme, Path: path, Host: host,
			PeriodSeconds: 10, TimeoutSeconds: 3600, FailureThreshold: 1, SuccessThreshold: 1}}
	}
	tcp := func(port uint16) Target {
		return Target{Addr: addr, Probe: plan.Probe{Action: plan.ProbeTCPSocket, Port: port,
			PeriodSeconds: 10, TimeoutSeconds: 3600, FailureThreshold: 1, SuccessThreshold: 1}}
	}
	tests := []struct {
		name        string
		target      Target
		wantErr     string // substring; "" is a success
		wantWarning bool
	}{
		{name: "tcpSocket", target: tcp(port)},
		{name: "tcpSocket refused", target: tcp(refused.Port()), wantErr: "dial tcp " + refused.String() + ": connect: connection refused"},
		{name: "httpGet refused", target: get(refused.Port(), "HTTP", "/", ""), wantErr: "dial tcp " + refused.String() + ": connect: connection refused"},
		{name: "199 is a failure", target: get(port, "HTTP", "/status/199", ""), wantErr: "EOF"},
		{name: "200", target: get(port, "", "/status/200", "")},
		{name: "204", target: get(port, "http", "/status/204", "")},
		{name: "399", target: get(port, "HTTP", "/status/399", ""), wantWarning: true},
		{name: "500", target: get(port, "HTTP", "/status/500", ""), wantErr: "http status 500"},
		{name: "redirect followed", target: get(port, "HTTP", "/redirect/same", "")},
		{name: "redirect followed to its status", target: get(port, "HTTP", "/redirect/same-fails", ""), wantErr: "http status 500"},
		{name: "absolute redirect", target: get(port, "HTTP", "/redirect/absolute", "svc.example")},
		{name: "redirect to another host", target: get(port, "HTTP", "/redirect/other", ""), wantWarning: true},
		{name: "redirect loop", target: get(port, "HTTP", "/redirect/loop", ""), wantErr: "stopped after 10 redirects"},
		{name: "redirect to https on the same host", target: get(extraPort, "HTTP", "/redirect/https", ""), wantErr: "http status 503"},
		{name: "interim 103 then 200", target: get(port, "HTTP", "/early-hints", "")},
		{name: "head over 64 KiB", target: get(port, "HTTP", "/huge-header", ""), wantErr: "reading the response"},
		{name: "body cut short", target: get(extraPort, "HTTP", "/cut-body", ""), wantErr: "reading the response body: unexpected EOF"},
		{name: "HTTPS (a worker)", target: get(tlsPort, "HTTPS", "/status/200", "")},
	}
	var targets []Target
	for _, tc := range tests {
		targets = append(targets, tc.target)
	}
	// The same checks many times over (other paths, so other keys):
	// more than MaxConcurrent of them due together.
	for i := range 100 {
		targets = append(targets, get(port, "HTTP", "/status/200?n="+strings.Repeat("x", i), ""), tcp(port))
		targets[len(targets)-1].Probe.Host = strings.Repeat("h", i+1) // another key, the same probe
	}
	got := probeAll(t, targets, 8)
	if len(got) != len(tests)+200 {
		t.Fatalf("%d checks, want %d", len(got), len(tests)+200)
	}
	c := newNetChecker()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := got[tc.target.Key()]
			if !st.Probed {
				t.Fatalf("not probed: %+v", st)
			}
			switch {
			case tc.wantErr == "" && st.LastError != "":
				t.Fatalf("error %q, want success", st.LastError)
			case tc.wantErr != "" && !strings.Contains(st.LastError, tc.wantErr):
				t.Fatalf("error %q, want one with %q", st.LastError, tc.wantErr)
			}
			if (st.LastWarning != "") != tc.wantWarning {
				t.Errorf("warning %q, want one: %v", st.LastWarning, tc.wantWarning)
			}
			// The worker path says the same.
			warning, err := c.check(testCtx(t), tc.target)
			if msg := errString(err); msg != st.LastError || warning != st.LastWarning {
				t.Errorf("event loop: %q, %q; worker path: %q, %q", st.LastError, st.LastWarning, msg, warning)
			}
		})
	}
	for _, tg := range targets[len(tests):] {
		if st := got[tg.Key()]; !st.Probed || st.LastError != "" || st.Successes != 1 {
			t.Errorf("%s: %+v, want one success", tg.Key(), st)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestLoopSlowBody: a response whose body comes in two parts, the second
// only after the first was sent, is read to its end, not taken for
// complete (which would fail it) after the first part.
func TestLoopSlowBody(t *testing.T) {
	sent, release := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "20")
		w.Write([]byte("0123456789"))
		http.NewResponseController(w).Flush()
		close(sent)
		<-release
		w.Write([]byte("0123456789"))
	}))
	t.Cleanup(srv.Close)
	addr, port := addrPort(t, srv.Listener.Addr().String())
	tg := Target{Addr: addr, Probe: plan.Probe{Action: plan.ProbeHTTPGet, Port: port, Path: "/", PeriodSeconds: 10, TimeoutSeconds: 3600, FailureThreshold: 1}}
	clk := NewFakeClock(t0)
	p := New(Options{Clock: clk})
	defer p.Close()
	p.Set([]Target{tg})
	clk.Advance(10 * time.Second)
	<-sent
	close(release)
	p.WaitIdle()
	if st := p.Snapshot()[0]; !st.Probed || st.LastError != "" || st.Successes != 1 {
		t.Errorf("status %+v, want one success", st)
	}
}

// TestLoopTimeout: a connect that the peer never answers (its accept
// queue is full) ends at the probe's timeout, on the prober's clock.
func TestLoopTimeout(t *testing.T) {
	ap := listenFull(t)
	for _, action := range []plan.ProbeAction{plan.ProbeTCPSocket, plan.ProbeHTTPGet} {
		t.Run(string(action), func(t *testing.T) {
			tg := Target{Addr: ap.Addr(), Probe: plan.Probe{Action: action, Port: ap.Port(), PeriodSeconds: 10, TimeoutSeconds: 1, FailureThreshold: 1}}
			clk := NewFakeClock(t0)
			p := New(Options{Clock: clk})
			defer p.Close()
			p.Set([]Target{tg})
			clk.Advance(offset(tg.Key(), 10*time.Second))
			waitSynSent(t, ap.Port())
			clk.Advance(time.Second)
			p.WaitIdle()
			st := p.Snapshot()[0]
			if st.LastError != "probe timed out after 1s" || st.Ready {
				t.Errorf("status %+v, want a timeout that failed the check", st)
			}
		})
	}
}

// TestLoopCancel: removing a check (Set) or closing the Prober while its
// probe waits for an answer ends the probe with no result, and Close
// leaves no socket, descriptor or goroutine behind.
func TestLoopCancel(t *testing.T) {
	for _, how := range []string{"Set", "Close"} {
		t.Run(how, func(t *testing.T) {
			lis, accepted := silentListener(t)
			addr, port := addrPort(t, lis.Addr().String())
			fds0, goroutines0 := openFDs(t), runtime.NumGoroutine()

			var mu sync.Mutex
			var observed []error
			clk := NewFakeClock(t0)
			p := New(Options{Clock: clk, Observe: func(_ Target, _ plan.ProbeAction, _ time.Duration, err error) {
				mu.Lock()
				observed = append(observed, err)
				mu.Unlock()
			}})
			tg := Target{Addr: addr, Probe: plan.Probe{Action: plan.ProbeHTTPGet, Port: port, Path: "/", PeriodSeconds: 10, TimeoutSeconds: 3600, FailureThreshold: 1}}
			p.Set([]Target{tg})
			clk.Advance(10 * time.Second)
			conn := <-accepted // the probe is connected and waits
			if how == "Set" {
				p.Set(nil)
				p.WaitIdle()
			}
			p.Close()
			// The probe's socket was closed: the server reads its end.
			conn.SetReadDeadline(time.Now().Add(30 * time.Second)) // a bound, not an assertion
			if _, err := bufio.NewReader(conn).ReadString('\n'); err != nil {
				t.Fatal(err) // the request line
			}
			if _, err := conn.Read(make([]byte, 4096)); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				// EOF or a reset: the probe's socket is gone.
			} else {
				// Read the rest of the request, then the end.
				for err == nil {
					_, err = conn.Read(make([]byte, 4096))
				}
				if errors.Is(err, os.ErrDeadlineExceeded) {
					t.Fatal("the probe's connection stayed open")
				}
			}
			conn.Close()
			mu.Lock()
			if len(observed) != 0 {
				t.Errorf("observed %v, want no result of a stopped probe", observed)
			}
			mu.Unlock()
			if n := openFDs(t); n != fds0 {
				t.Errorf("%d open descriptors after Close, %d before New", n, fds0)
			}
			for i := 0; runtime.NumGoroutine() > goroutines0; i++ {
				if i == 3000 {
					t.Fatalf("%d goroutines after Close, %d before New", runtime.NumGoroutine(), goroutines0)
				}
				time.Sleep(time.Millisecond) // goroutines that returned are counted until they exit
			}
		})
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count descriptors: %v", err)
	}
	return len(es) - 1 // the directory's own
}

// TestLoopIPv6 probes [::1] through the event loop.
func TestLoopIPv6(t *testing.T) {
	lis, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	srv := &httptest.Server{Listener: lis, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})}}
	srv.Start()
	t.Cleanup(srv.Close)
	addr, port := addrPort(t, lis.Addr().String())
	var targets []Target
	for _, a := range []plan.ProbeAction{plan.ProbeTCPSocket, plan.ProbeHTTPGet} {
		targets = append(targets, Target{Addr: addr, Probe: plan.Probe{Action: a, Port: port, Path: "/", PeriodSeconds: 10, TimeoutSeconds: 3600, FailureThreshold: 1}})
	}
	for k, st := range probeAll(t, targets, 0) {
		if !st.Probed || st.LastError != "" {
			t.Errorf("%q: %+v, want a success", k, st)
		}
	}
}

// TestLoopLateConnect: a connection that the peer answers only after the
// probe started waiting for it (the first SYN is dropped, as the
// listener's accept queue is full; the test then frees the queue and the
// SYN sent again is answered) ends as one answered at once: tcpSocket
// passes, httpGet sends its request then and reads the answer. One that
// the peer refuses then (the listener is closed before the SYN is sent
// again) fails with the error of a refusal at once.
func TestLoopLateConnect(t *testing.T) {
	for _, action := range []plan.ProbeAction{plan.ProbeTCPSocket, plan.ProbeHTTPGet} {
		for _, refuse := range []bool{false, true} {
			name := string(action) + ", answered"
			if refuse {
				name = string(action) + ", refused"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				lis, ap := fullListener(t)
				tg := Target{Addr: ap.Addr(), Probe: plan.Probe{Action: action, Port: ap.Port(), Path: "/", PeriodSeconds: 10, TimeoutSeconds: 3600, FailureThreshold: 1}}
				clk := NewFakeClock(t0)
				p := New(Options{Clock: clk})
				defer p.Close()
				p.Set([]Target{tg})
				clk.Advance(offset(tg.Key(), 10*time.Second))
				waitSynSent(t, ap.Port()) // the probe waits for its connection
				if refuse {
					lis.Close()
				} else {
					go http.Serve(lis, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
				}
				p.WaitIdle()
				st := p.Snapshot()[0]
				want := ""
				if refuse {
					want = "dial tcp " + ap.String() + ": connect: connection refused"
				}
				if !st.Probed || st.LastError != want {
					t.Errorf("status %+v, want the error %q", st, want)
				}
			})
		}
	}
}

// TestConnectAgain checks against this kernel what the event loop relies
// on (reactor.start, reactor.write): on a non-blocking TCP socket whose
// connect returned EINPROGRESS, a second connect returns EALREADY while
// the handshake is in progress, 0 once the connection is up and the
// connect's error once it failed; a write returns EAGAIN, sends, or
// returns the connect's error. Each state is awaited, not guessed: the
// connection that stays in progress is one whose SYN the peer drops.
func TestConnectAgain(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	up := netip.MustParseAddrPort(lis.Addr().String())
	refused := refusedPort(t, "127.0.0.1")
	inProgress := listenFull(t)
	tests := []struct {
		name  string
		addr  netip.AddrPort
		write bool // a write, else a second connect
		want  error
	}{
		{name: "up, connect", addr: up},
		{name: "up, write", addr: up, write: true},
		{name: "refused, connect", addr: refused, want: unix.ECONNREFUSED},
		{name: "refused, write", addr: refused, write: true, want: unix.ECONNREFUSED},
		{name: "in progress, connect", addr: inProgress, want: unix.EALREADY},
		{name: "in progress, write", addr: inProgress, write: true, want: unix.EAGAIN},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, sa, err := sockaddr(tc.addr)
			if err != nil {
				t.Fatal(err)
			}
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			if err := connect(fd, sa); err != unix.EINPROGRESS {
				t.Fatalf("connect: %v, want EINPROGRESS", err)
			}
			if tc.addr != inProgress {
				// The handshake's end (either way) makes the socket
				// writable. Bounded: a connection on loopback is
				// answered or refused at once.
				fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
				if n, err := unix.Poll(fds, 30_000); n != 1 || err != nil {
					t.Fatalf("poll: %d, %v, want the socket writable", n, err)
				}
			}
			req := []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			if tc.write {
				var n int
				n, err = unix.Write(fd, req)
				if err == nil && n != len(req) {
					t.Errorf("wrote %d bytes, want %d", n, len(req))
				}
			} else {
				err = connect(fd, sa)
			}
			if err != tc.want {
				t.Errorf("%v, want %v", errString(err), errString(tc.want))
			}
			if tc.want == unix.ECONNREFUSED {
				// The loop words it as net.Dialer does.
				_, derr := (&net.Dialer{}).DialContext(testCtx(t), "tcp", tc.addr.String())
				if got := connectError(tc.addr, err).Error(); derr == nil || got != derr.Error() {
					t.Errorf("the loop's error %q, net.Dialer's %v", got, derr)
				}
			}
		})
	}
}

// TestLoopResetAfterResponse: an httpGet probe in the event loop reads the
// whole response, passes, and then resets its connection: a server that
// sent its response and its FIN and reads on sees the reset, not the end
// of the stream (a graceful close).
func TestLoopResetAfterResponse(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	seen := make(chan error, 1)
	go func() {
		conn, err := lis.Accept()
		if err != nil {
			seen <- err
			return
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(30 * time.Second)) // a bound, not an assertion
		br := bufio.NewReader(conn)
		if _, err := http.ReadRequest(br); err != nil {
			seen <- err
			return
		}
		if _, err := conn.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n")); err != nil {
			seen <- err
			return
		}
		conn.(*net.TCPConn).CloseWrite() // the FIN; the server reads on
		_, err = br.ReadByte()
		seen <- err
	}()
	addr, port := addrPort(t, lis.Addr().String())
	tg := Target{Addr: addr, Probe: plan.Probe{Action: plan.ProbeHTTPGet, Port: port, Path: "/", PeriodSeconds: 10, TimeoutSeconds: 3600, FailureThreshold: 1}}
	st := probeAll(t, []Target{tg}, 0)[tg.Key()]
	if !st.Probed || st.LastError != "" {
		t.Errorf("status %+v, want a success", st)
	}
	if err := <-seen; !errors.Is(err, unix.ECONNRESET) {
		t.Errorf("the server read %v after its response, want a reset", err)
	}
}
