package compiler

import (
	"encoding/binary"
	"hash/fnv"
	"net/netip"
	"slices"
	"strconv"

	"netspec.dev/netspec/internal/diag"
	"netspec.dev/netspec/schema"
)

// Origin says where an allocated cluster IP or node port came from.
type Origin int

// The origins, in the order of precedence.
const (
	// Explicit values are written in the Service's spec.
	Explicit Origin = iota + 1
	// Locked values are recorded in netspec.lock.
	Locked
	// Derived values are hashed from the Service's name, probing past taken values.
	Derived
)

// String returns explicit, locked or derived.
func (o Origin) String() string {
	switch o {
	case Explicit:
		return "explicit"
	case Locked:
		return "locked"
	case Derived:
		return "derived"
	}
	return "Origin(" + strconv.Itoa(int(o)) + ")"
}

// ClusterIP is one cluster IP of a Service.
type ClusterIP struct {
	Family string // IPv4 or IPv6
	Addr   netip.Addr
	Origin Origin
}

// NodePort is the node port of one port of a Service.
type NodePort struct {
	Index    int    // index of the port in spec.ports
	Key      string // the port's name (or number, when unnamed) and protocol, as in the lock: http/TCP
	Protocol string
	Port     int32
	Origin   Origin
}

// ServiceAlloc is what one Service was allocated. Explicit values that are
// errors (outside the CIDR or range, or another Service's) are left out.
type ServiceAlloc struct {
	Namespace  string
	Name       string
	ClusterIPs []ClusterIP // in the Service's family order
	NodePorts  []NodePort  // in port order; only ports that have a node port
	// HealthCheckNodePort is the TCP port on which the nodes answer an
	// external load balancer's health checks, for a LoadBalancer Service
	// with externalTrafficPolicy Local; 0 for others.
	HealthCheckNodePort int32
	HealthCheckOrigin   Origin // 0 when HealthCheckNodePort is
}

// Key returns namespace/name.
func (s ServiceAlloc) Key() string { return s.Namespace + "/" + s.Name }

// NodePortOf returns the node port of spec.ports[index], if it has one.
func (s ServiceAlloc) NodePortOf(index int) (NodePort, bool) {
	for _, np := range s.NodePorts {
		if np.Index == index {
			return np, true
		}
	}
	return NodePort{}, false
}

// Allocations holds the cluster IPs and node ports of every Service that
// has any, so that later stages and the lock see one consistent answer.
type Allocations struct {
	services []ServiceAlloc // sorted by namespace/name
	byKey    map[string]int
}

// Services returns the allocations sorted by namespace/name. The result is a
// copy; changing it does not change a.
func (a *Allocations) Services() []ServiceAlloc {
	if a == nil {
		return nil
	}
	out := make([]ServiceAlloc, len(a.services))
	for i, s := range a.services {
		s.ClusterIPs = append([]ClusterIP(nil), s.ClusterIPs...)
		s.NodePorts = append([]NodePort(nil), s.NodePorts...)
		out[i] = s
	}
	return out
}

// Service returns the allocations of one Service, if it has any.
func (a *Allocations) Service(namespace, name string) (ServiceAlloc, bool) {
	if a == nil {
		return ServiceAlloc{}, false
	}
	i, ok := a.byKey[namespace+"/"+name]
	if !ok {
		return ServiceAlloc{}, false
	}
	s := a.services[i]
	s.ClusterIPs = append([]ClusterIP(nil), s.ClusterIPs...)
	s.NodePorts = append([]NodePort(nil), s.NodePorts...)
	return s, true
}

// Lock returns the lock that records these allocations, all origins
// included, so that a value stays when the spec stops setting it.
func (a *Allocations) Lock() *Lock {
	l := &Lock{services: map[string]lockEntry{}}
	if a == nil {
		return l
	}
	for _, s := range a.services {
		var e lockEntry
		for _, ip := range s.ClusterIPs {
			e.clusterIPs = append(e.clusterIPs, ip.Addr)
		}
		for _, np := range s.NodePorts {
			if e.nodePorts == nil {
				e.nodePorts = map[string]int{}
			}
			e.nodePorts[np.Key] = int(np.Port)
		}
		e.healthCheckNodePort = int(s.HealthCheckNodePort)
		l.set(s.Key(), e)
	}
	return l
}

