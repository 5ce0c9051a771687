package treediff

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strings"

	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/render"
	"netspec.dev/netspec/render/nftmodel"
)

// The kinds of change a diff entry records.
const (
	DiffAdded   = "added"
	DiffRemoved = "removed"
	DiffChanged = "changed"
)

// Traffic kinds of a forwarding change: what the cluster IPs receive; what
// node ports, external and LoadBalancer IPs receive; and, for a Service
// with both traffic policies Local, what pods and the node itself send to
// those external frontends (kube-proxy's short-circuit, plan.Port.ShortCircuit).
const (
	TrafficCluster      = "cluster"
	TrafficExternal     = "external"
	TrafficShortCircuit = "short-circuit"
)

// PlanDiff is the semantic difference between the Plans of two trees, for
// review. Changes that are the same on every node compared are reported
// once, with Node ""; the rest once per node, with Node set. Every list is
// sorted.
type PlanDiff struct {
	// Nodes are every node of either side, by name, with their own changes
	// and their data-plane changes.
	Nodes []NodeDiff `json:"nodes"`
	// Cluster lists changes of the cluster-wide settings.
	Cluster  []FieldChange `json:"cluster,omitempty"`
	Services []ServiceDiff `json:"services,omitempty"`
	DNS      []ZoneDiff    `json:"dns,omitempty"`
	Env      []EnvDiff     `json:"env,omitempty"`
}

// NodeDiff is one node: added (only in the new tree), removed (only in the
// old one) or in both, with the changes of its own settings and the
// data-plane changes (DataPlaneChanges).
type NodeDiff struct {
	Name      string           `json:"name"`
	Change    string           `json:"change,omitempty"` // added, removed, or "" when in both trees
	Fields    []FieldChange    `json:"fields,omitempty"` // zone, addresses
	DataPlane DataPlaneChanges `json:"dataPlane"`
}

// DataPlaneChanges counts, in nftables terms, what applying the new Plan
// on a node changes: the diff of the nftables models render builds for
// the two plans (nftmodel.Diff). Chains are compared by name (changed when
// a rule or the hook differs), sets by declaration (SetsChanged: created
// anew, as when a ClientIP affinity's timeout changes), set and map
// elements by key (one whose value changed counts as removed and added).
type DataPlaneChanges struct {
	ChainsAdded     int `json:"chainsAdded"`
	ChainsRemoved   int `json:"chainsRemoved"`
	ChainsChanged   int `json:"chainsChanged"`
	SetsChanged     int `json:"setsChanged,omitempty"`
	ElementsAdded   int `json:"elementsAdded"`
	ElementsRemoved int `json:"elementsRemoved"`
}

// Zero reports whether nothing changes.
func (c DataPlaneChanges) Zero() bool { return c == DataPlaneChanges{} }

// FieldChange is one setting's old and new value, in words; "" is none.
type FieldChange struct {
	Field string `json:"field"`
	Old   string `json:"old"`
	New   string `json:"new"`
}

// ServiceDiff is one Service added, removed or changed.
type ServiceDiff struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Node is "" for changes seen on every node compared, else the one
	// node this entry is about (endpoint selection under Local traffic
	// policies or topology).
	Node   string `json:"node,omitempty"`
	Change string `json:"change"` // added, removed, changed
	// Service is the new Service when added, the old one when removed.
	Service *ServiceInfo  `json:"service,omitempty"`
	Fields  []FieldChange `json:"fields,omitempty"`
	Ports   []PortDiff    `json:"ports,omitempty"`
}

// Key is namespace/name.
func (s *ServiceDiff) Key() string { return s.Namespace + "/" + s.Name }

