package compiler

import (
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"netspec.dev/netspec/internal/suggest"

	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/schema"
)

// IPVSSchedulerAnnotation names, on a Service, the scheduler of its IPVS
// virtual servers (the schema allows rr, wrr, lc, wlc, sh, dh, sed, nq and
// mh); without it a node uses its default (--ipvs-scheduler).
const IPVSSchedulerAnnotation = "netspec.dev/ipvs-scheduler"

// proxyName is plan.Service.ProxyName of a Service: its
// schema.ServiceProxyNameLabel, `""` when the label is there with an empty
// value (kube-proxy leaves that Service alone too), "" without it.
func proxyName(o *schema.Service) string {
	v, ok := o.Metadata.Labels.Lookup(schema.ServiceProxyNameLabel)
	if ok && v == "" {
		return `""`
	}
	return v
}

// Compile makes the Plan of one node from a validated tree: objs are the
// tree's objects and checked is what Validate returned for them (it must
// hold no errors). It is pure: the same input gives the same Plan.
func Compile(objs []*schema.Object, checked *Checked, node string) (*plan.Plan, error) {
	s, err := CompileStaged(objs, checked, node)
	if err != nil {
		return nil, err
	}
	return s.Finish(), nil
}

// Staged is a plan compiled in two steps. Plan first holds the node, the
// cluster and the Services, which is all the kernel's rules are made of;
// Finish adds the DNS records and env files, which only the state dir and
// the DNS server need. A daemon programs the kernel between the two steps,
// so that the names do not delay the rules.
type Staged struct {
	Plan *plan.Plan // without DNS and Env until Finish
	// FailOpen are the Services (namespace/name, sorted) that a NotReady
	// view (Options) left as the tree has them because every endpoint a
	// port of theirs uses on this node fails its probes.
	FailOpen   []string
	namespaces []string
	finished   bool
	memo       *Memo // nil: none
}

// CompileStaged is the first step of Compile: Plan without DNS records
// and env files.
func CompileStaged(objs []*schema.Object, checked *Checked, node string) (*Staged, error) {
	return compileStaged(nil, objs, checked, node, Options{})
}

// CompileStagedWith is CompileStaged with options: a node agent's view of
// its probed endpoints.
func CompileStagedWith(objs []*schema.Object, checked *Checked, node string, o Options) (*Staged, error) {
	return compileStaged(nil, objs, checked, node, o)
}

// compileStaged is CompileStaged, reusing m (nil: nothing).
func compileStaged(m *Memo, objs []*schema.Object, checked *Checked, node string, o Options) (*Staged, error) {
	if n := checked.Diags.Errors(); n > 0 {
		return nil, fmt.Errorf("the tree has %d errors; validate it first", n)
	}
	c := newCompilation(objs, checked)
	n, err := c.node(node)
	if err != nil {
		return nil, err
	}
	p := &plan.Plan{FormatVersion: plan.FormatVersion, Node: n, Cluster: c.clusterPlan()}
	// Services are independent of each other: compiling them uses every
	// core. Results land in fixed slots, so the Plan does not depend on
	// scheduling.
	p.Services = make([]plan.Service, len(c.services))
	failOpen := make([]bool, len(c.services))
	if m == nil {
		parallel(len(c.services), func(i int) {
			svc := c.services[i].Service
			p.Services[i] = c.service(svc, n)
			if v := withView(svc, &p.Services[i], n, o.NotReady, nil); v != nil {
				p.Services[i], failOpen[i] = v.out, v.failOpen
			}
		})
		return &Staged{Plan: p, FailOpen: failOpenKeys(p, failOpen), namespaces: c.namespaces}, nil
	}
	m.compile.begin(c, n)
	compiled := make([]*compiledService, len(c.services))
	parallel(len(c.services), func(i int) {
		cs := m.compile.compile(c, c.services[i].Service, n)
		compiled[i] = cs
		p.Services[i] = *cs.out
		cs.view = withView(c.services[i].Service, cs.out, n, o.NotReady, cs.view)
		if cs.view != nil {
			p.Services[i], failOpen[i] = cs.view.out, cs.view.failOpen
		}
		cs.hold(p, i)
	})
	m.compile.end(c, compiled)
	m.compile.last.failing = o.Failing
	m.compile.last.header = plan.Plan{FormatVersion: p.FormatVersion, Node: p.Node, Cluster: p.Cluster}
	m.compile.last.namespaces = c.namespaces
	return &Staged{Plan: p, FailOpen: failOpenKeys(p, failOpen), namespaces: c.namespaces, memo: m}, nil
}

