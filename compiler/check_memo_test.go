package compiler

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"netspec.dev/netspec/internal/diag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"netspec.dev/netspec/internal/cache"
	"netspec.dev/netspec/internal/gen/gentree"
	"netspec.dev/netspec/schema"
)

// memoTree is a tree on disk loaded as the watcher loads it: through an
// in-memory cache, so that the objects of unchanged files are the same
// pointers from load to load.
type memoTree struct {
	t    testing.TB
	root string
	mem  *cache.Memory
}

func newMemoTree(t testing.TB) *memoTree {
	return &memoTree{t: t, root: filepath.Join(t.TempDir(), "tree"), mem: cache.NewMemory()}
}

func (tr *memoTree) path(rel string) string { return filepath.Join(tr.root, filepath.FromSlash(rel)) }

func (tr *memoTree) load() *schema.Tree {
	tr.t.Helper()
	t, err := schema.Load(tr.root, schema.Options{Cache: tr.mem})
	if err != nil {
		tr.t.Fatal(err)
	}
	tr.mem.Sweep()
	return t
}

// put writes a file of the tree, creating its directory.
func (tr *memoTree) put(rel, content string) {
	tr.t.Helper()
	p := tr.path(rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tr.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		tr.t.Fatal(err)
	}
}

func (tr *memoTree) rm(rel string) {
	tr.t.Helper()
	if err := os.Remove(tr.path(rel)); err != nil {
		tr.t.Fatal(err)
	}
}

// edit replaces the first from in a file by to.
func (tr *memoTree) edit(rel, from, to string) { tr.editNth(rel, from, to, 1) }

// editNth replaces the nth from in a file by to.
func (tr *memoTree) editNth(rel, from, to string, n int) {
	tr.t.Helper()
	data, err := os.ReadFile(tr.path(rel))
	if err != nil {
		tr.t.Fatal(err)
	}
	s, i := string(data), -len(from)
	for range n {
		j := strings.Index(s[i+len(from):], from)
		if j < 0 {
			tr.t.Fatalf("%s has fewer than %d %q", rel, n, from)
		}
		i += len(from) + j
	}
	tr.put(rel, s[:i]+to+s[i+len(from):])
}

// checkedDiff describes how got, a memo's result for objs, differs from
// want, a fresh Validate's: "" when they are the same.
func checkedDiff(objs []*schema.Object, got, want *Checked) string {
	var b strings.Builder
	if !reflect.DeepEqual(got.Cluster, want.Cluster) {
		fmt.Fprintf(&b, "cluster %+v, want %+v\n", got.Cluster, want.Cluster)
	}
	diagKeys := func(c *Checked) []string {
		var out []string
		for _, d := range c.Diags {
			out = append(out, fmt.Sprintf("%s %s %v: %s", d.Pos, d.Path, d.Severity, d.Msg))
		}
		slices.Sort(out)
		return out
	}
	if g, w := diagKeys(got), diagKeys(want); !slices.Equal(g, w) {
		fmt.Fprintf(&b, "diagnostics\n  %s\nwant\n  %s\n", strings.Join(g, "\n  "), strings.Join(w, "\n  "))
	}
	if g, w := got.Alloc.Services(), want.Alloc.Services(); !reflect.DeepEqual(g, w) {
		fmt.Fprintf(&b, "allocations\n  %v\nwant\n  %v\n", g, w)
	}
	for _, s := range want.Alloc.Services() {
		if g, ok := got.Alloc.Service(s.Namespace, s.Name); !ok || !reflect.DeepEqual(g, s) {
			fmt.Fprintf(&b, "allocation of %s: %v, want %v\n", s.Key(), g, s)
		}
	}
	podNames := func(pods []*schema.Pod) string {
		var s []string
		for _, p := range pods {
			s = append(s, fmt.Sprintf("%s/%s@%p", p.Metadata.Namespace, p.Metadata.Name, p))
		}
		return strings.Join(s, " ")
	}
	for _, o := range objs {
		if o.Service == nil {
			continue
		}
		if g, w := got.pods.servicePods(o.Service), want.pods.servicePods(o.Service); !slices.Equal(g, w) {
			fmt.Fprintf(&b, "pods of %s: [%s], want [%s]\n", objKey(o), podNames(g), podNames(w))
		}
	}
	if g, w := slices.Collect(maps.Keys(got.pods.selected)), slices.Collect(maps.Keys(want.pods.selected)); len(g) != len(w) {
		fmt.Fprintf(&b, "%d Services remembered, want %d\n", len(g), len(w))
	}
	if len(got.pods.byLabel) != len(want.pods.byLabel) {
		fmt.Fprintf(&b, "%d labels indexed, want %d\n", len(got.pods.byLabel), len(want.pods.byLabel))
	}
	entryPods := func(l []podEntry) []*schema.Pod {
		var out []*schema.Pod
		for _, e := range l {
			out = append(out, e.pod)
		}
		return out
	}
	for k, w := range want.pods.byLabel {
		if g := entryPods(got.pods.byLabel[k]); !slices.Equal(g, entryPods(w)) {
			fmt.Fprintf(&b, "pods of label %v: [%s], want [%s]\n", k, podNames(g), podNames(entryPods(w)))
		}
	}
	return b.String()
}

