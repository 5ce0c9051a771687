package render

import (
	"net/netip"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/render/nftmodel"
)

// NFTablesModel builds the nftables model of the Plan: what NFTables
// prints, and what the nftables applier installs. Equal Plans give equal
// models: everything is sorted and no name depends on an index.
func NFTablesModel(p *plan.Plan) *nftmodel.Ruleset {
	rs, _ := nftablesModel(p)
	return rs
}

// nftablesModel is NFTablesModel with a guess of the size of its text.
func nftablesModel(p *plan.Plan) (*nftmodel.Ruleset, int) {
	if p == nil {
		p = &plan.Plan{}
	}
	rs := &nftmodel.Ruleset{Comment: rulesetComment("nftables ruleset of node " + p.Node.Name + ", rendered by netspec: do not edit.")}
	size := 256 + len(p.Node.Name)
	for _, fam := range nftFamilies {
		t := newNFTTable(p, fam, false)
		size += t.sizeHint()
		rs.Tables = append(rs.Tables, t.model())
	}
	return rs, size
}

// rulesetComment is the leading comment of a ruleset: first, then what
// loading the file does.
func rulesetComment(first string) []string {
	return []string{
		first,
		"`nft -f` replaces the tables ip netspec and ip6 netspec in one transaction",
		"and touches no other table.",
	}
}

// Statements the tables repeat.
var (
	markMasqueradeStmt = nftmodel.MarkSet{Op: nftmodel.MarkOr, Value: masqueradeBit}
	dropRule           = nftmodel.Rule{nftmodel.Verdict{Kind: nftmodel.Drop}}
	rejectRule         = nftmodel.Rule{nftmodel.Reject{}}
)

// masqueradeBit is masqueradeMark as a number.
const masqueradeBit = 0x4000

func jumpRule(chain string) nftmodel.Rule {
	return nftmodel.Rule{nftmodel.Verdict{Kind: nftmodel.Jump, Chain: chain}}
}

func newConnJump(chain string) nftmodel.Rule {
	return nftmodel.Rule{nftmodel.CtMatch{Key: nftmodel.CtState, Bits: nftmodel.StateNew}, nftmodel.Verdict{Kind: nftmodel.Jump, Chain: chain}}
}

// baseChain is a base chain of a table, with its rules.
type baseChain struct {
	name  string
	hook  nftmodel.Hook
	rules []nftmodel.Rule
}

// The hooks of the base chains. The filter chains before DNAT see the
// frontend a packet was sent to; those after it see what the nat chains
// left addressed to the service CIDRs.
var (
	hookNATPrerouting      = nftmodel.Hook{Type: nftmodel.NAT, Hook: nftmodel.Prerouting, Priority: nftmodel.PriorityDstNAT}
	hookNATOutput          = nftmodel.Hook{Type: nftmodel.NAT, Hook: nftmodel.Output, Priority: -100}
	hookNATPostrouting     = nftmodel.Hook{Type: nftmodel.NAT, Hook: nftmodel.Postrouting, Priority: nftmodel.PrioritySrcNAT}
	hookPreroutingPreDNAT  = nftmodel.Hook{Type: nftmodel.Filter, Hook: nftmodel.Prerouting, Priority: nftmodel.PriorityDstNAT - 10}
	hookPreroutingPostDNAT = nftmodel.Hook{Type: nftmodel.Filter, Hook: nftmodel.Prerouting, Priority: nftmodel.PriorityDstNAT + 10}
	hookOutputPreDNAT      = nftmodel.Hook{Type: nftmodel.Filter, Hook: nftmodel.Output, Priority: -110}
	hookOutputPostDNAT     = nftmodel.Hook{Type: nftmodel.Filter, Hook: nftmodel.Output, Priority: -90}
	hookMarkPrerouting     = nftmodel.Hook{Type: nftmodel.Filter, Hook: nftmodel.Prerouting, Priority: nftmodel.PriorityDstNAT}
	hookMarkOutput         = nftmodel.Hook{Type: nftmodel.Filter, Hook: nftmodel.Output, Priority: -100}
)

