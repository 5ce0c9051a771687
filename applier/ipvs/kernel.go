package ipvs

import (
	"errors"
	"net/netip"

	"netspec.dev/netspec/render/ipvsmodel"
)

// LinkName is the dummy interface that holds the frontend addresses, so
// that the node accepts the packets IPVS balances. netspec owns it.
const LinkName = "netspec-ipvs0"

// ErrNoIPVS is wrapped by the error of Open, Plan and Apply when the kernel
// has no IPVS (the ip_vs module is not loaded). moby/ipvs cannot tell: on
// such a kernel its calls succeed and change nothing.
var ErrNoIPVS = errors.New("IPVS is not available in this kernel")

// IPVS service flags (include/uapi/linux/ip_vs.h).
const (
	// FlagPersistent is the service flag of persistence (ClientIP
	// affinity): a client keeps its real server for Timeout seconds.
	FlagPersistent uint32 = 0x0001
	// flagHashed is set by the kernel on every service in its table; it
	// is no setting, and Kernel implementations leave it out.
	flagHashed uint32 = 0x0002
)

// Kernel is what an Applier reads and changes: the network namespace's
// IPVS table and its dummy interface LinkName. System is the real one,
// Fake an in-memory one. Changes are single kernel operations; a failed
// one changes nothing.
type Kernel interface {
	// CheckIPVS returns an error that wraps ErrNoIPVS when the kernel
	// has no IPVS, and says what to do about it.
	CheckIPVS() error

	// Services returns every virtual server, netspec's or not. A
	// virtual server that has no address (a firewall-mark service) has
	// a zero Key.Addr.
	Services() ([]KernelService, error)
	// Reals returns the real servers of a virtual server.
	Reals(ipvsmodel.Key) ([]ipvsmodel.RealServer, error)
	AddService(KernelService) error
	UpdateService(KernelService) error
	// DeleteService deletes a virtual server and its real servers.
	DeleteService(ipvsmodel.Key) error
	AddReal(ipvsmodel.Key, ipvsmodel.RealServer) error
	UpdateReal(ipvsmodel.Key, ipvsmodel.RealServer) error
	DeleteReal(ipvsmodel.Key, netip.AddrPort) error

	// Link returns the state of the interface LinkName.
	Link() (LinkState, error)
	// AddLink creates LinkName, a dummy interface, and sets it up.
	AddLink() error
	SetLinkUp() error
	DeleteLink() error
	AddAddr(netip.Prefix) error
	DeleteAddr(netip.Prefix) error
}

// KernelService is a virtual server's settings as the kernel holds them,
// without its real servers (which are the model's ipvsmodel.RealServer):
// the model's Persistence is the flag FlagPersistent with Timeout, and
// Netmask is of one client (kernelService).
type KernelService struct {
	ipvsmodel.Key
	Scheduler string
	Flags     uint32 // FlagPersistent and others, without the kernel's "hashed" bit
	Timeout   uint32 // persistence timeout, seconds
	// Netmask groups clients for persistence: for IPv4 a mask
	// (0xffffffff: each client alone), for IPv6 a prefix length (128).
	Netmask uint32
}

// LinkState is the state of the interface LinkName.
type LinkState struct {
	Exists bool
	Kind   string // "dummy" for the interface netspec made
	Up     bool
	Addrs  []netip.Prefix // every address, sorted (IPv6 link-local ones included)
}

// kernelService is the kernel's form of a desired virtual server.
func kernelService(vs *ipvsmodel.VirtualServer) KernelService {
	ks := KernelService{Key: vs.Key, Scheduler: vs.Scheduler, Netmask: defaultNetmask(vs.Addr)}
	if vs.Persistence > 0 {
		ks.Flags, ks.Timeout = FlagPersistent, vs.Persistence
	}
	return ks
}

// defaultNetmask is the persistence netmask of one client, as ipvsadm
// sets it. The kernel refuses an IPv6 service whose netmask is not a
// prefix length from 1 to 128.
func defaultNetmask(a netip.Addr) uint32 {
	if a.Is4() {
		return 0xffffffff
	}
	return 128
}

// hostPrefix returns the address as a one-address prefix (/32 or /128),
// as it is bound to the dummy interface.
func hostPrefix(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }
