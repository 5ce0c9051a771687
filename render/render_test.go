package render

import (
	"bytes"
	"cmp"
	"maps"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"netspec.dev/netspec/plan"
)

// compareTextGolden compares got with the golden file at path (slash
// separated, under testdata/) and rewrites it with -update.
func compareTextGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	file := filepath.Join("testdata", filepath.FromSlash(path))
	if *update {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test ./render -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test ./render -update rewrites it)\n--- got\n%s\n--- want\n%s", file, got, want)
	}
}

// textFixturePlan is a small dual-stack plan with every kind of record and
// variable: ClusterIP, NodePort+LoadBalancer with source ranges and Local
// policy, headless with hostnames, ExternalName.
func textFixturePlan() *plan.Plan {
	const ttl = 5
	a := netip.MustParseAddr
	pfx := netip.MustParsePrefix
	p := &plan.Plan{
		FormatVersion: plan.FormatVersion,
		Node: plan.Node{
			Name: "node-a",
			Zone: "zone-1",
			IPs:  []netip.Addr{a("192.168.1.10"), a("2001:db8::10")},
		},
		Cluster: plan.Cluster{
			Domain:       "cluster.local",
			ServiceCIDRs: []netip.Prefix{pfx("10.96.0.0/12"), pfx("fd00:10:96::/112")},
			PodCIDRs:     []netip.Prefix{pfx("10.244.0.0/16")},
			DNSTTL:       ttl,
		},
		Services: []plan.Service{
			{
				Namespace: "default", Name: "kubernetes", Type: "ClusterIP",
				ClusterIPs: []netip.Addr{a("10.96.0.1")},
				Ports: []plan.Port{{
					Name: "https", Protocol: "TCP", Port: 443,
					Endpoints: []plan.Endpoint{{IP: a("192.168.1.10"), Port: 6443, Ready: true, Serving: true, NodeName: "node-a"}},
					Cluster:   []int{0},
					External:  []int{0},
				}},
			},
			{
				Namespace: "kube-system", Name: "kube-dns", Type: "ClusterIP",
				ClusterIPs: []netip.Addr{a("10.96.0.10")},
				Ports: []plan.Port{
					{
						Name: "dns", Protocol: "UDP", Port: 53,
						Endpoints: []plan.Endpoint{{IP: a("10.244.1.2"), Port: 53, Ready: true, Serving: true, NodeName: "node-a", Zone: "zone-1", Pod: "kube-system/coredns-0"}},
						Cluster:   []int{0}, External: []int{0},
					},
					{
						Name: "dns-tcp", Protocol: "TCP", Port: 53,
						Endpoints: []plan.Endpoint{{IP: a("10.244.1.2"), Port: 53, Ready: true, Serving: true, NodeName: "node-a", Zone: "zone-1", Pod: "kube-system/coredns-0"}},
						Cluster:   []int{0}, External: []int{0},
					},
				},
			},
			{
				Namespace: "shop", Name: "db", Type: "ClusterIP", Headless: true,
				Ports: []plan.Port{{
					Name: "postgres", Protocol: "TCP", Port: 5432,
					Endpoints: []plan.Endpoint{
						{IP: a("10.244.2.8"), Port: 5432, Ready: true, Serving: true, NodeName: "node-b", Zone: "zone-2", Extra: &plan.EndpointExtra{Hostname: "db-1"}, Pod: "shop/db-1"},
						{IP: a("10.244.1.6"), Port: 5432, Ready: true, Serving: true, NodeName: "node-a", Zone: "zone-1", Extra: &plan.EndpointExtra{Hostname: "db-0"}, Pod: "shop/db-0"},
					},
					Cluster: []int{1, 0}, External: []int{0, 1},
				}},
			},
			{
				Namespace: "shop", Name: "search", Type: "ExternalName", ExternalName: "search.example.com",
			},
			{
				Namespace: "shop", Name: "web", Type: "LoadBalancer",
				ClusterIPs:      []netip.Addr{a("10.96.12.34"), a("fd00:10:96::1234")},
				ExternalIPs:     []netip.Addr{a("198.51.100.7")},
				LoadBalancerIPs: []netip.Addr{a("203.0.113.10")},
				SourceRanges:    []netip.Prefix{pfx("198.51.100.0/24"), pfx("2001:db8:1::/48")},
				AffinitySeconds: 10800,
				ExternalLocal:   true,
				Ports: []plan.Port{{
					Name: "http", Protocol: "TCP", Port: 80, NodePort: 30080,
					Endpoints: []plan.Endpoint{
						{IP: a("10.244.2.7"), Port: 8080, Ready: false, Serving: true, Terminating: true, NodeName: "node-b", Zone: "zone-2", Extra: &plan.EndpointExtra{ZoneHints: []string{"zone-2"}}, Pod: "shop/web-2"},
						{IP: a("10.244.1.5"), Port: 8080, Ready: true, Serving: true, NodeName: "node-a", Zone: "zone-1", Extra: &plan.EndpointExtra{ZoneHints: []string{"zone-1"}, NodeHints: []string{"node-a"}}, Pod: "shop/web-1"},
					},
					Cluster:  []int{1},
					External: []int{1},
				}},
			},
		},
	}

	ptr := func(ip, target string) plan.Record {
		rev, err := dns.ReverseAddr(ip)
		if err != nil {
			panic(err)
		}
		return plan.Record{Name: rev, Type: "PTR", TTL: ttl, Data: target}
	}
	apex := func(zone string, serial string) []plan.Record {
		return []plan.Record{
			{Name: zone, Type: "SOA", TTL: ttl, Data: "ns.dns.cluster.local. hostmaster.cluster.local. " + serial + " 7200 1800 86400 5"},
			{Name: zone, Type: "NS", TTL: ttl, Data: "ns.dns.cluster.local."},
		}
	}
	r := func(name, typ, data string) plan.Record {
		return plan.Record{Name: name, Type: typ, TTL: ttl, Data: data}
	}
	const ip6zone = "6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa."
	p.DNS.Zones = []plan.Zone{
		{
			Name: "cluster.local.",
			Records: append(apex("cluster.local.", "2718281828"),
				r("dns-version.cluster.local.", "TXT", `"1.1.0"`),
				r("kubernetes.default.svc.cluster.local.", "A", "10.96.0.1"),
				r("_https._tcp.kubernetes.default.svc.cluster.local.", "SRV", "0 100 443 kubernetes.default.svc.cluster.local."),
				r("kube-dns.kube-system.svc.cluster.local.", "A", "10.96.0.10"),
				r("_dns._udp.kube-dns.kube-system.svc.cluster.local.", "SRV", "0 100 53 kube-dns.kube-system.svc.cluster.local."),
				r("_dns-tcp._tcp.kube-dns.kube-system.svc.cluster.local.", "SRV", "0 100 53 kube-dns.kube-system.svc.cluster.local."),
				r("db.shop.svc.cluster.local.", "A", "10.244.1.6"),
				r("db.shop.svc.cluster.local.", "A", "10.244.2.8"),
				r("db-0.db.shop.svc.cluster.local.", "A", "10.244.1.6"),
				r("db-1.db.shop.svc.cluster.local.", "A", "10.244.2.8"),
				r("_postgres._tcp.db.shop.svc.cluster.local.", "SRV", "0 50 5432 db-0.db.shop.svc.cluster.local."),
				r("_postgres._tcp.db.shop.svc.cluster.local.", "SRV", "0 50 5432 db-1.db.shop.svc.cluster.local."),
				r("search.shop.svc.cluster.local.", "CNAME", "search.example.com."),
				r("web.shop.svc.cluster.local.", "A", "10.96.12.34"),
				r("web.shop.svc.cluster.local.", "AAAA", "fd00:10:96::1234"),
				r("_http._tcp.web.shop.svc.cluster.local.", "SRV", "0 100 80 web.shop.svc.cluster.local."),
			),
		},
		{
			Name: "10.in-addr.arpa.",
			Records: append(apex("10.in-addr.arpa.", "1414213562"),
				ptr("10.96.0.1", "kubernetes.default.svc.cluster.local."),
				ptr("10.96.0.10", "kube-dns.kube-system.svc.cluster.local."),
				ptr("10.96.12.34", "web.shop.svc.cluster.local."),
				ptr("10.244.1.6", "db-0.db.shop.svc.cluster.local."),
				ptr("10.244.2.8", "db-1.db.shop.svc.cluster.local."),
			),
		},
		{
			Name: ip6zone,
			Records: append(apex(ip6zone, "1732050807"),
				ptr("fd00:10:96::1234", "web.shop.svc.cluster.local."),
			),
		},
	}
	p.Env = []plan.EnvFile{
		{Namespace: "default", Vars: kubeletVars(
			"kubernetes", "10.96.0.1", []plan.Port{{Name: "https", Protocol: "TCP", Port: 443}})},
		{Namespace: "kube-system", Vars: append(kubeletVars(
			"kubernetes", "10.96.0.1", []plan.Port{{Name: "https", Protocol: "TCP", Port: 443}}),
			kubeletVars("kube-dns", "10.96.0.10", p.Services[1].Ports)...)},
		{Namespace: "shop", Vars: append(kubeletVars(
			"kubernetes", "10.96.0.1", []plan.Port{{Name: "https", Protocol: "TCP", Port: 443}}),
			kubeletVars("web", "10.96.12.34", p.Services[4].Ports)...)},
	}
	sortLikeCompiler(p)
	return p
}

