package compiler

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"netspec.dev/netspec/plan"
)

// envFiles builds the service environment of every namespace, as the
// kubelet gives it to pods (enableServiceLinks): for each Service of the
// namespace that has a cluster IP,
//
//	WEB_SERVICE_HOST=10.96.0.10           first cluster IP
//	WEB_SERVICE_PORT=80                   first port
//	WEB_SERVICE_PORT_HTTP=80              each named port
//	WEB_PORT=tcp://10.96.0.10:80          first port
//	WEB_PORT_80_TCP=tcp://10.96.0.10:80   each port, with _PROTO, _PORT, _ADDR
//
// Names are upper case with '-' as '_'; IPv6 addresses are bracketed in URLs.
func envFiles(p *plan.Plan, namespaces []string) []plan.EnvFile {
	byNS := map[string][]plan.EnvVar{}
	for i := range p.Services {
		s := &p.Services[i]
		if len(s.ClusterIPs) == 0 || len(s.Ports) == 0 {
			continue // headless and ExternalName Services have no variables
		}
		byNS[s.Namespace] = append(byNS[s.Namespace], serviceEnv(s)...)
	}
	var out []plan.EnvFile
	for _, ns := range namespaces {
		vars := byNS[ns]
		slices.SortFunc(vars, func(a, b plan.EnvVar) int { return strings.Compare(a.Name, b.Name) })
		out = append(out, plan.EnvFile{Namespace: ns, Vars: vars})
	}
	return out
}

func envName(s string) string {
	return strings.ToUpper(strings.ReplaceAll(s, "-", "_"))
}

func serviceEnv(s *plan.Service) []plan.EnvVar {
	name := envName(s.Name)
	ip := s.ClusterIPs[0]
	host := ip.String()
	first := s.Ports[0]
	vars := []plan.EnvVar{
		{Name: name + "_SERVICE_HOST", Value: host},
		{Name: name + "_SERVICE_PORT", Value: strconv.Itoa(int(first.Port))},
		{Name: name + "_PORT", Value: portURL(first, ip)},
	}
	for _, p := range s.Ports {
		if p.Name != "" {
			vars = append(vars, plan.EnvVar{Name: name + "_SERVICE_PORT_" + envName(p.Name), Value: strconv.Itoa(int(p.Port))})
		}
		prefix := name + "_PORT_" + strconv.Itoa(int(p.Port)) + "_" + strings.ToUpper(p.Protocol)
		vars = append(vars,
			plan.EnvVar{Name: prefix, Value: portURL(p, ip)},
			plan.EnvVar{Name: prefix + "_PROTO", Value: strings.ToLower(p.Protocol)},
			plan.EnvVar{Name: prefix + "_PORT", Value: strconv.Itoa(int(p.Port))},
			plan.EnvVar{Name: prefix + "_ADDR", Value: host},
		)
	}
	return vars
}

func portURL(p plan.Port, ip netip.Addr) string {
	return strings.ToLower(p.Protocol) + "://" + netip.AddrPortFrom(ip, p.Port).String()
}
