package main

import (
	"bytes"
	"runtime/debug"
	"strings"
	"testing"
)

// TestExitCodes pins the exit status contract: 0 ok, 1 any error (bad
// usage included), 2 only for differences (TestScripts: diff, plan).
func TestExitCodes(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want int
		in   string // substring expected in stdout+stderr
	}{
		{name: "no command", args: nil, want: exitError, in: "Usage:"},
		{name: "help", args: []string{"--help"}, want: exitOK, in: "Commands:"},
		{name: "help command", args: []string{"help", "lock"}, want: exitOK, in: "netspec.lock"},
		{name: "help unknown", args: []string{"help", "nope"}, want: exitError, in: "unknown command"},
		{name: "unknown command", args: []string{"nope"}, want: exitError, in: "unknown command"},
		{name: "missing tree", args: []string{"validate"}, want: exitError, in: "want one TREE"},
		{name: "bad flag", args: []string{"validate", "--bogus", "x"}, want: exitError, in: "-bogus"},
		{name: "flag help", args: []string{"validate", "-h"}, want: exitOK, in: "Exit status"},
		{name: "no such tree", args: []string{"validate", "--no-cache", "/nonexistent/tree"}, want: exitError, in: "no such file"},
		{name: "valid", args: []string{"validate", "--no-cache", "../../examples/basic"}, want: exitOK, in: "ok: 4 services"},
		{name: "invalid", args: []string{"validate", "--no-cache", "../../examples/broken"}, want: exitError, in: " errors"},
		{name: "version", args: []string{"version"}, want: exitOK, in: "schema "},
		{name: "version args", args: []string{"version", "x"}, want: exitError, in: "no arguments"},
		{name: "diff typo", args: []string{"diff", "--detailed-exitcode", "--nodee", "x", "a", "b"}, want: exitError, in: "-nodee"},
		{name: "diff one tree", args: []string{"diff", "--detailed-exitcode", "a"}, want: exitError, in: "want OLD_TREE and NEW_TREE"},
		{name: "plan typo", args: []string{"plan", "--detailed-exitcode", "--nodee", "x", "a"}, want: exitError, in: "-nodee"},
		{name: "plan no node", args: []string{"plan", "--detailed-exitcode", "a"}, want: exitError, in: "--node is required"},
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

// TestHelpExitStatus: the help of every command whose exit status a
// script may test states the rule, and the main help states it whole.
func TestHelpExitStatus(t *testing.T) {
	for name, c := range commands {
		if name == "schema" || name == "version" {
			continue // they print, and fail only on a usage error
		}
		var out bytes.Buffer
		printCommandHelp(&out, c)
		if !strings.Contains(out.String(), "Exit status: 0 ") || !strings.Contains(out.String(), "1 any error") {
			t.Errorf("netspec %s --help does not state the exit status rule:\n%s", name, out.String())
		}
	}
	if u := usage(); !strings.Contains(u, exitStatusHelp) {
		t.Errorf("netspec --help lacks the exit status rule:\n%s", u)
	}
}

// TestTuneGC: apply and watch lower the collector's target to their
// percent, and leave it alone when GOGC is in the environment (even set
// to 100).
func TestTuneGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, tt := range []struct {
		name    string
		percent int
		env     map[string]string
		wantSet bool
		want    int
	}{
		{name: "apply, GOGC unset", percent: applyGCPercent, env: map[string]string{}, wantSet: true, want: applyGCPercent},
		{name: "watch, GOGC unset", percent: watchGCPercent, env: map[string]string{}, wantSet: true, want: watchGCPercent},
		{name: "GOGC=100 set", percent: applyGCPercent, env: map[string]string{"GOGC": "100"}, want: 100},
		{name: "GOGC=off set", percent: watchGCPercent, env: map[string]string{"GOGC": "off"}, want: 100},
	} {
		t.Run(tt.name, func(t *testing.T) {
			debug.SetGCPercent(100)
			lookup := func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			if got := tuneGC(tt.percent, lookup); got != tt.wantSet {
				t.Errorf("tuneGC = %v, want %v", got, tt.wantSet)
			}
			if got := debug.SetGCPercent(100); got != tt.want {
				t.Errorf("GC percent = %d, want %d", got, tt.want)
			}
		})
	}
}
