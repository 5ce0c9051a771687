package render

import (
	"cmp"
	"crypto/sha256"
	"encoding/base32"
	"net/netip"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"netspec.dev/netspec/plan"
)

// The shape of the ruleset follows kube-proxy's nftables mode (see
// docs/design.md, "Data plane: nftables"), with changes that keep the kernel's
// work linear in the number of services and keep endpoint changes cheap:
//
//   - a chain picks its endpoint with one rule that never changes while
//     the endpoints do: `dnat ip to numgen random mod 2520 offset O map
//     @endpoints-XX`, the interval map holding each endpoint's range of
//     keys (picks.go). An endpoint change is then a change of map
//     elements, which the kernel applies without re-validating the whole
//     table, as it does on any commit that adds a rule holding dnat;
//   - under ClientIP affinity (a set per endpoint, refreshed by the rule
//     that picks it), or past 10,000 endpoints, the endpoint is picked
//     with `numgen random mod k == 0` rules instead of a numgen vmap per
//     service: vmaps per service make the kernel's load time
//     super-linear, rules keep it linear; each DNATs itself (no chain per
//     endpoint);
//   - masquerade marks are set by a statement (no jump to
//     mark-for-masquerade), so that a commit adds fewer jumps, and
//     traffic to cluster IPs is marked by one rule of the services chain
//     (a lookup in the set cluster-frontends) instead of a rule in every
//     service chain;
//   - hairpin traffic (an endpoint reaching itself through its service) is
//     masqueraded in postrouting by looking up saddr . daddr in the set
//     hairpin, instead of a per-endpoint `ip saddr X jump` rule.
//
// Per table (one per family, holding only that family's addresses):
//
//	nat-prerouting, nat-output   jump services
//	nat-postrouting              jump masquerading
//	filter-prerouting-pre-dnat   ct state new: jump firewall-check, service-endpoints-check
//	filter-output-pre-dnat       ct state new: jump service-endpoints-check
//	filter-*-post-dnat           ct state new: jump cluster-ips-check
//	services                     mark: daddr . l4proto . dport @cluster-frontends, not from pods;
//	                             daddr . l4proto . dport vmap @service-ips,
//	                             then node ports: daddr @nodeport-ips, vmap @service-nodeports
//	masquerading                 hairpin (set hairpin), then marked packets
//	service-endpoints-check      vmaps @no-endpoint-services, @no-endpoint-nodeports
//	cluster-ips-check            daddr @cluster-ips: reject; daddr in the service CIDRs: drop
//	firewall-check               vmap @firewall-ips
//
// The filter chains run in prerouting and output, before and after DNAT
// (priority dstnat ± 10), never on input or forward: a refusal is decided
// before the routing decision, so it reaches the client whatever the
// node's routes (a forwarded packet would first make the node send an
// ICMP redirect when the route leaves by the interface it came in on,
// which uses up the ICMP rate limit towards the client). Reject in
// prerouting needs Linux 5.9. What the services chain did not DNAT and is
// still addressed to a cluster IP is to a port the cluster IP does not
// serve (rejected, as kube-proxy's cluster-ips-check); to another address
// of the service CIDRs, to no Service at all (dropped). Node ports answer
// on the set nodeport-ips only: the Node object's addresses, or with the
// Cluster's nodePortAddresses the node's local addresses inside them (fib
// daddr type local, loopback excluded), as kube-proxy's
// --nodeport-addresses.
//
// and per service port (HASH8 is derived from the readable rest of the name,
// so that a name is stable while its service port or endpoint is):
//
//	service-HASH8-ns/name/proto/port   internal traffic (cluster IPs): picks among Port.Cluster
//	external-HASH8-...                 node ports, external and LoadBalancer IPs
//	local-HASH8-...                    external traffic under policy Local: picks among Port.External
//	firewall-HASH8-...                 loadBalancerSourceRanges
//	set affinity-HASH8-...__ip/port    ClientIP affinity, one per endpoint
//	map endpoints-XX                   endpoints of the picks whose chain name hashes to XX
//
// Rendering is on the path of every apply and plans reach tens of thousands
// of endpoints, so the text is appended to byte slices (no fmt), every name
// is computed once, and scratch space is reused from port to port. Each
// table takes two passes over its service ports (see nftTable), so that the
// maps, which gather elements from every port, are written before the
// ports' chains without holding those chains in a second buffer.

const (
	// masqueradeMark is the packet mark bit that asks nat-postrouting to
	// masquerade, as kube-proxy's default (--masquerade-bit 14).
	masqueradeMark = "0x4000"

	// nftNameMax is the longest chain or set name the kernel takes:
	// NFT_CHAIN_MAXNAMELEN and NFT_SET_MAXNAMELEN are 256 with the NUL.
	nftNameMax = 255

	rejectVerdict = "goto reject-chain"
	dropVerdict   = "drop"

	// markMasquerade asks nat-postrouting to masquerade. It is a statement,
	// not a jump to a chain (kube-proxy's mark-for-masquerade): a commit
	// that adds a jump or goto makes the kernel re-validate the whole
	// table, and service chains are rewritten whenever endpoints change.
	markMasquerade = "meta mark set meta mark | " + masqueradeMark
)

// nftFamily is one of the two tables.
type nftFamily struct {
	table    string                // nft family keyword: "ip" or "ip6"
	addrType string                // set key type
	label    string                // for comments
	is       func(netip.Addr) bool // of a normalized address (normAddr)
	loopback string                // node ports are not served on loopback
}

var nftFamilies = [...]nftFamily{
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
	tables := make([]*nftTable, len(nftFamilies))
	size := 256 + len(p.Node.Name)
	for i, fam := range nftFamilies {
		tables[i] = newNFTTable(p, fam)
		size += tables[i].sizeHint()
	}
	b := make([]byte, 0, size)
	b = append(b, "# nftables ruleset of node "...)
	b = appendCommentText(b, p.Node.Name)
	b = append(b, ", rendered by netspec: do not edit.\n"...)
	b = append(b, "# `nft -f` replaces the tables ip netspec and ip6 netspec in one transaction\n"...)
	b = append(b, "# and touches no other table.\n"...)
	for _, t := range tables {
		b = append(b, '\n')
		b = t.appendTo(b)
	}
	return b
}

// nftElement is one map element.
type nftElement struct {
	addr    netip.Addr // invalid for node-port maps
	proto   string
	port    uint16
	verdict string
	comment string
}

// appendKey appends the element's key: "addr . proto . port",
// "proto . port" for node ports, or "addr" for the set cluster-ips.
func (e *nftElement) appendKey(b []byte) []byte {
	if e.addr.IsValid() {
		b = e.addr.AppendTo(b)
		if e.addrOnly() {
			return b
		}
		b = append(b, " . "...)
	}
	b = append(b, e.proto...)
	b = append(b, " . "...)
	return strconv.AppendUint(b, uint64(e.port), 10)
}

// addrOnly tells whether e is an element of a set of addresses
// (cluster-ips), where an address repeats once per port that has it.
func (e *nftElement) addrOnly() bool { return e.proto == "" }

// sameKey tells whether a and b have the same key (appendKey).
func (e *nftElement) sameKey(o *nftElement) bool {
	return e.addr == o.addr && e.proto == o.proto && e.port == o.port
}

