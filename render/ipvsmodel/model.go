// Package ipvsmodel is the typed model of what a node's IPVS must hold:
// virtual servers keyed by protocol, address and port, each with its real
// servers keyed by address and port. render builds a Table from a Plan
// and prints ipvs.txt from it (Table.AppendText); the IPVS applier
// (applier/ipvs) installs a Table and compares Tables (Diff) and the
// kernel's servers with it, so that no text is parsed between render and
// the kernel. It is pure: no I/O.
package ipvsmodel

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
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

// Protocols are the valid protocols, in the order of their numbers.
var Protocols = []Protocol{TCP, UDP, SCTP}

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
	return "protocol-" + strconv.Itoa(int(p))
}

// Option is ipvsadm's option that names a service of the protocol: -t,
// -u or --sctp-service.
func (p Protocol) Option() string {
	switch p {
	case TCP:
		return "-t"
	case UDP:
		return "-u"
	case SCTP:
		return "--sctp-service"
	}
	return "--protocol-" + strconv.Itoa(int(p))
}

// Valid tells whether p is TCP, UDP or SCTP.
func (p Protocol) Valid() bool { return slices.Contains(Protocols, p) }

// Schedulers are the IPVS schedulers netspec accepts, in the order the
// design lists them.
var Schedulers = []string{"rr", "wrr", "lc", "wlc", "sh", "dh", "sed", "nq", "mh"}

// Forward is the forwarding method of a real server, as the kernel
// numbers it (IP_VS_CONN_F_FWD_MASK). netspec installs Masquerade only;
// the others are what the kernel may hold when someone else set them.
type Forward uint32

// The forwarding methods.
const (
	Masquerade  Forward = 0
	Local       Forward = 1
	Tunnel      Forward = 2
	DirectRoute Forward = 3
)

// String returns "masquerade", "local", "tunnel" or "direct-routing".
func (f Forward) String() string {
	switch f {
	case Masquerade:
		return "masquerade"
	case Local:
		return "local"
	case Tunnel:
		return "tunnel"
	case DirectRoute:
		return "direct-routing"
	}
	return "method-" + strconv.FormatUint(uint64(f), 10)
}

// Option is ipvsadm's option for the method: -m, -i or -g; "--forward N"
// for one ipvsadm cannot set.
func (f Forward) Option() string {
	switch f {
	case Masquerade:
		return "-m"
	case Tunnel:
		return "-i"
	case DirectRoute:
		return "-g"
	}
	return "--forward " + strconv.FormatUint(uint64(f), 10)
}

// Key identifies a virtual server: IPVS keeps one per protocol, address
// and port.
type Key struct {
	Protocol Protocol
	Addr     netip.Addr
	Port     uint16
}

// String returns the key as "tcp 10.96.0.10:80" or "tcp [fd00::10]:80".
func (k Key) String() string {
	return k.Protocol.String() + " " + k.AddrPort().String()
}

// AddrPort returns the key's address and port.
func (k Key) AddrPort() netip.AddrPort { return netip.AddrPortFrom(k.Addr, k.Port) }

// Compare orders keys by address (IPv4 first), protocol name (sctp, tcp,
// udp), then port: the order of the lines of ipvs.txt.
func (k Key) Compare(o Key) int {
	return cmp.Or(k.Addr.Compare(o.Addr), cmp.Compare(k.Protocol.String(), o.Protocol.String()), cmp.Compare(k.Port, o.Port))
}

// VirtualServer is a virtual server (an IPVS service) with its real
// servers.
type VirtualServer struct {
	Key
	// Scheduler is the IPVS scheduler, one of Schedulers.
	Scheduler string
	// Persistence is the persistence timeout in seconds (ClientIP
	// session affinity), which sets the service's persistent flag; 0 for
	// none. It is the one service flag netspec sets.
	Persistence uint32
	// Reals are the real servers, ordered by address then port.
	Reals []RealServer
}

// Equal tells whether v and o hold the same settings and real servers.
func (v *VirtualServer) Equal(o *VirtualServer) bool {
	return v.Key == o.Key && v.Scheduler == o.Scheduler && v.Persistence == o.Persistence && slices.Equal(v.Reals, o.Reals)
}

