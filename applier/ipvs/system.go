package ipvs

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"slices"

	"github.com/moby/ipvs"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"netspec.dev/netspec/applier/netnsexec"
	"netspec.dev/netspec/render/ipvsmodel"
)

// System is the Kernel of a network namespace: its IPVS table over
// generic netlink (moby/ipvs) and its interface LinkName over rtnetlink.
// It is not safe for concurrent use.
type System struct {
	nsFd int
	ipvs *ipvs.Handle // nil until IPVS is known to be there
	nl   *netlink.Handle
	link netlink.Link // LinkName, as last found or made; nil: look it up
}

var _ Kernel = (*System)(nil)

// OpenSystem connects to the kernel of the network namespace nsFd (an open
// /var/run/netns/NAME or /proc/PID/ns/net; 0 for the current one). It
// fails with ErrNoIPVS when the kernel has no IPVS.
func OpenSystem(nsFd int) (*System, error) {
	s, err := openLinks(nsFd)
	if err != nil {
		return nil, err
	}
	if err := s.CheckIPVS(); err != nil {
		s.Close()
		return nil, err
	}
	// moby/ipvs opens the namespace from a path; this one is nsFd's.
	path := ""
	if nsFd > 0 {
		path = fmt.Sprintf("/proc/self/fd/%d", nsFd)
	}
	if s.ipvs, err = ipvs.New(path); err != nil {
		s.Close()
		return nil, fmt.Errorf("ipvs: connect: %w", explain(err))
	}
	return s, nil
}

// openLinks opens the rtnetlink side of a System only: enough for the
// interface, which needs no IPVS.
func openLinks(nsFd int) (*System, error) {
	ns := netns.None()
	if nsFd > 0 {
		ns = netns.NsHandle(nsFd)
	}
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("rtnetlink: connect: %w", explain(err))
	}
	return &System{nsFd: nsFd, nl: h}, nil
}

// Close releases the netlink sockets.
func (s *System) Close() {
	if s.ipvs != nil {
		s.ipvs.Close()
	}
	s.nl.Close()
}

// ipVSProc is the file the ip_vs module adds to every network namespace.
const ipVSProc = "net/ip_vs"

// CheckIPVS looks for /proc/net/ip_vs as the namespace sees it: /proc/net
// is per namespace, and a thread's own is /proc/thread-self/net.
func (s *System) CheckIPVS() error {
	var err error
	if e := inNamespace(s.nsFd, func() error { _, err = os.Stat("/proc/thread-self/" + ipVSProc); return nil }); e != nil {
		return e
	}
	return noIPVS(err)
}

// noIPVS turns the result of looking for /proc/net/ip_vs into the error
// of a missing IPVS, which says what to do.
func noIPVS(statErr error) error {
	switch {
	case statErr == nil:
		return nil
	case errors.Is(statErr, fs.ErrNotExist):
		return fmt.Errorf(`%w (no /proc/net/ip_vs): load it with "modprobe ip_vs", or use --dataplane nftables`, ErrNoIPVS)
	}
	return fmt.Errorf("ipvs: look for /proc/net/ip_vs: %w", statErr)
}

// inNamespace runs fn on a thread switched into the namespace nsFd,
// explaining a missing permission; with nsFd 0, on the calling one.
func inNamespace(nsFd int, fn func() error) error {
	if nsFd <= 0 {
		return fn()
	}
	return explain(netnsexec.Run(nsFd, fn))
}

// Services implements Kernel.
func (s *System) Services() ([]KernelService, error) {
	svcs, err := s.ipvs.GetServices()
	if err != nil {
		return nil, fmt.Errorf("list virtual servers: %w", explain(err))
	}
	out := make([]KernelService, 0, len(svcs))
	for _, svc := range svcs {
		out = append(out, fromIPVSService(svc))
	}
	return out, nil
}

// Reals implements Kernel.
func (s *System) Reals(k ipvsmodel.Key) ([]ipvsmodel.RealServer, error) {
	dsts, err := s.ipvs.GetDestinations(keyService(k))
	if err != nil {
		return nil, fmt.Errorf("list real servers of %s: %w", k, explain(err))
	}
	out := make([]ipvsmodel.RealServer, 0, len(dsts))
	for _, d := range dsts {
		out = append(out, fromIPVSDest(d))
	}
	return out, nil
}