// failOpenKeys returns the keys of the Services marked in failOpen.
func failOpenKeys(p *plan.Plan, failOpen []bool) []string {
	var out []string
	for i, f := range failOpen {
		if f {
			out = append(out, p.Services[i].Key())
		}
	}
	return out
}

// Finish adds the DNS records and env files to Plan and returns it; the
// Services stay as they are. Calling it again returns the same plan.
func (s *Staged) Finish() *plan.Plan {
	if s.finished {
		return s.Plan
	}
	s.finished = true
	p := s.Plan
	if s.memo != nil {
		defer s.memo.finish.keep(p, s.namespaces)
		if s.memo.finish.reuse(p, s.namespaces) {
			return p
		}
	}
	// DNS and env only read the Services: they are made at the same time.
	var wg sync.WaitGroup
	wg.Go(func() { p.DNS = dnsRecords(p) })
	p.Env = envFiles(p, s.namespaces)
	wg.Wait()
	return p
}

// parallel calls f(i) for i in [0, n), spread over the available cores.
func parallel(n int, f func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), max(1, n/256))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				f(i)
			}
		})
	}
	wg.Wait()
}

// compilation holds the indexes of one tree.
type compilation struct {
	checked    *Checked
	services   []*schema.Object // sorted by namespace/name
	nodes      map[string]*schema.Node
	pods       *podIndex
	endpoints  map[string]*schema.Endpoints       // by namespace/name
	slices     map[string][]*schema.EndpointSlice // by namespace/service name, in object order
	namespaces []string                           // every namespace of the tree, sorted

	// objs are the tree's objects; podNames indexes their Pods by
	// namespace/name, made at the first targetRef that needs it (refPod),
	// so that a tree without targetRefs never pays for it.
	objs         []*schema.Object
	podNamesOnce sync.Once
	podNames     map[string]*schema.Pod
}