// checkMemoStep validates objs with m and afresh and fails t if the two
// differ.
func checkMemoStep(t *testing.T, m *Memo, objs []*schema.Object, lock *Lock, loc Locator) *Checked {
	t.Helper()
	want := Validate(objs, lock, loc)
	got := m.Validate(objs, lock, loc)
	if d := checkedDiff(objs, got, want); d != "" {
		t.Fatalf("the memo's result differs from a fresh Validate:\n%s", d)
	}
	return want
}

func mustLock(t *testing.T, text string) *Lock {
	t.Helper()
	l, err := ParseLock([]byte("version: 1\nservices:\n" + text))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestCheckMemoEdits edits a generated tree step by step, as a watcher
// sees it, and checks after every step that one Memo kept across the
// steps validates as a fresh Validate does: the same findings, the same
// allocations, the same pods per Service.
func TestCheckMemoEdits(t *testing.T) {
	tr := newMemoTree(t)
	cfg := gentree.Config{Services: 12, PodsPerService: 2, Namespaces: 3, Nodes: 3, Seed: 1}
	if err := gentree.Write(tr.root, cfg); err != nil {
		t.Fatal(err)
	}
	svc := func(i int) string { return gentree.ServiceFile(cfg, i) } // in ns-((i-1)%3+1)
	var lock *Lock
	steps := []struct {
		name   string
		change func()
		want   string // a finding of the step, if any
	}{
		{"first", func() {}, ""},
		{"unchanged", func() {}, ""},
		{"container port", func() { tr.edit(svc(1), "containerPort: 8080", "containerPort: 8081") }, ""},
		{"pod label leaves the selector", func() { tr.editNth(svc(2), "app: svc-2\n", "app: gone\n", 3) }, ""},
		{"other pod leaves too", func() { tr.editNth(svc(2), "app: svc-2\n", "app: gone\n", 3) }, "matches no Pod in namespace ns-2"},
		{"selector picks another service's pods", func() { tr.edit(svc(3), "  selector:\n    app: svc-3", "  selector:\n    app: svc-6") }, ""},
		{"selector of two labels", func() {
			tr.edit(svc(3), "  selector:\n    app: svc-6", "  selector:\n    app: svc-6\n    team: nobody")
		}, "matches no Pod in namespace ns-3"},
		{"service removed", func() { tr.rm(svc(5)) }, ""},
		{"service added", func() {
			data, _ := os.ReadFile(tr.path(svc(7)))
			tr.put("ns-1/copy.yaml", strings.ReplaceAll(string(data), "svc-7", "svc-copy"))
		}, ""},
		{"duplicate service name", func() {
			data, _ := os.ReadFile(tr.path(svc(7)))
			tr.put("ns-1/aaa-dup.yaml", strings.ReplaceAll(string(data), "name: svc-7-", "name: dup-svc-7-"))
		}, "Service ns-1/svc-7 is already defined at ns-1/aaa-dup.yaml"},
		{"duplicate removed", func() { tr.rm("ns-1/aaa-dup.yaml") }, ""},
		{"duplicate after the original", func() {
			data, _ := os.ReadFile(tr.path(svc(7)))
			tr.put("ns-1/zzz-dup.yaml", strings.ReplaceAll(string(data), "name: svc-7-", "name: dup-svc-7-"))
		}, "Service ns-1/svc-7 is already defined at ns-1/svc-7.yaml"},
		{"explicit cluster IP", func() { tr.edit(svc(8), "type: ClusterIP", "type: ClusterIP\n  clusterIP: 10.96.0.10") }, ""},
		{"conflicting cluster IP", func() { tr.edit(svc(9), "type: ClusterIP", "type: ClusterIP\n  clusterIP: 10.96.0.10") }, "10.96.0.10 is already the cluster IP of ns-2/svc-8"},
		{"cluster IP outside the CIDR", func() { tr.edit(svc(11), "type: ClusterIP", "type: ClusterIP\n  clusterIP: 10.200.0.1") }, "10.200.0.1 is outside the IPv4 service CIDR"},
		{"explicit node port", func() {
			tr.edit(svc(10), "  ports:\n  - name: http\n    protocol: TCP\n    port: 80\n", "  ports:\n  - name: http\n    protocol: TCP\n    port: 80\n    nodePort: 30100\n")
		}, ""},
		{"conflicting node port", func() {
			tr.edit(svc(4), "type: ClusterIP", "type: NodePort")
			tr.edit(svc(4), "  ports:\n  - name: http\n    protocol: TCP\n    port: 80\n", "  ports:\n  - name: http\n    protocol: TCP\n    port: 80\n    nodePort: 30100\n")
		}, "30100/TCP is already a node port of ns-1/svc-10"},
		{"node port outside the range", func() { tr.edit(svc(4), "nodePort: 30100", "nodePort: 40000") }, "40000 is outside the cluster's node port range"},
		{"external IP not allowed", func() { tr.edit(svc(6), "type: ClusterIP", "type: ClusterIP\n  externalIPs: [\"203.0.113.9\"]") }, "203.0.113.9 is not inside any externalIPCIDRs"},
		{"external IPs allowed", func() { tr.edit("cluster.yaml", `podCIDRs:`, `externalIPCIDRs: ["203.0.113.0/24"]`+"\n  podCIDRs:") }, ""},
		{"pod with a service's external IP", func() {
			tr.put("ns-3/pod.yaml", podFile("p1", "ns-3", "svc-6", "203.0.113.9"))
		}, "203.0.113.9 is an external IP of ns-3/svc-6"},
		{"pod with a cluster IP", func() { tr.edit("ns-3/pod.yaml", "203.0.113.9", "10.96.0.10") }, "10.96.0.10 is the cluster IP of ns-2/svc-8"},
		{"pod added to a selector", func() {
			tr.put("ns-1/pod2.yaml", podFile("p2", "ns-1", "svc-1", "10.244.9.9"))
		}, ""},
		{"pod removed", func() { tr.rm("ns-1/pod2.yaml") }, ""},
		{"pod with another pod's IP", func() {
			tr.put("ns-1/pod2.yaml", podFile("p2", "ns-1", "svc-1", "10.244.0.1"))
		}, "10.244.0.1 is also the IP of Pod ns-1/p2"},
		{"the first of the two removed", func() { tr.rm("ns-1/pod2.yaml") }, ""},
		{"pod on a node the tree lacks", func() {
			tr.put("ns-1/pod2.yaml", strings.Replace(podFile("p2", "ns-1", "svc-1", "10.244.9.9"), "node-1", "node-9", 1))
		}, `no Node node-9 in the tree`},
		{"that node added, its pod IP outside its podCIDRs", func() {
			tr.put("node-9.yaml", "apiVersion: v1\nkind: Node\nmetadata: {name: node-9}\nspec: {podCIDRs: [10.250.0.0/24]}\n")
		}, "10.244.9.9 is outside the podCIDRs of its Node node-9 (10.250.0.0/24)"},
		{"the node's podCIDRs hold it", func() { tr.edit("node-9.yaml", "10.250.0.0/24", "10.244.9.0/24") }, ""},
		{"selected pod not ready", func() { tr.edit("ns-1/pod2.yaml", `status: "True"`, `status: "False"`) }, "Pod ns-1/p2 is not Ready"},
		{"selected pod has finished", func() { tr.edit("ns-1/pod2.yaml", "status:\n", "status:\n  phase: Succeeded\n") }, "Pod ns-1/p2 has finished"},
		{"the node removed", func() { tr.rm("node-9.yaml") }, `no Node node-9 in the tree`},
		{"the pod removed", func() { tr.rm("ns-1/pod2.yaml") }, ""},
		{"cluster IP freed", func() { tr.edit(svc(8), "\n  clusterIP: 10.96.0.10", "") }, ""},
		{"manual endpoints", func() { tr.put("ns-2/manual.yaml", manualYAML("ns-2", "manual", "10.1.0.1")) }, ""},
		{"endpoints for a selecting service", func() { tr.put("ns-2/eps.yaml", endpointsYAML("ns-2", "svc-2", "10.1.0.2")) }, "Service ns-2/svc-2 has a selector"},
		{"that service removed", func() { tr.rm(svc(2)) }, "no Service ns-2/svc-2 exists"},
		{"slice without its label", func() { tr.put("ns-3/slice.yaml", sliceYAML("ns-3", "", "10.1.0.3")) }, "has no label kubernetes.io/service-name"},
		{"slice with its label", func() { tr.put("ns-3/slice.yaml", sliceYAML("ns-3", "svc-3", "10.1.0.3")) }, ""},
		{"lock added", func() {
			lock = mustLock(t, "  ns-1/svc-1:\n    clusterIPs: [10.96.0.20]\n  ns-1/svc-4:\n    nodePorts:\n      http/TCP: 30200\n")
		}, ""},
		{"same lock read again", func() {
			lock = mustLock(t, "  ns-1/svc-1:\n    clusterIPs: [10.96.0.20]\n  ns-1/svc-4:\n    nodePorts:\n      http/TCP: 30200\n")
		}, ""},
		{"explicit value another service has in the lock", func() { tr.edit(svc(12), "type: ClusterIP", "type: ClusterIP\n  clusterIP: 10.96.0.20") }, "is the cluster IP of ns-1/svc-1 in netspec.lock"},
		{"lock changed", func() { lock = mustLock(t, "  ns-1/svc-1:\n    clusterIPs: [10.96.0.21]\n") }, ""},
		{"lock removed", func() { lock = nil }, ""},
		{"second Cluster object", func() { tr.put("zz-cluster.yaml", strings.Replace(clusterYAML, "NAME", "second", 1)) }, "is a second Cluster object"},
		{"second Cluster object removed", func() { tr.rm("zz-cluster.yaml") }, ""},
		{"cluster node port range", func() { tr.edit("cluster.yaml", `"30000-32767"`, `"30000-30100"`) }, ""},
		{"cluster service CIDRs", func() {
			tr.edit("cluster.yaml", `serviceCIDRs: ["10.96.0.0/12"]`, `serviceCIDRs: ["10.96.0.0/12", "fd00:96::/108"]`)
		}, ""},
		{"dual-stack service", func() { tr.edit(svc(1), "type: ClusterIP", "type: ClusterIP\n  ipFamilyPolicy: PreferDualStack") }, ""},
		{"Cluster object removed", func() { tr.rm("cluster.yaml") }, ""},
		{"Cluster object back", func() { tr.put("cluster.yaml", strings.Replace(clusterYAML, "NAME", "bench", 1)) }, ""},
		{"node changed", func() { tr.edit("nodes.yaml", "zone: zone-a", "zone: zone-z") }, ""},
		{"everything removed but the nodes", func() {
			for _, ns := range []string{"ns-1", "ns-2", "ns-3"} {
				if err := os.RemoveAll(tr.path(ns)); err != nil {
					t.Fatal(err)
				}
			}
		}, ""},
	}
	m := NewMemo()
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			step.change()
			tree := tr.load()
			if n := tree.Diags.Errors(); n > 0 {
				t.Fatalf("the step's files do not load: %v", tree.Diags)
			}
			c := checkMemoStep(t, m, tree.Objects, lock, tree)
			if step.want != "" && !slices.ContainsFunc(c.Diags, func(d diag.Diagnostic) bool { return strings.Contains(d.String(), step.want) }) {
				t.Errorf("no finding says %q: %v", step.want, c.Diags)
			}
		})
	}
}