// newModelTable starts the model of a table: its comment (note ends it)
// and its base chains, the two of base that hook the DNAT side,
// nat-postrouting, which both data planes share, then the rest of base.
func (t *nftTable) newModelTable(note string, base []baseChain) *nftmodel.Table {
	comment := string(appendPlural([]byte(t.fam.label+": "), max(len(t.ports), t.count), "service port")) + note + "."
	mt := &nftmodel.Table{Family: t.fam.model, Name: "netspec", Comment: comment}
	base = slices.Insert(base, 2, baseChain{"nat-postrouting", hookNATPostrouting, []nftmodel.Rule{jumpRule("masquerading")}})
	for _, c := range base {
		mt.AddChain("", &nftmodel.Chain{Name: c.name, Hook: &c.hook, Rules: c.rules})
	}
	mt.Items[0].Heading = "Base chains."
	return mt
}

// model builds the table of the nftables data plane.
func (t *nftTable) model() *nftmodel.Table {
	var lists [memoLists]*nftmodel.Set
	for k, m := range t.maps() {
		lists[k] = mapSet(listSet(k), *m)
	}
	lists[len(nftMaps)] = t.hairpinSet(hairpinComment)
	mt := t.dispatchModel()
	t.addSets(mt, lists[:])
	t.eachPickBucket(func(picks []*nftPick) { mt.AddSet("", pickMapSet(t.fam, picks)) })
	mt.Items = append(mt.Items, t.groupItems()...)
	return mt
}

// addSets adds the sets of the table after its dispatch chains, up to its
// endpoint maps: the lists (memoLists), pod-cidrs and nodeport-ips.
func (t *nftTable) addSets(mt *nftmodel.Table, lists []*nftmodel.Set) {
	from := len(mt.Items)
	for _, s := range lists {
		mt.AddSet("", s)
	}
	mt.Items[from].Heading = "Maps."
	if s := t.podCIDRsSet(); s != nil {
		mt.AddSet("", s)
	}
	mt.AddSet("", t.nodePortIPsSet())
}

// dispatchModel is the start of the table: its base chains and dispatch
// chains, up to its maps.
func (t *nftTable) dispatchModel() *nftmodel.Table {
	mt := t.newModelTable("", []baseChain{
		{"nat-prerouting", hookNATPrerouting, []nftmodel.Rule{jumpRule("services")}},
		{"nat-output", hookNATOutput, []nftmodel.Rule{jumpRule("services")}},
		{"filter-prerouting-pre-dnat", hookPreroutingPreDNAT, []nftmodel.Rule{newConnJump("firewall-check"), newConnJump("service-endpoints-check")}},
		{"filter-output-pre-dnat", hookOutputPreDNAT, []nftmodel.Rule{newConnJump("firewall-check"), newConnJump("service-endpoints-check")}},
		{"filter-prerouting-post-dnat", hookPreroutingPostDNAT, []nftmodel.Rule{newConnJump("cluster-ips-check")}},
		{"filter-output-post-dnat", hookOutputPostDNAT, []nftmodel.Rule{newConnJump("cluster-ips-check")}},
	})
	vmap := func(m string) nftmodel.Rule {
		return nftmodel.Rule{nftmodel.VMap{Key: nftmodel.KeyDAddrProtoPort, Map: m}}
	}
	nodePorts := func(m string) nftmodel.Rule {
		return append(t.nodePortMatch(), nftmodel.VMap{Key: nftmodel.KeyProtoPort, Map: m})
	}
	mt.AddChain("Dispatch.", &nftmodel.Chain{Name: "services",
		Comment: "services: marks traffic to a cluster IP from outside the pods for masquerade; frontend address and port, then node ports on the node-port addresses",
		Rules: []nftmodel.Rule{
			append(nftmodel.Rule{nftmodel.Lookup{Key: nftmodel.KeyDAddrProtoPort, Set: "cluster-frontends"}}, t.masquerade()...),
			vmap("service-ips"), nodePorts("service-nodeports"),
		}})
	mt.AddChain("", &nftmodel.Chain{Name: "masquerading",
		Comment: "masquerading: masquerade hairpin traffic (an endpoint reaching itself through a service) and marked packets, clearing the mark",
		Rules:   masqueradingRules(nftmodel.Rule{nftmodel.CtMatch{Key: nftmodel.CtStatus, Bits: nftmodel.StatusDNAT}})})
	mt.AddChain("", &nftmodel.Chain{Name: "service-endpoints-check",
		Comment: "service-endpoints-check: new connections to frontends without endpoints (before DNAT, and before routing: reject in prerouting needs Linux 5.9)",
		Rules:   []nftmodel.Rule{vmap("no-endpoint-services"), nodePorts("no-endpoint-nodeports")}})
	mt.AddChain("", &nftmodel.Chain{Name: "cluster-ips-check",
		Comment: "cluster-ips-check: new connections still addressed to the service CIDRs after DNAT: a cluster IP on a port it does not serve is rejected, an address no Service holds dropped",
		Rules:   t.clusterIPsCheck(nil)})
	mt.AddChain("", &nftmodel.Chain{Name: "reject-chain",
		Comment: "reject-chain: a service without endpoints refuses the connection",
		Rules:   []nftmodel.Rule{rejectRule}})
	noLocal := []nftmodel.Rule{{nftmodel.FibLocal{}, nftmodel.Verdict{Kind: nftmodel.Return}}, {nftmodel.Verdict{Kind: nftmodel.Drop}}}
	if len(t.podCIDRs) > 0 {
		noLocal = append([]nftmodel.Rule{{t.podMatch(false), nftmodel.Verdict{Kind: nftmodel.Return}}}, noLocal...)
	}
	mt.AddChain("", &nftmodel.Chain{Name: "no-local-endpoint",
		Comment: "no-local-endpoint: external traffic under policy Local to a node without a local endpoint is dropped, but for that of the pods and of the node itself, which the external chain sends to the Service's endpoints elsewhere (kube-proxy's short-circuit)",
		Rules:   noLocal})
	mt.AddChain("", &nftmodel.Chain{Name: "firewall-check",
		Comment: "firewall-check: loadBalancerSourceRanges (before DNAT)",
		Rules:   []nftmodel.Rule{vmap("firewall-ips")}})
	return mt
}