// AddService implements Kernel.
func (s *System) AddService(ks KernelService) error {
	return explainService(s.ipvs.NewService(toIPVSService(ks)), ks)
}

// UpdateService implements Kernel.
func (s *System) UpdateService(ks KernelService) error {
	return explainService(s.ipvs.UpdateService(toIPVSService(ks)), ks)
}

// DeleteService implements Kernel.
func (s *System) DeleteService(k ipvsmodel.Key) error {
	return explain(s.ipvs.DelService(keyService(k)))
}

// AddReal implements Kernel.
func (s *System) AddReal(k ipvsmodel.Key, r ipvsmodel.RealServer) error {
	return explain(s.ipvs.NewDestination(keyService(k), toIPVSDest(r)))
}

// UpdateReal implements Kernel.
func (s *System) UpdateReal(k ipvsmodel.Key, r ipvsmodel.RealServer) error {
	return explain(s.ipvs.UpdateDestination(keyService(k), toIPVSDest(r)))
}

// DeleteReal implements Kernel.
func (s *System) DeleteReal(k ipvsmodel.Key, ap netip.AddrPort) error {
	return explain(s.ipvs.DelDestination(keyService(k), toIPVSDest(ipvsmodel.RealServer{Addr: ap.Addr(), Port: ap.Port()})))
}

// keyService is the moby/ipvs form of the virtual server k, as far as
// the kernel looks it up.
func keyService(k ipvsmodel.Key) *ipvs.Service {
	return toIPVSService(KernelService{Key: k, Netmask: defaultNetmask(k.Addr)})
}

// toIPVSService is the moby/ipvs form of a virtual server.
func toIPVSService(ks KernelService) *ipvs.Service {
	return &ipvs.Service{
		AddressFamily: family(ks.Addr),
		Address:       net.IP(ks.Addr.AsSlice()),
		Protocol:      uint16(ks.Protocol),
		Port:          ks.Port,
		SchedName:     ks.Scheduler,
		Flags:         ks.Flags,
		Timeout:       ks.Timeout,
		Netmask:       ks.Netmask,
	}
}

// family is the address family of a, as moby/ipvs takes it.
func family(a netip.Addr) uint16 {
	if a.Is4() {
		return unix.AF_INET
	}
	return unix.AF_INET6
}

// fromIPVSService reads a virtual server from moby/ipvs; a firewall-mark
// service gets a zero Key.Addr.
func fromIPVSService(svc *ipvs.Service) KernelService {
	ks := KernelService{
		Scheduler: svc.SchedName,
		Flags:     svc.Flags &^ flagHashed,
		Timeout:   svc.Timeout,
		Netmask:   svc.Netmask,
	}
	if svc.FWMark != 0 {
		return ks
	}
	ks.Key = ipvsmodel.Key{Protocol: ipvsmodel.Protocol(svc.Protocol), Addr: addrOf(svc.Address, svc.AddressFamily), Port: svc.Port}
	return ks
}

func toIPVSDest(r ipvsmodel.RealServer) *ipvs.Destination {
	return &ipvs.Destination{
		AddressFamily:   family(r.Addr),
		Address:         net.IP(r.Addr.AsSlice()),
		Port:            r.Port,
		Weight:          r.Weight,
		ConnectionFlags: uint32(r.Forward) & ipvs.ConnectionFlagFwdMask,
	}
}

func fromIPVSDest(d *ipvs.Destination) ipvsmodel.RealServer {
	return ipvsmodel.RealServer{
		Addr:    addrOf(d.Address, d.AddressFamily),
		Port:    d.Port,
		Weight:  d.Weight,
		Forward: ipvsmodel.Forward(d.ConnectionFlags & ipvs.ConnectionFlagFwdMask),
	}
}

// addrOf reads an address moby/ipvs returns: 4 bytes for IPv4, 16 for
// IPv6, or IPv4 in 16 bytes.
func addrOf(ip net.IP, family uint16) netip.Addr {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.Addr{}
	}
	if family == unix.AF_INET {
		a = a.Unmap()
	}
	return a
}

