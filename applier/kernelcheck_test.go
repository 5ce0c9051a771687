package applier

import (
	"net/netip"
	"slices"
	"testing"

	"netspec.dev/netspec/applier/ipvs"
	"netspec.dev/netspec/applier/nft"
	"netspec.dev/netspec/explain"
	"netspec.dev/netspec/render/nftmodel"
)

const (
	webChain   = "service-KHN6ECMT-shop/web/tcp/http"
	cartChain  = "service-242WI43H-shop/cart/tcp/http"
	webExt     = "external-KHN6ECMT-shop/web/tcp/http"
	webAff     = "affinity-IK6J7D47-shop/web/tcp/http__10.244.1.70/8080"
	webLBChain = "firewall-26HBLAP7-shop/web/tcp/http"
)

// portChains are the chains of the Service ports of the tests' model.
var portChains = map[string]bool{webChain: true, cartChain: true, webExt: true, webLBChain: true,
	"external-AAAAAAAA-shop/cart/tcp/http": true, "reject-chain": true}

// web is shop/web port http, its cluster IP frontend, whose service chain
// picks keys 975480000–975482519 of endpoints-62.
func web() *explain.Frontend {
	return &explain.Frontend{
		Family: "ip", Addr: netip.MustParseAddr("10.96.0.10"), Port: 80, Protocol: "tcp",
		Service: "shop/web", PortID: "http",
		Names:      map[string]bool{webChain: true, webAff: true},
		PortChains: portChains,
		Picks:      []explain.PickWindow{{Family: "ip", Set: "endpoints-62", Lo: 975480000, Hi: 975482519}},
	}
}

// change is an element of a set of the given key parts as the applier
// reports it: typed, and written by the model.
func change(set string, parts []nftmodel.KeyPart, e nftmodel.Element) nft.ElementChange {
	s := &nftmodel.Set{Name: set, Key: parts, Verdicts: e.Verdict.Kind != 0, Elements: []nftmodel.Element{e}}
	return nft.ElementChange{Set: set, Text: s.ElementText(0), Element: &s.Elements[0]}
}

// endpoint is an element of an endpoint map as the applier reports it.
func endpoint(set string, lo, hi uint32, to string) nft.ElementChange {
	s := &nftmodel.Set{Name: set, EndpointMod: 2520, Interval: true, Endpoints: []nftmodel.EndpointElement{{Lo: lo, Hi: hi, To: netip.MustParseAddrPort(to)}}}
	return nft.ElementChange{Set: set, Text: s.ElementText(0), Endpoint: &s.Endpoints[0]}
}

var (
	addrProtoPort = []nftmodel.KeyPart{nftmodel.AddrPart, nftmodel.ProtoPart, nftmodel.ServicePart}
	protoPort     = []nftmodel.KeyPart{nftmodel.ProtoPart, nftmodel.ServicePart}
	addrOnly      = []nftmodel.KeyPart{nftmodel.AddrPart}
)

// key is the key of a frontend: address (or none), protocol, port.
func key(addr string, proto nftmodel.Proto, port uint16) nftmodel.Key {
	k := nftmodel.Key{Proto: proto, Port: port}
	if addr != "" {
		k.Addr = netip.MustParseAddr(addr)
	}
	return k
}

