package probe

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"netspec.dev/netspec/plan"
)

// UserAgent is the User-Agent of httpGet and grpc probes, unless the
// probe's httpHeaders set one (the kubelet sends kube-probe/<version>).
const UserAgent = "netspec-probe/1"

// maxBody is how much of an httpGet response body is read before the
// connection is closed (the kubelet reads 10 KiB); the body is ignored.
const maxBody = 10 << 10

// maxRedirects is how many same-host redirects an httpGet probe follows.
const maxRedirects = 10

// netChecker runs the probes over the network. One is shared by all
// checks; it keeps no connection between probes.
type netChecker struct {
	dialer net.Dialer
}

func newNetChecker() *netChecker {
	c := &netChecker{dialer: net.Dialer{
		Control: shortLinger,
		// A probe's connection lives for one request: TCP keep-alive
		// would only cost four setsockopt calls per probe.
		KeepAlive: -1,
	}}
	return c
}

// httpLinger is the SO_LINGER of httpGet probes, in seconds: the
// kubelet's probe dialer's. A close waits (at most that long) for the
// request to be acknowledged instead of discarding it with a reset.
const httpLinger = 1

// tcpSocketLinger is the SO_LINGER of tcpSocket probes: 0, so that the
// close resets the connection (see docs/performance.md, "The prober's own
// cost"). A tcpSocket probe sends no data, so a reset discards nothing;
// it spares the FIN exchange, the wait for its acknowledgment (which the
// peer delays until its application closes) and a minute of TIME-WAIT on
// the node per probe. HAProxy's TCP checks close the same way. The
// kubelet's 1 s lingers through a graceful close instead.
const tcpSocketLinger = 0

// shortLinger sets SO_LINGER to 1 s on probe sockets, as the kubelet's
// probe dialer does, so that thousands of probes a second do not each
// leave a socket in TIME-WAIT for a minute.
func shortLinger(_, _ string, rc syscall.RawConn) error {
	var serr error
	err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptLinger(int(fd), syscall.SOL_SOCKET, syscall.SO_LINGER, &syscall.Linger{Onoff: 1, Linger: 1})
	})
	if err != nil {
		return err
	}
	return serr
}

func (c *netChecker) check(ctx context.Context, t Target) (string, error) {
	switch t.Probe.Action {
	case plan.ProbeHTTPGet:
		return c.httpGet(ctx, t)
	case plan.ProbeTCPSocket:
		return "", c.tcpSocket(ctx, t)
	case plan.ProbeGRPC:
		return "", c.grpc(ctx, t)
	}
	return "", fmt.Errorf("unknown probe action %q", t.Probe.Action)
}

// probeURL is the URL an httpGet probe requests: the scheme, the probe's
// Host (else the target address) and port, and the path with its query.
func probeURL(t Target) *url.URL {
	pr := &t.Probe
	scheme := strings.ToLower(pr.Scheme)
	if scheme == "" {
		scheme = "http"
	}
	host := pr.Host
	if host == "" {
		host = t.Addr.WithZone("").String()
	}
	u, err := url.Parse(pr.Path)
	if err != nil {
		// As the kubelet: too late to reject the path; send it as it is.
		u = &url.URL{Path: pr.Path}
	}
	u.Scheme = scheme
	u.Host = net.JoinHostPort(host, strconv.Itoa(int(pr.Port)))
	if u.Path != "" && !strings.HasPrefix(u.Path, "/") {
		// As the URL's text reads once it has a host: "healthz" is
		// "/healthz".
		u.Path = "/" + u.Path
		if u.RawPath != "" {
			u.RawPath = "/" + u.RawPath
		}
	}
	return u
}

// httpGet sends one GET, following redirects to the same host; a final
// status from 200 to 399 is a success, a 3xx (a redirect to another host,
// not followed) with a warning. It behaves as the kubelet's probe, which
// uses net/http's client with keep-alive and compression off, but speaks
// HTTP/1.1 over one connection per request itself: net/http's transport
// starts three goroutines and allocates its buffers per connection, which
// is most of the user CPU of a node probing thousands of endpoints.
func (c *netChecker) httpGet(ctx context.Context, t Target) (string, error) {
	req := httpRequest(t)
	return c.httpFollow(ctx, t.Addr, req, 0)
}

// httpRequest is the first request of t's httpGet probe.
func httpRequest(t Target) *http.Request {
	u := probeURL(t)
	h := make(http.Header, len(t.Probe.Headers)+2)
	for _, hd := range t.Probe.Headers {
		h.Add(hd.Name, hd.Value)
	}
	if _, ok := h["User-Agent"]; !ok {
		h.Set("User-Agent", UserAgent)
	}
	if _, ok := h["Accept"]; !ok {
		h.Set("Accept", "*/*")
	} else if h.Get("Accept") == "" {
		h.Del("Accept") // an empty Accept header removes it, as the kubelet
	}
	return newRequest(u, h, h.Get("Host")) // Host "" is the URL's host
}

// httpFollow sends req (after redirects redirects) and follows the
// redirects that httpNext allows.
func (c *netChecker) httpFollow(ctx context.Context, addr netip.Addr, req *http.Request, redirects int) (string, error) {
	for ; ; redirects++ {
		status, location, err := c.roundTrip(ctx, addr, req)
		if err != nil {
			return "", err
		}
		next, warning, err := httpNext(req, redirects, status, location)
		if next == nil {
			return warning, err
		}
		req = next
	}
}

