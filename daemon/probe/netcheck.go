package probe

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"

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
// checks: its HTTP transport keeps no connection between probes.
type netChecker struct {
	dialer    net.Dialer
	transport *http.Transport
}

func newNetChecker() *netChecker {
	c := &netChecker{dialer: net.Dialer{
		Control: shortLinger,
		// A probe's connection lives for one request: TCP keep-alive
		// would only cost four setsockopt calls per probe.
		KeepAlive: -1,
	}}
	c.transport = &http.Transport{
		Proxy:       nil, // never the node's proxy: probes go to the endpoint
		DialContext: c.dialTarget,
		// As the kubelet: a probe checks that the endpoint answers, not
		// who it is.
		TLSClientConfig:    &tls.Config{InsecureSkipVerify: true},
		DisableKeepAlives:  true,
		DisableCompression: true,
	}
	return c
}

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

// targetAddr is the context key of the address an httpGet probe connects
// to, whatever host its URL names.
type targetAddr struct{}

// dialTarget connects to the probe's target address at the port of addr:
// the URL's host is the probe's Host (for the Host header and TLS server
// name) and redirects are followed to that same host only.
func (c *netChecker) dialTarget(ctx context.Context, network, addr string) (net.Conn, error) {
	ip, ok := ctx.Value(targetAddr{}).(netip.Addr)
	if !ok {
		return nil, errors.New("probe: no target address in context")
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	return c.dialer.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
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
	return u
}

// httpGet sends one GET; a status from 200 to 399 is a success, a 3xx
// (a redirect to another host, not followed) with a warning.
func (c *netChecker) httpGet(ctx context.Context, t Target) (string, error) {
	u := probeURL(t)
	req, err := http.NewRequestWithContext(context.WithValue(ctx, targetAddr{}, t.Addr), http.MethodGet, u.String(), nil)
	if err != nil {
		return "", err
	}
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
	req.Header = h
	req.Host = h.Get("Host") // "" is the URL's host
	client := &http.Client{Transport: c.transport, CheckRedirect: sameHostRedirects}
	res, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	if _, err := io.Copy(io.Discard, io.LimitReader(res.Body, maxBody)); err != nil {
		return "", fmt.Errorf("reading the response body: %w", err)
	}
	if res.StatusCode < http.StatusOK || res.StatusCode >= http.StatusBadRequest {
		return "", fmt.Errorf("http status %d", res.StatusCode)
	}
	if res.StatusCode >= http.StatusMultipleChoices {
		return fmt.Sprintf("http status %d: redirect not followed (another host), counted as a success", res.StatusCode), nil
	}
	return "", nil
}

// sameHostRedirects follows a redirect only to the host of the first
// request, at most maxRedirects times; a redirect elsewhere ends the probe
// with that response, as the kubelet does.
func sameHostRedirects(req *http.Request, via []*http.Request) error {
	if req.URL.Hostname() != via[0].URL.Hostname() {
		return http.ErrUseLastResponse
	}
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	return nil
}

// tcpSocket connects and closes.
func (c *netChecker) tcpSocket(ctx context.Context, t Target) error {
	// Not Dialer.DialTCP: its zero local address is bound explicitly,
	// and bind's search for a free port costs ten times the connect.
	conn, err := c.dialer.DialContext(ctx, "tcp", netip.AddrPortFrom(t.Addr, t.Probe.Port).String())
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