// RealServer is a real server (an IPVS destination) of a virtual server.
type RealServer struct {
	Addr    netip.Addr
	Port    uint16
	Forward Forward
	Weight  int // 0 to MaxWeight
}

// AddrPort returns the real server's address and port.
func (r RealServer) AddrPort() netip.AddrPort { return netip.AddrPortFrom(r.Addr, r.Port) }

// compareReals orders real servers by address, then port.
func compareReals(a, b RealServer) int { return a.AddrPort().Compare(b.AddrPort()) }

// MaxWeight is the largest weight of a real server (ipvsadm's limit; the
// kernel reports weights in 16 bits through moby/ipvs).
const MaxWeight = 65535

// MaxPersistence is the largest persistence timeout, in seconds
// (ipvsadm's limit: 31 days).
const MaxPersistence = 31 * 86400

// Table is what a node's IPVS must hold: its virtual servers, ordered by
// Key.Compare, each once. A nil Table is an empty one.
type Table struct {
	Services []VirtualServer
}

// Sort orders the table: its virtual servers by key, the real servers of
// each by address and port, each once (of servers with one key, or real
// servers with one address and port, the first is kept).
func (t *Table) Sort() {
	slices.SortStableFunc(t.Services, func(a, b VirtualServer) int { return a.Compare(b.Key) })
	t.Services = slices.CompactFunc(t.Services, func(a, b VirtualServer) bool { return a.Key == b.Key })
	for i := range t.Services {
		rs := t.Services[i].Reals
		slices.SortStableFunc(rs, compareReals)
		t.Services[i].Reals = slices.CompactFunc(rs, func(a, b RealServer) bool { return a.AddrPort() == b.AddrPort() })
	}
}

