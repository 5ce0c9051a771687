package render

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"netspec.dev/netspec/plan"
)

// The shape of the ruleset follows kube-proxy's nftables mode (see
// DESIGN.md, "Data plane: nftables"), with one change: an endpoint is
// picked with a chain of `numgen random mod k == 0 goto` rules instead of a
// numgen vmap per service, because vmaps per service make the kernel's load
// time super-linear and rules keep it linear.
//
// Per table (one per family, holding only that family's addresses):
//
//	nat-prerouting, nat-output   jump services
//	nat-postrouting              jump masquerading
//	filter-prerouting-pre-dnat   ct state new jump firewall-check (before DNAT)
//	filter-input/forward/output  ct state new jump service-endpoints-check (after DNAT)
//	services                     daddr . l4proto . dport vmap @service-ips,
//	                             then node ports: vmap @service-nodeports
//	service-endpoints-check      vmaps @no-endpoint-services, @no-endpoint-nodeports
//	firewall-check               vmap @firewall-ips
//
// and per service port (HASH8 is derived from the readable rest of the name,
// so that a name is stable while its service port or endpoint is):
//
//	service-HASH8-ns/name/proto/port   internal traffic (cluster IPs): picks among Port.Cluster
//	external-HASH8-...                 node ports, external and LoadBalancer IPs
//	local-HASH8-...                    external traffic under policy Local: picks among Port.External
//	firewall-HASH8-...                 loadBalancerSourceRanges
//	endpoint-HASH8-...__ip/port        one per endpoint: hairpin masquerade, affinity, DNAT
//	set affinity-HASH8-...__ip/port    ClientIP affinity, one per endpoint

const (
	// masqueradeMark is the packet mark bit that asks nat-postrouting to
	// masquerade, as kube-proxy's default (--masquerade-bit 14).
	masqueradeMark = "0x4000"

	// nftNameMax is the longest chain or set name the kernel takes:
	// NFT_CHAIN_MAXNAMELEN and NFT_SET_MAXNAMELEN are 256 with the NUL.
	nftNameMax = 255

	rejectVerdict = "goto reject-chain"
	dropVerdict   = "drop"
)

// nftFamily is one of the two tables.
type nftFamily struct {
	table    string                // nft family keyword: "ip" or "ip6"
	addrType string                // set key type
	label    string                // for comments
	is       func(netip.Addr) bool // of a normalized address (normAddr)
	loopback string                // node ports are not served on loopback
}

var nftFamilies = []nftFamily{
	{table: "ip", addrType: "ipv4_addr", label: "IPv4", is: netip.Addr.Is4, loopback: "127.0.0.0/8"},
	{table: "ip6", addrType: "ipv6_addr", label: "IPv6", is: func(a netip.Addr) bool { return a.Is6() && !a.Is4In6() }, loopback: "::1"},
}

