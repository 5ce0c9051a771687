package dnsserver

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// advertisedUDPSize is the EDNS0 UDP payload size the server puts in the
// OPT of its replies: what it accepts itself (the DNS Flag Day 2020 value).
const advertisedUDPSize = 1232

// maxCNAMEChain bounds the CNAMEs followed inside the served zones.
const maxCNAMEChain = 8

// transferChunk is the most RDATA+header bytes put in one AXFR message.
const transferChunk = 16 << 10

// Options configures a Server.
type Options struct {
	// TransferTo lists the clients allowed zone transfers (AXFR, and IXFR,
	// which is answered with the full zone). Empty, the default: every
	// transfer is REFUSED.
	TransferTo []netip.Prefix
	// OnQuery, if set, is called once per answered query with the
	// response code of the answer (dns.RcodeSuccess, dns.RcodeNameError, …),
	// for metrics. It must be safe for concurrent use and quick.
	OnQuery func(rcode int)
	// Upstreams (host:port) answer what the zones do not: a query for a
	// name outside them is forwarded (the first upstream that answers,
	// in order), and the target of a CNAME that leaves them (an
	// ExternalName Service) is looked up and its records appended to the
	// CNAME, as CoreDNS's forward and kubernetes plugins do. No caching.
	// Empty, the default: names outside the zones are REFUSED and a CNAME
	// out of them is answered alone. See WithoutSelf: never list the
	// server's own address.
	Upstreams []string
	// ForwardTimeout is the wait for one upstream (DefaultForwardTimeout
	// when 0).
	ForwardTimeout time.Duration
	// MaxForwards bounds the upstream queries in flight; beyond it a
	// query outside the zones gets SERVFAIL (DefaultMaxForwards when 0).
	MaxForwards int
	// OnForward, if set, is called once per query sent to an upstream,
	// with the upstream (host:port) and the result: the RCODE name of its
	// answer (NOERROR, NXDOMAIN, SERVFAIL, …) or ForwardError; and with
	// upstream "" and ForwardBusy for a query no upstream was asked, as
	// MaxForwards were in flight. For metrics: safe for concurrent use
	// and quick.
	OnForward func(upstream, result string)
}

// Server is an authoritative DNS server for the zones of a Records
// snapshot. Its handler (ServeDNS) is safe for concurrent use; Swap
// replaces the snapshot atomically.
//
// Until the first Swap the server holds no records and answers every query
// SERVFAIL (not ready), so that clients try another server.
type Server struct {
	records atomic.Pointer[Records]
	opts    Options
	fwd     *forwarder // nil without Options.Upstreams
}

// New returns a Server with no records; call Swap before serving.
func New(opts Options) *Server {
	return &Server{opts: opts, fwd: newForwarder(opts)}
}

// Swap makes r the records the server answers from. It is atomic: a query
// is answered wholly from the records before the swap or wholly from r,
// never from a mix. A nil r unloads the records (queries get SERVFAIL).
func (s *Server) Swap(r *Records) {
	s.records.Store(r)
}

// ListenAndServe serves DNS on addr over UDP and TCP (the same port: when
// addr's port is 0, TCP listens on the port UDP got). It calls ready, if
// not nil, once both listen, and returns when ctx is done, after shutting
// both down (nil), or as soon as either fails to listen or serve (the
// error).
func (s *Server) ListenAndServe(ctx context.Context, addr string, ready func()) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return err
	}
	tcpAddr := addr
	if port == "0" || port == "" {
		tcpAddr = net.JoinHostPort(host, strconv.Itoa(pc.LocalAddr().(*net.UDPAddr).Port))
	}
	l, err := net.Listen("tcp", tcpAddr)
	if err != nil {
		pc.Close()
		return err
	}

	var pending atomic.Int32
	pending.Store(2)
	started := func() {
		if pending.Add(-1) == 0 && ready != nil {
			ready()
		}
	}
	udp := &dns.Server{
		PacketConn:        pc,
		Handler:           s,
		UDPSize:           dns.DefaultMsgSize,
		MsgAcceptFunc:     acceptQueries,
		NotifyStartedFunc: started,
	}
	tcp := &dns.Server{
		Listener:          l,
		Handler:           s,
		MsgAcceptFunc:     acceptQueries,
		NotifyStartedFunc: started,
		ReadTimeout:       5 * time.Second,
		WriteTimeout:      10 * time.Second,
	}
	errc := make(chan error, 2)
	go func() { errc <- udp.ActivateAndServe() }()
	go func() { errc <- tcp.ActivateAndServe() }()

	var result error
	remaining := 2
	select {
	case <-ctx.Done():
	case err := <-errc:
		remaining--
		if err == nil {
			err = errors.New("dns server stopped")
		}
		result = err
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, srv := range []*dns.Server{udp, tcp} {
		wg.Go(func() { _ = srv.ShutdownContext(shutdown) })
	}
	wg.Wait()
	// Closing also stops a server that had not started when shut down.
	pc.Close()
	l.Close()
	for ; remaining > 0; remaining-- {
		<-errc
	}
	return result
}

