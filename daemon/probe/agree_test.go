package probe

import (
	"bufio"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"netspec.dev/netspec/plan"
)

// rawServer listens on 127.0.0.1 and runs handle on each connection it
// accepts, each in a goroutine of its own. The listener closes when the
// test ends, and so does every connection a handle left open.
func rawServer(t *testing.T, handle func(c net.Conn)) netip.AddrPort {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		lis.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			c.SetDeadline(time.Now().Add(30 * time.Second)) // a bound, not an assertion
			go handle(c)
		}
	}()
	return netip.MustParseAddrPort(lis.Addr().String())
}

// afterRequest is a rawServer handler that reads the request, then writes
// answer (may be "") and closes the connection: with a reset when reset.
func afterRequest(answer string, reset bool) func(c net.Conn) {
	return func(c net.Conn) {
		defer c.Close()
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		c.Write([]byte(answer))
		if reset {
			c.(*net.TCPConn).SetLinger(0)
		}
	}
}

// hanging is a rawServer handler that reads the request, writes answer
// (may be "") and then says nothing more until the test ends; it sends on
// stuck once the answer is written, so that the test knows the probe now
// waits for the rest.
func hanging(answer string, stuck chan<- struct{}) func(c net.Conn) {
	return func(c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		c.Write([]byte(answer))
		stuck <- struct{}{}
	}
}

