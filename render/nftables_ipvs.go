package render

import (
	"slices"
	"strings"

	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/render/nftmodel"
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
	return NFTablesIPVSModel(p).AppendText(make([]byte, 0, 8192))
}

// NFTablesIPVSModel builds the model of the nftables tables of the IPVS
// data plane, which NFTablesIPVS prints.
func NFTablesIPVSModel(p *plan.Plan) *nftmodel.Ruleset {
	if p == nil {
		p = &plan.Plan{}
	}
	rs := &nftmodel.Ruleset{Comment: rulesetComment("nftables tables of node " + p.Node.Name + " for the IPVS data plane (ipvs.txt holds the virtual servers), rendered by netspec: do not edit.")}
	for _, fam := range nftFamilies {
		rs.Tables = append(rs.Tables, newNFTTable(p, fam, true).ipvsModel())
	}
	return rs
}

// ipvsModel builds the table of the IPVS data plane (NFTablesIPVS).
func (t *nftTable) ipvsModel() *nftmodel.Table {
	var cluster, external, nodePorts []nftmodel.Element
	var firewalls []*nftPort
	for _, sp := range t.ports {
		v := t.viewPort(&t.view, sp)
		proto := sp.proto
		for _, a := range v.clusterIPs {
			cluster = append(cluster, nftmodel.Element{Key: nftmodel.Key{Addr: a, Proto: proto, Port: sp.port.Port}})
		}
		if !sp.svc.ExternalLocal {
			for _, a := range slices.Concat(v.externalIPs, v.lbIPs) {
				external = append(external, nftmodel.Element{Key: nftmodel.Key{Addr: a, Proto: proto, Port: sp.port.Port}})
			}
			if sp.port.NodePort != 0 {
				nodePorts = append(nodePorts, nftmodel.Element{Key: nftmodel.Key{Proto: proto, Port: sp.port.NodePort}})
			}
		}
		if v.firewallChain != "" {
			firewalls = append(firewalls, sp)
		}
	}
	check := []nftmodel.Rule{newConnJump("service-endpoints-check"), newConnJump("cluster-ips-check")}
	mt := t.newModelTable(" (IPVS virtual servers)", []baseChain{
		{"mark-prerouting", hookMarkPrerouting, []nftmodel.Rule{jumpRule("ipvs-mark")}},
		{"mark-output", hookMarkOutput, []nftmodel.Rule{jumpRule("ipvs-mark")}},
		{"filter-prerouting-pre-dnat", hookPreroutingPreDNAT, append([]nftmodel.Rule{newConnJump("firewall-check")}, check...)},
		{"filter-output-pre-dnat", hookOutputPreDNAT, append([]nftmodel.Rule{newConnJump("firewall-check")}, check...)},
	})

	frontends := func(set string) nftmodel.Stmt {
		return nftmodel.Lookup{Key: nftmodel.KeyDAddrProtoPort, Set: set}
	}
	vmap := func(m string) nftmodel.Rule {
		return nftmodel.Rule{nftmodel.VMap{Key: nftmodel.KeyDAddrProtoPort, Map: m}}
	}
	mt.AddChain("What IPVS cannot do.", &nftmodel.Chain{Name: "ipvs-mark",
		Comment: "ipvs-mark: marks for masquerade traffic to a cluster IP from outside the pods, and external traffic under policy Cluster",
		Rules: []nftmodel.Rule{
			append(nftmodel.Rule{frontends("cluster-frontends")}, t.masquerade()...),
			{frontends("external-frontends"), markMasqueradeStmt},
			append(t.nodePortMatch(), nftmodel.Lookup{Key: nftmodel.KeyProtoPort, Set: "external-nodeports"}, markMasqueradeStmt),
		}})
	mt.AddChain("", &nftmodel.Chain{Name: "masquerading",
		Comment: "masquerading: masquerade hairpin traffic (an endpoint reaching itself through a service) and marked packets, clearing the mark",
		Rules:   masqueradingRules(nil)})
	mt.AddChain("", &nftmodel.Chain{Name: "service-endpoints-check",
		Comment: "service-endpoints-check: new connections to frontends without endpoints (before routing: reject in prerouting needs Linux 5.9)",
		Rules:   []nftmodel.Rule{vmap("no-endpoint-services"), append(t.nodePortMatch(), nftmodel.VMap{Key: nftmodel.KeyProtoPort, Map: "no-endpoint-nodeports"})}})
	mt.AddChain("", &nftmodel.Chain{Name: "cluster-ips-check",
		Comment: "cluster-ips-check: new connections to the service CIDRs but not to a cluster IP's port: to a cluster IP (a port it does not serve) rejected, to another address (no Service holds it) dropped",
		Rules:   t.clusterIPsCheck(nftmodel.Rule{frontends("cluster-frontends"), nftmodel.Verdict{Kind: nftmodel.Return}})})
	mt.AddChain("", &nftmodel.Chain{Name: "reject-chain",
		Comment: "reject-chain: a service without endpoints refuses the connection",
		Rules:   []nftmodel.Rule{rejectRule}})
	mt.AddChain("", &nftmodel.Chain{Name: "firewall-check",
		Comment: "firewall-check: loadBalancerSourceRanges",
		Rules:   []nftmodel.Rule{vmap("firewall-ips")}})

	mt.AddSet("Maps and sets.", keySet("cluster-frontends", "cluster IPs with port", keyAddrProtoPort, cluster))
	mt.AddSet("", mapSet(&nftmodel.Set{Name: "cluster-ips", Comment: "cluster-ips: every cluster IP", Key: keyAddr}, t.clusterIPs))
	mt.AddSet("", keySet("external-frontends", "external and LoadBalancer IPs with port, under policy Cluster", keyAddrProtoPort, external))
	mt.AddSet("", keySet("external-nodeports", "node ports under policy Cluster", keyProtoPort, nodePorts))
	mt.AddSet("", mapSet(&nftmodel.Set{Name: "no-endpoint-services", Comment: "no-endpoint-services: frontends without endpoints: reject, or drop under policy Local", Key: keyAddrProtoPort, Verdicts: true}, t.noEpSvc))
	mt.AddSet("", mapSet(&nftmodel.Set{Name: "no-endpoint-nodeports", Comment: "no-endpoint-nodeports: node ports without endpoints: reject, or drop under policy Local", Key: keyProtoPort, Verdicts: true}, t.noEpNode))
	mt.AddSet("", mapSet(&nftmodel.Set{Name: "firewall-ips", Comment: "firewall-ips: LoadBalancer IPs with loadBalancerSourceRanges to firewall chains", Key: keyAddrProtoPort, Verdicts: true}, t.firewall))
	mt.AddSet("", t.hairpinSet("hairpin: every endpoint address, twice: source and destination of a packet IPVS sent back to its sender"))
	if s := t.podCIDRsSet(); s != nil {
		mt.AddSet("", s)
	}
	mt.AddSet("", t.nodePortIPsSet())
	for i, sp := range firewalls {
		v := t.viewPort(&t.view, sp)
		t.describe(v)
		mt.AddChain("", t.firewallChain(v))
		if i == 0 {
			mt.Items[len(mt.Items)-1].Heading = "loadBalancerSourceRanges."
		}
	}
	return mt
}

// keySet is a set of the keys of elems, in the order of their text,
// without repeats.
func keySet(name, comment string, key []nftmodel.KeyPart, elems []nftmodel.Element) *nftmodel.Set {
	s := &nftmodel.Set{Name: name, Comment: name + ": " + comment, Key: key, Elements: elems}
	text := make(map[nftmodel.Key]string, len(elems))
	for i, e := range elems {
		text[e.Key] = s.ElementText(i)
	}
	slices.SortFunc(s.Elements, func(a, b nftmodel.Element) int { return strings.Compare(text[a.Key], text[b.Key]) })
	s.Elements = slices.CompactFunc(s.Elements, func(a, b nftmodel.Element) bool { return a.Key == b.Key })
	return s
}
