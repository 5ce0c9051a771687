package dnsserver

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"netspec.dev/netspec/internal/testnet"
	"netspec.dev/netspec/plan"
)

// fakeUpstream is a recursive resolver on a loopback port (UDP and TCP)
// that answers from a fixed table and records the queries it gets.
type fakeUpstream struct {
	addr string
	mu   sync.Mutex
	got  []*dns.Msg // every query, as received
	nets []string   // "udp" or "tcp", per query
}

func (u *fakeUpstream) queries() ([]*dns.Msg, []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.got), slices.Clone(u.nets)
}

// upstreamAnswer is the fake upstream's table.
func upstreamAnswer(w dns.ResponseWriter, r *dns.Msg) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(r)
	m.RecursionAvailable = true
	q := r.Question[0]
	q.Name = strings.ToLower(q.Name)
	rr := func(s string) dns.RR {
		x, err := dns.NewRR(s)
		if err != nil {
			panic(err)
		}
		return x
	}
	switch {
	case q.Name == "example.com." && q.Qtype == dns.TypeA:
		m.Answer = []dns.RR{rr("example.com. 300 IN A 192.0.2.1")}
	case q.Name == "search.example.com." && q.Qtype == dns.TypeA:
		m.Answer = []dns.RR{rr("search.example.com. 120 IN CNAME edge.example.net."), rr("edge.example.net. 60 IN A 198.51.100.7")}
	case q.Name == "search.example.com." && q.Qtype == dns.TypeAAAA:
		m.Answer = []dns.RR{rr("search.example.com. 120 IN AAAA 2001:db8::7")}
	case q.Name == "big.example.com.":
		if _, udp := w.RemoteAddr().(*net.UDPAddr); udp {
			m.Truncated = true // "retry over TCP"
			break
		}
		for i := range 3 {
			m.Answer = append(m.Answer, rr("big.example.com. 30 IN TXT \"part "+strconv.Itoa(i)+"\""))
		}
	case q.Name == "servfail.example.com.":
		m.Rcode = dns.RcodeServerFailure
	default:
		m.Rcode = dns.RcodeNameError
		m.Ns = []dns.RR{rr("com. 900 IN SOA a.gtld-servers.net. nstld.verisign-grs.com. 1 1800 900 604800 900")}
	}
	if opt := r.IsEdns0(); opt != nil {
		m.SetEdns0(1232, opt.Do())
	}
	return m
}

// startUpstream serves handler (upstreamAnswer when nil) on a free
// loopback port until the test ends.
func startUpstream(t *testing.T, handler func(dns.ResponseWriter, *dns.Msg) *dns.Msg) *fakeUpstream {
	t.Helper()
	if handler == nil {
		handler = upstreamAnswer
	}
	u := &fakeUpstream{}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		n := "udp"
		if _, ok := w.RemoteAddr().(*net.TCPAddr); ok {
			n = "tcp"
		}
		u.mu.Lock()
		u.got = append(u.got, r.Copy())
		u.nets = append(u.nets, n)
		u.mu.Unlock()
		if m := handler(w, r); m != nil {
			_ = w.WriteMsg(m)
		}
	})
	var pc net.PacketConn
	var l net.Listener
	for range 20 {
		var err error
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if l, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			break
		}
		pc.Close()
		pc = nil
	}
	if pc == nil {
		t.Fatal("no loopback port free for both UDP and TCP")
	}
	u.addr = pc.LocalAddr().String()
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait) // after the shutdowns (cleanups run last first)
	for _, srv := range []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: l, Handler: h}} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		wg.Go(func() { _ = srv.ActivateAndServe() })
		<-started
		t.Cleanup(func() { _ = srv.Shutdown() })
	}
	return u
}

// deadAddr is a loopback UDP address nothing listens on: queries to it
// fail at once (ICMP port unreachable).
func deadAddr(t *testing.T) string {
	t.Helper()
	return testnet.FreeLoopbackAddr(t)
}

// checkFwd checks a reply from a server with upstreams.
func checkFwd(t *testing.T, tc tcase, got *dns.Msg, aa bool) {
	t.Helper()
	if got.Rcode != tc.rcode {
		t.Errorf("%v: rcode %s, want %s", tc, dns.RcodeToString[got.Rcode], dns.RcodeToString[tc.rcode])
	}
	if a, w := sectionStrings(got.Answer), rrStrings(t, tc.answer); !slices.Equal(a, w) {
		t.Errorf("%v: answer\n%v\nwant\n%v", tc, a, w)
	}
	if a, w := sectionStrings(got.Ns), rrStrings(t, tc.ns); !slices.Equal(a, w) {
		t.Errorf("%v: authority\n%v\nwant\n%v", tc, a, w)
	}
	if len(got.Question) != 1 || got.Question[0].Name != tc.qname {
		t.Errorf("%v: question section %v", tc, got.Question)
	}
	if !got.Response || !got.RecursionAvailable || got.Authoritative != aa {
		t.Errorf("%v: QR %v RA %v AA %v, want QR, RA and AA %v", tc, got.Response, got.RecursionAvailable, got.Authoritative, aa)
	}
}