// masqueradingRules are the rules of the chain masquerading: hairpin
// traffic (after the statements before), then marked packets.
func masqueradingRules(before nftmodel.Rule) []nftmodel.Rule {
	return []nftmodel.Rule{
		append(before, nftmodel.Lookup{Key: nftmodel.KeySAddrDAddr, Set: "hairpin"}, nftmodel.Masquerade{FullyRandom: true}),
		{nftmodel.MarkMatch{Mask: masqueradeBit, Value: 0}, nftmodel.Verdict{Kind: nftmodel.Return}},
		{nftmodel.MarkSet{Op: nftmodel.MarkXor, Value: masqueradeBit}},
		{nftmodel.Masquerade{FullyRandom: true}},
	}
}

// podMatch matches the pod CIDRs (or with neq, what is outside them): one
// inline, several through the named set @pod-cidrs. Not an anonymous set
// per rule: each is a set of its own in the kernel, and the kernel finds
// sets by walking a list.
func (t *nftTable) podMatch(neq bool) nftmodel.Stmt {
	if len(t.podCIDRs) == 1 {
		return nftmodel.AddrMatch{Field: nftmodel.SAddr, Neq: neq, Prefixes: t.podCIDRs}
	}
	return nftmodel.Lookup{Key: nftmodel.KeySAddr, Set: "pod-cidrs", Invert: neq}
}

// masquerade is what marks traffic to a cluster IP for masquerade: the
// mark, for traffic from outside the pods when the pod CIDRs are known.
func (t *nftTable) masquerade() nftmodel.Rule {
	if len(t.podCIDRs) > 0 {
		return nftmodel.Rule{t.podMatch(true), markMasqueradeStmt}
	}
	return nftmodel.Rule{markMasqueradeStmt}
}

// nodePortMatch matches traffic to a node-port address: the set
// nodeport-ips, or with the Cluster's nodePortAddresses the local
// addresses inside them, never loopback (kube-proxy's
// --nodeport-addresses).
func (t *nftTable) nodePortMatch() nftmodel.Rule {
	lookup := nftmodel.Lookup{Key: nftmodel.KeyDAddr, Set: "nodeport-ips"}
	if !t.nodePortCIDRs {
		return nftmodel.Rule{lookup}
	}
	return nftmodel.Rule{
		nftmodel.FibLocal{Daddr: true},
		nftmodel.AddrMatch{Field: nftmodel.DAddr, Neq: true, Prefixes: []netip.Prefix{t.fam.loopback}},
		lookup,
	}
}

