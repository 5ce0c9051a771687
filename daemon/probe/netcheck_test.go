package probe

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"netspec.dev/netspec/plan"
)

// The servers of these tests listen on 127.0.0.1 and every probe has a
// context bounded by testCtx, so that a hanging probe fails the test
// instead of blocking it; no assertion depends on that bound.

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// addrPort splits a listener's address into the target address and port.
func addrPort(t *testing.T, addr string) (netip.Addr, uint16) {
	t.Helper()
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return ap.Addr(), ap.Port()
}

// seen is what the test HTTP server saw of the last /echo request.
type seen struct {
	host    string
	path    string
	query   string
	headers http.Header
	close   bool
}

func newHTTPServer(t *testing.T, tls bool) (*httptest.Server, func() seen) {
	var (
		mu   sync.Mutex
		last seen
	)
	mux := http.NewServeMux()
	mux.HandleFunc("/status/{code}", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.PathValue("code"))
		if code < 200 {
			// A final status below 200 cannot be written through
			// ResponseWriter (1xx are informational there).
			conn, bw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			bw.WriteString("HTTP/1.1 " + strconv.Itoa(code) + " Odd\r\nContent-Length: 0\r\n\r\n")
			bw.Flush()
			conn.Close()
			return
		}
		w.WriteHeader(code)
		w.Write([]byte(strings.Repeat("x", 64<<10))) // more than is read
	})
	mux.HandleFunc("/redirect/same", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/status/200", http.StatusFound)
	})
	mux.HandleFunc("/redirect/same-fails", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/status/500", http.StatusFound)
	})
	mux.HandleFunc("/redirect/absolute", func(w http.ResponseWriter, r *http.Request) {
		// To the host the request named, which is the probe's Host.
		http.Redirect(w, r, "http://"+r.Host+"/status/200", http.StatusFound)
	})
	mux.HandleFunc("/redirect/other", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://other.invalid/status/500", http.StatusFound)
	})
	mux.HandleFunc("/redirect/loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/redirect/loop", http.StatusFound)
	})
	mux.HandleFunc("/early-hints", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("/huge-header", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Huge", strings.Repeat("x", 100<<10))
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		last = seen{host: r.Host, path: r.URL.Path, query: r.URL.RawQuery, headers: r.Header.Clone(), close: r.Close}
		mu.Unlock()
	})
	var srv *httptest.Server
	if tls {
		srv = httptest.NewTLSServer(mux)
	} else {
		srv = httptest.NewServer(mux)
	}
	t.Cleanup(srv.Close)
	return srv, func() seen {
		mu.Lock()
		defer mu.Unlock()
		return last
	}
}

func TestHTTPGet(t *testing.T) {
	srv, _ := newHTTPServer(t, false)
	tlsSrv, _ := newHTTPServer(t, true)
	tests := []struct {
		name        string
		tls         bool
		path        string
		host        string
		wantErr     string // substring; "" is a success
		wantWarning bool
	}{
		{name: "199 is a failure", path: "/status/199", wantErr: "EOF"},
		{name: "200", path: "/status/200"},
		{name: "204", path: "/status/204"},
		{name: "399 is a success, with a warning as for any final 3xx", path: "/status/399", wantWarning: true},
		{name: "400", path: "/status/400", wantErr: "http status 400"},
		{name: "500", path: "/status/500", wantErr: "http status 500"},
		{name: "redirect to the same host is followed", path: "/redirect/same"},
		{name: "redirect to the same host is followed to its status", path: "/redirect/same-fails", wantErr: "http status 500"},
		{name: "absolute redirect to the probe's host is followed to the target", path: "/redirect/absolute", host: "svc.example"},
		{name: "redirect to another host: success with a warning", path: "/redirect/other", wantWarning: true},
		{name: "redirect loop", path: "/redirect/loop", wantErr: "stopped after 10 redirects"},
		{name: "an interim 103 then 200", path: "/early-hints"},
		{name: "a response head over 64 KiB is a failure", path: "/huge-header", wantErr: "reading the response"},
		{name: "HTTPS without certificate verification", tls: true, path: "/status/200"},
		{name: "HTTPS 503", tls: true, path: "/status/503", wantErr: "http status 503"},
	}
	c := newNetChecker()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, scheme := srv, "HTTP"
			if tc.tls {
				s, scheme = tlsSrv, "HTTPS"
			}
			addr, port := addrPort(t, s.Listener.Addr().String())
			tg := Target{Addr: addr, Probe: plan.Probe{Action: plan.ProbeHTTPGet, Port: port, Scheme: scheme, Path: tc.path, Host: tc.host}}
			warning, err := c.check(testCtx(t), tg)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("error %v, want success", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one with %q", err, tc.wantErr)
			}
			if (warning != "") != tc.wantWarning {
				t.Errorf("warning %q, want one: %v", warning, tc.wantWarning)
			}
		})
	}
}

