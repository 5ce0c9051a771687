package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Readiness probe timing of every pod: the bound of scenario (a) is
// failureThreshold × periodSeconds + 2 s.
const (
	probePeriod  = 1 // periodSeconds
	probeFailure = 2 // failureThreshold
)

// treeNode is a Node object of a generated tree.
type treeNode struct {
	name, addr, podCIDR string
}

// treePod is a Pod object of a generated tree.
type treePod struct {
	name, nodeName, ip string
	app                app
}

// fleetTree is the tree of the fleet's nodes and pods, with the Services
// of apps.
func (f *fleet) fleetTree() (nodes []treeNode, pods []treePod) {
	for _, n := range f.nodes {
		nodes = append(nodes, treeNode{name: n.name, addr: n.addr, podCIDR: nodePodCIDR(n.n)})
		for _, a := range apps {
			p := n.pods[a.name]
			pods = append(pods, treePod{name: p.name, nodeName: n.name, ip: p.ip, app: a})
		}
	}
	return nodes, pods
}

// writeTree writes a tree of nodes and pods, and the Services of apps,
// into a new directory and returns it. Every pod is Ready with the
// readinessProbe of its app.
func writeTree(t *testing.T, nodes []treeNode, pods []treePod) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: netspec.dev/v1alpha1
kind: Cluster
metadata: {name: e2e}
spec:
  serviceCIDRs: [%q]
  podCIDRs: [%q]
`, serviceCIDR, podCIDR)
	for _, n := range nodes {
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: Node
metadata: {name: %s}
spec: {podCIDRs: [%q]}
status: {addresses: [{type: InternalIP, address: %s}]}
`, n.name, n.podCIDR, n.addr)
	}
	for _, a := range apps {
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: Service
metadata: {name: %[1]s, namespace: fleet}
spec:
  clusterIP: %[2]s
  selector: {app: %[1]s}
  ports: [{name: tcp, port: 80, targetPort: %[3]d}]
`, a.name, a.clusterIP, dataPort)
	}
	for _, p := range pods {
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: fleet, labels: {app: %s}}
spec:
  nodeName: %s
  containers:
  - name: app
    ports: [{name: data, containerPort: %d}, {name: health, containerPort: %d}]
    readinessProbe: {%s, periodSeconds: %d, failureThreshold: %d}
status: {podIP: %s, conditions: [{type: Ready, status: "True"}]}
`, p.name, p.app.name, p.nodeName, dataPort, healthPort, p.app.probe, probePeriod, probeFailure, p.ip)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "fleet.yaml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
