package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestExitCodes pins the exit status contract: 0 ok, 1 error, 2 bad usage.
func TestExitCodes(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want int
		in   string // substring expected in stdout+stderr
	}{
		{name: "no command", args: nil, want: exitUsage, in: "Usage:"},
		{name: "help", args: []string{"--help"}, want: exitOK, in: "Commands:"},
		{name: "help command", args: []string{"help", "lock"}, want: exitOK, in: "netspec.lock"},
		{name: "help unknown", args: []string{"help", "nope"}, want: exitUsage, in: "unknown command"},
		{name: "unknown command", args: []string{"nope"}, want: exitUsage, in: "unknown command"},
		{name: "missing tree", args: []string{"validate"}, want: exitUsage, in: "want one TREE"},
		{name: "bad flag", args: []string{"validate", "--bogus", "x"}, want: exitUsage, in: "-bogus"},
		{name: "flag help", args: []string{"validate", "-h"}, want: exitOK, in: "Exit status"},
		{name: "no such tree", args: []string{"validate", "--no-cache", "/nonexistent/tree"}, want: exitError, in: "no such file"},
		{name: "valid", args: []string{"validate", "--no-cache", "../../examples/basic"}, want: exitOK, in: "ok: 4 services"},
		{name: "invalid", args: []string{"validate", "--no-cache", "../../examples/broken"}, want: exitError, in: " errors"},
		{name: "version", args: []string{"version"}, want: exitOK, in: "schema "},
		{name: "version args", args: []string{"version", "x"}, want: exitUsage, in: "no arguments"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			got := run(tc.args, &env{stdout: &out, stderr: &out})
			if got != tc.want {
				t.Errorf("exit %d, want %d; output:\n%s", got, tc.want, out.String())
			}
			if !strings.Contains(out.String(), tc.in) {
				t.Errorf("output lacks %q:\n%s", tc.in, out.String())
			}
		})
	}
}
