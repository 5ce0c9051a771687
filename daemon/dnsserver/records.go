// Package dnsserver serves the DNS records of a plan (plan.DNS) as an
// authoritative name server, the way the node daemon (netspec watch) answers
// the Kubernetes DNS-Based Service Discovery names itself.
//
// The server is authoritative for every zone of the plan (the cluster domain
// and the reverse zones): answers from them carry AA, and negative answers
// carry the zone's SOA (RFC 2308). Names outside the zones are REFUSED and
// answers never carry RA, unless Options.Upstreams is set (CoreDNS's
// "forward . /etc/resolv.conf"): then such a query is forwarded and the
// upstream's answer passed back (its RCODE, flags and sections, the
// client's ID), an ExternalName CNAME gets its target's records from the
// upstream appended, and the server's own answers carry RA. Nothing is
// cached.
// Besides the plan's records, the cluster domain's zone has the names
// CoreDNS's kubernetes plugin answers with "pods insecure" (Cluster): pod
// names by address, and every namespace of the tree.
// Records are compiled once per reload into an immutable, indexed snapshot
// (Records) and swapped in atomically (Server.Swap).
//
// Behaviour, in detail:
//
//   - Names are matched case-insensitively (one map lookup by the lower-case
//     name). The question section echoes the client's spelling; records keep
//     their owner names as the zone has them (lower case), as CoreDNS's file
//     plugin does.
//   - A name with records of other types only, or an empty non-terminal
//     (svc.cluster.local., _tcp.web.shop.svc.cluster.local.), is NODATA:
//     NOERROR, no answer, the zone's SOA in the authority section. A name
//     that does not exist is NXDOMAIN with the SOA. In both, the SOA's TTL is
//     the negative-caching TTL, min(SOA MINIMUM, SOA TTL) (RFC 2308 §3).
//   - Answers are minimal: no NS in the authority section, no additional
//     records.
//   - A CNAME (ExternalName Service) answers every type; it is followed
//     while its target is in the served zones (RFC 1034 §4.3.2). A target
//     outside them is looked up upstream (with Options.Upstreams; not for
//     CNAME and ANY queries) and the answer records appended, with the
//     upstream's TTLs, as CoreDNS's kubernetes plugin does; if no upstream
//     answers, or it answers other than NOERROR, the CNAME alone.
//   - Forwarding (Options.Upstreams): the query as the client sent it
//     (flags, EDNS0 OPT with its DO bit and options) under a fresh ID, to
//     each upstream in order over UDP, again over TCP when truncated,
//     ForwardTimeout (2 s) each; the first answer other than SERVFAIL or
//     REFUSED is passed back (one of those if every upstream gives one),
//     truncated to the client's UDP buffer; SERVFAIL when none answers or
//     MaxForwards (256) queries are in flight already.
//   - ANY is answered with one RRset of the name (RFC 8482 §4.1), the first
//     present of SOA, CNAME, A, AAAA, SRV, PTR, TXT, NS.
//   - EDNS0: a reply to a query with an OPT carries an OPT (payload size
//     1232, version 0; BADVERS for a version above 0) and a UDP reply is
//     truncated (TC, dns.Msg.Truncate) to the client's buffer size, at
//     least 512; without EDNS0, to 512. Over TCP the full answer is sent.
//   - AXFR and IXFR (answered with the full zone) over TCP, for clients in
//     Options.TransferTo only; others get REFUSED. Over UDP, AXFR is FORMERR
//     and IXFR gets the SOA alone (RFC 1995 §2: retry over TCP).
//   - Opcodes other than QUERY get NOTIMP; a query with other than one
//     question gets FORMERR; a class other than IN (or ANY) gets REFUSED.
package dnsserver

import (
	"fmt"
	"strings"

	"github.com/miekg/dns"

	"netspec.dev/netspec/plan"
)

// Records is an immutable, indexed snapshot of a plan's zones, built once
// per reload by Compile. It is safe for concurrent use by any number of
// queries; a Server holds one at a time (Server.Swap).
type Records struct {
	// names maps every lower-case owner name of a zone, and every empty
	// non-terminal between an owner name and its zone's apex, to its node.
	names map[string]*node
	// zones maps the lower-case apex of every zone to the zone.
	zones map[string]*zone
	// synth answers the names of the cluster domain that exist without
	// records (Cluster); nil: none.
	synth *synth
}

// node is one name of a zone: its RRsets (none for an empty non-terminal).
type node struct {
	zone *zone
	sets []rrset // in the plan's order of types; empty: an empty non-terminal
}

// rrset is the records of one type at one name.
type rrset struct {
	typ uint16
	rrs []dns.RR // capacity == length: appending never writes into the snapshot
}

// zone is one authoritative zone.
type zone struct {
	name   string   // lower case, fully qualified
	soa    *dns.SOA // as in the plan, for SOA queries and transfers
	negSOA []dns.RR // the SOA with the negative TTL (RFC 2308 §3), for authority sections
	axfr   []dns.RR // SOA, every record of the zone, SOA
}

// get returns the RRset of a type at a node, or nil.
func (n *node) get(t uint16) []dns.RR {
	for i := range n.sets {
		if n.sets[i].typ == t {
			return n.sets[i].rrs
		}
	}
	return nil
}

