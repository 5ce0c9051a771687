package conntrack

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
)

var (
	epA   = netip.MustParseAddrPort("10.244.1.10:53")
	epA6  = netip.MustParseAddrPort("[fd00:244:1::10]:53")
	feA   = netip.MustParseAddrPort("10.96.0.10:53")
	feA6  = netip.MustParseAddrPort("[fd00:96::10]:53")
	mapdA = netip.MustParseAddrPort("[::ffff:10.244.1.10]:53")
)

func TestFlowCheck(t *testing.T) {
	tests := []struct {
		name    string
		flow    Flow
		wantErr string
	}{
		{name: "udp", flow: Flow{Endpoint: epA, Frontend: feA, Protocol: ProtoUDP}},
		{name: "protocol 0 is udp", flow: Flow{Endpoint: epA}},
		{name: "tcp", flow: Flow{Endpoint: epA, Protocol: ProtoTCP}},
		{name: "tcp unanswered", flow: Flow{Endpoint: epA, Protocol: ProtoTCP, Unanswered: true}},
		{name: "udp unanswered", flow: Flow{Endpoint: epA, Unanswered: true}, wantErr: "only a TCP connection can be unanswered"},
		{name: "ipv6", flow: Flow{Endpoint: epA6, Frontend: feA6}},
		{name: "mapped endpoint, v4 frontend", flow: Flow{Endpoint: mapdA, Frontend: feA}},
		{name: "frontend any port", flow: Flow{Endpoint: epA, Frontend: netip.AddrPortFrom(feA.Addr(), 0)}},
		{name: "sctp", flow: Flow{Endpoint: epA, Protocol: ProtoSCTP}, wantErr: "SCTP is not supported"},
		{name: "icmp", flow: Flow{Endpoint: epA, Protocol: 1}, wantErr: "protocol 1 is not supported"},
		{name: "no endpoint", flow: Flow{}, wantErr: "needs an address and a port"},
		{name: "endpoint port 0", flow: Flow{Endpoint: netip.AddrPortFrom(epA.Addr(), 0)}, wantErr: "needs an address and a port"},
		{name: "unspecified endpoint", flow: Flow{Endpoint: netip.MustParseAddrPort("0.0.0.0:53")}, wantErr: "needs an address and a port"},
		{name: "mixed families", flow: Flow{Endpoint: epA, Frontend: feA6}, wantErr: "not of one address family"},
		{name: "frontend port without address", flow: Flow{Endpoint: epA, Frontend: netip.AddrPortFrom(netip.Addr{}, 53)}, wantErr: "needs its address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.flow.check()
			if tt.wantErr == "" && err != nil {
				t.Fatalf("check: %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("check = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

// ct is a conntrack entry: client → orig dst, DNATed to reply src.
func ct(proto uint8, client, origDst, replySrc string) *netlink.ConntrackFlow {
	c := netip.MustParseAddrPort(client)
	o := netip.MustParseAddrPort(origDst)
	r := netip.MustParseAddrPort(replySrc)
	ip := func(a netip.Addr) net.IP { return net.IP(a.AsSlice()) }
	return &netlink.ConntrackFlow{
		Forward: netlink.IPTuple{Protocol: proto, SrcIP: ip(c.Addr()), SrcPort: c.Port(), DstIP: ip(o.Addr()), DstPort: o.Port()},
		Reverse: netlink.IPTuple{Protocol: proto, SrcIP: ip(r.Addr()), SrcPort: r.Port(), DstIP: ip(c.Addr()), DstPort: c.Port()},
	}
}

// state is entry in TCP state st (1 SYN_SENT, 3 ESTABLISHED).
func state(entry *netlink.ConntrackFlow, st uint8) *netlink.ConntrackFlow {
	entry.ProtoInfo = &netlink.ProtoInfoTCP{State: st}
	return entry
}

func TestFilterMatch(t *testing.T) {
	const client = "192.168.100.2:40053"
	tests := []struct {
		name  string
		flows []Flow
		entry *netlink.ConntrackFlow
		want  bool
	}{
		{name: "DNATed via the frontend", flows: []Flow{{Endpoint: epA, Frontend: feA}}, entry: ct(17, client, "10.96.0.10:53", "10.244.1.10:53"), want: true},
		{name: "any frontend", flows: []Flow{{Endpoint: epA}}, entry: ct(17, client, "10.96.0.99:5353", "10.244.1.10:53"), want: true},
		{name: "any frontend: direct to the endpoint", flows: []Flow{{Endpoint: epA}}, entry: ct(17, client, "10.244.1.10:53", "10.244.1.10:53"), want: true},
		{name: "other frontend address", flows: []Flow{{Endpoint: epA, Frontend: feA}}, entry: ct(17, client, "10.96.0.12:53", "10.244.1.10:53")},
		{name: "other frontend port", flows: []Flow{{Endpoint: epA, Frontend: feA}}, entry: ct(17, client, "10.96.0.10:54", "10.244.1.10:53")},
		{name: "frontend port 0: any port", flows: []Flow{{Endpoint: epA, Frontend: netip.AddrPortFrom(feA.Addr(), 0)}}, entry: ct(17, client, "10.96.0.10:54", "10.244.1.10:53"), want: true},
		{name: "other endpoint address", flows: []Flow{{Endpoint: epA, Frontend: feA}}, entry: ct(17, client, "10.96.0.10:53", "10.244.2.10:53")},
		{name: "other endpoint port", flows: []Flow{{Endpoint: epA, Frontend: feA}}, entry: ct(17, client, "10.96.0.10:53", "10.244.1.10:5353")},
		{name: "tcp entry, udp flow", flows: []Flow{{Endpoint: epA, Frontend: feA}}, entry: ct(6, client, "10.96.0.10:53", "10.244.1.10:53")},
		{name: "tcp entry, tcp flow", flows: []Flow{{Endpoint: epA, Frontend: feA, Protocol: ProtoTCP}}, entry: ct(6, client, "10.96.0.10:53", "10.244.1.10:53"), want: true},
		{name: "unanswered tcp flow, SYN_SENT entry", flows: []Flow{{Endpoint: epA, Frontend: feA, Protocol: ProtoTCP, Unanswered: true}}, entry: state(ct(6, client, "10.96.0.10:53", "10.244.1.10:53"), 1), want: true},
		{name: "unanswered tcp flow, established entry", flows: []Flow{{Endpoint: epA, Frontend: feA, Protocol: ProtoTCP, Unanswered: true}}, entry: state(ct(6, client, "10.96.0.10:53", "10.244.1.10:53"), 3)},
		{name: "unanswered tcp flow, entry without state", flows: []Flow{{Endpoint: epA, Frontend: feA, Protocol: ProtoTCP, Unanswered: true}}, entry: ct(6, client, "10.96.0.10:53", "10.244.1.10:53")},
		{name: "unanswered tcp flow, other frontend", flows: []Flow{{Endpoint: epA, Frontend: feA, Protocol: ProtoTCP, Unanswered: true}}, entry: state(ct(6, client, "10.96.0.12:53", "10.244.1.10:53"), 1)},
		{name: "endpoint as reply destination only", flows: []Flow{{Endpoint: epA}}, entry: ct(17, "10.244.1.10:53", "10.96.0.10:53", "10.96.0.10:53")},
		{name: "mapped endpoint", flows: []Flow{{Endpoint: mapdA, Frontend: feA}}, entry: ct(17, client, "10.96.0.10:53", "10.244.1.10:53"), want: true},
		{name: "ipv6", flows: []Flow{{Endpoint: epA6, Frontend: feA6}}, entry: ct(17, "[fd00:100::2]:40053", "[fd00:96::10]:53", "[fd00:244:1::10]:53"), want: true},
		{name: "one of several", flows: []Flow{{Endpoint: epA, Frontend: feA}, {Endpoint: epA, Frontend: netip.MustParseAddrPort("10.96.0.12:53")}}, entry: ct(17, client, "10.96.0.12:53", "10.244.1.10:53"), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFilter()
			for _, fl := range tt.flows {
				if err := fl.check(); err != nil {
					t.Fatal(err)
				}
				f.add(fl)
			}
			if got := f.MatchConntrackFlow(tt.entry); got != tt.want {
				t.Fatalf("match %v = %v, want %v", tt.entry, got, tt.want)
			}
		})
	}
	if newFilter().MatchConntrackFlow(ct(17, client, "10.96.0.10:53", "10.244.1.10:53")) {
		t.Error("an empty filter matches")
	}
}

// TestDeleteValidatesFirst: a flow Delete refuses is refused before the
// kernel is asked (here a namespace fd that is none).
func TestDeleteValidatesFirst(t *testing.T) {
	flows := []Flow{{Endpoint: epA}, {Endpoint: netip.AddrPortFrom(epA.Addr(), 0)}}
	if _, err := Delete(-2, flows); err == nil || !strings.Contains(err.Error(), "needs an address and a port") {
		t.Errorf("Delete of a flow without an endpoint port: %v", err)
	}
}