// NFTables renders the Plan as an nftables ruleset for `nft -f`. The file
// replaces the tables `ip netspec` and `ip6 netspec` in one transaction
// (each is added, deleted and declared anew, so the load works whether the
// table exists or not) and touches no other table. Both tables are always
// written, with their base chains, even when no service uses a family, so
// that loading the file always converges. The output is byte-identical for
// equal Plans: everything is sorted and no name depends on an index.
func NFTables(p *plan.Plan) []byte {
	if p == nil {
		p = &plan.Plan{}
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# nftables ruleset of node %s, rendered by netspec: do not edit.\n", commentText(p.Node.Name))
	b.WriteString("# `nft -f` replaces the tables ip netspec and ip6 netspec in one transaction\n")
	b.WriteString("# and touches no other table.\n")
	for _, fam := range nftFamilies {
		b.WriteByte('\n')
		newNFTTable(p, fam).write(&b)
	}
	return b.Bytes()
}

// nftElement is one map element.
type nftElement struct {
	addr    netip.Addr // invalid for node-port maps
	proto   string
	port    uint16
	verdict string
	comment string
}

func (e nftElement) key() string {
	if !e.addr.IsValid() {
		return fmt.Sprintf("%s . %d", e.proto, e.port)
	}
	return fmt.Sprintf("%s . %s . %d", e.addr, e.proto, e.port)
}

func compareElements(a, b nftElement) int {
	return cmp.Or(a.addr.Compare(b.addr), cmp.Compare(a.proto, b.proto), cmp.Compare(a.port, b.port),
		cmp.Compare(a.verdict, b.verdict), cmp.Compare(a.comment, b.comment))
}

// nftChain is a regular chain with the comment line written above it.
type nftChain struct {
	comment string
	name    string
	rules   []string
}

// nftSet is a ClientIP affinity set.
type nftSet struct {
	comment string
	name    string
	timeout int32
}

// nftGroup holds the chains and sets of one service port, written together.
type nftGroup struct {
	title  string
	sets   []nftSet
	chains []nftChain
}

type nftTable struct {
	fam      nftFamily
	ports    int
	podCIDRs []netip.Prefix
	services []nftElement
	nodePort []nftElement
	noEpSvc  []nftElement
	noEpNode []nftElement
	firewall []nftElement
	groups   []nftGroup
}

// nftEndpoint is an endpoint of a service port with its names.
type nftEndpoint struct {
	ep       plan.Endpoint
	chain    string
	affinity string
}

// nftPort is one service port as seen from one family's table.
type nftPort struct {
	svc      *plan.Service
	port     *plan.Port
	fam      nftFamily
	portID   string // port name, or number when unnamed
	proto    string // lower case
	desc     string // "shop/web port http 80/TCP", for comments
	base     string // "shop/web/tcp/http", the readable part of names
	hash     string
	cluster  []nftEndpoint // internal traffic (Port.Cluster of this family)
	external []nftEndpoint // external traffic (Port.External of this family)
	all      []nftEndpoint // union: one endpoint chain each
	usable   bool          // some endpoint of this family serves, on any node
}

func (sp *nftPort) chainName(prefix string) string {
	return nftName(prefix, sp.hash, sp.base)
}

func newNFTTable(p *plan.Plan, fam nftFamily) *nftTable {
	t := &nftTable{fam: fam}
	var ports []*nftPort
	for i := range p.Services {
		svc := &p.Services[i]
		if svc.Type == "ExternalName" || svc.Headless || len(familyAddrs(svc.ClusterIPs, fam)) == 0 {
			continue
		}
		for j := range svc.Ports {
			ports = append(ports, newNFTPort(svc, &svc.Ports[j], fam))
		}
	}
	slices.SortFunc(ports, func(a, b *nftPort) int {
		return cmp.Or(cmp.Compare(a.svc.Namespace, b.svc.Namespace), cmp.Compare(a.svc.Name, b.svc.Name),
			cmp.Compare(a.portID, b.portID), cmp.Compare(a.proto, b.proto), cmp.Compare(a.port.Port, b.port.Port))
	})
	t.ports = len(ports)
	podCIDRs := familyPrefixes(p.Cluster.PodCIDRs, fam)
	t.podCIDRs = podCIDRs
	var nodeIPs []netip.Addr
	for _, ip := range p.Node.IPs {
		if ip = normAddr(ip); fam.is(ip) {
			nodeIPs = append(nodeIPs, ip)
		}
	}
	for _, sp := range ports {
		t.addPort(sp, podCIDRs, nodeIPs)
	}
	for _, m := range []*[]nftElement{&t.services, &t.nodePort, &t.noEpSvc, &t.noEpNode, &t.firewall} {
		slices.SortFunc(*m, compareElements)
	}
	return t
}

func newNFTPort(svc *plan.Service, port *plan.Port, fam nftFamily) *nftPort {
	sp := &nftPort{svc: svc, port: port, fam: fam, portID: port.Name, proto: strings.ToLower(port.Protocol)}
	num := strconv.Itoa(int(port.Port))
	if sp.portID == "" {
		sp.portID = num
		sp.desc = fmt.Sprintf("%s port %s/%s", svc.Key(), num, port.Protocol)
	} else {
		sp.desc = fmt.Sprintf("%s port %s %s/%s", svc.Key(), port.Name, num, port.Protocol)
	}
	sp.base = svc.Namespace + "/" + svc.Name + "/" + sp.proto + "/" + sp.portID
	sp.hash = nftHash(sp.base)

	endpoints := func(idx []int) []nftEndpoint {
		var eps []nftEndpoint
		for _, i := range idx {
			if i < 0 || i >= len(port.Endpoints) || !fam.is(normAddr(port.Endpoints[i].IP)) {
				continue
			}
			ep := port.Endpoints[i]
			ep.IP = normAddr(ep.IP)
			readable := sp.base + "__" + ep.IP.String() + "/" + strconv.Itoa(int(ep.Port))
			h := nftHash(readable)
			eps = append(eps, nftEndpoint{ep: ep, chain: nftName("endpoint-", h, readable), affinity: nftName("affinity-", h, readable)})
		}
		return sortEndpoints(eps)
	}
	sp.cluster = endpoints(port.Cluster)
	sp.external = endpoints(port.External)
	sp.all = sortEndpoints(append(slices.Clone(sp.cluster), sp.external...))
	sp.usable = len(sp.all) > 0
	for _, ep := range port.Endpoints {
		if fam.is(normAddr(ep.IP)) && (ep.Ready || ep.Serving) {
			sp.usable = true
		}
	}
	return sp
}

// sortEndpoints sorts by address and port and drops repeats.
func sortEndpoints(eps []nftEndpoint) []nftEndpoint {
	slices.SortFunc(eps, func(a, b nftEndpoint) int { return a.ep.AddrPort().Compare(b.ep.AddrPort()) })
	return slices.CompactFunc(eps, func(a, b nftEndpoint) bool { return a.ep.AddrPort() == b.ep.AddrPort() })
}

func (t *nftTable) addPort(sp *nftPort, podCIDRs []netip.Prefix, nodeIPs []netip.Addr) {
	fam, svc, port := t.fam, sp.svc, sp.port
	ip := fam.table
	g := nftGroup{title: sp.desc}
	serviceChain := sp.chainName("service-")
	externalChain := sp.chainName("external-")
	localChain := sp.chainName("local-")
	firewallChain := sp.chainName("firewall-")
	affinity := svc.AffinitySeconds > 0
	label := svc.Key() + ":" + sp.portID

	// Internal traffic: the cluster IPs.
	clusterIPs := familyAddrs(svc.ClusterIPs, fam)
	hasCluster := len(sp.cluster) > 0
	for _, a := range clusterIPs {
		e := nftElement{addr: a, proto: sp.proto, port: port.Port}
		switch {
		case hasCluster:
			e.verdict = "goto " + serviceChain
			t.services = append(t.services, e)
		case svc.InternalLocal && sp.usable:
			e.verdict, e.comment = dropVerdict, label
			t.noEpSvc = append(t.noEpSvc, e)
		default:
			e.verdict, e.comment = rejectVerdict, label
			t.noEpSvc = append(t.noEpSvc, e)
		}
	}
	if hasCluster {
		c := nftChain{name: serviceChain, comment: fmt.Sprintf("service %s: traffic to the cluster IP, picks %s",
			sp.desc, countEndpoints(len(sp.cluster), ""))}
		masq := "jump mark-for-masquerade"
		if len(podCIDRs) > 0 {
			masq = fmt.Sprintf("%s saddr != %s %s", ip, podMatch(podCIDRs), masq)
		}
		for _, a := range clusterIPs {
			c.rules = append(c.rules, fmt.Sprintf("%s daddr %s %s dport %d %s", ip, a, sp.proto, port.Port, masq))
		}
		c.rules = append(c.rules, pickRules(fam, sp.cluster, affinity)...)
		g.chains = append(g.chains, c)
	}

	// External traffic: external IPs, LoadBalancer IPs and the node port.
	externalIPs := familyAddrs(svc.ExternalIPs, fam)
	lbIPs := familyAddrs(svc.LoadBalancerIPs, fam)
	hasExternal := len(sp.external) > 0
	// Under policy Local, traffic from pods and from the node itself is
	// short-circuited to the service chain, so the external chain is
	// useful even with no local endpoint.
	shortCircuit := svc.ExternalLocal && hasCluster
	reachable := hasExternal || shortCircuit
	var frontends []nftElement
	for _, a := range externalIPs {
		frontends = append(frontends, nftElement{addr: a, proto: sp.proto, port: port.Port})
	}
	for _, a := range lbIPs {
		frontends = append(frontends, nftElement{addr: a, proto: sp.proto, port: port.Port})
	}
	if port.NodePort != 0 {
		frontends = append(frontends, nftElement{proto: sp.proto, port: port.NodePort})
	}
	noEndpoint := rejectVerdict
	if svc.ExternalLocal && sp.usable {
		noEndpoint = dropVerdict
	}
	for _, e := range frontends {
		if reachable {
			e.verdict = "goto " + externalChain
			if e.addr.IsValid() {
				t.services = append(t.services, e)
			} else {
				t.nodePort = append(t.nodePort, e)
			}
		}
		if !hasExternal {
			e.verdict, e.comment = noEndpoint, label
			if e.addr.IsValid() {
				t.noEpSvc = append(t.noEpSvc, e)
			} else {
				t.noEpNode = append(t.noEpNode, e)
			}
		}
	}
	if len(frontends) > 0 && reachable {
		what := externalFrontends(len(externalIPs), len(lbIPs), port.NodePort)
		c := nftChain{name: externalChain}
		switch {
		case svc.ExternalLocal:
			var steps []string
			if shortCircuit {
				if len(podCIDRs) > 0 {
					c.rules = append(c.rules, fmt.Sprintf("%s saddr %s goto %s", ip, podMatch(podCIDRs), serviceChain))
					steps = append(steps, "pods and the node (masqueraded) go to the service chain")
				} else {
					steps = append(steps, "the node (masqueraded) goes to the service chain")
				}
				c.rules = append(c.rules,
					"fib saddr type local jump mark-for-masquerade",
					"fib saddr type local goto "+serviceChain)
			}
			if hasExternal {
				c.rules = append(c.rules, "goto "+localChain)
				steps = append(steps, "the rest to the local chain")
			} else {
				steps = append(steps, "the rest is dropped (no local endpoint)")
			}
			c.comment = fmt.Sprintf("external %s: traffic to %s, policy Local: %s", sp.desc, what, strings.Join(steps, ", "))
		case slices.EqualFunc(sp.external, sp.cluster, func(a, b nftEndpoint) bool { return a.chain == b.chain }):
			c.rules = append(c.rules, "jump mark-for-masquerade", "goto "+serviceChain)
			c.comment = fmt.Sprintf("external %s: traffic to %s, policy Cluster: masquerade, then as the service chain", sp.desc, what)
		default:
			c.rules = append(c.rules, "jump mark-for-masquerade")
			c.rules = append(c.rules, pickRules(fam, sp.external, affinity)...)
			c.comment = fmt.Sprintf("external %s: traffic to %s, policy Cluster: masquerade, then picks %s",
				sp.desc, what, countEndpoints(len(sp.external), ""))
		}
		g.chains = append(g.chains, c)
		if svc.ExternalLocal && hasExternal {
			c := nftChain{name: localChain, comment: fmt.Sprintf("local %s: external traffic under policy Local, picks %s",
				sp.desc, countEndpoints(len(sp.external), "local "))}
			c.rules = pickRules(fam, sp.external, affinity)
			g.chains = append(g.chains, c)
		}
	}

	// loadBalancerSourceRanges: checked before DNAT, whatever the endpoints.
	if len(lbIPs) > 0 && len(svc.SourceRanges) > 0 {
		ranges := familyPrefixes(svc.SourceRanges, fam)
		c := nftChain{name: firewallChain}
		if len(ranges) == 0 {
			// Ranges were given for the other family only: none of this
			// family is allowed (fail closed).
			c.rules = []string{dropVerdict}
			c.comment = fmt.Sprintf("firewall %s: loadBalancerSourceRanges hold no %s range, so no %s client may reach the LoadBalancer IPs",
				sp.desc, fam.label, fam.label)
		} else {
			allowed := slices.Clone(ranges)
			// A node in the ranges may reach the LB IPs through a local
			// route that loops back with the LB IP as source (kube-proxy).
			if slices.ContainsFunc(nodeIPs, func(a netip.Addr) bool {
				return slices.ContainsFunc(ranges, func(r netip.Prefix) bool { return r.Contains(a) })
			}) {
				for _, a := range lbIPs {
					allowed = append(allowed, netip.PrefixFrom(a, a.BitLen()))
				}
			}
			c.rules = []string{fmt.Sprintf("%s saddr != %s drop", ip, prefixSet(allowed, true))}
			c.comment = fmt.Sprintf("firewall %s: only loadBalancerSourceRanges may reach the LoadBalancer IPs", sp.desc)
		}
		g.chains = append(g.chains, c)
		for _, a := range lbIPs {
			t.firewall = append(t.firewall, nftElement{addr: a, proto: sp.proto, port: port.Port, verdict: "goto " + firewallChain})
		}
	}

	// One chain (and affinity set) per endpoint.
	for _, ep := range sp.all {
		if affinity {
			g.sets = append(g.sets, nftSet{name: ep.affinity, timeout: svc.AffinitySeconds,
				comment: fmt.Sprintf("affinity %s: clients sent to %s in the last %ds", sp.desc, ep.ep.AddrPort(), svc.AffinitySeconds)})
		}
		c := nftChain{name: ep.chain, comment: fmt.Sprintf("endpoint %s of %s%s", ep.ep.AddrPort(), sp.desc, endpointOrigin(ep.ep))}
		c.rules = append(c.rules, fmt.Sprintf("%s saddr %s jump mark-for-masquerade", ip, ep.ep.IP))
		if affinity {
			c.rules = append(c.rules, fmt.Sprintf("update @%s { %s saddr }", ep.affinity, ip))
		}
		c.rules = append(c.rules, fmt.Sprintf("meta l4proto %s dnat to %s", sp.proto, ep.ep.AddrPort()))
		g.chains = append(g.chains, c)
	}
	if len(g.chains) > 0 {
		t.groups = append(t.groups, g)
	}
}

// pickRules sends a packet to one of eps: first to the endpoint its client
// stuck to (affinity), else at random. Rule i is taken with probability
// 1/(k-i) of what reaches it, so each endpoint gets 1/k.
func pickRules(fam nftFamily, eps []nftEndpoint, affinity bool) []string {
	var rules []string
	if affinity {
		for _, ep := range eps {
			rules = append(rules, fmt.Sprintf("%s saddr @%s goto %s", fam.table, ep.affinity, ep.chain))
		}
	}
	for i, ep := range eps {
		if left := len(eps) - i; left > 1 {
			rules = append(rules, fmt.Sprintf("numgen random mod %d == 0 goto %s", left, ep.chain))
		} else {
			rules = append(rules, "goto "+ep.chain)
		}
	}
	return rules
}

func (t *nftTable) write(b *bytes.Buffer) {
	fam := t.fam
	fmt.Fprintf(b, "table %s netspec {}\n", fam.table)
	fmt.Fprintf(b, "delete table %s netspec\n", fam.table)
	fmt.Fprintf(b, "table %s netspec {\n", fam.table)
	fmt.Fprintf(b, "\t# %s: %s.\n", fam.label, plural(t.ports, "service port"))

	b.WriteString("\n\t# Base chains.\n")
	base := []struct{ name, hook, rule string }{
		{"nat-prerouting", "type nat hook prerouting priority dstnat", "jump services"},
		{"nat-output", "type nat hook output priority -100", "jump services"},
		{"nat-postrouting", "type nat hook postrouting priority srcnat", "jump masquerading"},
		{"filter-prerouting-pre-dnat", "type filter hook prerouting priority dstnat - 10", "ct state new jump firewall-check"},
		{"filter-input", "type filter hook input priority filter", "ct state new jump service-endpoints-check"},
		{"filter-forward", "type filter hook forward priority filter", "ct state new jump service-endpoints-check"},
		{"filter-output", "type filter hook output priority filter", "ct state new jump service-endpoints-check"},
	}
	for _, c := range base {
		fmt.Fprintf(b, "\tchain %s {\n\t\t%s; policy accept;\n\t\t%s\n\t}\n", c.name, c.hook, c.rule)
	}

	b.WriteString("\n\t# Dispatch.\n")
	nodePorts := fmt.Sprintf("fib daddr type local %s daddr != %s meta l4proto . th dport", fam.table, fam.loopback)
	writeChain(b, nftChain{name: "services", comment: "services: frontend address and port, then node ports on local addresses",
		rules: []string{fam.table + " daddr . meta l4proto . th dport vmap @service-ips", nodePorts + " vmap @service-nodeports"}})
	writeChain(b, nftChain{name: "mark-for-masquerade", comment: "mark-for-masquerade: ask nat-postrouting to masquerade",
		rules: []string{"meta mark set meta mark | " + masqueradeMark}})
	writeChain(b, nftChain{name: "masquerading", comment: "masquerading: masquerade marked packets, clearing the mark",
		rules: []string{"meta mark & " + masqueradeMark + " == 0 return", "meta mark set meta mark ^ " + masqueradeMark, "masquerade fully-random"}})
	writeChain(b, nftChain{name: "service-endpoints-check", comment: "service-endpoints-check: new connections to frontends without endpoints (after DNAT)",
		rules: []string{fam.table + " daddr . meta l4proto . th dport vmap @no-endpoint-services", nodePorts + " vmap @no-endpoint-nodeports"}})
	writeChain(b, nftChain{name: "reject-chain", comment: "reject-chain: a service without endpoints refuses the connection",
		rules: []string{"reject"}})
	writeChain(b, nftChain{name: "firewall-check", comment: "firewall-check: loadBalancerSourceRanges (before DNAT)",
		rules: []string{fam.table + " daddr . meta l4proto . th dport vmap @firewall-ips"}})

	b.WriteString("\n\t# Maps.\n")
	addrKey := fam.addrType + " . inet_proto . inet_service : verdict"
	portKey := "inet_proto . inet_service : verdict"
	writeMap(b, "service-ips", "cluster IPs to service chains; external and LoadBalancer IPs to external chains", addrKey, t.services)
	writeMap(b, "service-nodeports", "node ports to external chains", portKey, t.nodePort)
	writeMap(b, "no-endpoint-services", "frontends without endpoints: reject, or drop under policy Local", addrKey, t.noEpSvc)
	writeMap(b, "no-endpoint-nodeports", "node ports without endpoints: reject, or drop under policy Local", portKey, t.noEpNode)
	writeMap(b, "firewall-ips", "LoadBalancer IPs with loadBalancerSourceRanges to firewall chains", addrKey, t.firewall)
	if len(t.podCIDRs) > 1 {
		fmt.Fprintf(b, "\t# pod-cidrs: traffic from elsewhere to a cluster IP is masqueraded\n\tset pod-cidrs {\n\t\ttype %s\n\t\tflags interval\n\t\telements = { %s }\n\t}\n",
			fam.addrType, strings.Trim(prefixSet(t.podCIDRs, true), "{ }"))
	}

	for _, g := range t.groups {
		fmt.Fprintf(b, "\n\t# Service %s.\n", commentText(g.title))
		for _, s := range g.sets {
			fmt.Fprintf(b, "\t# %s\n\tset %s {\n\t\ttype %s\n\t\tflags dynamic,timeout\n\t\ttimeout %ds\n\t}\n",
				commentText(s.comment), s.name, fam.addrType, s.timeout)
		}
		for _, c := range g.chains {
			writeChain(b, c)
		}
	}
	b.WriteString("}\n")
}

func writeChain(b *bytes.Buffer, c nftChain) {
	fmt.Fprintf(b, "\t# %s\n\tchain %s {\n", commentText(c.comment), c.name)
	for _, r := range c.rules {
		fmt.Fprintf(b, "\t\t%s\n", r)
	}
	b.WriteString("\t}\n")
}

func writeMap(b *bytes.Buffer, name, comment, typ string, elems []nftElement) {
	fmt.Fprintf(b, "\t# %s: %s\n\tmap %s {\n\t\ttype %s\n", name, comment, name, typ)
	if len(elems) > 0 {
		b.WriteString("\t\telements = {\n")
		var last string
		for i, e := range elems {
			k := e.key()
			if i > 0 && k == last {
				// Two frontends with one key: the compiler rejects
				// this; keep the first so that the file still loads.
				fmt.Fprintf(b, "\t\t\t# duplicate key dropped: %s : %s\n", k, e.verdict)
				continue
			}
			last = k
			if e.comment != "" {
				k += ` comment "` + commentText(e.comment) + `"`
			}
			fmt.Fprintf(b, "\t\t\t%s : %s,\n", k, e.verdict)
		}
		b.WriteString("\t\t}\n")
	}
	b.WriteString("\t}\n")
}

// nftHash is HASH8 of a name: the start of the base32 SHA-256 of its
// readable part, as kube-proxy's. It keeps names unique when the readable
// part is truncated or sanitized, and tells similar names apart at a glance.
func nftHash(readable string) string {
	sum := sha256.Sum256([]byte(readable))
	return base32.StdEncoding.EncodeToString(sum[:])[:8]
}

// nftName is prefix + hash + "-" + readable, with the characters nft does
// not take in a bare name replaced (":" of IPv6 addresses by ".", others by
// "_") and cut to nftNameMax bytes.
func nftName(prefix, hash, readable string) string {
	name := []byte(prefix + hash + "-")
	for i := 0; i < len(readable); i++ {
		switch c := readable[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '/', c == '-', c == '_', c == '.':
			name = append(name, c)
		case c == ':':
			name = append(name, '.')
		default:
			name = append(name, '_')
		}
	}
	if len(name) > nftNameMax {
		name = append(name[:nftNameMax-3], "..."...)
	}
	return string(name)
}

// normAddr is a without zone, an IPv4-mapped IPv6 address as IPv4.
func normAddr(a netip.Addr) netip.Addr {
	return a.Unmap().WithZone("")
}

// normPrefix is p masked, an IPv4-mapped IPv6 prefix as IPv4.
func normPrefix(p netip.Prefix) netip.Prefix {
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	} else {
		p = netip.PrefixFrom(a.WithZone(""), p.Bits())
	}
	return p.Masked()
}