// TestForward covers queries outside the zones and ExternalName targets
// with upstreams, through ServeDNS and through the sockets.
func TestForward(t *testing.T) {
	up := startUpstream(t, nil)
	soaCom := "com. 900 IN SOA a.gtld-servers.net. nstld.verisign-grs.com. 1 1800 900 604800 900"
	for _, tc := range []struct {
		name      string
		upstreams []string
		q         tcase
		aa        bool
	}{
		{"forwarded A", []string{up.addr},
			tcase{qname: "example.com.", qtype: dns.TypeA, answer: []string{"example.com. 300 IN A 192.0.2.1"}}, false},
		{"client's spelling", []string{up.addr},
			tcase{qname: "Example.COM.", qtype: dns.TypeA, answer: []string{"example.com. 300 IN A 192.0.2.1"}}, false},
		{"NXDOMAIN passthrough", []string{up.addr},
			tcase{qname: "nope.example.com.", qtype: dns.TypeA, rcode: dns.RcodeNameError, ns: []string{soaCom}}, false},
		{"truncated, asked again over TCP", []string{up.addr},
			tcase{qname: "big.example.com.", qtype: dns.TypeTXT, answer: []string{
				`big.example.com. 30 IN TXT "part 0"`, `big.example.com. 30 IN TXT "part 1"`, `big.example.com. 30 IN TXT "part 2"`}}, false},
		{"first upstream down, second answers", []string{deadAddr(t), up.addr},
			tcase{qname: "example.com.", qtype: dns.TypeA, answer: []string{"example.com. 300 IN A 192.0.2.1"}}, false},
		{"upstream down: SERVFAIL", []string{deadAddr(t)},
			tcase{qname: "example.com.", qtype: dns.TypeA, rcode: dns.RcodeServerFailure}, false},
		{"upstream SERVFAIL passed on", []string{up.addr},
			tcase{qname: "servfail.example.com.", qtype: dns.TypeA, rcode: dns.RcodeServerFailure}, false},
		{"ExternalName: CNAME and the target's A", []string{up.addr},
			tcase{qname: "search.shop.svc.cluster.local.", qtype: dns.TypeA, answer: []string{
				"search.shop.svc.cluster.local. 5 IN CNAME search.example.com.",
				"search.example.com. 120 IN CNAME edge.example.net.",
				"edge.example.net. 60 IN A 198.51.100.7"}}, true},
		{"ExternalName: CNAME and the target's AAAA", []string{up.addr},
			tcase{qname: "search.shop.svc.cluster.local.", qtype: dns.TypeAAAA, answer: []string{
				"search.shop.svc.cluster.local. 5 IN CNAME search.example.com.",
				"search.example.com. 120 IN AAAA 2001:db8::7"}}, true},
		{"ExternalName: the CNAME alone when asked for it", []string{up.addr},
			tcase{qname: "search.shop.svc.cluster.local.", qtype: dns.TypeCNAME, answer: []string{
				"search.shop.svc.cluster.local. 5 IN CNAME search.example.com."}}, true},
		{"ExternalName, upstream down: the CNAME alone", []string{deadAddr(t)},
			tcase{qname: "search.shop.svc.cluster.local.", qtype: dns.TypeA, answer: []string{
				"search.shop.svc.cluster.local. 5 IN CNAME search.example.com."}}, true},
		{"in the zones: AA, not forwarded", []string{up.addr},
			tcase{qname: "web.shop.svc.cluster.local.", qtype: dns.TypeA, answer: []string{
				"web.shop.svc.cluster.local. 5 IN A 10.96.0.10"}}, true},
		{"NXDOMAIN in the zones: not forwarded", []string{up.addr},
			tcase{qname: "nope.shop.svc.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError, ns: []string{soaCluster}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Options{Upstreams: tc.upstreams})
			s.Swap(goldenRecords(t))
			checkFwd(t, tc.q, query(t, s, tc.q.msg()), tc.aa)
			// The same over the sockets, with EDNS0.
			addr := startServer(t, s)
			m := tc.q.msg()
			m.SetEdns0(1232, false)
			checkFwd(t, tc.q, exchange(t, "udp", addr, m), tc.aa)
		})
	}
}

