package healthcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/internal/testnet"
	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/schema"
)

// The tree of these tests: two nodes, a LoadBalancer edge/gateway with
// policy Local and the explicit health check node port 32100, whose one
// pod runs on podNode, and a LoadBalancer edge/api with policy Local and an
// allocated port, with a ready pod serving two ports and a pod that is not
// ready on node-1 and a ready pod on node-2. With gatewayLocal false,
// edge/gateway has policy Cluster and no health check.
func treeFiles(podNode string, gatewayLocal bool) map[string]string {
	gateway := "  externalTrafficPolicy: Local\n  healthCheckNodePort: 32100\n"
	if !gatewayLocal {
		gateway = ""
	}
	podIP := map[string]string{"node-1": "10.244.1.50", "node-2": "10.244.2.50"}[podNode]
	return map[string]string{
		"cluster.yaml": `apiVersion: netspec.dev/v1alpha1
kind: Cluster
metadata:
  name: hc
spec:
  podCIDRs: ["10.244.0.0/16"]
  loadBalancerIPCIDRs: ["203.0.113.96/28"]
---
apiVersion: v1
kind: Node
metadata:
  name: node-1
status:
  addresses:
  - type: InternalIP
    address: 192.168.10.11
---
apiVersion: v1
kind: Node
metadata:
  name: node-2
status:
  addresses:
  - type: InternalIP
    address: 192.168.20.12
`,
		"gateway.yaml": `apiVersion: v1
kind: Service
metadata:
  name: gateway
  namespace: edge
spec:
  type: LoadBalancer
` + gateway + `  selector:
    app: gateway
  ports:
  - name: https
    port: 443
    targetPort: 8443
status:
  loadBalancer:
    ingress:
    - ip: 203.0.113.100
---
` + pod("gateway-1", "gateway", podNode, podIP, true),
		"api.yaml": `apiVersion: v1
kind: Service
metadata:
  name: api
  namespace: edge
spec:
  type: LoadBalancer
  externalTrafficPolicy: Local
  selector:
    app: api
  ports:
  - name: http
    port: 80
  - name: grpc
    port: 9090
---
` + pod("api-1", "api", "node-1", "10.244.1.60", true) + "---\n" +
			pod("api-2", "api", "node-1", "10.244.1.61", false) + "---\n" +
			pod("api-3", "api", "node-2", "10.244.2.60", true),
	}
}

func pod(name, app, node, ip string, ready bool) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: edge
  labels:
    app: %s
spec:
  nodeName: %s
  containers:
  - name: app
status:
  podIP: %s
  conditions:
  - type: Ready
    status: %q
`, name, app, node, ip, map[bool]string{true: "True", false: "False"}[ready])
}

// compileTree writes files into a directory and compiles the plans of
// node-1 and node-2.
func compileTree(t *testing.T, files map[string]string) map[string]*plan.Plan {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := schema.Load(dir, schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Diags.Errors() > 0 {
		t.Fatal(tr.Diags.Err())
	}
	c := compiler.Validate(tr.Objects, nil, tr)
	if c.Diags.Errors() > 0 {
		t.Fatal(c.Diags.Err())
	}
	plans := map[string]*plan.Plan{}
	for _, n := range []string{"node-1", "node-2"} {
		if plans[n], err = compiler.Compile(tr.Objects, c, n); err != nil {
			t.Fatal(err)
		}
	}
	return plans
}

// healthPort returns the health check node port of a Service of p.
func healthPort(t *testing.T, p *plan.Plan, key string) uint16 {
	t.Helper()
	for _, s := range p.Services {
		if s.Key() == key {
			if s.HealthCheckNodePort == 0 {
				t.Fatalf("%s has no health check node port", key)
			}
			return s.HealthCheckNodePort
		}
	}
	t.Fatalf("no Service %s", key)
	return 0
}

func TestChecks(t *testing.T) {
	plans := compileTree(t, treeFiles("node-1", true))
	api := healthPort(t, plans["node-1"], "edge/api")
	tests := []struct {
		node string
		want []Check
	}{
		// api-1 is counted once for its two ports; api-2 is not ready.
		{"node-1", []Check{{"edge", "api", api, 1}, {"edge", "gateway", 32100, 1}}},
		{"node-2", []Check{{"edge", "api", api, 1}, {"edge", "gateway", 32100, 0}}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, Checks(plans[tt.node])); diff != "" {
			t.Errorf("Checks(%s) (-want +got):\n%s", tt.node, diff)
		}
	}
	if got, want := ListenAddrs(plans["node-2"], nil), []netip.Addr{netip.MustParseAddr("192.168.20.12")}; !slices.Equal(got, want) {
		t.Errorf("ListenAddrs(node-2) = %v, want %v", got, want)
	}
	off := compileTree(t, treeFiles("node-1", false))
	if got := Checks(off["node-1"]); len(got) != 1 || got[0].Name != "api" {
		t.Errorf("Checks with gateway under policy Cluster = %+v, want api's only", got)
	}
}

// answer is a health check's answer.
type answer struct {
	Code int
	Body body
}

type body struct {
	Service struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"service"`
	LocalEndpoints int `json:"localEndpoints"`
}