// kubeletVars makes the variables the kubelet sets for one service (its
// makeEnvVariables), unsorted.
func kubeletVars(svc, ip string, ports []plan.Port) []plan.EnvVar {
	n := strings.ToUpper(strings.ReplaceAll(svc, "-", "_"))
	u := func(x uint16) string { return strconv.Itoa(int(x)) }
	vs := []plan.EnvVar{
		{Name: n + "_SERVICE_HOST", Value: ip},
		{Name: n + "_SERVICE_PORT", Value: u(ports[0].Port)},
		{Name: n + "_PORT", Value: strings.ToLower(ports[0].Protocol) + "://" + ip + ":" + u(ports[0].Port)},
	}
	for _, pt := range ports {
		if pt.Name != "" {
			vs = append(vs, plan.EnvVar{Name: n + "_SERVICE_PORT_" + strings.ToUpper(strings.ReplaceAll(pt.Name, "-", "_")), Value: u(pt.Port)})
		}
		pp := n + "_PORT_" + u(pt.Port) + "_" + pt.Protocol
		url := strings.ToLower(pt.Protocol) + "://" + ip + ":" + u(pt.Port)
		vs = append(vs,
			plan.EnvVar{Name: pp, Value: url},
			plan.EnvVar{Name: pp + "_PROTO", Value: strings.ToLower(pt.Protocol)},
			plan.EnvVar{Name: pp + "_PORT", Value: u(pt.Port)},
			plan.EnvVar{Name: pp + "_ADDR", Value: ip},
		)
	}
	return vs
}

