package ipvs

import "net/netip"

// Summary counts netspec's virtual servers in the kernel: those whose
// address is on LinkName. It is what `netspec status` shows of a node
// whose daemon does not answer.
type Summary struct {
	Interface      bool // LinkName exists
	VirtualServers int
	RealServers    int
}

// Summarize reads netspec's virtual servers and their real servers from k.
// It only reads.
func Summarize(k Kernel) (Summary, error) {
	var s Summary
	link, err := k.Link()
	if err != nil || !link.Exists {
		return s, err
	}
	s.Interface = true
	owned := map[netip.Addr]bool{}
	for _, p := range link.Addrs {
		owned[p.Addr()] = true
	}
	svcs, err := k.Services()
	if err != nil {
		return s, err
	}
	for _, svc := range svcs {
		if !svc.Addr.IsValid() || !owned[svc.Addr] {
			continue
		}
		s.VirtualServers++
		reals, err := k.Reals(svc.Key)
		if err != nil {
			return s, err
		}
		s.RealServers += len(reals)
	}
	return s, nil
}
