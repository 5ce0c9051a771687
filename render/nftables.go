package render

import (
	"cmp"
	"crypto/sha256"
	"encoding/base32"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/render/nftmodel"
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
// When both traffic policies are Local and kube-proxy's short-circuit of
// pod and node traffic to the external frontends picks among more than
// this node's endpoints (Port.ShortCircuit), the chains take kube-proxy's
// shape: the service chain picks among Port.ShortCircuit and the cluster
// IPs go to the local chain, whose endpoints both policies share.
//
// render builds the ruleset as a model (package nftmodel, NFTablesModel):
// the applier installs the model and NFTables prints it. Rendering is on
// the path of every apply and plans reach tens of thousands of endpoints,
// so every name is computed once and scratch space is reused from port to
// port. Each table takes two passes over its service ports (see nftTable):
// the first gathers the maps' elements from every port, the second builds
// the ports' sets and chains.

const (
	// nftNameMax is the longest chain or set name the kernel takes:
	// NFT_CHAIN_MAXNAMELEN and NFT_SET_MAXNAMELEN are 256 with the NUL.
	nftNameMax = 255
)

// The verdicts of elements without endpoints.
var (
	rejectVerdict = nftmodel.Verdict{Kind: nftmodel.Goto, Chain: "reject-chain"}
	dropVerdict   = nftmodel.Verdict{Kind: nftmodel.Drop}
	// noLocalVerdict is that of an external frontend under policy Local on
	// a node without a local endpoint, when the Service has endpoints
	// elsewhere: the chain no-local-endpoint drops the packet unless a pod
	// or the node itself sent it, which kube-proxy's short-circuit sends
	// on (kube-proxy checks after DNAT, which the short-circuited packet
	// has passed; this check runs before it).
	noLocalVerdict = nftmodel.Verdict{Kind: nftmodel.Goto, Chain: "no-local-endpoint"}
)

// nftFamily is one of the two tables.
type nftFamily struct {
	label    string                // for comments
	is       func(netip.Addr) bool // of a normalized address (normAddr)
	loopback netip.Prefix          // node ports are not served on loopback
	model    nftmodel.Family
}

var nftFamilies = [...]nftFamily{
	{label: "IPv4", is: netip.Addr.Is4, loopback: netip.MustParsePrefix("127.0.0.0/8"), model: nftmodel.IPv4},
	{label: "IPv6", is: func(a netip.Addr) bool { return a.Is6() && !a.Is4In6() }, loopback: netip.MustParsePrefix("::1/128"), model: nftmodel.IPv6},
}

// NFTables renders the Plan as an nftables ruleset for `nft -f`. The file
// replaces the tables `ip netspec` and `ip6 netspec` in one transaction
// (each is added, deleted and declared anew, so the load works whether the
// table exists or not) and touches no other table. Both tables are always
// written, with their base chains, even when no service uses a family, so
// that loading the file always converges. The output is byte-identical for
// equal Plans: everything is sorted and no name depends on an index.
func NFTables(p *plan.Plan) []byte {
	rs, size := nftablesModel(p)
	return rs.AppendText(make([]byte, 0, size))
}

// compareElements orders map elements by key (compareElementKeys), then
// verdict and comment, comparing each only when the ones before it are
// equal (cmp.Or would compare them all).
func compareElements(a, b nftmodel.Element) int {
	if c := compareElementKeys(&a.Key, &b.Key); c != 0 {
		return c
	}
	if c := compareVerdicts(a.Verdict, b.Verdict); c != 0 {
		return c
	}
	return strings.Compare(a.Comment, b.Comment)
}

// compareElementKeys orders the keys of map elements by address,
// protocol (by name, as the file shows it) and port.
func compareElementKeys(a, b *nftmodel.Key) int {
	if c := a.Addr.Compare(b.Addr); c != 0 {
		return c
	}
	if a.Proto != b.Proto {
		return strings.Compare(a.Proto.String(), b.Proto.String())
	}
	return cmp.Compare(a.Port, b.Port)
}

// compareVerdicts orders the verdicts of elements by their text: none,
// "drop", then "goto CHAIN" by chain (the kinds elements have are
// numbered in that order).
func compareVerdicts(a, b nftmodel.Verdict) int {
	if a.Kind != b.Kind {
		return cmp.Compare(a.Kind, b.Kind)
	}
	return strings.Compare(a.Chain, b.Chain)
}

// nftEndpoint is an endpoint of a service port with its names.
type nftEndpoint struct {
	index    int            // in Port.Endpoints
	addr     netip.AddrPort // the endpoint's, with the address normalized (normAddr)
	affinity string         // the affinity set; "" until named (describe) or without ClientIP affinity
}

// nftTable is one family's table. It is rendered in two passes over the
// service ports, in order: the first names the chains of each port and
// gathers the map elements, which are then sorted; the second, while the
// table is written, writes the sets and chains of each port after the
// maps.
type nftTable struct {
	fam        nftFamily
	ipvs       bool // the IPVS data plane's: no short-circuit, a Local frontend without a local endpoint drops all
	ports      []*nftPort
	count      int // service ports when ports is not filled (a Memo's table)
	endpoints  int // of all families, in ports
	podCIDRs   []netip.Prefix
	nodeIPs    []netip.Addr
	services   []nftmodel.Element
	nodePort   []nftmodel.Element
	noEpSvc    []nftmodel.Element
	noEpNode   []nftmodel.Element
	firewall   []nftmodel.Element
	clusterFE  []nftmodel.Element // cluster IPs with port that have endpoints: set elements
	clusterIPs []nftmodel.Element // every cluster IP, once per port: elements of the set cluster-ips
	// serviceCIDRs are the service CIDRs of the family: what no Service
	// holds there is dropped (cluster-ips-check).
	serviceCIDRs []netip.Prefix
	// nodePortAddrs are the elements of the set nodeport-ips, the
	// addresses node ports answer on: the node's IPs, or the Cluster's
	// nodePortAddresses of the family (nodePortCIDRs), which then match
	// the node's local addresses inside them.
	nodePortAddrs []netip.Prefix
	nodePortCIDRs bool
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
	index  int32  // of port in svc.Ports
	portID string // port name, or number when unnamed
	proto  nftmodel.Proto
	nftChains
}

// nftChains are what the first pass over a port derives for the second
// (and a Memo keeps): the names of the port's chains, "" for the chains
// the port does not have, and in a Memo its picks through endpoint maps
// (nftTable.lookupPick), one at most per chain that picks, nil past the
// last (ownPicks).
type nftChains struct {
	serviceChain, externalChain, localChain, firewallChain string
	picks                                                  [3]*nftPick
}

// ownPicks are the picks a Memo keeps with the port.
func (c *nftChains) ownPicks() []*nftPick {
	n := 0
	for n < len(c.picks) && c.picks[n] != nil {
		n++
	}
	return c.picks[:n]
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
	short       []nftEndpoint // Port.ShortCircuit of this family
	all         []nftEndpoint // union: one affinity set each under ClientIP affinity
	// splitShort: the short-circuit picks among other endpoints than the
	// cluster IPs (both policies Local; see the chains above).
	splitShort bool

	// Set by describe, for the second pass.
	desc []byte // "shop/web port http 80/TCP", for comments

	// held is the port viewed when a Memo derives it (memoTable.view).
	held nftPort

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
		if c := compareServices(a.svc, b.svc); c != 0 {
			return c
		}
	}
	if c := strings.Compare(a.portID, b.portID); c != 0 {
		return c
	}
	if c := strings.Compare(a.proto.String(), b.proto.String()); c != 0 {
		return c
	}
	return cmp.Compare(a.port.Port, b.port.Port)
}

