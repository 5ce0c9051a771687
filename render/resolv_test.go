package render

import (
	"net/netip"
	"testing"
)

// TestResolvConfGolden renders the fixture's namespaces with and without a
// Cluster dnsAddress.
func TestResolvConfGolden(t *testing.T) {
	p := textFixturePlan()
	for _, f := range p.Env {
		t.Run(f.Namespace, func(t *testing.T) {
			compareTextGolden(t, "resolv/"+f.Namespace+".conf", ResolvConf(f.Namespace, p.Cluster.Domain, netip.MustParseAddr("169.254.20.10")))
		})
	}
	t.Run("no dnsAddress", func(t *testing.T) {
		compareTextGolden(t, "resolv/no-address.conf", ResolvConf("shop", "cluster.local", netip.Addr{}))
	})
}

func TestResolvConf(t *testing.T) {
	for _, tc := range []struct {
		name, ns, domain string
		addr             netip.Addr
		want             string
	}{
		{name: "kubelet ClusterFirst", ns: "shop", domain: "cluster.local", addr: netip.MustParseAddr("169.254.20.10"),
			want: "# resolv.conf of a pod in namespace shop (dnsPolicy ClusterFirst), as the kubelet writes it — written by netspec\n" +
				"search shop.svc.cluster.local svc.cluster.local cluster.local\n" +
				"nameserver 169.254.20.10\n" +
				"options ndots:5\n"},
		{name: "other domain, IPv6", ns: "kube-system", domain: "corp.example", addr: netip.MustParseAddr("fd00::53"),
			want: "# resolv.conf of a pod in namespace kube-system (dnsPolicy ClusterFirst), as the kubelet writes it — written by netspec\n" +
				"search kube-system.svc.corp.example svc.corp.example corp.example\n" +
				"nameserver fd00::53\n" +
				"options ndots:5\n"},
		{name: "IPv4-mapped is written as IPv4", ns: "a", domain: "cluster.local", addr: netip.MustParseAddr("::ffff:10.96.0.10"),
			want: "# resolv.conf of a pod in namespace a (dnsPolicy ClusterFirst), as the kubelet writes it — written by netspec\n" +
				"search a.svc.cluster.local svc.cluster.local cluster.local\n" +
				"nameserver 10.96.0.10\n" +
				"options ndots:5\n"},
		{name: "no address", ns: "a", domain: "cluster.local",
			want: "# resolv.conf of a pod in namespace a (dnsPolicy ClusterFirst), as the kubelet writes it — written by netspec\n" +
				"search a.svc.cluster.local svc.cluster.local cluster.local\n" +
				"# nameserver: none: set the Cluster's spec.dnsAddress to netspec's DNS address\n" +
				"options ndots:5\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(ResolvConf(tc.ns, tc.domain, tc.addr)); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}