// ---- allocation ----

// hash maps an allocation key to a number; a variable so that tests can
// force collisions.
var hash = func(key string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	return h.Sum64()
}

// ipSlot is one cluster IP a Service needs. It depends only on the
// Service and the Cluster, so a memo may keep it (as it keeps a slot for
// every Service, a slot holds no more than assign reads: the path of an
// explicit value and the key derivation hashes are made when needed);
// allocation results go to an ipResult.
type ipSlot struct {
	explicit netip.Addr // set by the spec; invalid when left to the allocator
	family   string
	index    int32 // explicit is spec.clusterIPs[index], or spec.clusterIP when -1
	valid    bool  // explicit is inside the family's CIDR and allocatable
}

// path returns the path of the explicit value.
func (sl *ipSlot) path() diag.Path {
	if sl.index < 0 {
		return pClusterIP
	}
	return pSpec.Key("clusterIPs").Index(int(sl.index))
}

// ipResult is what allocation made of an ipSlot.
type ipResult struct {
	addr    netip.Addr
	origin  Origin
	refused bool // explicit but reported as an error: left out of the result
}

// portSlot is one node port a Service needs; like ipSlot, it depends only
// on the Service and the Cluster.
type portSlot struct {
	key      string // http/TCP
	protocol string
	explicit int   // set by the spec; 0 when left to the allocator
	index    int32 // in spec.ports
	valid    bool  // explicit is inside the node port range
}

// path returns spec.ports[i].nodePort.
func (sl *portSlot) path() diag.Path { return pSpec.Key("ports").Index(int(sl.index)).Key("nodePort") }

// portResult is what allocation made of a portSlot.
type portResult struct {
	port    int
	origin  Origin
	refused bool // explicit but reported as an error: left out of the result
}

// healthSlot is the health check node port a Service needs, if any; like
// ipSlot, it depends only on the Service and the Cluster.
type healthSlot struct {
	explicit int32 // spec.healthCheckNodePort; 0 when left to the allocator
	need     bool  // a LoadBalancer Service with externalTrafficPolicy Local
	valid    bool  // explicit is inside the node port range
}

// path returns spec.healthCheckNodePort.
func (*healthSlot) path() diag.Path { return pHealthCheckNodePort }

var pHealthCheckNodePort = pSpec.Key("healthCheckNodePort")

// svcPlan is what one Service asks the allocator for. Its slots are only
// read by assign, which derives what a slot leaves to it from the key
// namespace/name/family (ipSlot), namespace/name/port key (portSlot) or
// namespace/name/healthCheckNodePort.
type svcPlan struct {
	svc    *service
	ips    []ipSlot
	ports  []portSlot
	health healthSlot
}

// allocate gives every Service its cluster IPs and node ports: explicit
// values are reserved first, then the lock's, then the rest are derived in
// namespace/name order. svcs must be sorted by key.
func allocate(svcs []*service, cl *cluster, lock *Lock, r *reporter) *Allocations {
	var plans []*svcPlan
	for _, s := range svcs {
		if p := planService(s, cl, r); p != nil {
			plans = append(plans, p)
		}
	}
	return assign(plans, cl, lock, r)
}

// planService returns the slots of one Service, nil when it needs none,
// reporting its explicit values that cannot be allocated.
func planService(s *service, cl *cluster, r *reporter) *svcPlan {
	p := &svcPlan{svc: s, ips: clusterIPSlots(s, cl, r), ports: nodePortSlots(s, cl, r), health: healthCheckSlot(s, cl, r)}
	if len(p.ips) == 0 && len(p.ports) == 0 && !p.health.need {
		return nil
	}
	return p
}

// healthCheckSlot returns the health check node port slot of a Service, as
// the API server allocates one: for a LoadBalancer Service with
// externalTrafficPolicy Local (schema reports healthCheckNodePort on any
// other), from the node port range. It checks an explicit port against
// the range.
func healthCheckSlot(s *service, cl *cluster, r *reporter) healthSlot {
	sp := s.spec()
	if sp.Type != "LoadBalancer" || sp.ExternalTrafficPolicy != "Local" || !cl.hasNodePorts() {
		return healthSlot{}
	}
	sl := healthSlot{need: true}
	if n := int(sp.HealthCheckNodePort); n != 0 {
		sl.explicit = int32(n)
		if n < cl.nodePortFrom || n > cl.nodePortTo {
			r.errorf(s.obj, sl.path(), "%d is outside the cluster's node port range %s", n, cl.spec.NodePortRange)
		} else {
			sl.valid = true
		}
	}
	return sl
}