// acceptQueries passes every request to the handler, which answers
// FORMERR and NOTIMP itself (so that tests of ServeDNS see what clients
// see); responses are dropped.
func acceptQueries(dh dns.Header) dns.MsgAcceptAction {
	if dh.Bits&(1<<15) != 0 { // QR
		return dns.MsgIgnore
	}
	return dns.MsgAccept
}

// ServeDNS answers one request. It is the server's dns.Handler, usable
// directly in tests.
func (s *Server) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	if r.Response {
		return
	}
	udp := isUDP(w)
	opt := r.IsEdns0()
	m := new(dns.Msg)
	switch {
	case r.Opcode != dns.OpcodeQuery:
		m.SetRcode(r, dns.RcodeNotImplemented)
	case len(r.Question) != 1:
		m.SetRcodeFormatError(r)
	case opt != nil && opt.Version() != 0:
		m.SetReply(r)
		m.Rcode = dns.RcodeBadVers
	default:
		m.SetReply(r)
		q := r.Question[0]
		rs := s.records.Load()
		switch {
		case rs == nil:
			m.Rcode = dns.RcodeServerFailure
		case s.fwd != nil && q.Qtype != dns.TypeAXFR && q.Qtype != dns.TypeIXFR &&
			rs.zoneOf(strings.ToLower(q.Name)) == nil:
			s.forward(w, r, udp)
			return
		case q.Qclass != dns.ClassINET && q.Qclass != dns.ClassANY:
			m.Rcode = dns.RcodeRefused
		case q.Qtype == dns.TypeAXFR || q.Qtype == dns.TypeIXFR:
			if s.transfer(w, r, rs, m, udp) {
				s.count(dns.RcodeSuccess)
				return
			}
		default:
			if target := rs.answer(m, q); target != "" && s.fwd != nil && q.Qtype != dns.TypeCNAME && q.Qtype != dns.TypeANY {
				s.appendTarget(m, r, target)
			}
		}
	}
	// Recursion is available (RFC 1035 §4.1.1) when names outside the
	// zones are forwarded.
	m.RecursionAvailable = s.fwd != nil
	s.write(w, m, opt, udp)
}

// write adds the OPT (when the query had one), truncates to what the
// client takes and sends m.
func (s *Server) write(w dns.ResponseWriter, m *dns.Msg, opt *dns.OPT, udp bool) {
	if opt != nil {
		// A fresh OPT per reply: packing writes the extended RCODE into it.
		o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
		o.SetUDPSize(advertisedUDPSize)
		m.Extra = append(m.Extra, o)
	}
	s.send(w, m, replySize(opt, udp))
}

// replySize is the largest reply the client takes: over UDP the buffer
// size of its EDNS0 OPT (at least 512 bytes), 512 without one; over TCP
// a whole message.
func replySize(opt *dns.OPT, udp bool) int {
	switch {
	case !udp:
		return dns.MaxMsgSize
	case opt != nil:
		return max(dns.MinMsgSize, int(opt.UDPSize()))
	default:
		return dns.MinMsgSize
	}
}

// send truncates m to size, writes it and counts its RCODE.
func (s *Server) send(w dns.ResponseWriter, m *dns.Msg, size int) {
	m.Truncate(size)
	_ = w.WriteMsg(m)
	s.count(m.Rcode)
}

func (s *Server) count(rcode int) {
	if s.opts.OnQuery != nil {
		s.opts.OnQuery(rcode)
	}
}

func isUDP(w dns.ResponseWriter) bool {
	_, ok := w.RemoteAddr().(*net.UDPAddr)
	return ok
}

