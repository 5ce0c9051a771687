package dnsserver

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// DefaultForwardTimeout is how long the server waits for one upstream
// (per transport: a truncated UDP answer asked again over TCP gets as
// long again).
const DefaultForwardTimeout = 2 * time.Second

// DefaultMaxForwards bounds the queries forwarded at once; beyond it a
// query that needs an upstream gets SERVFAIL.
const DefaultMaxForwards = 256

// ResolvConf is the host's resolver configuration, the file that
// ParseUpstreams reads for the value "resolv.conf".
const ResolvConf = "/etc/resolv.conf"

// forwarder sends queries outside the served zones, and the targets of
// CNAMEs that leave them, to the upstreams, one at a time in order.
type forwarder struct {
	upstreams []string // host:port
	timeout   time.Duration
	slots     chan struct{} // a token per forwarded query in flight
	onForward func(upstream, result string)
}

// Results of one query to an upstream, as Options.OnForward gets them
// besides the upstream's RCODE names.
const (
	// ForwardError: the upstream gave no usable answer (a timeout, a
	// network error, a reply to another question).
	ForwardError = "error"
	// ForwardBusy: no upstream was asked, MaxForwards queries were in
	// flight already (upstream "").
	ForwardBusy = "busy"
)

func newForwarder(opts Options) *forwarder {
	if len(opts.Upstreams) == 0 {
		return nil
	}
	n := opts.MaxForwards
	if n <= 0 {
		n = DefaultMaxForwards
	}
	t := opts.ForwardTimeout
	if t <= 0 {
		t = DefaultForwardTimeout
	}
	on := opts.OnForward
	if on == nil {
		on = func(string, string) {}
	}
	return &forwarder{upstreams: opts.Upstreams, timeout: t, slots: make(chan struct{}, n), onForward: on}
}

// errBusy: every forwarding slot is taken.
var errBusy = errors.New("too many forwarded queries in flight")

// exchange asks the upstreams q (a query as the client sent it: its
// EDNS0 OPT, DO bit and flags kept; a fresh ID) and returns the first
// answer: over UDP, asked again over TCP when truncated. An upstream that
// fails (timeout, network error, a reply to another question) is skipped;
// one answering SERVFAIL or REFUSED is skipped too, but its answer is
// returned if no later upstream answers better.
func (f *forwarder) exchange(q *dns.Msg) (*dns.Msg, error) {
	select {
	case f.slots <- struct{}{}:
		defer func() { <-f.slots }()
	default:
		f.onForward("", ForwardBusy)
		return nil, errBusy
	}
	out := q.Copy()
	out.Id = dns.Id()
	out.Response = false
	var fallback *dns.Msg
	var lastErr error
	for _, up := range f.upstreams {
		r, err := f.ask(out, up)
		if err != nil {
			f.onForward(up, ForwardError)
			lastErr = fmt.Errorf("upstream %s: %w", up, err)
			continue
		}
		f.onForward(up, RcodeName(r.Rcode))
		if r.Rcode == dns.RcodeServerFailure || r.Rcode == dns.RcodeRefused {
			if fallback == nil {
				fallback = r
			}
			continue
		}
		return r, nil
	}
	if fallback != nil {
		return fallback, nil
	}
	return nil, lastErr
}

// RcodeName is the name of a DNS response code (NOERROR, NXDOMAIN, …),
// or its number when it has none: how metrics label it.
func RcodeName(rcode int) string {
	if name, ok := dns.RcodeToString[rcode]; ok {
		return name
	}
	return strconv.Itoa(rcode)
}

// ask sends m to one upstream.
func (f *forwarder) ask(m *dns.Msg, addr string) (*dns.Msg, error) {
	c := &dns.Client{Net: "udp", Timeout: f.timeout}
	r, _, err := c.Exchange(m, addr)
	if err == nil && r.Truncated {
		c.Net = "tcp"
		r, _, err = c.Exchange(m, addr)
	}
	if err != nil {
		return nil, err
	}
	if len(r.Question) != 1 || !strings.EqualFold(r.Question[0].Name, m.Question[0].Name) ||
		r.Question[0].Qtype != m.Question[0].Qtype || r.Question[0].Qclass != m.Question[0].Qclass {
		return nil, errors.New("reply to another question")
	}
	return r, nil
}

