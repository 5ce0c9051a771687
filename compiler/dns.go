package compiler

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"netspec.dev/netspec/plan"
)

// DNSSchemaVersion is the version of the Kubernetes DNS specification the
// records follow, served as the dns-version TXT record.
const DNSSchemaVersion = "1.1.0"

// dnsVersionTTL is the TTL of the dns-version TXT record, whatever the
// Cluster's dnsTTL: 8 hours, as in CoreDNS (and the specification's
// example), since the schema version changes only with the server.
const dnsVersionTTL = 28800

// dnsRecords builds the zones of a Plan per the Kubernetes DNS-Based Service
// Discovery specification 1.1.0: the cluster domain, and one reverse zone
// per service and pod CIDR (on an octet or nibble boundary) for PTRs.
func dnsRecords(p *plan.Plan) plan.DNS {
	domain := p.Cluster.Domain + "."
	ttl := p.Cluster.DNSTTL
	// Every zone is served by the node itself (netspec watch) or by a local
	// authoritative server fed the zone files: the name server is
	// localhost., as in BIND's own local zones, which needs no glue and is
	// the same on every node.
	const ns = "localhost."
	fwd := &zoneBuilder{name: domain, ttl: ttl, ns: ns}
	fwd.addTTL("dns-version."+domain, "TXT", `"`+DNSSchemaVersion+`"`, dnsVersionTTL)

	var reverse []*zoneBuilder
	for _, c := range append(slices.Clone(p.Cluster.ServiceCIDRs), p.Cluster.PodCIDRs...) {
		name := reverseZone(c)
		if !slices.ContainsFunc(reverse, func(z *zoneBuilder) bool { return z.name == name }) {
			reverse = append(reverse, &zoneBuilder{name: name, ttl: ttl, ns: ns})
		}
	}
	// A reverse zone inside another is served by the larger one.
	reverse = slices.DeleteFunc(reverse, func(z *zoneBuilder) bool {
		return slices.ContainsFunc(reverse, func(o *zoneBuilder) bool {
			return o.name != z.name && strings.HasSuffix(z.name, "."+o.name)
		})
	})
	ptrAt := func(name, target string) {
		for _, z := range reverse {
			if strings.HasSuffix(name, "."+z.name) {
				z.add(name, "PTR", target)
				return
			}
		}
	}
	ptr := func(ip netip.Addr, target string) { ptrAt(reverseName(ip), target) }

	var sb serviceNames
	for i := range p.Services {
		s := &p.Services[i]
		switch {
		case s.Type == "ExternalName":
			if s.HasCNAME() {
				fwd.add(serviceName(s, domain), "CNAME", s.ExternalName+".")
			}
		case s.Headless:
			headlessRecords(fwd, ptr, s, serviceName(s, domain))
		default:
			n := sb.make(s, domain)
			for j, ip := range s.ClusterIPs {
				fwd.add(n.svc, addrType(ip), n.ips[j])
				ptrAt(n.ptrs[j], n.svc)
			}
			for j := range n.srvData {
				// CoreDNS answers SRV at the Service's own name for every
				// port, named or not (its transfers list them too, for
				// peer-finder); the spec's _port._proto name only for the
				// named ones.
				fwd.add(n.svc, "SRV", n.srvData[j])
				if n.srvNames[j] != "" {
					fwd.add(n.srvNames[j], "SRV", n.srvData[j])
				}
			}
		}
	}

	zones := []plan.Zone{fwd.zone()}
	for _, z := range reverse {
		zones = append(zones, z.zone())
	}
	slices.SortFunc(zones, func(a, b plan.Zone) int { return strings.Compare(a.Name, b.Name) })
	return plan.DNS{Zones: zones}
}