// sortLikeCompiler sorts what plan.go documents as sorted: services by
// namespace/name, node IPs, external and LoadBalancer IPs, endpoints by IP
// and port (remapping the Cluster and External indices, kept ascending),
// hints, zones by name, records by name, type and data, env files by
// namespace and variables by name.
func sortLikeCompiler(p *plan.Plan) {
	slices.SortFunc(p.Node.IPs, netip.Addr.Compare)
	slices.SortFunc(p.Services, func(x, y plan.Service) int {
		return cmp.Or(cmp.Compare(x.Namespace, y.Namespace), cmp.Compare(x.Name, y.Name))
	})
	for i := range p.Services {
		s := &p.Services[i]
		slices.SortFunc(s.ExternalIPs, netip.Addr.Compare)
		slices.SortFunc(s.LoadBalancerIPs, netip.Addr.Compare)
		for j := range s.Ports {
			pt := &s.Ports[j]
			order := make([]int, len(pt.Endpoints)) // order[new] = old
			for k := range order {
				order[k] = k
			}
			slices.SortStableFunc(order, func(x, y int) int {
				return pt.Endpoints[x].AddrPort().Compare(pt.Endpoints[y].AddrPort())
			})
			newIndex := make([]int, len(order))
			eps := make([]plan.Endpoint, len(order))
			for k, old := range order {
				newIndex[old] = k
				eps[k] = pt.Endpoints[old]
				if x := eps[k].Extra; x != nil {
					slices.Sort(x.ZoneHints)
					slices.Sort(x.NodeHints)
				}
			}
			pt.Endpoints = eps
			for k := range pt.Cluster {
				pt.Cluster[k] = newIndex[pt.Cluster[k]]
			}
			for k := range pt.External {
				pt.External[k] = newIndex[pt.External[k]]
			}
			slices.Sort(pt.Cluster)
			slices.Sort(pt.External)
		}
	}
	slices.SortFunc(p.DNS.Zones, func(x, y plan.Zone) int { return cmp.Compare(x.Name, y.Name) })
	for i := range p.DNS.Zones {
		slices.SortFunc(p.DNS.Zones[i].Records, func(x, y plan.Record) int {
			return cmp.Or(cmp.Compare(x.Name, y.Name), cmp.Compare(x.Type, y.Type), cmp.Compare(x.Data, y.Data))
		})
	}
	slices.SortFunc(p.Env, func(x, y plan.EnvFile) int { return cmp.Compare(x.Namespace, y.Namespace) })
	for i := range p.Env {
		slices.SortFunc(p.Env[i].Vars, func(x, y plan.EnvVar) int { return cmp.Compare(x.Name, y.Name) })
	}
}

