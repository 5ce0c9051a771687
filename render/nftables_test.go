package render

import (
	"bytes"
	"cmp"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"netspec.dev/netspec/internal/gen/genplan"
	"netspec.dev/netspec/plan"
)

// nftCase is one hand-built Plan with its golden file
// testdata/nftables/<name>.nft.
type nftCase struct {
	name string
	plan *plan.Plan
}

// nftEP is an endpoint that is ready and serving on node.
func nftEP(ip string, port uint16, node, pod string) plan.Endpoint {
	return plan.Endpoint{IP: netip.MustParseAddr(ip), Port: port, Ready: true, Serving: true, NodeName: node, Pod: pod}
}

func nftAddrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func nftPrefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

// nftPlan is a dual-stack node node-a (192.168.1.10, fd00:1::10) with pod
// CIDRs, holding services.
func nftPlan(services ...plan.Service) *plan.Plan {
	return &plan.Plan{
		FormatVersion: plan.FormatVersion,
		Node:          plan.Node{Name: "node-a", IPs: nftAddrs("192.168.1.10", "fd00:1::10")},
		Cluster: plan.Cluster{
			Domain:       "cluster.local",
			ServiceCIDRs: nftPrefixes("10.96.0.0/12", "fd00:96::/108"),
			PodCIDRs:     nftPrefixes("10.244.0.0/16", "fd00:244::/56"),
			DNSTTL:       5,
		},
		Services: services,
	}
}

// nftWeb is shop/web, ClusterIP 10.96.0.10, port http 80/TCP to 8080 on
// two endpoints, one of them on this node.
func nftWeb() plan.Service {
	return plan.Service{
		Namespace:  "shop",
		Name:       "web",
		Type:       "ClusterIP",
		ClusterIPs: nftAddrs("10.96.0.10"),
		Ports: []plan.Port{{
			Name:     "http",
			Protocol: "TCP",
			Port:     80,
			Endpoints: []plan.Endpoint{
				nftEP("10.244.1.5", 8080, "node-a", "shop/web-1"),
				nftEP("10.244.2.7", 8080, "node-b", "shop/web-2"),
			},
			Cluster:  []int{0, 1},
			External: []int{0, 1},
		}},
	}
}

