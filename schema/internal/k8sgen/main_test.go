package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestGeneratedFileIsCurrent fails when schema/k8s_fields.cue is not what
// the generator writes from the k8s.io/api version pinned in go.mod: after
// an upgrade of k8s.io/api, or after a hand edit of the generated file.
func TestGeneratedFileIsCurrent(t *testing.T) {
	want, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../k8s_fields.cue")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("schema/k8s_fields.cue is not what the generator writes; run go generate ./schema\n%s", firstDiff(string(got), string(want)))
	}
}

// TestGenerateNamesVersions checks that the header names the module
// versions the field sets come from, so that a reader knows which
// Kubernetes they describe.
func TestGenerateNamesVersions(t *testing.T) {
	src, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range modules {
		if !strings.Contains(string(src), m+" v") {
			t.Errorf("header does not name the version of %s:\n%s", m, src[:min(len(src), 600)])
		}
	}
}

func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d:\n  file:      %s\n  generator: %s", i+1, gl, wl)
		}
	}
	return ""
}