// TestForwardKeepsQuery checks what the upstream gets: the client's
// question, flags, EDNS0 and DO bit, under an ID of the server's; and
// that the client gets its ID back.
func TestForwardKeepsQuery(t *testing.T) {
	up := startUpstream(t, nil)
	s := New(Options{Upstreams: []string{up.addr}})
	s.Swap(goldenRecords(t))
	m := new(dns.Msg)
	m.SetQuestion("example.com.", dns.TypeA)
	m.Id = 4242
	m.CheckingDisabled = true
	m.SetEdns0(4000, true)
	m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"})
	w := &recorder{}
	s.ServeDNS(w, m)
	if w.msg == nil || w.msg.Id != 4242 {
		t.Fatalf("reply %v, want ID 4242", w.msg)
	}
	if opt := w.msg.IsEdns0(); opt == nil || !opt.Do() {
		t.Errorf("reply OPT %v, want the upstream's with DO", opt)
	}
	got, nets := up.queries()
	if len(got) != 1 || nets[0] != "udp" {
		t.Fatalf("upstream got %d queries over %v, want 1 over UDP", len(got), nets)
	}
	g := got[0]
	opt := g.IsEdns0()
	if opt == nil || !opt.Do() || opt.UDPSize() != 4000 || len(opt.Option) != 1 {
		t.Errorf("upstream got OPT %v, want the client's (DO, 4000, cookie)", opt)
	}
	if !g.RecursionDesired || !g.CheckingDisabled || g.Question[0] != m.Question[0] {
		t.Errorf("upstream got %v, want the client's flags and question", g)
	}
}

// TestForwardBounded fills the one forwarding slot with a query the
// upstream holds, and checks that the next gets SERVFAIL at once.
func TestForwardBounded(t *testing.T) {
	arrived := make(chan struct{})
	release := make(chan struct{})
	up := startUpstream(t, func(w dns.ResponseWriter, r *dns.Msg) *dns.Msg {
		if r.Question[0].Name == "slow.example.com." {
			close(arrived)
			<-release
		}
		return upstreamAnswer(w, r)
	})
	var results forwardResults
	s := New(Options{Upstreams: []string{up.addr}, MaxForwards: 1, ForwardTimeout: time.Minute, OnForward: results.add})
	s.Swap(goldenRecords(t))
	done := make(chan *dns.Msg)
	go func() {
		w := &recorder{}
		m := new(dns.Msg)
		m.SetQuestion("slow.example.com.", dns.TypeA)
		s.ServeDNS(w, m)
		done <- w.msg
	}()
	<-arrived
	busy := tcase{qname: "example.com.", qtype: dns.TypeA, rcode: dns.RcodeServerFailure}
	checkFwd(t, busy, query(t, s, busy.msg()), false)
	// An ExternalName answer then has its CNAME alone.
	ext := tcase{qname: "search.shop.svc.cluster.local.", qtype: dns.TypeA,
		answer: []string{"search.shop.svc.cluster.local. 5 IN CNAME search.example.com."}}
	checkFwd(t, ext, query(t, s, ext.msg()), true)
	close(release)
	if r := <-done; r == nil || r.Rcode != dns.RcodeNameError {
		t.Errorf("held query: %v, want NXDOMAIN", r)
	}
	ok := tcase{qname: "example.com.", qtype: dns.TypeA, answer: []string{"example.com. 300 IN A 192.0.2.1"}}
	checkFwd(t, ok, query(t, s, ok.msg()), false)
	// The two refused (the query and the ExternalName's target) were
	// asked of no upstream.
	want := []string{" busy", " busy", up.addr + " NXDOMAIN", up.addr + " NOERROR"}
	if got := results.get(); !slices.Equal(got, want) {
		t.Errorf("OnForward got %q, want %q", got, want)
	}
}

// forwardResults records Options.OnForward's calls as "upstream result".
type forwardResults struct {
	mu  sync.Mutex
	got []string
}

func (r *forwardResults) add(upstream, result string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, upstream+" "+result)
}

func (r *forwardResults) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// TestForwardResults checks what OnForward is told: once per upstream
// asked, with its answer's RCODE or an error.
func TestForwardResults(t *testing.T) {
	up := startUpstream(t, nil)
	dead := deadAddr(t)
	var results forwardResults
	s := New(Options{Upstreams: []string{dead, up.addr}, OnForward: results.add})
	s.Swap(goldenRecords(t))
	for _, q := range []string{"example.com.", "servfail.example.com."} {
		m := new(dns.Msg)
		m.SetQuestion(q, dns.TypeA)
		query(t, s, m)
	}
	want := []string{dead + " error", up.addr + " NOERROR", dead + " error", up.addr + " SERVFAIL"}
	if got := results.get(); !slices.Equal(got, want) {
		t.Errorf("OnForward got %q, want %q", got, want)
	}
}