// compareElements orders elements by key, then verdict and comment. Each
// field is compared only when the ones before it are equal (cmp.Or would
// compare them all).
func compareElements(a, b nftElement) int {
	if c := a.addr.Compare(b.addr); c != 0 {
		return c
	}
	if c := strings.Compare(a.proto, b.proto); c != 0 {
		return c
	}
	if c := cmp.Compare(a.port, b.port); c != 0 {
		return c
	}
	if c := strings.Compare(a.verdict, b.verdict); c != 0 {
		return c
	}
	return strings.Compare(a.comment, b.comment)
}

// nftHash8 is HASH8 of a name (see nftHash).
type nftHash8 [8]byte

// nftEndpoint is an endpoint of a service port with its names.
type nftEndpoint struct {
	ep       *plan.Endpoint
	index    int            // of ep in Port.Endpoints
	addr     netip.AddrPort // ep's, with the address normalized (normAddr)
	affinity string         // the affinity set; "" until named (describe) or without ClientIP affinity
}

// nftTable is one family's table. It is rendered in two passes over the
// service ports, in order: the first names the chains of each port and
// gathers the map elements, which are then sorted; the second, while the
// table is written, writes the sets and chains of each port after the
// maps.
type nftTable struct {
	fam        nftFamily
	ports      []*nftPort
	count      int // service ports when ports is not filled (a Memo's table)
	endpoints  int // of all families, in ports
	podCIDRs   []netip.Prefix
	podMatch   string // podMatch(podCIDRs), "" without pod CIDRs
	masquerade string // the verdict that masquerades traffic to a cluster IP
	nodeIPs    []netip.Addr
	services   []nftElement
	nodePort   []nftElement
	noEpSvc    []nftElement
	noEpNode   []nftElement
	firewall   []nftElement
	clusterFE  []nftElement // cluster IPs with port that have endpoints: set elements
	clusterIPs []nftElement // every cluster IP, once per port: elements of the set cluster-ips
	// serviceCIDRs are the service CIDRs of the family: what no Service
	// holds there is dropped (cluster-ips-check).
	serviceCIDRs []netip.Prefix
	// nodePortAddrs are the elements of the set nodeport-ips, the
	// addresses node ports answer on: the node's IPs, or the Cluster's
	// nodePortAddresses of the family (nodePortCIDRs), which then match
	// the node's local addresses inside them.
	nodePortAddrs []netip.Prefix
	nodePortCIDRs bool
	nodePortMatch string       // the match of traffic to a node-port address
	hairpin       []netip.Addr // every endpoint address, sorted, once
	picks         []*nftPick   // chains that pick through endpoint maps, by bucket and slot
	// pickOf finds a chain's pick; nil in a Memo's tables, whose ports
	// hold their own (nftPort.picks).
	pickOf map[string]*nftPick

	view nftPortView // scratch space reused from port to port
}

// nftPort is one service port as seen from one family's table.
type nftPort struct {
	svc    *plan.Service
	port   *plan.Port
	portID string // port name, or number when unnamed
	proto  string // lower case

	// Names of the port's chains, set by the first pass; "" for the chains
	// the port does not have.
	serviceChain, externalChain, localChain, firewallChain string
	// picks are the port's picks through endpoint maps, kept by a Memo
	// (nftTable.lookupPick).
	picks []*nftPick
}

// nftPortView is a service port with what both passes derive from it. It
// lives in the table's scratch space and is valid until the next port is
// viewed.
type nftPortView struct {
	*nftPort
	base        []byte // "shop/web/tcp/http", the readable part of names
	clusterIPs  []netip.Addr
	externalIPs []netip.Addr
	lbIPs       []netip.Addr
	cluster     []nftEndpoint // internal traffic (Port.Cluster of this family)
	external    []nftEndpoint // external traffic (Port.External of this family)
	all         []nftEndpoint // union: one affinity set each under ClientIP affinity

	// Set by describe, for the second pass.
	desc      []byte // "shop/web port http 80/TCP", for comments
	descClean bool   // desc is printable ASCII without quotes (isCleanText)

	// Scratch space of nameChains and describe, in the view so that
	// goroutines rendering side by side do not share it.
	readable []byte
	name     []byte
	names    []nftEndpoint // by index in Port.Endpoints; affinity "" until named
}

// comparePorts orders service ports by namespace, name, port name (or
// number), protocol and number, comparing each only when the ones before
// it are equal.
func comparePorts(a, b *nftPort) int {
	if a.svc != b.svc {
		if c := strings.Compare(a.svc.Namespace, b.svc.Namespace); c != 0 {
			return c
		}
		if c := strings.Compare(a.svc.Name, b.svc.Name); c != 0 {
			return c
		}
	}
	if c := strings.Compare(a.portID, b.portID); c != 0 {
		return c
	}
	if c := strings.Compare(a.proto, b.proto); c != 0 {
		return c
	}
	return cmp.Compare(a.port.Port, b.port.Port)
}

// newNFTTable makes the table of fam and runs the first pass.
func newNFTTable(p *plan.Plan, fam nftFamily) *nftTable {
	t := &nftTable{fam: fam}
	t.setup(p)
	t.sortPorts(p)
	t.services = make([]nftElement, 0, len(t.ports))
	for _, sp := range t.ports {
		t.scanPort(t.viewPort(sp))
	}
	for _, m := range t.maps() {
		slices.SortFunc(*m, compareElements)
	}
	slices.SortFunc(t.hairpin, netip.Addr.Compare)
	t.hairpin = slices.Compact(t.hairpin)
	t.assignPicks()
	return t
}

// setup sets what the whole table derives from the plan's cluster and
// node: the pod CIDRs and their match, and the node's addresses.
func (t *nftTable) setup(p *plan.Plan) {
	fam := t.fam
	t.podCIDRs = familyPrefixes(p.Cluster.PodCIDRs, fam)
	t.masquerade = markMasquerade
	if len(t.podCIDRs) > 0 {
		t.podMatch = podMatch(t.podCIDRs)
		t.masquerade = fam.table + " saddr != " + t.podMatch + " " + markMasquerade
	}
	for _, ip := range p.Node.IPs {
		if ip = normAddr(ip); fam.is(ip) {
			t.nodeIPs = append(t.nodeIPs, ip)
		}
	}
	t.serviceCIDRs = familyPrefixes(p.Cluster.ServiceCIDRs, fam)
	t.nodePortAddrs = familyPrefixes(p.Cluster.NodePortAddresses, fam)
	t.nodePortCIDRs = len(t.nodePortAddrs) > 0
	t.nodePortMatch = fam.table + " daddr @nodeport-ips"
	if t.nodePortCIDRs {
		// kube-proxy's --nodeport-addresses: the local addresses inside
		// the CIDRs, never loopback.
		t.nodePortMatch = "fib daddr type local " + fam.table + " daddr != " + fam.loopback + " " + t.nodePortMatch
	} else {
		for _, ip := range t.nodeIPs {
			t.nodePortAddrs = append(t.nodePortAddrs, netip.PrefixFrom(ip, ip.BitLen()))
		}
		t.nodePortAddrs = minimalPrefixes(t.nodePortAddrs)
	}
}