// clusterIPsCheck returns the rules of the chain cluster-ips-check, after
// first (none when nil).
func (t *nftTable) clusterIPsCheck(first nftmodel.Rule) []nftmodel.Rule {
	var rules []nftmodel.Rule
	if first != nil {
		rules = append(rules, first)
	}
	rules = append(rules, nftmodel.Rule{nftmodel.Lookup{Key: nftmodel.KeyDAddr, Set: "cluster-ips"}, nftmodel.Reject{}})
	if len(t.serviceCIDRs) > 0 {
		// What is addressed to the family's service CIDRs and no Service
		// holds is dropped.
		rules = append(rules, nftmodel.Rule{
			nftmodel.AddrMatch{Field: nftmodel.DAddr, Prefixes: minimalPrefixes(slices.Clone(t.serviceCIDRs))},
			nftmodel.Verdict{Kind: nftmodel.Drop},
		})
	}
	return rules
}

// Keys of the table's maps and sets.
var (
	keyAddrProtoPort = []nftmodel.KeyPart{nftmodel.AddrPart, nftmodel.ProtoPart, nftmodel.ServicePart}
	keyProtoPort     = []nftmodel.KeyPart{nftmodel.ProtoPart, nftmodel.ServicePart}
	keyAddr          = []nftmodel.KeyPart{nftmodel.AddrPart}
	keyAddrAddr      = []nftmodel.KeyPart{nftmodel.AddrPart, nftmodel.AddrPart}
)

// listSet is the empty set of list k of a table (memoLists): the map or
// set nftMaps[k], or past them the set hairpin.
func listSet(k int) *nftmodel.Set {
	if k == len(nftMaps) {
		return &nftmodel.Set{Name: "hairpin", Comment: hairpinComment, Key: keyAddrAddr}
	}
	m := &nftMaps[k]
	s := &nftmodel.Set{Name: m.name, Comment: m.name + ": " + m.comment, Key: keyAddrProtoPort, Verdicts: !m.set}
	switch {
	case m.addrs:
		s.Key = keyAddr
	case m.nodePorts:
		s.Key = keyProtoPort
	}
	return s
}

// mapSet fills the map (or set) s with sorted elements, each with the key
// of the one before dropped (shown as a comment in the file; two
// frontends with one key, which the compiler rejects; the first is kept so
// that the file still loads), or for a set keyed by address alone
// (cluster-ips, where an address repeats once per port that has it)
// silently.
func mapSet(s *nftmodel.Set, elems []nftmodel.Element) *nftmodel.Set {
	s.Elements = make([]nftmodel.Element, 0, len(elems))
	for i, e := range elems {
		if i > 0 && e.Key == elems[i-1].Key {
			if len(s.Key) > 1 {
				if s.Dropped == nil {
					s.Dropped = make(map[nftmodel.Key][]nftmodel.Verdict)
				}
				s.Dropped[e.Key] = append(s.Dropped[e.Key], e.Verdict)
			}
			continue
		}
		s.Elements = append(s.Elements, e)
	}
	return s
}

// hairpinComment is the comment of the set hairpin in the nftables data
// plane.
const hairpinComment = "hairpin: every endpoint address, twice: source and destination of a packet DNATed back to its sender"

// hairpinSet is the set hairpin: every endpoint address, twice.
func (t *nftTable) hairpinSet(comment string) *nftmodel.Set {
	s := &nftmodel.Set{Name: "hairpin", Comment: comment, Key: keyAddrAddr}
	s.Elements = make([]nftmodel.Element, len(t.hairpin))
	for i, a := range t.hairpin {
		s.Elements[i].Key = nftmodel.Key{Addr: a}
	}
	return s
}

// prefixSet is an interval set of prefixes written on one line.
func prefixSet(name, comment string, ps []netip.Prefix) *nftmodel.Set {
	ps = minimalPrefixes(slices.Clone(ps))
	s := &nftmodel.Set{Name: name, Comment: comment, Key: keyAddr, Interval: true, Inline: true}
	s.Elements = make([]nftmodel.Element, len(ps))
	for i, p := range ps {
		s.Elements[i].Key = nftmodel.Key{Addr: p.Addr(), Bits: uint8(p.Bits())}
	}
	return s
}

