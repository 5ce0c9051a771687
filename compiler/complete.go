package compiler

import "netspec.dev/netspec/plan"

// Complete fills in what Compile derives from a Plan's Services, for
// Plans built by hand (tests of the packages that take Plans, such as the
// tree diff): each port's endpoint sets on p.Node, chosen as Compile
// chooses them for a Service without a traffic distribution, the DNS
// records, and the env files of namespaces (sorted; each gets a file, as
// the namespaces of a tree do).
func Complete(p *plan.Plan, namespaces []string) {
	for i := range p.Services {
		s := &p.Services[i]
		for j := range s.Ports {
			pp := &s.Ports[j]
			pp.Cluster, pp.External, pp.ShortCircuit = pick(pp.Endpoints, s, "", p.Node)
		}
	}
	p.DNS = dnsRecords(p)
	p.Env = envFiles(p, namespaces)
}
