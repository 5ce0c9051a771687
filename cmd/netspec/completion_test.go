package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// completionScript writes `netspec completion SHELL` into a file.
func completionScript(t *testing.T, shell string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run([]string{"completion", shell}, &env{stdout: &out, stderr: &errb}); code != exitOK {
		t.Fatalf("completion %s: exit %d: %s", shell, code, errb.String())
	}
	name := filepath.Join(t.TempDir(), "netspec."+shell)
	if err := os.WriteFile(name, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

// completionDir is a working directory with a tree directory, a spec file
// and a state directory, for file and directory completion.
func completionDir(t *testing.T) string {
	dir := t.TempDir()
	for _, d := range []string{"tree", "state"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "stream.yaml"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestCompletionBash loads the bash script into bash and asks it to
// complete words as bash does on TAB (COMP_WORDS, COMP_CWORD).
func TestCompletionBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed")
	}
	script := completionScript(t, "bash")
	dir := completionDir(t)
	tests := []struct {
		name  string
		words []string // the command line, the last word being completed
		want  []string
	}{
		{name: "command", words: []string{"netspec", "va"}, want: []string{"validate"}},
		{name: "commands", words: []string{"netspec", "re"}, want: []string{"render"}},
		{name: "all commands", words: []string{"netspec", ""}, want: []string{"apply", "cleanup", "completion", "diff", "explain", "lock", "plan", "render", "schema", "status", "validate", "version", "watch", "help"}},
		{name: "flag", words: []string{"netspec", "validate", "--ou"}, want: []string{"--output"}},
		{name: "flags after tree", words: []string{"netspec", "validate", "tree", "--lo"}, want: []string{"--locked"}},
		{name: "flag value", words: []string{"netspec", "validate", "--output", ""}, want: []string{"text", "json"}},
		{name: "flag=value", words: []string{"netspec", "validate", "--output", "=", "j"}, want: []string{"json"}},
		{name: "flag= nothing yet", words: []string{"netspec", "diff", "--format", "=", ""}, want: []string{"text", "markdown", "json"}},
		{name: "dataplane of watch", words: []string{"netspec", "watch", "--dataplane", ""}, want: []string{"nftables", "ipvs", "none"}},
		{name: "dataplane of apply", words: []string{"netspec", "apply", "--dataplane", ""}, want: []string{"nftables", "ipvs"}},
		{name: "scheduler", words: []string{"netspec", "render", "--ipvs-scheduler", "w"}, want: []string{"wrr", "wlc"}},
		{name: "tree", words: []string{"netspec", "validate", ""}, want: []string{"state", "stream.yaml", "tree"}},
		{name: "tree prefix", words: []string{"netspec", "render", "--node", "node-1", "st"}, want: []string{"state", "stream.yaml"}},
		{name: "directory flag", words: []string{"netspec", "render", "--out", ""}, want: []string{"state", "tree"}},
		{name: "free value", words: []string{"netspec", "render", "--node", ""}, want: nil},
		{name: "shells", words: []string{"netspec", "completion", ""}, want: []string{"bash", "zsh", "fish"}},
		{name: "help", words: []string{"netspec", "help", "v"}, want: []string{"validate", "version"}},
		{name: "no arguments", words: []string{"netspec", "version", ""}, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// COMP_WORDS as bash fills it; the script's function fills COMPREPLY.
			prog := `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); _netspec; printf '%s\n' "${COMPREPLY[@]}"`
			cmd := exec.Command(bash, append([]string{"-c", prog, "bash", script}, tt.words...)...)
			cmd.Dir = dir
			var errb bytes.Buffer
			cmd.Stderr = &errb
			out, err := cmd.Output()
			if err != nil || errb.Len() > 0 {
				t.Fatalf("bash: %v\n%s", err, errb.String())
			}
			got := strings.Fields(string(out))
			want := slices.Clone(tt.want)
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("%q: got %q, want %q", tt.words, got, want)
			}
		})
	}
}

// TestCompletionFish asks fish itself what it completes (complete -C).
func TestCompletionFish(t *testing.T) {
	fish, err := exec.LookPath("fish")
	if err != nil {
		t.Skip("fish is not installed (apt-get install fish); completion.txtar checks the script's content only")
	}
	script := completionScript(t, "fish")
	dir := completionDir(t)
	tests := []struct {
		line string
		want []string
	}{
		{line: "netspec va", want: []string{"validate"}},
		{line: "netspec validate --ou", want: []string{"--output"}},
		{line: "netspec validate --output ", want: []string{"text", "json"}},
		{line: "netspec watch --dataplane ", want: []string{"nftables", "ipvs", "none"}},
		{line: "netspec validate ", want: []string{"state/", "stream.yaml", "tree/"}},
		{line: "netspec render --out ", want: []string{"state/", "tree/"}},
		{line: "netspec completion ", want: []string{"bash", "zsh", "fish"}},
	}
	for _, tt := range tests {
		cmd := exec.Command(fish, "--no-config", "-c", `source $argv[1]; complete -C $argv[2]`, script, tt.line)
		cmd.Dir = dir
		var errb bytes.Buffer
		cmd.Stderr = &errb
		out, err := cmd.Output()
		if err != nil || errb.Len() > 0 {
			t.Fatalf("fish: %v\n%s", err, errb.String())
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if l != "" {
				got = append(got, strings.SplitN(l, "\t", 2)[0])
			}
		}
		want := slices.Clone(tt.want)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%q: got %q, want %q", tt.line, got, want)
		}
	}
}

// TestCompletionZsh checks that zsh parses the script and that, called as
// zsh's completion system calls it, it offers the commands and hands each
// command's flag specs to _arguments (stubbed: driving the real completion
// widget needs a terminal).
func TestCompletionZsh(t *testing.T) {
	zsh, err := exec.LookPath("zsh")
	if err != nil {
		t.Skip("zsh is not installed (apt-get install zsh); completion.txtar checks the script's content only")
	}
	script := completionScript(t, "zsh")
	if out, err := exec.Command(zsh, "-n", script).CombinedOutput(); err != nil {
		t.Fatalf("zsh -n: %v\n%s", err, out)
	}
	prog := `compdef() { :; }
_describe() { print -rl -- "${(@P)argv[-1]}"; }
_arguments() { print -rl -- "$@"; }
source $1; shift
words=("$@"); CURRENT=$#
_netspec`
	tests := []struct {
		words []string
		want  []string // lines expected among the output
	}{
		{words: []string{"netspec", ""}, want: []string{"validate:check a tree of specs and report every mistake with its position", "completion:print a shell completion script for netspec's commands and flags"}},
		{words: []string{"netspec", "validate", ""}, want: []string{"--output=[output FORMAT]:output:(text json)", "--locked[also fail when netspec.lock is missing allocations or has stale ones]", "*:TREE:_files"}},
		{words: []string{"netspec", "render", "--out", ""}, want: []string{"--out=[the DIR to write into]:out:_files -/"}},
		{words: []string{"netspec", "completion", ""}, want: []string{"1:argument:(bash zsh fish)"}},
	}
	for _, tt := range tests {
		out, err := exec.Command(zsh, append([]string{"-f", "-c", prog, "zsh", script}, tt.words...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("%q: zsh: %v\n%s", tt.words, err, out)
		}
		lines := strings.Split(string(out), "\n")
		for _, w := range tt.want {
			if !slices.Contains(lines, w) {
				t.Errorf("%q: no line %q in:\n%s", tt.words, w, out)
			}
		}
	}
}