func TestHTTPGetRequest(t *testing.T) {
	srv, last := newHTTPServer(t, false)
	addr, port := addrPort(t, srv.Listener.Addr().String())
	hostPort := srv.Listener.Addr().String()
	tests := []struct {
		name      string
		probe     plan.Probe
		wantHost  string
		wantQuery string
		want      map[string][]string // headers; nil value: absent
	}{
		{
			name:     "defaults",
			probe:    plan.Probe{Path: "/echo"},
			wantHost: hostPort,
			want:     map[string][]string{"User-Agent": {UserAgent}, "Accept": {"*/*"}, "Connection": {"close"}},
		},
		{
			name: "host, query and headers",
			probe: plan.Probe{Path: "/echo?a=1&b=2", Host: "svc.example", Headers: []plan.ProbeHeader{
				{Name: "X-Probe", Value: "one"}, {Name: "x-probe", Value: "two"},
			}},
			wantHost:  "svc.example:" + strconv.Itoa(int(port)),
			wantQuery: "a=1&b=2",
			want:      map[string][]string{"X-Probe": {"one", "two"}, "User-Agent": {UserAgent}},
		},
		{
			name: "a Host header wins over host; User-Agent and an empty Accept are the probe's",
			probe: plan.Probe{Path: "echo", Host: "svc.example", Headers: []plan.ProbeHeader{
				{Name: "Host", Value: "override.example"}, {Name: "User-Agent", Value: "mine/2"}, {Name: "Accept", Value: ""},
			}},
			wantHost: "override.example",
			want:     map[string][]string{"User-Agent": {"mine/2"}, "Accept": nil},
		},
	}
	c := newNetChecker()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pr := tc.probe
			pr.Action, pr.Port = plan.ProbeHTTPGet, port
			if _, err := c.check(testCtx(t), Target{Addr: addr, Probe: pr}); err != nil {
				t.Fatal(err)
			}
			got := last()
			if got.host != tc.wantHost || got.path != "/echo" || got.query != tc.wantQuery {
				t.Errorf("request Host %q path %q query %q, want %q /echo %q", got.host, got.path, got.query, tc.wantHost, tc.wantQuery)
			}
			if !got.close {
				t.Error("request without Connection: close: keep-alive must be off between probes")
			}
			for name, want := range tc.want {
				if v := got.headers.Values(name); strings.Join(v, "|") != strings.Join(want, "|") || (want == nil) != (v == nil) {
					t.Errorf("header %s = %q, want %q", name, v, want)
				}
			}
		})
	}
}

