package render

import (
	"net/netip"
	"slices"
	"strconv"

	"netspec.dev/netspec/plan"
)

// NFTablesIPVS renders the nftables tables of a node whose Services are
// IPVS virtual servers (IPVS): what IPVS cannot do itself. It replaces the
// tables `ip netspec` and `ip6 netspec` as NFTables does, with no DNAT:
//
//   - ipvs-mark (prerouting and output, before IPVS sees the packet) marks
//     for masquerade the traffic to a cluster IP from outside the pod
//     CIDRs, and external traffic (external and LoadBalancer IPs, node
//     ports) under policy Cluster;
//   - masquerading (postrouting) masquerades marked packets and hairpin
//     traffic (an endpoint reaching itself through its Service);
//   - firewall-check (prerouting, before IPVS) drops what
//     loadBalancerSourceRanges do not allow;
//   - service-endpoints-check (prerouting and output, before IPVS and
//     before routing) rejects new connections to frontends without
//     endpoints, or drops them under policy Local;
//   - cluster-ips-check (prerouting and output, after it) rejects new
//     connections to a cluster IP on a port it does not serve (the
//     address is on netspec-ipvs0, so the node's own sockets would
//     otherwise answer) and drops those to an address of the service
//     CIDRs that no Service holds (which would otherwise be routed out).
//
// Node ports are matched on the set nodeport-ips, as in NFTables; the
// IPVS applier creates their virtual servers on the same addresses.
//
// IPVS masquerades through conntrack only when the namespace's sysctl
// net.ipv4.vs.conntrack is 1, which the IPVS applier sets.
func NFTablesIPVS(p *plan.Plan) []byte {
	if p == nil {
		p = &plan.Plan{}
	}
	b := make([]byte, 0, 8192)
	b = append(b, "# nftables tables of node "...)
	b = appendCommentText(b, p.Node.Name)
	b = append(b, " for the IPVS data plane (ipvs.txt holds the virtual servers), rendered by netspec: do not edit.\n"...)
	b = append(b, "# `nft -f` replaces the tables ip netspec and ip6 netspec in one transaction\n"...)
	b = append(b, "# and touches no other table.\n"...)
	for _, fam := range nftFamilies {
		t := newNFTTable(p, fam)
		b = append(b, '\n')
		b = t.appendIPVSTo(b)
	}
	return b
}