// TestNFTDifferences: the kernel's difference with the plan kept to what
// concerns one frontend.
func TestNFTDifferences(t *testing.T) {
	nodePort := &explain.Frontend{
		Family: "ip", Addr: netip.MustParseAddr("192.168.10.11"), Port: 30080, Protocol: "tcp", NodePort: true,
		Service: "shop/web", PortID: "http",
		Names:      map[string]bool{webExt: true, webChain: true},
		PortChains: portChains,
	}
	noService := &explain.Frontend{Family: "ip", Addr: netip.MustParseAddr("10.96.0.99"), Port: 80, Protocol: "tcp", PortChains: portChains}
	tcp, drop := nftmodel.TCP, nftmodel.Verdict{Kind: nftmodel.Drop}
	for _, tc := range []struct {
		name    string
		changes nft.TableChanges
		fe      *explain.Frontend
		want    []string
	}{{
		name:    "nothing differs",
		changes: nft.TableChanges{Family: "ip"},
		fe:      web(),
	}, {
		name:    "table missing",
		changes: nft.TableChanges{Family: "ip", Replace: true, Reason: nft.ReasonMissing, ChainsAdded: []string{webChain}},
		fe:      web(),
		want:    []string{"table ip netspec is missing: the kernel holds none of the plan"},
	}, {
		name:    "table replaced whole",
		changes: nft.TableChanges{Family: "ip", Replace: true, Reason: "set service-ips: declaration differs"},
		fe:      web(),
		want:    []string{"table ip netspec must be replaced whole (set service-ips: declaration differs): the kernel holds none of the plan"},
	}, {
		name:    "the other family's table is not this frontend's",
		changes: nft.TableChanges{Family: "ip6", Replace: true, Reason: nft.ReasonMissing},
		fe:      web(),
	}, {
		name: "chains: the port's, not another Service's",
		changes: nft.TableChanges{Family: "ip",
			ChainsAdded:   []string{webChain, cartChain},
			ChainsChanged: []string{cartChain},
			ChainsRemoved: []string{"service-XXXXXXXX-shop/web/tcp/https", "service-KHN6ECMT-shop/webx/tcp/http"},
		},
		fe:   web(),
		want: []string{"chain ip " + webChain + " is missing"},
	}, {
		name: "a chain that differs, with its rules",
		changes: nft.TableChanges{Family: "ip", ChainsChanged: []string{webChain},
			Rules: []nft.RuleChange{
				{Chain: cartChain, Index: 1, Old: "cart's"},
				{Chain: webChain, Index: 1, Old: "meta l4proto tcp dnat ip to 10.244.1.5:8080", New: "meta l4proto tcp dnat ip to numgen random mod 2520 offset 975480000 map @endpoints-62"},
				{Chain: webChain, Index: 2, Old: "counter"},
			}},
		fe: web(),
		want: []string{
			"chain ip " + webChain + " differs from the plan",
			"chain ip " + webChain + " rule 1 in the kernel: meta l4proto tcp dnat ip to 10.244.1.5:8080",
			"chain ip " + webChain + " rule 1 in the plan: meta l4proto tcp dnat ip to numgen random mod 2520 offset 975480000 map @endpoints-62",
			"chain ip " + webChain + " rule 2 in the kernel: counter",
		},
	}, {
		name: "chains every frontend goes through, missing or differing; a chain made by hand is not jumped to",
		changes: nft.TableChanges{Family: "ip",
			ChainsAdded:   []string{"nat-prerouting"},
			ChainsChanged: []string{"services"},
			ChainsRemoved: []string{"by-hand"},
			Rules:         []nft.RuleChange{{Chain: "services", Index: 2, New: "ip daddr . meta l4proto . th dport vmap @service-ips"}},
		},
		fe: web(),
		want: []string{
			"chain ip nat-prerouting is missing",
			"chain ip services differs from the plan",
			"chain ip services rule 2 in the plan: ip daddr . meta l4proto . th dport vmap @service-ips",
		},
	}, {
		name:    "a cluster IP does not go through the external or firewall chains",
		changes: nft.TableChanges{Family: "ip", ChainsAdded: []string{webExt, webLBChain}},
		fe:      web(),
	}, {
		name:    "a node port goes through the external chain",
		changes: nft.TableChanges{Family: "ip", ChainsAdded: []string{webExt, webLBChain}},
		fe:      nodePort,
		want:    []string{"chain ip " + webExt + " is missing"},
	}, {
		name:    "affinity sets",
		changes: nft.TableChanges{Family: "ip", SetsAdded: []string{webAff}, SetsRemoved: []string{"affinity-AAAAAAAA-shop/cart/tcp/http__10.244.1.5/80"}},
		fe:      web(),
		want:    []string{"set ip " + webAff + " is missing"},
	}, {
		name: "elements keyed by the frontend or naming its chains",
		changes: nft.TableChanges{Family: "ip",
			ElementsAdded: []nft.ElementChange{
				change("service-ips", addrProtoPort, nftmodel.Element{Key: key("10.96.0.10", tcp, 80), Verdict: nftmodel.GoTo(webChain)}),
				change("service-ips", addrProtoPort, nftmodel.Element{Key: key("10.96.0.100", tcp, 80), Verdict: nftmodel.GoTo(cartChain)}),
				change("service-ips", addrProtoPort, nftmodel.Element{Key: key("10.96.0.1", tcp, 80), Verdict: nftmodel.GoTo(cartChain)}),
				change("cluster-frontends", addrProtoPort, nftmodel.Element{Key: key("10.96.0.10", tcp, 80)}),
				change("cluster-frontends", addrProtoPort, nftmodel.Element{Key: key("10.96.0.10", tcp, 8080)}),
				change("cluster-ips", addrOnly, nftmodel.Element{Key: key("10.96.0.10", 0, 0)}),
				{Set: "service-ips", Text: "0x0a60 : goto " + webChain}, // made by hand, of another type: does not decode
			},
			ElementsRemoved: []nft.ElementChange{
				change("service-ips", addrProtoPort, nftmodel.Element{Key: key("10.96.0.77", tcp, 80), Verdict: nftmodel.GoTo(webChain)}),
				change("no-endpoint-services", addrProtoPort, nftmodel.Element{Key: key("10.96.0.10", tcp, 80), Verdict: nftmodel.GoTo("reject-chain")}),
				change("no-endpoint-services", addrProtoPort, nftmodel.Element{Key: key("10.96.0.11", tcp, 80), Comment: "shop/web:http", Verdict: nftmodel.GoTo("reject-chain")}),
				change("no-endpoint-services", addrProtoPort, nftmodel.Element{Key: key("10.96.0.12", tcp, 80), Comment: "shop/web:https", Verdict: nftmodel.GoTo("reject-chain")}),
			},
		},
		fe: web(),
		want: []string{
			"ip service-ips element 10.96.0.10 . tcp . 80 : goto " + webChain + " is missing",
			"ip cluster-frontends element 10.96.0.10 . tcp . 80 is missing",
			"ip service-ips element 10.96.0.77 . tcp . 80 : goto " + webChain + " is not in the plan",
			"ip no-endpoint-services element 10.96.0.10 . tcp . 80 : goto reject-chain is not in the plan",
			`ip no-endpoint-services element 10.96.0.11 . tcp . 80 comment "shop/web:http" : goto reject-chain is not in the plan`,
		},
	}, {
		name: "endpoint maps: the picks of the port's chains",
		changes: nft.TableChanges{Family: "ip",
			ElementsAdded: []nft.ElementChange{
				endpoint("endpoints-62", 975480000, 975481259, "10.244.1.5:8080"),
				endpoint("endpoints-62", 975482520, 975483779, "10.244.9.9:8080"), // the next chain's
				endpoint("endpoints-63", 975480000, 975481259, "10.244.1.5:8080"), // another map
			},
			ElementsRemoved: []nft.ElementChange{
				endpoint("endpoints-62", 975482519, 975482519, "10.244.2.5:8080"),
			},
		},
		fe: web(),
		want: []string{
			"ip endpoints-62 element 975480000-975481259 : 10.244.1.5 . 8080 is missing",
			"ip endpoints-62 element 975482519 : 10.244.2.5 . 8080 is not in the plan",
		},
	}, {
		name: "node ports: keyed by protocol and port, and the node's address",
		changes: nft.TableChanges{Family: "ip",
			ElementsAdded: []nft.ElementChange{
				change("service-nodeports", protoPort, nftmodel.Element{Key: key("", tcp, 30080), Verdict: nftmodel.GoTo(webExt)}),
				change("service-nodeports", protoPort, nftmodel.Element{Key: key("", tcp, 30081), Verdict: nftmodel.GoTo("external-AAAAAAAA-shop/cart/tcp/http")}),
				change("nodeport-ips", addrOnly, nftmodel.Element{Key: key("192.168.10.11", 0, 0)}),
				change("service-ips", addrProtoPort, nftmodel.Element{Key: key("10.96.0.10", tcp, 80), Verdict: nftmodel.GoTo(webChain)}), // a cluster IP's element names the service chain
			},
			ElementsRemoved: []nft.ElementChange{
				change("no-endpoint-nodeports", protoPort, nftmodel.Element{Key: key("", tcp, 30080), Verdict: drop}),
			},
		},
		fe: nodePort,
		want: []string{
			"ip service-nodeports element tcp . 30080 : goto " + webExt + " is missing",
			"ip nodeport-ips element 192.168.10.11 is missing",
			"ip service-ips element 10.96.0.10 . tcp . 80 : goto " + webChain + " is missing",
			"ip no-endpoint-nodeports element tcp . 30080 : drop is not in the plan",
		},
	}, {
		name: "not a service address: only elements keyed by it, and the chain they go to",
		changes: nft.TableChanges{Family: "ip",
			ChainsRemoved: []string{webChain, "service-OLDOLDOL-shop/old/tcp/http"},
			ElementsRemoved: []nft.ElementChange{
				change("service-ips", addrProtoPort, nftmodel.Element{Key: key("10.96.0.99", tcp, 80), Verdict: nftmodel.GoTo("service-OLDOLDOL-shop/old/tcp/http")}),
				change("service-ips", addrProtoPort, nftmodel.Element{Key: key("10.96.0.10", tcp, 80), Verdict: nftmodel.GoTo(webChain)}),
			},
		},
		fe: noService,
		want: []string{
			"chain ip service-OLDOLDOL-shop/old/tcp/http is not in the plan",
			"ip service-ips element 10.96.0.99 . tcp . 80 : goto service-OLDOLDOL-shop/old/tcp/http is not in the plan",
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := nftDifferences(&nft.Changes{Tables: []nft.TableChanges{tc.changes}}, tc.fe)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

// TestIPVSDifferences: the frontend's virtual server, its real servers,
// its address and the interface.
func TestIPVSDifferences(t *testing.T) {
	for _, tc := range []struct {
		name    string
		changes ipvs.Changes
		want    []string
	}{{
		name: "nothing differs",
	}, {
		name: "the virtual server and its real servers, not a longer port's",
		changes: ipvs.Changes{
			ServicesAdded:   []string{"tcp 10.96.0.10:80", "tcp 10.96.0.10:8080", "udp 10.96.0.10:80"},
			ServicesChanged: []string{"tcp 10.96.0.10:80: scheduler rr -> lc"},
			RealsAdded:      []string{"tcp 10.96.0.10:80 -> 10.244.1.5:8080", "tcp 10.96.0.10:8080 -> 10.244.1.5:8080"},
			RealsChanged:    []string{"tcp 10.96.0.10:80 -> 10.244.2.5:8080: weight 0 -> 1"},
			RealsRemoved:    []string{"tcp 10.96.0.10:80 -> 10.244.3.5:8080"},
		},
		want: []string{
			"virtual server tcp 10.96.0.10:80 is missing",
			"virtual server tcp 10.96.0.10:80: scheduler rr -> lc (the kernel's -> the plan's)",
			"real server tcp 10.96.0.10:80 -> 10.244.1.5:8080 is missing",
			"real server tcp 10.96.0.10:80 -> 10.244.2.5:8080: weight 0 -> 1 (the kernel's -> the plan's)",
			"real server tcp 10.96.0.10:80 -> 10.244.3.5:8080 is not in the plan",
		},
	}, {
		name:    "the interface and the frontend's address",
		changes: ipvs.Changes{Interface: "added", AddressesAdded: []string{"10.96.0.10/32", "10.96.0.100/32"}, AddressesRemoved: []string{"10.96.0.10/32"}},
		want: []string{
			"interface " + ipvs.LinkName + " is missing",
			"address 10.96.0.10/32 on " + ipvs.LinkName + " is missing",
			"address 10.96.0.10/32 on " + ipvs.LinkName + " is not in the plan",
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := ipvsDifferences(&tc.changes, web())
			if !slices.Equal(got, tc.want) {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}
