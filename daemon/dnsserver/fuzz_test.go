package dnsserver

import (
	"testing"

	"github.com/miekg/dns"
)

// FuzzServeDNS sends the server any message a client could send (a wire
// message that unpacks) and checks that it never panics, answers every
// query once with the query's ID and a message that packs, keeps a UDP
// answer within the client's buffer (512 bytes without EDNS0), and
// ignores responses. The records are the kitchen-sink golden plan's, with
// its namespaces' pod names.
func FuzzServeDNS(f *testing.F) {
	for _, q := range []struct {
		name string
		t    uint16
		edns uint16
	}{
		{"web.shop.svc.cluster.local.", dns.TypeA, 0},
		{"10-244-1-30.data.pod.cluster.local.", dns.TypeANY, 1232},
		{"fd00-10-244--5.shop.pod.cluster.local.", dns.TypeAAAA, 4096},
		{"_http._tcp.web.shop.svc.cluster.local.", dns.TypeSRV, 0},
		{"cluster.local.", dns.TypeAXFR, 0},
		{"10.0.96.10.in-addr.arpa.", dns.TypePTR, 512},
		{"example.com.", dns.TypeA, 0},
	} {
		m := new(dns.Msg)
		m.SetQuestion(q.name, q.t)
		if q.edns != 0 {
			m.SetEdns0(q.edns, true)
		}
		b, err := m.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	s := New(Options{})
	s.Swap(goldenRecords(f))
	f.Fuzz(func(t *testing.T, b []byte) {
		m := new(dns.Msg)
		if m.Unpack(b) != nil {
			return
		}
		w := &recorder{}
		s.ServeDNS(w, m)
		if m.Response {
			if w.msg != nil {
				t.Fatalf("answered a response: %v", w.msg)
			}
			return
		}
		if w.msg == nil {
			t.Fatalf("no answer (or one that does not pack) to %v", m)
		}
		if w.msg.Id != m.Id || !w.msg.Response {
			t.Fatalf("answer %v to query %v: want its ID and QR", w.msg, m)
		}
		size := 512
		if opt := m.IsEdns0(); opt != nil {
			size = max(size, int(opt.UDPSize()))
		}
		if len(w.msgs) == 1 && w.wire > size {
			t.Fatalf("UDP answer of %d bytes to a client that takes %d", w.wire, size)
		}
	})
}