// nodePortProtocols are the protocols of node ports. A health check node
// port is a TCP port, but it is taken in every protocol, as the API
// server's single node port allocator does: no node port of any protocol
// may have its number.
var nodePortProtocols = []string{"TCP", "UDP", "SCTP"}

// assign allocates the slots of plans, which are sorted by key: explicit
// values are reserved first, then the lock's, then the rest are derived in
// plan order. It does not change the plans.
func assign(plans []*svcPlan, cl *cluster, lock *Lock, r *reporter) *Allocations {
	a := newAssigner(plans, cl, r)
	var owners lockOwners
	if lock != nil {
		owners = a.readLock(lock, a.wanted())
	}
	a.reserveExplicit(owners)
	if lock != nil {
		a.takeLocked()
	}
	a.derive()
	return a.result()
}

// assigner is the state of one assign: the results of all slots, plan
// after plan, and the pools of cluster IPs and node ports.
type assigner struct {
	plans []*svcPlan
	cl    *cluster
	r     *reporter

	ipRes     []ipResult
	portRes   []portResult
	healthRes []portResult // one per plan

	ipPools   map[string]*ipPool   // by family
	portPools map[string]*portPool // by protocol, made when first used

	// The explicit values reserved so far, and their Services.
	explicitIPs    map[netip.Addr]string
	explicitPorts  map[portID]string
	explicitHealth map[int]string
}

func newAssigner(plans []*svcPlan, cl *cluster, r *reporter) *assigner {
	nIPs, nPorts := 0, 0
	for _, p := range plans {
		nIPs += len(p.ips)
		nPorts += len(p.ports)
	}
	a := &assigner{
		plans: plans, cl: cl, r: r,
		ipRes: make([]ipResult, nIPs), portRes: make([]portResult, nPorts),
		healthRes: make([]portResult, len(plans)),
		ipPools:   map[string]*ipPool{},
		portPools: map[string]*portPool{},
	}
	for _, c := range cl.serviceCIDRs {
		a.ipPools[schema.Family(c.Addr())] = newIPPool(c)
	}
	return a
}

// each calls f with every plan and its results, in plan order.
func (a *assigner) each(f func(p *svcPlan, ips []ipResult, ports []portResult, health *portResult)) {
	i, j := 0, 0
	for k, p := range a.plans {
		f(p, a.ipRes[i:i+len(p.ips)], a.portRes[j:j+len(p.ports)], &a.healthRes[k])
		i += len(p.ips)
		j += len(p.ports)
	}
}

// portPool returns the node port pool of a protocol.
func (a *assigner) portPool(proto string) *portPool {
	pp := a.portPools[proto]
	if pp == nil {
		pp = newPortPool(a.cl.nodePortFrom, a.cl.nodePortTo)
		a.portPools[proto] = pp
	}
	return pp
}

// takenAny reports whether node port n is taken in any protocol's pool,
// which a health check node port must not be.
func (a *assigner) takenAny(n int) bool {
	return slices.ContainsFunc(nodePortProtocols, func(proto string) bool { return a.portPool(proto).isTaken(n) })
}

// takeAll takes node port n in every protocol's pool, as a health check
// node port is taken.
func (a *assigner) takeAll(n int) {
	for _, proto := range nodePortProtocols {
		a.portPool(proto).take(n)
	}
}

func (a *assigner) inRange(n int) bool { return n >= a.cl.nodePortFrom && n <= a.cl.nodePortTo }

// wanted are the valid explicit values of the plans: only for them does it
// matter which Service has a value in the lock.
type wanted struct {
	ips    map[netip.Addr]bool
	ports  map[portID]bool
	health map[int]bool // health check node ports
	any    map[int]bool // node ports of any protocol, and health check node ports
}