func nftCases() []nftCase {
	affinity := nftWeb()
	affinity.AffinitySeconds = 10800

	nodePortLocal := nftWeb()
	nodePortLocal.Type = "NodePort"
	nodePortLocal.ExternalLocal = true
	nodePortLocal.Ports[0].NodePort = 30080
	nodePortLocal.Ports[0].External = []int{0}

	nodePortLocalNone := nftWeb()
	nodePortLocalNone.Type = "NodePort"
	nodePortLocalNone.ExternalLocal = true
	nodePortLocalNone.Ports[0].NodePort = 30080
	nodePortLocalNone.Ports[0].External = nil

	// Dual-stack, with source ranges of IPv4 only: IPv6 clients are
	// refused.
	lb := nftWeb()
	lb.Type = "LoadBalancer"
	lb.ClusterIPs = nftAddrs("10.96.0.10", "fd00:96::10")
	lb.ExternalIPs = nftAddrs("192.168.1.100")
	lb.LoadBalancerIPs = nftAddrs("203.0.113.10", "2001:db8::10")
	lb.SourceRanges = nftPrefixes("198.51.100.0/24", "203.0.113.0/24", "198.51.100.128/25")
	lb.Ports[0].NodePort = 30443
	lb.Ports[0].Endpoints = append(lb.Ports[0].Endpoints, nftEP("fd00:244:0:1::5", 8080, "node-a", "shop/web-1"))
	lb.Ports[0].Cluster = []int{0, 1, 2}
	lb.Ports[0].External = []int{0, 1, 2}

	lbNodeInRange := nftWeb()
	lbNodeInRange.Type = "LoadBalancer"
	lbNodeInRange.LoadBalancerIPs = nftAddrs("203.0.113.10")
	lbNodeInRange.SourceRanges = nftPrefixes("192.168.1.0/24")
	lbNodeInRange.Ports[0].NodePort = 30443

	dual := plan.Service{
		Namespace:  "shop",
		Name:       "api",
		Type:       "NodePort",
		ClusterIPs: nftAddrs("fd00:96::20", "10.96.0.20"),
		Ports: []plan.Port{{
			Protocol: "TCP",
			Port:     443,
			NodePort: 30443,
			Endpoints: []plan.Endpoint{
				nftEP("10.244.1.8", 8443, "node-a", "shop/api-1"),
				nftEP("fd00:244:0:1::8", 8443, "node-a", "shop/api-1"),
				nftEP("fd00:244:0:2::9", 8443, "node-b", "shop/api-2"),
			},
			Cluster:  []int{0, 1, 2},
			External: []int{0, 1, 2},
		}},
	}

	noEndpoints := plan.Service{
		Namespace:  "kube-system",
		Name:       "dns",
		Type:       "ClusterIP",
		ClusterIPs: nftAddrs("10.96.0.10"),
		Ports: []plan.Port{
			{Name: "dns", Protocol: "UDP", Port: 53},
			{Name: "dns-tcp", Protocol: "TCP", Port: 53},
		},
	}

	headless := plan.Service{
		Namespace: "shop",
		Name:      "db",
		Type:      "ClusterIP",
		Headless:  true,
		Ports: []plan.Port{{
			Protocol:  "TCP",
			Port:      5432,
			Endpoints: []plan.Endpoint{nftEP("10.244.1.9", 5432, "node-a", "shop/db-0")},
			Cluster:   []int{0},
			External:  []int{0},
		}},
	}
	externalName := plan.Service{Namespace: "shop", Name: "mail", Type: "ExternalName", ExternalName: "mail.example.com"}

	// internalTrafficPolicy Local with no endpoint here: the cluster IP
	// drops; external traffic (policy Cluster) still reaches both.
	internalLocal := nftWeb()
	internalLocal.Type = "NodePort"
	internalLocal.InternalLocal = true
	internalLocal.Ports[0].NodePort = 30081
	internalLocal.Ports[0].Endpoints[0].NodeName = "node-c"
	internalLocal.Ports[0].Cluster = nil

	multiPort := plan.Service{
		Namespace:  "media",
		Name:       "stream",
		Type:       "NodePort",
		ClusterIPs: nftAddrs("10.96.0.30"),
		Ports: []plan.Port{
			{
				Name: "rtp", Protocol: "UDP", Port: 5004, NodePort: 30504,
				Endpoints: []plan.Endpoint{nftEP("10.244.3.1", 5004, "node-b", ""), nftEP("10.244.3.2", 5004, "node-b", ""), nftEP("10.244.3.3", 5004, "node-a", "")},
				Cluster:   []int{0, 1, 2}, External: []int{0, 1, 2},
			},
			{
				Name: "control", Protocol: "SCTP", Port: 9899,
				Endpoints: []plan.Endpoint{nftEP("10.244.3.1", 9899, "node-b", "")},
				Cluster:   []int{0}, External: []int{0},
			},
		},
	}

	masqueradeAll := nftPlan(nftWeb())
	masqueradeAll.Cluster.PodCIDRs = nil
	// Node ports on the local addresses inside two IPv4 CIDRs; IPv6 has
	// none, so it keeps the node's address.
	nodePortAddrs := nftPlan(nodePortLocal)
	nodePortAddrs.Cluster.NodePortAddresses = nftPrefixes("192.168.1.0/24", "10.0.0.0/8")
	// Every local address of both families, as kube-proxy's 0.0.0.0/0.
	nodePortAll := nftPlan(nodePortLocal)
	nodePortAll.Cluster.NodePortAddresses = nftPrefixes("0.0.0.0/0", "::/0")

	return []nftCase{
		{name: "empty", plan: nftPlan()},
		{name: "clusterip", plan: nftPlan(nftWeb())},
		{name: "affinity", plan: nftPlan(affinity)},
		{name: "nodeport-local", plan: nftPlan(nodePortLocal)},
		{name: "nodeport-local-no-local-endpoint", plan: nftPlan(nodePortLocalNone)},
		{name: "loadbalancer-source-ranges", plan: nftPlan(lb)},
		{name: "loadbalancer-node-in-range", plan: nftPlan(lbNodeInRange)},
		{name: "dual-stack", plan: nftPlan(dual)},
		{name: "no-endpoints", plan: nftPlan(noEndpoints)},
		{name: "headless-and-externalname", plan: nftPlan(headless, externalName)},
		{name: "internal-local", plan: nftPlan(internalLocal)},
		{name: "multi-port", plan: nftPlan(multiPort)},
		{name: "masquerade-all", plan: masqueradeAll},
		{name: "nodeport-addresses", plan: nodePortAddrs},
		{name: "nodeport-addresses-all", plan: nodePortAll},
		{name: "long-names", plan: nftPlan(nftLongNames())},
	}
}