func newCompilation(objs []*schema.Object, checked *Checked) *compilation {
	c := &compilation{
		objs:      objs,
		checked:   checked,
		nodes:     map[string]*schema.Node{},
		pods:      checked.pods,
		endpoints: map[string]*schema.Endpoints{},
		slices:    map[string][]*schema.EndpointSlice{},
	}
	ns := map[string]bool{}
	for _, o := range objs {
		if schema.Namespaced(o.Kind) {
			ns[o.Meta().Namespace] = true
		}
		switch {
		case o.Service != nil:
			c.services = append(c.services, o)
		case o.Node != nil:
			c.nodes[o.Node.Metadata.Name] = o.Node
		case o.Endpoints != nil:
			c.endpoints[o.Endpoints.Metadata.Namespace+"/"+o.Endpoints.Metadata.Name] = o.Endpoints
		case o.EndpointSlice != nil:
			if svc := o.EndpointSlice.Metadata.Labels.Get(schema.ServiceNameLabel); svc != "" {
				k := o.EndpointSlice.Metadata.Namespace + "/" + svc
				c.slices[k] = append(c.slices[k], o.EndpointSlice)
			}
		}
	}
	if c.pods == nil {
		c.pods = newPodIndex(objs)
	}
	sort.SliceStable(c.services, func(i, j int) bool {
		a, b := c.services[i].Service.Metadata, c.services[j].Service.Metadata
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
	for n := range ns {
		c.namespaces = append(c.namespaces, n)
	}
	sort.Strings(c.namespaces)
	return c
}

func (c *compilation) node(name string) (plan.Node, error) {
	n, ok := c.nodes[name]
	if !ok {
		var names []string
		for k := range c.nodes {
			names = append(names, k)
		}
		sort.Strings(names)
		if len(names) == 0 {
			return plan.Node{}, fmt.Errorf("node %s: the tree has no Node objects; add one for every node that runs netspec", name)
		}
		if best, ok := suggest.Closest(name, names); ok {
			return plan.Node{}, fmt.Errorf("node %s is not in the tree; did you mean %s? (its nodes: %s)", name, best, strings.Join(names, ", "))
		}
		return plan.Node{}, fmt.Errorf("node %s is not in the tree (its nodes: %s)", name, strings.Join(names, ", "))
	}
	pn := plan.Node{Name: name, Zone: n.Metadata.Labels.Get(schema.ZoneLabel)}
	for _, a := range n.Status.Addresses {
		if a.Type != "InternalIP" && a.Type != "ExternalIP" {
			continue
		}
		if ip, err := netip.ParseAddr(a.Address); err == nil {
			pn.IPs = append(pn.IPs, ip.Unmap())
		}
	}
	sortAddrs(&pn.IPs)
	return pn, nil
}

func (c *compilation) clusterPlan() plan.Cluster {
	spec := c.checked.Cluster
	pc := plan.Cluster{Domain: strings.TrimSuffix(spec.ClusterDomain, "."), DNSTTL: uint32(spec.DNSTTL)}
	for _, s := range spec.ServiceCIDRs {
		if p, err := netip.ParsePrefix(s); err == nil {
			pc.ServiceCIDRs = append(pc.ServiceCIDRs, p.Masked())
		}
	}
	for _, s := range spec.PodCIDRs {
		if p, err := netip.ParsePrefix(s); err == nil {
			pc.PodCIDRs = append(pc.PodCIDRs, p.Masked())
		}
	}
	for _, s := range spec.NodePortAddresses {
		if p, ok := parsePrefix(s); ok {
			pc.NodePortAddresses = append(pc.NodePortAddresses, p)
		}
	}
	if ip, err := netip.ParseAddr(spec.DNSAddress); err == nil {
		pc.DNSAddress = ip.Unmap()
	}
	return pc
}

func sortAddrs(a *[]netip.Addr) {
	slices.SortFunc(*a, func(x, y netip.Addr) int { return x.Compare(y) })
	*a = slices.Compact(*a)
}

func parseAddrs(ss []string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, a.Unmap())
		}
	}
	sortAddrs(&out)
	return out
}

