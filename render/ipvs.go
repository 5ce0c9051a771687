package render

import (
	"cmp"
	"net/netip"
	"slices"
	"strconv"

	"netspec.dev/netspec/plan"
)

// DefaultIPVSScheduler is the scheduler of a Service without the
// annotation netspec.dev/ipvs-scheduler, as kube-proxy's default.
const DefaultIPVSScheduler = "rr"

// ipvsVirtual is one IPVS virtual server: a frontend address, port and
// protocol, with its real servers.
type ipvsVirtual struct {
	proto   string // ipvsadm's flag: -t, -u or --sctp-service
	addr    netip.AddrPort
	sched   string
	persist int32
	reals   []netip.AddrPort
}

// IPVS renders the Plan's virtual servers in the form of `ipvsadm -S -n`,
// so that `ipvsadm -R` can load the file and `ipvsadm -S -n` of a node
// that applied it prints the same lines (order aside). One virtual server
// per frontend: each cluster IP, external IP and LoadBalancer IP with
// port, and each node-port address with the node port (the node's
// addresses that plan.NodePortAddress accepts: with nodePortAddresses,
// those inside them; IPVSAt takes the node's local addresses instead); one real
// server per endpoint of the frontend's family (Port.Cluster for cluster
// IPs, Port.External for the rest), masqueraded (-m) with weight 1.
// ClientIP affinity is persistence (-p) with the Service's timeout. A
// frontend without endpoints is still declared: the nftables tables reject
// or drop its traffic. sched is the scheduler of Services without the
// annotation ("" for DefaultIPVSScheduler). Lines are sorted by address,
// protocol and port: the output is byte-identical for equal Plans.
func IPVS(p *plan.Plan, sched string) []byte {
	var nodePorts []netip.Addr
	for _, a := range p.Node.IPs {
		if p.NodePortAddress(a) {
			nodePorts = append(nodePorts, a)
		}
	}
	return IPVSAt(p, sched, nodePorts)
}

// IPVSAt is IPVS with the node ports' virtual servers on nodePorts: the
// node-port addresses that the IPVS applier finds among the node's local
// addresses, as the nftables rules match them (Cluster.NodePortAddresses
// reach addresses that the Node object does not list).
func IPVSAt(p *plan.Plan, sched string, nodePorts []netip.Addr) []byte {
	if sched == "" {
		sched = DefaultIPVSScheduler
	}
	var vs []ipvsVirtual
	for i := range p.Services {
		svc := &p.Services[i]
		if svc.Type == "ExternalName" || svc.Headless {
			continue
		}
		s := cmp.Or(svc.IPVSScheduler, sched)
		for j := range svc.Ports {
			port := &svc.Ports[j]
			proto := ipvsProto(port.Protocol)
			if proto == "" {
				continue
			}
			add := func(a netip.Addr, pn uint16, idx []int) {
				a = normAddr(a)
				v := ipvsVirtual{proto: proto, addr: netip.AddrPortFrom(a, pn), sched: s, persist: svc.AffinitySeconds}
				for _, k := range idx {
					if k < 0 || k >= len(port.Endpoints) {
						continue
					}
					ep := port.Endpoints[k]
					if ip := normAddr(ep.IP); ip.Is4() == a.Is4() {
						v.reals = append(v.reals, netip.AddrPortFrom(ip, ep.Port))
					}
				}
				slices.SortFunc(v.reals, netip.AddrPort.Compare)
				v.reals = slices.Compact(v.reals)
				vs = append(vs, v)
			}
			for _, a := range svc.ClusterIPs {
				add(a, port.Port, port.Cluster)
			}
			for _, a := range svc.ExternalIPs {
				add(a, port.Port, port.External)
			}
			for _, a := range svc.LoadBalancerIPs {
				add(a, port.Port, port.External)
			}
			if port.NodePort != 0 {
				for _, a := range nodePorts {
					add(a, port.NodePort, port.External)
				}
			}
		}
	}
	slices.SortStableFunc(vs, func(a, b ipvsVirtual) int {
		return cmp.Or(a.addr.Addr().Compare(b.addr.Addr()), cmp.Compare(a.proto, b.proto), cmp.Compare(a.addr.Port(), b.addr.Port()))
	})
	// Two Services with one frontend: the compiler refuses that; keep the
	// first so that the file still loads.
	vs = slices.CompactFunc(vs, func(a, b ipvsVirtual) bool { return a.proto == b.proto && a.addr == b.addr })
	var b []byte
	for _, v := range vs {
		b = append(b, "-A "...)
		b = append(b, v.proto...)
		b = append(b, ' ')
		b = v.addr.AppendTo(b)
		b = append(b, " -s "...)
		b = append(b, v.sched...)
		if v.persist > 0 {
			b = append(b, " -p "...)
			b = strconv.AppendInt(b, int64(v.persist), 10)
		}
		b = append(b, '\n')
		for _, r := range v.reals {
			b = append(b, "-a "...)
			b = append(b, v.proto...)
			b = append(b, ' ')
			b = v.addr.AppendTo(b)
			b = append(b, " -r "...)
			b = r.AppendTo(b)
			b = append(b, " -m -w 1\n"...)
		}
	}
	return b
}

// ipvsProto is ipvsadm's flag for a Service protocol, "" for none.
func ipvsProto(p string) string {
	switch p {
	case "TCP":
		return "-t"
	case "UDP":
		return "-u"
	case "SCTP":
		return "--sctp-service"
	}
	return ""
}
