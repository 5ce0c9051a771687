package ipvs

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Protocol is the transport protocol of a virtual server, as IPVS numbers
// it (the IP protocol number).
type Protocol uint16

// The protocols netspec uses.
const (
	TCP  Protocol = 6
	UDP  Protocol = 17
	SCTP Protocol = 132
)

// protocols are the valid protocols, in the order of their numbers.
var protocols = []Protocol{TCP, UDP, SCTP}

// String returns "tcp", "udp" or "sctp".
func (p Protocol) String() string {
	switch p {
	case TCP:
		return "tcp"
	case UDP:
		return "udp"
	case SCTP:
		return "sctp"
	}
	return fmt.Sprintf("protocol-%d", uint16(p))
}

// option is the ipvsadm option that names a service of the protocol.
func (p Protocol) option() string {
	switch p {
	case TCP:
		return "-t"
	case UDP:
		return "-u"
	case SCTP:
		return "--sctp-service"
	}
	return "--protocol-" + fmt.Sprint(uint16(p))
}

// valid tells whether p is TCP, UDP or SCTP.
func (p Protocol) valid() bool { return slices.Contains(protocols, p) }

// schedulers are the IPVS schedulers netspec accepts, in the order the
// design lists them.
var schedulers = []string{"rr", "wrr", "lc", "wlc", "sh", "dh", "sed", "nq", "mh"}

// Key identifies a virtual server: IPVS keeps one per protocol, address
// and port.
type Key struct {
	Protocol Protocol
	Addr     netip.Addr
	Port     uint16
}

// String returns the key as "tcp 10.96.0.10:80" or "tcp [fd00::10]:80".
func (k Key) String() string {
	return k.Protocol.String() + " " + netip.AddrPortFrom(k.Addr, k.Port).String()
}

// compareKeys orders keys by address (IPv4 first), port, then protocol.
func compareKeys(a, b Key) int {
	if c := a.Addr.Compare(b.Addr); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Port, b.Port); c != 0 {
		return c
	}
	return cmp.Compare(a.Protocol, b.Protocol)
}

// VirtualServer is a virtual server (an IPVS service) with its real
// servers.
type VirtualServer struct {
	Key
	// Scheduler is the IPVS scheduler: rr, wrr, lc, wlc, sh, dh, sed, nq
	// or mh.
	Scheduler string
	// Persistence is the persistence timeout in seconds (ClientIP
	// session affinity); 0 for none.
	Persistence uint32
	// Reals are the real servers, ordered by address then port.
	Reals []RealServer
}

// RealServer is a real server (an IPVS destination) of a virtual server,
// always forwarded to by masquerading.
type RealServer struct {
	Addr   netip.Addr
	Port   uint16
	Weight int // 0 to 65535
}

// AddrPort returns the real server's address and port.
func (r RealServer) AddrPort() netip.AddrPort { return netip.AddrPortFrom(r.Addr, r.Port) }

func compareReals(a, b RealServer) int { return a.AddrPort().Compare(b.AddrPort()) }

// maxWeight is the largest weight of a real server (ipvsadm's limit; the
// kernel reports weights in 16 bits through moby/ipvs).
const maxWeight = 65535

// maxPersistence is the largest persistence timeout, in seconds
// (ipvsadm's limit: 31 days).
const maxPersistence = 31 * 86400

// Table is the desired IPVS state of a node: its virtual servers,
// ordered by address, port and protocol.
type Table struct {
	Services []VirtualServer
}