// TestPathsAgree runs the same endpoints through the prober's two paths:
// the event loop (reactor), which runs tcpSocket and http httpGet probes,
// and the workers (netChecker.check), which run them when the loop cannot
// start, and HTTPS, grpc and the https end of a redirect always. Each
// endpoint is probed once through a Prober of each kind, on a fake clock,
// and both must end with the expected verdict and the very same status:
// readiness, error text and warning.
func TestPathsAgree(t *testing.T) {
	srv, _ := newHTTPServer(t, false)
	httpAP := netip.MustParseAddrPort(srv.Listener.Addr().String())
	refused := refusedPort(t, "127.0.0.1")
	// A connect that is never answered: the SYN is dropped.
	unanswered := listenFull(t)
	waitUnanswered := func(t *testing.T) { waitSynSent(t, unanswered.Port()) }
	accepting := rawServer(t, func(c net.Conn) {
		c.Read(make([]byte, 1)) // until the probe closes
		c.Close()
	})
	closing := rawServer(t, func(c net.Conn) { c.Close() })
	slowStuck := make(chan struct{}, 2)
	slow := rawServer(t, hanging("", slowStuck))
	slowBodyStuck := make(chan struct{}, 2)
	slowBody := rawServer(t, hanging("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n01234", slowBodyStuck))
	waitOn := func(ch <-chan struct{}) func(t *testing.T) {
		return func(t *testing.T) {
			select {
			case <-ch:
			case <-time.After(30 * time.Second): // a bound, not an assertion
				t.Fatal("the server never saw the probe's request")
			}
		}
	}

	tcp := func(ap netip.AddrPort) Target {
		return Target{Addr: ap.Addr(), Probe: plan.Probe{Action: plan.ProbeTCPSocket, Port: ap.Port(),
			PeriodSeconds: 10, TimeoutSeconds: 1, FailureThreshold: 1, SuccessThreshold: 1}}
	}
	get := func(ap netip.AddrPort, path string) Target {
		return Target{Addr: ap.Addr(), Probe: plan.Probe{Action: plan.ProbeHTTPGet, Port: ap.Port(), Path: path,
			PeriodSeconds: 10, TimeoutSeconds: 1, FailureThreshold: 1, SuccessThreshold: 1}}
	}
	raw := func(answer string, reset bool) netip.AddrPort { return rawServer(t, afterRequest(answer, reset)) }

	tests := []struct {
		name   string
		target Target
		// stuck, when set, returns once the probe waits for what never
		// comes; the test then lets its timeout pass.
		stuck       func(t *testing.T)
		wantErr     string // a substring of the error; "" is a pass
		wantWarning bool
	}{
		{name: "tcp accepted", target: tcp(accepting)},
		{name: "tcp accepted then closed", target: tcp(closing)},
		{name: "tcp refused", target: tcp(refused), wantErr: "dial tcp " + refused.String() + ": connect: connection refused"},
		{name: "tcp never answered", target: tcp(unanswered), stuck: waitUnanswered, wantErr: "probe timed out after 1s"},

		{name: "http 200", target: get(httpAP, "/status/200")},
		{name: "http 302 to 200", target: get(httpAP, "/redirect/same")},
		{name: "http 399", target: get(httpAP, "/status/399"), wantWarning: true},
		{name: "http 500", target: get(httpAP, "/status/500"), wantErr: "http status 500"},
		{name: "http 302 to 500", target: get(httpAP, "/redirect/same-fails"), wantErr: "http status 500"},
		{name: "http redirect to another host", target: get(httpAP, "/redirect/other"), wantWarning: true},
		{name: "http redirect loop", target: get(httpAP, "/redirect/loop"), wantErr: "stopped after 10 redirects"},
		{name: "http 302 without Location", target: get(raw("HTTP/1.1 302 Found\r\nContent-Length: 0\r\n\r\n", false), "/"), wantWarning: true},
		{name: "http 302 to a bad Location", target: get(raw("HTTP/1.1 302 Found\r\nLocation: http://[::1\r\nContent-Length: 0\r\n\r\n", false), "/"), wantErr: "bad Location"},
		{name: "http 100 then 200", target: get(raw("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false), "/")},
		{name: "http 1.0, body to the end", target: get(raw("HTTP/1.0 200 OK\r\n\r\nall of it", false), "/")},
		{name: "http chunked", target: get(raw("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", false), "/")},
		{name: "http chunked, cut", target: get(raw("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n20\r\nok", false), "/"), wantErr: "reading the response body: unexpected EOF"},
		{name: "http body cut short", target: get(raw("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789", false), "/"), wantErr: "reading the response body: unexpected EOF"},
		{name: "http head cut short", target: get(raw("HTTP/1.1 200 OK\r\nContent-Le", false), "/"), wantErr: "reading the response: malformed MIME header"},
		{name: "http closed without an answer", target: get(raw("", false), "/"), wantErr: "reading the response: unexpected EOF"},
		{name: "http reset without an answer", target: get(raw("", true), "/"), wantErr: "connection reset by peer"},
		{name: "http not HTTP", target: get(raw("SSH-2.0-OpenSSH_9.2\r\n", false), "/"), wantErr: "reading the response: malformed HTTP response"},
		{name: "http refused", target: get(refused, "/"), wantErr: "dial tcp " + refused.String() + ": connect: connection refused"},
		{name: "http never answered", target: get(unanswered, "/"), stuck: waitUnanswered, wantErr: "probe timed out after 1s"},
		{name: "http no answer within the timeout", target: get(slow, "/"), stuck: waitOn(slowStuck), wantErr: "probe timed out after 1s"},
		{name: "http body slower than the timeout", target: get(slowBody, "/"), stuck: waitOn(slowBodyStuck), wantErr: "probe timed out after 1s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !reactorCheck(&tc.target) {
				t.Fatal("not a probe of the event loop: the case compares nothing")
			}
			loop := probeOnce(t, tc.target, false, tc.stuck)
			workers := probeOnce(t, tc.target, true, tc.stuck)
			switch {
			case tc.wantErr == "" && loop.LastError != "":
				t.Errorf("event loop: error %q, want a pass", loop.LastError)
			case tc.wantErr != "" && !strings.Contains(loop.LastError, tc.wantErr):
				t.Errorf("event loop: error %q, want one with %q", loop.LastError, tc.wantErr)
			}
			if (loop.LastWarning != "") != tc.wantWarning {
				t.Errorf("event loop: warning %q, want one: %v", loop.LastWarning, tc.wantWarning)
			}
			if loop.Ready != (tc.wantErr == "") {
				t.Errorf("event loop: ready %v after one probe, want %v", loop.Ready, tc.wantErr == "")
			}
			if loop.Ready != workers.Ready || loop.LastError != workers.LastError || loop.LastWarning != workers.LastWarning ||
				loop.Failures != workers.Failures || loop.Successes != workers.Successes {
				t.Errorf("the paths disagree:\nevent loop: ready %v, %d failures, %d successes, error %q, warning %q\nworkers:    ready %v, %d failures, %d successes, error %q, warning %q",
					loop.Ready, loop.Failures, loop.Successes, loop.LastError, loop.LastWarning,
					workers.Ready, workers.Failures, workers.Successes, workers.LastError, workers.LastWarning)
			}
		})
	}
}

// probeOnce probes tg once through a Prober with the network checker, on
// a fake clock: through its workers alone when workers, as when the event
// loop cannot start, else through the loop. With stuck, it waits for it,
// then moves the clock past the probe's timeout. It returns the check's
// status after the probe.
func probeOnce(t *testing.T, tg Target, workers bool, stuck func(t *testing.T)) Status {
	t.Helper()
	clk := NewFakeClock(t0)
	p := New(Options{Clock: clk})
	defer p.Close()
	p.noLoop = workers // before the first run, which would start the loop
	p.Set([]Target{tg})
	clk.Advance(offset(tg.Key(), time.Duration(tg.Probe.PeriodSeconds)*time.Second))
	if stuck != nil {
		stuck(t)
		clk.Advance(time.Duration(tg.Probe.TimeoutSeconds) * time.Second)
	}
	p.WaitIdle()
	st := p.Snapshot()[0]
	if !st.Probed {
		t.Fatalf("workers %v: not probed: %+v", workers, st)
	}
	p.mu.Lock()
	loopRan := p.reactor != nil
	p.mu.Unlock()
	if loopRan == workers {
		t.Fatalf("workers %v, but the event loop ran: %v", workers, loopRan)
	}
	return st
}
