package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"netspec.dev/netspec/internal/diag"
	"netspec.dev/netspec/schema"
)

// TestValidateJSONMatchesText checks that --output json reports exactly
// the findings the text output prints, field by field, and the same exit
// status.
func TestValidateJSONMatchesText(t *testing.T) {
	for _, tree := range []string{"../../examples/broken", "../../examples/basic"} {
		var tout, terr, jout, jerr bytes.Buffer
		tcode := run([]string{"validate", "--no-cache", tree}, &env{stdout: &tout, stderr: &terr})
		jcode := run([]string{"validate", "--no-cache", "--output", "json", tree}, &env{stdout: &jout, stderr: &jerr})
		if tcode != jcode {
			t.Errorf("%s: exit %d in text, %d in json", tree, tcode, jcode)
		}
		if jerr.Len() > 0 {
			t.Errorf("%s: json wrote to stderr: %s", tree, jerr.String())
		}
		var r validateReport
		if err := json.Unmarshal(jout.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v\n%s", tree, err, jout.String())
		}
		var fromJSON []string
		for _, f := range r.Findings {
			// As diag.Diagnostic.String formats it.
			line := diag.Pos{File: f.File, Line: f.Line, Col: f.Column}.String() + ": "
			switch f.Severity {
			case "warning":
				line += "warning: "
			case "error":
			default:
				t.Errorf("%s: severity %q", tree, f.Severity)
			}
			if f.Field != "" {
				line += f.Field + ": "
			}
			fromJSON = append(fromJSON, line+f.Message)
		}
		text := strings.Split(strings.TrimSpace(terr.String()), "\n")
		if tcode != exitOK {
			text = text[:len(text)-1] // "N files, M errors"
		} else if terr.Len() == 0 {
			text = nil
		}
		if got, want := strings.Join(fromJSON, "\n"), strings.Join(text, "\n"); got != want {
			t.Errorf("%s: json findings:\n%s\ntext:\n%s", tree, got, want)
		}
		if r.Valid != (tcode == exitOK) || r.Errors+r.Warnings != len(r.Findings) {
			t.Errorf("%s: valid %v, %d errors, %d warnings, %d findings", tree, r.Valid, r.Errors, r.Warnings, len(r.Findings))
		}
	}
}

// TestStdinNeverPanics feeds validate, render and diff hostile standard
// input: each is an error or a valid (empty) tree, never a crash, and
// every finding names <stdin>.
func TestStdinNeverPanics(t *testing.T) {
	tests := []struct {
		name, in string
		want     int
		stderr   string
	}{
		{name: "empty", in: "", want: exitError, stderr: "<stdin>:1:1: the input holds no Kubernetes object (it is empty)"},
		{name: "only separators", in: "---\n---\n", want: exitError, stderr: "<stdin>:1:1: the input holds no Kubernetes object (only empty documents"},
		{name: "invalid YAML", in: "kind: [\n", want: exitError, stderr: "<stdin>:"},
		{name: "tab indentation", in: "apiVersion: v1\n\tkind: Service\n", want: exitError, stderr: "<stdin>:"},
		{name: "JSON list", in: `[{"apiVersion":"v1","kind":"Service"}]`, want: exitError, stderr: "<stdin>:1:1: this input holds no Kubernetes object"},
		{name: "JSON scalar", in: `42`, want: exitError, stderr: "<stdin>:1:1: "},
		{name: "JSON List without items", in: `{"apiVersion":"v1","kind":"List","items":5}`, want: exitError, stderr: "<stdin>:1:"},
		{name: "concatenated JSON", in: "{\"apiVersion\":\"v1\"}\n{\"kind\":\"x\"}", want: exitError, stderr: "<stdin>:"},
		{name: "lock only", in: "version: 1\n", want: exitOK},
		{name: "lock not a mapping", in: "version: 1\nservices: [1]\n", want: exitError, stderr: "<stdin>:2: lock document: "},
		{name: "anchors", in: "a: &a [*a]\n", want: exitError, stderr: "<stdin>:"},
		{name: "binary", in: "\x00\xff\xfe", want: exitError, stderr: "<stdin>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, args := range [][]string{
				{"validate", "-"},
				{"validate", "--output", "json", "-"},
				{"render", "-", "--node", "node-1", "--out", t.TempDir()},
				{"diff", "-", "../../examples/basic"},
			} {
				var out, errb bytes.Buffer
				code := run(args, &env{stdin: strings.NewReader(tt.in), stdout: &out, stderr: &errb})
				if args[0] == "validate" && code != tt.want {
					t.Errorf("%v: exit %d, want %d\n%s%s", args, code, tt.want, out.String(), errb.String())
				}
				if args[0] != "validate" && tt.want == exitError && code != exitError {
					t.Errorf("%v: exit %d, want 1", args, code)
				}
				if args[0] == "validate" && len(args) == 2 && !strings.Contains(errb.String(), tt.stderr) {
					t.Errorf("%v: stderr does not hold %q:\n%s", args, tt.stderr, errb.String())
				}
				if len(args) == 4 && args[1] == "--output" && !json.Valid(out.Bytes()) {
					t.Errorf("%v: not JSON:\n%s", args, out.String())
				}
			}
		})
	}
}

// TestIgnoredByKind pins the summary of ignored objects: most frequent
// kinds first, at most shownKinds of them, the rest counted together.
func TestIgnoredByKind(t *testing.T) {
	ig := func(counts map[string]int) []schema.Ignored {
		var out []schema.Ignored
		for k, n := range counts {
			for range n {
				out = append(out, schema.Ignored{Kind: k})
			}
		}
		return out
	}
	tests := []struct {
		name   string
		counts map[string]int
		want   string
	}{
		{name: "one", counts: map[string]int{"Deployment": 1}, want: "1 Deployment"},
		{name: "ties by name", counts: map[string]int{"Secret": 2, "ConfigMap": 2, "Role": 5}, want: "5 Role, 2 ConfigMap, 2 Secret"},
		{name: "five kinds all shown", counts: map[string]int{"A": 5, "B": 4, "C": 3, "D": 2, "E": 1}, want: "5 A, 4 B, 3 C, 2 D, 1 E"},
		{name: "rest counted", counts: map[string]int{"ConfigMap": 300, "Deployment": 100, "Secret": 4, "Role": 3, "RoleBinding": 3, "ServiceAccount": 2, "CustomResourceDefinition": 1}, want: "300 ConfigMap, 100 Deployment, 4 Secret, 3 Role, 6 of 3 other kinds"},
		{name: "no kind", counts: map[string]int{"": 1}, want: "1 (no kind)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ignoredByKind(ig(tt.counts)); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