// podCIDRsSet is the set pod-cidrs, when the masquerade match needs it
// (more than one pod CIDR of the family); nil otherwise.
func (t *nftTable) podCIDRsSet() *nftmodel.Set {
	if len(t.podCIDRs) <= 1 {
		return nil
	}
	return prefixSet("pod-cidrs", "pod-cidrs: traffic from elsewhere to a cluster IP is masqueraded", t.podCIDRs)
}

// nodePortIPsSet is the set nodeport-ips: the addresses node ports answer
// on (nftTable.nodePortAddrs).
func (t *nftTable) nodePortIPsSet() *nftmodel.Set {
	comment := "nodeport-ips: node ports answer on the node's addresses"
	if t.nodePortCIDRs {
		comment = "nodeport-ips: node ports answer on the node's local addresses inside these (nodePortAddresses)"
	}
	return prefixSet("nodeport-ips", comment, t.nodePortAddrs)
}

// groupItems are the sets and chains of every service port, in t.ports
// order. A big table is built in slices side by side, joined in order.
func (t *nftTable) groupItems() []nftmodel.Item {
	parts := make([][]nftmodel.Item, workers(len(t.ports)))
	sideBySide(len(t.ports), len(parts), func(w, from, to int) {
		var v nftPortView
		for _, sp := range t.ports[from:to] {
			parts[w] = t.appendGroupItems(parts[w], t.viewPort(&v, sp))
		}
	})
	if len(parts) == 1 {
		return parts[0]
	}
	return slices.Concat(parts...)
}

// workers is how many goroutines build the items of n service ports (or
// Services) side by side: one per groupsPerWorker, up to GOMAXPROCS, and
// at least one.
func workers(n int) int {
	return max(1, min(runtime.GOMAXPROCS(0), n/groupsPerWorker))
}

// groupsPerWorker is the fewest service ports (or Services) worth a
// goroutine of sideBySide (a variable for tests).
var groupsPerWorker = 2048

// sideBySide calls fn(w, from, to) for each part w of k parts of n items,
// in goroutines side by side when there are several.
func sideBySide(n, k int, fn func(w, from, to int)) {
	if k < 2 {
		fn(0, 0, n)
		return
	}
	var wg sync.WaitGroup
	for w := range k {
		wg.Go(func() { fn(w, w*n/k, (w+1)*n/k) })
	}
	wg.Wait()
}

// appendGroupItems appends the section of a service port: its affinity
// sets, then its chains, the first under the port's heading. A port
// without chains has no section.
func (t *nftTable) appendGroupItems(items []nftmodel.Item, v *nftPortView) []nftmodel.Item {
	if v.serviceChain == "" && v.externalChain == "" && v.firewallChain == "" && len(v.all) == 0 {
		return items
	}
	t.describe(v)
	svc := v.svc
	affinity := svc.AffinitySeconds > 0
	desc := string(v.desc)
	from := len(items)

	if affinity {
		for i := range v.all {
			ep := &v.all[i]
			comment := "affinity " + desc + ": clients sent to " + ep.addr.String() + " in the last " + strconv.Itoa(int(svc.AffinitySeconds)) + "s"
			items = append(items, nftmodel.Item{Set: &nftmodel.Set{
				Name: ep.affinity, Comment: comment, Key: keyAddr,
				Dynamic: true, Timeout: time.Duration(svc.AffinitySeconds) * time.Second,
			}})
		}
	}

	// Internal traffic: the cluster IPs.
	if v.serviceChain != "" {
		// Unlike kube-proxy, the chain has no masquerade rule: the
		// services chain marks traffic to every cluster IP with port in
		// the set cluster-frontends (the elements of service-ips that
		// lead to service chains) from outside the pods, and the external
		// chains that go here have marked the packet or pass pod traffic
		// only. A rule less per service: a full sync is faster in the
		// kernel, and a commit that adds a service re-validates less.
		comment := "service " + desc + ": traffic to the cluster IP, picks " + string(appendCountEndpoints(nil, len(v.cluster), ""))
		if v.splitShort {
			comment = "service " + desc + ": traffic of pods and the node to the external frontends, subject to neither policy (as kube-proxy), picks " + string(appendCountEndpoints(nil, len(v.short), ""))
		}
		items = append(items, nftmodel.Item{Chain: &nftmodel.Chain{Name: v.serviceChain, Comment: comment,
			Rules: t.pickRules(v, v.serviceChain, v.serviceSet(), affinity)}})
	}

	// External traffic: external IPs, LoadBalancer IPs and the node port.
	if v.externalChain != "" {
		items = t.appendExternalChains(items, v)
	}

	// loadBalancerSourceRanges: checked before DNAT, whatever the endpoints.
	if v.firewallChain != "" {
		items = append(items, nftmodel.Item{Chain: t.firewallChain(v)})
	}
	if len(items) == from {
		items = append(items, nftmodel.Item{}) // the section is empty
	}
	items[from].Heading = "Service " + desc + "."
	return items
}