func (a *assigner) wanted() wanted {
	w := wanted{health: map[int]bool{}, any: map[int]bool{}}
	for _, p := range a.plans {
		if sl := p.health; sl.explicit != 0 && sl.valid {
			w.health[int(sl.explicit)], w.any[int(sl.explicit)] = true, true
		}
		for _, sl := range p.ips {
			if sl.explicit.IsValid() && sl.valid {
				if w.ips == nil {
					w.ips = map[netip.Addr]bool{}
				}
				w.ips[sl.explicit] = true
			}
		}
		for _, sl := range p.ports {
			if sl.explicit != 0 && sl.valid {
				if w.ports == nil {
					w.ports = map[portID]bool{}
				}
				w.ports[portID{sl.protocol, sl.explicit}] = true
				w.any[sl.explicit] = true
			}
		}
	}
	return w
}

// lockOwners name the first Service that locks a wanted value, so that
// another Service's explicit value of it is reported. Nil maps when there
// is no lock.
type lockOwners struct {
	ips    map[netip.Addr]string
	ports  map[portID]string
	health map[int]string
}

// readLock sets the results of the slots not set in the spec to the lock's
// values that still apply (they fit the current CIDR or range), as
// Locked, and returns the owners of the wanted values among them.
func (a *assigner) readLock(lock *Lock, w wanted) lockOwners {
	owners := lockOwners{ips: map[netip.Addr]string{}, ports: map[portID]string{}, health: map[int]string{}}
	a.each(func(p *svcPlan, ips []ipResult, ports []portResult, health *portResult) {
		e := lock.entry(p.svc.key)
		if e.empty() {
			return
		}
		for i := range p.ips {
			sl, res := &p.ips[i], &ips[i]
			if sl.explicit.IsValid() {
				continue
			}
			if addr, ok := e.ip(sl.family); ok && a.ipPools[sl.family].problem(addr) == "" {
				res.addr, res.origin = addr, Locked
				if _, dup := owners.ips[addr]; !dup && w.ips[addr] {
					owners.ips[addr] = p.svc.key
				}
			}
		}
		for i := range p.ports {
			sl, res := &p.ports[i], &ports[i]
			if sl.explicit != 0 {
				continue
			}
			if n, ok := e.nodePorts[sl.key]; ok && a.inRange(n) {
				res.port, res.origin = n, Locked
				id := portID{sl.protocol, n}
				if _, dup := owners.ports[id]; !dup && (w.ports[id] || w.health[n]) {
					owners.ports[id] = p.svc.key
				}
			}
		}
		if sl := p.health; sl.need && sl.explicit == 0 {
			if n := e.healthCheckNodePort; n != 0 && a.inRange(n) {
				health.port, health.origin = n, Locked
				if _, dup := owners.health[n]; !dup && w.any[n] {
					owners.health[n] = p.svc.key
				}
			}
		}
	})
	return owners
}

// reserveExplicit reserves the explicit values, plan after plan. One that
// another Service has in the lock is an error: a locked allocation never
// moves.
func (a *assigner) reserveExplicit(owners lockOwners) {
	a.explicitIPs = map[netip.Addr]string{}
	a.explicitPorts = map[portID]string{}
	a.explicitHealth = map[int]string{}
	a.each(func(p *svcPlan, ips []ipResult, ports []portResult, health *portResult) {
		for i := range p.ips {
			a.explicitIP(p, &p.ips[i], &ips[i], owners)
		}
		for i := range p.ports {
			a.explicitPort(p, &p.ports[i], &ports[i], owners)
		}
		if p.health.explicit != 0 {
			a.explicitHealthPort(p, health, owners)
		}
	})
}

// explicitIP reserves the explicit cluster IP of a slot, if it has one.
func (a *assigner) explicitIP(p *svcPlan, sl *ipSlot, res *ipResult, owners lockOwners) {
	if !sl.explicit.IsValid() {
		return
	}
	key := p.svc.key
	res.addr, res.origin = sl.explicit, Explicit
	if !sl.valid {
		res.refused = true
		return
	}
	if o, ok := a.explicitIPs[res.addr]; ok {
		if o != key {
			a.r.errorf(p.svc.obj, sl.path(), "%s is already the cluster IP of %s", res.addr, o)
			res.refused = true
		}
		return
	}
	if o, ok := owners.ips[res.addr]; ok && o != key {
		a.r.errorf(p.svc.obj, sl.path(), "%s is the cluster IP of %s in netspec.lock; locked allocations never move, so choose another address", res.addr, o)
	}
	a.explicitIPs[res.addr] = key
	a.ipPools[sl.family].take(res.addr)
}