// compareServices orders Services by namespace and name.
func compareServices(a, b *plan.Service) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// newNFTTable makes the table of fam, of the IPVS data plane when ipvs is
// true (IPVS has no short-circuit: see nftTable.ipvs), and runs the first
// pass.
func newNFTTable(p *plan.Plan, fam nftFamily, ipvs bool) *nftTable {
	t := &nftTable{fam: fam, ipvs: ipvs}
	t.setup(p)
	t.sortPorts(p)
	t.services = make([]nftmodel.Element, 0, len(t.ports))
	for _, sp := range t.ports {
		t.scanPort(t.viewPort(&t.view, sp))
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
// node: the pod CIDRs and the node's addresses.
func (t *nftTable) setup(p *plan.Plan) {
	fam := t.fam
	t.podCIDRs = familyPrefixes(p.Cluster.PodCIDRs, fam)
	t.nodeIPs = appendFamilyAddrs(nil, p.Node.IPs, fam)
	t.serviceCIDRs = familyPrefixes(p.Cluster.ServiceCIDRs, fam)
	t.nodePortAddrs = familyPrefixes(p.Cluster.NodePortAddresses, fam)
	t.nodePortCIDRs = len(t.nodePortAddrs) > 0
	if !t.nodePortCIDRs {
		for _, ip := range t.nodeIPs {
			t.nodePortAddrs = append(t.nodePortAddrs, netip.PrefixFrom(ip, ip.BitLen()))
		}
		t.nodePortAddrs = minimalPrefixes(t.nodePortAddrs)
	}
}

// maps lists the table's maps in the order they are written (nftMaps).
func (t *nftTable) maps() [len(nftMaps)]*[]nftmodel.Element {
	return [...]*[]nftmodel.Element{&t.services, &t.nodePort, &t.noEpSvc, &t.noEpNode, &t.firewall, &t.clusterFE, &t.clusterIPs}
}

// scanPort is the first pass over a service port: it names the port's
// chains and adds its map elements, picks and hairpin addresses to the
// table.
func (t *nftTable) scanPort(v *nftPortView) {
	t.nameChains(v)
	t.addElements(v)
	affinity := v.svc.AffinitySeconds > 0
	t.addPick(v.serviceChain, v.serviceSet(), affinity)
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
		if svc := &p.Services[i]; t.serves(svc) {
			ports = appendPorts(ports, svc)
		}
	}
	t.ports = make([]*nftPort, len(ports))
	for i := range ports {
		t.ports[i] = &ports[i]
		t.endpoints += len(ports[i].port.Endpoints)
	}
	for i := 1; i < len(t.ports); i++ {
		if comparePorts(t.ports[i-1], t.ports[i]) >= 0 {
			slices.SortFunc(t.ports, comparePorts)
			break
		}
	}
}

// appendPorts appends the ports of svc, without names, sorted
// (comparePorts).
func appendPorts(dst []nftPort, svc *plan.Service) []nftPort {
	from := len(dst)
	for j := range svc.Ports {
		dst = append(dst, newPort(svc, j))
	}
	if len(dst)-from > 1 {
		slices.SortFunc(dst[from:], func(a, b nftPort) int { return comparePorts(&a, &b) })
	}
	return dst
}

// newPort is port j of svc, without names.
func newPort(svc *plan.Service, j int) nftPort {
	port := &svc.Ports[j]
	sp := nftPort{svc: svc, port: port, index: int32(j), portID: port.Name}
	sp.proto, _ = nftmodel.ProtoOf(port.Protocol)
	if sp.portID == "" {
		sp.portID = strconv.Itoa(int(port.Port))
	}
	return sp
}

// serves tells whether svc has chains in the table: the data plane serves
// it and it has a cluster IP of the family.
func (t *nftTable) serves(svc *plan.Service) bool {
	return svc.Proxied() &&
		slices.ContainsFunc(svc.ClusterIPs, func(a netip.Addr) bool { return t.fam.is(normAddr(a)) })
}

// sizeHint guesses the size of the rendered table, so that the buffer
// rarely grows.
func (t *nftTable) sizeHint() int {
	n := 8192 + 384*len(t.ports) + 384*t.endpoints
	for _, m := range t.maps() {
		for i := range *m {
			n += 85 + len((*m)[i].Verdict.Chain) + len((*m)[i].Comment)
		}
	}
	return n
}

// viewPort fills the port view v (the table's, or one of a goroutine that
// renders groups side by side) for sp: its base name, its addresses and
// its endpoints of the family, without names.
func (t *nftTable) viewPort(v *nftPortView, sp *nftPort) *nftPortView {
	v.nftPort = sp
	svc, port := sp.svc, sp.port
	v.base = append(v.base[:0], svc.Namespace...)
	v.base = append(v.base, '/')
	v.base = append(v.base, svc.Name...)
	v.base = append(v.base, '/')
	v.base = append(v.base, sp.proto.String()...)
	v.base = append(v.base, '/')
	v.base = append(v.base, sp.portID...)
	v.clusterIPs = appendFamilyAddrs(v.clusterIPs[:0], svc.ClusterIPs, t.fam)
	v.externalIPs = appendFamilyAddrs(v.externalIPs[:0], svc.ExternalIPs, t.fam)
	v.lbIPs = appendFamilyAddrs(v.lbIPs[:0], svc.LoadBalancerIPs, t.fam)
	v.cluster = t.appendEndpoints(v.cluster[:0], port, port.Cluster)
	v.external = t.appendEndpoints(v.external[:0], port, port.External)
	v.short = t.appendEndpoints(v.short[:0], port, port.ShortCircuit)
	v.splitShort = port.ShortCircuit != nil && v.hasFrontends() && !sameAddrs(v.short, v.cluster)
	v.all = append(append(append(v.all[:0], v.cluster...), v.external...), v.short...)
	v.all = sortEndpoints(v.all)
	v.desc = v.desc[:0]
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
			dst = append(dst, nftEndpoint{index: i, addr: netip.AddrPortFrom(a, ep.Port)})
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
	return v.externalChain != "" && !v.svc.ExternalLocal && !sameAddrs(v.external, v.cluster)
}

// sameAddrs tells whether two endpoint lists hold the same addresses.
func sameAddrs(a, b []nftEndpoint) bool {
	return slices.EqualFunc(a, b, func(x, y nftEndpoint) bool { return x.addr == y.addr })
}

// serviceSet is what the service chain picks among: the short-circuit's
// endpoints when split, else the cluster IPs'.
func (v *nftPortView) serviceSet() []nftEndpoint {
	if v.splitShort {
		return v.short
	}
	return v.cluster
}

// internalChain is where the cluster IPs go: the local chain when the
// short-circuit is split off, else the service chain.
func (v *nftPortView) internalChain() string {
	if v.splitShort {
		return v.localChain
	}
	return v.serviceChain
}

// shortCircuit tells whether, under policy Local, traffic from pods and
// from the node itself is short-circuited to the service chain, which makes
// the external chain useful even with no local endpoint.
func (v *nftPortView) shortCircuit() bool {
	return v.svc.ExternalLocal && len(v.serviceSet()) > 0
}

// nameChains names the chains the port has.
func (t *nftTable) nameChains(v *nftPortView) {
	h := hash8(v.base)
	name := func(prefix string) string {
		v.name = appendNFTName(v.name[:0], prefix, h[:], v.base)
		return string(v.name)
	}
	if len(v.serviceSet()) > 0 {
		v.serviceChain = name("service-")
	}
	if v.hasFrontends() && (len(v.external) > 0 || v.shortCircuit()) {
		v.externalChain = name("external-")
	}
	if v.svc.ExternalLocal && len(v.external) > 0 && v.externalChain != "" || v.splitShort && len(v.cluster) > 0 {
		v.localChain = name("local-")
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
	e := nftmodel.Element{Key: nftmodel.Key{Proto: v.proto, Port: port.Port}}
	switch {
	case len(v.cluster) > 0:
		e.Verdict = nftmodel.GoTo(v.internalChain())
	case svc.InternalLocal && usable:
		e.Verdict, e.Comment = dropVerdict, label
	default:
		e.Verdict, e.Comment = rejectVerdict, label
	}
	for _, a := range v.clusterIPs {
		e.Key.Addr = a
		t.clusterIPs = append(t.clusterIPs, nftmodel.Element{Key: nftmodel.Key{Addr: a}})
		if len(v.cluster) > 0 {
			t.services = append(t.services, e)
			t.clusterFE = append(t.clusterFE, nftmodel.Element{Key: e.Key})
		} else {
			t.noEpSvc = append(t.noEpSvc, e)
		}
	}

	// External traffic: external IPs, LoadBalancer IPs and the node port.
	var toExternal, noEndpoint nftmodel.Verdict
	if v.externalChain != "" {
		toExternal = nftmodel.GoTo(v.externalChain)
	}
	if len(v.external) == 0 {
		noEndpoint = rejectVerdict
		switch {
		case svc.ExternalLocal && usable && v.shortCircuit() && !t.ipvs:
			noEndpoint = noLocalVerdict
		case svc.ExternalLocal && usable:
			noEndpoint = dropVerdict
		}
	}
	frontend := func(addr netip.Addr, port uint16) {
		key := nftmodel.Key{Addr: addr, Proto: v.proto, Port: port}
		if toExternal.Kind != 0 {
			e := nftmodel.Element{Key: key, Verdict: toExternal}
			if addr.IsValid() {
				t.services = append(t.services, e)
			} else {
				t.nodePort = append(t.nodePort, e)
			}
		}
		if noEndpoint.Kind != 0 {
			e := nftmodel.Element{Key: key, Verdict: noEndpoint, Comment: label}
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
		e := nftmodel.Element{Key: nftmodel.Key{Proto: v.proto, Port: port.Port}, Verdict: nftmodel.GoTo(v.firewallChain)}
		for _, a := range v.lbIPs {
			e.Key.Addr = a
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

	if svc.AffinitySeconds <= 0 {
		return
	}
	v.names = slices.Grow(v.names[:0], len(port.Endpoints))[:len(port.Endpoints)]
	clear(v.names)
	for _, eps := range [][]nftEndpoint{v.cluster, v.external, v.short, v.all} {
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

// lookupPick finds the pick of a chain of sp: in the table's index, or
// without one (a Memo's table) among the port's own picks.
func (t *nftTable) lookupPick(sp *nftPort, chain string) *nftPick {
	if t.pickOf != nil {
		return t.pickOf[chain]
	}
	for _, p := range sp.ownPicks() {
		if p.chain == chain {
			return p
		}
	}
	return nil
}

// nftMaps are the table's verdict maps and the set cluster-frontends, in
// the order nftTable.maps lists them and they are written.
var nftMaps = [...]struct {
	name, comment string
	nodePorts     bool // keyed by protocol and port only
	set           bool // a set: elements without verdicts
	addrs         bool // a set keyed by address only
}{
	{"service-ips", "cluster IPs to service chains; external and LoadBalancer IPs to external chains", false, false, false},
	{"service-nodeports", "node ports to external chains", true, false, false},
	{"no-endpoint-services", "frontends without endpoints: reject, or drop under policy Local (no-local-endpoint lets pods and the node through)", false, false, false},
	{"no-endpoint-nodeports", "node ports without endpoints: reject, or drop under policy Local (no-local-endpoint lets pods and the node through)", true, false, false},
	{"firewall-ips", "LoadBalancer IPs with loadBalancerSourceRanges to firewall chains", false, false, false},
	{"cluster-frontends", "cluster IPs with port that have endpoints (the service chains' frontends)", false, true, false},
	{"cluster-ips", "every cluster IP: a new connection still addressed to one after DNAT is to a port it does not serve", false, true, true},
}

// hash8 is HASH8 of a name's readable part: eight base32 characters
// encode the first five bytes of its SHA-256 sum exactly, without padding.
func hash8(readable []byte) (h [8]byte) {
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

// minimalPrefixes sorts ps and returns them without the ones another
// prefix holds.
func minimalPrefixes(ps []netip.Prefix) []netip.Prefix {
	slices.SortFunc(ps, nftmodel.ComparePrefixes)
	var out []netip.Prefix
	for _, p := range ps {
		if !slices.ContainsFunc(out, func(q netip.Prefix) bool { return q.Bits() <= p.Bits() && q.Contains(p.Addr()) }) {
			out = append(out, p)
		}
	}
	return out
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
