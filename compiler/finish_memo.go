package compiler

import (
	"slices"

	"netspec.dev/netspec/plan"
)

// finishMemo is what Staged.Finish keeps in a Memo: the last finished
// plan. Its DNS records and env files are made of the Services' names,
// addresses and ports (and a headless Service's ready endpoints), not of
// the endpoints of the others; when none of those changed, as after most
// endpoint changes, the next plan shares them.
type finishMemo struct {
	last       *plan.Plan
	namespaces []string
}

// reuse sets p's DNS and Env to the last plan's, if they are what
// dnsRecords and envFiles would make, and tells whether it did.
func (m *finishMemo) reuse(p *plan.Plan, namespaces []string) bool {
	last := m.last
	if last == nil || !slices.Equal(m.namespaces, namespaces) || !last.Cluster.Equal(p.Cluster) ||
		len(last.Services) != len(p.Services) {
		return false
	}
	for i := range p.Services {
		if !sameNames(&last.Services[i], &p.Services[i]) {
			return false
		}
	}
	p.DNS, p.Env = last.DNS, last.Env
	return true
}

// keep remembers p, finished, for the next Finish.
func (m *finishMemo) keep(p *plan.Plan, namespaces []string) {
	m.last, m.namespaces = p, namespaces
}

// sameNames tells whether two Services give the same DNS records and env
// variables: every field dnsRecords and envFiles read.
func sameNames(a, b *plan.Service) bool {
	if a.Namespace != b.Namespace || a.Name != b.Name || a.Type != b.Type || a.Headless != b.Headless ||
		a.ExternalName != b.ExternalName || !slices.Equal(a.ClusterIPs, b.ClusterIPs) || len(a.Ports) != len(b.Ports) {
		return false
	}
	for i := range a.Ports {
		pa, pb := &a.Ports[i], &b.Ports[i]
		if pa.Name != pb.Name || pa.Protocol != pb.Protocol || pa.Port != pb.Port {
			return false
		}
		if a.Headless && !slices.EqualFunc(pa.Endpoints, pb.Endpoints, plan.Endpoint.Equal) {
			return false
		}
	}
	return true
}