// explicitPort reserves the explicit node port of a slot, if it has one.
func (a *assigner) explicitPort(p *svcPlan, sl *portSlot, res *portResult, owners lockOwners) {
	if sl.explicit == 0 {
		return
	}
	key := p.svc.key
	res.port, res.origin = sl.explicit, Explicit
	if !sl.valid {
		res.refused = true
		return
	}
	id := portID{sl.protocol, res.port}
	if o, ok := a.explicitPorts[id]; ok {
		if o != key {
			a.r.errorf(p.svc.obj, sl.path(), "%d/%s is already a node port of %s", res.port, sl.protocol, o)
			res.refused = true
		}
		return
	}
	if o, ok := a.explicitHealth[res.port]; ok {
		a.r.errorf(p.svc.obj, sl.path(), "%d is already the health check node port of %s", res.port, o)
		res.refused = true
		return
	}
	if o, ok := owners.ports[id]; ok && o != key {
		a.r.errorf(p.svc.obj, sl.path(), "%d/%s is a node port of %s in netspec.lock; locked allocations never move, so choose another port", res.port, sl.protocol, o)
	} else if o, ok := owners.health[res.port]; ok && o != key {
		a.r.errorf(p.svc.obj, sl.path(), "%d is the health check node port of %s in netspec.lock; locked allocations never move, so choose another port", res.port, o)
	}
	a.explicitPorts[id] = key
	a.portPool(sl.protocol).take(res.port)
}

// explicitHealthPort reserves the explicit health check node port of p.
func (a *assigner) explicitHealthPort(p *svcPlan, health *portResult, owners lockOwners) {
	sl, key := &p.health, p.svc.key
	health.port, health.origin = int(sl.explicit), Explicit
	health.refused = !sl.valid || !explicitHealthFree(p, sl, key, a.explicitPorts, a.explicitHealth, a.r)
	if health.refused {
		return
	}
	n := int(sl.explicit)
	if o, ok := owners.health[n]; ok && o != key {
		a.r.errorf(p.svc.obj, sl.path(), "%d is the health check node port of %s in netspec.lock; locked allocations never move, so choose another port", n, o)
	} else if o, proto, ok := lockedAny(owners.ports, n, key); ok {
		a.r.errorf(p.svc.obj, sl.path(), "%d is the node port %d/%s of %s in netspec.lock; locked allocations never move, so choose another port", n, n, proto, o)
	}
	a.explicitHealth[n] = key
	a.takeAll(n)
}

// takeLocked takes the lock's values, unless an explicit value or an
// earlier lock entry took them; dropped ones are left to derive.
func (a *assigner) takeLocked() {
	a.each(func(p *svcPlan, ips []ipResult, ports []portResult, health *portResult) {
		for i := range p.ips {
			sl, res := &p.ips[i], &ips[i]
			if res.origin != Locked {
				continue
			}
			if pool := a.ipPools[sl.family]; pool.isTaken(res.addr) {
				res.addr, res.origin = netip.Addr{}, 0
			} else {
				pool.take(res.addr)
			}
		}
		for i := range p.ports {
			sl, res := &p.ports[i], &ports[i]
			if res.origin != Locked {
				continue
			}
			if pool := a.portPool(sl.protocol); pool.isTaken(res.port) {
				res.port, res.origin = 0, 0
			} else {
				pool.take(res.port)
			}
		}
		if health.origin == Locked {
			if a.takenAny(health.port) {
				health.port, health.origin = 0, 0
			} else {
				a.takeAll(health.port)
			}
		}
	})
}

