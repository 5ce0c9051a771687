package healthcheck

import (
	"net/netip"
	"slices"
	"strings"
)

// Status is the state of one Service's health check node port.
type Status struct {
	Namespace, Name string
	Port            uint16
	LocalEndpoints  int
	Listening       []netip.Addr // addresses bound, sorted
	Failing         []netip.Addr // addresses that could not bind at the last Sync, sorted
}

// Status returns the state of every health check served, by
// namespace/name.
func (s *Server) Status() []Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Status, 0, len(s.services))
	for _, in := range s.services {
		st := Status{Namespace: in.namespace, Name: in.name, Port: in.port, LocalEndpoints: int(in.endpoints.Load())}
		for a := range in.listeners {
			st.Listening = append(st.Listening, a)
		}
		for a := range in.failed {
			st.Failing = append(st.Failing, a)
		}
		slices.SortFunc(st.Listening, netip.Addr.Compare)
		slices.SortFunc(st.Failing, netip.Addr.Compare)
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b Status) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return out
}