// maps lists the table's maps in the order they are written (nftMaps).
func (t *nftTable) maps() [len(nftMaps)]*[]nftElement {
	return [...]*[]nftElement{&t.services, &t.nodePort, &t.noEpSvc, &t.noEpNode, &t.firewall, &t.clusterFE, &t.clusterIPs}
}

// scanPort is the first pass over a service port: it names the port's
// chains and adds its map elements, picks and hairpin addresses to the
// table.
func (t *nftTable) scanPort(v *nftPortView) {
	t.nameChains(v)
	t.addElements(v)
	affinity := v.svc.AffinitySeconds > 0
	t.addPick(v.serviceChain, v.cluster, affinity)
	if v.externalPicks() {
		t.addPick(v.externalChain, v.external, affinity)
	}
	t.addPick(v.localChain, v.external, affinity)
	for i := range v.all {
		t.hairpin = append(t.hairpin, v.all[i].addr.Addr())
	}
}

// sortPorts sets t.ports to the service ports the table serves, in
// comparePorts order, and counts their endpoints. Plans list Services in
// order and each one's ports in spec order: the ports of each Service are
// sorted, and the whole only when that leaves it out of order or with
// two equal ports, so that the order is the same for the same plan.
func (t *nftTable) sortPorts(p *plan.Plan) {
	n := 0
	for i := range p.Services {
		if svc := &p.Services[i]; t.serves(svc) {
			n += len(svc.Ports)
		}
	}
	ports := make([]nftPort, 0, n)
	for i := range p.Services {
		svc := &p.Services[i]
		if !t.serves(svc) {
			continue
		}
		for j := range svc.Ports {
			ports = append(ports, newPort(svc, j))
			t.endpoints += len(svc.Ports[j].Endpoints)
		}
	}
	t.ports = make([]*nftPort, len(ports))
	for i := range ports {
		t.ports[i] = &ports[i]
	}
	sorted := true
	for start := 0; start < len(t.ports); {
		end := start + 1
		for end < len(t.ports) && t.ports[end].svc == t.ports[start].svc {
			end++
		}
		if end-start > 1 {
			slices.SortFunc(t.ports[start:end], comparePorts)
		}
		for i := max(start, 1); sorted && i < end; i++ {
			sorted = comparePorts(t.ports[i-1], t.ports[i]) < 0
		}
		start = end
	}
	if !sorted {
		slices.SortFunc(t.ports, comparePorts)
	}
}

// newPort is port j of svc, without names.
func newPort(svc *plan.Service, j int) nftPort {
	port := &svc.Ports[j]
	sp := nftPort{svc: svc, port: port, portID: port.Name, proto: lowerProtocol(port.Protocol)}
	if sp.portID == "" {
		sp.portID = strconv.Itoa(int(port.Port))
	}
	return sp
}

// serves tells whether svc has chains in the table: it has a cluster IP of
// the family.
func (t *nftTable) serves(svc *plan.Service) bool {
	return svc.Type != "ExternalName" && !svc.Headless &&
		slices.ContainsFunc(svc.ClusterIPs, func(a netip.Addr) bool { return t.fam.is(normAddr(a)) })
}

// sizeHint guesses the size of the rendered table, so that the buffer
// rarely grows.
func (t *nftTable) sizeHint() int {
	n := 8192 + 384*len(t.ports) + 384*t.endpoints
	for _, m := range t.maps() {
		for i := range *m {
			n += 80 + len((*m)[i].verdict) + len((*m)[i].comment)
		}
	}
	return n
}

// viewPort fills the table's port view for sp: its base name, its
// addresses and its endpoints of the family, without names.
func (t *nftTable) viewPort(sp *nftPort) *nftPortView {
	return t.viewPortIn(&t.view, sp)
}

// viewPortIn is viewPort into a scratch view of the caller's, for
// goroutines that render groups side by side.
func (t *nftTable) viewPortIn(v *nftPortView, sp *nftPort) *nftPortView {
	v.nftPort = sp
	svc, port := sp.svc, sp.port
	v.base = append(v.base[:0], svc.Namespace...)
	v.base = append(v.base, '/')
	v.base = append(v.base, svc.Name...)
	v.base = append(v.base, '/')
	v.base = append(v.base, sp.proto...)
	v.base = append(v.base, '/')
	v.base = append(v.base, sp.portID...)
	v.clusterIPs = appendFamilyAddrs(v.clusterIPs[:0], svc.ClusterIPs, t.fam)
	v.externalIPs = appendFamilyAddrs(v.externalIPs[:0], svc.ExternalIPs, t.fam)
	v.lbIPs = appendFamilyAddrs(v.lbIPs[:0], svc.LoadBalancerIPs, t.fam)
	v.cluster = t.appendEndpoints(v.cluster[:0], port, port.Cluster)
	v.external = t.appendEndpoints(v.external[:0], port, port.External)
	v.all = append(append(v.all[:0], v.cluster...), v.external...)
	v.all = sortEndpoints(v.all)
	v.desc, v.descClean = v.desc[:0], false
	return v
}

// appendEndpoints appends the endpoints of port at the indexes idx that
// belong to the family, sorted and without repeats.
func (t *nftTable) appendEndpoints(dst []nftEndpoint, port *plan.Port, idx []int) []nftEndpoint {
	for _, i := range idx {
		if i < 0 || i >= len(port.Endpoints) {
			continue
		}
		ep := &port.Endpoints[i]
		if a := normAddr(ep.IP); t.fam.is(a) {
			dst = append(dst, nftEndpoint{ep: ep, index: i, addr: netip.AddrPortFrom(a, ep.Port)})
		}
	}
	return sortEndpoints(dst)
}

// sortEndpoints sorts by address and port and drops repeats.
func sortEndpoints(eps []nftEndpoint) []nftEndpoint {
	slices.SortFunc(eps, func(a, b nftEndpoint) int { return a.addr.Compare(b.addr) })
	return slices.CompactFunc(eps, func(a, b nftEndpoint) bool { return a.addr == b.addr })
}

// usable tells whether some endpoint of the family serves, on any node.
func (t *nftTable) usable(v *nftPortView) bool {
	if len(v.all) > 0 {
		return true
	}
	for i := range v.port.Endpoints {
		if ep := &v.port.Endpoints[i]; (ep.Ready || ep.Serving) && t.fam.is(normAddr(ep.IP)) {
			return true
		}
	}
	return false
}

// hasFrontends tells whether the port takes external traffic: it has
// external or LoadBalancer IPs of the family, or a node port.
func (v *nftPortView) hasFrontends() bool {
	return len(v.externalIPs) > 0 || len(v.lbIPs) > 0 || v.port.NodePort != 0
}

// externalPicks tells whether the external chain picks among endpoints of
// its own rather than going to the service chain: under policy Cluster,
// when the external endpoints are not the cluster ones.
func (v *nftPortView) externalPicks() bool {
	return v.externalChain != "" && !v.svc.ExternalLocal &&
		!slices.EqualFunc(v.external, v.cluster, func(a, b nftEndpoint) bool { return a.addr == b.addr })
}