// appendExternalChains appends the external chain of a port and, under
// policy Local with local endpoints, its local chain.
func (t *nftTable) appendExternalChains(items []nftmodel.Item, v *nftPortView) []nftmodel.Item {
	svc := v.svc
	affinity := svc.AffinitySeconds > 0
	b := append([]byte("external "), v.desc...)
	b = append(b, ": traffic to "...)
	b = appendExternalFrontends(b, len(v.externalIPs), len(v.lbIPs), v.port.NodePort)
	var rules []nftmodel.Rule
	switch {
	case svc.ExternalLocal:
		b = append(b, ", policy Local: "...)
		if v.shortCircuit() {
			if len(t.podCIDRs) > 0 {
				b = append(b, "pods and the node (masqueraded) go to the service chain, "...)
				rules = append(rules, nftmodel.Rule{t.podMatch(false), nftmodel.GoTo(v.serviceChain)})
			} else {
				b = append(b, "the node (masqueraded) goes to the service chain, "...)
			}
			rules = append(rules,
				nftmodel.Rule{nftmodel.FibLocal{}, markMasqueradeStmt},
				nftmodel.Rule{nftmodel.FibLocal{}, nftmodel.GoTo(v.serviceChain)})
		}
		if len(v.external) > 0 {
			b = append(b, "the rest to the local chain"...)
			rules = append(rules, nftmodel.Rule{nftmodel.GoTo(v.localChain)})
		} else {
			b = append(b, "the rest is dropped (no local endpoint)"...)
		}
	case !v.externalPicks():
		b = append(b, ", policy Cluster: masquerade, then as the service chain"...)
		rules = []nftmodel.Rule{{markMasqueradeStmt}, {nftmodel.GoTo(v.serviceChain)}}
	default:
		b = append(b, ", policy Cluster: masquerade, then picks "...)
		b = appendCountEndpoints(b, len(v.external), "")
		rules = append([]nftmodel.Rule{{markMasqueradeStmt}}, t.pickRules(v, v.externalChain, v.external, affinity)...)
	}
	items = append(items, nftmodel.Item{Chain: &nftmodel.Chain{Name: v.externalChain, Comment: string(b), Rules: rules}})

	if v.localChain != "" {
		b = append(b[:0], "local "...)
		b = append(b, v.desc...)
		if v.splitShort {
			b = append(b, ": traffic to the cluster IP and external traffic, both under policy Local, picks "...)
		} else {
			b = append(b, ": external traffic under policy Local, picks "...)
		}
		b = appendCountEndpoints(b, len(v.external), "local ")
		items = append(items, nftmodel.Item{Chain: &nftmodel.Chain{Name: v.localChain, Comment: string(b),
			Rules: t.pickRules(v, v.localChain, v.external, affinity)}})
	}
	return items
}

// firewallChain is the chain that applies a port's
// loadBalancerSourceRanges.
func (t *nftTable) firewallChain(v *nftPortView) *nftmodel.Chain {
	fam := t.fam
	ranges := familyPrefixes(v.svc.SourceRanges, fam)
	if len(ranges) == 0 {
		// Ranges were given for the other family only: none of this
		// family is allowed (fail closed).
		return &nftmodel.Chain{Name: v.firewallChain,
			Comment: "firewall " + string(v.desc) + ": loadBalancerSourceRanges hold no " + fam.label + " range, so no " + fam.label + " client may reach the LoadBalancer IPs",
			Rules:   []nftmodel.Rule{dropRule}}
	}
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
	return &nftmodel.Chain{Name: v.firewallChain,
		Comment: "firewall " + string(v.desc) + ": only loadBalancerSourceRanges may reach the LoadBalancer IPs",
		Rules: []nftmodel.Rule{{
			nftmodel.AddrMatch{Field: nftmodel.SAddr, Neq: true, Prefixes: minimalPrefixes(allowed), Braces: true},
			nftmodel.Verdict{Kind: nftmodel.Drop},
		}}}
}