// familyAddrs returns the addresses of fam, sorted, without repeats.
func familyAddrs(addrs []netip.Addr, fam nftFamily) []netip.Addr {
	var out []netip.Addr
	for _, a := range addrs {
		if a = normAddr(a); fam.is(a) {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// familyPrefixes returns the prefixes of fam, masked and sorted, without
// the ones another prefix holds.
func familyPrefixes(prefixes []netip.Prefix, fam nftFamily) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range prefixes {
		if p = normPrefix(p); p.IsValid() && fam.is(p.Addr()) {
			out = append(out, p)
		}
	}
	return minimalPrefixes(out)
}

func minimalPrefixes(ps []netip.Prefix) []netip.Prefix {
	slices.SortFunc(ps, func(a, b netip.Prefix) int {
		return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
	})
	var out []netip.Prefix
	for _, p := range ps {
		if !slices.ContainsFunc(out, func(q netip.Prefix) bool { return q.Bits() <= p.Bits() && q.Contains(p.Addr()) }) {
			out = append(out, p)
		}
	}
	return out
}

// podMatch matches the pod CIDRs: one inline, several through the named
// set @pod-cidrs. Not an anonymous set per rule: each is a set of its own
// in the kernel, and the kernel finds sets by walking a list.
func podMatch(podCIDRs []netip.Prefix) string {
	if len(podCIDRs) == 1 {
		return prefixSet(podCIDRs, false)
	}
	return "@pod-cidrs"
}

// prefixSet writes prefixes as one nft value, or as an anonymous set when
// there are several or when set is true.
func prefixSet(ps []netip.Prefix, set bool) string {
	ps = minimalPrefixes(slices.Clone(ps))
	strs := make([]string, len(ps))
	for i, p := range ps {
		if p.IsSingleIP() {
			strs[i] = p.Addr().String()
		} else {
			strs[i] = p.String()
		}
	}
	if len(strs) == 1 && !set {
		return strs[0]
	}
	return "{ " + strings.Join(strs, ", ") + " }"
}

func externalFrontends(externalIPs, lbIPs int, nodePort uint16) string {
	var what []string
	if nodePort != 0 {
		what = append(what, fmt.Sprintf("node port %d", nodePort))
	}
	if externalIPs > 0 {
		what = append(what, plural(externalIPs, "external IP"))
	}
	if lbIPs > 0 {
		what = append(what, plural(lbIPs, "LoadBalancer IP"))
	}
	return strings.Join(what, ", ")
}

func countEndpoints(n int, kind string) string {
	if n == 1 {
		return "its only " + kind + "endpoint"
	}
	return fmt.Sprintf("one of %d %sendpoints", n, kind)
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func endpointOrigin(ep plan.Endpoint) string {
	var parts []string
	if ep.Pod != "" {
		parts = append(parts, "pod "+ep.Pod)
	}
	if ep.NodeName != "" {
		parts = append(parts, "node "+ep.NodeName)
	}
	if ep.Terminating {
		parts = append(parts, "terminating")
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// commentText keeps a comment on one line and inside its quotes.
func commentText(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f || r == '"' || r == '\\' {
			return '_'
		}
		return r
	}, s)
}
