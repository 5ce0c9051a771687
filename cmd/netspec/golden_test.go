package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"

	"netspec.dev/netspec/schema"
)

// TestGolden renders every example for every node and compares the result
// with golden/<example>/<node>/. go test ./cmd/netspec -update rewrites the
// golden files; review their diff before committing it.
func TestGolden(t *testing.T) {
	examples := []string{"basic", "cue", "kitchen-sink"}
	for _, ex := range examples {
		tree := filepath.Join("../../examples", ex)
		if _, err := os.Stat(tree); err != nil {
			t.Fatalf("example %s: %v", ex, err)
		}
		tr, err := schema.Load(tree, schema.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var nodes []string
		for _, o := range tr.Objects {
			if o.Node != nil {
				nodes = append(nodes, o.Node.Metadata.Name)
			}
		}
		sort.Strings(nodes)
		if len(nodes) == 0 {
			t.Fatalf("example %s has no nodes", ex)
		}
		for _, node := range nodes {
			t.Run(ex+"/"+node, func(t *testing.T) {
				out := t.TempDir()
				var stdout, stderr bytes.Buffer
				if code := run([]string{"render", "--no-cache", tree, "--node", node, "--out", out}, &env{stdout: &stdout, stderr: &stderr}); code != exitOK {
					t.Fatalf("render exit %d:\n%s", code, stderr.String())
				}
				golden := filepath.Join("../../golden", ex, node)
				got := readTree(t, out)
				if ex == "kitchen-sink" {
					// The IPVS data plane's table, beside the ruleset.
					ipvsOut := t.TempDir()
					if code := run([]string{"render", "--no-cache", tree, "--node", node, "--out", ipvsOut, "--dataplane", "ipvs"}, &env{stdout: &stdout, stderr: &stderr}); code != exitOK {
						t.Fatalf("render --dataplane ipvs exit %d:\n%s", code, stderr.String())
					}
					ipvs := readTree(t, ipvsOut)
					got["ipvs.txt"] = ipvs["ipvs.txt"]
					got["ipvs-nftables.nft"] = ipvs["nftables.nft"]
				}
				if *update {
					if err := os.RemoveAll(golden); err != nil {
						t.Fatal(err)
					}
					for name, data := range got {
						p := filepath.Join(golden, filepath.FromSlash(name))
						if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
							t.Fatal(err)
						}
						if err := os.WriteFile(p, data, 0o644); err != nil {
							t.Fatal(err)
						}
					}
					return
				}
				want := readTree(t, golden)
				for name := range want {
					if _, ok := got[name]; !ok {
						t.Errorf("%s/%s is no longer rendered (go test ./cmd/netspec -update removes it)", golden, name)
					}
				}
				for name, data := range got {
					w, ok := want[name]
					if !ok {
						t.Errorf("%s/%s is new: run go test ./cmd/netspec -update and review it", golden, name)
						continue
					}
					if diff := cmp.Diff(string(w), string(data)); diff != "" {
						t.Errorf("%s/%s differs (-golden +rendered); if intended, run go test ./cmd/netspec -update and review the diff:\n%s", golden, name, diff)
					}
				}
			})
		}
	}
}

// readTree reads every file below dir, keyed by slash path.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = data
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return files
}