// Frontends returns the distinct addresses of the virtual servers, sorted:
// the addresses that the node must accept packets for.
func (t *Table) Frontends() []netip.Addr {
	if t == nil {
		return nil
	}
	var out []netip.Addr
	for _, vs := range t.Services {
		if n := len(out); n == 0 || out[n-1] != vs.Addr {
			out = append(out, vs.Addr)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// AppendText appends the table in the form of `ipvsadm -S -n`, which
// `ipvsadm -R` loads, one line a server in the table's order:
//
//	-A PROTO ADDR:PORT -s SCHEDULER [-p TIMEOUT]
//	-a PROTO ADDR:PORT -r ADDR:PORT -m -w WEIGHT
//
// where PROTO is -t, -u or --sctp-service and an IPv6 address is in
// brackets. This is ipvs.txt.
func (t *Table) AppendText(b []byte) []byte {
	if t == nil {
		return b
	}
	for i := range t.Services {
		vs := &t.Services[i]
		b = append(b, "-A "...)
		b = append(b, vs.Protocol.Option()...)
		b = append(b, ' ')
		b = vs.AddrPort().AppendTo(b)
		b = append(b, " -s "...)
		b = append(b, vs.Scheduler...)
		if vs.Persistence > 0 {
			b = append(b, " -p "...)
			b = strconv.AppendUint(b, uint64(vs.Persistence), 10)
		}
		b = append(b, '\n')
		for _, r := range vs.Reals {
			b = append(b, "-a "...)
			b = append(b, vs.Protocol.Option()...)
			b = append(b, ' ')
			b = vs.AddrPort().AppendTo(b)
			b = append(b, " -r "...)
			b = r.AddrPort().AppendTo(b)
			b = append(b, ' ')
			b = append(b, r.Forward.Option()...)
			b = append(b, " -w "...)
			b = strconv.AppendInt(b, int64(r.Weight), 10)
			b = append(b, '\n')
		}
	}
	return b
}

// Check tells whether the table is one netspec can install: ordered, each
// virtual server once with a known protocol and scheduler, a persistence
// of at most MaxPersistence and a unicast address and port; each real
// server once, masqueraded, of its virtual server's family, with a weight
// from 0 to MaxWeight. render's tables pass; a Table made by hand is
// sorted (Sort) first.
func (t *Table) Check() error {
	if t == nil {
		return nil
	}
	for i := range t.Services {
		vs := &t.Services[i]
		if i > 0 {
			switch c := t.Services[i-1].Compare(vs.Key); {
			case c == 0:
				return fmt.Errorf("virtual server %s is in the table twice", vs.Key)
			case c > 0:
				return fmt.Errorf("virtual server %s is after %s: the table is not sorted", vs.Key, t.Services[i-1].Key)
			}
		}
		if err := checkService(vs); err != nil {
			return fmt.Errorf("virtual server %s: %w", vs.Key, err)
		}
		for j, r := range vs.Reals {
			if j > 0 {
				switch c := compareReals(vs.Reals[j-1], r); {
				case c == 0:
					return fmt.Errorf("virtual server %s: real server %s is in the table twice", vs.Key, r.AddrPort())
				case c > 0:
					return fmt.Errorf("virtual server %s: real server %s is after %s: the table is not sorted", vs.Key, r.AddrPort(), vs.Reals[j-1].AddrPort())
				}
			}
			if err := checkReal(vs, r); err != nil {
				return fmt.Errorf("virtual server %s: real server %s: %w", vs.Key, r.AddrPort(), err)
			}
		}
	}
	return nil
}

func checkService(vs *VirtualServer) error {
	switch {
	case !vs.Protocol.Valid():
		return fmt.Errorf("unknown protocol %d", uint16(vs.Protocol))
	case !slices.Contains(Schedulers, vs.Scheduler):
		return fmt.Errorf("unknown scheduler %q: want one of %s", vs.Scheduler, strings.Join(Schedulers, ", "))
	case vs.Persistence > MaxPersistence:
		return fmt.Errorf("persistence %d: want at most %d seconds", vs.Persistence, MaxPersistence)
	}
	return checkAddrPort(vs.AddrPort())
}

func checkReal(vs *VirtualServer, r RealServer) error {
	if err := checkAddrPort(r.AddrPort()); err != nil {
		return err
	}
	switch {
	case r.Weight < 0 || r.Weight > MaxWeight:
		return fmt.Errorf("weight %d: want 0 to %d", r.Weight, MaxWeight)
	case r.Forward != Masquerade:
		return fmt.Errorf("forwarding method %s is not supported: netspec masquerades", r.Forward)
	case vs.Addr.Is4() != r.Addr.Is4():
		return fmt.Errorf("real server %s is %s and its virtual server %s: a virtual server forwards within its family", r.Addr, familyName(r.Addr), familyName(vs.Addr))
	}
	return nil
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

func familyName(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

// Delta is how two Tables differ, by virtual server: each list ordered by
// Key.Compare.
type Delta struct {
	Added   []Key // in the new table only
	Changed []Key // in both, with other settings or real servers
	Removed []Key // in the old table only
}

// Empty tells whether the tables are alike.
func (d Delta) Empty() bool { return len(d.Added)+len(d.Changed)+len(d.Removed) == 0 }

// Keys returns every key of the delta, ordered.
func (d Delta) Keys() []Key {
	out := slices.Concat(d.Added, d.Changed, d.Removed)
	slices.SortFunc(out, Key.Compare)
	return out
}

// Diff compares two ordered tables (Check) virtual server by virtual
// server, in one walk of both.
func Diff(old, new *Table) Delta {
	var a, b []VirtualServer
	if old != nil {
		a = old.Services
	}
	if new != nil {
		b = new.Services
	}
	var d Delta
	for len(a) > 0 || len(b) > 0 {
		c := 0
		switch {
		case len(a) == 0:
			c = 1
		case len(b) == 0:
			c = -1
		default:
			c = a[0].Compare(b[0].Key)
		}
		switch {
		case c < 0:
			d.Removed = append(d.Removed, a[0].Key)
			a = a[1:]
		case c > 0:
			d.Added = append(d.Added, b[0].Key)
			b = b[1:]
		default:
			if !a[0].Equal(&b[0]) {
				d.Changed = append(d.Changed, b[0].Key)
			}
			a, b = a[1:], b[1:]
		}
	}
	return d
}