// podFile is a ready pod labelled app=app.
func podFile(name, ns, app, ip string) string {
	return `apiVersion: v1
kind: Pod
metadata:
  name: ` + name + `
  namespace: ` + ns + `
  labels:
    app: ` + app + `
spec:
  nodeName: node-1
  containers:
  - name: app
    ports:
    - name: http
      containerPort: 8080
status:
  podIP: ` + ip + `
  conditions:
  - type: Ready
    status: "True"
`
}

const clusterYAML = `apiVersion: netspec.dev/v1alpha1
kind: Cluster
metadata:
  name: NAME
spec:
  serviceCIDRs: ["10.96.0.0/12"]
  nodePortRange: "30000-32767"
`

func manualYAML(ns, name, ip string) string {
	return `apiVersion: v1
kind: Service
metadata:
  name: ` + name + `
  namespace: ` + ns + `
spec:
  ports:
  - name: http
    port: 80
    targetPort: 8080
---
` + endpointsYAML(ns, name, ip)
}

func endpointsYAML(ns, name, ip string) string {
	return `apiVersion: v1
kind: Endpoints
metadata:
  name: ` + name + `
  namespace: ` + ns + `
subsets:
- addresses:
  - ip: ` + ip + `
  ports:
  - name: http
    port: 8080
`
}

