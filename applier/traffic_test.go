package applier_test

import (
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"netspec.dev/netspec/applier"
	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/internal/testnet"
	"netspec.dev/netspec/internal/vmtest"
	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/render"
	"netspec.dev/netspec/schema"
)

// These tests send real packets through the rules of a compiled tree,
// inside throwaway network namespaces (the host's network and nftables are
// never touched). They need root, ip and nft, and say so loudly when they
// skip. Each test builds this topology:
//
//	client ──── node-1 ──── node-2
//	              │  └── upstream │
//	        pods of node-1    pods of node-2
//
// client has 192.168.10.100 (and 192.168.11.100, a second source) and
// fd00:192:168:10::100, and routes everything to node-1 (192.168.10.11,
// fd00:192:168:10::11), where the rules are installed. node-1 routes
// 10.244.2.0/24 to node-2 (192.168.12.12), and everything else to an
// upstream namespace that drops it. Each Pod of the tree gets a namespace
// of its own with its pod IPs, linked to its node, where a server on each
// container port (TCP and UDP) answers "POD-NAME CLIENT-IP".
//
// The trees are testdata/traffic/common plus one feature directory.

// An installer puts plans into the kernel of namespace ns: it returns
// the function that installs a plan there, first or again after a change.
type installer func(t *testing.T, ns *testnet.NS) func(t *testing.T, p *plan.Plan)

