// Package conntrack deletes the conntrack entries of service endpoints that
// went away, as kube-proxy does.
//
// A UDP (or SCTP) client that keeps its source port keeps hitting the same
// conntrack entry, and so the backend the entry was DNATed to when it was
// created, for as long as datagrams keep the entry alive — even after the
// nftables rule now sends new flows elsewhere and the old backend is gone.
// Deleting the entry makes the next datagram a new flow, which the current
// ruleset DNATs to a live backend.
//
// TCP has the same trap for connections a backend never answered (a dead
// node's pod): their entries stay in SYN_SENT for two minutes, and a new
// connection from a source port the client used for one of them (a busy
// client wraps its ports to one destination every 1,500 connections or
// so) is that entry's retransmission to conntrack, DNATed to the dead
// backend again (kubernetes/kubernetes#101607). Only those entries are
// deleted (Flow.Unanswered): an established connection is left to end on
// its own, as a graceful termination wants.
//
// The package talks netfilter netlink (github.com/vishvananda/netlink)
// directly; it never runs the conntrack tool.
package conntrack

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
)

// Protocol numbers.
const (
	ProtoTCP  = 6
	ProtoUDP  = 17
	ProtoSCTP = 132
)

// Flow identifies conntrack entries to remove: traffic of Protocol that
// was DNATed to Endpoint, optionally only through one Frontend.
//
// An entry matches when its reply source is Endpoint (address and port;
// that is how a DNATed flow looks: original destination the frontend, reply
// source the endpoint) and, when Frontend is valid, its original
// destination is Frontend's address and, unless Frontend's port is 0,
// port. With no Frontend, flows addressed to the endpoint directly match
// too: they are as stale as the others once it is gone.
//
// Protocol is ProtoUDP (0 means it too) or ProtoTCP. ProtoSCTP is refused
// for now: the netlink library (v1.3.1) parses the ports of TCP and UDP
// entries only, so an SCTP entry cannot be told by its ports; supporting it
// means parsing the dump ourselves. IPv4-mapped IPv6 addresses are taken as
// the IPv4 ones.
type Flow struct {
	Endpoint netip.AddrPort
	Frontend netip.AddrPort // zero: any
	Protocol uint8
	// Unanswered limits a TCP flow to the entries of connections the
	// endpoint never answered (state SYN_SENT).
	Unanswered bool
}

func (f Flow) String() string {
	fe := "any"
	if f.Frontend.Addr().IsValid() {
		fe = f.Frontend.String()
	}
	return fmt.Sprintf("proto %d to %s via %s", f.proto(), f.Endpoint, fe)
}

func (f Flow) proto() uint8 {
	if f.Protocol == 0 {
		return ProtoUDP
	}
	return f.Protocol
}

// check validates f.
func (f Flow) check() error {
	switch f.proto() {
	case ProtoTCP, ProtoUDP:
	case ProtoSCTP:
		return fmt.Errorf("conntrack flow %v: SCTP is not supported yet: github.com/vishvananda/netlink v1.3.1 does not parse SCTP ports", f)
	default:
		return fmt.Errorf("conntrack flow %v: protocol %d is not supported (want %d, UDP, or %d, TCP)", f, f.Protocol, ProtoUDP, ProtoTCP)
	}
	if f.Unanswered && f.proto() != ProtoTCP {
		return fmt.Errorf("conntrack flow %v: only a TCP connection can be unanswered", f)
	}
	ep := f.Endpoint.Addr().Unmap()
	if !ep.IsValid() || ep.IsUnspecified() || f.Endpoint.Port() == 0 {
		return fmt.Errorf("conntrack flow %v: the endpoint needs an address and a port", f)
	}
	if fe := f.Frontend.Addr().Unmap(); fe.IsValid() && fe.Is4() != ep.Is4() {
		return fmt.Errorf("conntrack flow %v: frontend and endpoint are not of one address family", f)
	}
	if !f.Frontend.Addr().IsValid() && f.Frontend.Port() != 0 {
		return fmt.Errorf("conntrack flow %v: a frontend port needs its address", f)
	}
	return nil
}