func sliceYAML(ns, svc, ip string) string {
	labels := ""
	if svc != "" {
		labels = "\n  labels:\n    kubernetes.io/service-name: " + svc
	}
	return `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: slice
  namespace: ` + ns + labels + `
addressType: IPv4
ports:
- name: http
  port: 8080
endpoints:
- addresses: ["` + ip + `"]
`
}

// TestCheckMemoRandom makes random edits, one to three files at a time, to
// a small tree built to collide: few names (duplicates), a tiny service
// CIDR and node port range (probing and exhaustion), explicit values from
// a small set (conflicts, with each other and with a lock), pod IPs among
// the Services' addresses. After every step one Memo kept across the
// steps must validate as a fresh Validate does.
func TestCheckMemoRandom(t *testing.T) {
	steps := 150
	if testing.Short() {
		steps = 40
	}
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Parallel()
			checkMemoRandom(t, seed, steps)
		})
	}
}

// TestCheckMemoCollisions is TestCheckMemoRandom with the hashes of the
// memo's and the pod index's keys narrowed to two bits: names of every
// kind and labels of every namespace share chains and lists, which the
// indexes must tell apart.
func TestCheckMemoCollisions(t *testing.T) {
	old := hashMask
	hashMask = 3
	t.Cleanup(func() { hashMask = old })
	steps := 100
	if testing.Short() {
		steps = 30
	}
	// The seeds run side by side, and all of them before the cleanup
	// restores hashMask (TestCheckMemoCollisions is not parallel itself).
	for seed := range uint64(2) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Parallel()
			checkMemoRandom(t, seed, steps)
		})
	}
}

