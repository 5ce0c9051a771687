package render

import (
	"cmp"
	"net/netip"

	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/render/ipvsmodel"
	"netspec.dev/netspec/render/nftmodel"
)

// DefaultIPVSScheduler is the scheduler of a Service without the
// annotation netspec.dev/ipvs-scheduler, as kube-proxy's default.
const DefaultIPVSScheduler = "rr"

// IPVS prints IPVSTable(p, sched): the form of `ipvsadm -S -n`, so that
// `ipvsadm -R` can load the file and `ipvsadm -S -n` of a node that
// applied it prints the same lines (order aside). This is ipvs.txt.
func IPVS(p *plan.Plan, sched string) []byte {
	return IPVSTable(p, sched).AppendText(nil)
}

// IPVSTable builds the model of the Plan's virtual servers: one per
// frontend: each cluster IP, external IP and LoadBalancer IP with port,
// and each node-port address with the node port (the node's addresses
// that plan.NodePortAddress accepts: with nodePortAddresses, those inside
// them; IPVSTableAt takes the node's local addresses instead); one real
// server per endpoint of the frontend's family (Port.Cluster for cluster
// IPs, Port.External for the rest), masqueraded with weight 1. ClientIP
// affinity is persistence with the Service's timeout. A frontend without
// endpoints is still declared: the nftables tables reject or drop its
// traffic. sched is the scheduler of Services without the annotation (""
// for DefaultIPVSScheduler). The table is ordered (ipvsmodel.Key.Compare):
// equal Plans give equal tables.
func IPVSTable(p *plan.Plan, sched string) *ipvsmodel.Table {
	return IPVSTableAt(p, sched, p.NodePortAddrs(nil))
}

// IPVSTableAt is IPVSTable with the node ports' virtual servers on
// nodePorts: the node-port addresses that the IPVS applier finds among
// the node's local addresses, as the nftables rules match them
// (Cluster.NodePortAddresses reach addresses that the Node object does not
// list).
func IPVSTableAt(p *plan.Plan, sched string, nodePorts []netip.Addr) *ipvsmodel.Table {
	if sched == "" {
		sched = DefaultIPVSScheduler
	}
	t := &ipvsmodel.Table{}
	for i := range p.Services {
		svc := &p.Services[i]
		if !svc.Proxied() {
			continue
		}
		s := cmp.Or(svc.IPVSScheduler, sched)
		persist := uint32(max(svc.AffinitySeconds, 0))
		for j := range svc.Ports {
			port := &svc.Ports[j]
			proto, ok := nftmodel.ProtoOf(port.Protocol)
			if !ok {
				continue
			}
			// add adds the virtual server of a frontend. External
			// frontends of an IP family the Service has no cluster IP of
			// are none, as in kube-proxy (and the nftables data plane).
			add := func(a netip.Addr, pn uint16, idx []int) {
				if !svc.HasFamily(a) {
					return
				}
				a = normAddr(a)
				v := ipvsmodel.VirtualServer{Key: ipvsmodel.Key{Protocol: ipvsmodel.Protocol(proto), Addr: a, Port: pn}, Scheduler: s, Persistence: persist}
				for _, k := range idx {
					if k < 0 || k >= len(port.Endpoints) {
						continue
					}
					ep := port.Endpoints[k]
					if ip := normAddr(ep.IP); ip.Is4() == a.Is4() {
						v.Reals = append(v.Reals, ipvsmodel.RealServer{Addr: ip, Port: ep.Port, Forward: ipvsmodel.Masquerade, Weight: 1})
					}
				}
				t.Services = append(t.Services, v)
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
	// Two Services with one frontend: the compiler refuses that; Sort
	// keeps the first so that the table still loads.
	t.Sort()
	return t
}