// derive derives the values still unset, in namespace/name order.
func (a *assigner) derive() {
	cl, r := a.cl, a.r
	a.each(func(p *svcPlan, ips []ipResult, ports []portResult, health *portResult) {
		for i := range p.ips {
			sl, res := &p.ips[i], &ips[i]
			if res.origin != 0 {
				continue
			}
			pool := a.ipPools[sl.family]
			addr, ok := pool.derive(p.svc.key + "/" + sl.family)
			if !ok {
				r.errorf(p.svc.obj, pName, "no free %s cluster IP is left in the service CIDR %s for %s; use a larger CIDR or fewer Services",
					sl.family, pool.prefix, p.svc.key)
				continue
			}
			res.addr, res.origin = addr, Derived
		}
		for i := range p.ports {
			sl, res := &p.ports[i], &ports[i]
			if res.origin != 0 {
				continue
			}
			n, ok := a.portPool(sl.protocol).derive(p.svc.key + "/" + sl.key)
			if !ok {
				r.errorf(p.svc.obj, pSpec.Key("ports").Index(int(sl.index)), "no free %s node port is left in the range %s for port %s of %s; widen the Cluster's nodePortRange or use fewer node ports",
					sl.protocol, cl.spec.NodePortRange, sl.key, p.svc.key)
				continue
			}
			res.port, res.origin = n, Derived
		}
		if p.health.need && health.origin == 0 {
			n, ok := deriveFree(cl.nodePortFrom, cl.nodePortTo, p.svc.key+"/healthCheckNodePort", a.takenAny)
			if !ok {
				r.errorf(p.svc.obj, pName, "no free node port is left in the range %s for the health check node port of %s; widen the Cluster's nodePortRange or use fewer node ports",
					cl.spec.NodePortRange, p.svc.key)
				return
			}
			a.takeAll(n)
			health.port, health.origin = n, Derived
		}
	})
}

// result returns the allocations of the results not refused. The plans
// are sorted by key, which is namespace/name: so are the allocations.
// Their values share two arrays, capacity-limited.
func (a *assigner) result() *Allocations {
	out := &Allocations{services: make([]ServiceAlloc, 0, len(a.plans)), byKey: make(map[string]int, len(a.plans))}
	allIPs, allPorts := make([]ClusterIP, 0, len(a.ipRes)), make([]NodePort, 0, len(a.portRes))
	a.each(func(p *svcPlan, ips []ipResult, ports []portResult, health *portResult) {
		m := p.svc.obj.Service.Metadata
		sa := ServiceAlloc{Namespace: m.Namespace, Name: m.Name}
		if health.origin != 0 && !health.refused {
			sa.HealthCheckNodePort, sa.HealthCheckOrigin = int32(health.port), health.origin
		}
		i0, p0 := len(allIPs), len(allPorts)
		for i, sl := range p.ips {
			if res := ips[i]; res.origin != 0 && !res.refused {
				allIPs = append(allIPs, ClusterIP{Family: sl.family, Addr: res.addr, Origin: res.origin})
			}
		}
		for i, sl := range p.ports {
			if res := ports[i]; res.origin != 0 && !res.refused {
				allPorts = append(allPorts, NodePort{Index: int(sl.index), Key: sl.key, Protocol: sl.protocol, Port: int32(res.port), Origin: res.origin})
			}
		}
		if len(allIPs) > i0 {
			sa.ClusterIPs = allIPs[i0:len(allIPs):len(allIPs)]
		}
		if len(allPorts) > p0 {
			sa.NodePorts = allPorts[p0:len(allPorts):len(allPorts)]
		}
		if sa.ClusterIPs == nil && sa.NodePorts == nil && sa.HealthCheckNodePort == 0 {
			return
		}
		out.byKey[p.svc.key] = len(out.services)
		out.services = append(out.services, sa)
	})
	return out
}

// portID is a node port with its protocol.
type portID struct {
	proto string
	port  int
}

// explicitHealthFree reports whether the explicit health check node port
// of p is free of the explicit node ports of every protocol and the
// explicit health check node ports seen so far, reporting it when not.
// p's own node ports count: a node port cannot be the health check port.
func explicitHealthFree(p *svcPlan, sl *healthSlot, key string, ports map[portID]string, health map[int]string, r *reporter) bool {
	n := int(sl.explicit)
	if o, ok := health[n]; ok {
		r.errorf(p.svc.obj, sl.path(), "%d is already the health check node port of %s", n, o)
		return false
	}
	for _, proto := range nodePortProtocols {
		o, ok := ports[portID{proto, n}]
		switch {
		case !ok:
		case o == key:
			r.errorf(p.svc.obj, sl.path(), "%d is already the node port %d/%s of this Service; the health check node port must differ from every node port", n, n, proto)
			return false
		default:
			r.errorf(p.svc.obj, sl.path(), "%d is already the node port %d/%s of %s", n, n, proto, o)
			return false
		}
	}
	return true
}