// Link implements Kernel.
func (s *System) Link() (LinkState, error) {
	s.link = nil
	l, err := s.nl.LinkByName(LinkName)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return LinkState{}, nil
		}
		return LinkState{}, fmt.Errorf("find interface %s: %w", LinkName, explain(err))
	}
	st := LinkState{Exists: true, Kind: l.Type(), Up: l.Attrs().Flags&net.FlagUp != 0}
	addrs, err := s.addrList(l)
	if err != nil {
		return LinkState{}, fmt.Errorf("list addresses of %s: %w", LinkName, explain(err))
	}
	for _, a := range addrs {
		if p, ok := prefixOf(a); ok {
			st.Addrs = append(st.Addrs, p)
		}
	}
	slices.SortFunc(st.Addrs, comparePrefixes)
	s.link = l
	return st, nil
}

// addrList lists the addresses of link (nil: of every link), dumped
// again when they changed while they were read.
func (s *System) addrList(link netlink.Link) ([]netlink.Addr, error) {
	for try := 0; ; try++ {
		addrs, err := s.nl.AddrList(link, netlink.FAMILY_ALL)
		if !errors.Is(err, netlink.ErrDumpInterrupted) || try == 5 {
			return addrs, err
		}
	}
}

// AddLink implements Kernel.
func (s *System) AddLink() error {
	s.link = nil
	if err := s.nl.LinkAdd(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: LinkName}}); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) {
			return fmt.Errorf(`%w (the kernel has no dummy interfaces: load them with "modprobe dummy")`, err)
		}
		return explain(err)
	}
	return s.SetLinkUp()
}

// SetLinkUp implements Kernel.
func (s *System) SetLinkUp() error {
	l, err := s.dummy()
	if err != nil {
		return err
	}
	return explain(s.nl.LinkSetUp(l))
}

// DeleteLink implements Kernel.
func (s *System) DeleteLink() error {
	l, err := s.dummy()
	if err != nil {
		return err
	}
	s.link = nil
	return explain(s.nl.LinkDel(l))
}

// AddAddr implements Kernel. An IPv6 address skips duplicate address
// detection: it is usable at once.
func (s *System) AddAddr(p netip.Prefix) error {
	l, err := s.dummy()
	if err != nil {
		return err
	}
	a := &netlink.Addr{IPNet: ipNet(p)}
	if p.Addr().Is6() {
		a.Flags = unix.IFA_F_NODAD
	}
	return explain(s.nl.AddrAdd(l, a))
}

// DeleteAddr implements Kernel.
func (s *System) DeleteAddr(p netip.Prefix) error {
	l, err := s.dummy()
	if err != nil {
		return err
	}
	return explain(s.nl.AddrDel(l, &netlink.Addr{IPNet: ipNet(p)}))
}

// dummy returns the interface LinkName.
func (s *System) dummy() (netlink.Link, error) {
	if s.link != nil {
		return s.link, nil
	}
	l, err := s.nl.LinkByName(LinkName)
	if err != nil {
		return nil, fmt.Errorf("find interface %s: %w", LinkName, explain(err))
	}
	s.link = l
	return l, nil
}

// prefixOf reads an address rtnetlink lists (IPv4-mapped as IPv4).
func prefixOf(a netlink.Addr) (netip.Prefix, bool) {
	ip, ok := netip.AddrFromSlice(a.IP)
	if a.IPNet == nil || !ok {
		return netip.Prefix{}, false
	}
	ones, _ := a.Mask.Size()
	return netip.PrefixFrom(ip.Unmap(), ones), true
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func comparePrefixes(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}

// explain adds what to do to the errors of a missing privilege.
func explain(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EPERM), errors.Is(err, os.ErrPermission):
		return fmt.Errorf("%w (netspec needs root, or CAP_NET_ADMIN, to change IPVS and network interfaces)", err)
	}
	return err
}

// explainService adds what to do to the errors of adding or changing a
// virtual server.
func explainService(err error, ks KernelService) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.ENOENT):
		// The kernel's answer when the scheduler's module is missing.
		return fmt.Errorf(`%w (is the scheduler %s missing? load it with "modprobe ip_vs_%s")`, err, ks.Scheduler, ks.Scheduler)
	case errors.Is(err, unix.EPROTONOSUPPORT):
		return fmt.Errorf("%w (this kernel's IPVS does not support %s)", err, ks.Protocol)
	}
	return explain(err)
}
