package gentree_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"netspec.dev/netspec/internal/gen/gentree"
	"netspec.dev/netspec/schema"
)

func TestGeneratedTreeIsValid(t *testing.T) {
	cfg := gentree.Config{Services: 200, PodsPerService: 2, Namespaces: 7, Nodes: 5, Seed: 3}
	dir := t.TempDir()
	if err := gentree.Write(dir, cfg); err != nil {
		t.Fatal(err)
	}
	tr, err := schema.Load(dir, schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range tr.Diags {
		t.Errorf("%s", d)
	}
	kinds := map[string]int{}
	for _, o := range tr.Objects {
		kinds[o.Kind]++
	}
	want := map[string]int{schema.KindCluster: 1, schema.KindNode: 5, schema.KindService: 200, schema.KindPod: 400}
	for k, n := range want {
		if kinds[k] != n {
			t.Errorf("%d objects of kind %s, want %d", kinds[k], k, n)
		}
	}
	if tr.Files != 202 {
		t.Errorf("Files = %d, want 202", tr.Files)
	}
	// Pod IPs are unique and usable as endpoints; every 10th Service is a NodePort.
	ips := map[string]string{}
	for _, o := range tr.Objects {
		switch {
		case o.Pod != nil:
			p := o.Pod
			if !p.Ready() || p.Spec.NodeName == "" || len(p.Spec.Containers) == 0 {
				t.Errorf("pod %s: not ready, unscheduled or without containers", p.Metadata.Name)
			}
			for _, ip := range p.IPs() {
				if other, dup := ips[ip]; dup {
					t.Errorf("pod IP %s used by %s and %s", ip, other, p.Metadata.Name)
				}
				ips[ip] = p.Metadata.Name
			}
		case o.Service != nil:
			s := o.Service
			if s.Metadata.Name == "svc-10" && s.Spec.Type != "NodePort" || s.Metadata.Name == "svc-11" && s.Spec.Type != "ClusterIP" {
				t.Errorf("service %s has type %s", s.Metadata.Name, s.Spec.Type)
			}
			for _, p := range s.Spec.Ports {
				if !p.TargetPort.IsName() || p.NodePort != 0 {
					t.Errorf("service %s port %s: targetPort %v nodePort %d", s.Metadata.Name, p.Name, p.TargetPort, p.NodePort)
				}
			}
		}
	}
}

func TestDeterministic(t *testing.T) {
	cfg := gentree.Config{Services: 200, PodsPerService: 2, Seed: 42}
	a, b := t.TempDir(), t.TempDir()
	for _, d := range []string{a, b} {
		if err := gentree.Write(d, cfg); err != nil {
			t.Fatal(err)
		}
	}
	fa, fb := readTree(t, a), readTree(t, b)
	if len(fa) != len(fb) || len(fa) != 202 {
		t.Fatalf("trees have %d and %d files, want 202", len(fa), len(fb))
	}
	for name, data := range fa {
		if !bytes.Equal(data, fb[name]) {
			t.Errorf("%s differs between two generations", name)
		}
	}
	// Another seed gives another tree.
	c := t.TempDir()
	cfg.Seed++
	if err := gentree.Write(c, cfg); err != nil {
		t.Fatal(err)
	}
	f := gentree.ServiceFile(cfg, 1)
	if bytes.Equal(fa[f], readTree(t, c)[f]) {
		t.Errorf("%s is the same for two seeds", f)
	}
}

func TestWriteRefusesNonEmptyDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := gentree.Write(dir, gentree.Config{Services: 1}); err == nil {
		t.Fatal("Write into a non-empty directory succeeded")
	}
}

func readTree(t *testing.T, root string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		files[filepath.ToSlash(rel)] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
