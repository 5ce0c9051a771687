package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestExamples keeps the bundled examples honest: the valid ones validate,
// and examples/broken prints exactly its golden errors.
func TestExamples(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		golden   string // file under golden/ holding the expected stdout+stderr
	}{
		{name: "basic", args: []string{"validate", "--no-cache", "../../examples/basic"}, wantCode: exitOK},
		{name: "basic-locked", args: []string{"validate", "--no-cache", "--locked", "../../examples/basic"}, wantCode: exitOK},
		{name: "cue", args: []string{"validate", "--no-cache", "../../examples/cue"}, wantCode: exitOK},
		{name: "broken", args: []string{"validate", "--no-cache", "../../examples/broken"}, wantCode: exitError, golden: "../../golden/broken/validate.txt"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(tc.args, &env{stdout: &out, stderr: &errb})
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.wantCode, out.String(), errb.String())
			}
			if tc.golden == "" {
				return
			}
			got := "$ netspec " + joinArgs(tc.args) + "\n" + out.String() + errb.String()
			if *update {
				if err := os.MkdirAll(filepath.Dir(tc.golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(tc.golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(tc.golden)
			if err != nil {
				t.Fatalf("%v (run go test ./cmd/netspec -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("output differs from %s (-want +got); if the change is intended, run go test ./cmd/netspec -update and review the diff:\n%s", tc.golden, diff)
			}
		})
	}
}

func joinArgs(args []string) string {
	var b bytes.Buffer
	for i, a := range args {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strings.TrimPrefix(filepath.ToSlash(a), "../../"))
	}
	return b.String()
}