// httpNext is what follows the response (status, Location) to req, the
// request after redirects redirects: the next request of a redirect to
// follow, or else the probe's result.
func httpNext(req *http.Request, redirects, status int, location string) (next *http.Request, warning string, err error) {
	if !isRedirect(status) || location == "" {
		warning, err = httpResult(status)
		return nil, warning, err
	}
	u, err := req.URL.Parse(location)
	if err != nil {
		return nil, "", fmt.Errorf("http status %d: bad Location %q: %w", status, location, err)
	}
	if u.Hostname() != req.URL.Hostname() {
		warning, err = httpResult(status) // not followed, as the kubelet
		return nil, warning, err
	}
	if redirects+1 >= maxRedirects {
		return nil, "", fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	// As net/http: a Host header survives only a relative redirect.
	host := ""
	if loc, err := url.Parse(location); err == nil && !loc.IsAbs() {
		host = req.Host
	}
	return newRequest(u, req.Header, host), "", nil
}

// newRequest is a GET of u that asks the server to close the connection
// (no keep-alive between probes).
func newRequest(u *url.URL, h http.Header, host string) *http.Request {
	return &http.Request{
		Method: http.MethodGet, URL: u, Header: h, Host: host, Close: true,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
	}
}

func isRedirect(status int) bool {
	switch status {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// httpResult is the verdict on a final status.
func httpResult(status int) (string, error) {
	if status < http.StatusOK || status >= http.StatusBadRequest {
		return "", fmt.Errorf("http status %d", status)
	}
	if status >= http.StatusMultipleChoices {
		return fmt.Sprintf("http status %d: redirect not followed (another host), counted as a success", status), nil
	}
	return "", nil
}

// maxHeader bounds the bytes of a response's head; with the body limit
// and one read buffer it bounds what one request reads.
const maxHeader = 64 << 10

// roundTrip sends req over a new connection to addr at the URL's port and
// returns the final status and Location; it reads at most maxBody of the
// body and closes the connection.
func (c *netChecker) roundTrip(ctx context.Context, addr netip.Addr, req *http.Request) (status int, location string, err error) {
	port := req.URL.Port()
	if port == "" {
		port = "80"
		if req.URL.Scheme == "https" {
			port = "443"
		}
	}
	var conn io.ReadWriter
	switch req.URL.Scheme {
	case "http":
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			return 0, "", fmt.Errorf("bad port %q", port)
		}
		pc, err := dialProbe(ctx, netip.AddrPortFrom(addr, uint16(n)), httpLinger)
		if err != nil {
			return 0, "", err
		}
		defer pc.Close()
		conn = pc
	case "https":
		raw, err := c.dialer.DialContext(ctx, "tcp", net.JoinHostPort(addr.String(), port))
		if err != nil {
			return 0, "", err
		}
		defer raw.Close()
		// The context ends the probe (timeout, Set, Close): unblock any
		// read or write then.
		stop := context.AfterFunc(ctx, func() { raw.SetDeadline(time.Unix(1, 0)) })
		defer stop()
		// As the kubelet: a probe checks that the endpoint answers, not
		// who it is.
		tc := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, ServerName: req.URL.Hostname()})
		if err := tc.HandshakeContext(ctx); err != nil {
			return 0, "", err
		}
		conn = tc
	default:
		return 0, "", fmt.Errorf("unsupported scheme %q", req.URL.Scheme)
	}
	bw := bufio.NewWriterSize(conn, 512)
	if err := req.Write(bw); err != nil {
		return 0, "", err
	}
	if err := bw.Flush(); err != nil {
		return 0, "", err
	}
	return readResponse(bufio.NewReaderSize(io.LimitReader(conn, maxRead), 4096), req)
}

// maxRead bounds what one request reads: the head, the body and one
// read buffer.
const maxRead = maxHeader + maxBody + 4096

// readResponse reads the response to req from br: the final status and
// Location, after reading at most maxBody of the body.
func readResponse(br *bufio.Reader, req *http.Request) (status int, location string, err error) {
	var res *http.Response
	for interim := 0; ; interim++ {
		res, err = http.ReadResponse(br, req)
		if err != nil {
			return 0, "", fmt.Errorf("reading the response: %w", err)
		}
		// As net/http: 1xx other than 101 are interim responses.
		if res.StatusCode >= 200 || res.StatusCode == http.StatusSwitchingProtocols || interim >= 5 {
			break
		}
	}
	defer res.Body.Close()
	if _, err := io.Copy(io.Discard, io.LimitReader(res.Body, maxBody)); err != nil {
		return 0, "", fmt.Errorf("reading the response body: %w", err)
	}
	return res.StatusCode, res.Header.Get("Location"), nil
}

// tcpSocket connects and closes.
func (c *netChecker) tcpSocket(ctx context.Context, t Target) error {
	conn, err := dialProbe(ctx, netip.AddrPortFrom(t.Addr, t.Probe.Port), tcpSocketLinger)
	if err != nil {
		return err
	}
	return conn.Close()
}

// grpc asks grpc.health.v1.Health/Check about the probe's service over an
// insecure connection; SERVING is a success.
func (c *netChecker) grpc(ctx context.Context, t Target) error {
	addr := netip.AddrPortFrom(t.Addr, t.Probe.Port).String()
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUserAgent(UserAgent),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return c.dialer.DialContext(ctx, "tcp", addr)
		}),
	)
	if err != nil {
		return err
	}
	defer conn.Close()
	res, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: t.Probe.GRPCService})
	if err != nil {
		if status.Code(err) == codes.Unimplemented {
			return fmt.Errorf("the server does not implement grpc.health.v1.Health: %w", err)
		}
		return fmt.Errorf("grpc health check: %w", err)
	}
	if s := res.GetStatus(); s != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("grpc health status %s", s)
	}
	return nil
}
