// Package gentree writes large, realistic, valid netspec trees: one Cluster
// object, Nodes, and per namespace one file per Service holding the Service
// and the Pods it selects. Benchmarks and tests use it to get trees of any
// size in-process; `go run ./internal/gen` is its command-line front end.
//
// The output is a pure function of the Config: two calls with the same
// Config write byte-identical trees.
package gentree

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
)

// Config says how big a tree to write. Zero values of Namespaces and Nodes
// take the defaults below.
type Config struct {
	Services       int   // Services to write, named svc-1..svc-N
	PodsPerService int   // Pods selected by each Service
	Namespaces     int   // namespaces ns-1..ns-K, one directory each; 0: DefaultNamespaces
	Nodes          int   // nodes node-1..node-M; 0: DefaultNodes
	Seed           int64 // seeds the choices that vary (node of a pod, ports, names)
	// ReadinessProbes gives each pod's container a readinessProbe
	// (tcpSocket on its first port, by name).
	ReadinessProbes bool
}

// Defaults for zero Config fields.
const (
	DefaultNamespaces = 10
	DefaultNodes      = 20
)

// Limits that keep generated addresses valid and unique.
const (
	// MaxNodes is the most nodes Write will number: node addresses are
	// 192.168.0.0/16 minus the .0 and .255 addresses of each /24.
	MaxNodes = 256 * 254
	// MaxPods is the most pods Write will number: pod IPs are counted up
	// from 10.244.0.1 inside 10.244.0.0/14, skipping .0 and .255.
	MaxPods = 1024 * 254
)

var zones = []string{"zone-a", "zone-b", "zone-c"}

func (c Config) withDefaults() Config {
	if c.Namespaces == 0 {
		c.Namespaces = DefaultNamespaces
	}
	if c.Nodes == 0 {
		c.Nodes = DefaultNodes
	}
	return c
}

func (c Config) check() error {
	switch {
	case c.Services < 0:
		return errors.New("gentree: Services is negative")
	case c.PodsPerService < 0:
		return errors.New("gentree: PodsPerService is negative")
	case c.Namespaces < 0:
		return errors.New("gentree: Namespaces is negative")
	case c.Nodes < 0 || c.Nodes > MaxNodes:
		return fmt.Errorf("gentree: Nodes must be 1..%d", MaxNodes)
	case c.Services*c.PodsPerService > MaxPods:
		return fmt.Errorf("gentree: at most %d pods (Services*PodsPerService)", MaxPods)
	}
	return nil
}

// ServiceFile returns the slash path, relative to the tree root, of the file
// that holds Service i (1-based) and its pods.
func ServiceFile(cfg Config, i int) string {
	cfg = cfg.withDefaults()
	return fmt.Sprintf("%s/svc-%d.yaml", namespace(cfg, i), i)
}

func namespace(cfg Config, i int) string {
	return "ns-" + strconv.Itoa((i-1)%cfg.Namespaces+1)
}

// Write writes the tree for cfg into dir, which must be empty or not exist.
func Write(dir string, cfg Config) error {
	cfg = cfg.withDefaults()
	if err := cfg.check(); err != nil {
		return err
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return fmt.Errorf("gentree: %s is not empty", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for ns := 1; ns <= min(cfg.Namespaces, cfg.Services); ns++ {
		if err := os.Mkdir(filepath.Join(dir, "ns-"+strconv.Itoa(ns)), 0o755); err != nil {
			return err
		}
	}
	var b bytes.Buffer
	writeCluster(&b)
	if err := os.WriteFile(filepath.Join(dir, "cluster.yaml"), b.Bytes(), 0o644); err != nil {
		return err
	}
	b.Reset()
	writeNodes(&b, cfg)
	if err := os.WriteFile(filepath.Join(dir, "nodes.yaml"), b.Bytes(), 0o644); err != nil {
		return err
	}
	g := &gen{cfg: cfg, rng: rand.New(rand.NewPCG(uint64(cfg.Seed), 0x6e657473706563))}
	for i := 1; i <= cfg.Services; i++ {
		b.Reset()
		g.service(&b, i)
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(ServiceFile(cfg, i))), b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func writeCluster(b *bytes.Buffer) {
	b.WriteString(`apiVersion: netspec.dev/v1alpha1
kind: Cluster
metadata:
  name: bench
spec:
  serviceCIDRs: ["10.96.0.0/12"]
  nodePortRange: "30000-32767"
  clusterDomain: cluster.local
  podCIDRs: ["10.244.0.0/14"]
`)
}

// nodeIP returns the InternalIP of node n (1-based): 192.168.0.1 upwards,
// never a .0 or .255 address.
func nodeIP(n int) string {
	n--
	return fmt.Sprintf("192.168.%d.%d", n/254, n%254+1)
}

// podIP returns the IP of pod k (0-based, counted over the whole tree):
// 10.244.0.1 upwards, never a .0 or .255 address, so never loopback,
// link-local or a network/broadcast address.
func podIP(k int) string {
	q := k / 254
	return fmt.Sprintf("10.%d.%d.%d", 244+q/256, q%256, k%254+1)
}

func writeNodes(b *bytes.Buffer, cfg Config) {
	for n := 1; n <= cfg.Nodes; n++ {
		if n > 1 {
			b.WriteString("---\n")
		}
		name := "node-" + strconv.Itoa(n)
		fmt.Fprintf(b, `apiVersion: v1
kind: Node
metadata:
  name: %s
  labels:
    kubernetes.io/hostname: %s
    kubernetes.io/os: linux
    topology.kubernetes.io/zone: %s
status:
  addresses:
  - type: InternalIP
    address: %s
  - type: Hostname
    address: %s
`, name, name, zones[(n-1)%len(zones)], nodeIP(n), name)
	}
}

type gen struct {
	cfg  Config
	rng  *rand.Rand
	pods int // pods written so far, for unique pod IPs
}

type port struct {
	name      string
	proto     string
	port      int
	container int
}

const alnum = "bcdfghjklmnpqrstvwxz2456789" // as Kubernetes' rand.String

func (g *gen) suffix(n int) string {
	s := make([]byte, n)
	for i := range s {
		s[i] = alnum[g.rng.IntN(len(alnum))]
	}
	return string(s)
}

func (g *gen) service(b *bytes.Buffer, i int) {
	cfg := g.cfg
	name := "svc-" + strconv.Itoa(i)
	ns := namespace(cfg, i)
	ports := []port{{name: "http", proto: "TCP", port: 80, container: 8080}}
	switch g.rng.IntN(4) {
	case 0:
		ports = append(ports, port{name: "metrics", proto: "TCP", port: 9090, container: 9090})
	case 1:
		ports = append(ports, port{name: "grpc", proto: "TCP", port: 9000, container: 50051})
	case 2:
		if i%3 == 0 {
			ports = append(ports, port{name: "dns", proto: "UDP", port: 53, container: 5353})
		}
	}
	// Every 10th service is a NodePort, up to a thousand of them: the
	// default node port range holds 2,768 ports and some services have two.
	typ := "ClusterIP"
	if i%10 == 0 && i < 10000 {
		typ = "NodePort"
	}
	team := "team-" + strconv.Itoa(g.rng.IntN(12)+1)
	version := fmt.Sprintf("1.%d.%d", g.rng.IntN(20), g.rng.IntN(10))

	fmt.Fprintf(b, `# Generated by netspec's internal/gen; do not edit.
apiVersion: v1
kind: Service
metadata:
  name: %s
  namespace: %s
  labels:
    app: %s
    team: %s
  annotations:
    netspec.dev/owner: %s@example.com
spec:
  type: %s
  selector:
    app: %s
  ports:
`, name, ns, name, team, team, typ, name)
	for _, p := range ports {
		fmt.Fprintf(b, "  - name: %s\n    protocol: %s\n    port: %d\n    targetPort: %s\n", p.name, p.proto, p.port, p.name)
	}

	hash := g.suffix(10)
	for k := 0; k < cfg.PodsPerService; k++ {
		ip := podIP(g.pods)
		g.pods++
		node := "node-" + strconv.Itoa(g.rng.IntN(cfg.Nodes)+1)
		fmt.Fprintf(b, `---
apiVersion: v1
kind: Pod
metadata:
  name: %s-%s-%s
  namespace: %s
  labels:
    app: %s
    team: %s
    pod-template-hash: "%s"
spec:
  nodeName: %s
  containers:
  - name: app
    image: registry.example.com/%s/%s:%s
    ports:
`, name, hash, g.suffix(5), ns, name, team, hash, node, team, name, version)
		for _, p := range ports {
			fmt.Fprintf(b, "    - name: %s\n      containerPort: %d\n      protocol: %s\n", p.name, p.container, p.proto)
		}
		if cfg.ReadinessProbes {
			fmt.Fprintf(b, "    readinessProbe:\n      tcpSocket: {port: %s}\n", ports[0].name)
		}
		fmt.Fprintf(b, `status:
  phase: Running
  podIP: %s
  podIPs:
  - ip: %s
  conditions:
  - type: Ready
    status: "True"
`, ip, ip)
	}
}