func TestTCPSocket(t *testing.T) {
	open, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	go func() {
		for {
			conn, err := open.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()

	tests := []struct {
		name    string
		addr    string
		wantErr string
	}{
		{name: "accepted", addr: open.Addr().String()},
		{name: "refused", addr: closedAddr, wantErr: "connection refused"},
	}
	c := newNetChecker()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr, port := addrPort(t, tc.addr)
			_, err := c.check(testCtx(t), Target{Addr: addr, Probe: plan.Probe{Action: plan.ProbeTCPSocket, Port: port}})
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// newGRPCServer serves grpc on 127.0.0.1; with the health service it
// reports "up" SERVING and "down" NOT_SERVING ("" is SERVING).
func newGRPCServer(t *testing.T, withHealth bool) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	if withHealth {
		hs := health.NewServer()
		hs.SetServingStatus("up", healthpb.HealthCheckResponse_SERVING)
		hs.SetServingStatus("down", healthpb.HealthCheckResponse_NOT_SERVING)
		healthpb.RegisterHealthServer(s, hs)
	}
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

func TestGRPC(t *testing.T) {
	withHealth := newGRPCServer(t, true)
	without := newGRPCServer(t, false)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	tests := []struct {
		name    string
		addr    string
		service string
		wantErr string
	}{
		{name: "SERVING", addr: withHealth, service: "up"},
		{name: "the whole server", addr: withHealth, service: ""},
		{name: "NOT_SERVING", addr: withHealth, service: "down", wantErr: "grpc health status NOT_SERVING"},
		{name: "unknown service", addr: withHealth, service: "nope", wantErr: "NotFound"},
		{name: "health not implemented", addr: without, wantErr: "does not implement grpc.health.v1.Health"},
		{name: "refused", addr: closedAddr, wantErr: "connection refused"},
	}
	c := newNetChecker()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr, port := addrPort(t, tc.addr)
			_, err := c.check(testCtx(t), Target{Addr: addr, Probe: plan.Probe{Action: plan.ProbeGRPC, Port: port, GRPCService: tc.service}})
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestNetworkTimeout runs each action through a Prober with a fake clock
// against a listener that accepts and never answers: the probe ends when
// the fake clock passes its timeout, not before.
func TestNetworkTimeout(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			conn, err := lis.Accept()
			if err != nil {
				return
			}
			accepted <- conn // held open, never written to
		}
	}()
	defer func() {
		lis.Close()
		close(accepted)
		for c := range accepted {
			c.Close()
		}
	}()
	addr, port := addrPort(t, lis.Addr().String())
	tests := []struct {
		name   string
		action plan.ProbeAction
	}{
		{name: "httpGet", action: plan.ProbeHTTPGet},
		{name: "grpc", action: plan.ProbeGRPC},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := NewFakeClock(t0)
			var (
				mu  sync.Mutex
				got []error
			)
			p := New(Options{Clock: clk, Observe: func(_ Target, _ plan.ProbeAction, _ time.Duration, err error) {
				mu.Lock()
				got = append(got, err)
				mu.Unlock()
			}})
			defer p.Close()
			tg := Target{Addr: addr, Probe: plan.Probe{Action: tc.action, Port: port, PeriodSeconds: 10, TimeoutSeconds: 1, FailureThreshold: 1, SuccessThreshold: 1}}
			p.Set([]Target{tg})
			clk.Advance(offset(tg.Key(), 10*time.Second))
			<-accepted // the probe is connected and waits for an answer
			clk.Advance(time.Second - time.Millisecond)
			mu.Lock()
			early := len(got)
			mu.Unlock()
			if early != 0 {
				t.Fatalf("probe ended before its timeout: %v", got)
			}
			clk.Advance(time.Millisecond)
			p.WaitIdle()
			mu.Lock()
			defer mu.Unlock()
			if len(got) != 1 || !errors.Is(got[0], ErrTimeout) {
				t.Fatalf("probe errors %v, want one ErrTimeout", got)
			}
			if p.Ready(tg.Key()) {
				t.Error("ready after a timeout with failureThreshold 1")
			}
			if st := p.Snapshot()[0]; st.LastError != "probe timed out after 1s" || st.LastDuration != time.Second {
				t.Errorf("status %+v", st)
			}
		})
	}
}

// TestIPv6 probes a server on [::1]: the URL brackets the address, the
// dialer takes it as it is.
func TestIPv6(t *testing.T) {
	lis, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host != lis.Addr().String() {
			http.Error(w, "Host "+r.Host, http.StatusBadRequest)
		}
	})}
	go srv.Serve(lis)
	t.Cleanup(func() { srv.Close() })
	addr, port := addrPort(t, lis.Addr().String())
	c := newNetChecker()
	for _, action := range []plan.ProbeAction{plan.ProbeHTTPGet, plan.ProbeTCPSocket} {
		if _, err := c.check(testCtx(t), Target{Addr: addr, Probe: plan.Probe{Action: action, Port: port, Path: "/"}}); err != nil {
			t.Errorf("%s to %s: %v", action, lis.Addr(), err)
		}
	}
}