// shortCircuit tells whether, under policy Local, traffic from pods and
// from the node itself is short-circuited to the service chain, which makes
// the external chain useful even with no local endpoint.
func (v *nftPortView) shortCircuit() bool {
	return v.svc.ExternalLocal && len(v.cluster) > 0
}

// nameChains names the chains the port has.
func (t *nftTable) nameChains(v *nftPortView) {
	h := hash8(v.base)
	name := func(prefix string) string {
		v.name = appendNFTName(v.name[:0], prefix, h[:], v.base)
		return string(v.name)
	}
	if len(v.cluster) > 0 {
		v.serviceChain = name("service-")
	}
	if v.hasFrontends() && (len(v.external) > 0 || v.shortCircuit()) {
		v.externalChain = name("external-")
		if v.svc.ExternalLocal && len(v.external) > 0 {
			v.localChain = name("local-")
		}
	}
	if len(v.lbIPs) > 0 && len(v.svc.SourceRanges) > 0 {
		v.firewallChain = name("firewall-")
	}
}

// addElements adds the map elements of a service port.
func (t *nftTable) addElements(v *nftPortView) {
	svc, port := v.svc, v.port
	usable := t.usable(v)
	var label string // the comment of elements without endpoints
	if len(v.cluster) == 0 || len(v.external) == 0 {
		label = svc.Namespace + "/" + svc.Name + ":" + v.portID
	}

	// Internal traffic: the cluster IPs.
	e := nftElement{proto: v.proto, port: port.Port}
	switch {
	case len(v.cluster) > 0:
		e.verdict = "goto " + v.serviceChain
	case svc.InternalLocal && usable:
		e.verdict, e.comment = dropVerdict, label
	default:
		e.verdict, e.comment = rejectVerdict, label
	}
	for _, a := range v.clusterIPs {
		e.addr = a
		t.clusterIPs = append(t.clusterIPs, nftElement{addr: a})
		if len(v.cluster) > 0 {
			t.services = append(t.services, e)
			t.clusterFE = append(t.clusterFE, nftElement{addr: a, proto: v.proto, port: port.Port})
		} else {
			t.noEpSvc = append(t.noEpSvc, e)
		}
	}

	// External traffic: external IPs, LoadBalancer IPs and the node port.
	var toExternal, noEndpoint string
	if v.externalChain != "" {
		toExternal = "goto " + v.externalChain
	}
	if len(v.external) == 0 {
		noEndpoint = rejectVerdict
		if svc.ExternalLocal && usable {
			noEndpoint = dropVerdict
		}
	}
	frontend := func(addr netip.Addr, port uint16) {
		if toExternal != "" {
			e := nftElement{addr: addr, proto: v.proto, port: port, verdict: toExternal}
			if addr.IsValid() {
				t.services = append(t.services, e)
			} else {
				t.nodePort = append(t.nodePort, e)
			}
		}
		if noEndpoint != "" {
			e := nftElement{addr: addr, proto: v.proto, port: port, verdict: noEndpoint, comment: label}
			if addr.IsValid() {
				t.noEpSvc = append(t.noEpSvc, e)
			} else {
				t.noEpNode = append(t.noEpNode, e)
			}
		}
	}
	for _, a := range v.externalIPs {
		frontend(a, port.Port)
	}
	for _, a := range v.lbIPs {
		frontend(a, port.Port)
	}
	if port.NodePort != 0 {
		frontend(netip.Addr{}, port.NodePort)
	}

	// loadBalancerSourceRanges.
	if v.firewallChain != "" {
		e := nftElement{proto: v.proto, port: port.Port, verdict: "goto " + v.firewallChain}
		for _, a := range v.lbIPs {
			e.addr = a
			t.firewall = append(t.firewall, e)
		}
	}
}

// describe sets the port's description and names its endpoints, for the
// second pass.
func (t *nftTable) describe(v *nftPortView) {
	svc, port := v.svc, v.port
	v.desc = append(v.desc[:0], svc.Namespace...)
	v.desc = append(v.desc, '/')
	v.desc = append(v.desc, svc.Name...)
	v.desc = append(v.desc, " port "...)
	if port.Name != "" {
		v.desc = append(v.desc, port.Name...)
		v.desc = append(v.desc, ' ')
	}
	v.desc = strconv.AppendUint(v.desc, uint64(port.Port), 10)
	v.desc = append(v.desc, '/')
	v.desc = append(v.desc, port.Protocol...)
	v.descClean = isCleanText(v.desc)

	if svc.AffinitySeconds <= 0 {
		return
	}
	v.names = slices.Grow(v.names[:0], len(port.Endpoints))[:len(port.Endpoints)]
	clear(v.names)
	for _, eps := range [][]nftEndpoint{v.cluster, v.external, v.all} {
		for i := range eps {
			ep := &eps[i]
			named := &v.names[ep.index]
			if named.affinity == "" {
				*named = nameAffinity(v, ep)
			}
			ep.affinity = named.affinity
		}
	}
}

// nameAffinity names the affinity set of an endpoint.
func nameAffinity(v *nftPortView, ep *nftEndpoint) nftEndpoint {
	v.readable = append(v.readable[:0], v.base...)
	v.readable = append(v.readable, "__"...)
	v.readable = ep.addr.Addr().AppendTo(v.readable)
	v.readable = append(v.readable, '/')
	v.readable = strconv.AppendUint(v.readable, uint64(ep.addr.Port()), 10)
	h := hash8(v.readable)
	named := *ep
	v.name = appendNFTName(v.name[:0], "affinity-", h[:], v.readable)
	named.affinity = string(v.name)
	return named
}

// appendGroup appends the section of a service port: its affinity sets,
// then its chains. A port without chains has no section.
func (t *nftTable) appendGroup(b []byte, v *nftPortView) []byte {
	if v.serviceChain == "" && v.externalChain == "" && v.firewallChain == "" && len(v.all) == 0 {
		return b
	}
	t.describe(v)
	fam, svc := t.fam, v.svc
	affinity := svc.AffinitySeconds > 0

	b = append(b, "\n\t# Service "...)
	start := len(b)
	b = append(b, v.desc...)
	b = fixCommentText(b, start, v.descClean)
	b = append(b, ".\n"...)

	if affinity {
		for i := range v.all {
			ep := &v.all[i]
			b, start = openComment(b)
			b = append(b, "affinity "...)
			b = append(b, v.desc...)
			b = append(b, ": clients sent to "...)
			b = ep.addr.AppendTo(b)
			b = append(b, " in the last "...)
			b = strconv.AppendInt(b, int64(svc.AffinitySeconds), 10)
			b = append(b, 's')
			b = closeComment(b, start, v.descClean)
			b = append(b, "\tset "...)
			b = append(b, ep.affinity...)
			b = append(b, " {\n\t\ttype "...)
			b = append(b, fam.addrType...)
			b = append(b, "\n\t\tflags dynamic,timeout\n\t\ttimeout "...)
			b = strconv.AppendInt(b, int64(svc.AffinitySeconds), 10)
			b = append(b, "s\n\t}\n"...)
		}
	}

	// Internal traffic: the cluster IPs.
	if v.serviceChain != "" {
		b, start = openComment(b)
		b = append(b, "service "...)
		b = append(b, v.desc...)
		b = append(b, ": traffic to the cluster IP, picks "...)
		b = appendCountEndpoints(b, len(v.cluster), "")
		b = closeComment(b, start, v.descClean)
		b = openChain(b, v.serviceChain)
		// Unlike kube-proxy, the chain has no masquerade rule: the
		// services chain marks traffic to every cluster IP with port in
		// the set cluster-frontends (the elements of service-ips that
		// lead to service chains) from outside the pods, and the external
		// chains that go here have marked the packet or pass pod traffic
		// only. A rule less per service: a full sync is faster in the
		// kernel, and a commit that adds a service re-validates less.
		b = t.appendPick(b, v, v.serviceChain, v.cluster, affinity)
		b = closeChain(b)
	}

	// External traffic: external IPs, LoadBalancer IPs and the node port.
	if v.externalChain != "" {
		b = t.appendExternalChains(b, v)
	}

	// loadBalancerSourceRanges: checked before DNAT, whatever the endpoints.
	if v.firewallChain != "" {
		b = t.appendFirewallChain(b, v)
	}

	return b
}