// ServiceInfo sums up a Service.
type ServiceInfo struct {
	Type                  string         `json:"type"`
	ClusterIPs            []netip.Addr   `json:"clusterIPs,omitempty"`
	Headless              bool           `json:"headless,omitempty"`
	ExternalName          string         `json:"externalName,omitempty"`
	ExternalIPs           []netip.Addr   `json:"externalIPs,omitempty"`
	LoadBalancerIPs       []netip.Addr   `json:"loadBalancerIPs,omitempty"`
	SourceRanges          []netip.Prefix `json:"sourceRanges,omitempty"`
	AffinitySeconds       int32          `json:"affinitySeconds,omitempty"`
	InternalTrafficPolicy string         `json:"internalTrafficPolicy"`
	ExternalTrafficPolicy string         `json:"externalTrafficPolicy"`
	HealthCheckNodePort   uint16         `json:"healthCheckNodePort,omitempty"`
	// IPVSScheduler is the annotation netspec.dev/ipvs-scheduler, ""
	// when the node's default applies (IPVS data plane only).
	IPVSScheduler string `json:"ipvsScheduler,omitempty"`
	// ProxyName is the label service.kubernetes.io/service-proxy-name:
	// another proxy serves the Service, the node's data plane does not.
	ProxyName string     `json:"proxyName,omitempty"`
	Ports     []PortInfo `json:"ports,omitempty"`
}

// PortInfo sums up a Service port.
type PortInfo struct {
	Name     string `json:"name,omitempty"`
	Protocol string `json:"protocol"`
	Port     uint16 `json:"port"`
	NodePort uint16 `json:"nodePort,omitempty"`
	// TargetPorts are the distinct ports of its endpoints.
	TargetPorts   []uint16 `json:"targetPorts,omitempty"`
	EndpointCount int      `json:"endpointCount"`
	ReadyCount    int      `json:"readyCount"`
}

// PortDiff is one port of a Service, matched by name.
type PortDiff struct {
	PortInfo                      // the new port (the old one when removed)
	Change     string             `json:"change"` // added, removed, changed
	Fields     []FieldChange      `json:"fields,omitempty"`
	Endpoints  []EndpointDiff     `json:"endpointChanges,omitempty"`
	Forwarding []ForwardingChange `json:"forwarding,omitempty"`
}

// EndpointDiff is one endpoint of a port added, removed or changed, with
// its state (the new one; the old one when removed).
type EndpointDiff struct {
	Endpoint    netip.AddrPort `json:"endpoint"`
	Change      string         `json:"change"`
	Ready       bool           `json:"ready"`
	Serving     bool           `json:"serving"`
	Terminating bool           `json:"terminating"`
	NodeName    string         `json:"nodeName,omitempty"`
	// Fields lists what changed: state, nodeName, zone, hostname,
	// zoneHints, nodeHints, pod.
	Fields []FieldChange `json:"fields,omitempty"`
}

// State is the endpoint's state in words: ready, not ready, terminating,
// serving and terminating.
func (e *EndpointDiff) State() string {
	return endpointState(plan.Endpoint{Ready: e.Ready, Serving: e.Serving, Terminating: e.Terminating})
}

// ForwardingChange is an endpoint, present in both trees, that a node
// starts or stops forwarding cluster or external traffic to. Endpoints
// added or removed are not listed: their state says it.
type ForwardingChange struct {
	Traffic  string         `json:"traffic"` // cluster, external or short-circuit
	Change   string         `json:"change"`  // added (now forwards) or removed
	Endpoint netip.AddrPort `json:"endpoint"`
}

// ZoneDiff is the change of one DNS zone. SOA records are not compared
// (their serial follows the content), nor are TTLs (see the cluster's
// dnsTTL).
type ZoneDiff struct {
	Zone    string      `json:"zone"`
	Node    string      `json:"node,omitempty"`
	Change  string      `json:"change"` // added, removed, changed
	Added   []DNSRecord `json:"added,omitempty"`
	Removed []DNSRecord `json:"removed,omitempty"`
}

// DNSRecord is one resource record.
type DNSRecord struct {
	Name string `json:"name"`
	Type string `json:"type"`
	TTL  uint32 `json:"ttl"`
	Data string `json:"data"`
}

// String is the record without its TTL: name type data.
func (r DNSRecord) String() string { return r.Name + " " + r.Type + " " + r.Data }

