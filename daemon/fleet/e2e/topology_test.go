package e2e

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"netspec.dev/netspec/internal/testnet"
)

// The fleet's addresses: TEST-NET-1 for the lan, the kubeadm defaults for
// pods and Services.
const (
	serviceCIDR = "10.96.0.0/12"
	podCIDR     = "10.244.0.0/16"
	dataPort    = 8080 // every pod's line server: "POD CLIENT-IP"
	healthPort  = 8081 // every pod's HTTP health server, GET /healthz
)

// apps are the Services of the fleet, one pod of each on every node:
// web's pods are probed with httpGet, echo's with tcpSocket.
var apps = []app{
	{name: "web", clusterIP: "10.96.0.10", host: 10, probe: "httpGet: {path: /healthz, port: 8081}"},
	{name: "echo", clusterIP: "10.96.0.11", host: 20, probe: "tcpSocket: {port: 8080}"},
}

// app is a Service and its pods.
type app struct {
	name      string
	clusterIP string
	host      byte   // the pods' last address byte (the node's side of the pod link is host+1)
	probe     string // the pods' readinessProbe action, as YAML flow
}

// target is the Service's cluster IP and port.
func (a app) target() string { return a.clusterIP + ":80" }

// fleet is a test's topology: the lan, the nodes and their pods.
type fleet struct {
	t     *testing.T
	net   *testnet.Net
	lan   *testnet.NS
	nodes []*node
	// tree is the fleet's tree and key its gossip key file, once
	// startAgents wrote them.
	tree, key string
}

// node is one node namespace with its pods.
type node struct {
	name string
	n    int // 1-based: node-N, 192.0.2.N, 10.244.N.0/24
	ns   *testnet.NS
	// addr is its lan address, port its veth's end in the lan namespace
	// (on the bridge): down cuts the node off.
	addr string
	port string
	pods map[string]*pod // by app name
	// agent is its netspec watch, once started.
	agent *agent
}

// pod is a pod namespace behind its node, with its servers.
type pod struct {
	name string // APP-N
	app  app
	node *node
	ns   *testnet.NS
	ip   string
	srv  *podServer
}

// nodePodCIDR is node n's pod CIDR, as its Node object says.
func nodePodCIDR(n int) string { return fmt.Sprintf("10.244.%d.0/24", n) }

// newFleet builds size nodes behind a bridge, each with one pod of every
// app, routes between them, and starts every pod's servers. Everything
// goes when the test ends.
func newFleet(t *testing.T, size int) *fleet {
	t.Helper()
	testnet.Require(t, "nft")
	f := &fleet{t: t, net: testnet.New(t, "fleet")}
	f.lan = f.net.NS("lan")
	f.lan.IP("link add br0 type bridge", "link set br0 up")
	for i := 1; i <= size; i++ {
		f.nodes = append(f.nodes, f.addNode(i))
	}
	// Every node routes every other node's pods through that node.
	for _, a := range f.nodes {
		var cmds []string
		for _, b := range f.nodes {
			if a != b {
				cmds = append(cmds, "route replace "+nodePodCIDR(b.n)+" via "+b.addr)
			}
		}
		a.ns.IP(cmds...)
	}
	return f
}

// addNode makes node n: its namespace on the lan, a route for the
// Service CIDR (so that a client there picks its lan address, as a node's
// default route would), forwarding, and its pods.
func (f *fleet) addNode(n int) *node {
	f.t.Helper()
	nd := &node{name: fmt.Sprintf("node-%d", n), n: n, addr: fmt.Sprintf("192.0.2.%d", n), pods: map[string]*pod{}}
	nd.ns, nd.port = f.addLanHost(nd.name, nd.addr)
	nd.ns.IP("route add " + serviceCIDR + " dev eth0")
	nd.ns.Forwarding()
	for _, a := range apps {
		p := &pod{name: fmt.Sprintf("%s-%d", a.name, n), app: a, node: nd, ip: fmt.Sprintf("10.244.%d.%d", n, a.host)}
		gw := fmt.Sprintf("10.244.%d.%d", n, a.host+1)
		p.ns = f.net.NS(p.name)
		testnet.Link(nd.ns, []string{gw + "/31"}, p.ns, []string{p.ip + "/31"})
		p.ns.Route("default", gw)
		p.srv = servePod(f.t, p.ns, p.name, p.ip)
		nd.pods[a.name] = p
	}
	return nd
}