// nftLongNames has names at Kubernetes' limits (63) and a port name past
// them, with IPv6 endpoints that differ only at the end, so that endpoint
// names must be cut.
func nftLongNames() plan.Service {
	ns := strings.Repeat("n", 63)
	name := strings.Repeat("s", 63)
	return plan.Service{
		Namespace:       ns,
		Name:            name,
		Type:            "LoadBalancer",
		ClusterIPs:      nftAddrs("fd00:96::ffff"),
		LoadBalancerIPs: nftAddrs("2001:db8::1"),
		SourceRanges:    nftPrefixes("2001:db8:1::/48"),
		AffinitySeconds: 60,
		Ports: []plan.Port{{
			Name:     strings.Repeat("p", 63),
			Protocol: "SCTP",
			Port:     65535,
			NodePort: 32767,
			Endpoints: []plan.Endpoint{
				nftEP("fd00:244:ffff:ffff:ffff:ffff:ffff:fffe", 65535, "node-a", ns+"/"+name+"-0"),
				nftEP("fd00:244:ffff:ffff:ffff:ffff:ffff:ffff", 65535, "node-a", ns+"/"+name+"-1"),
			},
			Cluster:  []int{0, 1},
			External: []int{0, 1},
		}},
	}
}

// nftGolden compares got with testdata/nftables/<name>.nft; -update
// rewrites the file.
func nftGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	compareTextGolden(t, "nftables/"+name+".nft", got)
}

func TestNFTablesGolden(t *testing.T) {
	for _, tc := range nftCases() {
		t.Run(tc.name, func(t *testing.T) {
			got := NFTables(tc.plan)
			nftGolden(t, tc.name, got)
			nftCheckRefs(t, got)
		})
	}
}

var (
	nftDeclRE = regexp.MustCompile(`(?m)^\t(chain|set|map) (\S+) \{$`)
	nftRefRE  = regexp.MustCompile(`(?:goto|jump) ([^\s,]+)|@([^\s,]+)`)
)

// nftTables splits a rendered file into its table blocks by family.
func nftTables(t *testing.T, text []byte) map[string]string {
	t.Helper()
	blocks := map[string]string{}
	for _, fam := range []string{"ip", "ip6"} {
		head := "\ntable " + fam + " netspec {\n"
		_, rest, ok := strings.Cut(string(text), head)
		if !ok {
			t.Fatalf("no %q block in\n%s", strings.TrimSpace(head), text)
		}
		body, _, ok := strings.Cut(rest, "\n}\n")
		if !ok {
			t.Fatalf("table %s netspec block does not end", fam)
		}
		blocks[fam] = body
	}
	return blocks
}

// nftCheckRefs checks, as the kernel would, that each table declares every
// chain and set its rules and maps name, and names nothing twice; and
// that no per-service chain or set is left unreferenced.
func nftCheckRefs(t *testing.T, text []byte) {
	t.Helper()
	for fam, body := range nftTables(t, text) {
		declared := map[string]bool{}
		for _, m := range nftDeclRE.FindAllStringSubmatch(body, -1) {
			key := m[1] + " " + m[2]
			if m[1] == "map" {
				key = "set " + m[2] // maps and sets share a namespace
			}
			if declared[key] {
				t.Errorf("table %s: %s declared twice", fam, key)
			}
			declared[key] = true
			if len(m[2]) > nftNameMax {
				t.Errorf("table %s: %s is %d bytes long, more than %d", fam, key, len(m[2]), nftNameMax)
			}
		}
		referenced := map[string]bool{}
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			for _, m := range nftRefRE.FindAllStringSubmatch(line, -1) {
				key := "chain " + m[1]
				if m[2] != "" {
					key = "set " + m[2]
				}
				referenced[key] = true
				if !declared[key] {
					t.Errorf("table %s: %s is used but not declared: %s", fam, key, strings.TrimSpace(line))
				}
			}
		}
		for key := range declared {
			if strings.Contains(key, "/") && !referenced[key] {
				t.Errorf("table %s: %s is declared but nothing leads to it", fam, key)
			}
		}
	}
}