// checkMemoRandom makes steps random edits of a tree seeded with seed and
// fails t when a Memo kept across them validates otherwise than a fresh
// Validate.
func checkMemoRandom(t *testing.T, seed uint64, steps int) {
	g := &randomTree{rng: rand.New(rand.NewPCG(seed, 7)), tr: newMemoTree(t)}
	if err := os.MkdirAll(g.tr.root, 0o755); err != nil {
		t.Fatal(err)
	}
	m := NewMemo()
	var lock *Lock
	for step := range steps {
		var did []string
		for range 1 + g.rng.IntN(3) {
			did = append(did, g.edit())
		}
		if g.rng.IntN(8) == 0 {
			lock = g.lock(t)
			did = append(did, "lock")
		}
		tree := g.tr.load()
		var loc Locator = tree
		if seed == 3 {
			loc = fakeLoc{} // positions that do not read files
		}
		want := Validate(tree.Objects, lock, loc)
		got := m.Validate(tree.Objects, lock, loc)
		if d := checkedDiff(tree.Objects, got, want); d != "" {
			t.Fatalf("step %d (%s): the memo's result differs from a fresh Validate:\n%s", step, strings.Join(did, ", "), d)
		}
	}
}

// randomTree writes the files of TestCheckMemoRandom.
type randomTree struct {
	rng   *rand.Rand
	tr    *memoTree
	files []string // the files written and not removed
}