// lockedAny returns the Service other than key that locks node port n in
// some protocol, and the protocol.
func lockedAny(locked map[portID]string, n int, key string) (owner, proto string, ok bool) {
	for _, proto := range nodePortProtocols {
		if o, ok := locked[portID{proto, n}]; ok && o != key {
			return o, proto, true
		}
	}
	return "", "", false
}

// deriveFree hashes key into the range from..to and probes upwards,
// wrapping around, to the first port taken says is free. It fails when
// none is.
func deriveFree(from, to int, key string, taken func(int) bool) (int, bool) {
	n := to - from + 1
	if n <= 0 {
		return 0, false
	}
	start := int(hash(key) % uint64(n))
	for i := range n {
		if port := from + (start+i)%n; !taken(port) {
			return port, true
		}
	}
	return 0, false
}

// ipPool hands out the addresses of one service CIDR. Derivation looks at
// the first 2^63 addresses at most, which is plenty for any IPv6 CIDR.
type ipPool struct {
	prefix      netip.Prefix
	v4          bool
	first, last uint64 // the offsets derivation may use
	// bits marks the taken offsets first..last when there are at most
	// maxPoolBits of them (nil until the first take); taken holds every
	// other taken address.
	bits    []uint64
	taken   map[netip.Addr]bool
	inRange uint64 // taken addresses with offsets in [first, last]
}

// maxPoolBits is the largest range an ipPool tracks in a bitmap (512 KiB)
// rather than a map: a bitmap is cheaper to fill and probe.
const maxPoolBits = 1 << 22

func newIPPool(p netip.Prefix) *ipPool {
	host := p.Addr().BitLen() - p.Bits()
	if host > 63 {
		host = 63
	}
	pool := &ipPool{prefix: p, v4: p.Addr().Is4(), first: 1, last: 1<<host - 1}
	if pool.v4 {
		pool.last-- // the broadcast address
	}
	return pool
}

// problem says why a cannot be a cluster IP of this CIDR, or "" when it can.
func (p *ipPool) problem(a netip.Addr) string {
	fam := schema.Family(p.prefix.Addr())
	switch {
	case !p.prefix.Contains(a):
		return a.String() + " is outside the " + fam + " service CIDR " + p.prefix.String()
	case a == p.prefix.Addr():
		return a.String() + " is the network address of the " + fam + " service CIDR " + p.prefix.String() + " and cannot be a cluster IP"
	case p.v4 && a == lastAddr(p.prefix):
		return a.String() + " is the broadcast address of the " + fam + " service CIDR " + p.prefix.String() + " and cannot be a cluster IP"
	}
	return ""
}

// offset returns the host part of an address of the CIDR and whether it is
// within the offsets derivation uses.
func (p *ipPool) offset(a netip.Addr) (uint64, bool) {
	host := p.prefix.Addr().BitLen() - p.prefix.Bits()
	var hi, lo uint64
	if p.v4 {
		b := a.As4()
		lo = uint64(binary.BigEndian.Uint32(b[:]))
	} else {
		b := a.As16()
		hi, lo = binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
	}
	switch {
	case host < 64:
		hi, lo = 0, lo&(1<<host-1)
	case host < 128:
		hi &= 1<<(host-64) - 1
	}
	return lo, hi == 0 && lo >= p.first && lo <= p.last
}

// at returns the address at an offset (below 2^63) of the CIDR.
func (p *ipPool) at(off uint64) netip.Addr {
	if p.v4 {
		b := p.prefix.Addr().As4()
		binary.BigEndian.PutUint32(b[:], binary.BigEndian.Uint32(b[:])|uint32(off))
		return netip.AddrFrom4(b)
	}
	b := p.prefix.Addr().As16()
	binary.BigEndian.PutUint64(b[8:], binary.BigEndian.Uint64(b[8:])|off)
	return netip.AddrFrom16(b)
}

