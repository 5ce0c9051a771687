package render

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"netspec.dev/netspec/plan"
)

// TestIPVS: one virtual server per frontend (cluster IP, external IP,
// LoadBalancer IP, node port on each node address) with the frontend's
// endpoints of its family, the Service's scheduler or the default, and
// persistence for ClientIP affinity; headless and ExternalName Services
// have none; a frontend without endpoints is still declared.
func TestIPVS(t *testing.T) {
	a := netip.MustParseAddr
	eps := []plan.Endpoint{
		{IP: a("10.244.1.5"), Port: 8080, Ready: true},
		{IP: a("10.244.2.5"), Port: 8080, Ready: true},
		{IP: a("fd00:244::5"), Port: 8080, Ready: true},
	}
	p := &plan.Plan{
		Node: plan.Node{Name: "n", IPs: []netip.Addr{a("192.0.2.1")}},
		Services: []plan.Service{
			{Namespace: "a", Name: "web", Type: "NodePort", ClusterIPs: []netip.Addr{a("10.96.0.10"), a("fd00::10")},
				ExternalIPs: []netip.Addr{a("203.0.113.1")}, AffinitySeconds: 600, IPVSScheduler: "mh",
				Ports: []plan.Port{{Protocol: "TCP", Port: 80, NodePort: 30080, Endpoints: eps, Cluster: []int{0, 1, 2}, External: []int{1}}}},
			{Namespace: "a", Name: "dns", Type: "ClusterIP", ClusterIPs: []netip.Addr{a("10.96.0.53")},
				Ports: []plan.Port{{Protocol: "UDP", Port: 53}, {Protocol: "SCTP", Port: 3868, Endpoints: eps[:1], Cluster: []int{0}}}},
			{Namespace: "a", Name: "headless", Type: "ClusterIP", Headless: true,
				Ports: []plan.Port{{Protocol: "TCP", Port: 80, Endpoints: eps, Cluster: []int{0}}}},
			{Namespace: "a", Name: "ext", Type: "ExternalName", ExternalName: "example.com"},
		},
	}
	want := `-A -t 10.96.0.10:80 -s mh -p 600
-a -t 10.96.0.10:80 -r 10.244.1.5:8080 -m -w 1
-a -t 10.96.0.10:80 -r 10.244.2.5:8080 -m -w 1
-A --sctp-service 10.96.0.53:3868 -s wlc
-a --sctp-service 10.96.0.53:3868 -r 10.244.1.5:8080 -m -w 1
-A -u 10.96.0.53:53 -s wlc
-A -t 192.0.2.1:30080 -s mh -p 600
-a -t 192.0.2.1:30080 -r 10.244.2.5:8080 -m -w 1
-A -t 203.0.113.1:80 -s mh -p 600
-a -t 203.0.113.1:80 -r 10.244.2.5:8080 -m -w 1
-A -t [fd00::10]:80 -s mh -p 600
-a -t [fd00::10]:80 -r [fd00:244::5]:8080 -m -w 1
`
	if got := string(IPVS(p, "wlc")); got != want {
		t.Errorf("IPVS:\n%s\nwant:\n%s", got, want)
	}
	if err := IPVSTable(p, "wlc").Check(); err != nil {
		t.Errorf("IPVSTable: %v; want a table the applier takes", err)
	}
	if got := string(IPVS(p, "")); !strings.Contains(got, "-A -u 10.96.0.53:53 -s rr\n") {
		t.Errorf("without a default the scheduler is not rr:\n%s", got)
	}
	files, err := Files(p, DataplaneIPVS)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := files["ipvs.txt"]; !ok {
		t.Error("Files(ipvs) has no ipvs.txt")
	}
	if nft := string(files["nftables.nft"]); nft != string(NFTablesIPVS(p)) || strings.Contains(nft, " dnat ") {
		t.Error("Files(ipvs): nftables.nft is not the IPVS data plane's tables, without DNAT")
	}
}

// TestIPVSNodePortAddresses: node ports' virtual servers go on the
// node-port addresses: the Node's addresses inside nodePortAddresses (a
// family without one keeps the Node's), or with IPVSTableAt the addresses the
// applier found; of the Service's IP families only.
func TestIPVSNodePortAddresses(t *testing.T) {
	a := netip.MustParseAddr
	p := &plan.Plan{
		Node:    plan.Node{Name: "n", IPs: []netip.Addr{a("192.0.2.1"), a("198.51.100.1"), a("fd00::1")}},
		Cluster: plan.Cluster{NodePortAddresses: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}},
		Services: []plan.Service{{Namespace: "a", Name: "web", Type: "NodePort", ClusterIPs: []netip.Addr{a("10.96.0.10"), a("fd00:96::10")},
			Ports: []plan.Port{{Protocol: "TCP", Port: 80, NodePort: 30080}}}},
	}
	nodePorts := func(text string) []string {
		var out []string
		for _, l := range strings.Split(text, "\n") {
			if strings.HasPrefix(l, "-A ") && strings.Contains(l, ":30080 ") {
				out = append(out, strings.Fields(l)[2])
			}
		}
		return out
	}
	if got, want := nodePorts(string(IPVS(p, ""))), []string{"198.51.100.1:30080", "[fd00::1]:30080"}; !slices.Equal(got, want) {
		t.Errorf("IPVS: node ports on %v, want %v", got, want)
	}
	if got, want := nodePorts(string(IPVSTableAt(p, "", []netip.Addr{a("198.51.100.7"), a("fd00::1")}).AppendText(nil))), []string{"198.51.100.7:30080", "[fd00::1]:30080"}; !slices.Equal(got, want) {
		t.Errorf("IPVSTableAt: node ports on %v, want %v", got, want)
	}
	// A single-stack Service has no node port of the other family, as in
	// kube-proxy.
	p.Services[0].ClusterIPs = p.Services[0].ClusterIPs[:1]
	if got, want := nodePorts(string(IPVS(p, ""))), []string{"198.51.100.1:30080"}; !slices.Equal(got, want) {
		t.Errorf("IPVS, IPv4 only: node ports on %v, want %v", got, want)
	}
}