func (c *compilation) service(o *schema.Service, node plan.Node) plan.Service {
	sp := &o.Spec
	ps := plan.Service{
		Namespace:     o.Metadata.Namespace,
		Name:          o.Metadata.Name,
		Type:          sp.Type,
		Headless:      isHeadless(sp),
		ExternalIPs:   parseAddrs(sp.ExternalIPs),
		InternalLocal: sp.InternalTrafficPolicy == "Local",
		ExternalLocal: sp.ExternalTrafficPolicy == "Local",
		ProxyName:     proxyName(o),
	}
	if sp.Type == "ExternalName" {
		ps.ExternalName = strings.ToLower(strings.TrimSuffix(sp.ExternalName, "."))
		ps.Headless = false
	}
	alloc, _ := c.checked.Alloc.Service(ps.Namespace, ps.Name)
	for _, ip := range alloc.ClusterIPs {
		ps.ClusterIPs = append(ps.ClusterIPs, ip.Addr.Unmap())
	}
	if ps.ProxyName == "" {
		// The other proxy answers health checks, if anyone does.
		ps.HealthCheckNodePort = uint16(alloc.HealthCheckNodePort)
	}
	if sp.Type == "LoadBalancer" {
		// spec.loadBalancerIP is a request to the load balancer, not an
		// address the nodes capture: kube-proxy does not program it.
		lb := []string{}
		for _, in := range o.Status.LoadBalancer.Ingress {
			// ipMode Proxy: the load balancer proxies, so its IP is not
			// a destination nodes see (kube-proxy skips it too).
			if in.IP != "" && in.IPMode != "Proxy" {
				lb = append(lb, in.IP)
			}
		}
		ps.LoadBalancerIPs = parseAddrs(lb)
		for _, r := range sp.LoadBalancerSourceRanges {
			if p, err := netip.ParsePrefix(strings.TrimSpace(r)); err == nil {
				ps.SourceRanges = append(ps.SourceRanges, p.Masked())
			}
		}
		slices.SortFunc(ps.SourceRanges, func(a, b netip.Prefix) int {
			if c := a.Addr().Compare(b.Addr()); c != 0 {
				return c
			}
			return a.Bits() - b.Bits()
		})
		ps.SourceRanges = slices.Compact(ps.SourceRanges)
	}
	if sp.SessionAffinity == "ClientIP" && sp.SessionAffinityConfig != nil && sp.SessionAffinityConfig.ClientIP != nil {
		ps.AffinitySeconds = sp.SessionAffinityConfig.ClientIP.TimeoutSeconds
	}
	ps.IPVSScheduler = o.Metadata.Annotations.Get(IPVSSchedulerAnnotation)
	fams := c.serviceFamilies(o, ps.ClusterIPs)
	var sel *selection
	if sp.Selector.Len() > 0 && sp.Type != "ExternalName" {
		sel = c.selection(o)
	}
	if len(sp.Ports) > 0 {
		ps.Ports = make([]plan.Port, 0, len(sp.Ports))
	}
	for i, port := range sp.Ports {
		pp := plan.Port{Name: port.Name, Protocol: port.Protocol, Port: uint16(port.Port)}
		if np, ok := alloc.NodePortOf(i); ok {
			pp.NodePort = uint16(np.Port)
		}
		if sp.Type != "ExternalName" {
			pp.Endpoints = c.endpointsOf(o, port, fams, sel)
			pp.Cluster, pp.External, pp.ShortCircuit = pick(pp.Endpoints, &ps, sp.TrafficDistribution, node)
		}
		ps.Ports = append(ps.Ports, pp)
	}
	if ps.Headless && len(sp.Ports) == 0 {
		// A headless Service without ports still has endpoints, which
		// its DNS records name: Kubernetes' controllers give them no
		// port, and CoreDNS reads them through a sentinel port. The
		// plan's sentinel is a Port without name, protocol or number.
		pp := plan.Port{Endpoints: c.endpointsOf(o, schema.ServicePort{}, fams, sel)}
		pp.Cluster, pp.External, pp.ShortCircuit = pick(pp.Endpoints, &ps, sp.TrafficDistribution, node)
		ps.Ports = []plan.Port{pp}
	}
	return ps
}

// serviceFamilies returns the IP families whose endpoints a Service uses,
// as the API server assigns them: those of its cluster IPs; for a headless
// Service without a selector every family (its endpoints are whatever its
// Endpoints and EndpointSlices hold, and DNS answers them all); for one with
// a selector its ipFamilies, else the cluster's first family, with the
// cluster's other family added unless its ipFamilyPolicy is SingleStack.
func (c *compilation) serviceFamilies(o *schema.Service, ips []netip.Addr) map[string]bool {
	f := map[string]bool{}
	for _, ip := range ips {
		f[schema.Family(ip)] = true
	}
	if len(f) > 0 {
		return f
	}
	var cluster []string
	for _, s := range c.checked.Cluster.ServiceCIDRs {
		if p, err := netip.ParsePrefix(s); err == nil {
			cluster = append(cluster, schema.Family(p.Addr()))
		}
	}
	if o.Spec.Selector.Len() == 0 || len(cluster) == 0 {
		f["IPv4"], f["IPv6"] = true, true
		return f
	}
	fams := o.Spec.IPFamilies
	if len(fams) == 0 {
		fams = cluster[:1]
	}
	for _, fam := range fams {
		f[fam] = true
	}
	if len(fams) == 1 && o.Spec.IPFamilyPolicy != "SingleStack" && o.Spec.IPFamilyPolicy != "" {
		for _, fam := range cluster {
			f[fam] = true
		}
	}
	return f
}