// size is the number of offsets derivation may use.
func (p *ipPool) size() uint64 { return p.last - p.first + 1 }

// bit returns the bitmap index of a: its offset less first, when a is an
// address of the CIDR that derivation may use and the pool has a bitmap.
func (p *ipPool) bit(a netip.Addr) (uint64, bool) {
	if p.size() > maxPoolBits || !p.prefix.Contains(a) {
		return 0, false
	}
	off, ok := p.offset(a)
	return off - p.first, ok
}

func (p *ipPool) isTaken(a netip.Addr) bool {
	if i, ok := p.bit(a); ok {
		return p.bits != nil && p.bits[i/64]&(1<<(i%64)) != 0
	}
	return p.taken[a]
}

func (p *ipPool) take(a netip.Addr) {
	if p.isTaken(a) {
		return
	}
	if i, ok := p.bit(a); ok {
		p.setBit(i)
		p.inRange++
		return
	}
	if p.taken == nil {
		p.taken = map[netip.Addr]bool{}
	}
	p.taken[a] = true
	if _, ok := p.offset(a); ok {
		p.inRange++
	}
}

func (p *ipPool) setBit(i uint64) {
	if p.bits == nil {
		p.bits = make([]uint64, (p.size()+63)/64)
	}
	p.bits[i/64] |= 1 << (i % 64)
}

// derive hashes key into the CIDR and probes upwards, wrapping around, to
// the first free address. It fails when none is free.
func (p *ipPool) derive(key string) (netip.Addr, bool) {
	n := p.size()
	if p.inRange >= n {
		return netip.Addr{}, false
	}
	start := hash(key) % n
	// At most inRange addresses are taken, so this ends within inRange+1 steps.
	if n <= maxPoolBits {
		for i := uint64(0); ; i++ {
			off := (start + i) % n
			if p.bits == nil || p.bits[off/64]&(1<<(off%64)) == 0 {
				p.setBit(off)
				p.inRange++
				return p.at(p.first + off), true
			}
		}
	}
	for i := uint64(0); ; i++ {
		a := p.at(p.first + (start+i)%n)
		if !p.taken[a] {
			p.take(a)
			return a, true
		}
	}
}

// lastAddr returns the last address of a prefix.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	host := len(b)*8 - p.Bits()
	for i := len(b) - 1; i >= 0 && host > 0; i-- {
		bits := min(host, 8)
		b[i] |= byte(1<<bits - 1)
		host -= bits
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// portPool hands out the node ports of one protocol.
type portPool struct {
	from, to int
	bits     []uint64     // the taken ports from..to
	taken    map[int]bool // taken ports outside from..to
	inRange  int
}

func newPortPool(from, to int) *portPool {
	p := &portPool{from: from, to: to}
	if to >= from {
		p.bits = make([]uint64, (to-from)/64+1)
	}
	return p
}

func (p *portPool) isTaken(n int) bool {
	if n >= p.from && n <= p.to {
		i := n - p.from
		return p.bits[i/64]&(1<<(i%64)) != 0
	}
	return p.taken[n]
}

func (p *portPool) take(n int) {
	if p.isTaken(n) {
		return
	}
	if n >= p.from && n <= p.to {
		i := n - p.from
		p.bits[i/64] |= 1 << (i % 64)
		p.inRange++
		return
	}
	if p.taken == nil {
		p.taken = map[int]bool{}
	}
	p.taken[n] = true
}

// derive hashes key into the range and probes upwards, wrapping around, to
// the first free port. It fails when none is free.
func (p *portPool) derive(key string) (int, bool) {
	n := p.to - p.from + 1
	if p.inRange >= n {
		return 0, false
	}
	start := int(hash(key) % uint64(n))
	for i := 0; ; i++ {
		port := p.from + (start+i)%n
		if !p.isTaken(port) {
			p.take(port)
			return port, true
		}
	}
}

// portKey names a Service port in the lock: its name, or its number when
// it has none, and its protocol.
func portKey(p schema.ServicePort) string {
	name := p.Name
	if name == "" {
		name = strconv.Itoa(int(p.Port))
	}
	return name + "/" + p.Protocol
}
