package dnsserver

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"netspec.dev/netspec/internal/testnet"
	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/render"
)

const goldenDir = "../../golden/kitchen-sink/node-1"

// goldenPlan reads the kitchen-sink plan of node-1.
func goldenPlan(t testing.TB) *plan.Plan {
	t.Helper()
	data, err := os.ReadFile(goldenDir + "/plan.json")
	if err != nil {
		t.Fatal(err)
	}
	p, err := render.ParsePlanJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// goldenRecords compiles the DNS of the kitchen-sink plan of node-1.
func goldenRecords(t testing.TB) *Records {
	t.Helper()
	p := goldenPlan(t)
	rs, err := Compile(p.DNS, ClusterOf(p))
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// recorder is a dns.ResponseWriter that keeps the reply as a client would
// see it: packed and unpacked again.
type recorder struct {
	remote net.Addr
	msg    *dns.Msg
	wire   int
	msgs   []*dns.Msg // every reply (transfers write several)
}

var (
	udpClient = &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
	tcpClient = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
)

func (w *recorder) LocalAddr() net.Addr { return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53} }
func (w *recorder) RemoteAddr() net.Addr {
	if w.remote == nil {
		return udpClient
	}
	return w.remote
}
func (w *recorder) WriteMsg(m *dns.Msg) error {
	b, err := m.Pack()
	if err != nil {
		return err
	}
	w.wire = len(b)
	out := new(dns.Msg)
	if err := out.Unpack(b); err != nil {
		return err
	}
	w.msg = out
	w.msgs = append(w.msgs, out)
	return nil
}
func (w *recorder) Write(b []byte) (int, error) { return len(b), nil }
func (w *recorder) Close() error                { return nil }
func (w *recorder) TsigStatus() error           { return nil }
func (w *recorder) TsigTimersOnly(bool)         {}
func (w *recorder) Hijack()                     {}

// query asks the handler directly.
func query(t testing.TB, s *Server, m *dns.Msg) *dns.Msg {
	t.Helper()
	w := &recorder{}
	s.ServeDNS(w, m)
	if w.msg == nil {
		t.Fatalf("no reply to %v", m.Question)
	}
	return w.msg
}

// tcase is one query and its expected reply, in the style of CoreDNS's
// test.Case: RRs in master-file form.
type tcase struct {
	qname  string
	qtype  uint16
	rcode  int
	answer []string
	ns     []string
}

func (tc tcase) String() string {
	return fmt.Sprintf("%s/%s", tc.qname, dns.TypeToString[tc.qtype])
}

func (tc tcase) msg() *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(tc.qname, tc.qtype)
	return m
}

// rrStrings parses master-file lines into canonical RR strings, sorted.
func rrStrings(t testing.TB, lines []string) []string {
	t.Helper()
	var out []string
	for _, l := range lines {
		rr, err := dns.NewRR(l)
		if err != nil {
			t.Fatalf("bad expected RR %q: %v", l, err)
		}
		out = append(out, rr.String())
	}
	slices.Sort(out)
	return out
}

func sectionStrings(rrs []dns.RR) []string {
	var out []string
	for _, rr := range rrs {
		if rr.Header().Rrtype == dns.TypeOPT {
			continue
		}
		out = append(out, rr.String())
	}
	slices.Sort(out)
	return out
}

// check compares a reply with a test case.
func (tc tcase) check(t *testing.T, got *dns.Msg) {
	t.Helper()
	if got.Rcode != tc.rcode {
		t.Errorf("%v: rcode %s, want %s", tc, dns.RcodeToString[got.Rcode], dns.RcodeToString[tc.rcode])
	}
	if a, w := sectionStrings(got.Answer), rrStrings(t, tc.answer); !slices.Equal(a, w) {
		t.Errorf("%v: answer\n%s\nwant\n%s", tc, strings.Join(a, "\n"), strings.Join(w, "\n"))
	}
	if a, w := sectionStrings(got.Ns), rrStrings(t, tc.ns); !slices.Equal(a, w) {
		t.Errorf("%v: authority\n%s\nwant\n%s", tc, strings.Join(a, "\n"), strings.Join(w, "\n"))
	}
	if len(got.Question) != 1 || got.Question[0].Name != tc.qname {
		t.Errorf("%v: question section %v", tc, got.Question)
	}
	if !got.Response || got.RecursionAvailable {
		t.Errorf("%v: QR %v RA %v, want QR and no RA", tc, got.Response, got.RecursionAvailable)
	}
	if want := tc.rcode != dns.RcodeRefused && tc.rcode != dns.RcodeServerFailure; got.Authoritative != want {
		t.Errorf("%v: AA %v, want %v", tc, got.Authoritative, want)
	}
}

// startServer serves s on a free loopback port (UDP and TCP) until the
// test ends, and returns the address.
func startServer(t *testing.T, s *Server) string {
	t.Helper()
	for attempt := 0; ; attempt++ {
		addr := testnet.FreeLoopbackAddr(t)
		ctx, cancel := context.WithCancel(context.Background())
		ready := make(chan struct{})
		errc := make(chan error, 1)
		go func() { errc <- s.ListenAndServe(ctx, addr, func() { close(ready) }) }()
		select {
		case <-ready:
			t.Cleanup(func() {
				cancel()
				select {
				case err := <-errc:
					if err != nil {
						t.Errorf("ListenAndServe: %v", err)
					}
				case <-time.After(10 * time.Second):
					t.Errorf("ListenAndServe did not return after cancel")
				}
			})
			return addr
		case err := <-errc:
			cancel()
			if attempt == 5 {
				t.Fatalf("ListenAndServe %s: %v", addr, err)
			}
		case <-time.After(10 * time.Second):
			cancel()
			t.Fatal("server not ready after 10s")
		}
	}
}

// zoneRecords builds a plan zone with an SOA (ttl, minimum) and NS at
// the apex plus the given records (name, type, data), TTL 5.
func zoneRecords(name string, soaTTL, minimum uint32, serial int, rrs ...[3]string) plan.Zone {
	z := plan.Zone{Name: name, Records: []plan.Record{
		{Name: name, Type: "SOA", TTL: soaTTL, Data: fmt.Sprintf("localhost. hostmaster.%s %d 7200 1800 86400 %d", name, serial, minimum)},
		{Name: name, Type: "NS", TTL: soaTTL, Data: "localhost."},
	}}
	for _, r := range rrs {
		z.Records = append(z.Records, plan.Record{Name: r[0], Type: r[1], TTL: 5, Data: r[2]})
	}
	return z
}