// shufflePlan permutes every list sortLikeCompiler sorts, endpoints with
// their indices.
func shufflePlan(p *plan.Plan, r *rand.Rand) {
	shuffle := func(n int, swap func(i, j int)) { r.Shuffle(n, swap) }
	shuffle(len(p.Node.IPs), func(i, j int) { p.Node.IPs[i], p.Node.IPs[j] = p.Node.IPs[j], p.Node.IPs[i] })
	shuffle(len(p.Services), func(i, j int) { p.Services[i], p.Services[j] = p.Services[j], p.Services[i] })
	for i := range p.Services {
		s := &p.Services[i]
		shuffle(len(s.ExternalIPs), func(i, j int) { s.ExternalIPs[i], s.ExternalIPs[j] = s.ExternalIPs[j], s.ExternalIPs[i] })
		shuffle(len(s.LoadBalancerIPs), func(i, j int) {
			s.LoadBalancerIPs[i], s.LoadBalancerIPs[j] = s.LoadBalancerIPs[j], s.LoadBalancerIPs[i]
		})
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
			for k := range pt.Cluster {
				pt.Cluster[k] = newIndex[pt.Cluster[k]]
			}
			for k := range pt.External {
				pt.External[k] = newIndex[pt.External[k]]
			}
		}
	}
	shuffle(len(p.DNS.Zones), func(i, j int) { p.DNS.Zones[i], p.DNS.Zones[j] = p.DNS.Zones[j], p.DNS.Zones[i] })
	for _, z := range p.DNS.Zones {
		shuffle(len(z.Records), func(i, j int) { z.Records[i], z.Records[j] = z.Records[j], z.Records[i] })
	}
	shuffle(len(p.Env), func(i, j int) { p.Env[i], p.Env[j] = p.Env[j], p.Env[i] })
	for _, f := range p.Env {
		shuffle(len(f.Vars), func(i, j int) { f.Vars[i], f.Vars[j] = f.Vars[j], f.Vars[i] })
	}
}

func TestFiles(t *testing.T) {
	p := textFixturePlan()
	files, err := Files(p, DataplaneNFTables)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON, err := PlanJSON(p)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{
		"nftables.nft": NFTables(p),
		"plan.json":    wantJSON,
	}
	for _, z := range p.DNS.Zones {
		want["dns/"+strings.TrimSuffix(z.Name, ".")+".zone"] = ZoneFile(z)
	}
	for _, f := range p.Env {
		want["env/"+f.Namespace+".env"] = EnvFile(f)
		want["resolv/"+f.Namespace+".conf"] = ResolvConf(f.Namespace, p.Cluster.Domain, p.Cluster.DNSAddress)
	}
	wantPaths := []string{
		"dns/10.in-addr.arpa.zone",
		"dns/6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa.zone",
		"dns/cluster.local.zone",
		"env/default.env",
		"env/kube-system.env",
		"env/shop.env",
		"nftables.nft",
		"plan.json",
		"resolv/default.conf",
		"resolv/kube-system.conf",
		"resolv/shop.conf",
	}
	if got := slices.Sorted(maps.Keys(want)); !slices.Equal(got, wantPaths) {
		t.Fatalf("fixture paths %q, want %q", got, wantPaths)
	}
	if got, w := slices.Sorted(maps.Keys(files)), slices.Sorted(maps.Keys(want)); !slices.Equal(got, w) {
		t.Fatalf("Files paths:\n got %q\nwant %q", got, w)
	}
	for path, w := range want {
		if !bytes.Equal(files[path], w) {
			t.Errorf("Files()[%q] is not what its renderer gives", path)
		}
	}
}