// appendExternalChains appends the external chain of a port and, under
// policy Local with local endpoints, its local chain.
func (t *nftTable) appendExternalChains(b []byte, v *nftPortView) []byte {
	svc := v.svc
	affinity := svc.AffinitySeconds > 0
	b, start := openComment(b)
	b = append(b, "external "...)
	b = append(b, v.desc...)
	b = append(b, ": traffic to "...)
	b = appendExternalFrontends(b, len(v.externalIPs), len(v.lbIPs), v.port.NodePort)
	switch {
	case svc.ExternalLocal:
		b = append(b, ", policy Local: "...)
		if v.shortCircuit() {
			if len(t.podCIDRs) > 0 {
				b = append(b, "pods and the node (masqueraded) go to the service chain, "...)
			} else {
				b = append(b, "the node (masqueraded) goes to the service chain, "...)
			}
		}
		if len(v.external) > 0 {
			b = append(b, "the rest to the local chain"...)
		} else {
			b = append(b, "the rest is dropped (no local endpoint)"...)
		}
		b = closeComment(b, start, v.descClean)
		b = openChain(b, v.externalChain)
		if v.shortCircuit() {
			if len(t.podCIDRs) > 0 {
				b = appendRule(b, t.fam.table, " saddr ", t.podMatch, " goto ", v.serviceChain)
			}
			b = appendRule(b, "fib saddr type local ", markMasquerade)
			b = appendRule(b, "fib saddr type local goto ", v.serviceChain)
		}
		if len(v.external) > 0 {
			b = appendRule(b, "goto ", v.localChain)
		}
	case !v.externalPicks():
		b = append(b, ", policy Cluster: masquerade, then as the service chain"...)
		b = closeComment(b, start, v.descClean)
		b = openChain(b, v.externalChain)
		b = appendRule(b, markMasquerade)
		b = appendRule(b, "goto ", v.serviceChain)
	default:
		b = append(b, ", policy Cluster: masquerade, then picks "...)
		b = appendCountEndpoints(b, len(v.external), "")
		b = closeComment(b, start, v.descClean)
		b = openChain(b, v.externalChain)
		b = appendRule(b, markMasquerade)
		b = t.appendPick(b, v, v.externalChain, v.external, affinity)
	}
	b = closeChain(b)

	if v.localChain != "" {
		b, start = openComment(b)
		b = append(b, "local "...)
		b = append(b, v.desc...)
		b = append(b, ": external traffic under policy Local, picks "...)
		b = appendCountEndpoints(b, len(v.external), "local ")
		b = closeComment(b, start, v.descClean)
		b = openChain(b, v.localChain)
		b = t.appendPick(b, v, v.localChain, v.external, affinity)
		b = closeChain(b)
	}
	return b
}

