package dnsserver

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"

	"netspec.dev/netspec/plan"
)

// Cluster names what the server answers in the cluster domain's zone
// without a record of the plan, as CoreDNS's kubernetes plugin does with
// "pods insecure" (kubeadm's Corefile): a pod name
// <a-b-c-d>.<namespace>.pod.<domain> (IPv6: its address with '-' for ':')
// is answered with that address (A or AAAA) in every namespace of the tree,
// whether or not a pod has it; <namespace>.pod.<domain>, pod.<domain>,
// <namespace>.svc.<domain> and svc.<domain> exist (NODATA) for every
// namespace, Services or not; a CNAME to such a name (an ExternalName
// Service) is followed to it. These names are in no zone file and no zone
// transfer, as CoreDNS's transfers leave them out too. The zero Cluster
// answers none of them.
type Cluster struct {
	Domain     string   // the cluster domain, without the trailing dot (plan.Cluster.Domain)
	Namespaces []string // the tree's namespaces
}

// ClusterOf returns the Cluster of a plan: its domain and the namespaces
// of its env files, which the compiler makes for every namespace of the
// tree.
func ClusterOf(p *plan.Plan) Cluster {
	c := Cluster{Domain: p.Cluster.Domain, Namespaces: make([]string, len(p.Env))}
	for i, e := range p.Env {
		c.Namespaces[i] = e.Namespace
	}
	return c
}

// SameCluster reports whether two plans give the server the same Cluster,
// so that records compiled for one serve the other when their DNS is equal.
func SameCluster(a, b *plan.Plan) bool {
	return a.Cluster.Domain == b.Cluster.Domain &&
		slices.EqualFunc(a.Env, b.Env, func(x, y plan.EnvFile) bool { return x.Namespace == y.Namespace })
}

// synth is the compiled Cluster of a Records.
type synth struct {
	zone       *zone
	pod        string // "pod.<domain>.", lower case
	svc        string // "svc.<domain>."
	namespaces map[string]bool
	ttl        uint32 // the zone's SOA MINIMUM: the Cluster's dnsTTL
}

// compileCluster indexes c for rs, whose zones must include the domain's
// when c names one.
func (rs *Records) compileCluster(c Cluster) error {
	if c.Domain == "" {
		return nil
	}
	apex := strings.ToLower(dns.Fqdn(c.Domain))
	z := rs.zones[apex]
	if z == nil {
		return fmt.Errorf("cluster domain %q: no zone of the plan", c.Domain)
	}
	s := &synth{zone: z, pod: "pod." + apex, svc: "svc." + apex, ttl: z.soa.Minttl,
		namespaces: make(map[string]bool, len(c.Namespaces))}
	for _, ns := range c.Namespaces {
		s.namespaces[strings.ToLower(ns)] = true
	}
	rs.synth = s
	return nil
}

// answer fills m for a lower-case name that has no node, when it is one of
// the names the Cluster makes exist, and reports whether it did.
func (s *synth) answer(m *dns.Msg, name string, qtype uint16) bool {
	if name == s.pod || name == s.svc {
		// Empty non-terminals above the pod and namespace names (svc.
		// has no node when no record lies below it).
		m.Ns = s.zone.negSOA
		return true
	}
	if rest, ok := strings.CutSuffix(name, "."+s.svc); ok {
		if !s.namespaces[rest] {
			return false
		}
		m.Ns = s.zone.negSOA
		return true
	}
	rest, ok := strings.CutSuffix(name, "."+s.pod)
	if !ok {
		return false
	}
	label, ns, isPod := strings.Cut(rest, ".")
	if !isPod {
		ns = label
	}
	if !s.namespaces[ns] {
		return false
	}
	if !isPod {
		m.Ns = s.zone.negSOA
		return true
	}
	addr, ok := podAddr(label)
	if !ok {
		return false
	}
	var rr dns.RR
	hdr := dns.RR_Header{Name: name, Class: dns.ClassINET, Ttl: s.ttl}
	switch {
	case addr.Is4() && (qtype == dns.TypeA || qtype == dns.TypeANY):
		hdr.Rrtype = dns.TypeA
		rr = &dns.A{Hdr: hdr, A: addr.AsSlice()}
	case addr.Is6() && (qtype == dns.TypeAAAA || qtype == dns.TypeANY):
		hdr.Rrtype = dns.TypeAAAA
		rr = &dns.AAAA{Hdr: hdr, AAAA: addr.AsSlice()}
	default:
		m.Ns = s.zone.negSOA // NODATA: the name has the other family's record
		return true
	}
	m.Answer = []dns.RR{rr}
	return true
}

// podAddr reads a pod name's first label as CoreDNS does: with exactly
// three '-' and no "--", an IPv4 address with '-' for '.'; else an IPv6
// address with '-' for ':'.
func podAddr(label string) (netip.Addr, bool) {
	var s string
	if strings.Count(label, "-") == 3 && !strings.Contains(label, "--") {
		s = strings.ReplaceAll(label, "-", ".")
	} else {
		s = strings.ReplaceAll(label, "-", ":")
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a.Unmap(), true // an IPv4-mapped address is IPv4, as net.IP.To4 says
}