// EnvDiff is the change of one namespace's service environment.
type EnvDiff struct {
	Namespace string      `json:"namespace"`
	Node      string      `json:"node,omitempty"`
	Change    string      `json:"change"` // added, removed, changed
	Added     []EnvVar    `json:"added,omitempty"`
	Removed   []EnvVar    `json:"removed,omitempty"`
	Changed   []EnvChange `json:"changed,omitempty"`
}

// EnvVar is one variable.
type EnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// EnvChange is one variable whose value changed.
type EnvChange struct {
	Name string `json:"name"`
	Old  string `json:"old"`
	New  string `json:"new"`
}

// Empty reports whether the two sides do the same.
func (d *PlanDiff) Empty() bool {
	if len(d.Cluster)+len(d.Services)+len(d.DNS)+len(d.Env) > 0 {
		return false
	}
	for _, n := range d.Nodes {
		if n.Change != "" || len(n.Fields) > 0 || !n.DataPlane.Zero() {
			return false
		}
	}
	return true
}

// Diff compares the Plans of two trees, keyed by node name: every node of
// either map (a nil Plan counts as absent). Nodes in only one map are
// reported as added or removed with their whole data plane; Services, DNS
// and env are compared on the nodes in both. It is pure and deterministic.
func Diff(old, new map[string]*plan.Plan) *PlanDiff { return diff(old, new, true) }

// DiffWithoutDataPlane is Diff without the data-plane counts (every
// NodeDiff's DataPlane is zero), for a caller that prints the changes but
// not the counts: they cost two nftables models and their diff (a second
// at 50,000 Services).
func DiffWithoutDataPlane(old, new map[string]*plan.Plan) *PlanDiff { return diff(old, new, false) }

func diff(old, new map[string]*plan.Plan, dataPlane bool) *PlanDiff {
	d := &PlanDiff{Nodes: []NodeDiff{}}
	names := map[string]bool{}
	for _, side := range []map[string]*plan.Plan{old, new} {
		for n, p := range side {
			if p != nil {
				names[n] = true
			}
		}
	}
	var common []string
	for _, n := range slices.Sorted(maps.Keys(names)) {
		o, nw := old[n], new[n]
		nd := NodeDiff{Name: n}
		if dataPlane {
			nd.DataPlane = dataPlaneDiff(o, nw)
		}
		switch {
		case o == nil:
			nd.Change = DiffAdded
		case nw == nil:
			nd.Change = DiffRemoved
		default:
			common = append(common, n)
			nd.Fields = nodeFields(o.Node, nw.Node)
		}
		d.Nodes = append(d.Nodes, nd)
	}
	if len(common) == 0 {
		return d
	}
	// The cluster settings come from the tree, not the node.
	d.Cluster = clusterFields(old[common[0]].Cluster, new[common[0]].Cluster)
	d.Services = mergeServices(old, new, common)
	d.DNS = mergePerNode(common, func(n string) []ZoneDiff { return diffDNS(old[n].DNS, new[n].DNS) },
		func(z *ZoneDiff, n string) { z.Node = n })
	d.Env = mergePerNode(common, func(n string) []EnvDiff { return diffEnv(old[n].Env, new[n].Env) },
		func(e *EnvDiff, n string) { e.Node = n })
	return d
}

// mergePerNode reports the per-node lists once when every node has the
// same one, else each node's with its name.
func mergePerNode[T any](nodes []string, per func(string) []T, setNode func(*T, string)) []T {
	lists := make([][]T, len(nodes))
	same := true
	for i, n := range nodes {
		lists[i] = per(n)
		if i > 0 && !reflect.DeepEqual(lists[i], lists[0]) {
			same = false
		}
	}
	if same {
		return lists[0]
	}
	var out []T
	for i, n := range nodes {
		for j := range lists[i] {
			setNode(&lists[i][j], n)
		}
		out = append(out, lists[i]...)
	}
	return out
}

// ---- services ----