// appendFirewallChain appends the chain that applies a port's
// loadBalancerSourceRanges.
func (t *nftTable) appendFirewallChain(b []byte, v *nftPortView) []byte {
	fam := t.fam
	ranges := familyPrefixes(v.svc.SourceRanges, fam)
	b, start := openComment(b)
	b = append(b, "firewall "...)
	b = append(b, v.desc...)
	if len(ranges) == 0 {
		// Ranges were given for the other family only: none of this
		// family is allowed (fail closed).
		b = append(b, ": loadBalancerSourceRanges hold no "...)
		b = append(b, fam.label...)
		b = append(b, " range, so no "...)
		b = append(b, fam.label...)
		b = append(b, " client may reach the LoadBalancer IPs"...)
		b = closeComment(b, start, v.descClean)
		b = openChain(b, v.firewallChain)
		b = appendRule(b, dropVerdict)
		return closeChain(b)
	}
	b = append(b, ": only loadBalancerSourceRanges may reach the LoadBalancer IPs"...)
	b = closeComment(b, start, v.descClean)
	b = openChain(b, v.firewallChain)
	allowed := slices.Clone(ranges)
	// A node in the ranges may reach the LB IPs through a local route that
	// loops back with the LB IP as source (kube-proxy).
	if slices.ContainsFunc(t.nodeIPs, func(a netip.Addr) bool {
		return slices.ContainsFunc(ranges, func(r netip.Prefix) bool { return r.Contains(a) })
	}) {
		for _, a := range v.lbIPs {
			allowed = append(allowed, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	b = append(b, "\t\t"...)
	b = append(b, fam.table...)
	b = append(b, " saddr != "...)
	b = appendPrefixSet(b, allowed, true)
	b = append(b, " drop\n"...)
	return closeChain(b)
}

// appendPick appends what sends a packet of chain to one of eps: the rule
// that looks its endpoint up in an endpoint map (picks.go), or the rules
// of appendPickRules.
func (t *nftTable) appendPick(b []byte, v *nftPortView, chain string, eps []nftEndpoint, affinity bool) []byte {
	if p := t.lookupPick(v.nftPort, chain); p != nil {
		return appendMapPick(b, t.fam, v.proto, p)
	}
	return appendPickRules(b, t.fam, v.proto, eps, affinity)
}

// lookupPick finds the pick of a chain of sp: in the table's index, or
// without one (a Memo's table) among the port's own picks.
func (t *nftTable) lookupPick(sp *nftPort, chain string) *nftPick {
	if t.pickOf != nil {
		return t.pickOf[chain]
	}
	for _, p := range sp.picks {
		if p.chain == chain {
			return p
		}
	}
	return nil
}

// appendPickRules appends the rules that send a packet to one of eps: first
// to the endpoint its client stuck to (affinity), else at random. Rule i
// is taken with probability 1/(k-i) of what reaches it, so each endpoint
// gets 1/k. Each rule DNATs itself rather than going to a chain per
// endpoint (kube-proxy's shape): rewriting a service chain when its
// endpoints change then adds no goto, and the kernel does not re-validate
// the whole table.
func appendPickRules(b []byte, fam nftFamily, proto string, eps []nftEndpoint, affinity bool) []byte {
	if affinity {
		for i := range eps {
			b = append(b, "\t\t"...)
			b = append(b, fam.table...)
			b = append(b, " saddr @"...)
			b = append(b, eps[i].affinity...)
			b = append(b, ' ')
			b = appendDNAT(b, fam, proto, &eps[i])
		}
	}
	for i := range eps {
		b = append(b, "\t\t"...)
		if left := len(eps) - i; left > 1 {
			b = append(b, "numgen random mod "...)
			b = strconv.AppendInt(b, int64(left), 10)
			b = append(b, " == 0 "...)
		}
		b = appendDNAT(b, fam, proto, &eps[i])
	}
	return b
}

// appendDNAT appends the statements that send a packet to ep, refreshing
// the client's affinity first when ep has an affinity set, and ends the
// line.
func appendDNAT(b []byte, fam nftFamily, proto string, ep *nftEndpoint) []byte {
	if ep.affinity != "" {
		b = append(b, "update @"...)
		b = append(b, ep.affinity...)
		b = append(b, " { "...)
		b = append(b, fam.table...)
		b = append(b, " saddr } "...)
	}
	b = append(b, "meta l4proto "...)
	b = append(b, proto...)
	b = append(b, " dnat to "...)
	b = ep.addr.AppendTo(b)
	return append(b, '\n')
}

// appendTo appends the table.
func (t *nftTable) appendTo(b []byte) []byte {
	b = t.appendDispatch(b)
	for i, m := range t.maps() {
		b = appendMapOpen(b, t.fam, i, len(*m) > 0)
		b = appendElements(b, *m)
		b = appendMapClose(b, len(*m) > 0)
	}
	b = appendHairpinOpen(b, t.fam, len(t.hairpin) > 0)
	for _, a := range t.hairpin {
		b = appendHairpinElement(b, a)
	}
	b = appendMapClose(b, len(t.hairpin) > 0)
	b = t.appendPodCIDRs(b)
	b = t.appendNodePortIPs(b)

	b = t.appendPickMaps(b)

	b = t.appendGroups(b)
	return append(b, "}\n"...)
}

// appendDispatch appends the start of the table: its head, base chains and
// dispatch chains, up to its maps.
func (t *nftTable) appendDispatch(b []byte) []byte {
	fam := t.fam
	b = t.appendTableHead(b, "", []baseChain{
		{"nat-prerouting", "type nat hook prerouting priority dstnat", []string{"jump services"}},
		{"nat-output", "type nat hook output priority -100", []string{"jump services"}},
		{"filter-prerouting-pre-dnat", hookPreroutingPreDNAT, []string{"ct state new jump firewall-check", "ct state new jump service-endpoints-check"}},
		{"filter-output-pre-dnat", hookOutputPreDNAT, []string{"ct state new jump service-endpoints-check"}},
		{"filter-prerouting-post-dnat", hookPreroutingPostDNAT, []string{"ct state new jump cluster-ips-check"}},
		{"filter-output-post-dnat", hookOutputPostDNAT, []string{"ct state new jump cluster-ips-check"}},
	})

	b = append(b, "\n\t# Dispatch.\n"...)
	vmap := fam.table + " daddr . meta l4proto . th dport vmap @"
	nodePorts := t.nodePortMatch + " meta l4proto . th dport vmap @"
	b = appendChain(b, "services", "services: marks traffic to a cluster IP from outside the pods for masquerade; frontend address and port, then node ports on the node-port addresses",
		fam.table+" daddr . meta l4proto . th dport @cluster-frontends "+t.masquerade,
		vmap+"service-ips", nodePorts+"service-nodeports")
	b = appendChain(b, "masquerading", "masquerading: masquerade hairpin traffic (an endpoint reaching itself through a service) and marked packets, clearing the mark",
		"ct status dnat "+fam.table+" saddr . "+fam.table+" daddr @hairpin masquerade fully-random",
		"meta mark & "+masqueradeMark+" == 0 return", "meta mark set meta mark ^ "+masqueradeMark, "masquerade fully-random")
	b = appendChain(b, "service-endpoints-check", "service-endpoints-check: new connections to frontends without endpoints (before DNAT, and before routing: reject in prerouting needs Linux 5.9)",
		vmap+"no-endpoint-services", nodePorts+"no-endpoint-nodeports")
	b = appendChain(b, "cluster-ips-check", "cluster-ips-check: new connections still addressed to the service CIDRs after DNAT: a cluster IP on a port it does not serve is rejected, an address no Service holds dropped",
		t.clusterIPsCheck("")...)
	b = appendChain(b, "reject-chain", "reject-chain: a service without endpoints refuses the connection",
		"reject")
	b = appendChain(b, "firewall-check", "firewall-check: loadBalancerSourceRanges (before DNAT)",
		vmap+"firewall-ips")

	return append(b, "\n\t# Maps.\n"...)
}

// clusterIPsCheck returns the rules of the chain cluster-ips-check, after
// first (none when "").
func (t *nftTable) clusterIPsCheck(first string) []string {
	var rules []string
	if first != "" {
		rules = append(rules, first)
	}
	rules = append(rules, t.fam.table+" daddr @cluster-ips reject")
	if drop := t.serviceCIDRDrop(); drop != "" {
		rules = append(rules, drop)
	}
	return rules
}

// nftMaps are the table's verdict maps and the set cluster-frontends, in
// the order nftTable.maps lists them and they are written.
var nftMaps = [...]struct {
	name, comment string
	nodePorts     bool // keyed by protocol and port only
	set           bool // a set: elements without verdicts
	addrs         bool // a set keyed by address only (nftElement.addrOnly)
}{
	{"service-ips", "cluster IPs to service chains; external and LoadBalancer IPs to external chains", false, false, false},
	{"service-nodeports", "node ports to external chains", true, false, false},
	{"no-endpoint-services", "frontends without endpoints: reject, or drop under policy Local", false, false, false},
	{"no-endpoint-nodeports", "node ports without endpoints: reject, or drop under policy Local", true, false, false},
	{"firewall-ips", "LoadBalancer IPs with loadBalancerSourceRanges to firewall chains", false, false, false},
	{"cluster-frontends", "cluster IPs with port that have endpoints (the service chains' frontends)", false, true, false},
	{"cluster-ips", "every cluster IP: a new connection still addressed to one after DNAT is to a port it does not serve", false, true, true},
}

// mapType is the type of map nftMaps[i].
func mapType(fam nftFamily, i int) string {
	key := fam.addrType + " . inet_proto . inet_service"
	if nftMaps[i].addrs {
		return fam.addrType
	}
	if nftMaps[i].nodePorts {
		key = "inet_proto . inet_service"
	}
	if nftMaps[i].set {
		return key
	}
	return key + " : verdict"
}

// appendMapOpen appends the start of map nftMaps[i], up to its first
// element; appendMapClose ends it.
func appendMapOpen(b []byte, fam nftFamily, i int, elements bool) []byte {
	if nftMaps[i].set {
		return appendSetHead(b, nftMaps[i].name, nftMaps[i].comment, mapType(fam, i), elements)
	}
	return appendMapHead(b, nftMaps[i].name, nftMaps[i].comment, mapType(fam, i), elements)
}

// appendMapHead appends the start of a map, up to its first element.
func appendMapHead(b []byte, name, comment, typ string, elements bool) []byte {
	return appendHead(b, "map", name, comment, typ, elements)
}

// appendSetHead appends the start of a set, up to its first element.
func appendSetHead(b []byte, name, comment, typ string, elements bool) []byte {
	return appendHead(b, "set", name, comment, typ, elements)
}

// appendHead appends the start of a map or set, up to its first element.
func appendHead(b []byte, kind, name, comment, typ string, elements bool) []byte {
	b = appendLine(b, "\t# ", name, ": ", comment)
	b = appendLine(b, "\t", kind, " ", name, " {")
	b = appendRule(b, "type ", typ)
	if elements {
		b = append(b, "\t\telements = {\n"...)
	}
	return b
}

// appendMapClose ends a map or set opened with the same elements.
func appendMapClose(b []byte, elements bool) []byte {
	if elements {
		b = append(b, "\t\t}\n"...)
	}
	return append(b, "\t}\n"...)
}

// appendHairpinOpen appends the start of the set hairpin, up to its first
// element (appendHairpinElement); appendMapClose ends it.
func appendHairpinOpen(b []byte, fam nftFamily, elements bool) []byte {
	b = append(b, "\t# hairpin: every endpoint address, twice: source and destination of a packet DNATed back to its sender\n\tset hairpin {\n\t\ttype "...)
	b = append(b, fam.addrType...)
	b = append(b, " . "...)
	b = append(b, fam.addrType...)
	b = append(b, '\n')
	if elements {
		b = append(b, "\t\telements = {\n"...)
	}
	return b
}

// appendHairpinElement appends the element of the set hairpin for a.
func appendHairpinElement(b []byte, a netip.Addr) []byte {
	b = append(b, "\t\t\t"...)
	b = a.AppendTo(b)
	b = append(b, " . "...)
	b = a.AppendTo(b)
	return append(b, ",\n"...)
}

// groupsPerWorker is the fewest service ports worth a goroutine of
// appendGroups (a variable for tests).
var groupsPerWorker = 2048

// appendGroups appends the chains of every service port, in t.ports
// order. A big table is rendered in slices side by side, each into a
// buffer of its own, joined in order: the text is the same.
func (t *nftTable) appendGroups(b []byte) []byte {
	workers := min(runtime.GOMAXPROCS(0), len(t.ports)/groupsPerWorker)
	if workers < 2 {
		for _, sp := range t.ports {
			b = t.appendGroup(b, t.viewPort(sp))
		}
		return b
	}
	parts := make([][]byte, workers)
	var wg sync.WaitGroup
	for w := range parts {
		from, to := w*len(t.ports)/workers, (w+1)*len(t.ports)/workers
		wg.Go(func() {
			var v nftPortView
			part := make([]byte, 0, (len(b)+1)/workers+4096)
			for _, sp := range t.ports[from:to] {
				part = t.appendGroup(part, t.viewPortIn(&v, sp))
			}
			parts[w] = part
		})
	}
	wg.Wait()
	for _, part := range parts {
		b = append(b, part...)
	}
	return b
}

// baseChain is a base chain of a table, with its rules.
type baseChain struct {
	name, hook string
	rules      []string
}

// The hooks of the filter base chains. Those before DNAT see the frontend
// a packet was sent to; those after it see what the nat chains left
// addressed to the service CIDRs. nft names priority dstnat (-100) on the
// prerouting hook only: the output hook's are numbers.
const (
	hookPreroutingPreDNAT  = "type filter hook prerouting priority dstnat - 10"
	hookPreroutingPostDNAT = "type filter hook prerouting priority dstnat + 10"
	hookOutputPreDNAT      = "type filter hook output priority -110"
	hookOutputPostDNAT     = "type filter hook output priority -90"
)

// appendTableHead appends the start of a table, up to the end of its base
// chains: the two of base that hook the DNAT side, nat-postrouting, which
// both data planes share, then the rest of base. note ends the table's
// comment line.
func (t *nftTable) appendTableHead(b []byte, note string, base []baseChain) []byte {
	fam := t.fam
	b = appendLine(b, "table ", fam.table, " netspec {}")
	b = appendLine(b, "delete table ", fam.table, " netspec")
	b = appendLine(b, "table ", fam.table, " netspec {")
	b = append(b, "\t# "...)
	b = append(b, fam.label...)
	b = append(b, ": "...)
	b = appendPlural(b, max(len(t.ports), t.count), "service port")
	b = append(b, note...)
	b = append(b, ".\n"...)

	b = append(b, "\n\t# Base chains.\n"...)
	base = slices.Insert(base, 2, baseChain{"nat-postrouting", "type nat hook postrouting priority srcnat", []string{"jump masquerading"}})
	for _, c := range base {
		b = openChain(b, c.name)
		b = appendRule(b, c.hook, "; policy accept;")
		for _, r := range c.rules {
			b = appendRule(b, r)
		}
		b = closeChain(b)
	}
	return b
}

// appendNodePortIPs appends the set nodeport-ips: the addresses node
// ports answer on (nftTable.nodePortAddrs).
func (t *nftTable) appendNodePortIPs(b []byte) []byte {
	b = append(b, "\t# nodeport-ips: node ports answer on "...)
	if t.nodePortCIDRs {
		b = append(b, "the node's local addresses inside these (nodePortAddresses)"...)
	} else {
		b = append(b, "the node's addresses"...)
	}
	b = append(b, "\n\tset nodeport-ips {\n\t\ttype "...)
	b = append(b, t.fam.addrType...)
	b = append(b, "\n\t\tflags interval\n"...)
	if len(t.nodePortAddrs) > 0 {
		b = append(b, "\t\telements = "...)
		b = appendPrefixSet(b, t.nodePortAddrs, true)
		b = append(b, '\n')
	}
	return append(b, "\t}\n"...)
}

// serviceCIDRDrop is the rule of cluster-ips-check that drops what is
// addressed to the family's service CIDRs and no Service holds; "" when
// the family has none.
func (t *nftTable) serviceCIDRDrop() string {
	if len(t.serviceCIDRs) == 0 {
		return ""
	}
	return t.fam.table + " daddr " + string(appendPrefixSet(nil, t.serviceCIDRs, false)) + " drop"
}

// appendPodCIDRs appends the set pod-cidrs when the masquerade match needs
// it (more than one pod CIDR of the family).
func (t *nftTable) appendPodCIDRs(b []byte) []byte {
	if len(t.podCIDRs) <= 1 {
		return b
	}
	b = append(b, "\t# pod-cidrs: traffic from elsewhere to a cluster IP is masqueraded\n\tset pod-cidrs {\n\t\ttype "...)
	b = append(b, t.fam.addrType...)
	b = append(b, "\n\t\tflags interval\n\t\telements = "...)
	b = appendPrefixSet(b, t.podCIDRs, true)
	return append(b, "\n\t}\n"...)
}

// appendLine appends the concatenation of parts and a newline.
func appendLine(b []byte, parts ...string) []byte {
	for _, s := range parts {
		b = append(b, s...)
	}
	return append(b, '\n')
}

// appendRule appends a rule line: the concatenation of parts, indented.
func appendRule(b []byte, parts ...string) []byte {
	b = append(b, "\t\t"...)
	return appendLine(b, parts...)
}

// openComment starts the comment line above a chain or set; the comment
// text follows, then closeComment.
func openComment(b []byte) (_ []byte, start int) {
	b = append(b, "\t# "...)
	return b, len(b)
}

// closeComment ends a comment line opened at start. clean tells that the
// text is known to need no fixing (fixCommentText).
func closeComment(b []byte, start int, clean bool) []byte {
	b = fixCommentText(b, start, clean)
	return append(b, '\n')
}

// openChain starts a chain; its rules follow, then closeChain.
func openChain(b []byte, name string) []byte {
	b = append(b, "\tchain "...)
	b = append(b, name...)
	return append(b, " {\n"...)
}

func closeChain(b []byte) []byte {
	return append(b, "\t}\n"...)
}

// appendChain appends a whole chain with its comment.
func appendChain(b []byte, name, comment string, rules ...string) []byte {
	b = append(b, "\t# "...)
	b = appendCommentText(b, comment)
	b = append(b, '\n')
	b = openChain(b, name)
	for _, r := range rules {
		b = appendRule(b, r)
	}
	return closeChain(b)
}

func appendMap(b []byte, name, comment, typ string, elems []nftElement) []byte {
	b = appendMapHead(b, name, comment, typ, len(elems) > 0)
	b = appendElements(b, elems)
	return appendMapClose(b, len(elems) > 0)
}

// appendElements appends the lines of sorted map or set elements,
// dropping each with the key of the one before (appendDroppedElement);
// an address of a set of addresses is written once, silently.
func appendElements(b []byte, elems []nftElement) []byte {
	for i := range elems {
		if e := &elems[i]; i > 0 && e.sameKey(&elems[i-1]) {
			if !e.addrOnly() {
				b = appendDroppedElement(b, e)
			}
		} else {
			b = appendElement(b, e)
		}
	}
	return b
}

// appendElement appends the line of a map element, or of a set element
// (no verdict).
func appendElement(b []byte, e *nftElement) []byte {
	b = append(b, "\t\t\t"...)
	b = e.appendKey(b)
	if e.comment != "" {
		b = append(b, ` comment "`...)
		b = appendCommentText(b, e.comment)
		b = append(b, '"')
	}
	if e.verdict == "" {
		return append(b, ",\n"...)
	}
	return appendLine(b, " : ", e.verdict, ",")
}

// appendDroppedElement appends, in place of an element, the comment that
// drops it as it has the key of the one before: two frontends with one
// key, which the compiler rejects; the first is kept so that the file
// still loads.
func appendDroppedElement(b []byte, e *nftElement) []byte {
	b = append(b, "\t\t\t# duplicate key dropped: "...)
	b = e.appendKey(b)
	if e.verdict == "" {
		return append(b, '\n')
	}
	return appendLine(b, " : ", e.verdict)
}

// hash8 is nftHash without allocation. Eight base32 characters encode the
// first five bytes of the sum exactly, without padding.
func hash8(readable []byte) (h nftHash8) {
	sum := sha256.Sum256(readable)
	base32.StdEncoding.Encode(h[:], sum[:5])
	return h
}

// appendNFTName appends nftName(prefix, hash, readable).
func appendNFTName(b []byte, prefix string, hash, readable []byte) []byte {
	start := len(b)
	b = append(b, prefix...)
	b = append(b, hash...)
	b = append(b, '-')
	for _, c := range readable {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '/', c == '-', c == '_', c == '.':
			b = append(b, c)
		case c == ':':
			b = append(b, '.')
		default:
			b = append(b, '_')
		}
	}
	if len(b)-start > nftNameMax {
		b = append(b[:start+nftNameMax-3], "..."...)
	}
	return b
}

// lowerProtocol is strings.ToLower(proto), without allocation for the
// protocols Kubernetes knows.
func lowerProtocol(proto string) string {
	switch proto {
	case "TCP":
		return "tcp"
	case "UDP":
		return "udp"
	case "SCTP":
		return "sctp"
	}
	return strings.ToLower(proto)
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

// appendFamilyAddrs appends the addresses of fam to dst, normalized and
// sorted, without repeats.
func appendFamilyAddrs(dst, addrs []netip.Addr, fam nftFamily) []netip.Addr {
	for _, a := range addrs {
		if a = normAddr(a); fam.is(a) {
			dst = append(dst, a)
		}
	}
	slices.SortFunc(dst, netip.Addr.Compare)
	return slices.Compact(dst)
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
		return string(appendPrefixSet(nil, podCIDRs, false))
	}
	return "@pod-cidrs"
}

// appendPrefixSet appends prefixes as one nft value, or as an anonymous set
// when there are several or when set is true.
func appendPrefixSet(b []byte, ps []netip.Prefix, set bool) []byte {
	ps = minimalPrefixes(slices.Clone(ps))
	if len(ps) == 1 && !set {
		return appendPrefix(b, ps[0])
	}
	b = append(b, "{ "...)
	for i, p := range ps {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = appendPrefix(b, p)
	}
	return append(b, " }"...)
}

// appendPrefix appends p, as an address when it holds one.
func appendPrefix(b []byte, p netip.Prefix) []byte {
	if p.IsSingleIP() {
		return p.Addr().AppendTo(b)
	}
	return p.AppendTo(b)
}

func appendExternalFrontends(b []byte, externalIPs, lbIPs int, nodePort uint16) []byte {
	sep := ""
	if nodePort != 0 {
		b = append(b, "node port "...)
		b = strconv.AppendUint(b, uint64(nodePort), 10)
		sep = ", "
	}
	if externalIPs > 0 {
		b = append(b, sep...)
		b = appendPlural(b, externalIPs, "external IP")
		sep = ", "
	}
	if lbIPs > 0 {
		b = append(b, sep...)
		b = appendPlural(b, lbIPs, "LoadBalancer IP")
	}
	return b
}

func appendCountEndpoints(b []byte, n int, kind string) []byte {
	if n == 1 {
		b = append(b, "its only "...)
		b = append(b, kind...)
		return append(b, "endpoint"...)
	}
	b = append(b, "one of "...)
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, ' ')
	b = append(b, kind...)
	return append(b, "endpoints"...)
}

func appendPlural(b []byte, n int, noun string) []byte {
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, ' ')
	b = append(b, noun...)
	if n != 1 {
		b = append(b, 's')
	}
	return b
}

// appendCommentText appends s kept on one line and inside its quotes, as a
// comment: control characters, quotes and backslashes become "_", and each
// byte of invalid UTF-8 becomes U+FFFD (as strings.Map does).
func appendCommentText(b []byte, s string) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < ' ' || c == 0x7f || c == '"' || c == '\\' {
				c = '_'
			}
			b = append(b, c)
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = utf8.AppendRune(b, utf8.RuneError)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return b
}

// fixCommentText replaces b[start:] by its appendCommentText. Comments are
// written in pieces and fixed as a whole, as a multi-byte character may
// span two pieces. clean tells that every piece is printable ASCII without
// quotes (isCleanText), so that the text needs no fixing.
func fixCommentText(b []byte, start int, clean bool) []byte {
	if clean || isCleanText(b[start:]) {
		return b
	}
	return appendCommentText(b[:start], string(b[start:]))
}

// isCleanText tells whether s is printable ASCII without quotes or
// backslashes: text that appendCommentText leaves as it is.
func isCleanText[S ~string | ~[]byte](s S) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c > '~' || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