// get asks http://addr/healthz from inside ns, once; refused is set
// when the connection is refused.
func get(t *testing.T, ns *testnet.NS, addr string) (a answer, refused bool) {
	t.Helper()
	tr := &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, address string) (net.Conn, error) {
			var c net.Conn
			err := ns.Do(func() error {
				var err error
				c, err = (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, address)
				return err
			})
			return c, err
		},
	}
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + addr + "/healthz")
	if err != nil {
		if strings.Contains(err.Error(), "connection refused") {
			return answer{}, true
		}
		t.Fatalf("GET %s from %s: %v", addr, ns, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", addr, err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("GET %s: Content-Type %q, want application/json", addr, ct)
	}
	a.Code = resp.StatusCode
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a.Body); err != nil {
		t.Fatalf("GET %s: body %q: %v", addr, data, err)
	}
	return a, false
}

func wantAnswer(ns, name string, code, n int) answer {
	a := answer{Code: code}
	a.Body.Service.Namespace, a.Body.Service.Name, a.Body.LocalEndpoints = ns, name, n
	return a
}

// TestTwoNodes runs the health server of node-1 and of node-2, each in a
// network namespace of its own with its node's address, and asks both
// from a third namespace, the load balancer's, over HTTP: node-1, which
// has the gateway pod, answers 200 with a count of 1, node-2 503; after
// the pod moves to node-2 the answers follow, without the listeners that
// stay being restarted; a Service that no longer has a health check stops
// answering.
func TestTwoNodes(t *testing.T) {
	testnet.Require(t)
	n := testnet.New(t, "hc")
	lb, node1, node2 := n.NS("lb"), n.NS("node-1"), n.NS("node-2")
	testnet.Link(lb, []string{"192.168.10.1/24"}, node1, []string{"192.168.10.11/24"})
	testnet.Link(lb, []string{"192.168.20.1/24"}, node2, []string{"192.168.20.12/24"})

	plans := compileTree(t, treeFiles("node-1", true))
	api := healthPort(t, plans["node-1"], "edge/api")
	servers := map[string]*Server{
		"node-1": New(Options{NetNSFd: node1.Fd()}),
		"node-2": New(Options{NetNSFd: node2.Fd()}),
	}
	for node, s := range servers {
		t.Cleanup(s.Close)
		s.Sync(plans[node])
		if l, f := s.Stats(); l != 2 || f != 0 {
			t.Fatalf("%s: %d listeners, %d failed; want 2 and 0", node, l, f)
		}
	}
	addr1, addr2 := "192.168.10.11:", "192.168.20.12:"
	check := func(step, addr string, want answer) {
		t.Helper()
		got, refused := get(t, lb, addr)
		if refused {
			t.Errorf("%s: %s refused the connection, want %d", step, addr, want.Code)
			return
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: %s (-want +got):\n%s", step, addr, diff)
		}
	}
	apiPort := fmt.Sprint(api)
	check("pod on node-1", addr1+"32100", wantAnswer("edge", "gateway", 200, 1))
	check("pod on node-1", addr2+"32100", wantAnswer("edge", "gateway", 503, 0))
	check("pod on node-1", addr1+apiPort, wantAnswer("edge", "api", 200, 1))
	check("pod on node-1", addr2+apiPort, wantAnswer("edge", "api", 200, 1))

	// The pod moves to node-2: the counts follow, the listeners stay.
	before := map[string]*listener{}
	for node, s := range servers {
		for key, in := range s.services {
			for a, l := range in.listeners {
				before[node+" "+key+" "+a.String()] = l
			}
		}
	}
	plans = compileTree(t, treeFiles("node-2", true))
	for node, s := range servers {
		s.Sync(plans[node])
	}
	check("pod moved to node-2", addr1+"32100", wantAnswer("edge", "gateway", 503, 0))
	check("pod moved to node-2", addr2+"32100", wantAnswer("edge", "gateway", 200, 1))
	check("pod moved to node-2", addr1+apiPort, wantAnswer("edge", "api", 200, 1))
	for node, s := range servers {
		for key, in := range s.services {
			for a, l := range in.listeners {
				if k := node + " " + key + " " + a.String(); before[k] != l {
					t.Errorf("pod moved: the listener of %s was restarted", k)
				}
			}
		}
	}

	// edge/gateway under policy Cluster has no health check: its port
	// closes on both nodes; edge/api's stays.
	plans = compileTree(t, treeFiles("node-2", false))
	for node, s := range servers {
		s.Sync(plans[node])
		if l, f := s.Stats(); l != 1 || f != 0 {
			t.Errorf("%s after gateway's health check went: %d listeners, %d failed; want 1 and 0", node, l, f)
		}
	}
	for _, addr := range []string{addr1 + "32100", addr2 + "32100"} {
		if a, refused := get(t, lb, addr); !refused {
			t.Errorf("gateway under policy Cluster: %s answered %+v, want the connection refused", addr, a)
		}
	}
	check("gateway under policy Cluster", addr2+apiPort, wantAnswer("edge", "api", 200, 1))
}

