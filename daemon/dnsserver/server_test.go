package dnsserver

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"

	"netspec.dev/netspec/plan"
)

const (
	soaCluster = "cluster.local. 5 IN SOA localhost. hostmaster.cluster.local. 1945356703 7200 1800 86400 5"
	soaRev10   = "10.in-addr.arpa. 5 IN SOA localhost. hostmaster.10.in-addr.arpa. 774745621 7200 1800 86400 5"
)

// TestKubernetesRecords covers every record shape of the Kubernetes DNS
// specification with the kitchen-sink golden plan.
func TestKubernetesRecords(t *testing.T) {
	s := New(Options{})
	s.Swap(goldenRecords(t))
	v6ptr, err := dns.ReverseAddr("fd00:10:96::120")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []tcase{
		// ClusterIP Services.
		{qname: "web.shop.svc.cluster.local.", qtype: dns.TypeA,
			answer: []string{"web.shop.svc.cluster.local. 5 IN A 10.96.0.10"}},
		{qname: "frontend.shop.svc.cluster.local.", qtype: dns.TypeAAAA,
			answer: []string{"frontend.shop.svc.cluster.local. 5 IN AAAA fd00:10:96::120"}},
		{qname: "frontend.shop.svc.cluster.local.", qtype: dns.TypeA,
			answer: []string{"frontend.shop.svc.cluster.local. 5 IN A 10.96.0.120"}},
		{qname: "_http._tcp.web.shop.svc.cluster.local.", qtype: dns.TypeSRV,
			answer: []string{"_http._tcp.web.shop.svc.cluster.local. 5 IN SRV 0 100 80 web.shop.svc.cluster.local."}},
		{qname: "_grpc._tcp.cart.shop.svc.cluster.local.", qtype: dns.TypeSRV,
			answer: []string{"_grpc._tcp.cart.shop.svc.cluster.local. 5 IN SRV 0 100 9090 cart.shop.svc.cluster.local."}},
		{qname: "_dns._udp.dns.infra.svc.cluster.local.", qtype: dns.TypeSRV,
			answer: []string{"_dns._udp.dns.infra.svc.cluster.local. 5 IN SRV 0 100 53 dns.infra.svc.cluster.local."}},
		{qname: "_diameter._sctp.diameter.telecom.svc.cluster.local.", qtype: dns.TypeSRV,
			answer: []string{"_diameter._sctp.diameter.telecom.svc.cluster.local. 5 IN SRV 0 100 3868 diameter.telecom.svc.cluster.local."}},
		// SRV at the Service's own name, as CoreDNS answers: every port
		// (unnamed too; 53/UDP and 53/TCP are one record) to the Service.
		{qname: "cart.shop.svc.cluster.local.", qtype: dns.TypeSRV, answer: []string{
			"cart.shop.svc.cluster.local. 5 IN SRV 0 100 80 cart.shop.svc.cluster.local.",
			"cart.shop.svc.cluster.local. 5 IN SRV 0 100 9090 cart.shop.svc.cluster.local.",
			"cart.shop.svc.cluster.local. 5 IN SRV 0 100 9100 cart.shop.svc.cluster.local."}},
		{qname: "api.shop.svc.cluster.local.", qtype: dns.TypeSRV,
			answer: []string{"api.shop.svc.cluster.local. 5 IN SRV 0 100 80 api.shop.svc.cluster.local."}},
		{qname: "dns.infra.svc.cluster.local.", qtype: dns.TypeSRV,
			answer: []string{"dns.infra.svc.cluster.local. 5 IN SRV 0 100 53 dns.infra.svc.cluster.local."}},
		// A Service without endpoints still has its ClusterIP record.
		{qname: "reports.shop.svc.cluster.local.", qtype: dns.TypeA,
			answer: []string{"reports.shop.svc.cluster.local. 5 IN A 10.104.172.164"}},
		// Headless: every ready endpoint (10.244.3.30 is not ready).
		{qname: "db.data.svc.cluster.local.", qtype: dns.TypeA, answer: []string{
			"db.data.svc.cluster.local. 5 IN A 10.244.1.30",
			"db.data.svc.cluster.local. 5 IN A 10.244.2.30"}},
		{qname: "etcd.data.svc.cluster.local.", qtype: dns.TypeA, answer: []string{
			"etcd.data.svc.cluster.local. 5 IN A 10.244.1.150",
			"etcd.data.svc.cluster.local. 5 IN A 10.244.2.150",
			"etcd.data.svc.cluster.local. 5 IN A 10.244.3.150"}},
		// Headless hostname records.
		{qname: "db-0.db.data.svc.cluster.local.", qtype: dns.TypeA,
			answer: []string{"db-0.db.data.svc.cluster.local. 5 IN A 10.244.1.30"}},
		{qname: "etcd-2.etcd.data.svc.cluster.local.", qtype: dns.TypeA,
			answer: []string{"etcd-2.etcd.data.svc.cluster.local. 5 IN A 10.244.3.150"}},
		{qname: "mysql-b.legacy-db.data.svc.cluster.local.", qtype: dns.TypeA,
			answer: []string{"mysql-b.legacy-db.data.svc.cluster.local. 5 IN A 192.168.20.11"}},
		// Headless SRV: one per ready endpoint, at its hostname.
		{qname: "_postgres._tcp.db.data.svc.cluster.local.", qtype: dns.TypeSRV, answer: []string{
			"_postgres._tcp.db.data.svc.cluster.local. 5 IN SRV 0 100 5432 db-0.db.data.svc.cluster.local.",
			"_postgres._tcp.db.data.svc.cluster.local. 5 IN SRV 0 100 5432 db-1.db.data.svc.cluster.local."}},
		// Headless SRV at the Service's name: each ready endpoint's ports;
		// none without ports (NODATA: the name has its A records).
		{qname: "db.data.svc.cluster.local.", qtype: dns.TypeSRV, answer: []string{
			"db.data.svc.cluster.local. 5 IN SRV 0 100 5432 db-0.db.data.svc.cluster.local.",
			"db.data.svc.cluster.local. 5 IN SRV 0 100 5432 db-1.db.data.svc.cluster.local."}},
		{qname: "extdb.data.svc.cluster.local.", qtype: dns.TypeSRV, ns: []string{soaCluster}},
		// Headless with no ready endpoint: the name does not exist.
		{qname: "standby-db.data.svc.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError, ns: []string{soaCluster}},
		{qname: "_mysql._tcp.standby-db.data.svc.cluster.local.", qtype: dns.TypeSRV, rcode: dns.RcodeNameError, ns: []string{soaCluster}},
		// PTR, IPv4: ClusterIP and headless endpoint.
		{qname: "10.0.96.10.in-addr.arpa.", qtype: dns.TypePTR,
			answer: []string{"10.0.96.10.in-addr.arpa. 5 IN PTR web.shop.svc.cluster.local."}},
		{qname: "30.1.244.10.in-addr.arpa.", qtype: dns.TypePTR,
			answer: []string{"30.1.244.10.in-addr.arpa. 5 IN PTR db-0.db.data.svc.cluster.local."}},
		{qname: "99.99.99.10.in-addr.arpa.", qtype: dns.TypePTR, rcode: dns.RcodeNameError, ns: []string{soaRev10}},
		// PTR, IPv6.
		{qname: v6ptr, qtype: dns.TypePTR,
			answer: []string{v6ptr + " 5 IN PTR frontend.shop.svc.cluster.local."}},
		// ExternalName: a CNAME for every type, not chased out of the zones.
		{qname: "search.shop.svc.cluster.local.", qtype: dns.TypeA,
			answer: []string{"search.shop.svc.cluster.local. 5 IN CNAME search.example.com."}},
		{qname: "search.shop.svc.cluster.local.", qtype: dns.TypeAAAA,
			answer: []string{"search.shop.svc.cluster.local. 5 IN CNAME search.example.com."}},
		{qname: "search.shop.svc.cluster.local.", qtype: dns.TypeCNAME,
			answer: []string{"search.shop.svc.cluster.local. 5 IN CNAME search.example.com."}},
		{qname: "search.shop.svc.cluster.local.", qtype: dns.TypeSRV,
			answer: []string{"search.shop.svc.cluster.local. 5 IN CNAME search.example.com."}},
		// Schema version.
		{qname: "dns-version.cluster.local.", qtype: dns.TypeTXT,
			answer: []string{`dns-version.cluster.local. 28800 IN TXT "1.1.0"`}},
		// Apex.
		{qname: "cluster.local.", qtype: dns.TypeSOA, answer: []string{soaCluster}},
		{qname: "cluster.local.", qtype: dns.TypeNS, answer: []string{"cluster.local. 5 IN NS localhost."}},
		{qname: "10.in-addr.arpa.", qtype: dns.TypeSOA, answer: []string{soaRev10}},
		{qname: "0.0.4.4.2.0.0.1.0.0.0.0.d.f.ip6.arpa.", qtype: dns.TypeNS,
			answer: []string{"0.0.4.4.2.0.0.1.0.0.0.0.d.f.ip6.arpa. 5 IN NS localhost."}},
	} {
		tc.check(t, query(t, s, tc.msg()))
	}
}

// TestClusterNames covers the names of the cluster domain that exist
// without records, as CoreDNS's kubernetes plugin with "pods insecure"
// answers them: pod names by address, in the tree's namespaces only, and
// the namespaces themselves.
func TestClusterNames(t *testing.T) {
	p := goldenPlan(t)
	c := ClusterOf(p)
	c.Namespaces = append(c.Namespaces, "empty") // a namespace of Pods only
	rs, err := Compile(p.DNS, c)
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{})
	s.Swap(rs)
	for _, tc := range []tcase{
		{qname: "10-244-1-30.data.pod.cluster.local.", qtype: dns.TypeA,
			answer: []string{"10-244-1-30.data.pod.cluster.local. 5 IN A 10.244.1.30"}},
		// Any address, whether a pod has it or not ("insecure"), in any
		// namespace of the tree; the owner name in lower case.
		{qname: "192-0-2-9.EMPTY.pod.cluster.local.", qtype: dns.TypeA,
			answer: []string{"192-0-2-9.empty.pod.cluster.local. 5 IN A 192.0.2.9"}},
		{qname: "fd00-10-244--5.shop.pod.cluster.local.", qtype: dns.TypeAAAA,
			answer: []string{"fd00-10-244--5.shop.pod.cluster.local. 5 IN AAAA fd00:10:244::5"}},
		{qname: "fd00-10-244--5.shop.pod.cluster.local.", qtype: dns.TypeANY,
			answer: []string{"fd00-10-244--5.shop.pod.cluster.local. 5 IN AAAA fd00:10:244::5"}},
		// An IPv4-mapped address is IPv4, as in CoreDNS.
		{qname: "--ffff-c000-209.shop.pod.cluster.local.", qtype: dns.TypeA,
			answer: []string{"--ffff-c000-209.shop.pod.cluster.local. 5 IN A 192.0.2.9"}},
		// The other family, or another type: NODATA.
		{qname: "10-244-1-30.data.pod.cluster.local.", qtype: dns.TypeAAAA, ns: []string{soaCluster}},
		{qname: "10-244-1-30.data.pod.cluster.local.", qtype: dns.TypeTXT, ns: []string{soaCluster}},
		{qname: "fd00-10-244--5.shop.pod.cluster.local.", qtype: dns.TypeA, ns: []string{soaCluster}},
		// Not an address, a namespace not in the tree, or a name below a
		// pod's: NXDOMAIN.
		{qname: "10-244-1.data.pod.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError, ns: []string{soaCluster}},
		{qname: "10-244-1-300.data.pod.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError, ns: []string{soaCluster}},
		{qname: "web.data.pod.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError, ns: []string{soaCluster}},
		{qname: "10-244-1-30.nope.pod.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError, ns: []string{soaCluster}},
		{qname: "x.10-244-1-30.data.pod.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError, ns: []string{soaCluster}},
		// Namespaces exist (NODATA), under pod and svc, Services or not.
		{qname: "pod.cluster.local.", qtype: dns.TypeA, ns: []string{soaCluster}},
		{qname: "data.pod.cluster.local.", qtype: dns.TypeA, ns: []string{soaCluster}},
		{qname: "empty.pod.cluster.local.", qtype: dns.TypeA, ns: []string{soaCluster}},
		{qname: "empty.svc.cluster.local.", qtype: dns.TypeA, ns: []string{soaCluster}},
		{qname: "nope.pod.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError, ns: []string{soaCluster}},
		{qname: "nope.svc.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError, ns: []string{soaCluster}},
		{qname: "web.empty.svc.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError, ns: []string{soaCluster}},
	} {
		tc.check(t, query(t, s, tc.msg()))
	}

	// Without a Cluster, none of these names exist.
	rs, err = Compile(p.DNS, Cluster{})
	if err != nil {
		t.Fatal(err)
	}
	s.Swap(rs)
	for _, q := range []string{"10-244-1-30.data.pod.cluster.local.", "pod.cluster.local.", "data.pod.cluster.local."} {
		tc := tcase{qname: q, qtype: dns.TypeA, rcode: dns.RcodeNameError, ns: []string{soaCluster}}
		tc.check(t, query(t, s, tc.msg()))
	}
}

// TestClusterNamesWithoutServices: svc. exists (NODATA) with no record
// below it, as the namespaces below it do, and a CNAME to a pod name (an
// ExternalName Service) is followed to its address.
func TestClusterNamesWithoutServices(t *testing.T) {
	rs, err := Compile(plan.DNS{Zones: []plan.Zone{zoneRecords("cluster.local.", 5, 5, 1,
		[3]string{"ext.web.svc.cluster.local.", "CNAME", "10-244-1-5.web.pod.cluster.local."},
		[3]string{"gone.web.svc.cluster.local.", "CNAME", "10-244-1.web.pod.cluster.local."},
	)}}, Cluster{Domain: "cluster.local", Namespaces: []string{"jobs", "web"}})
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{})
	s.Swap(rs)
	soa := "cluster.local. 5 IN SOA localhost. hostmaster.cluster.local. 1 7200 1800 86400 5"
	for _, tc := range []tcase{
		{qname: "svc.cluster.local.", qtype: dns.TypeA, ns: []string{soa}},
		{qname: "jobs.svc.cluster.local.", qtype: dns.TypeA, ns: []string{soa}},
		{qname: "ext.web.svc.cluster.local.", qtype: dns.TypeA, answer: []string{
			"ext.web.svc.cluster.local. 5 IN CNAME 10-244-1-5.web.pod.cluster.local.",
			"10-244-1-5.web.pod.cluster.local. 5 IN A 10.244.1.5"}},
		{qname: "ext.web.svc.cluster.local.", qtype: dns.TypeAAAA, answer: []string{
			"ext.web.svc.cluster.local. 5 IN CNAME 10-244-1-5.web.pod.cluster.local."}, ns: []string{soa}},
		{qname: "gone.web.svc.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError, answer: []string{
			"gone.web.svc.cluster.local. 5 IN CNAME 10-244-1.web.pod.cluster.local."}, ns: []string{soa}},
	} {
		tc.check(t, query(t, s, tc.msg()))
	}
}

// TestProtocol covers the protocol cases with the golden records.
func TestProtocol(t *testing.T) {
	s := New(Options{})
	s.Swap(goldenRecords(t))
	for _, tc := range []tcase{
		// Outside the zones.
		{qname: "example.com.", qtype: dns.TypeA, rcode: dns.RcodeRefused},
		{qname: "local.", qtype: dns.TypeSOA, rcode: dns.RcodeRefused},
		{qname: ".", qtype: dns.TypeNS, rcode: dns.RcodeRefused},
		{qname: "1.1.168.192.in-addr.arpa.", qtype: dns.TypePTR, rcode: dns.RcodeRefused},
		{qname: "cluster.local.example.com.", qtype: dns.TypeA, rcode: dns.RcodeRefused},
		// NXDOMAIN, SOA with the negative TTL in authority.
		{qname: "nope.shop.svc.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError, ns: []string{soaCluster}},
		{qname: "x.web.shop.svc.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError, ns: []string{soaCluster}},
		{qname: "_https._tcp.web.shop.svc.cluster.local.", qtype: dns.TypeSRV, rcode: dns.RcodeNameError, ns: []string{soaCluster}},
		// NODATA: the name exists, the type does not.
		{qname: "web.shop.svc.cluster.local.", qtype: dns.TypeAAAA, ns: []string{soaCluster}},
		{qname: "web.shop.svc.cluster.local.", qtype: dns.TypeTXT, ns: []string{soaCluster}},
		{qname: "dns-version.cluster.local.", qtype: dns.TypeA, ns: []string{soaCluster}},
		{qname: "10.0.96.10.in-addr.arpa.", qtype: dns.TypeA, ns: []string{soaRev10}},
		// NODATA at empty non-terminals.
		{qname: "svc.cluster.local.", qtype: dns.TypeA, ns: []string{soaCluster}},
		{qname: "shop.svc.cluster.local.", qtype: dns.TypeA, ns: []string{soaCluster}},
		{qname: "_tcp.web.shop.svc.cluster.local.", qtype: dns.TypeSRV, ns: []string{soaCluster}},
		{qname: "96.10.in-addr.arpa.", qtype: dns.TypePTR, ns: []string{soaRev10}},
		// Case-insensitive; the question keeps the client's case, owner
		// names are the zone's (lower case), as CoreDNS's file plugin.
		{qname: "WeB.Shop.SVC.Cluster.Local.", qtype: dns.TypeA,
			answer: []string{"web.shop.svc.cluster.local. 5 IN A 10.96.0.10"}},
		{qname: "NOPE.Cluster.LOCAL.", qtype: dns.TypeA, rcode: dns.RcodeNameError, ns: []string{soaCluster}},
		{qname: "EXAMPLE.com.", qtype: dns.TypeA, rcode: dns.RcodeRefused},
		// ANY: one RRset (RFC 8482), the most useful.
		{qname: "frontend.shop.svc.cluster.local.", qtype: dns.TypeANY,
			answer: []string{"frontend.shop.svc.cluster.local. 5 IN A 10.96.0.120"}},
		{qname: "cluster.local.", qtype: dns.TypeANY, answer: []string{soaCluster}},
		{qname: "search.shop.svc.cluster.local.", qtype: dns.TypeANY,
			answer: []string{"search.shop.svc.cluster.local. 5 IN CNAME search.example.com."}},
		{qname: "svc.cluster.local.", qtype: dns.TypeANY, ns: []string{soaCluster}},
		{qname: "nope.cluster.local.", qtype: dns.TypeANY, rcode: dns.RcodeNameError, ns: []string{soaCluster}},
	} {
		tc.check(t, query(t, s, tc.msg()))
	}

	t.Run("class", func(t *testing.T) {
		m := new(dns.Msg)
		m.Question = []dns.Question{{Name: "version.bind.", Qtype: dns.TypeTXT, Qclass: dns.ClassCHAOS}}
		if got := query(t, s, m); got.Rcode != dns.RcodeRefused {
			t.Errorf("CHAOS: rcode %s, want REFUSED", dns.RcodeToString[got.Rcode])
		}
	})
	t.Run("notimp", func(t *testing.T) {
		for _, op := range []int{dns.OpcodeNotify, dns.OpcodeUpdate, dns.OpcodeStatus, dns.OpcodeIQuery} {
			m := new(dns.Msg)
			m.SetQuestion("cluster.local.", dns.TypeSOA)
			m.Opcode = op
			if got := query(t, s, m); got.Rcode != dns.RcodeNotImplemented {
				t.Errorf("opcode %s: rcode %s, want NOTIMP", dns.OpcodeToString[op], dns.RcodeToString[got.Rcode])
			}
		}
	})
	t.Run("formerr", func(t *testing.T) {
		m := new(dns.Msg)
		m.SetQuestion("web.shop.svc.cluster.local.", dns.TypeA)
		m.Question = append(m.Question, dns.Question{Name: "cart.shop.svc.cluster.local.", Qtype: dns.TypeA, Qclass: dns.ClassINET})
		if got := query(t, s, m); got.Rcode != dns.RcodeFormatError || len(got.Answer) != 0 {
			t.Errorf("two questions: rcode %s, %d answers; want FORMERR", dns.RcodeToString[got.Rcode], len(got.Answer))
		}
		m.Question = nil
		if got := query(t, s, m); got.Rcode != dns.RcodeFormatError {
			t.Errorf("no question: rcode %s, want FORMERR", dns.RcodeToString[got.Rcode])
		}
	})
	t.Run("response ignored", func(t *testing.T) {
		m := new(dns.Msg)
		m.SetQuestion("web.shop.svc.cluster.local.", dns.TypeA)
		m.Response = true
		w := &recorder{}
		s.ServeDNS(w, m)
		if w.msg != nil {
			t.Errorf("answered a response: %v", w.msg)
		}
	})
	t.Run("edns", func(t *testing.T) {
		m := new(dns.Msg)
		m.SetQuestion("web.shop.svc.cluster.local.", dns.TypeA)
		got := query(t, s, m)
		if got.IsEdns0() != nil {
			t.Errorf("OPT in the reply to a query without one")
		}
		m.SetEdns0(4096, false)
		got = query(t, s, m)
		opt := got.IsEdns0()
		if opt == nil || opt.Version() != 0 || opt.UDPSize() != advertisedUDPSize {
			t.Errorf("reply OPT %v, want version 0 size %d", opt, advertisedUDPSize)
		}
		m.IsEdns0().SetVersion(1)
		got = query(t, s, m)
		if got.Rcode != dns.RcodeBadVers || got.IsEdns0() == nil || len(got.Answer) != 0 {
			t.Errorf("EDNS version 1: rcode %s, want BADVERS with an OPT", dns.RcodeToString[got.Rcode])
		}
	})
	t.Run("not ready", func(t *testing.T) {
		tc := tcase{qname: "web.shop.svc.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeServerFailure}
		tc.check(t, query(t, New(Options{}), tc.msg()))
	})
}

// TestNegativeTTL checks that the SOA in negative answers has the TTL
// min(SOA minimum, SOA TTL) (RFC 2308 §3), whichever is smaller.
func TestNegativeTTL(t *testing.T) {
	rs, err := Compile(plan.DNS{Zones: []plan.Zone{
		zoneRecords("a.test.", 300, 30, 1, [3]string{"x.a.test.", "A", "192.0.2.1"}),
		zoneRecords("b.test.", 10, 3600, 2, [3]string{"x.b.test.", "A", "192.0.2.2"}),
	}}, Cluster{})
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{})
	s.Swap(rs)
	soaA := "a.test. 30 IN SOA localhost. hostmaster.a.test. 1 7200 1800 86400 30"
	soaB := "b.test. 10 IN SOA localhost. hostmaster.b.test. 2 7200 1800 86400 3600"
	for _, tc := range []tcase{
		{qname: "y.a.test.", qtype: dns.TypeA, rcode: dns.RcodeNameError, ns: []string{soaA}},
		{qname: "x.a.test.", qtype: dns.TypeAAAA, ns: []string{soaA}},
		{qname: "y.b.test.", qtype: dns.TypeA, rcode: dns.RcodeNameError, ns: []string{soaB}},
		{qname: "x.b.test.", qtype: dns.TypeTXT, ns: []string{soaB}},
		// The SOA asked for keeps its own TTL.
		{qname: "a.test.", qtype: dns.TypeSOA, answer: []string{"a.test. 300 IN SOA localhost. hostmaster.a.test. 1 7200 1800 86400 30"}},
	} {
		tc.check(t, query(t, s, tc.msg()))
	}
}

// TestCNAMEInZone checks that a CNAME to a name in the served zones is
// followed, and the RCODE is that of the last name (RFC 6604).
func TestCNAMEInZone(t *testing.T) {
	rs, err := Compile(plan.DNS{Zones: []plan.Zone{zoneRecords("c.test.", 5, 5, 1,
		[3]string{"alias.c.test.", "CNAME", "real.c.test."},
		[3]string{"real.c.test.", "A", "192.0.2.7"},
		[3]string{"dangling.c.test.", "CNAME", "gone.c.test."},
	)}}, Cluster{})
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{})
	s.Swap(rs)
	soa := "c.test. 5 IN SOA localhost. hostmaster.c.test. 1 7200 1800 86400 5"
	for _, tc := range []tcase{
		{qname: "alias.c.test.", qtype: dns.TypeA, answer: []string{
			"alias.c.test. 5 IN CNAME real.c.test.", "real.c.test. 5 IN A 192.0.2.7"}},
		{qname: "alias.c.test.", qtype: dns.TypeAAAA, answer: []string{"alias.c.test. 5 IN CNAME real.c.test."}, ns: []string{soa}},
		{qname: "dangling.c.test.", qtype: dns.TypeA, rcode: dns.RcodeNameError,
			answer: []string{"dangling.c.test. 5 IN CNAME gone.c.test."}, ns: []string{soa}},
	} {
		tc.check(t, query(t, s, tc.msg()))
	}
}

// TestGoldenZoneFiles asks the server for every RRset of the golden zone
// files and compares the answer with the file.
func TestGoldenZoneFiles(t *testing.T) {
	s := New(Options{})
	s.Swap(goldenRecords(t))
	files, err := filepath.Glob(goldenDir + "/dns/*.zone")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden zone files: %v", err)
	}
	n := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		type key struct {
			name string
			typ  uint16
		}
		sets := map[key][]string{}
		zp := dns.NewZoneParser(strings.NewReader(string(data)), "", f)
		for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
			k := key{strings.ToLower(rr.Header().Name), rr.Header().Rrtype}
			sets[k] = append(sets[k], rr.String())
		}
		if err := zp.Err(); err != nil {
			t.Fatal(err)
		}
		for k, want := range sets {
			m := new(dns.Msg)
			m.SetQuestion(k.name, k.typ)
			got := query(t, s, m)
			slices.Sort(want)
			if a := sectionStrings(got.Answer); got.Rcode != dns.RcodeSuccess || !got.Authoritative || !slices.Equal(a, want) {
				t.Errorf("%s %s: rcode %s answer\n%s\nwant (%s)\n%s", k.name, dns.TypeToString[k.typ],
					dns.RcodeToString[got.Rcode], strings.Join(a, "\n"), filepath.Base(f), strings.Join(want, "\n"))
			}
			n++
		}
	}
	t.Logf("%d RRsets of %d zone files answered as written", n, len(files))
}

func TestCompileErrors(t *testing.T) {
	ok := zoneRecords("e.test.", 5, 5, 1)
	for _, tc := range []struct {
		name string
		d    plan.DNS
		want string // in the error
	}{
		{"bad rdata", plan.DNS{Zones: []plan.Zone{zoneRecords("e.test.", 5, 5, 1, [3]string{"x.e.test.", "A", "not-an-ip"})}}, "zone e.test.: record x.e.test. A"},
		{"bad type", plan.DNS{Zones: []plan.Zone{zoneRecords("e.test.", 5, 5, 1, [3]string{"x.e.test.", "BOGUS", "1"})}}, "record x.e.test. BOGUS"},
		{"outside", plan.DNS{Zones: []plan.Zone{zoneRecords("e.test.", 5, 5, 1, [3]string{"x.other.", "A", "192.0.2.1"})}}, "outside the zone"},
		{"relative", plan.DNS{Zones: []plan.Zone{zoneRecords("e.test.", 5, 5, 1, [3]string{"x.e.test", "A", "192.0.2.1"})}}, "not fully qualified"},
		{"no soa", plan.DNS{Zones: []plan.Zone{{Name: "e.test.", Records: ok.Records[1:]}}}, "no SOA"},
		{"two zones", plan.DNS{Zones: []plan.Zone{ok, ok}}, "listed twice"},
		{"cname and other", plan.DNS{Zones: []plan.Zone{zoneRecords("e.test.", 5, 5, 1,
			[3]string{"x.e.test.", "CNAME", "y.example."}, [3]string{"x.e.test.", "A", "192.0.2.1"})}}, "CNAME: other records"},
		{"cluster domain without a zone", plan.DNS{Zones: []plan.Zone{ok}}, `cluster domain "cluster.local": no zone`},
	} {
		c := Cluster{}
		if strings.HasPrefix(tc.name, "cluster") {
			c = Cluster{Domain: "cluster.local", Namespaces: []string{"default"}}
		}
		_, err := Compile(tc.d, c)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

// TestOnQuery checks the metrics hook is called once per answered query.
func TestOnQuery(t *testing.T) {
	var mu sync.Mutex
	counts := map[int]int{}
	s := New(Options{OnQuery: func(rcode int) { mu.Lock(); counts[rcode]++; mu.Unlock() }})
	s.Swap(goldenRecords(t))
	for _, q := range []string{"web.shop.svc.cluster.local.", "nope.cluster.local.", "example.com.", "db.data.svc.cluster.local."} {
		m := new(dns.Msg)
		m.SetQuestion(q, dns.TypeA)
		query(t, s, m)
	}
	want := map[int]int{dns.RcodeSuccess: 2, dns.RcodeNameError: 1, dns.RcodeRefused: 1}
	if len(counts) != len(want) || counts[0] != 2 || counts[3] != 1 || counts[5] != 1 {
		t.Errorf("OnQuery counts %v, want %v", counts, want)
	}
}

// TestSwapAtomic swaps between two snapshots while goroutines query: every
// answer is wholly from one of them.
func TestSwapAtomic(t *testing.T) {
	build := func(prefix string, serial int) *Records {
		var rrs [][3]string
		for i := 1; i <= 40; i++ {
			rrs = append(rrs, [3]string{"many.atomic.test.", "A", prefix + "." + strconv.Itoa(i)})
		}
		rs, err := Compile(plan.DNS{Zones: []plan.Zone{zoneRecords("atomic.test.", 5, 5, serial, rrs...)}}, Cluster{})
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	a, b := build("10.1.0", 1), build("10.2.0", 2)
	s := New(Options{})
	s.Swap(a)
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; !stop.Load(); i++ {
			if i%2 == 0 {
				s.Swap(b)
			} else {
				s.Swap(a)
			}
		}
	})
	var seen [2]atomic.Int64
	var queriers sync.WaitGroup
	for range 4 {
		queriers.Go(func() {
			for range 2000 {
				m := new(dns.Msg)
				m.SetQuestion("many.atomic.test.", dns.TypeA)
				w := &recorder{remote: tcpClient}
				s.ServeDNS(w, m)
				got := w.msg
				if len(got.Answer) != 40 {
					t.Errorf("%d answers, want 40", len(got.Answer))
					return
				}
				first := got.Answer[0].(*dns.A).A.String()
				prefix := first[:strings.LastIndex(first, ".")]
				for _, rr := range got.Answer {
					if !strings.HasPrefix(rr.(*dns.A).A.String(), prefix+".") {
						t.Errorf("mixed answer: %v and %v", first, rr)
						return
					}
				}
				if prefix == "10.1.0" {
					seen[0].Add(1)
				} else {
					seen[1].Add(1)
				}
			}
		})
	}
	queriers.Wait()
	stop.Store(true)
	wg.Wait()
	t.Logf("answers from snapshot a: %d, from b: %d", seen[0].Load(), seen[1].Load())
}

// TestTransferPolicy checks AXFR/IXFR refusal and the UDP cases with the
// handler; the TCP transfer itself is in TestSockets.
func TestTransferPolicy(t *testing.T) {
	rs := goldenRecords(t)
	closed := New(Options{})
	closed.Swap(rs)
	open := New(Options{TransferTo: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	open.Swap(rs)
	other := New(Options{TransferTo: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}})
	other.Swap(rs)
	ask := func(s *Server, name string, typ uint16, remote any) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion(name, typ)
		w := &recorder{}
		if remote == "tcp" {
			w.remote = tcpClient
		}
		s.ServeDNS(w, m)
		if len(w.msgs) != 1 {
			t.Fatalf("%d replies", len(w.msgs))
		}
		return w.msg
	}
	for _, typ := range []uint16{dns.TypeAXFR, dns.TypeIXFR} {
		for _, s := range []*Server{closed, other} {
			for _, proto := range []string{"udp", "tcp"} {
				if got := ask(s, "cluster.local.", typ, proto); got.Rcode != dns.RcodeRefused || len(got.Answer) != 0 {
					t.Errorf("%s over %s from a client not allowed: rcode %s", dns.TypeToString[typ], proto, dns.RcodeToString[got.Rcode])
				}
			}
		}
	}
	if got := ask(open, "web.shop.svc.cluster.local.", dns.TypeAXFR, "tcp"); got.Rcode != dns.RcodeNotAuth {
		t.Errorf("AXFR of a name that is no zone: rcode %s, want NOTAUTH", dns.RcodeToString[got.Rcode])
	}
	if got := ask(open, "example.com.", dns.TypeAXFR, "tcp"); got.Rcode != dns.RcodeRefused {
		t.Errorf("AXFR outside the zones: rcode %s, want REFUSED", dns.RcodeToString[got.Rcode])
	}
	if got := ask(open, "cluster.local.", dns.TypeAXFR, "udp"); got.Rcode != dns.RcodeFormatError {
		t.Errorf("AXFR over UDP: rcode %s, want FORMERR", dns.RcodeToString[got.Rcode])
	}
	tc := tcase{qname: "cluster.local.", qtype: dns.TypeIXFR, answer: []string{soaCluster}}
	tc.check(t, ask(open, "cluster.local.", dns.TypeIXFR, "udp"))
}
