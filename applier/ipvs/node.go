package ipvs

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
)

// sysctls are the namespace's IPVS settings netspec needs, as kube-proxy's
// IPVS mode sets them: conntrack, so that the nftables tables' masquerade
// applies to IPVS connections; expire_nodest_conn, so that a connection to
// a real server that was removed is dropped at its next packet and the
// client's retry reaches a live one.
var sysctls = []struct{ path, value string }{
	{"net/ipv4/vs/conntrack", "1"},
	{"net/ipv4/vs/expire_nodest_conn", "1"},
}

// SetSysctls sets the IPVS sysctls of the network namespace nsFd (0: the
// current one) where they differ. /proc/sys/net is per namespace: the
// files are opened on a thread switched into it. A sysctl already right is
// not written, so that a service whose /proc/sys is read-only (systemd's
// ProtectKernelTunables) works when /etc/sysctl.d set them.
func SetSysctls(nsFd int) error {
	return inNamespace(nsFd, func() error {
		for _, s := range sysctls {
			path := "/proc/sys/" + s.path
			if cur, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(cur)) == s.value {
				continue
			}
			if err := os.WriteFile(path, []byte(s.value), 0); err != nil {
				return fmt.Errorf("sysctl %s=%s (set it in /etc/sysctl.d, or let netspec write /proc/sys): %w", strings.ReplaceAll(s.path, "/", "."), s.value, err)
			}
		}
		return nil
	})
}

// CleanupLeftovers removes what the IPVS data plane left in the network
// namespace nsFd, for a node that now uses nftables: the virtual servers
// netspec owns and the interface LinkName. Without IPVS in the kernel
// there can be no virtual servers, and only the interface is deleted. It
// reports whether there was anything to remove.
func CleanupLeftovers(nsFd int) (bool, error) {
	links, err := openLinks(nsFd)
	if err != nil {
		return false, err
	}
	defer links.Close()
	st, err := links.Link()
	if err != nil || !st.Exists {
		return false, err
	}
	a, err := Open(nsFd)
	switch {
	case errors.Is(err, ErrNoIPVS):
		return true, links.DeleteLink()
	case err != nil:
		return false, err
	}
	defer a.Close()
	return true, a.Cleanup()
}

// LocalAddrs lists the addresses of the network namespace nsFd (0: the
// current one) on which node ports may answer, for the Cluster's
// nodePortAddresses: those of every interface but loopback and LinkName
// (which holds frontends, and the node-port addresses netspec bound
// there itself), without IPv6 link-local addresses. Sorted.
func LocalAddrs(nsFd int) ([]netip.Addr, error) {
	s, err := openLinks(nsFd)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	links, err := s.nl.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", explain(err))
	}
	skip := map[int]bool{}
	for _, l := range links {
		if a := l.Attrs(); a.Flags&net.FlagLoopback != 0 || a.Name == LinkName {
			skip[a.Index] = true
		}
	}
	addrs, err := s.addrList(nil)
	if err != nil {
		return nil, fmt.Errorf("list addresses: %w", explain(err))
	}
	var out []netip.Addr
	for _, a := range addrs {
		p, ok := prefixOf(a)
		ip := p.Addr()
		if !ok || skip[a.LinkIndex] || ip.Is6() && ip.IsLinkLocalUnicast() || ip.IsLoopback() {
			continue
		}
		out = append(out, ip)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out), nil
}
