package schema

import (
	"strings"
	"testing"

	"netspec.dev/netspec/internal/diag"
)

// TestLoadStream reads trees from a stream: objects and ignored objects as
// from a file of a tree, the lock document taken apart, positions naming
// the stream, and Locate answering from the stream kept in memory.
func TestLoadStream(t *testing.T) {
	const svc = "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  ports: [{port: 80}]\n"
	tests := []struct {
		name    string
		in      string
		objects int
		ignored int
		lock    bool
		diags   []string
	}{
		{name: "objects", in: svc + "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n", objects: 1, ignored: 1},
		{name: "lock first", in: "version: 1\nservices: {}\n---\n" + svc, objects: 1, lock: true},
		{name: "lock alone", in: "version: 1\n", lock: true},
		{name: "two locks", in: "version: 1\n---\n" + svc + "---\nversion: 1\n", objects: 1, lock: true,
			diags: []string{"<stdin>:9:1: a second lock document (a version, and neither apiVersion nor kind): a stream holds one lock, and the first is at line 1"}},
		{name: "not a lock", in: "services: {}\n---\n" + svc, objects: 1,
			diags: []string{"<stdin>:1:1: object has no apiVersion or kind (string)"}},
		{name: "empty", in: "", diags: []string{"<stdin>:1:1: the input holds no Kubernetes object (it is empty), as kubectl apply would refuse it: no objects passed to apply"}},
		{name: "separators only", in: "# nothing\n---\n---\n", diags: []string{"<stdin>:1:1: the input holds no Kubernetes object (only empty documents: --- separators, comments, null), as kubectl apply would refuse it: no objects passed to apply"}},
		{name: "JSON list", in: `[{"kind": "Service"}]`,
			diags: []string{"<stdin>:1:1: this input holds no Kubernetes object (a document must be a mapping with apiVersion and kind, not a list)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := LoadStream(StdinName, strings.NewReader(tt.in), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !tr.Stream() || tr.Root != StdinName || tr.Files != 1 {
				t.Errorf("Stream %v, Root %q, Files %d", tr.Stream(), tr.Root, tr.Files)
			}
			if len(tr.Objects) != tt.objects || len(tr.Ignored) != tt.ignored || (tr.StreamLock != nil) != tt.lock {
				t.Errorf("%d objects, %d ignored, lock %v; want %d, %d, %v", len(tr.Objects), len(tr.Ignored), tr.StreamLock != nil, tt.objects, tt.ignored, tt.lock)
			}
			var got []string
			for _, d := range tr.Diags {
				got = append(got, d.String())
			}
			if strings.Join(got, "\n") != strings.Join(tt.diags, "\n") {
				t.Errorf("diagnostics:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.diags, "\n"))
			}
			for _, o := range tr.Objects {
				// A cross-object check locates fields after loading.
				pos := tr.Locate(o.Src, diag.Path{"spec", "ports", 0, "port"})
				if pos.File != StdinName || pos.Line == 0 {
					t.Errorf("Locate: %v", pos)
				}
			}
		})
	}

	t.Run("too large", func(t *testing.T) {
		tr, err := LoadStream(StdinName, strings.NewReader(svc), Options{MaxFileSize: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(tr.Objects) != 0 || tr.Diags.Errors() != 1 || !tr.Stream() {
			t.Errorf("objects %d, diags %v", len(tr.Objects), tr.Diags)
		}
	})
}