// nftClone copies a Plan deeply enough to shuffle it.
func nftClone(p *plan.Plan) *plan.Plan {
	c := *p
	c.Node.IPs = slices.Clone(p.Node.IPs)
	c.Cluster.PodCIDRs = slices.Clone(p.Cluster.PodCIDRs)
	c.Services = slices.Clone(p.Services)
	for i := range c.Services {
		s := &c.Services[i]
		s.ClusterIPs = slices.Clone(s.ClusterIPs)
		s.ExternalIPs = slices.Clone(s.ExternalIPs)
		s.LoadBalancerIPs = slices.Clone(s.LoadBalancerIPs)
		s.SourceRanges = slices.Clone(s.SourceRanges)
		s.Ports = slices.Clone(s.Ports)
		for j := range s.Ports {
			pt := &s.Ports[j]
			pt.Endpoints = slices.Clone(pt.Endpoints)
			pt.Cluster = slices.Clone(pt.Cluster)
			pt.External = slices.Clone(pt.External)
		}
	}
	return &c
}

// nftShuffle permutes every list of p whose order NFTables must not
// depend on (endpoints with their Cluster and External indices). The
// order of ClusterIPs is kept: it is the Service's family order.
func nftShuffle(p *plan.Plan, r *rand.Rand) {
	shuffle := func(n int, swap func(i, j int)) { r.Shuffle(n, swap) }
	shuffle(len(p.Node.IPs), func(i, j int) { p.Node.IPs[i], p.Node.IPs[j] = p.Node.IPs[j], p.Node.IPs[i] })
	shuffle(len(p.Cluster.PodCIDRs), func(i, j int) {
		p.Cluster.PodCIDRs[i], p.Cluster.PodCIDRs[j] = p.Cluster.PodCIDRs[j], p.Cluster.PodCIDRs[i]
	})
	shuffle(len(p.Services), func(i, j int) { p.Services[i], p.Services[j] = p.Services[j], p.Services[i] })
	for i := range p.Services {
		s := &p.Services[i]
		for _, l := range [][]netip.Addr{s.ExternalIPs, s.LoadBalancerIPs} {
			shuffle(len(l), func(i, j int) { l[i], l[j] = l[j], l[i] })
		}
		shuffle(len(s.SourceRanges), func(i, j int) { s.SourceRanges[i], s.SourceRanges[j] = s.SourceRanges[j], s.SourceRanges[i] })
		shuffle(len(s.Ports), func(i, j int) { s.Ports[i], s.Ports[j] = s.Ports[j], s.Ports[i] })
		for j := range s.Ports {
			pt := &s.Ports[j]
			perm := r.Perm(len(pt.Endpoints)) // new k holds old perm[k]
			newIndex := make([]int, len(perm))
			eps := make([]plan.Endpoint, len(perm))
			for k, old := range perm {
				newIndex[old] = k
				eps[k] = pt.Endpoints[old]
			}
			pt.Endpoints = eps
			for _, l := range [][]int{pt.Cluster, pt.External} {
				for k := range l {
					l[k] = newIndex[l[k]]
				}
				shuffle(len(l), func(i, j int) { l[i], l[j] = l[j], l[i] })
			}
		}
	}
}

// nftSort puts a shuffled Plan back in the order plan.go documents.
func nftSort(p *plan.Plan, ports map[string][]string) {
	slices.SortFunc(p.Node.IPs, netip.Addr.Compare)
	slices.SortFunc(p.Services, func(x, y plan.Service) int {
		return cmp.Or(cmp.Compare(x.Namespace, y.Namespace), cmp.Compare(x.Name, y.Name))
	})
	for i := range p.Services {
		s := &p.Services[i]
		slices.SortFunc(s.ExternalIPs, netip.Addr.Compare)
		slices.SortFunc(s.LoadBalancerIPs, netip.Addr.Compare)
		order := ports[s.Key()] // spec order
		slices.SortFunc(s.Ports, func(x, y plan.Port) int {
			return cmp.Compare(slices.Index(order, x.Name+"/"+x.Protocol), slices.Index(order, y.Name+"/"+y.Protocol))
		})
		for j := range s.Ports {
			pt := &s.Ports[j]
			perm := make([]int, len(pt.Endpoints)) // new k holds old perm[k]
			for k := range perm {
				perm[k] = k
			}
			slices.SortFunc(perm, func(x, y int) int { return pt.Endpoints[x].AddrPort().Compare(pt.Endpoints[y].AddrPort()) })
			newIndex := make([]int, len(perm))
			eps := make([]plan.Endpoint, len(perm))
			for k, old := range perm {
				newIndex[old] = k
				eps[k] = pt.Endpoints[old]
			}
			pt.Endpoints = eps
			for _, l := range [][]int{pt.Cluster, pt.External} {
				for k := range l {
					l[k] = newIndex[l[k]]
				}
				slices.Sort(l)
			}
		}
	}
}

