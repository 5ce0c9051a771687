package compiler_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/internal/cache"
	"netspec.dev/netspec/internal/gen/gentree"
	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/schema"
)

// TestMemoEqualsFresh edits a tree step by step, as a watcher sees it,
// and checks after every step that validating and compiling with one Memo
// kept across the steps gives what a fresh Validate and CompileStaged
// give. The tree is loaded through an in-memory cache, as the watcher
// loads it, so the objects of unchanged files are the same pointers from
// step to step: what the memo recognizes.
func TestMemoEqualsFresh(t *testing.T) {
	root := filepath.Join(t.TempDir(), "tree")
	cfg := gentree.Config{Services: 8, PodsPerService: 2, Seed: 1}
	if err := gentree.Write(root, cfg); err != nil {
		t.Fatal(err)
	}
	svc := func(i int) string { return filepath.Join(root, filepath.FromSlash(gentree.ServiceFile(cfg, i))) }
	edit := func(path, from, to string) func(*testing.T) {
		return func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(data), from) {
				t.Fatalf("%s has no %q", path, from)
			}
			write(t, path, strings.Replace(string(data), from, to, 1))
		}
	}
	var last *plan.Plan // the previous step's plan
	steps := []struct {
		name   string
		change func(*testing.T)
	}{
		{"first", func(*testing.T) {}},
		{"unchanged", func(*testing.T) {}},
		{"container port of a pod", edit(svc(1), "containerPort: 8080", "containerPort: 8081")},
		{"pod no longer ready", edit(svc(2), `status: "True"`, `status: "False"`)},
		{"pod leaves the selector", edit(svc(2), "    app: svc-2\n    team", "    app: gone\n    team")},
		{"selector picks another service's pods", edit(svc(3), "  selector:\n    app: svc-3", "  selector:\n    app: svc-4")},
		{"service removed", func(t *testing.T) {
			if err := os.Remove(svc(5)); err != nil {
				t.Fatal(err)
			}
		}},
		{"service added", func(t *testing.T) {
			data, err := os.ReadFile(svc(6))
			if err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(filepath.Dir(svc(6)), "copy.yaml"), strings.ReplaceAll(strings.ReplaceAll(string(data), "svc-6", "svc-copy"), "10.244.", "10.245."))
		}},
		{"pod of another file joins a selector", func(t *testing.T) {
			write(t, filepath.Join(root, "extra-pod.yaml"), extraPod("8080"))
		}},
		{"that pod changes", func(t *testing.T) {
			write(t, filepath.Join(root, "extra-pod.yaml"), extraPod("9090"))
		}},
		{"another service takes svc-1's derived IP", func(t *testing.T) {
			ip := last.Services[slices.IndexFunc(last.Services, func(s plan.Service) bool { return s.Name == "svc-1" })].ClusterIPs[0]
			write(t, filepath.Join(root, "claim.yaml"), strings.Replace(strings.ReplaceAll(manualService("10.1.0.9"), "name: manual", "name: claim"), "spec:\n", "spec:\n  clusterIP: "+ip.String()+"\n", 1))
		}},
		{"type NodePort", edit(svc(4), "type: ClusterIP", "type: NodePort")},
		{"policy Local", edit(svc(4), "type: NodePort", "type: NodePort\n  externalTrafficPolicy: Local")},
		{"LoadBalancer with policy Local: a health check node port", edit(svc(4), "type: NodePort", "type: LoadBalancer")},
		{"another service takes svc-4's derived health check node port", func(t *testing.T) {
			port := last.Services[slices.IndexFunc(last.Services, func(s plan.Service) bool { return s.Name == "svc-4" })].HealthCheckNodePort
			if port == 0 {
				t.Fatal("svc-4 has no health check node port")
			}
			claim := strings.ReplaceAll(manualService("10.1.0.9"), "name: manual", "name: hc-claim")
			claim = strings.Replace(claim, "spec:\n", "spec:\n  type: NodePort\n", 1)
			claim = strings.Replace(claim, "    targetPort: 8080\n", "    targetPort: 8080\n    nodePort: "+strconv.Itoa(int(port))+"\n", 1)
			write(t, filepath.Join(root, "hc-claim.yaml"), claim)
		}},
		{"session affinity", edit(svc(7), "type: ClusterIP", "type: ClusterIP\n  sessionAffinity: ClientIP")},
		{"service port number", edit(svc(7), "    port: 80\n", "    port: 81\n")},
		{"headless", edit(svc(6), "type: ClusterIP", "type: ClusterIP\n  clusterIP: None")},
		{"headless pod not ready", edit(svc(6), `status: "True"`, `status: "False"`)},
		{"zone of a node", edit(filepath.Join(root, "nodes.yaml"), "zone: zone-a", "zone: zone-z")},
		{"address of this node", edit(filepath.Join(root, "nodes.yaml"), "address: 192.168.0.1\n", "address: 192.168.0.201\n")},
		{"service without selector", func(t *testing.T) {
			write(t, filepath.Join(root, "manual.yaml"), manualService("10.1.0.1"))
		}},
		{"its Endpoints change", func(t *testing.T) {
			write(t, filepath.Join(root, "manual.yaml"), manualService("10.1.0.2"))
		}},
		{"its endpoint names a pod the tree lacks", func(t *testing.T) {
			write(t, filepath.Join(root, "manual.yaml"), manualRefService("10.1.0.2"))
		}},
		{"that pod appears: its probe", func(t *testing.T) {
			write(t, filepath.Join(root, "manual-pod.yaml"), manualPod("8081"))
		}},
		{"that pod's probe changes", func(t *testing.T) {
			write(t, filepath.Join(root, "manual-pod.yaml"), manualPod("8082"))
		}},
		{"that pod goes: the annotation's probe", func(t *testing.T) {
			if err := os.Remove(filepath.Join(root, "manual-pod.yaml")); err != nil {
				t.Fatal(err)
			}
		}},
		{"cluster service CIDRs", edit(filepath.Join(root, "cluster.yaml"), `serviceCIDRs: ["10.96.0.0/12"]`, `serviceCIDRs: ["10.96.0.0/12", "fd00:96::/108"]`)},
		{"dual-stack service", edit(svc(8), "type: ClusterIP", "type: ClusterIP\n  ipFamilyPolicy: PreferDualStack")},
		{"back to one family", edit(filepath.Join(root, "cluster.yaml"), `, "fd00:96::/108"`, "")},
	}
	mem := cache.NewMemory()
	memo := compiler.NewMemo()
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			step.change(t)
			tr, err := schema.Load(root, schema.Options{Cache: mem})
			if err != nil {
				t.Fatal(err)
			}
			mem.Sweep()
			if n := tr.Diags.Errors(); n > 0 {
				t.Fatalf("tree invalid: %v", tr.Diags)
			}
			fresh := compileFresh(t, tr)
			checked := memo.Validate(tr.Objects, nil, tr)
			if n := checked.Diags.Errors(); n > 0 {
				t.Fatalf("memo: tree invalid: %v", checked.Diags)
			}
			st, err := memo.CompileStaged(tr.Objects, checked, "node-1")
			if err != nil {
				t.Fatal(err)
			}
			got := st.Finish()
			last = fresh
			if !got.Equal(fresh) {
				t.Errorf("the memo's plan differs from a fresh compile:\n%s", planDiff(got, fresh))
			}
		})
	}
}