// fwdItem is one forwarding change of one node, comparable across nodes.
type fwdItem struct {
	svc, port string // service key, port name
	ForwardingChange
}

// mergeServices diffs the Services of every common node and reports what
// is equal on all of them once.
func mergeServices(old, new map[string]*plan.Plan, nodes []string) []ServiceDiff {
	bases := make([]map[string]ServiceDiff, len(nodes))
	fwds := make([][]fwdItem, len(nodes))
	count := map[fwdItem]int{}
	keys := map[string]bool{}
	for i, n := range nodes {
		bases[i], fwds[i] = diffServices(old[n], new[n])
		for k := range bases[i] {
			keys[k] = true
		}
		for _, f := range fwds[i] {
			count[f]++
			keys[f.svc] = true
		}
	}
	// Port infos and order, from the first node (Services do not depend on the node).
	ref := map[string]pair[plan.Service]{}
	for _, s := range match(old[nodes[0]].Services, new[nodes[0]].Services, (*plan.Service).Key) {
		ref[s.either().Key()] = s
	}

	var out []ServiceDiff
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		shared := true
		for i := range nodes {
			b, ok := bases[i][k]
			shared = shared && ok && reflect.DeepEqual(b, bases[0][k])
		}
		// entry adds the entry of node ("" for every node) from the i-th
		// node's changes: its base ones with base, and its forwarding
		// changes seen on every node (all) or not.
		entry := func(node string, i int, base, all bool) {
			ns, name, _ := strings.Cut(k, "/")
			e := ServiceDiff{Namespace: ns, Name: name, Node: node, Change: DiffChanged}
			b, ok := bases[i][k]
			if ok = ok && base; ok {
				e = b
				e.Node = node
				e.Ports = slices.Clone(b.Ports)
			}
			for _, f := range fwds[i] {
				if f.svc == k && (count[f] == len(nodes)) == all {
					addForwarding(&e, ref, f)
				}
			}
			if ok || len(e.Ports) > 0 {
				out = append(out, e)
			}
		}
		entry("", 0, shared, true)
		for i, n := range nodes {
			entry(n, i, !shared, false)
		}
	}
	for i := range out {
		sortPorts(&out[i], ref[out[i].Key()])
	}
	return out
}

func addForwarding(e *ServiceDiff, ref map[string]pair[plan.Service], f fwdItem) {
	for i := range e.Ports {
		if e.Ports[i].Name == f.port {
			e.Ports[i].Forwarding = append(e.Ports[i].Forwarding, f.ForwardingChange)
			return
		}
	}
	pd := PortDiff{Change: DiffChanged}
	if s := ref[f.svc].new; s != nil {
		if i := slices.IndexFunc(s.Ports, func(p plan.Port) bool { return p.Name == f.port }); i >= 0 {
			pd.PortInfo = portInfo(&s.Ports[i])
		}
	}
	pd.Forwarding = []ForwardingChange{f.ForwardingChange}
	e.Ports = append(e.Ports, pd)
}

// sortPorts puts ports in the new Service's order, removed ones after in
// the old one's, and sorts each port's forwarding changes.
func sortPorts(e *ServiceDiff, r pair[plan.Service]) {
	order := func(name string) int {
		for i, s := range []*plan.Service{r.new, r.old} {
			if s == nil {
				continue
			}
			if j := slices.IndexFunc(s.Ports, func(p plan.Port) bool { return p.Name == name }); j >= 0 {
				return i<<16 + j
			}
		}
		return 1 << 20
	}
	slices.SortStableFunc(e.Ports, func(a, b PortDiff) int { return cmp.Compare(order(a.Name), order(b.Name)) })
	for i := range e.Ports {
		slices.SortFunc(e.Ports[i].Forwarding, func(a, b ForwardingChange) int {
			return cmp.Or(strings.Compare(a.Traffic, b.Traffic), strings.Compare(a.Change, b.Change),
				a.Endpoint.Compare(b.Endpoint))
		})
	}
}