// Compile parses every record of d (its RDATA with dns.NewRR) and indexes
// the zones for lookup, with the names c makes exist (ClusterOf a plan; the
// zero Cluster for none). Every zone must have exactly one SOA, at its
// apex; every record must lie inside its zone; a CNAME must be alone at
// its name. Errors name the zone and the record.
func Compile(d plan.DNS, c Cluster) (*Records, error) {
	rs := &Records{names: map[string]*node{}, zones: map[string]*zone{}}
	for _, pz := range d.Zones {
		name := strings.ToLower(dns.Fqdn(pz.Name))
		if _, ok := dns.IsDomainName(name); !ok || pz.Name == "" {
			return nil, fmt.Errorf("dns zone %q: not a domain name", pz.Name)
		}
		if rs.zones[name] != nil {
			return nil, fmt.Errorf("dns zone %q: listed twice", pz.Name)
		}
		rs.zones[name] = &zone{name: name}
	}
	for _, pz := range d.Zones {
		z := rs.zones[strings.ToLower(dns.Fqdn(pz.Name))]
		var body []dns.RR
		for _, r := range pz.Records {
			rr, err := parseRecord(r)
			if err != nil {
				return nil, fmt.Errorf("dns zone %s: record %s %s %q: %w", pz.Name, r.Name, r.Type, r.Data, err)
			}
			owner := strings.ToLower(rr.Header().Name)
			if !dns.IsSubDomain(z.name, owner) {
				return nil, fmt.Errorf("dns zone %s: record %s %s %q: name outside the zone", pz.Name, r.Name, r.Type, r.Data)
			}
			if rs.zoneOf(owner) != z {
				return nil, fmt.Errorf("dns zone %s: record %s %s %q: name inside zone %s, also served", pz.Name, r.Name, r.Type, r.Data, rs.zoneOf(owner).name)
			}
			if soa, ok := rr.(*dns.SOA); ok {
				if owner != z.name {
					return nil, fmt.Errorf("dns zone %s: record %s SOA: not at the zone apex", pz.Name, r.Name)
				}
				if z.soa != nil {
					return nil, fmt.Errorf("dns zone %s: record %s SOA: second SOA", pz.Name, r.Name)
				}
				z.soa = soa
				continue
			}
			body = append(body, rr)
			rs.add(z, owner, rr)
		}
		if z.soa == nil {
			return nil, fmt.Errorf("dns zone %s: no SOA record", pz.Name)
		}
		rs.add(z, z.name, z.soa)
		neg := dns.Copy(z.soa).(*dns.SOA)
		neg.Hdr.Ttl = min(z.soa.Minttl, z.soa.Hdr.Ttl)
		z.negSOA = []dns.RR{neg}
		z.axfr = make([]dns.RR, 0, len(body)+2)
		z.axfr = append(append(append(z.axfr, z.soa), body...), z.soa)
	}
	for name, n := range rs.names {
		for i := range n.sets {
			s := &n.sets[i]
			s.rrs = s.rrs[:len(s.rrs):len(s.rrs)]
			if s.typ == dns.TypeCNAME && (len(n.sets) > 1 || len(s.rrs) > 1) {
				return nil, fmt.Errorf("dns zone %s: record %s CNAME: other records at the name", n.zone.name, name)
			}
		}
	}
	if err := rs.compileCluster(c); err != nil {
		return nil, err
	}
	return rs, nil
}

// parseRecord parses one plan record and checks that it is what the plan
// says it is.
func parseRecord(r plan.Record) (dns.RR, error) {
	t, ok := dns.StringToType[strings.ToUpper(r.Type)]
	if !ok {
		return nil, fmt.Errorf("unknown type")
	}
	if _, ok := dns.IsDomainName(r.Name); !ok || !dns.IsFqdn(r.Name) {
		return nil, fmt.Errorf("name not fully qualified")
	}
	rr, err := dns.NewRR(fmt.Sprintf("%s %d IN %s %s", r.Name, r.TTL, r.Type, r.Data))
	if err != nil {
		return nil, err
	}
	if rr == nil {
		return nil, fmt.Errorf("empty record")
	}
	if rr.Header().Rrtype != t || !strings.EqualFold(rr.Header().Name, r.Name) {
		return nil, fmt.Errorf("parses as %s %s", rr.Header().Name, dns.TypeToString[rr.Header().Rrtype])
	}
	return rr, nil
}

// add indexes rr at owner, and the empty non-terminals between owner and
// the zone apex.
func (rs *Records) add(z *zone, owner string, rr dns.RR) {
	n := rs.names[owner]
	if n == nil {
		n = &node{zone: z}
		rs.names[owner] = n
		// Empty non-terminals: every ancestor up to the apex exists.
		for name := owner; name != z.name; {
			i, end := dns.NextLabel(name, 0)
			if end {
				break
			}
			name = name[i:]
			if rs.names[name] != nil {
				break
			}
			rs.names[name] = &node{zone: z}
		}
	}
	t := rr.Header().Rrtype
	for i := range n.sets {
		if n.sets[i].typ == t {
			n.sets[i].rrs = append(n.sets[i].rrs, rr)
			return
		}
	}
	n.sets = append(n.sets, rrset{typ: t, rrs: []dns.RR{rr}})
}

// zoneOf returns the most specific zone that holds the lower-case name, or
// nil. It walks the labels of name: O(labels), never O(records).
func (rs *Records) zoneOf(name string) *zone {
	for off, end := 0, false; !end; off, end = dns.NextLabel(name, off) {
		if z := rs.zones[name[off:]]; z != nil {
			return z
		}
	}
	return rs.zones["."]
}