func (g *randomTree) pick(s ...string) string { return s[g.rng.IntN(len(s))] }

// edit changes one file of the tree and says which.
func (g *randomTree) edit() string {
	switch n := g.rng.IntN(20); {
	case n < 8:
		return g.put(fmt.Sprintf("svc/%02d.yaml", g.rng.IntN(12)), g.service())
	case n < 11:
		return g.put(fmt.Sprintf("pods/%d.yaml", g.rng.IntN(6)), g.pods())
	case n < 13:
		return g.put(fmt.Sprintf("eps/%d.yaml", g.rng.IntN(4)), g.endpoints())
	case n < 14:
		if g.rng.IntN(4) == 0 && slices.Contains(g.files, "cluster.yaml") {
			return g.remove("cluster.yaml")
		}
		return g.put("cluster.yaml", g.cluster())
	case n < 18 && len(g.files) > 0:
		return g.remove(g.files[g.rng.IntN(len(g.files))])
	case len(g.files) > 0:
		// A file moves: its objects come back as new ones elsewhere.
		from := g.files[g.rng.IntN(len(g.files))]
		data, err := os.ReadFile(g.tr.path(from))
		if err != nil {
			g.tr.t.Fatal(err)
		}
		g.remove(from)
		return g.put(fmt.Sprintf("moved/%d-%s", g.rng.IntN(100), strings.ReplaceAll(from, "/", "-")), string(data)) + " moved from " + from
	}
	return "nothing"
}

func (g *randomTree) put(rel, content string) string {
	g.tr.put(rel, content)
	if !slices.Contains(g.files, rel) {
		g.files = append(g.files, rel)
	}
	return "write " + rel
}

func (g *randomTree) remove(rel string) string {
	g.tr.rm(rel)
	g.files = slices.DeleteFunc(g.files, func(f string) bool { return f == rel })
	return "remove " + rel
}

// service is a Service, sometimes followed by pods.
func (g *randomTree) service() string {
	var b strings.Builder
	ns := g.pick("a", "b")
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Service\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n", g.pick("s0", "s1", "s2", "s3", "s4", "s5"), ns)
	typ := g.pick("ClusterIP", "ClusterIP", "NodePort", "LoadBalancer", "ExternalName", "headless")
	switch typ {
	case "headless":
		b.WriteString("  clusterIP: None\n")
	case "ExternalName":
		b.WriteString("  type: ExternalName\n  externalName: db.example.com\n")
	default:
		fmt.Fprintf(&b, "  type: %s\n", typ)
		if g.rng.IntN(3) == 0 {
			fmt.Fprintf(&b, "  clusterIP: %s\n", g.pick("10.96.0.5", "10.96.0.6", "10.96.0.9", "10.96.0.200", "fd00:96::5"))
		}
		if g.rng.IntN(4) == 0 {
			b.WriteString("  ipFamilyPolicy: PreferDualStack\n")
		}
	}
	switch g.rng.IntN(4) {
	case 0:
	case 1:
		fmt.Fprintf(&b, "  selector:\n    app: %s\n    tier: %s\n", g.pick("p", "q", "r"), g.pick("front", "back"))
	default:
		fmt.Fprintf(&b, "  selector:\n    app: %s\n", g.pick("p", "q", "r"))
	}
	if g.rng.IntN(4) == 0 {
		fmt.Fprintf(&b, "  externalIPs: [%q]\n", g.pick("203.0.113.7", "198.51.100.7"))
	}
	if typ == "LoadBalancer" && g.rng.IntN(2) == 0 {
		fmt.Fprintf(&b, "  loadBalancerIP: %s\n", g.pick("203.0.113.8", "10.244.0.2"))
	}
	if typ == "LoadBalancer" && g.rng.IntN(2) == 0 {
		b.WriteString("  externalTrafficPolicy: Local\n")
		if g.rng.IntN(2) == 0 {
			fmt.Fprintf(&b, "  healthCheckNodePort: %s\n", g.pick("30001", "30002", "30003"))
		}
	}
	b.WriteString("  ports:\n  - name: http\n    protocol: TCP\n    port: 80\n")
	if (typ == "NodePort" || typ == "LoadBalancer") && g.rng.IntN(2) == 0 {
		fmt.Fprintf(&b, "    nodePort: %s\n", g.pick("30001", "30002", "30050"))
	}
	if g.rng.IntN(3) == 0 {
		b.WriteString("  - name: dns\n    protocol: UDP\n    port: 53\n")
	}
	if typ == "LoadBalancer" && g.rng.IntN(2) == 0 {
		fmt.Fprintf(&b, "status:\n  loadBalancer:\n    ingress:\n    - ip: %s\n", g.pick("203.0.113.9", "10.244.0.3"))
	}
	if g.rng.IntN(2) == 0 {
		b.WriteString("---\n" + g.pods())
	}
	return b.String()
}