// diffServices compares the Services of one node's two Plans: the changes
// without forwarding, by key, and the forwarding changes.
func diffServices(old, new *plan.Plan) (map[string]ServiceDiff, []fwdItem) {
	out := map[string]ServiceDiff{}
	var fwd []fwdItem
	for _, s := range match(old.Services, new.Services, (*plan.Service).Key) {
		switch {
		case s.old == nil || s.new == nil:
			e := s.either()
			out[e.Key()] = ServiceDiff{Namespace: e.Namespace, Name: e.Name, Change: s.change(), Service: serviceInfo(e)}
		case !s.old.Equal(s.new):
			sd, f := diffService(s.old, s.new)
			if len(sd.Fields) > 0 || len(sd.Ports) > 0 {
				out[sd.Key()] = sd
			}
			fwd = append(fwd, f...)
		}
	}
	return out, fwd
}

func diffService(o, n *plan.Service) (ServiceDiff, []fwdItem) {
	sd := ServiceDiff{Namespace: n.Namespace, Name: n.Name, Change: DiffChanged}
	oi, ni := serviceInfo(o), serviceInfo(n)
	field := func(name, a, b string) { addField(&sd.Fields, name, a, b) }
	field("type", oi.Type, ni.Type)
	field("clusterIPs", clusterIPWords(oi), clusterIPWords(ni))
	field("externalName", oi.ExternalName, ni.ExternalName)
	field("externalIPs", join(oi.ExternalIPs), join(ni.ExternalIPs))
	field("loadBalancerIPs", join(oi.LoadBalancerIPs), join(ni.LoadBalancerIPs))
	field("loadBalancerSourceRanges", join(oi.SourceRanges), join(ni.SourceRanges))
	field("sessionAffinity", affinityWords(oi.AffinitySeconds), affinityWords(ni.AffinitySeconds))
	field("internalTrafficPolicy", oi.InternalTrafficPolicy, ni.InternalTrafficPolicy)
	field("externalTrafficPolicy", oi.ExternalTrafficPolicy, ni.ExternalTrafficPolicy)
	field("healthCheckNodePort", portWords(oi.HealthCheckNodePort), portWords(ni.HealthCheckNodePort))
	field("ipvsScheduler", schedulerWords(oi.IPVSScheduler), schedulerWords(ni.IPVSScheduler))
	field("serviceProxyName", proxyWords(oi.ProxyName), proxyWords(ni.ProxyName))

	var fwd []fwdItem
	routed := len(o.ClusterIPs) > 0 && len(n.ClusterIPs) > 0
	external := hasExternal(o) && hasExternal(n)
	for _, pp := range match(o.Ports, n.Ports, func(p *plan.Port) string { return p.Name }) {
		op, np := pp.old, pp.new
		if op == nil || np == nil {
			sd.Ports = append(sd.Ports, PortDiff{PortInfo: portInfo(pp.either()), Change: pp.change()})
			continue
		}
		pd := PortDiff{PortInfo: portInfo(np), Change: DiffChanged}
		pf := func(name, a, b string) { addField(&pd.Fields, name, a, b) }
		pf("protocol", op.Protocol, np.Protocol)
		pf("port", fmt.Sprint(op.Port), fmt.Sprint(np.Port))
		pf("nodePort", portWords(op.NodePort), portWords(np.NodePort))
		pf("targetPort", join(portInfo(op).TargetPorts), join(pd.TargetPorts))
		pd.Endpoints = diffEndpoints(op.Endpoints, np.Endpoints)
		if len(pd.Fields) > 0 || len(pd.Endpoints) > 0 {
			sd.Ports = append(sd.Ports, pd)
		}
		changes := func(traffic string, was, is []int) {
			for _, f := range forwarding(traffic, op, was, np, is) {
				fwd = append(fwd, fwdItem{svc: n.Key(), port: np.Name, ForwardingChange: f})
			}
		}
		if routed {
			changes(TrafficCluster, op.Cluster, np.Cluster)
		}
		if external {
			changes(TrafficExternal, op.External, np.External)
		}
		if external && (op.ShortCircuit != nil || np.ShortCircuit != nil) {
			// Otherwise the short-circuit follows the cluster set, whose
			// changes are reported already.
			changes(TrafficShortCircuit, op.ShortCircuitSet(), np.ShortCircuitSet())
		}
	}
	return sd, fwd
}