func TestNFTablesDeterministic(t *testing.T) {
	all := nftPlan()
	for _, tc := range nftCases() {
		all.Services = append(all.Services, tc.plan.Services...)
	}
	// Two services with one name would not compile; rename the copies.
	for i := range all.Services {
		all.Services[i].Name = fmt.Sprintf("%s-%d", all.Services[i].Name, i)
	}
	cases := append(nftCases(), nftCase{name: "all", plan: all})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := NFTables(tc.plan)
			if again := NFTables(tc.plan); !bytes.Equal(again, want) {
				t.Fatalf("two renderings differ:\n%s\n---\n%s", want, again)
			}
			ports := map[string][]string{}
			for _, s := range tc.plan.Services {
				for _, pt := range s.Ports {
					ports[s.Key()] = append(ports[s.Key()], pt.Name+"/"+pt.Protocol)
				}
			}
			for seed := range uint64(20) {
				p := nftClone(tc.plan)
				nftShuffle(p, rand.New(rand.NewPCG(seed, 1)))
				if got := NFTables(p); !bytes.Equal(got, want) {
					t.Fatalf("seed %d: a shuffled plan renders differently:\n%s\n--- want\n%s", seed, got, want)
				}
				nftSort(p, ports)
				if got := NFTables(p); !bytes.Equal(got, want) {
					t.Fatalf("seed %d: a shuffled and re-sorted plan renders differently:\n%s\n--- want\n%s", seed, got, want)
				}
			}
		})
	}
}

func TestNFTablesEmptyFamilies(t *testing.T) {
	// Headless and ExternalName services produce nothing: the file is the
	// one of a plan without services.
	for _, name := range []string{"headless-and-externalname"} {
		var p *plan.Plan
		for _, tc := range nftCases() {
			if tc.name == name {
				p = tc.plan
			}
		}
		got, want := NFTables(p), NFTables(nftPlan())
		if !bytes.Equal(got, want) {
			t.Errorf("%s: want the rules of an empty plan, got\n%s", name, got)
		}
	}
	// An IPv4-only service leaves the ip6 table with its base chains only.
	tables := nftTables(t, NFTables(nftPlan(nftWeb())))
	empty := nftTables(t, NFTables(nftPlan()))
	if tables["ip6"] != empty["ip6"] {
		t.Errorf("an IPv4-only service changed table ip6 netspec:\n%s", tables["ip6"])
	}
	if strings.Contains(tables["ip"], "fd00") || strings.Contains(tables["ip6"], "10.96.") {
		t.Errorf("a table holds an address of the other family")
	}
}