// forward answers r, a query outside the served zones, with the upstream's
// reply: its RCODE, flags (RA as the upstream sets it) and sections, with
// the client's ID and question; SERVFAIL when no upstream answers.
func (s *Server) forward(w dns.ResponseWriter, r *dns.Msg, udp bool) {
	reply, err := s.fwd.exchange(r)
	if err != nil {
		m := new(dns.Msg)
		m.SetRcode(r, dns.RcodeServerFailure)
		m.RecursionAvailable = true
		s.write(w, m, r.IsEdns0(), udp)
		return
	}
	reply.Id = r.Id
	reply.Question = r.Question // the client's spelling
	reply.Compress = true
	s.send(w, reply, replySize(r.IsEdns0(), udp))
}

// appendTarget adds to m, an answer that ends in a CNAME to target (a name
// outside the served zones: an ExternalName Service), the upstream's
// records of the asked type at target, as CoreDNS's kubernetes plugin does.
// If no upstream answers, m keeps the CNAME alone.
func (s *Server) appendTarget(m, r *dns.Msg, target string) {
	q := r.Question[0]
	up := r.Copy()
	up.Question = []dns.Question{{Name: target, Qtype: q.Qtype, Qclass: q.Qclass}}
	up.RecursionDesired = true
	reply, err := s.fwd.exchange(up)
	if err != nil || reply.Rcode != dns.RcodeSuccess {
		return
	}
	for _, rr := range reply.Answer {
		if rr.Header().Rrtype == dns.TypeOPT {
			continue
		}
		m.Answer = append(m.Answer, rr)
	}
}

// ParseUpstreams parses the value of --dns-upstream: comma-separated IP
// or IP:PORT (port 53 by default; IPv6 with a port in brackets), or the
// word resolv.conf for the nameservers of resolvConf (ResolvConf when
// empty), read now. It returns host:port addresses.
func ParseUpstreams(spec, resolvConf string) ([]string, error) {
	var out []string
	for _, s := range strings.Split(spec, ",") {
		s = strings.TrimSpace(s)
		switch {
		case s == "":
			return nil, fmt.Errorf("empty upstream in %q", spec)
		case s == "resolv.conf":
			if resolvConf == "" {
				resolvConf = ResolvConf
			}
			cc, err := dns.ClientConfigFromFile(resolvConf)
			if err != nil {
				return nil, fmt.Errorf("resolv.conf: %w", err)
			}
			if len(cc.Servers) == 0 {
				return nil, fmt.Errorf("%s names no nameserver", resolvConf)
			}
			for _, h := range cc.Servers {
				out = append(out, net.JoinHostPort(h, cc.Port))
			}
		default:
			if ip, err := netip.ParseAddr(s); err == nil {
				out = append(out, netip.AddrPortFrom(ip, 53).String())
				continue
			}
			ap, err := netip.ParseAddrPort(s)
			if err != nil || ap.Port() == 0 {
				return nil, fmt.Errorf("upstream %q: want IP or IP:PORT, or resolv.conf", s)
			}
			out = append(out, ap.String())
		}
	}
	return out, nil
}

// WithoutSelf returns the upstreams that are not the server's own listen
// address (host:port), and those it left out: forwarding to itself would
// loop. An upstream is the server's own when its port is listen's and its
// address is listen's, or, when listen's is unspecified (0.0.0.0, ::), a
// loopback address or any address of the host's interfaces.
func WithoutSelf(upstreams []string, listen string) (keep, self []string) {
	lap, err := netip.ParseAddrPort(listen)
	if err != nil {
		if h, p, err2 := net.SplitHostPort(listen); err2 == nil && h == "" {
			lap, err = netip.ParseAddrPort(net.JoinHostPort("0.0.0.0", p))
		}
	}
	var local []netip.Addr
	if err == nil && lap.Addr().IsUnspecified() {
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if p, err := netip.ParsePrefix(a.String()); err == nil {
					local = append(local, p.Addr().Unmap())
				}
			}
		}
	}
	for _, u := range upstreams {
		uap, uerr := netip.ParseAddrPort(u)
		if err != nil || uerr != nil || uap.Port() != lap.Port() {
			keep = append(keep, u)
			continue
		}
		ua := uap.Addr().Unmap().WithZone("")
		own := ua == lap.Addr().Unmap().WithZone("")
		if lap.Addr().IsUnspecified() && (ua.IsLoopback() || slices.Contains(local, ua)) {
			own = true
		}
		if own {
			self = append(self, u)
		} else {
			keep = append(keep, u)
		}
	}
	return keep, self
}