// forwarding compares the endpoints one traffic kind goes to, for
// endpoints on both sides.
func forwarding(traffic string, op *plan.Port, oldSet []int, np *plan.Port, newSet []int) []ForwardingChange {
	was, is := addrSet(op.Endpoints, oldSet), addrSet(np.Endpoints, newSet)
	var out []ForwardingChange
	for _, e := range match(op.Endpoints, np.Endpoints, (*plan.Endpoint).AddrPort) {
		if e.old == nil || e.new == nil {
			continue
		}
		switch a := e.new.AddrPort(); {
		case is[a] && !was[a]:
			out = append(out, ForwardingChange{Traffic: traffic, Change: DiffAdded, Endpoint: a})
		case was[a] && !is[a]:
			out = append(out, ForwardingChange{Traffic: traffic, Change: DiffRemoved, Endpoint: a})
		}
	}
	return out
}

func addrSet(eps []plan.Endpoint, idx []int) map[netip.AddrPort]bool {
	m := map[netip.AddrPort]bool{}
	for _, i := range idx {
		if i >= 0 && i < len(eps) {
			m[eps[i].AddrPort()] = true
		}
	}
	return m
}

func hasExternal(s *plan.Service) bool {
	return len(s.ExternalIPs) > 0 || len(s.LoadBalancerIPs) > 0 ||
		slices.ContainsFunc(s.Ports, func(p plan.Port) bool { return p.NodePort != 0 })
}

func diffEndpoints(old, new []plan.Endpoint) []EndpointDiff {
	var out []EndpointDiff
	for _, p := range match(old, new, (*plan.Endpoint).AddrPort) {
		o, e := p.old, p.new
		if o == nil || e == nil {
			out = append(out, endpointDiff(*p.either(), p.change(), nil))
			continue
		}
		var fields []FieldChange
		f := func(name, a, b string) { addField(&fields, name, a, b) }
		f("state", endpointState(*o), endpointState(*e))
		f("nodeName", o.NodeName, e.NodeName)
		f("zone", o.Zone, e.Zone)
		f("hostname", o.Hostname(), e.Hostname())
		f("zoneHints", strings.Join(o.ZoneHints(), ","), strings.Join(e.ZoneHints(), ","))
		f("nodeHints", strings.Join(o.NodeHints(), ","), strings.Join(e.NodeHints(), ","))
		f("pod", o.Pod, e.Pod)
		if len(fields) > 0 {
			out = append(out, endpointDiff(*e, DiffChanged, fields))
		}
	}
	slices.SortFunc(out, func(a, b EndpointDiff) int { return a.Endpoint.Compare(b.Endpoint) })
	return out
}

func endpointDiff(e plan.Endpoint, change string, fields []FieldChange) EndpointDiff {
	return EndpointDiff{
		Endpoint: e.AddrPort(), Change: change,
		Ready: e.Ready, Serving: e.Serving, Terminating: e.Terminating, NodeName: e.NodeName,
		Fields: fields,
	}
}

func endpointState(e plan.Endpoint) string {
	switch {
	case e.Ready && e.Terminating:
		return "ready, terminating"
	case e.Ready:
		return "ready"
	case e.Terminating && e.Serving:
		return "serving, terminating"
	case e.Terminating:
		return "terminating"
	case e.Serving:
		return "serving, not ready"
	}
	return "not ready"
}

