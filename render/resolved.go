package render

import (
	"bytes"
	"net/netip"
	"strings"

	"netspec.dev/netspec/plan"
)

// DNSLink is the name of the dummy link that holds netspec's DNS address
// in the systemd-resolved recipes (watch --dns-link's conventional value).
const DNSLink = "netspec0"

// Resolved renders the systemd-resolved recipes that send the queries of
// the zones a plan serves (the cluster domain and its reverse zones) to
// netspec's DNS address, the Cluster's dnsAddress, on the dummy link
// DNSLink, and leave every other query to the host's resolvers:
//
//	resolved/netspec0.netdev    systemd-networkd: the dummy link
//	resolved/netspec0.network   systemd-networkd: its address, and the link's
//	                            DNS server and routing domains (~ZONE each),
//	                            not a default route
//	resolved/resolvectl.sh      the same DNS settings made with resolvectl,
//	                            for a link netspec (watch --dns-link) made
//
// It returns nil when the plan has no DNS address. The files are for the
// host's configuration (deploy/README.md says where they go), not the
// state dir.
func Resolved(p *plan.Plan) map[string][]byte {
	addr := p.Cluster.DNSAddress
	if !addr.IsValid() {
		return nil
	}
	addr = addr.Unmap()
	var routes []string
	for _, z := range p.DNS.Zones {
		routes = append(routes, "~"+strings.TrimSuffix(z.Name, "."))
	}
	if len(routes) == 0 { // no zones yet: the cluster domain still goes to netspec
		routes = append(routes, "~"+p.Cluster.Domain)
	}

	var netdev bytes.Buffer
	netdev.WriteString("# The dummy link of netspec's DNS address — written by netspec render.\n")
	netdev.WriteString("# Install with " + DNSLink + ".network in /etc/systemd/network/; then: networkctl reload\n")
	netdev.WriteString("[NetDev]\nName=" + DNSLink + "\nKind=dummy\n")

	var network bytes.Buffer
	network.WriteString("# netspec's DNS address on " + DNSLink + ", and systemd-resolved sending the zones\n")
	network.WriteString("# netspec serves (and only those) to it — written by netspec render.\n")
	network.WriteString("# Install with " + DNSLink + ".netdev in /etc/systemd/network/; then: networkctl reload\n")
	network.WriteString("[Match]\nName=" + DNSLink + "\n\n")
	network.WriteString("[Network]\n")
	network.WriteString("Address=" + netip.PrefixFrom(addr, addr.BitLen()).String() + "\n")
	network.WriteString("DNS=" + addr.String() + "\n")
	network.WriteString("Domains=" + strings.Join(routes, " ") + "\n")
	network.WriteString("DNSDefaultRoute=no\n")
	network.WriteString("LinkLocalAddressing=no\n")
	network.WriteString("IPv6AcceptRA=no\n")

	var sh bytes.Buffer
	sh.WriteString("#!/bin/sh\n")
	sh.WriteString("# systemd-resolved: send the zones netspec serves (and only those) to its DNS\n")
	sh.WriteString("# address on the link " + DNSLink + " (netspec watch --dns-link " + DNSLink + " makes it)\n")
	sh.WriteString("# — written by netspec render. resolved forgets these settings when the link\n")
	sh.WriteString("# goes away: run it again after the link is made (deploy/README.md).\n")
	sh.WriteString("set -e\n")
	sh.WriteString("resolvectl dns " + DNSLink + " " + addr.String() + "\n")
	sh.WriteString("resolvectl domain " + DNSLink + " '" + strings.Join(routes, "' '") + "'\n")
	sh.WriteString("resolvectl default-route " + DNSLink + " false\n")

	return map[string][]byte{
		"resolved/" + DNSLink + ".netdev":  netdev.Bytes(),
		"resolved/" + DNSLink + ".network": network.Bytes(),
		"resolved/resolvectl.sh":           sh.Bytes(),
	}
}