// Delete deletes the conntrack entries of flows in the network namespace
// nsFd is open on (a file descriptor of /proc/<pid>/ns/net or
// /run/netns/<name>), or in the current one when nsFd is 0, with one dump
// of the table per address family that the flows use, and returns how
// many it deleted. Every flow is checked before the kernel is asked. An
// entry matching several flows is deleted (and counted) once. Entries that
// vanish on their own meanwhile are not errors. When the kernel interrupts
// a dump (the table changed under it), the pass is repeated, up to 3
// times.
func Delete(nsFd int, flows []Flow) (deleted int, err error) {
	v4, v6 := newFilter(), newFilter()
	for _, f := range flows {
		if err := f.check(); err != nil {
			return 0, err
		}
		if f.Endpoint.Addr().Unmap().Is4() {
			v4.add(f)
		} else {
			v6.add(f)
		}
	}
	if len(flows) == 0 {
		return 0, nil
	}
	ns := netns.None()
	if nsFd != 0 {
		ns = netns.NsHandle(nsFd)
	}
	h, err := netlink.NewHandleAt(ns, syscall.NETLINK_NETFILTER)
	if err != nil {
		return 0, fmt.Errorf("conntrack: netfilter netlink socket (namespace fd %d): %w", nsFd, err)
	}
	defer h.Close()
	var errs []error
	for _, fam := range []struct {
		f      *filter
		family netlink.InetFamily
		name   string
	}{{v4, netlink.FAMILY_V4, "IPv4"}, {v6, netlink.FAMILY_V6, "IPv6"}} {
		if len(fam.f.m)+len(fam.f.syn) == 0 {
			continue
		}
		for attempt := 1; ; attempt++ {
			n, err := h.ConntrackDeleteFilters(netlink.ConntrackTable, fam.family, fam.f)
			deleted += int(n)
			if err == nil {
				break
			}
			if errors.Is(err, netlink.ErrDumpInterrupted) && attempt < 3 {
				continue
			}
			errs = append(errs, fmt.Errorf("conntrack: delete %s entries: %w", fam.name, err))
			break
		}
	}
	return deleted, errors.Join(errs...)
}

// key is an endpoint of one protocol.
type key struct {
	proto uint8
	ep    netip.AddrPort
}

// filter matches the entries of a set of flows; it is a
// netlink.CustomConntrackFilter.
type filter struct {
	// m: the frontends per endpoint; an invalid AddrPort among them is
	// "any frontend". syn: the same for unanswered flows (Flow.Unanswered).
	m, syn map[key][]netip.AddrPort
}

func newFilter() *filter {
	return &filter{m: map[key][]netip.AddrPort{}, syn: map[key][]netip.AddrPort{}}
}

func (f *filter) add(fl Flow) {
	k := key{fl.proto(), netip.AddrPortFrom(fl.Endpoint.Addr().Unmap(), fl.Endpoint.Port())}
	fe := fl.Frontend
	if fe.Addr().IsValid() {
		fe = netip.AddrPortFrom(fe.Addr().Unmap(), fe.Port())
	}
	if fl.Unanswered {
		f.syn[k] = append(f.syn[k], fe)
		return
	}
	f.m[k] = append(f.m[k], fe)
}

// MatchConntrackFlow implements netlink.CustomConntrackFilter.
func (f *filter) MatchConntrackFlow(ct *netlink.ConntrackFlow) bool {
	rs, ok := addr(ct.Reverse.SrcIP)
	if !ok {
		return false
	}
	k := key{ct.Forward.Protocol, netip.AddrPortFrom(rs, ct.Reverse.SrcPort)}
	fes := f.m[k]
	if tcp, ok := ct.ProtoInfo.(*netlink.ProtoInfoTCP); ok && tcp.State == nl.TCP_CONNTRACK_SYN_SENT {
		fes = append(fes[:len(fes):len(fes)], f.syn[k]...)
	}
	if len(fes) == 0 {
		return false
	}
	od, ok := addr(ct.Forward.DstIP)
	if !ok {
		return false
	}
	for _, fe := range fes {
		if !fe.Addr().IsValid() {
			return true
		}
		if fe.Addr() == od && (fe.Port() == 0 || fe.Port() == ct.Forward.DstPort) {
			return true
		}
	}
	return false
}

func addr(ip net.IP) (netip.Addr, bool) {
	a, ok := netip.AddrFromSlice(ip)
	return a.Unmap(), ok
}
