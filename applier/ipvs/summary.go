package ipvs

import (
	"net/netip"
	"slices"
)

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
	svcs, err := ownedServices(k, link)
	if err != nil {
		return s, err
	}
	s.VirtualServers = len(svcs)
	for _, svc := range svcs {
		reals, err := k.Reals(svc.Key)
		if err != nil {
			return s, err
		}
		s.RealServers += len(reals)
	}
	return s, nil
}

// ownedServices are the virtual servers netspec owns: those whose address
// is on link, the interface LinkName.
func ownedServices(k Kernel, link LinkState) ([]KernelService, error) {
	owned := map[netip.Addr]bool{}
	for _, p := range link.Addrs {
		owned[p.Addr()] = true
	}
	svcs, err := k.Services()
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(svcs, func(s KernelService) bool { return !s.Addr.IsValid() || !owned[s.Addr] }), nil
}