// headlessRecords gives a headless Service A/AAAA records for its ready
// endpoints at the Service name (none: the name does not exist), a name
// per endpoint (its hostname, else its address with dashes), SRV records
// that point at those names, and PTRs. The SRV records are, as CoreDNS
// answers them, at the Service's name for every port (not the sentinel
// port of a Service without ports, which has no number), and at
// _port._proto for the named ones.
func headlessRecords(fwd *zoneBuilder, ptr func(netip.Addr, string), s *plan.Service, svc string) {
	seen := map[netip.Addr]bool{}
	for _, port := range s.Ports {
		for _, e := range port.Endpoints {
			if !e.Ready {
				continue
			}
			host := e.Hostname()
			if host == "" {
				host = dashed(e.IP)
			}
			name := host + "." + svc
			if !seen[e.IP] {
				seen[e.IP] = true
				fwd.add(svc, addrType(e.IP), e.IP.String())
				fwd.add(name, addrType(e.IP), e.IP.String())
				ptr(e.IP, name)
			}
			if isSentinel(port) {
				continue
			}
			data := fmt.Sprintf("0 100 %d %s", e.Port, name)
			fwd.add(svc, "SRV", data)
			if port.Name != "" {
				fwd.add(srvName(port, svc), "SRV", data)
			}
		}
	}
}

// isSentinel reports whether port is the sentinel port of a headless
// Service without ports (plan.Port): no name, protocol or number.
func isSentinel(port plan.Port) bool {
	return port.Name == "" && port.Protocol == "" && port.Port == 0
}

func srvName(port plan.Port, svc string) string {
	return fmt.Sprintf("_%s._%s.%s", port.Name, strings.ToLower(port.Protocol), svc)
}

// serviceName is the Service's name in the cluster domain (with its
// trailing dot).
func serviceName(s *plan.Service, domain string) string {
	return string(appendServiceName(nil, s, domain))
}

func appendServiceName(b []byte, s *plan.Service, domain string) []byte {
	b = append(b, s.Name...)
	b = append(b, '.')
	b = append(b, s.Namespace...)
	b = append(b, ".svc."...)
	return append(b, domain...)
}

// serviceNames makes the names and data of the records of a Service with
// cluster IPs as substrings of one string: a plan keeps them, and one
// allocation a Service wastes less than one a string. The Service's name
// is the end of the data of its first SRV record.
type serviceNames struct {
	buf   []byte
	spans [][2]int
	// the result, valid until the next make
	svc       string
	ips, ptrs []string // of each cluster IP: its text and PTR name
	// of each port: the SRV data, and the _port._proto name ("" for an
	// unnamed port)
	srvNames, srvData []string
}

// make returns the names of s's records: the SRV data of every port and
// the srvName of the named ones, the cluster IPs' text and reverseName.
func (n *serviceNames) make(s *plan.Service, domain string) *serviceNames {
	b, spans := n.buf[:0], n.spans[:0]
	span := func(lo int) { spans = append(spans, [2]int{lo, len(b)}) }
	svcLo := -1
	for _, port := range s.Ports {
		lo := len(b)
		b = append(b, "0 100 "...)
		b = strconv.AppendUint(b, uint64(port.Port), 10)
		b = append(b, ' ')
		if svcLo < 0 {
			svcLo = len(b)
		}
		b = appendServiceName(b, s, domain)
		span(lo)
		if port.Name == "" {
			continue
		}
		lo = len(b)
		b = append(b, '_')
		b = append(b, port.Name...)
		b = append(b, "._"...)
		b = append(b, lowerProtocol(port.Protocol)...)
		b = append(b, '.')
		b = appendServiceName(b, s, domain)
		span(lo)
	}
	if svcLo < 0 {
		svcLo = len(b)
		b = appendServiceName(b, s, domain)
	}
	svcHi := svcLo + len(s.Name) + 1 + len(s.Namespace) + len(".svc.") + len(domain)
	for _, ip := range s.ClusterIPs {
		lo := len(b)
		b = ip.AppendTo(b)
		span(lo)
		lo = len(b)
		b = appendReverseName(b, ip)
		span(lo)
	}
	str := string(b)
	n.buf, n.spans = b, spans
	n.svc = str[svcLo:svcHi]
	n.ips, n.ptrs, n.srvNames, n.srvData = n.ips[:0], n.ptrs[:0], n.srvNames[:0], n.srvData[:0]
	k := 0
	for _, port := range s.Ports {
		n.srvData = append(n.srvData, str[spans[k][0]:spans[k][1]])
		k++
		name := ""
		if port.Name != "" {
			name = str[spans[k][0]:spans[k][1]]
			k++
		}
		n.srvNames = append(n.srvNames, name)
	}
	for range s.ClusterIPs {
		n.ips = append(n.ips, str[spans[k][0]:spans[k][1]])
		n.ptrs = append(n.ptrs, str[spans[k+1][0]:spans[k+1][1]])
		k += 2
	}
	return n
}