// pickRules are what sends a packet of chain to one of eps: the rule that
// looks its endpoint up in an endpoint map (picks.go), or the rules of
// pickRulesOf.
func (t *nftTable) pickRules(v *nftPortView, chain string, eps []nftEndpoint, affinity bool) []nftmodel.Rule {
	if p := t.lookupPick(v.nftPort, chain); p != nil {
		return []nftmodel.Rule{mapPickRule(v.proto, p)}
	}
	return pickRulesOf(v.proto, eps, affinity)
}

// mapPickRule is the rule of a chain that picks through its endpoint map.
func mapPickRule(proto nftmodel.Proto, p *nftPick) nftmodel.Rule {
	return nftmodel.Rule{nftmodel.ProtoMatch{Proto: proto}, nftmodel.DNATMap{Mod: uint32(p.modulus()), Offset: p.offset(), Map: pickMapNames[p.bucket]}}
}

// pickRulesOf returns the rules that send a packet to one of eps: first
// to the endpoint its client stuck to (affinity), else at random. Rule i
// is taken with probability 1/(k-i) of what reaches it, so each endpoint
// gets 1/k. Each rule DNATs itself rather than going to a chain per
// endpoint (kube-proxy's shape): rewriting a service chain when its
// endpoints change then adds no goto, and the kernel does not re-validate
// the whole table.
func pickRulesOf(proto nftmodel.Proto, eps []nftEndpoint, affinity bool) []nftmodel.Rule {
	var rules []nftmodel.Rule
	if affinity {
		for i := range eps {
			rules = append(rules, append(nftmodel.Rule{nftmodel.Lookup{Key: nftmodel.KeySAddr, Set: eps[i].affinity}}, dnatTo(proto, &eps[i])...))
		}
	}
	for i := range eps {
		var r nftmodel.Rule
		if left := len(eps) - i; left > 1 {
			r = nftmodel.Rule{nftmodel.NumgenMatch{Mod: uint32(left), Value: 0}}
		}
		rules = append(rules, append(r, dnatTo(proto, &eps[i])...))
	}
	return rules
}

// dnatTo is the statements that send a packet to ep, refreshing the
// client's affinity first when ep has an affinity set.
func dnatTo(proto nftmodel.Proto, ep *nftEndpoint) nftmodel.Rule {
	var r nftmodel.Rule
	if ep.affinity != "" {
		r = nftmodel.Rule{nftmodel.Update{Set: ep.affinity, Key: nftmodel.KeySAddr}}
	}
	return append(r, nftmodel.ProtoMatch{Proto: proto}, nftmodel.DNAT{To: ep.addr})
}

// eachPickBucket calls fn with the picks of each bucket in use, as
// t.picks orders them (by bucket, then, once assigned, by slot).
func (t *nftTable) eachPickBucket(fn func([]*nftPick)) {
	for start := 0; start < len(t.picks); {
		end := start
		for end < len(t.picks) && t.picks[end].bucket == t.picks[start].bucket {
			end++
		}
		fn(t.picks[start:end])
		start = end
	}
}

// pickMapSet is the endpoint map of one bucket's picks, sorted by slot:
// from each pick's offset on, one key range per endpoint.
func pickMapSet(fam nftFamily, picks []*nftPick) *nftmodel.Set {
	name := pickMapNames[picks[0].bucket]
	s := &nftmodel.Set{Name: name,
		Comment:     name + ": endpoints of the chains whose pick hashes here: from its offset on, a chain's numgen keys map to its endpoints",
		EndpointMod: pickModulus, Interval: true}
	n := 0
	for _, p := range picks {
		n += len(p.eps)
	}
	s.Endpoints = make([]nftmodel.EndpointElement, 0, n)
	for _, p := range picks {
		m := uint32(p.modulus())
		k := uint32(len(p.eps))
		from := p.offset()
		for i, ep := range p.eps {
			n := m / k
			if uint32(i) < m%k {
				n++
			}
			e := nftmodel.EndpointElement{Lo: from, Hi: from + n - 1, To: ep}
			if i == 0 {
				e.Note = p.chain
			}
			s.Endpoints = append(s.Endpoints, e)
			from += n
		}
	}
	return s
}