func TestNFTablesNames(t *testing.T) {
	svc := nftLongNames()
	text := NFTables(nftPlan(svc))
	var names []string
	for _, m := range nftDeclRE.FindAllStringSubmatch(string(text), -1) {
		names = append(names, m[2])
		if len(m[2]) > nftNameMax {
			t.Errorf("%s %s is %d bytes, more than %d", m[1], m[2], len(m[2]), nftNameMax)
		}
	}
	var cut []string
	for _, n := range names {
		if strings.HasSuffix(n, "...") {
			cut = append(cut, n)
		}
	}
	// Both affinity sets are cut, and stay apart.
	if len(cut) != 2 {
		t.Errorf("want 2 cut names (2 affinity sets), got %d: %q", len(cut), cut)
	}
	if uniq := slices.Compact(slices.Sorted(slices.Values(cut))); len(uniq) != len(cut) {
		t.Errorf("cut names collide: %q", cut)
	}

	// Names are stable: they depend on the service port and endpoint only,
	// not on their position or on the other services.
	other := nftWeb()
	other.Name = "aaa"
	more := nftPlan(other, nftWeb())
	more.Services[1].Ports[0].Endpoints = append([]plan.Endpoint{nftEP("10.244.0.1", 8080, "node-a", "")}, more.Services[1].Ports[0].Endpoints...)
	more.Services[1].Ports[0].Cluster = []int{0, 1, 2}
	alone := NFTables(nftPlan(nftWeb()))
	for _, m := range nftDeclRE.FindAllStringSubmatch(string(alone), -1) {
		if !bytes.Contains(NFTables(more), []byte("\t"+m[1]+" "+m[2]+" {\n")) {
			t.Errorf("%s %s is renamed when other services or endpoints are added", m[1], m[2])
		}
	}

	for _, tc := range []struct {
		prefix, readable, want string
	}{
		{prefix: "service-", readable: "shop/web/tcp/http", want: "service-" + nftHash("shop/web/tcp/http") + "-shop/web/tcp/http"},
		{prefix: "affinity-", readable: "a/b/udp/53__fd00::1/53", want: "affinity-" + nftHash("a/b/udp/53__fd00::1/53") + "-a/b/udp/53__fd00..1/53"},
		{prefix: "local-", readable: "a/b/tcp/x y\"z", want: "local-" + nftHash("a/b/tcp/x y\"z") + "-a/b/tcp/x_y_z"},
	} {
		if got := nftName(tc.prefix, nftHash(tc.readable), tc.readable); got != tc.want {
			t.Errorf("nftName(%q, %q) = %q, want %q", tc.prefix, tc.readable, got, tc.want)
		}
	}
}

// TestNFTablesPick checks that the endpoint pick gives each endpoint the
// same chance: rule i of k is taken with probability 1/(k-i) of what
// reaches it.
func TestNFTablesPick(t *testing.T) {
	for k := 1; k <= 7; k++ {
		var eps []nftEndpoint
		for i := range k {
			eps = append(eps, nftEndpoint{addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}), 80)})
		}
		rules := pickRules(nftFamilies[0], eps, false)
		if len(rules) != k {
			t.Fatalf("k=%d: %d rules: %q", k, len(rules), rules)
		}
		reach := 1.0
		for i, r := range rules {
			var mod int
			var target string
			if _, err := fmt.Sscanf(r, "numgen random mod %d == 0 meta l4proto tcp dnat to %s", &mod, &target); err != nil {
				mod = 1
				if _, err := fmt.Sscanf(r, "meta l4proto tcp dnat to %s", &target); err != nil || i != k-1 {
					t.Fatalf("k=%d: rule %d is %q", k, i, r)
				}
			}
			if target != eps[i].addr.String() {
				t.Errorf("k=%d: rule %d goes to %s", k, i, target)
			}
			if p := reach / float64(mod); p < 1/float64(k)-1e-9 || p > 1/float64(k)+1e-9 {
				t.Errorf("k=%d: endpoint %d is picked with probability %g", k, i, p)
			}
			reach -= reach / float64(mod)
		}
		for i := range eps {
			eps[i].affinity = fmt.Sprintf("aff%d", i)
		}
		withAffinity := pickRules(nftFamilies[1], eps, true)
		if len(withAffinity) != 2*k || withAffinity[0] != "ip6 saddr @aff0 update @aff0 { ip6 saddr } meta l4proto tcp dnat to 10.0.0.0:80" {
			t.Errorf("k=%d: affinity rules: %q", k, withAffinity)
		}
	}
}

// TestNFTablesParallelGroups: a table big enough to be rendered in slices
// side by side (sideBySide) gives the text of one goroutine.
func TestNFTablesParallelGroups(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("SKIPPED: needs GOMAXPROCS ≥ 2 to render side by side")
	}
	defer func(n int) { groupsPerWorker = n }(groupsPerWorker)
	groupsPerWorker = 8
	p := genplan.Plan(t, 100, "node-1")
	parallel := NFTables(p)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	if sequential := NFTables(p); !bytes.Equal(parallel, sequential) {
		t.Fatalf("rendered side by side, the ruleset differs (%d bytes, %d one goroutine)", len(parallel), len(sequential))
	}
}
