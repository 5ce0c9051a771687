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
//
// The Service kubernetes of namespace default (the API server's) gives
// its variables to every namespace, as the kubelet's getServiceEnvVarMap
// does for the master services; a namespace's own Service kubernetes with
// a cluster IP wins over it.
func envFiles(p *plan.Plan, namespaces []string) []plan.EnvFile {
	// The plan holds every variable for as long as it is the node's: each
	// namespace's list is made at its size, and the names and values of a
	// Service are substrings of one string (envBuilder).
	count := map[string]int{}
	var master *plan.Service
	own := map[string]bool{} // the namespaces with a Service kubernetes of their own
	for i := range p.Services {
		if s := &p.Services[i]; hasEnv(s) {
			count[s.Namespace] += envCount(s)
			if s.Name == masterService {
				own[s.Namespace] = true
				if s.Namespace == masterNamespace {
					master = s
				}
			}
		}
	}
	if master != nil {
		for _, ns := range namespaces {
			if !own[ns] {
				count[ns] += envCount(master)
			}
		}
	}
	byNS := make(map[string][]plan.EnvVar, len(count))
	for ns, n := range count {
		byNS[ns] = make([]plan.EnvVar, 0, n)
	}
	var b envBuilder
	for i := range p.Services {
		if s := &p.Services[i]; hasEnv(s) {
			byNS[s.Namespace] = b.appendService(byNS[s.Namespace], s)
		}
	}
	if master != nil {
		// The namespaces share the variables' strings.
		vars := b.appendService(nil, master)
		for _, ns := range namespaces {
			if !own[ns] {
				byNS[ns] = append(byNS[ns], vars...)
			}
		}
	}
	var out []plan.EnvFile
	for _, ns := range namespaces {
		vars := byNS[ns]
		slices.SortFunc(vars, func(a, b plan.EnvVar) int { return strings.Compare(a.Name, b.Name) })
		out = append(out, plan.EnvFile{Namespace: ns, Vars: vars})
	}
	return out
}

// masterNamespace and masterService name the Service whose variables
// every namespace has: the kubelet's master service.
const (
	masterNamespace = "default"
	masterService   = "kubernetes"
)

// hasEnv tells whether s has variables: headless and ExternalName
// Services have none.
func hasEnv(s *plan.Service) bool { return len(s.ClusterIPs) > 0 && len(s.Ports) > 0 }

// envCount is the number of variables of s.
func envCount(s *plan.Service) int {
	n := 3
	for _, p := range s.Ports {
		n += 4
		if p.Name != "" {
			n++
		}
	}
	return n
}

// lowerProtocol is strings.ToLower(p) without a new string for the
// protocols a Service port has.
func lowerProtocol(p string) string {
	switch p {
	case "TCP":
		return "tcp"
	case "UDP":
		return "udp"
	case "SCTP":
		return "sctp"
	}
	return strings.ToLower(p)
}

// appendEnvName appends s as a variable name: upper case, '-' as '_'.
func appendEnvName(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '-':
			c = '_'
		case 'a' <= c && c <= 'z':
			c -= 'a' - 'A'
		}
		b = append(b, c)
	}
	return b
}

// envBuilder makes the variables of one Service after another. It writes
// a Service's names and values into one buffer, each once: a name that
// is the start of another (WEB_PORT of WEB_PORT_80_TCP, that of
// WEB_PORT_80_TCP_PROTO) is cut from it, and a value used twice is
// written once.
type envBuilder struct {
	buf  []byte
	vars []envSpan
}

// envSpan is a variable as two spans of the buffer; a value span with
// lo < 0 stands for the literal lit.
type envSpan struct {
	name, value [2]int
	lit         string
}

// appendService appends the variables of s to vars, in the order
//
//	NAME_SERVICE_HOST, NAME_SERVICE_PORT, NAME_PORT, then for each port
//	NAME_SERVICE_PORT_<PORT NAME> (named ports), NAME_PORT_<port>_<PROTO>
//	and its _PROTO, _PORT and _ADDR.
func (e *envBuilder) appendService(vars []plan.EnvVar, s *plan.Service) []plan.EnvVar {
	b, out := e.buf[:0], e.vars[:0]
	ip := s.ClusterIPs[0]
	host := ip.String()
	span := func(lo int) [2]int { return [2]int{lo, len(b)} }

	// NAME_SERVICE_HOST
	lo := len(b)
	b = appendEnvName(b, s.Name)
	nameEnd := len(b) - lo // NAME's length
	b = append(b, "_SERVICE_HOST"...)
	out = append(out, envSpan{name: span(lo), value: [2]int{-1}, lit: host})

	first := len(out) // NAME_SERVICE_PORT and NAME_PORT, set in the loop
	out = append(out, envSpan{}, envSpan{})
	for k, p := range s.Ports {
		port := len(b)
		b = strconv.AppendUint(b, uint64(p.Port), 10)
		portSpan := span(port)
		proto := lowerProtocol(p.Protocol)
		if k == 0 || p.Name != "" {
			// NAME_SERVICE_PORT[_<PORT NAME>]
			lo := len(b)
			b = append(b, b[0:nameEnd]...)
			b = append(b, "_SERVICE_PORT"...)
			if k == 0 {
				out[first] = envSpan{name: span(lo), value: portSpan}
			}
			if p.Name != "" {
				b = append(b, '_')
				b = appendEnvName(b, p.Name)
				out = append(out, envSpan{name: span(lo), value: portSpan})
			}
		}
		url := len(b)
		b = append(b, proto...)
		b = append(b, "://"...)
		b = netip.AddrPortFrom(ip, p.Port).AppendTo(b)
		urlSpan := span(url)
		// NAME_PORT_<port>_<PROTO>, its _PROTO, _PORT and _ADDR
		lo := len(b)
		b = append(b, b[0:nameEnd]...)
		b = append(b, "_PORT"...)
		if k == 0 {
			out[first+1] = envSpan{name: span(lo), value: urlSpan}
		}
		b = append(b, '_')
		b = append(b, b[port:portSpan[1]]...)
		b = append(b, '_')
		b = append(b, strings.ToUpper(p.Protocol)...)
		prefix := span(lo)
		b = append(b, "_PROTO"...)
		out = append(out, envSpan{name: prefix, value: urlSpan}, envSpan{name: span(lo), value: [2]int{-1}, lit: proto})
		lo = len(b)
		b = append(b, b[prefix[0]:prefix[1]]...)
		b = append(b, "_PORT"...)
		out = append(out, envSpan{name: span(lo), value: portSpan})
		lo = len(b)
		b = append(b, b[prefix[0]:prefix[1]]...)
		b = append(b, "_ADDR"...)
		out = append(out, envSpan{name: span(lo), value: [2]int{-1}, lit: host})
	}
	str := string(b)
	for _, v := range out {
		val := v.lit
		if v.value[0] >= 0 {
			val = str[v.value[0]:v.value[1]]
		}
		vars = append(vars, plan.EnvVar{Name: str[v.name[0]:v.name[1]], Value: val})
	}
	e.buf, e.vars = b, out
	return vars
}