// answer fills m (a reply to a QUERY for q) from the records. When the
// answer ends in a CNAME to a name outside the zones, it returns that
// name (lower case), for the server to look up upstream; else "".
func (rs *Records) answer(m *dns.Msg, q dns.Question) string {
	name := strings.ToLower(q.Name) // no allocation when already lower case
	n := rs.names[name]
	if n == nil {
		if rs.synth != nil && rs.synth.answer(m, name, q.Qtype) {
			m.Authoritative = true
			return ""
		}
		z := rs.zoneOf(name)
		if z == nil {
			m.Rcode = dns.RcodeRefused
			return ""
		}
		m.Authoritative = true
		m.Rcode = dns.RcodeNameError
		m.Ns = z.negSOA
		return ""
	}
	m.Authoritative = true
	if q.Qtype == dns.TypeANY {
		// RFC 8482 §4.1: one RRset of the name, the most useful first.
		for _, t := range anyOrder {
			if rrs := n.get(t); rrs != nil {
				m.Answer = rrs
				return ""
			}
		}
		if len(n.sets) > 0 {
			m.Answer = n.sets[0].rrs
			return ""
		}
		m.Ns = n.zone.negSOA
		return ""
	}
	if rrs := n.get(q.Qtype); rrs != nil {
		m.Answer = rrs
		return ""
	}
	cname := n.get(dns.TypeCNAME)
	if cname == nil {
		m.Ns = n.zone.negSOA // NODATA
		return ""
	}
	return rs.chase(m, q.Qtype, cname)
}

// chase answers with a CNAME and follows it while its target is in the
// served zones (RFC 1034 §4.3.2; the RCODE is that of the last name, RFC
// 6604). A target outside the zones ends the answer with the CNAME, and
// is returned: the server looks it up upstream when it has upstreams, or
// else the client's resolver follows it.
func (rs *Records) chase(m *dns.Msg, qtype uint16, cname []dns.RR) (outside string) {
	ans := append([]dns.RR(nil), cname...)
	for range maxCNAMEChain {
		target := strings.ToLower(cname[0].(*dns.CNAME).Target)
		n := rs.names[target]
		if n == nil {
			if rs.synth != nil {
				var sm dns.Msg
				if rs.synth.answer(&sm, target, qtype) {
					ans = append(ans, sm.Answer...)
					m.Ns = sm.Ns
					break
				}
			}
			if z := rs.zoneOf(target); z != nil {
				m.Rcode = dns.RcodeNameError
				m.Ns = z.negSOA
			} else {
				outside = target
			}
			break
		}
		if rrs := n.get(qtype); rrs != nil {
			ans = append(ans, rrs...)
			break
		}
		if cname = n.get(dns.TypeCNAME); cname == nil {
			m.Ns = n.zone.negSOA
			break
		}
		ans = append(ans, cname...)
	}
	m.Answer = ans
	return outside
}

// anyOrder is the preference of RRsets in answers to ANY.
var anyOrder = []uint16{dns.TypeSOA, dns.TypeCNAME, dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypePTR, dns.TypeTXT, dns.TypeNS}

// transfer handles AXFR and IXFR. It fills m with an error or UDP answer
// and returns false, or sends the zone over TCP itself and returns true.
func (s *Server) transfer(w dns.ResponseWriter, r *dns.Msg, rs *Records, m *dns.Msg, udp bool) bool {
	if !s.transferAllowed(w.RemoteAddr()) {
		m.Rcode = dns.RcodeRefused
		return false
	}
	q := r.Question[0]
	name := strings.ToLower(q.Name)
	z := rs.zones[name]
	if z == nil {
		m.Rcode = dns.RcodeRefused
		if rs.zoneOf(name) != nil {
			m.Rcode = dns.RcodeNotAuth // inside a zone, not its apex (RFC 5936 §2.2.1)
		}
		return false
	}
	m.Authoritative = true
	if udp {
		if q.Qtype == dns.TypeAXFR {
			m.Rcode = dns.RcodeFormatError // AXFR is TCP only (RFC 5936 §4.2)
		} else {
			m.Answer = []dns.RR{z.soa} // RFC 1995 §2: "use TCP"
		}
		return false
	}
	ch := make(chan *dns.Envelope)
	done := make(chan error, 1)
	tr := new(dns.Transfer)
	go func() { done <- tr.Out(w, r, ch) }()
	send := func(rrs []dns.RR) bool {
		select {
		case ch <- &dns.Envelope{RR: rrs}:
			return true
		case err := <-done: // the client went away: Out stopped reading
			done <- err
			return false
		}
	}
	var chunk []dns.RR
	size := 0
	ok := true
	for _, rr := range z.axfr {
		l := dns.Len(rr)
		if size+l > transferChunk && len(chunk) > 0 {
			if ok = send(chunk); !ok {
				break
			}
			chunk, size = nil, 0
		}
		chunk = append(chunk, rr)
		size += l
	}
	if ok {
		send(chunk)
	}
	close(ch)
	<-done
	return true
}

func (s *Server) transferAllowed(a net.Addr) bool {
	var ip netip.Addr
	switch a := a.(type) {
	case *net.TCPAddr:
		ip = a.AddrPort().Addr()
	case *net.UDPAddr:
		ip = a.AddrPort().Addr()
	default:
		return false
	}
	ip = ip.Unmap()
	for _, p := range s.opts.TransferTo {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
