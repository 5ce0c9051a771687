package dnsserver

import (
	"context"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"netspec.dev/netspec/internal/testnet"
)

// bigRecords is the golden zones plus a zone whose name big.big.test. has
// 100 A records: too many for 512 bytes of UDP.
func bigRecords(t *testing.T) *Records {
	t.Helper()
	p := goldenPlan(t)
	d := p.DNS
	var rrs [][3]string
	for i := 1; i <= 100; i++ {
		rrs = append(rrs, [3]string{"big.big.test.", "A", "10.9.0." + strconv.Itoa(i)})
	}
	d.Zones = append(d.Zones, zoneRecords("big.test.", 5, 5, 1, rrs...))
	rs, err := Compile(d, ClusterOf(p))
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func exchange(t *testing.T, net, addr string, m *dns.Msg) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: net, Timeout: 5 * time.Second, UDPSize: 65535}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s %v: %v", net, m.Question, err)
	}
	return r
}

// TestSockets serves on loopback UDP and TCP and queries with dns.Client.
func TestSockets(t *testing.T) {
	s := New(Options{TransferTo: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	rs := bigRecords(t)
	s.Swap(rs)
	addr := startServer(t, s)

	t.Run("udp and tcp", func(t *testing.T) {
		tc := tcase{qname: "web.shop.svc.cluster.local.", qtype: dns.TypeA,
			answer: []string{"web.shop.svc.cluster.local. 5 IN A 10.96.0.10"}}
		for _, proto := range []string{"udp", "tcp"} {
			tc.check(t, exchange(t, proto, addr, tc.msg()))
		}
		nx := tcase{qname: "nope.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError, ns: []string{soaCluster}}
		nx.check(t, exchange(t, "udp", addr, nx.msg()))
	})

	big := func(edns uint16) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion("big.big.test.", dns.TypeA)
		if edns > 0 {
			m.SetEdns0(edns, false)
		}
		return m
	}
	t.Run("TC over UDP without EDNS", func(t *testing.T) {
		m := big(0)
		r := exchange(t, "udp", addr, m)
		r.Compress = true
		packed, _ := r.Pack()
		if !r.Truncated || len(r.Answer) >= 100 || len(packed) > 512 || r.Rcode != dns.RcodeSuccess || !r.Authoritative {
			t.Errorf("TC %v, %d answers, %d bytes; want TC, fewer than 100 answers, at most 512 bytes", r.Truncated, len(r.Answer), len(packed))
		}
		if r.IsEdns0() != nil {
			t.Errorf("OPT in a reply to a query without EDNS")
		}
	})
	t.Run("EDNS0 buffer honoured", func(t *testing.T) {
		r := exchange(t, "udp", addr, big(1232))
		r.Compress = true
		packed, _ := r.Pack()
		if !r.Truncated || len(packed) > 1232 || len(r.Answer) >= 100 || r.IsEdns0() == nil {
			t.Errorf("bufsize 1232: TC %v, %d answers, %d bytes, OPT %v", r.Truncated, len(r.Answer), len(packed), r.IsEdns0() != nil)
		}
		small := len(r.Answer)
		r = exchange(t, "udp", addr, big(4096))
		if r.Truncated || len(r.Answer) != 100 || r.IsEdns0() == nil {
			t.Errorf("bufsize 4096: TC %v, %d answers, want 100 without TC", r.Truncated, len(r.Answer))
		}
		// A buffer below 512 counts as 512.
		r = exchange(t, "udp", addr, big(100))
		if !r.Truncated || len(r.Answer) == 0 || len(r.Answer) >= small {
			t.Errorf("bufsize 100: TC %v, %d answers", r.Truncated, len(r.Answer))
		}
	})
	t.Run("full over TCP", func(t *testing.T) {
		r := exchange(t, "tcp", addr, big(0))
		if r.Truncated || len(r.Answer) != 100 {
			t.Errorf("TCP: TC %v, %d answers, want 100", r.Truncated, len(r.Answer))
		}
	})
	t.Run("AXFR over TCP", func(t *testing.T) {
		m := new(dns.Msg)
		m.SetAxfr("cluster.local.")
		tr := &dns.Transfer{}
		ch, err := tr.In(m, addr)
		if err != nil {
			t.Fatal(err)
		}
		var got []dns.RR
		for env := range ch {
			if env.Error != nil {
				t.Fatal(env.Error)
			}
			got = append(got, env.RR...)
		}
		var want int
		for _, z := range goldenPlan(t).DNS.Zones {
			if z.Name == "cluster.local." {
				want = len(z.Records) + 1 // the SOA twice
			}
		}
		if len(got) != want || got[0].Header().Rrtype != dns.TypeSOA || got[len(got)-1].Header().Rrtype != dns.TypeSOA {
			t.Errorf("AXFR: %d records, want %d between two SOAs", len(got), want)
		}
		// The big zone, too, in full.
		m.SetAxfr("big.test.")
		ch, err = new(dns.Transfer).In(m, addr) // a Transfer keeps its closed connection
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for env := range ch {
			if env.Error != nil {
				t.Fatal(env.Error)
			}
			n += len(env.RR)
		}
		if n != 103 {
			t.Errorf("AXFR big.test.: %d records, want 103", n)
		}
	})
	t.Run("AXFR refused", func(t *testing.T) {
		closed := New(Options{})
		closed.Swap(rs)
		a := startServer(t, closed)
		m := new(dns.Msg)
		m.SetAxfr("cluster.local.")
		r := exchange(t, "tcp", a, m)
		if r.Rcode != dns.RcodeRefused || len(r.Answer) != 0 {
			t.Errorf("AXFR from a client not allowed: rcode %s, %d records", dns.RcodeToString[r.Rcode], len(r.Answer))
		}
	})
	t.Run("NOTIMP", func(t *testing.T) {
		m := new(dns.Msg)
		m.SetNotify("cluster.local.")
		r := exchange(t, "udp", addr, m)
		if r.Rcode != dns.RcodeNotImplemented {
			t.Errorf("NOTIFY: rcode %s, want NOTIMP", dns.RcodeToString[r.Rcode])
		}
	})
}

// TestListenAndServeStops checks ListenAndServe returns when its context
// is done, and fails on an address in use.
func TestListenAndServeStops(t *testing.T) {
	s := New(Options{})
	s.Swap(goldenRecords(t))
	addr := testnet.FreeLoopbackAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	errc := make(chan error, 1)
	go func() { errc <- s.ListenAndServe(ctx, addr, func() { close(ready) }) }()
	select {
	case <-ready:
	case err := <-errc:
		t.Fatalf("ListenAndServe: %v", err)
	}
	if err := New(Options{}).ListenAndServe(context.Background(), addr, nil); err == nil {
		t.Errorf("second ListenAndServe on %s: no error", addr)
	}
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("ListenAndServe after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ListenAndServe did not return after cancel")
	}
	// Port 0: UDP and TCP share the port UDP got.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	done := make(chan error, 1)
	go func() { done <- s.ListenAndServe(ctx2, "127.0.0.1:0", cancel2) }()
	if err := <-done; err != nil {
		t.Errorf("ListenAndServe 127.0.0.1:0: %v", err)
	}
}

// TestDig checks interoperability with BIND's dig.
func TestDig(t *testing.T) {
	dig, err := exec.LookPath("dig")
	if err != nil {
		t.Skip("SKIPPED: dig not found (apt-get install dnsutils)")
	}
	s := New(Options{})
	s.Swap(goldenRecords(t))
	addr := startServer(t, s)
	host, port, _ := strings.Cut(addr, ":")
	for _, tc := range []struct {
		name, typ, status string
		answer            []string
	}{
		{"web.shop.svc.cluster.local.", "A", "NOERROR", []string{"web.shop.svc.cluster.local. 5 IN A 10.96.0.10"}},
		{"_http._tcp.web.shop.svc.cluster.local.", "SRV", "NOERROR",
			[]string{"_http._tcp.web.shop.svc.cluster.local. 5 IN SRV 0 100 80 web.shop.svc.cluster.local."}},
		{"10.0.96.10.in-addr.arpa.", "PTR", "NOERROR", []string{"10.0.96.10.in-addr.arpa. 5 IN PTR web.shop.svc.cluster.local."}},
		{"nope.shop.svc.cluster.local.", "A", "NXDOMAIN", nil},
		{"Web.Shop.Svc.Cluster.Local.", "A", "NOERROR", []string{"web.shop.svc.cluster.local. 5 IN A 10.96.0.10"}},
	} {
		cmd := exec.Command(dig, "@"+host, "-p", port, "+noall", "+answer", "+comments", "+tries=1", "+time=5", tc.name, tc.typ)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", cmd.Args, err, out)
		}
		var status, flags string
		var answer []string
		for _, line := range strings.Split(string(out), "\n") {
			switch {
			case strings.Contains(line, "->>HEADER<<-"):
				_, rest, _ := strings.Cut(line, "status: ")
				status, _, _ = strings.Cut(rest, ",")
			case strings.HasPrefix(line, ";; flags:"):
				flags, _, _ = strings.Cut(strings.TrimPrefix(line, ";; flags:"), ";")
			case line == "" || strings.HasPrefix(line, ";"):
			default:
				rr, err := dns.NewRR(line)
				if err != nil {
					t.Fatalf("dig answer line %q: %v", line, err)
				}
				answer = append(answer, rr.String())
			}
		}
		fl := strings.Fields(flags)
		if status != tc.status || !containsAll(fl, "qr", "aa") || containsAll(fl, "ra") {
			t.Errorf("dig %s %s: status %q flags %q, want %s with qr aa, no ra\n%s", tc.name, tc.typ, status, flags, tc.status, out)
		}
		if want := rrStrings(t, tc.answer); strings.Join(answer, "\n") != strings.Join(want, "\n") {
			t.Errorf("dig %s %s: answer\n%s\nwant\n%s\n%s", tc.name, tc.typ, strings.Join(answer, "\n"), strings.Join(want, "\n"), out)
		}
	}
}

func containsAll(list []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, l := range list {
			found = found || l == w
		}
		if !found {
			return false
		}
	}
	return true
}

// discard is a ResponseWriter that drops replies without packing them.
type discard struct{ recorder }

func (discard) WriteMsg(*dns.Msg) error { return nil }

// BenchmarkServeDNS measures the handler alone for an A query (UDP, with
// EDNS0), not packing the reply.
func BenchmarkServeDNS(b *testing.B) {
	p := goldenPlan(b)
	rs, err := Compile(p.DNS, ClusterOf(p))
	if err != nil {
		b.Fatal(err)
	}
	s := New(Options{})
	s.Swap(rs)
	m := new(dns.Msg)
	m.SetQuestion("web.shop.svc.cluster.local.", dns.TypeA)
	m.SetEdns0(1232, false)
	w := &discard{}
	b.ReportAllocs()
	for b.Loop() {
		s.ServeDNS(w, m)
	}
}