// pods is one or two pods.
func (g *randomTree) pods() string {
	var docs []string
	for range 1 + g.rng.IntN(2) {
		docs = append(docs, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: %s
  labels:
    app: %s
    tier: %s
spec:
  nodeName: node-1
  containers:
  - name: app
    ports:
    - name: http
      containerPort: 8080
status:
  podIP: %s
  conditions:
  - type: Ready
    status: "True"
`, g.pick("p0", "p1", "p2", "p3", "p4", "p5"), g.pick("a", "b"), g.pick("p", "q", "r"), g.pick("front", "back"),
			g.pick("10.244.0.1", "10.244.0.2", "10.244.0.3", "10.96.0.1", "10.96.0.5", "10.96.0.7", "203.0.113.7", "203.0.113.9")))
	}
	return strings.Join(docs, "---\n")
}

// endpoints is an Endpoints object or an EndpointSlice.
func (g *randomTree) endpoints() string {
	ns, name, ip := g.pick("a", "b"), g.pick("s0", "s1", "s2", "s3"), g.pick("10.1.0.1", "10.96.0.5", "203.0.113.7", "10.96.0.2")
	if g.rng.IntN(2) == 0 {
		return endpointsYAML(ns, name, ip)
	}
	if g.rng.IntN(3) == 0 {
		name = ""
	}
	return sliceYAML(ns, name, ip)
}

// cluster is a Cluster object, sometimes two.
func (g *randomTree) cluster() string {
	spec := g.pick(
		`serviceCIDRs: ["10.96.0.0/28"]`+"\n  nodePortRange: \"30000-30005\"\n  externalIPCIDRs: [\"203.0.113.0/24\"]\n  loadBalancerIPCIDRs: [\"203.0.113.0/28\"]",
		`serviceCIDRs: ["10.96.0.0/28", "fd00:96::/124"]`+"\n  nodePortRange: \"30000-30009\"",
		`serviceCIDRs: ["10.96.0.0/29"]`+"\n  nodePortRange: \"30000-30002\"",
		`serviceCIDRs: ["10.96.0.0/12"]`,
	)
	doc := "apiVersion: netspec.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: c\nspec:\n  " + spec + "\n"
	if g.rng.IntN(5) == 0 {
		doc += "---\n" + strings.Replace(clusterYAML, "NAME", "other", 1)
	}
	return doc
}

// lock is no lock or one of two, parsed anew.
func (g *randomTree) lock(t *testing.T) *Lock {
	switch g.rng.IntN(3) {
	case 0:
		return nil
	case 1:
		return mustLock(t, "  a/s0:\n    clusterIPs: [10.96.0.5]\n  a/s1:\n    nodePorts:\n      http/TCP: 30001\n  b/s2:\n    clusterIPs: [10.96.0.9, \"fd00:96::9\"]\n")
	}
	return mustLock(t, "  a/s1:\n    clusterIPs: [10.96.0.5]\n  b/s3:\n    clusterIPs: [10.96.0.2]\n    nodePorts:\n      dns/UDP: 30002\n")
}

// TestCheckMemoOddInputs gives a Memo what a watcher never does: objects
// in another order, an object twice, another Locator. It must still
// validate as a fresh Validate does, and take the tree again after.
func TestCheckMemoOddInputs(t *testing.T) {
	tr := newMemoTree(t)
	cfg := gentree.Config{Services: 6, PodsPerService: 2, Namespaces: 2, Nodes: 2, Seed: 2}
	if err := gentree.Write(tr.root, cfg); err != nil {
		t.Fatal(err)
	}
	tr.edit(gentree.ServiceFile(cfg, 2), "type: ClusterIP", "type: ClusterIP\n  clusterIP: 10.96.0.10")
	tr.edit(gentree.ServiceFile(cfg, 3), "type: ClusterIP", "type: ClusterIP\n  clusterIP: 10.96.0.10")
	tree := tr.load()
	objs := tree.Objects
	reversed := slices.Clone(objs)
	slices.Reverse(reversed)
	twice := append(slices.Clone(objs), objs[len(objs)-1])
	m := NewMemo()
	for _, step := range []struct {
		name string
		objs []*schema.Object
		loc  Locator
	}{
		{"tree", objs, tree},
		{"reversed", reversed, tree},
		{"tree again", objs, tree},
		{"an object twice", twice, tree},
		{"tree after that", objs, tree},
		{"no locator", objs, nil},
		{"other locator", objs, fakeLoc{}},
		{"nothing", nil, fakeLoc{}},
		{"tree at last", objs, tree},
	} {
		t.Run(step.name, func(t *testing.T) {
			checkMemoStep(t, m, step.objs, nil, step.loc)
		})
	}
}

// BenchmarkValidateOneFile times Validate after a one-file change of a
// 10,000-service tree, with a Memo kept across changes (memo-*) and
// without (fresh); cold is a Memo's first call. The changes: port, the
// container port of a Service's first pod (what BenchmarkReload changes);
// selector, a Service's selector now picks another Service's pods;
// service, a Service file removed, then put back (the allocation is
// redone).
func BenchmarkValidateOneFile(b *testing.B) {
	tr := newMemoTree(b)
	cfg := gentree.Config{Services: 10000, PodsPerService: 2, Seed: 1}
	if err := gentree.Write(tr.root, cfg); err != nil {
		b.Fatal(err)
	}
	b.Run("cold", func(b *testing.B) {
		tree := tr.load()
		b.ReportAllocs()
		for b.Loop() {
			NewMemo().Validate(tree.Objects, nil, tree)
		}
	})
	// Each change k edits Service i(k) and toggles it: odd visits undo.
	i := func(k int) int { return (k/2*7919)%cfg.Services + 1 }
	changes := map[string]func(k int){
		"port": func(k int) {
			if k%2 == 0 {
				tr.edit(gentree.ServiceFile(cfg, i(k)), "containerPort: 8080", "containerPort: 8081")
			} else {
				tr.edit(gentree.ServiceFile(cfg, i(k)), "containerPort: 8081", "containerPort: 8080")
			}
		},
		"selector": func(k int) {
			s, o := fmt.Sprintf("svc-%d\n  ports", i(k)), fmt.Sprintf("svc-%d\n  ports", i(k)%cfg.Services+1)
			if k%2 == 0 {
				tr.edit(gentree.ServiceFile(cfg, i(k)), s, o)
			} else {
				tr.edit(gentree.ServiceFile(cfg, i(k)), o, s)
			}
		},
		"service": func(k int) {
			f := gentree.ServiceFile(cfg, i(k))
			if k%2 == 0 {
				if err := os.Rename(tr.path(f), tr.path(f)+".off"); err != nil {
					b.Fatal(err)
				}
			} else if err := os.Rename(tr.path(f)+".off", tr.path(f)); err != nil {
				b.Fatal(err)
			}
		},
	}
	for _, mode := range []string{"memo-port", "memo-selector", "memo-service", "fresh-port"} {
		b.Run(mode, func(b *testing.B) {
			var m *Memo
			if strings.HasPrefix(mode, "memo") {
				m = NewMemo()
			}
			change := changes[strings.TrimPrefix(strings.TrimPrefix(mode, "memo-"), "fresh-")]
			if tree := tr.load(); m.Validate(tree.Objects, nil, tree).Diags.Errors() > 0 {
				b.Fatal("invalid tree")
			}
			k := 0
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				change(k)
				k++
				tree := tr.load()
				b.StartTimer()
				if m.Validate(tree.Objects, nil, tree).Diags.Errors() > 0 {
					b.Fatal("invalid tree")
				}
			}
			b.StopTimer()
			if k%2 == 1 {
				change(k) // leave the tree as it was
			}
		})
	}
}