// installers are the two ways a rendered plan reaches a kernel; every
// feature is proven with both. nft -f is the reference (the rendered file
// as reviewed); the applier is what `netspec apply` runs, with its state
// dir, so that a reinstall goes by difference and cleans up conntrack.
var installers = []struct {
	name    string
	install installer
}{
	{"applier", nodeInstaller(false)},
	{"ipvs", nodeInstaller(true)},
	{"nft -f", func(t *testing.T, ns *testnet.NS) func(*testing.T, *plan.Plan) {
		return func(t *testing.T, p *plan.Plan) {
			t.Helper()
			file := filepath.Join(t.TempDir(), "nftables.nft")
			if err := os.WriteFile(file, render.NFTables(p), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := ns.Run("nft", "-f", file); err != nil {
				t.Fatalf("install: %v", err)
			}
		}
	}},
}

// nodeInstaller installs plans with an applier.Node and its own state
// dir, as `netspec apply` does: with the nftables data plane, or with IPVS
// (only in the VM of internal/vmtest, whose kernel has it).
func nodeInstaller(withIPVS bool) installer {
	return func(t *testing.T, ns *testnet.NS) func(*testing.T, *plan.Plan) {
		if withIPVS && !vmtest.InVM() {
			t.Skip("SKIPPED: the IPVS data plane is proven in the VM of internal/vmtest (package applier/vmsuite); the host kernel has no IPVS")
		}
		n, err := applier.Open(applier.Options{StateDir: t.TempDir(), NetNSFd: ns.Fd(), IPVS: withIPVS})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		return func(t *testing.T, p *plan.Plan) {
			t.Helper()
			if _, err := n.ApplyStaged(p, nil); err != nil {
				t.Fatalf("apply: %v", err)
			}
		}
	}
}

const (
	clientIP  = "192.168.10.100"
	clientIP6 = "fd00:192:168:10::100"
	deniedIP  = "192.168.11.100" // the client's second address, outside the LoadBalancer's source ranges
	nodeIP    = "192.168.10.11"  // node-1, where the rules are
	nodeIP6   = "fd00:192:168:10::11"

	// answerWait bounds connections that should be answered; they
	// usually are in well under a millisecond.
	answerWait = 2 * time.Second
	// dropWait is how long a connection that should be dropped is
	// given to be answered anyway.
	dropWait = 400 * time.Millisecond
	// refusedWait bounds connections that should be rejected: less
	// than TCP's first SYN retransmission (1 s), so that "refused"
	// means the first SYN was rejected.
	refusedWait = 800 * time.Millisecond
	// refusedRetryWait bounds connections that should be rejected
	// where the first SYN's ICMP error may be lost to the client: the
	// veth links deliver it while connect() still holds the socket, and
	// the kernel then keeps the error for SO_ERROR without waking the
	// dialer, so the refusal ends the connect at the SYN's first
	// retransmission (1 s). A few seconds: a refusal, not a timeout.
	refusedRetryWait = 4 * time.Second
)

// cluster is the topology of one test.
type cluster struct {
	installer string // its name
	install   func(*testing.T, *plan.Plan)
	tree      string // the tree's directory
	client    *testnet.NS
	node      *testnet.NS // node-1: holds the rules
	node2     *testnet.NS // node-2: a router to its pods, no rules
	upstream  *testnet.NS // node-1's default route: drops what it is sent
	pods      map[string]*testnet.NS
}

// newCluster builds the topology for the tree of testdata/traffic/common
// plus testdata/traffic/FEATURE, compiles the tree for node-1 and installs
// the plan on node-1.
func newCluster(t *testing.T, feature string, inst installer) *cluster {
	t.Helper()
	testnet.Require(t, "nft")
	c := &cluster{tree: t.TempDir(), pods: map[string]*testnet.NS{}}
	copyDir(t, filepath.Join("testdata", "traffic", "common"), c.tree)
	copyDir(t, filepath.Join("testdata", "traffic", feature), filepath.Join(c.tree, feature))
	tree, p := compileTree(t, c.tree)

	n := testnet.New(t, "applier")
	c.client, c.node, c.node2 = n.NS("client"), n.NS("node-1"), n.NS("node-2")
	testnet.Link(c.client, []string{clientIP + "/24", deniedIP + "/24", clientIP6 + "/64"},
		c.node, []string{nodeIP + "/24", "192.168.11.1/24", nodeIP6 + "/64"})
	testnet.Link(c.node, []string{"192.168.12.11/24", "fd00:192:168:12::11/64"},
		c.node2, []string{"192.168.12.12/24", "fd00:192:168:12::12/64"})
	c.client.Route("default", nodeIP)
	c.client.Route("default", nodeIP6)
	c.node.Forwarding()
	c.node.Route("10.244.2.0/24", "192.168.12.12")
	c.node.Route("fd00:10:244:2::/64", "fd00:192:168:12::12")
	// Upstream: node-1's default route goes to a namespace that does
	// not forward, and so silently drops what it is sent. Frontends
	// without endpoints need a route to meet the reject on the forward
	// path. (A default route back out the client's link would make
	// node-1 send the client ICMP redirects, which use up the ICMP rate
	// limit towards it and delay or suppress the rejects.)
	upstream := n.NS("upstream")
	c.upstream = upstream
	testnet.Link(c.node, []string{"198.18.0.1/24", "fd00:198:18::1/64"}, upstream, []string{"198.18.0.2/24", "fd00:198:18::2/64"})
	c.node.Route("default", "198.18.0.2")
	c.node.Route("default", "fd00:198:18::2")
	c.node2.Forwarding()
	c.node2.Route("default", "192.168.12.11")
	c.node2.Route("default", "fd00:192:168:12::11")

	for _, o := range tree.Objects {
		if o.Pod != nil {
			c.addPod(t, n, o.Pod)
		}
	}
	c.install = inst(t, c.node)
	c.install(t, p)
	return c
}

// addPod makes pod's namespace, linked to its node: each pod IP is one end
// of a /31 (/127) whose other end, the pod's gateway, is on the node.
func (c *cluster) addPod(t *testing.T, n *testnet.Net, pod *schema.Pod) {
	t.Helper()
	name := pod.Metadata.Name
	var host *testnet.NS
	switch pod.Spec.NodeName {
	case "node-1":
		host = c.node
	case "node-2":
		host = c.node2
	default:
		t.Fatalf("pod %s is on node %q: the traffic tests have node-1 and node-2", name, pod.Spec.NodeName)
	}
	ips := []string{pod.Status.PodIP}
	if len(pod.Status.PodIPs) > 0 {
		ips = nil
		for _, ip := range pod.Status.PodIPs {
			ips = append(ips, ip.IP)
		}
	}
	ns := n.NS(name)
	c.pods[name] = ns
	var podAddrs, gwAddrs, gws, listen []string
	for _, s := range ips {
		ip := netip.MustParseAddr(s)
		bits := 31
		if ip.Is6() {
			bits = 127
		}
		b := ip.AsSlice()
		b[len(b)-1] ^= 1
		gw, _ := netip.AddrFromSlice(b)
		podAddrs = append(podAddrs, netip.PrefixFrom(ip, bits).String())
		gwAddrs = append(gwAddrs, netip.PrefixFrom(gw, bits).String())
		gws = append(gws, gw.String())
		for _, ctr := range pod.Spec.Containers {
			for _, port := range ctr.Ports {
				addr := netip.AddrPortFrom(ip, uint16(port.ContainerPort)).String()
				if !slices.Contains(listen, addr) {
					listen = append(listen, addr)
				}
			}
		}
	}
	testnet.Link(host, gwAddrs, ns, podAddrs)
	for _, gw := range gws {
		ns.Route("default", gw)
	}
	ns.Serve(t, name, listen...)
}

// compileTree loads, validates and compiles the tree at dir for node-1, as
// `netspec render` does; warnings are fine, errors fail the test.
func compileTree(t *testing.T, dir string) (*schema.Tree, *plan.Plan) {
	t.Helper()
	tree, err := schema.Load(dir, schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	checked := compiler.Validate(tree.Objects, nil, tree)
	diags := append(tree.Diags, checked.Diags...)
	if diags.Errors() > 0 {
		t.Fatalf("the tree %s is invalid:\n%v", dir, diags)
	}
	p, err := compiler.Compile(tree.Objects, checked, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	return tree, p
}

// reinstall compiles the tree again, after a change, and installs it.
func (c *cluster) reinstall(t *testing.T) {
	t.Helper()
	_, p := compileTree(t, c.tree)
	c.install(t, p)
}

// copyDir copies the files of directory from into directory to.
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// dials makes n new connections with dial and returns the answers. It
// stops at the first timeout: the path is broken, and the other dials
// would only take as long.
func dials(n int, dial func() string) []string {
	var answers []string
	for range n {
		a := dial()
		answers = append(answers, a)
		if a == "timeout" {
			break
		}
	}
	return answers
}

// backends checks that every answer comes from one of the pods named and
// returns how many came from each; the answers' client IPs go to sources.
func backends(t *testing.T, what string, answers []string, pods ...string) (count map[string]int, sources map[string]bool) {
	t.Helper()
	count, sources = map[string]int{}, map[string]bool{}
	bad := 0
	for _, a := range answers {
		f := strings.Fields(a)
		if len(f) != 2 || !slices.Contains(pods, f[0]) {
			if bad++; bad <= 3 {
				t.Errorf("%s: got %q, want an answer from one of %v", what, a, pods)
			}
			continue
		}
		count[f[0]]++
		sources[f[1]] = true
	}
	if bad > 3 {
		t.Errorf("%s: and %d more wrong answers, of %d", what, bad-3, len(answers))
	}
	return count, sources
}

// allSeen checks that each of pods answered at least min of the answers.
func allSeen(t *testing.T, what string, count map[string]int, min int, pods ...string) {
	t.Helper()
	for _, p := range pods {
		if count[p] < min {
			t.Errorf("%s: %s answered %d times, want at least %d (answers per pod: %v)", what, p, count[p], min, count)
		}
	}
}

// rebindsPort are the rows of TestTraffic that close a socket and bind its
// port again at once; they run alone, before the others. A process that a
// row beside them forks meanwhile (ip, nft) holds a copy of the closed
// socket until it execs, and the bind fails with "address already in use".
var rebindsPort = map[string]bool{"udp-removal": true}

// TestTraffic proves each Service feature with packets, in a topology of
// its own.
func TestTraffic(t *testing.T) {
	testnet.Require(t, "nft")
	for _, tc := range []struct {
		name, tree string
		check      func(t *testing.T, c *cluster)
	}{
		{"cluster IP spreads over all backends", "cluster-ip", func(t *testing.T, c *cluster) {
			const n = 60
			answers := dials(n, func() string { return c.client.DialTCP("10.96.0.10:80", answerWait) })
			count, _ := backends(t, "10.96.0.10:80", answers, "web-1", "web-2", "web-3")
			allSeen(t, "10.96.0.10:80", count, n/10, "web-1", "web-2", "web-3")
		}},
		{"node port at the node's IP", "node-port", func(t *testing.T, c *cluster) {
			target := nodeIP + ":30080"
			answers := dials(20, func() string { return c.client.DialTCP(target, answerWait) })
			count, sources := backends(t, target, answers, "storefront-1", "storefront-2")
			allSeen(t, target, count, 1, "storefront-1", "storefront-2")
			if sources[clientIP] {
				t.Errorf("%s: a pod saw the client's address; policy Cluster masquerades (sources %v)", target, sources)
			}
		}},
		{"external IP", "external-ips", func(t *testing.T, c *cluster) {
			answers := dials(10, func() string { return c.client.DialTCP("203.0.113.10:80", answerWait) })
			backends(t, "203.0.113.10:80", answers, "portal-1", "portal-2")
		}},
		{"load balancer source ranges", "load-balancer", func(t *testing.T, c *cluster) {
			for _, row := range []struct {
				name, src, target string
				want              []string // pods, or "timeout"
			}{
				{"allowed source", clientIP, "203.0.113.100:443", []string{"gateway-1", "gateway-2"}},
				{"denied source: dropped", deniedIP, "203.0.113.100:443", []string{"timeout"}},
				// The denied source is otherwise reachable: the
				// cluster IP has no source ranges.
				{"denied source to the cluster IP", deniedIP, "10.96.0.40:443", []string{"gateway-1", "gateway-2"}},
			} {
				t.Run(row.name, func(t *testing.T) {
					if row.want[0] == "timeout" {
						if got := c.client.DialTCPFrom(row.src, row.target, dropWait); got != "timeout" {
							t.Errorf("%s from %s: got %q, want timeout (dropped)", row.target, row.src, got)
						}
						return
					}
					answers := dials(5, func() string { return c.client.DialTCPFrom(row.src, row.target, answerWait) })
					backends(t, row.target+" from "+row.src, answers, row.want...)
				})
			}
		}},
		{"session affinity", "affinity", func(t *testing.T, c *cluster) {
			pods := []string{"session-1", "session-2", "session-3"}
			t.Run("ClientIP: always the same backend", func(t *testing.T) {
				count, _ := backends(t, "10.96.0.50:80", dials(20, func() string { return c.client.DialTCP("10.96.0.50:80", answerWait) }), pods...)
				if len(count) != 1 {
					t.Errorf("10.96.0.50:80 (ClientIP affinity): answers from %v, want all from one pod", count)
				}
			})
			t.Run("no affinity: spread", func(t *testing.T) {
				count, _ := backends(t, "10.96.0.51:80", dials(20, func() string { return c.client.DialTCP("10.96.0.51:80", answerWait) }), pods...)
				if len(count) < 2 {
					t.Errorf("10.96.0.51:80 (no affinity): answers from %v, want several pods", count)
				}
			})
		}},
		{"externalTrafficPolicy Local", "local", func(t *testing.T, c *cluster) {
			t.Run("local endpoint, client IP kept", func(t *testing.T) {
				target := nodeIP + ":30081"
				_, sources := backends(t, target, dials(10, func() string { return c.client.DialTCP(target, answerWait) }), "ingress-1")
				for s := range sources {
					if s != clientIP {
						t.Errorf("%s: ingress-1 saw client address %s, want the client's own %s", target, s, clientIP)
					}
				}
			})
			t.Run("only remote endpoints: dropped", func(t *testing.T) {
				target := nodeIP + ":30082"
				if got := c.client.DialTCP(target, dropWait); got != "timeout" {
					t.Errorf("%s: got %q, want timeout (dropped, not refused nor forwarded)", target, got)
				}
			})
			t.Run("remote endpoint reachable through the cluster IP", func(t *testing.T) {
				backends(t, "10.96.0.61:80", dials(3, func() string { return c.client.DialTCP("10.96.0.61:80", answerWait) }), "remote-1")
			})
		}},
		{"no endpoints: rejected", "no-endpoints", func(t *testing.T, c *cluster) {
			// Something on node-1 listens on the node port: the reject
			// must come before it, as the port belongs to the Service.
			c.node.Serve(t, "node-1-host", nodeIP+":30070")
			for _, target := range []string{"10.96.0.70:80", nodeIP + ":30070"} {
				t.Run(target, func(t *testing.T) {
					start := time.Now()
					got := c.client.DialTCP(target, refusedWait)
					if got != "refused" {
						t.Errorf("%s: got %q, want refused (rejected) within %v", target, got, refusedWait)
					}
					t.Logf("%s: %s after %v", target, got, time.Since(start).Round(10*time.Microsecond))
				})
			}
		}},
		{"service CIDR guard", "service-cidr-guard", func(t *testing.T, c *cluster) {
			// The upstream holds the guarded addresses and answers on
			// them: what leaves node-1 un-DNATed is answered.
			for _, a := range []string{"10.96.0.130/32", "10.96.0.131/32", "fd00:10:96::130/128", "fd00:10:96::131/128"} {
				c.upstream.AddAddr("lo", a)
			}
			c.upstream.Route("default", "198.18.0.1")
			c.upstream.Route("default", "fd00:198:18::1")
			c.upstream.Serve(t, "upstream", "198.18.0.2:80", "10.96.0.130:81", "10.96.0.131:80", "[fd00:10:96::130]:81", "[fd00:10:96::131]:80")
			// And node-1 listens on port 81 of every address: in the IPVS
			// mode the cluster IPs are node-1's own (on netspec-ipvs0),
			// and without the guard this socket would answer.
			c.node.Serve(t, "node-1-host", "[::]:81")
			if got, want := c.client.DialTCP("198.18.0.2:80", answerWait), "upstream "+clientIP; got != want {
				t.Fatalf("the upstream through node-1: got %q, want %q", got, want)
			}
			for _, src := range []struct {
				name string
				ns   *testnet.NS
				v6   bool
			}{
				{"from another host", c.client, true},
				{"from a pod on the node", c.pods["guard-1"], true},
				{"from the node itself", c.node, true},
			} {
				t.Run(src.name, func(t *testing.T) {
					for _, row := range []struct{ target, want string }{
						{"10.96.0.130:80", "guard-1"},
						{"10.96.0.130:81", "refused"}, // a port the cluster IP does not serve
						{"10.96.0.131:80", "timeout"}, // no Service holds the address
						{"[fd00:10:96::130]:80", "guard-1"},
						{"[fd00:10:96::130]:81", "refused"},
						{"[fd00:10:96::131]:80", "timeout"},
					} {
						wait := map[string]time.Duration{"refused": refusedRetryWait, "timeout": dropWait}[row.want]
						if wait == 0 {
							wait = answerWait
						}
						got := src.ns.DialTCP(row.target, wait)
						if pod, _, _ := strings.Cut(got, " "); pod != row.want {
							t.Errorf("%s: got %q, want %s", row.target, got, row.want)
						}
					}
				})
			}
		}},
		{"node ports only on node-port addresses", "node-port-addresses", func(t *testing.T, c *cluster) {
			// node-1 listens on the node port itself: a connection the
			// rules leave alone reaches this socket.
			const gateway = "10.244.1.152" // shopper-1's, on node-1
			c.node.Serve(t, "node-1-host", nodeIP+":30150", "192.168.11.1:30150", gateway+":30150")
			shopper := c.pods["shopper-1"]
			check := func(t *testing.T, rows []struct {
				from      *testnet.NS
				target    string
				want, why string
			}) {
				t.Helper()
				for _, row := range rows {
					got := row.from.DialTCP(row.target, answerWait)
					if pod, _, _ := strings.Cut(got, " "); pod != row.want {
						t.Errorf("%s from %s (%s): got %q, want an answer from %s", row.target, row.from.Role, row.why, got, row.want)
					}
				}
			}
			t.Run("default: the Node's addresses", func(t *testing.T) {
				check(t, []struct {
					from      *testnet.NS
					target    string
					want, why string
				}{
					{c.client, nodeIP + ":30150", "kiosk-1", "the Node's address"},
					{c.client, "[" + nodeIP6 + "]:30150", "kiosk-1", "the Node's IPv6 address"},
					{shopper, nodeIP + ":30150", "kiosk-1", "the Node's address, from a pod"},
					{c.client, "192.168.11.1:30150", "node-1-host", "a second address on the client's link"},
					{shopper, gateway + ":30150", "node-1-host", "the pod's gateway on the node"},
				})
			})
			t.Run("nodePortAddresses 192.168.11.0/24", func(t *testing.T) {
				file := filepath.Join(c.tree, "cluster.yaml")
				data, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				edited := strings.Replace(string(data), "  podCIDRs:", "  nodePortAddresses: [\"192.168.11.0/24\"]\n  podCIDRs:", 1)
				if edited == string(data) {
					t.Fatal("cluster.yaml has no podCIDRs line to add nodePortAddresses before")
				}
				if err := os.WriteFile(file, []byte(edited), 0o644); err != nil {
					t.Fatal(err)
				}
				c.reinstall(t)
				check(t, []struct {
					from      *testnet.NS
					target    string
					want, why string
				}{
					{c.client, "192.168.11.1:30150", "kiosk-1", "inside nodePortAddresses"},
					{c.client, nodeIP + ":30150", "node-1-host", "the Node's address, outside nodePortAddresses"},
					{c.client, "[" + nodeIP6 + "]:30150", "kiosk-1", "IPv6 has no nodePortAddresses: the Node's address"},
					{shopper, gateway + ":30150", "node-1-host", "the pod's gateway, outside nodePortAddresses"},
				})
			})
		}},
		{"refused before routing", "refuse-before-routing", func(t *testing.T, c *cluster) {
			// node-1's default route leaves by the client's link, to a
			// gateway on the client's subnet (the client itself, which
			// does not forward): a packet to the service CIDR that node-1
			// routed would go back out where it came from, after an ICMP
			// redirect to the client that uses up its ICMP allowance.
			c.node.Route("default", clientIP)
			for _, target := range []string{"10.96.0.140:80", "10.96.0.140:81", "10.96.0.141:80", nodeIP + ":30140"} {
				start := time.Now()
				if got := c.client.DialTCP(target, refusedWait); got != "refused" {
					t.Errorf("%s: got %q, want refused within %v", target, got, refusedWait)
				}
				t.Logf("%s: refused after %v", target, time.Since(start).Round(10*time.Microsecond))
			}
		}},
		{"hairpin", "hairpin", func(t *testing.T, c *cluster) {
			pod := c.pods["echo-1"]
			for i, got := range dials(5, func() string { return pod.DialTCP("10.96.0.80:80", answerWait) }) {
				f := strings.Fields(got)
				if len(f) != 2 || f[0] != "echo-1" {
					t.Errorf("echo-1 to its own Service 10.96.0.80:80, dial %d: got %q, want an answer from echo-1", i, got)
				} else if f[1] == "10.244.1.81" {
					t.Errorf("echo-1 to its own Service, dial %d: it saw itself (%s) as the client; hairpin traffic is masqueraded", i, f[1])
				}
			}
		}},
		{"named targetPort", "named-port", func(t *testing.T, c *cluster) {
			count, _ := backends(t, "10.96.0.90:80", dials(20, func() string { return c.client.DialTCP("10.96.0.90:80", answerWait) }), "web-v1", "web-v2")
			allSeen(t, "10.96.0.90:80", count, 1, "web-v1", "web-v2")
		}},
		{"UDP", "udp", func(t *testing.T, c *cluster) {
			count, _ := backends(t, "UDP 10.96.0.53:53", dials(20, func() string { return c.client.DialUDP("10.96.0.53:53", answerWait) }), "coredns-1", "coredns-2")
			allSeen(t, "UDP 10.96.0.53:53", count, 1, "coredns-1", "coredns-2")
		}},
		{"IPv6", "ipv6", func(t *testing.T, c *cluster) {
			for _, target := range []string{"[fd00:10:96::110]:80", "10.96.0.110:80", "[fd00:10:96::112]:80", "[" + nodeIP6 + "]:30110"} {
				t.Run(target, func(t *testing.T) {
					count, sources := backends(t, target, dials(20, func() string { return c.client.DialTCP(target, answerWait) }), "frontend-1", "frontend-2")
					allSeen(t, target, count, 1, "frontend-1", "frontend-2")
					for s := range sources {
						if is6 := strings.Contains(s, ":"); is6 != strings.HasPrefix(target, "[") {
							t.Errorf("%s: a pod saw client address %s, of the other family", target, s)
						}
					}
				})
			}
		}},
		{"UDP endpoint removal: conntrack entry deleted", "udp-removal", func(t *testing.T, c *cluster) {
			if c.installer == "nft -f" {
				t.Skip("nft -f installs rules only; deleting stale conntrack entries is the applier's job")
			}
			// One client socket (fixed source port): every datagram is
			// one conntrack entry, pinned to the endpoint first picked.
			const src = clientIP + ":40053"
			first := c.client.DialUDPFrom(src, "10.96.0.53:53", answerWait)
			pod, _, _ := strings.Cut(first, " ")
			if pod != "coredns-1" && pod != "coredns-2" {
				t.Fatalf("first datagram: %q", first)
			}
			for range 5 {
				if got := c.client.DialUDPFrom(src, "10.96.0.53:53", answerWait); !strings.HasPrefix(got, pod+" ") {
					t.Fatalf("same socket: answered by %q, then %q: not one conntrack entry", first, got)
				}
			}
			file := map[string]string{"coredns-1": "dns-1.yaml", "coredns-2": "dns-2.yaml"}[pod]
			if err := os.Remove(filepath.Join(c.tree, "udp-removal", file)); err != nil {
				t.Fatal(err)
			}
			c.reinstall(t)
			// The pod still runs and would answer: only a deleted entry
			// sends the next datagram to the endpoint that is left.
			other := map[string]string{"coredns-1": "coredns-2", "coredns-2": "coredns-1"}[pod]
			if got := c.client.DialUDPFrom(src, "10.96.0.53:53", answerWait); !strings.HasPrefix(got, other+" ") {
				t.Errorf("after %s left the service, the same socket got %q, want an answer from %s", pod, got, other)
			}
		}},
		{"endpoint removal", "endpoint-removal", func(t *testing.T, c *cluster) {
			const n = 40
			dial := func() string { return c.client.DialTCP("10.96.0.120:80", answerWait) }
			count, _ := backends(t, "before: 10.96.0.120:80", dials(n, dial), "api-1", "api-2", "api-3")
			allSeen(t, "before: 10.96.0.120:80", count, 1, "api-1", "api-2", "api-3")

			if err := os.Remove(filepath.Join(c.tree, "endpoint-removal", "api-2.yaml")); err != nil {
				t.Fatal(err)
			}
			c.reinstall(t)
			count, _ = backends(t, "after removing api-2: 10.96.0.120:80", dials(n, dial), "api-1", "api-3")
			allSeen(t, "after removing api-2: 10.96.0.120:80", count, 1, "api-1", "api-3")
			// api-2 still runs: only the Service no longer sends to it.
			if got, want := c.client.DialTCP("10.244.1.123:8080", answerWait), "api-2 "+clientIP; got != want {
				t.Errorf("api-2 directly: got %q, want %q", got, want)
			}
		}},
	} {
		for _, in := range installers {
			t.Run(in.name+"/"+tc.name, func(t *testing.T) {
				// Each row has a cluster of its own: on the host the rows
				// run side by side, most of their time waiting for
				// answers and drops. In the VM of applier/vmsuite (one
				// emulated CPU) they stay one after another.
				if !vmtest.InVM() && !rebindsPort[tc.tree] {
					t.Parallel()
				}
				c := newCluster(t, tc.tree, in.install)
				c.installer = in.name
				tc.check(t, c)
			})
		}
	}
}