// compileFresh validates and compiles tr for node-1 without a memo.
func compileFresh(t *testing.T, tr *schema.Tree) *plan.Plan {
	t.Helper()
	checked := compiler.Validate(tr.Objects, nil, tr)
	if n := checked.Diags.Errors(); n > 0 {
		t.Fatalf("tree invalid: %v", checked.Diags)
	}
	p, err := compiler.Compile(tr.Objects, checked, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// planDiff names the Services whose plans differ.
func planDiff(got, want *plan.Plan) string {
	var b strings.Builder
	index := map[string]*plan.Service{}
	for i := range want.Services {
		index[want.Services[i].Namespace+"/"+want.Services[i].Name] = &want.Services[i]
	}
	for i := range got.Services {
		s := &got.Services[i]
		key := s.Namespace + "/" + s.Name
		if w := index[key]; w == nil {
			b.WriteString("extra " + key + "\n")
		} else if !s.Equal(w) {
			b.WriteString("differs " + key + "\n")
		}
		delete(index, key)
	}
	for key := range index {
		b.WriteString("missing " + key + "\n")
	}
	if b.Len() == 0 {
		b.WriteString("the Services are equal; the node, cluster, DNS or env differ\n")
	}
	return b.String()
}

// manualService is a Service without selector and its Endpoints object
// holding ip.
func manualService(ip string) string {
	return `apiVersion: v1
kind: Service
metadata:
  name: manual
  namespace: ns-1
spec:
  ports:
  - name: http
    protocol: TCP
    port: 80
    targetPort: 8080
---
apiVersion: v1
kind: Endpoints
metadata:
  name: manual
  namespace: ns-1
subsets:
- addresses:
  - ip: ` + ip + `
    nodeName: node-1
  ports:
  - name: http
    port: 8080
    protocol: TCP
`
}

// manualRefService is manualService with the annotation's readiness
// probe, its endpoint's targetRef naming the pod manual-pod (manualPod).
func manualRefService(ip string) string {
	s := strings.Replace(manualService(ip), "  namespace: ns-1\nspec:", "  namespace: ns-1\n  annotations:\n    netspec.dev/readiness-probe: '{\"tcpSocket\": {\"port\": 8080}}'\nspec:", 1)
	return strings.Replace(s, "    nodeName: node-1\n", "    nodeName: node-1\n    targetRef: {kind: Pod, name: manual-pod, namespace: ns-1}\n", 1)
}

// manualPod is the pod manual-pod that manualRefService's endpoint names,
// no selector's, with a readiness probe on port.
func manualPod(port string) string {
	return `apiVersion: v1
kind: Pod
metadata:
  name: manual-pod
  namespace: ns-1
spec:
  nodeName: node-1
  containers:
  - name: app
    readinessProbe:
      httpGet:
        path: /ready
        port: ` + port + `
status:
  phase: Running
  podIP: 10.1.0.2
  conditions:
  - type: Ready
    status: "True"
`
}

// extraPod is a ready pod of ns-1 that svc-1's selector picks, listening
// on port.
func extraPod(port string) string {
	return `apiVersion: v1
kind: Pod
metadata:
  name: extra
  namespace: ns-1
  labels:
    app: svc-1
spec:
  nodeName: node-1
  containers:
  - name: app
    ports:
    - name: http
      containerPort: ` + port + `
      protocol: TCP
status:
  phase: Running
  podIP: 10.250.0.1
  podIPs:
  - ip: 10.250.0.1
  conditions:
  - type: Ready
    status: "True"
`
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