// appendIPVSTo appends the table of the IPVS data plane (NFTablesIPVS).
func (t *nftTable) appendIPVSTo(b []byte) []byte {
	fam := t.fam
	var cluster, external, nodePorts []string
	var clusterAddrs []netip.Addr
	var firewalls []*nftPort
	for _, sp := range t.ports {
		v := t.viewPort(sp)
		key := func(a netip.Addr, port uint16) string {
			return a.String() + " . " + v.proto + " . " + strconv.Itoa(int(port))
		}
		for _, a := range v.clusterIPs {
			cluster = append(cluster, key(a, sp.port.Port))
			clusterAddrs = append(clusterAddrs, a)
		}
		if !sp.svc.ExternalLocal {
			for _, a := range slices.Concat(v.externalIPs, v.lbIPs) {
				external = append(external, key(a, sp.port.Port))
			}
			if sp.port.NodePort != 0 {
				nodePorts = append(nodePorts, v.proto+" . "+strconv.Itoa(int(sp.port.NodePort)))
			}
		}
		if v.firewallChain != "" {
			firewalls = append(firewalls, sp)
		}
	}
	for _, s := range []*[]string{&cluster, &external, &nodePorts} {
		slices.Sort(*s)
		*s = slices.Compact(*s)
	}
	slices.SortFunc(clusterAddrs, netip.Addr.Compare)
	clusterIPs := make([]string, 0, len(clusterAddrs))
	for _, a := range slices.Compact(clusterAddrs) {
		clusterIPs = append(clusterIPs, a.String())
	}

	check := []string{"ct state new jump service-endpoints-check", "ct state new jump cluster-ips-check"}
	b = t.appendTableHead(b, " (IPVS virtual servers)", []baseChain{
		{"mark-prerouting", "type filter hook prerouting priority dstnat", []string{"jump ipvs-mark"}},
		{"mark-output", "type filter hook output priority -100", []string{"jump ipvs-mark"}},
		{"filter-prerouting-pre-dnat", hookPreroutingPreDNAT, append([]string{"ct state new jump firewall-check"}, check...)},
		{"filter-output-pre-dnat", hookOutputPreDNAT, check},
	})

	b = append(b, "\n\t# What IPVS cannot do.\n"...)
	addrKey := fam.table + " daddr . meta l4proto . th dport"
	nodePortMatch := t.nodePortMatch + " meta l4proto . th dport"
	b = appendChain(b, "ipvs-mark", "ipvs-mark: marks for masquerade traffic to a cluster IP from outside the pods, and external traffic under policy Cluster",
		addrKey+" @cluster-frontends "+t.masquerade,
		addrKey+" @external-frontends "+markMasquerade,
		nodePortMatch+" @external-nodeports "+markMasquerade)
	b = appendChain(b, "masquerading", "masquerading: masquerade hairpin traffic (an endpoint reaching itself through a service) and marked packets, clearing the mark",
		fam.table+" saddr . "+fam.table+" daddr @hairpin masquerade fully-random",
		"meta mark & "+masqueradeMark+" == 0 return", "meta mark set meta mark ^ "+masqueradeMark, "masquerade fully-random")
	b = appendChain(b, "service-endpoints-check", "service-endpoints-check: new connections to frontends without endpoints (before routing: reject in prerouting needs Linux 5.9)",
		addrKey+" vmap @no-endpoint-services", nodePortMatch+" vmap @no-endpoint-nodeports")
	b = appendChain(b, "cluster-ips-check", "cluster-ips-check: new connections to the service CIDRs but not to a cluster IP's port: to a cluster IP (a port it does not serve) rejected, to another address (no Service holds it) dropped",
		t.clusterIPsCheck(addrKey+" @cluster-frontends return")...)
	b = appendChain(b, "reject-chain", "reject-chain: a service without endpoints refuses the connection",
		"reject")
	b = appendChain(b, "firewall-check", "firewall-check: loadBalancerSourceRanges",
		addrKey+" vmap @firewall-ips")

	b = append(b, "\n\t# Maps and sets.\n"...)
	addrType := fam.addrType + " . inet_proto . inet_service"
	b = appendKeySet(b, "cluster-frontends", "cluster IPs with port", addrType, cluster)
	b = appendKeySet(b, "cluster-ips", "every cluster IP", fam.addrType, clusterIPs)
	b = appendKeySet(b, "external-frontends", "external and LoadBalancer IPs with port, under policy Cluster", addrType, external)
	b = appendKeySet(b, "external-nodeports", "node ports under policy Cluster", "inet_proto . inet_service", nodePorts)
	b = appendMap(b, "no-endpoint-services", "frontends without endpoints: reject, or drop under policy Local", addrType+" : verdict", t.noEpSvc)
	b = appendMap(b, "no-endpoint-nodeports", "node ports without endpoints: reject, or drop under policy Local", "inet_proto . inet_service : verdict", t.noEpNode)
	b = appendMap(b, "firewall-ips", "LoadBalancer IPs with loadBalancerSourceRanges to firewall chains", addrType+" : verdict", t.firewall)
	hairpin := make([]string, len(t.hairpin))
	for i, a := range t.hairpin {
		hairpin[i] = a.String() + " . " + a.String()
	}
	b = appendKeySet(b, "hairpin", "every endpoint address, twice: source and destination of a packet IPVS sent back to its sender", fam.addrType+" . "+fam.addrType, hairpin)
	b = t.appendPodCIDRs(b)
	b = t.appendNodePortIPs(b)
	if len(firewalls) > 0 {
		b = append(b, "\n\t# loadBalancerSourceRanges.\n"...)
		for _, sp := range firewalls {
			v := t.viewPort(sp)
			t.describe(v)
			b = t.appendFirewallChain(b, v)
		}
	}
	return append(b, "}\n"...)
}

// appendKeySet appends a set of keys, one a line.
func appendKeySet(b []byte, name, comment, typ string, keys []string) []byte {
	b = appendLine(b, "\t# ", name, ": ", comment)
	b = appendLine(b, "\tset ", name, " {")
	b = appendRule(b, "type ", typ)
	if len(keys) > 0 {
		b = append(b, "\t\telements = {\n"...)
		for _, k := range keys {
			b = appendLine(b, "\t\t\t", k, ",")
		}
		b = append(b, "\t\t}\n"...)
	}
	return append(b, "\t}\n"...)
}