// TestNoUpstream checks that without upstreams nothing changes: names
// outside the zones are REFUSED, an ExternalName is its CNAME alone, and
// no answer has RA.
func TestNoUpstream(t *testing.T) {
	s := New(Options{})
	s.Swap(goldenRecords(t))
	for _, tc := range []tcase{
		{qname: "example.com.", qtype: dns.TypeA, rcode: dns.RcodeRefused},
		{qname: "search.shop.svc.cluster.local.", qtype: dns.TypeA,
			answer: []string{"search.shop.svc.cluster.local. 5 IN CNAME search.example.com."}},
	} {
		tc.check(t, query(t, s, tc.msg()))
	}
}

// TestRAWithUpstreams: our own answers carry RA once there are upstreams.
func TestRAWithUpstreams(t *testing.T) {
	s := New(Options{Upstreams: []string{deadAddr(t)}})
	rs, err := Compile(plan.DNS{Zones: []plan.Zone{zoneRecords("c.test.", 5, 5, 1, [3]string{"a.c.test.", "A", "192.0.2.7"})}}, Cluster{})
	if err != nil {
		t.Fatal(err)
	}
	s.Swap(rs)
	tc := tcase{qname: "a.c.test.", qtype: dns.TypeA, answer: []string{"a.c.test. 5 IN A 192.0.2.7"}}
	checkFwd(t, tc, query(t, s, tc.msg()), true)
}

func TestParseUpstreams(t *testing.T) {
	dir := t.TempDir()
	rc := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(rc, []byte("# systemd-resolved\nnameserver 127.0.0.53\nnameserver fe80::1%eth0\noptions edns0 trust-ad\nsearch example.org\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.conf")
	if err := os.WriteFile(empty, []byte("search example.org\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		spec, rc string
		want     []string
		err      bool
	}{
		{spec: "192.0.2.53", want: []string{"192.0.2.53:53"}},
		{spec: "192.0.2.53:5353, 2001:db8::53", want: []string{"192.0.2.53:5353", "[2001:db8::53]:53"}},
		{spec: "[2001:db8::53]:5353", want: []string{"[2001:db8::53]:5353"}},
		{spec: "resolv.conf", rc: rc, want: []string{"127.0.0.53:53", "[fe80::1%eth0]:53"}},
		{spec: "resolv.conf,192.0.2.1", rc: rc, want: []string{"127.0.0.53:53", "[fe80::1%eth0]:53", "192.0.2.1:53"}},
		{spec: "resolv.conf", rc: empty, err: true},
		{spec: "resolv.conf", rc: filepath.Join(dir, "missing"), err: true},
		{spec: "dns.google", err: true},
		{spec: "192.0.2.1:0", err: true},
		{spec: "192.0.2.1,", err: true},
	} {
		got, err := ParseUpstreams(tc.spec, tc.rc)
		if (err != nil) != tc.err || !slices.Equal(got, tc.want) {
			t.Errorf("ParseUpstreams(%q) = %v, %v; want %v, error %v", tc.spec, got, err, tc.want, tc.err)
		}
	}
}

func TestWithoutSelf(t *testing.T) {
	for _, tc := range []struct {
		listen          string
		upstreams       []string
		wantKeep, wantX []string
	}{
		{"169.254.20.10:53", []string{"169.254.20.10:53", "127.0.0.53:53"}, []string{"127.0.0.53:53"}, []string{"169.254.20.10:53"}},
		{"169.254.20.10:5353", []string{"169.254.20.10:53"}, []string{"169.254.20.10:53"}, nil},
		{"127.0.0.1:53", []string{"127.0.0.1:53"}, nil, []string{"127.0.0.1:53"}},
		{"0.0.0.0:53", []string{"127.0.0.53:53", "192.0.2.1:53"}, []string{"192.0.2.1:53"}, []string{"127.0.0.53:53"}},
		{":53", []string{"[::1]:53", "192.0.2.1:53"}, []string{"192.0.2.1:53"}, []string{"[::1]:53"}},
		{"[fd00::1]:53", []string{"[fd00::1]:53", "[fd00::2]:53"}, []string{"[fd00::2]:53"}, []string{"[fd00::1]:53"}},
	} {
		keep, x := WithoutSelf(tc.upstreams, tc.listen)
		if !slices.Equal(keep, tc.wantKeep) || !slices.Equal(x, tc.wantX) {
			t.Errorf("WithoutSelf(%v, %s) = %v, %v; want %v, %v", tc.upstreams, tc.listen, keep, x, tc.wantKeep, tc.wantX)
		}
	}
}