func serviceInfo(s *plan.Service) *ServiceInfo {
	si := &ServiceInfo{
		Type:                  s.Type,
		ClusterIPs:            slices.Clone(s.ClusterIPs),
		Headless:              s.Headless,
		ExternalName:          s.ExternalName,
		ExternalIPs:           slices.Clone(s.ExternalIPs),
		LoadBalancerIPs:       slices.Clone(s.LoadBalancerIPs),
		SourceRanges:          slices.Clone(s.SourceRanges),
		AffinitySeconds:       s.AffinitySeconds,
		InternalTrafficPolicy: plan.TrafficPolicy(s.InternalLocal),
		ExternalTrafficPolicy: plan.TrafficPolicy(s.ExternalLocal),
		HealthCheckNodePort:   s.HealthCheckNodePort,
		IPVSScheduler:         s.IPVSScheduler,
		ProxyName:             s.ProxyName,
	}
	for i := range s.Ports {
		si.Ports = append(si.Ports, portInfo(&s.Ports[i]))
	}
	return si
}

func portInfo(p *plan.Port) PortInfo {
	pi := PortInfo{Name: p.Name, Protocol: p.Protocol, Port: p.Port, NodePort: p.NodePort, EndpointCount: len(p.Endpoints)}
	for _, e := range p.Endpoints {
		if e.Ready {
			pi.ReadyCount++
		}
		// The endpoints of a headless Service without ports (the plan's
		// sentinel port) have no port either.
		if e.Port != 0 && !slices.Contains(pi.TargetPorts, e.Port) {
			pi.TargetPorts = append(pi.TargetPorts, e.Port)
		}
	}
	slices.Sort(pi.TargetPorts)
	return pi
}

func clusterIPWords(s *ServiceInfo) string {
	if s.Headless {
		return "None"
	}
	return join(s.ClusterIPs)
}

// proxyWords names the proxy that serves a Service: netspec, or the
// other proxy its service-proxy-name label names.
func proxyWords(s string) string { return cmp.Or(s, "netspec") }

// schedulerWords names an IPVS scheduler, or the node's default.
func schedulerWords(s string) string { return cmp.Or(s, "the node's default") }

func affinityWords(sec int32) string {
	if sec > 0 {
		return fmt.Sprintf("ClientIP %ds", sec)
	}
	return "None"
}

func portWords(p uint16) string {
	if p == 0 {
		return ""
	}
	return fmt.Sprint(p)
}

// join writes xs comma-separated.
func join[T any](xs []T) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

// ---- node and cluster ----

// addField adds to fields the setting name when its old and new words
// differ.
func addField(fields *[]FieldChange, name, old, new string) {
	if old != new {
		*fields = append(*fields, FieldChange{Field: name, Old: old, New: new})
	}
}

func nodeFields(o, n plan.Node) []FieldChange {
	var out []FieldChange
	addField(&out, "zone", o.Zone, n.Zone)
	addField(&out, "addresses", join(o.IPs), join(n.IPs))
	return out
}

func clusterFields(o, n plan.Cluster) []FieldChange {
	var out []FieldChange
	f := func(name, a, b string) { addField(&out, name, a, b) }
	f("clusterDomain", o.Domain, n.Domain)
	f("serviceCIDRs", join(o.ServiceCIDRs), join(n.ServiceCIDRs))
	f("podCIDRs", join(o.PodCIDRs), join(n.PodCIDRs))
	f("nodePortAddresses", join(o.NodePortAddresses), join(n.NodePortAddresses))
	f("dnsTTL", fmt.Sprint(o.DNSTTL), fmt.Sprint(n.DNSTTL))
	f("dnsAddress", addrOrNone(o.DNSAddress), addrOrNone(n.DNSAddress))
	return out
}

// addrOrNone writes an address, or "none" for the zero Addr.
func addrOrNone(a netip.Addr) string {
	if !a.IsValid() {
		return "none"
	}
	return a.String()
}

// ---- DNS and env ----

