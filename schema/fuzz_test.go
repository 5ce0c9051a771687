package schema

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"netspec.dev/netspec/internal/diag"
)

// The fuzz targets write their input as the only file of a tree and load
// it. Load must return (no panic, no hang) with a tree whose diagnostics are
// positioned in that file and sorted. The seed corpus runs in plain
// `go test`; fuzz with
//
//	go test ./schema -run '^$' -fuzz FuzzLoad -fuzztime 60s
//	go test ./schema -run '^$' -fuzz FuzzLoadCUE -fuzztime 60s
//
// Crashers go to testdata/fuzz/<target>/ and are replayed by go test.

var yamlSeeds = []string{
	"",
	"---\n---\n",
	"apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {ports: [{port: 80}]}\n",
	"apiVersion: v1\nkind: List\nitems: [{apiVersion: v1, kind: Node, metadata: {name: n}}]\n",
	"apiVersion: v1\nkind: Service\nmetadata: &m {name: a, <<: *m}\n",
	"a: &a [*a]\n",
	"a: &a {b: 1}\nb: {<<: [*a, *a]}\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {}\n",
	"[[[[[[[[[[]]]]]]]]]]",
	"{\"apiVersion\": \"v1\", \"kind\": \"Endpoints\", \"metadata\": {\"name\": \"e\"}, \"subsets\": [{\"addresses\": [{\"ip\": \"::1\"}]}]}",
	"apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {ports: [{port: 1e400}]}\n",
	"apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {ports: [{port: 0x7fffffffffffffff, targetPort: -1}]}\n",
	"apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: s}\naddressType: FQDN\nendpoints: [{addresses: [\"\"]}]\n",
	"apiVersion: netspec.dev/v1alpha1\nkind: Cluster\nmetadata: {name: c}\nspec: {serviceCIDRs: [\"::/0\", 0.0.0.0/32], nodePortRange: 0-0}\n",
	"apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: !!binary aGVsbG8=\n",
	"apiVersion: v1\nkind: Service\n? [a, b]\n: c\n",
	"apiVersion: v1\nkind: Service\nmetadata: {name: x, labels: {a: !!int 1}}\n",
	"apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {ports: [{port: 80, protocol: null, name: ~}], type: null}\n",
	"%YAML 1.1\n---\napiVersion: v1\nkind: Node\nmetadata: {name: n}\n",
	"apiVersion: v1\r\nkind: Node\r\nmetadata: {name: \"\\u00e9\"}\r\n",
}

var cueSeeds = []string{
	"",
	"package x\n",
	"package x\n\na: {apiVersion: \"v1\", kind: \"Service\", metadata: name: \"web\", spec: ports: [{port: 80}]}\n",
	"package x\n\n#T: {apiVersion: \"v1\", kind: \"Node\", metadata: name: string}\nn: [for i in [1, 2] {#T & {metadata: name: \"n\\(i)\"}}]\n",
	"package x\n\na: b\nb: a\n",
	"package x\n\na: {apiVersion: \"v1\", kind: \"Pod\", metadata: name: \"p\", spec: x: a}\n",
	"package x\n\nimport \"strings\"\n\na: {apiVersion: \"v1\", kind: \"Node\", metadata: name: strings.ToLower(\"N\")}\n",
	"package x\n\na: {apiVersion: \"v1\", kind: \"Service\", metadata: name: string}\n",
	"package x\n\na: b: c: d: e: f: g: h: i: j: {apiVersion: \"v1\", kind: \"Node\", metadata: name: \"n\"}\n",
	"package x\n\na: [...{apiVersion: \"v1\"}]\na: [{kind: 1}]\n",
	"package x\n\nx: 1 & 2\n",
	"package x\n\nx: {\n",
}

// seedFiles returns the contents of the files below dir whose extension is
// one of exts.
func seedFiles(tb testing.TB, dir string, exts ...string) []string {
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		for _, e := range exts {
			if strings.HasSuffix(p, e) {
				if data, err := os.ReadFile(p); err == nil {
					out = append(out, string(data))
				}
			}
		}
		return nil
	})
	return out
}

func FuzzLoad(f *testing.F) {
	for _, s := range yamlSeeds {
		f.Add([]byte(s))
	}
	for _, s := range seedFiles(f, "testdata/seed", ".yaml", ".json") {
		f.Add([]byte(s))
	}
	for _, c := range ruleCases {
		if len(c.yaml) < 4096 {
			f.Add([]byte(c.yaml))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzOne(t, "a.yaml", data)
	})
}

func FuzzLoadCUE(f *testing.F) {
	for _, s := range cueSeeds {
		f.Add([]byte(s))
	}
	for _, s := range seedFiles(f, "testdata/seed", ".cue") {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzOne(t, "a.cue", data)
	})
}

func fuzzOne(t *testing.T, name string, data []byte) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
	type result struct {
		tr  *Tree
		err error
	}
	done := make(chan result, 1)
	go func() {
		tr, err := Load(root, Options{Workers: 1})
		done <- result{tr, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("Load did not return within 20s")
	}
	if r.err != nil {
		t.Fatalf("Load: %v", r.err)
	}
	tr := r.tr
	for i, d := range tr.Diags {
		if d.Pos.File != name {
			t.Errorf("diagnostic outside the tree's only file: %s", d)
		}
		if d.Msg == "" {
			t.Errorf("diagnostic without a message: %s", d)
		}
		if i > 0 {
			a, b := tr.Diags[i-1].Pos, d.Pos
			if a.Line > b.Line || a.Line == b.Line && a.Col > b.Col {
				t.Errorf("diagnostics not sorted:\n%s\n%s", tr.Diags[i-1], d)
			}
		}
	}
	for _, o := range tr.Objects {
		if o.Meta() == nil || o.Kind == "" {
			t.Errorf("object without kind or metadata: %+v", o)
		}
		for _, p := range []diag.Path{nil, {"metadata", "name"}, {"spec", "ports", 0, "port"}, {"items", 5}} {
			if pos := tr.Locate(o.Src, p); pos.File != o.Src.File {
				t.Errorf("Locate(%+v, %s) = %s", o.Src, p, pos)
			}
		}
	}
}

// TestSeedTree loads testdata/seed as one tree: the valid files load
// without a diagnostic, the invalid ones with many.
func TestSeedTree(t *testing.T) {
	tr := loadTree(t, "testdata/seed", Options{})
	bad := map[string]int{}
	for _, d := range tr.Diags {
		bad[d.Pos.File]++
	}
	for _, f := range []string{"tree.yaml", "tree.json", "tree.cue"} {
		if bad[f] != 0 {
			t.Errorf("%s: want no diagnostics, got %d:\n%s", f, bad[f], strings.Join(diagStrings(tr.Diags), "\n"))
		}
	}
	if bad["invalid.yaml"] < 15 {
		t.Errorf("invalid.yaml: want at least 15 diagnostics, got:\n%s", strings.Join(diagStrings(tr.Diags), "\n"))
	}
	kinds := map[string]int{}
	for _, o := range tr.Objects {
		kinds[o.Kind]++
	}
	for _, k := range []string{KindService, KindEndpoints, KindEndpointSlice, KindPod, KindNode, KindCluster} {
		if kinds[k] == 0 {
			t.Errorf("no %s loaded from testdata/seed", k)
		}
	}
}