// TestBindFailure: a listen address that is not the namespace's cannot be
// bound: the failure is logged and counted, and the next Sync binds it
// once the address is there.
func TestBindFailure(t *testing.T) {
	testnet.Require(t)
	n := testnet.New(t, "hc-bind")
	lb, node := n.NS("lb"), n.NS("node")
	dev, _ := testnet.Link(node, []string{"192.168.20.12/24"}, lb, []string{"192.168.20.1/24"})

	plans := compileTree(t, treeFiles("node-1", true))
	var logs bytes.Buffer
	s := New(Options{NetNSFd: node.Fd(), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	t.Cleanup(s.Close)
	s.Sync(plans["node-1"]) // node-1's address, 192.168.10.11, is not the namespace's
	if l, f := s.Stats(); l != 0 || f != 2 {
		t.Fatalf("%d listeners, %d failed; want 0 and 2", l, f)
	}
	if got := strings.Count(logs.String(), "health check cannot listen"); got != 2 {
		t.Errorf("logged %d bind failures, want 2:\n%s", got, logs.String())
	}
	s.Sync(plans["node-1"])
	if got := strings.Count(logs.String(), "health check cannot listen"); got != 2 {
		t.Errorf("a failure that persists is logged again (%d times):\n%s", got, logs.String())
	}

	node.AddAddr(dev, "192.168.10.11/32")
	lb.MustRun("ip", "route", "add", "192.168.10.11/32", "dev", "eth0")
	s.Sync(plans["node-1"])
	if l, f := s.Stats(); l != 2 || f != 0 {
		t.Fatalf("after the address came: %d listeners, %d failed; want 2 and 0", l, f)
	}
	got, refused := get(t, lb, "192.168.10.11:32100")
	if refused || got.Code != 200 {
		t.Errorf("after the address came: got %+v (refused %v), want 200", got, refused)
	}
}

// TestListenAddrs: the health checks listen where node ports answer: the
// Node's addresses, or the local addresses inside nodePortAddresses in a
// family that has such CIDRs.
func TestListenAddrs(t *testing.T) {
	addrs := func(s ...string) []netip.Addr {
		var out []netip.Addr
		for _, a := range s {
			out = append(out, netip.MustParseAddr(a))
		}
		return out
	}
	prefixes := func(s ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, p := range s {
			out = append(out, netip.MustParsePrefix(p))
		}
		return out
	}
	local := addrs("10.244.1.1", "192.168.10.11", "192.168.11.5", "fd00:10::11", "127.0.0.1")
	tests := []struct {
		name  string
		cidrs []netip.Prefix
		local []netip.Addr
		want  []netip.Addr
	}{
		{name: "Node addresses", local: local, want: addrs("192.168.10.11", "fd00:10::11")},
		{name: "an IPv4 CIDR", cidrs: prefixes("192.168.11.0/24"), local: local, want: addrs("192.168.11.5", "fd00:10::11")},
		{name: "every address", cidrs: prefixes("0.0.0.0/0", "::/0"), local: local, want: addrs("10.244.1.1", "192.168.10.11", "192.168.11.5", "fd00:10::11")},
		{name: "no local addresses known", cidrs: prefixes("192.168.11.0/24"), want: addrs("fd00:10::11")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &plan.Plan{Node: plan.Node{Name: "n", IPs: addrs("192.168.10.11", "fd00:10::11")}}
			p.Cluster.NodePortAddresses = tt.cidrs
			if got := ListenAddrs(p, tt.local); !slices.Equal(got, tt.want) {
				t.Errorf("ListenAddrs = %v, want %v", got, tt.want)
			}
		})
	}
}