// Frontends returns the distinct addresses of the virtual servers, sorted:
// the addresses that must be bound to the dummy interface netspec-ipvs0 so
// that the node accepts their packets.
func (t *Table) Frontends() []netip.Addr {
	if t == nil {
		return nil
	}
	var out []netip.Addr
	for _, vs := range t.Services {
		out = append(out, vs.Addr)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// String returns the table in the grammar Parse reads (`ipvsadm -S -n`
// form), sorted: Parse(t.String()) equals t.
func (t *Table) String() string {
	var b strings.Builder
	if t == nil {
		return ""
	}
	for _, vs := range t.Services {
		fmt.Fprintf(&b, "-A %s %s -s %s", vs.Protocol.option(), netip.AddrPortFrom(vs.Addr, vs.Port), vs.Scheduler)
		if vs.Persistence > 0 {
			fmt.Fprintf(&b, " -p %d", vs.Persistence)
		}
		b.WriteByte('\n')
		for _, r := range vs.Reals {
			fmt.Fprintf(&b, "-a %s %s -r %s -m -w %d\n", vs.Protocol.option(), netip.AddrPortFrom(vs.Addr, vs.Port), r.AddrPort(), r.Weight)
		}
	}
	return b.String()
}

// sorted returns the table's services ordered by key, each with its real
// servers ordered, without changing t. It checks what Parse checks, for a
// Table made by hand.
func (t *Table) sorted() ([]VirtualServer, error) {
	if t == nil {
		return nil, nil
	}
	out := slices.Clone(t.Services)
	slices.SortFunc(out, func(a, b VirtualServer) int { return compareKeys(a.Key, b.Key) })
	for i := range out {
		vs := &out[i]
		if i > 0 && out[i-1].Key == vs.Key {
			return nil, fmt.Errorf("virtual server %s is in the table twice", vs.Key)
		}
		if err := checkService(vs); err != nil {
			return nil, fmt.Errorf("virtual server %s: %w", vs.Key, err)
		}
		vs.Reals = slices.Clone(vs.Reals)
		slices.SortFunc(vs.Reals, compareReals)
		for j, r := range vs.Reals {
			if j > 0 && vs.Reals[j-1].AddrPort() == r.AddrPort() {
				return nil, fmt.Errorf("virtual server %s: real server %s is in the table twice", vs.Key, r.AddrPort())
			}
			if err := checkReal(vs, r); err != nil {
				return nil, fmt.Errorf("virtual server %s: real server %s: %w", vs.Key, r.AddrPort(), err)
			}
		}
	}
	return out, nil
}

func checkService(vs *VirtualServer) error {
	switch {
	case !vs.Protocol.valid():
		return fmt.Errorf("unknown protocol %d", uint16(vs.Protocol))
	case !slices.Contains(schedulers, vs.Scheduler):
		return fmt.Errorf("unknown scheduler %q: want one of %s", vs.Scheduler, strings.Join(schedulers, ", "))
	case vs.Persistence > maxPersistence:
		return fmt.Errorf("persistence %d: want at most %d seconds", vs.Persistence, maxPersistence)
	}
	return checkAddrPort(netip.AddrPortFrom(vs.Addr, vs.Port))
}

func checkReal(vs *VirtualServer, r RealServer) error {
	if err := checkAddrPort(r.AddrPort()); err != nil {
		return err
	}
	if r.Weight < 0 || r.Weight > maxWeight {
		return fmt.Errorf("weight %d: want 0 to %d", r.Weight, maxWeight)
	}
	return checkFamilies(vs.Addr, r.Addr)
}

// checkAddrPort refuses what cannot be a virtual or real server.
func checkAddrPort(ap netip.AddrPort) error {
	a := ap.Addr()
	switch {
	case !a.IsValid():
		return fmt.Errorf("no address")
	case a.Zone() != "":
		return fmt.Errorf("address %s has a zone", a)
	case a.Is4In6():
		return fmt.Errorf("address %s is IPv4-mapped: write it as IPv4 (%s)", a, a.Unmap())
	case a.IsUnspecified(), a.IsMulticast(), a.IsLoopback(), a.IsLinkLocalUnicast(), a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return fmt.Errorf("address %s is not a unicast address netspec can balance to", a)
	case ap.Port() == 0:
		return fmt.Errorf("port 0")
	}
	return nil
}

// checkFamilies refuses a real server of another family than its virtual
// server: IPVS (through moby/ipvs) takes a real server in the virtual
// server's family.
func checkFamilies(vaddr, raddr netip.Addr) error {
	if vaddr.Is4() != raddr.Is4() {
		return fmt.Errorf("real server %s is %s and its virtual server %s: a virtual server forwards within its family", raddr, familyName(raddr), familyName(vaddr))
	}
	return nil
}

func familyName(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

// hostPrefix returns the address as a one-address prefix (/32 or /128),
// as it is bound to the dummy interface.
func hostPrefix(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }
