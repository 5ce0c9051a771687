package daemon

// Real packets through a Service while its file is rewritten in two
// steps: a client namespace connects to the cluster IP in a loop, through
// the node namespace the watcher programs, to two pod namespaces, while an
// editor renames the Service's file away and writes the new one later, or
// git checks out or pulls a commit that moves the Service to another
// file. With the removal grace (and the wait for git's index lock) no
// connection fails; without the grace, the Service leaves the kernel in
// between. Every namespace is the test's own and is removed afterwards.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"netspec.dev/netspec/internal/testnet"
)

// trafficCluster is the Cluster (service CIDR 10.96.0.0/12) and node-1
// (192.168.10.11) of the real-packet tests.
const trafficCluster = `apiVersion: netspec.dev/v1alpha1
kind: Cluster
metadata: {name: test}
spec:
  serviceCIDRs: ["10.96.0.0/12"]
  podCIDRs: ["10.244.0.0/16"]
---
apiVersion: v1
kind: Node
metadata: {name: node-1}
status:
  addresses: [{type: InternalIP, address: 192.168.10.11}]
`

const gracePods = `apiVersion: v1
kind: Pod
metadata: {name: p1, namespace: moved, labels: {app: api}}
spec: {nodeName: node-1}
status: {podIP: 10.244.1.11, conditions: [{type: Ready, status: "True"}]}
---
apiVersion: v1
kind: Pod
metadata: {name: p2, namespace: moved, labels: {app: api}}
spec: {nodeName: node-1}
status: {podIP: 10.244.1.21, conditions: [{type: Ready, status: "True"}]}
`

// graceService is the Service api (cluster IP 10.96.0.20) on the ports
// given, each to the pods' 8080.
func graceService(ports ...int) string {
	s := `apiVersion: v1
kind: Service
metadata: {name: api, namespace: moved}
spec:
  clusterIP: 10.96.0.20
  selector: {app: api}
  ports:
`
	for _, p := range ports {
		s += fmt.Sprintf("  - {name: p%d, port: %d, targetPort: 8080}\n", p, p)
	}
	return s
}

// graceRig runs a watcher of tree in a node namespace, with a client
// namespace and two pod namespaces (p1, p2: TCP 8080) linked to it, and
// waits until the client reaches the Service.
func graceRig(t *testing.T, tree string, grace time.Duration) (*running, *testnet.NS) {
	t.Helper()
	testnet.Require(t, "nft")
	r := start(t, tree, Options{Resync: -1, RemovalGrace: grace})
	n := testnet.New(t, "grace")
	client := n.NS("client")
	testnet.Link(client, []string{"192.168.10.100/24"}, r.ns, []string{"192.168.10.11/24"})
	client.Route("default", "192.168.10.11")
	r.ns.Forwarding()
	for name, ip := range map[string]string{"p1": "10.244.1.11", "p2": "10.244.1.21"} {
		gw := strings.TrimSuffix(ip, "1") + "0" // 10.244.1.10, 10.244.1.20: the /31's other half
		pod := n.NS(name)
		testnet.Link(r.ns, []string{gw + "/31"}, pod, []string{ip + "/31"})
		pod.Route("default", gw)
		pod.Serve(t, name, ip+":8080")
	}
	// Both pods must have answered through the Service before a probe
	// loop starts, so that its first connection to either does not wait
	// for the node to resolve the pod's address.
	seen := map[string]bool{}
	waitFor(t, "the client reaching both pods through the Service", func() (bool, string) {
		got := client.DialTCP("10.96.0.20:80", time.Second)
		if name, _, ok := strings.Cut(got, " "); ok && strings.HasPrefix(name, "p") {
			seen[name] = true
		}
		return seen["p1"] && seen["p2"], got
	})
	return r, client
}

// dialLoop connects from a client to a Service in a loop, until stopped
// (or maxDials), and keeps what failed.
type dialLoop struct {
	stop     chan struct{}
	done     chan struct{}
	mu       sync.Mutex
	dials    int
	failures []string
}

// maxDials bounds a probe loop.
const maxDials = 100000

func probeLoop(client *testnet.NS, target string) *dialLoop {
	p := &dialLoop{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for range maxDials {
			select {
			case <-p.stop:
				return
			default:
			}
			got := client.DialTCP(target, time.Second)
			p.mu.Lock()
			p.dials++
			if !strings.HasPrefix(got, "p1 ") && !strings.HasPrefix(got, "p2 ") {
				p.failures = append(p.failures, fmt.Sprintf("%s: %s", time.Now().Format("15:04:05.000"), got))
			}
			p.mu.Unlock()
		}
	}()
	return p
}

// end stops the loop and fails the test if a connection failed.
func (p *dialLoop) end(t *testing.T) {
	t.Helper()
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.failures) > 0 {
		t.Errorf("%d of %d connections to the Service failed while it was rewritten; first: %s", len(p.failures), p.dials, p.failures[0])
	}
	if p.dials == 0 {
		t.Error("no connection was made")
	}
	t.Logf("%d connections, %d failed", p.dials, len(p.failures))
}

// TestRemovalGraceTraffic: an editor renames the Service's file away,
// pauses, and writes the new one (with a second port): the Service
// answers throughout. Without the grace, the Service is gone from the
// kernel in the pause (the probe can see a gap).
func TestRemovalGraceTraffic(t *testing.T) {
	for _, pause := range []time.Duration{50 * time.Millisecond, 500 * time.Millisecond} {
		t.Run(fmt.Sprintf("pause %s", pause), func(t *testing.T) {
			tree := filepath.Join(t.TempDir(), "tree")
			writeFile(t, filepath.Join(tree, "cluster.yaml"), trafficCluster)
			writeFile(t, filepath.Join(tree, "pods.yaml"), gracePods)
			svc := filepath.Join(tree, "svc.yaml")
			writeFile(t, svc, graceService(80))
			// A grace well above the pause: under load, the test's
			// steps may take a while.
			r, client := graceRig(t, tree, 20*time.Second)
			p := probeLoop(client, "10.96.0.20:80")
			if err := os.Rename(svc, svc+"~"); err != nil {
				t.Fatal(err)
			}
			r.statusUntil(t, "the removal held", pendingIs(1))
			// The sync that lacked the file is done: the Service answers.
			if got := client.DialTCP("10.96.0.20:80", time.Second); !strings.HasPrefix(got, "p") {
				t.Errorf("while its file is away, the Service: %s", got)
			}
			time.Sleep(pause) // the editor's pause, not a wait for the daemon
			writeFile(t, svc, graceService(80, 81))
			r.nftHas(t, "10.96.0.20 . tcp . 81 : goto service-")
			r.statusUntil(t, "no removal pending", pendingIs(0))
			p.end(t)
			if got := client.DialTCP("10.96.0.20:81", time.Second); !strings.HasPrefix(got, "p") {
				t.Errorf("the new port: %s", got)
			}
		})
	}
	t.Run("without grace", func(t *testing.T) {
		tree := filepath.Join(t.TempDir(), "tree")
		writeFile(t, filepath.Join(tree, "cluster.yaml"), trafficCluster)
		writeFile(t, filepath.Join(tree, "pods.yaml"), gracePods)
		svc := filepath.Join(tree, "svc.yaml")
		writeFile(t, svc, graceService(80))
		r, client := graceRig(t, tree, -1)
		if err := os.Rename(svc, svc+"~"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the Service gone from the kernel", func() (bool, string) {
			got := r.nft(t)
			return !strings.Contains(got, "10.96.0.20"), got
		})
		if got := client.DialTCP("10.96.0.20:80", time.Second); strings.HasPrefix(got, "p") {
			t.Errorf("with the Service gone from the kernel, a connection still went through: %s", got)
		}
	})
}

// TestGitCheckoutTraffic: git checks out, or pulls, a commit that moves
// the Service to another file (and adds a port) in place: the Service
// answers throughout, and the revision applied at the end is the commit,
// clean.
func TestGitCheckoutTraffic(t *testing.T) {
	gitBin(t)
	tests := []struct {
		name string
		// setup makes the tree at commit A in dir and returns it, and
		// the function that moves it to commit B and returns B.
		setup func(t *testing.T, dir string) (tree string, update func() string)
	}{{
		name: "checkout",
		setup: func(t *testing.T, dir string) (string, func() string) {
			tree := filepath.Join(dir, "tree")
			commitA(t, tree)
			git(t, tree, "checkout", "-q", "-b", "next")
			commitB(t, tree)
			git(t, tree, "checkout", "-q", "main")
			return tree, func() string {
				git(t, tree, "checkout", "-q", "next")
				return git(t, tree, "rev-parse", "HEAD")
			}
		},
	}, {
		name: "pull",
		setup: func(t *testing.T, dir string) (string, func() string) {
			src, tree := filepath.Join(dir, "src"), filepath.Join(dir, "tree")
			commitA(t, src)
			git(t, dir, "clone", "-q", src, tree)
			return tree, func() string {
				commitB(t, src)
				git(t, tree, "pull", "-q", "--ff-only")
				return git(t, tree, "rev-parse", "HEAD")
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tree, update := tt.setup(t, t.TempDir())
			r, client := graceRig(t, tree, 0)
			p := probeLoop(client, "10.96.0.20:80")
			b := update()
			r.nftHas(t, "10.96.0.20 . tcp . 81 : goto service-")
			r.statusUntil(t, "commit "+b+" applied, clean, no removal pending", func(s *Status) bool {
				return s.Revision != nil && s.Revision.ID == b && !s.Revision.Dirty && s.PendingRemoval == nil && s.GitLock == nil
			})
			p.end(t)
		})
	}
}

// commitA makes a repository at dir, branch main, whose commit has the
// Service api in a.yaml.
func commitA(t *testing.T, dir string) {
	t.Helper()
	writeFile(t, filepath.Join(dir, "cluster.yaml"), trafficCluster)
	writeFile(t, filepath.Join(dir, "pods.yaml"), gracePods)
	writeFile(t, filepath.Join(dir, "a.yaml"), graceService(80))
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "add", ".")
	git(t, dir, "commit", "-q", "-m", "A")
}

// commitB commits, in the repository at dir, the Service moved from
// a.yaml to b.yaml with a second port.
func commitB(t *testing.T, dir string) {
	t.Helper()
	git(t, dir, "rm", "-q", "a.yaml")
	writeFile(t, filepath.Join(dir, "b.yaml"), graceService(80, 81))
	git(t, dir, "add", "b.yaml")
	git(t, dir, "commit", "-q", "-m", "B: the Service moves to b.yaml")
}
