package plan

import "slices"

// Equal tells whether two Services are the same, as reflect.DeepEqual
// would, but for nil and empty slices, which every renderer treats alike.
// A daemon compares its last plan with the next one on every reload; this
// is many times faster than reflection on a big plan.
func (s *Service) Equal(o *Service) bool {
	return s.Namespace == o.Namespace && s.Name == o.Name && s.Type == o.Type &&
		slices.Equal(s.ClusterIPs, o.ClusterIPs) && s.Headless == o.Headless &&
		s.ExternalName == o.ExternalName && slices.Equal(s.ExternalIPs, o.ExternalIPs) &&
		slices.Equal(s.LoadBalancerIPs, o.LoadBalancerIPs) && slices.Equal(s.SourceRanges, o.SourceRanges) &&
		s.AffinitySeconds == o.AffinitySeconds && s.InternalLocal == o.InternalLocal &&
		s.ExternalLocal == o.ExternalLocal && s.HealthCheckNodePort == o.HealthCheckNodePort &&
		s.IPVSScheduler == o.IPVSScheduler && s.ProxyName == o.ProxyName &&
		(Shared(s.Ports, o.Ports) || slices.EqualFunc(s.Ports, o.Ports, Port.Equal))
}

// Shared tells whether a and b are the same memory. Plans are not changed
// once compiled, and a compiler memo hands an unchanged Service's slices
// to the next plan: those are equal without a look.
func Shared[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// Equal tells whether two Ports are the same (see Service.Equal).
func (p Port) Equal(o Port) bool {
	return p.Name == o.Name && p.Protocol == o.Protocol && p.Port == o.Port && p.NodePort == o.NodePort &&
		slices.EqualFunc(p.Endpoints, o.Endpoints, Endpoint.Equal) &&
		slices.Equal(p.Cluster, o.Cluster) && slices.Equal(p.External, o.External) &&
		slices.Equal(p.ShortCircuit, o.ShortCircuit)
}

// Equal tells whether two Endpoints are the same (see Service.Equal).
func (e Endpoint) Equal(o Endpoint) bool {
	return e.IP == o.IP && e.Port == o.Port && e.Ready == o.Ready && e.Serving == o.Serving &&
		e.Terminating == o.Terminating && e.NodeName == o.NodeName && e.Zone == o.Zone &&
		e.Hostname() == o.Hostname() && slices.Equal(e.ZoneHints(), o.ZoneHints()) &&
		slices.Equal(e.NodeHints(), o.NodeHints()) && e.Pod == o.Pod &&
		slices.EqualFunc(e.Probes, o.Probes, Probe.Equal)
}

// Equal tells whether two Probes are the same check (see Service.Equal).
func (p Probe) Equal(o Probe) bool {
	return p.Action == o.Action && p.Port == o.Port && p.PortName == o.PortName && p.Scheme == o.Scheme && p.Host == o.Host &&
		p.Path == o.Path && slices.Equal(p.Headers, o.Headers) && p.GRPCService == o.GRPCService &&
		p.InitialDelaySeconds == o.InitialDelaySeconds && p.PeriodSeconds == o.PeriodSeconds &&
		p.TimeoutSeconds == o.TimeoutSeconds && p.SuccessThreshold == o.SuccessThreshold &&
		p.FailureThreshold == o.FailureThreshold
}

// Equal tells whether two Nodes are the same (see Service.Equal).
func (n Node) Equal(o Node) bool {
	return n.Name == o.Name && n.Zone == o.Zone && slices.Equal(n.IPs, o.IPs)
}

// Equal tells whether two Clusters are the same (see Service.Equal).
func (c Cluster) Equal(o Cluster) bool {
	return c.Domain == o.Domain && slices.Equal(c.ServiceCIDRs, o.ServiceCIDRs) &&
		slices.Equal(c.PodCIDRs, o.PodCIDRs) && slices.Equal(c.NodePortAddresses, o.NodePortAddresses) &&
		c.DNSTTL == o.DNSTTL && c.DNSAddress == o.DNSAddress
}

// SameDataplane tells whether two plans program the kernel alike: the
// same format, node, cluster and Services; their DNS records and env
// files are not compared.
func SameDataplane(a, b *Plan) bool {
	if a.FormatVersion != b.FormatVersion || !a.Node.Equal(b.Node) || !a.Cluster.Equal(b.Cluster) ||
		len(a.Services) != len(b.Services) {
		return false
	}
	for i := range a.Services {
		if !a.Services[i].Equal(&b.Services[i]) {
			return false
		}
	}
	return true
}

// Equal tells whether two DNS record sets are the same (see Service.Equal).
func (d DNS) Equal(o DNS) bool {
	return Shared(d.Zones, o.Zones) || slices.EqualFunc(d.Zones, o.Zones, func(a, b Zone) bool {
		return a.Name == b.Name && slices.Equal(a.Records, b.Records)
	})
}

// Equal tells whether two env files are the same (see Service.Equal).
func (f EnvFile) Equal(o EnvFile) bool {
	return f.Namespace == o.Namespace && slices.Equal(f.Vars, o.Vars)
}

// Equal tells whether two plans are the same (see Service.Equal).
func (p *Plan) Equal(o *Plan) bool {
	return SameDataplane(p, o) && p.DNS.Equal(o.DNS) &&
		(Shared(p.Env, o.Env) || slices.EqualFunc(p.Env, o.Env, EnvFile.Equal))
}