func TestFilesErrors(t *testing.T) {
	tests := []struct {
		name    string
		dp      Dataplane
		edit    func(p *plan.Plan)
		wantErr string
	}{
		{name: "empty data plane", dp: "", wantErr: `unknown data plane ""`},
		{name: "unknown data plane", dp: "iptables", wantErr: `unknown data plane "iptables"`},
		{
			name: "two zones, one file", dp: DataplaneNFTables,
			edit:    func(p *plan.Plan) { p.DNS.Zones[1].Name = "cluster.local" },
			wantErr: "two artifacts are named dns/cluster.local.zone",
		},
		{
			name: "two env files, one namespace", dp: DataplaneNFTables,
			edit:    func(p *plan.Plan) { p.Env[1].Namespace = "default" },
			wantErr: "two artifacts are named env/default.env",
		},
		{
			name: "zone name with a slash", dp: DataplaneNFTables,
			edit:    func(p *plan.Plan) { p.DNS.Zones[0].Name = "../etc." },
			wantErr: `zone "../etc." cannot name a file`,
		},
		{
			name: "root zone", dp: DataplaneNFTables,
			edit:    func(p *plan.Plan) { p.DNS.Zones[0].Name = "." },
			wantErr: `zone "." cannot name a file`,
		},
		{
			name: "empty namespace", dp: DataplaneNFTables,
			edit:    func(p *plan.Plan) { p.Env[0].Namespace = "" },
			wantErr: `namespace "" cannot name a file`,
		},
		{
			name: "format version", dp: DataplaneNFTables,
			edit:    func(p *plan.Plan) { p.FormatVersion = plan.FormatVersion + 1 },
			wantErr: "format version",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := textFixturePlan()
			if tt.edit != nil {
				tt.edit(p)
			}
			files, err := Files(p, tt.dp)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Files error = %v, want one containing %q", err, tt.wantErr)
			}
			if files != nil {
				t.Errorf("Files returned files with an error")
			}
		})
	}
	if _, err := Files(nil, DataplaneNFTables); err == nil {
		t.Error("Files(nil) gave no error")
	}
}

// TestFilesByteStable renders twice, and again after shuffling every
// sorted list of the plan and sorting it back as the compiler does: the
// bytes must not change. EnvFile sorts by itself, so its files must not
// change even without sorting back.
func TestFilesByteStable(t *testing.T) {
	want, err := Files(textFixturePlan(), DataplaneNFTables)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Files(textFixturePlan(), DataplaneNFTables)
	if err != nil {
		t.Fatal(err)
	}
	assertSameFiles(t, "second render", again, want)

	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20 {
		p := textFixturePlan()
		shufflePlan(p, r)
		for _, f := range p.Env {
			ns := f.Namespace
			if got := EnvFile(f); !bytes.Equal(got, want["env/"+ns+".env"]) {
				t.Errorf("shuffle %d: EnvFile(%s) depends on the variables' order:\n%s", i, ns, got)
			}
		}
		sortLikeCompiler(p)
		got, err := Files(p, DataplaneNFTables)
		if err != nil {
			t.Fatal(err)
		}
		assertSameFiles(t, "shuffled and sorted back", got, want)
	}
}

func assertSameFiles(t *testing.T, what string, got, want map[string][]byte) {
	t.Helper()
	if g, w := slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)); !slices.Equal(g, w) {
		t.Fatalf("%s: paths %q, want %q", what, g, w)
	}
	for path, w := range want {
		if !bytes.Equal(got[path], w) {
			t.Errorf("%s: %s changed:\n%s", what, path, got[path])
		}
	}
}