// addLanHost makes a namespace for role with address addr on the lan
// (its eth0), and returns it with the name of its port on the bridge.
func (f *fleet) addLanHost(role, addr string) (ns *testnet.NS, port string) {
	f.t.Helper()
	ns = f.net.NS(role)
	dev, port := testnet.Link(ns, []string{addr + "/24"}, f.lan, nil)
	if dev != "eth0" {
		f.t.Fatalf("%s: lan device %s, want eth0 (the first link)", role, dev)
	}
	f.lan.IP("link set " + port + " master br0")
	return ns, port
}

// node returns node-n.
func (f *fleet) node(n int) *node { return f.nodes[n-1] }

// others returns the nodes but those given.
func (f *fleet) others(but ...*node) []*node {
	var out []*node
	for _, n := range f.nodes {
		skip := false
		for _, b := range but {
			skip = skip || n == b
		}
		if !skip {
			out = append(out, n)
		}
	}
	return out
}

// setLink sets node n's port on the bridge up or down: down cuts it off
// the lan as a pulled cable would (its own links stay up).
func (f *fleet) setLink(n *node, up bool) {
	f.t.Helper()
	state := "down"
	if up {
		state = "up"
	}
	f.lan.IP("link set " + n.port + " " + state)
}

// podServer is a pod's servers: the line server on dataPort (which the
// tcpSocket probe connects to too) and the HTTP health server on
// healthPort. Both stop together; the health server can fail for some
// clients only.
type podServer struct {
	name string
	mu   sync.Mutex
	stop func() // nil once stopped
	// sickFor, when set, is the prefix of the clients that GET /healthz
	// answers 503; the others get 200.
	sickFor atomic.Pointer[netip.Prefix]
}

// servePod starts the servers of pod name on ip inside ns; they stop when
// the test ends at the latest.
func servePod(t *testing.T, ns *testnet.NS, name, ip string) *podServer {
	t.Helper()
	s := &podServer{name: name}
	var data, health net.Listener
	err := ns.Do(func() error {
		var err error
		if data, err = net.Listen("tcp", net.JoinHostPort(ip, fmt.Sprint(dataPort))); err != nil {
			return err
		}
		health, err = net.Listen("tcp", net.JoinHostPort(ip, fmt.Sprint(healthPort)))
		return err
	})
	if err != nil {
		t.Fatalf("pod %s: listen: %v", name, err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(s.healthz), ReadHeaderTimeout: 5 * time.Second}
	var wg sync.WaitGroup
	wg.Go(func() { testnet.ServeLines(data, name) })
	wg.Go(func() { hs.Serve(health) })
	s.stop = func() {
		data.Close()
		hs.Close()
		wg.Wait()
	}
	t.Cleanup(s.Stop)
	return s
}

// Stop closes both servers: connections to the pod are refused from now.
func (s *podServer) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop != nil {
		s.stop()
		s.stop = nil
	}
}

// SickFor makes GET /healthz answer 503 to clients inside p (and 200 to
// the others): a pod that only some nodes see failing.
func (s *podServer) SickFor(p netip.Prefix) { s.sickFor.Store(&p) }

func (s *podServer) healthz(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/healthz" {
		http.NotFound(w, r)
		return
	}
	if p := s.sickFor.Load(); p != nil {
		if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil && p.Contains(ap.Addr().Unmap()) {
			http.Error(w, "sick for "+p.String(), http.StatusServiceUnavailable)
			return
		}
	}
	fmt.Fprintln(w, "ok", s.name)
}