func addrType(ip netip.Addr) string {
	if ip.Is4() {
		return "A"
	}
	return "AAAA"
}

// dashed names an endpoint without a hostname: 10-244-1-30, or for IPv6
// the address with colons as dashes (fd00--1), as CoreDNS does.
func dashed(ip netip.Addr) string {
	return strings.NewReplacer(".", "-", ":", "-").Replace(ip.String())
}

// reverseName is the PTR owner name of an address.
func reverseName(ip netip.Addr) string { return string(appendReverseName(nil, ip)) }

// appendReverseName appends reverseName(ip) to b.
func appendReverseName(b []byte, ip netip.Addr) []byte {
	if ip.Is4() {
		a := ip.As4()
		for i := len(a) - 1; i >= 0; i-- {
			b = strconv.AppendUint(b, uint64(a[i]), 10)
			b = append(b, '.')
		}
		return append(b, "in-addr.arpa."...)
	}
	const hex = "0123456789abcdef"
	a := ip.As16()
	for i := len(a) - 1; i >= 0; i-- {
		b = append(b, hex[a[i]&0xf], '.', hex[a[i]>>4], '.')
	}
	return append(b, "ip6.arpa."...)
}

// reverseZone is the reverse zone that holds a CIDR: its prefix rounded
// down to an octet (IPv4) or nibble (IPv6) boundary.
func reverseZone(c netip.Prefix) string {
	step, suffix := 8, "in-addr.arpa."
	if c.Addr().Is6() {
		step, suffix = 4, "ip6.arpa."
	}
	labels := c.Bits() / step
	full := strings.TrimSuffix(reverseName(c.Addr()), suffix)
	parts := strings.Split(strings.TrimSuffix(full, "."), ".")
	keep := parts[len(parts)-labels:]
	if len(keep) == 0 {
		return suffix
	}
	return strings.Join(keep, ".") + "." + suffix
}

// zoneBuilder collects the records of one zone.
type zoneBuilder struct {
	name    string
	ns      string // the name server, in the SOA and the NS record
	ttl     uint32
	records []plan.Record
}

func (z *zoneBuilder) add(name, typ, data string) { z.addTTL(name, typ, data, z.ttl) }

func (z *zoneBuilder) addTTL(name, typ, data string, ttl uint32) {
	z.records = append(z.records, plan.Record{Name: strings.ToLower(name), Type: typ, TTL: ttl, Data: data})
}

// maxSOATTL caps the TTL of a zone's SOA record, as CoreDNS does
// (plugin.SOA: min(ttl, 300)) while its MINIMUM stays the Cluster's dnsTTL.
// Negative answers carry the SOA, and their caching time is the smaller of
// the two (RFC 2308 §3): a name looked up before its Service exists is
// cached as absent for at most 5 minutes, whatever the dnsTTL.
const maxSOATTL = 300

// zone sorts the records, drops repeats and puts the SOA (its TTL at most
// maxSOATTL) and NS at the apex. The SOA serial is a hash of the other
// records, so it changes whenever the zone's content does and never
// otherwise.
func (z *zoneBuilder) zone() plan.Zone {
	slices.SortFunc(z.records, compareRecords)
	z.records = slices.Compact(z.records)
	h := sha256.New()
	for _, r := range z.records {
		fmt.Fprintf(h, "%s %d %s %s\n", r.Name, r.TTL, r.Type, r.Data)
	}
	serial := binary.BigEndian.Uint32(h.Sum(nil)) | 1 // never 0
	ns := z.ns
	apex := []plan.Record{
		{Name: z.name, Type: "SOA", TTL: min(z.ttl, maxSOATTL), Data: fmt.Sprintf("%s hostmaster.%s %d 7200 1800 86400 %d", ns, z.name, serial, z.ttl)},
		{Name: z.name, Type: "NS", TTL: z.ttl, Data: ns},
	}
	return plan.Zone{Name: z.name, Records: append(apex, z.records...)}
}

var typeOrder = map[string]int{"SOA": 0, "NS": 1, "A": 2, "AAAA": 3, "CNAME": 4, "SRV": 5, "PTR": 6, "TXT": 7}

func compareRecords(a, b plan.Record) int {
	if c := strings.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	if c := typeOrder[a.Type] - typeOrder[b.Type]; c != 0 {
		return c
	}
	return strings.Compare(a.Data, b.Data)
}