func diffDNS(old, new plan.DNS) []ZoneDiff {
	var out []ZoneDiff
	for _, z := range match(old.Zones, new.Zones, func(z *plan.Zone) string { return z.Name }) {
		// A zone on one side only is all added or all removed.
		zd := ZoneDiff{Zone: z.either().Name, Change: z.change()}
		for _, r := range match(recordList(z.old), recordList(z.new), (*DNSRecord).String) {
			switch {
			case r.old == nil:
				zd.Added = append(zd.Added, *r.new)
			case r.new == nil:
				zd.Removed = append(zd.Removed, *r.old)
			}
		}
		if zd.Change != DiffChanged || len(zd.Added)+len(zd.Removed) > 0 {
			out = append(out, zd)
		}
	}
	slices.SortFunc(out, func(a, b ZoneDiff) int { return strings.Compare(a.Zone, b.Zone) })
	return out
}

// recordList is a zone's records but the SOA, in zone order.
func recordList(z *plan.Zone) []DNSRecord {
	if z == nil {
		return nil
	}
	var out []DNSRecord
	for _, r := range z.Records {
		if r.Type != "SOA" {
			out = append(out, DNSRecord(r))
		}
	}
	return out
}

// diffEnv compares the env files of two Plans; their variables are sorted
// by name, and so are those the diff lists.
func diffEnv(old, new []plan.EnvFile) []EnvDiff {
	vars := func(f *plan.EnvFile) []plan.EnvVar {
		if f == nil {
			return nil
		}
		return f.Vars
	}
	var out []EnvDiff
	for _, f := range match(old, new, func(f *plan.EnvFile) string { return f.Namespace }) {
		ed := EnvDiff{Namespace: f.either().Namespace, Change: f.change()}
		for _, v := range match(vars(f.old), vars(f.new), func(v *plan.EnvVar) string { return v.Name }) {
			switch {
			case v.old == nil:
				ed.Added = append(ed.Added, EnvVar(*v.new))
			case v.new == nil:
				ed.Removed = append(ed.Removed, EnvVar(*v.old))
			case v.old.Value != v.new.Value:
				ed.Changed = append(ed.Changed, EnvChange{Name: v.new.Name, Old: v.old.Value, New: v.new.Value})
			}
		}
		// A namespace that appears or goes without variables changes no file content worth reviewing.
		if len(ed.Added)+len(ed.Removed)+len(ed.Changed) > 0 {
			out = append(out, ed)
		}
	}
	slices.SortFunc(out, func(a, b EnvDiff) int { return strings.Compare(a.Namespace, b.Namespace) })
	return out
}

// ---- matching ----

// pair is an item of an old list and the item of the new one with the
// same key, nil on the side that lacks it.
type pair[T any] struct{ old, new *T }

// either is the new item, or the old one when it was removed.
func (p pair[T]) either() *T { return cmp.Or(p.new, p.old) }

// change is added, removed or changed.
func (p pair[T]) change() string {
	switch {
	case p.old == nil:
		return DiffAdded
	case p.new == nil:
		return DiffRemoved
	}
	return DiffChanged
}

// match pairs the items of old and new by key: every item of new in its
// order, with the old one of its key or none, then the items of old whose
// key new lacks, in their order.
func match[T any, K comparable](old, new []T, key func(*T) K) []pair[T] {
	olds := make(map[K]*T, len(old))
	for i := range old {
		olds[key(&old[i])] = &old[i]
	}
	news := make(map[K]bool, len(new))
	out := make([]pair[T], 0, len(new))
	for i := range new {
		k := key(&new[i])
		news[k] = true
		out = append(out, pair[T]{old: olds[k], new: &new[i]})
	}
	for i := range old {
		if !news[key(&old[i])] {
			out = append(out, pair[T]{old: &old[i]})
		}
	}
	return out
}

// ---- data plane ----

// dataPlaneDiff counts what applying new on a node changes in nftables:
// the diff of the two models render builds (nftmodel.Diff).
func dataPlaneDiff(old, new *plan.Plan) DataPlaneChanges {
	model := func(p *plan.Plan) *nftmodel.Ruleset {
		if p == nil {
			return nil
		}
		return render.NFTablesModel(p)
	}
	return DataPlaneChanges(nftmodel.Diff(model(old), model(new)))
}
