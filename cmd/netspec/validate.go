package main

import (
	"flag"
	"fmt"
	"strings"

	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/schema"
)

type validateFlags struct {
	loadFlags
	locked bool
}

func init() {
	register(&command{
		name:    "validate",
		args:    "TREE [--locked]",
		summary: "check a tree of specs and report every mistake with its position",
		help: `Validate reads every .yaml, .yml, .json and .cue file below TREE (dot-files
and dot-directories are skipped, and so is what a .netspecignore file
leaves out, in gitignore syntax; kustomization.yaml, Chart.yaml and
values*.yaml are skipped and listed), checks each object against netspec's
embedded CUE schema and the Kubernetes API rules, then checks the objects
against each other (duplicate names, two Services with one IP, a node port
used twice, ...). Every error is printed as file:line:col: field: message,
all of them in one run. Objects of kinds netspec does not use are listed as
ignored. Warnings (a selector that matches no pod) never fail the run.

With --locked, validate also fails when netspec.lock does not record exactly
the cluster IPs and node ports the tree needs, as 'go mod tidy' checks go.mod:
use it in CI so that allocations are always reviewed and committed.

Exit status: 0 valid; 1 any error: the tree is invalid, or a usage error
(an unknown flag, a missing TREE).

Examples:
  netspec validate examples/basic
  netspec validate --locked .`,
		flags: func(fs *flag.FlagSet) any {
			f := &validateFlags{}
			f.register(fs)
			fs.BoolVar(&f.locked, "locked", false, "also fail when netspec.lock is missing allocations or has stale ones")
			return f
		},
		run: runValidate,
	})
}

func runValidate(e *env, opts any, args []string) int {
	f := opts.(*validateFlags)
	if !needArgs(e, "validate", args, 1, "one TREE") {
		return exitError
	}
	l, err := loadTree(e, args[0], &f.loadFlags)
	if err != nil {
		fmt.Fprintf(e.stderr, "netspec validate: %v\n", err)
		return exitError
	}
	printDiags(e, l.diags)
	errs := l.diags.Errors()
	if errs > 0 {
		fmt.Fprintf(e.stderr, "%s, %s\n", plural(l.diags.Files(), "file"), plural(errs, "error"))
		return exitError
	}
	if f.locked {
		want := l.checked.Alloc.Lock()
		if lines := compiler.LockDiff(l.lock, want); len(lines) > 0 {
			for _, s := range lines {
				fmt.Fprintf(e.stderr, "%s: %s\n", LockFile, s)
			}
			fmt.Fprintf(e.stderr, "%s is not up to date: run 'netspec lock %s' and commit it\n", LockFile, args[0])
			return exitError
		}
	}
	fmt.Fprintln(e.stdout, summary(l.tree))
	return exitOK
}

// summary is the one-line report of a valid tree.
func summary(t *schema.Tree) string {
	counts := map[string]int{}
	for _, o := range t.Objects {
		counts[o.Kind]++
	}
	parts := []string{plural(counts[schema.KindService], "service"), plural(counts[schema.KindPod], "pod"), plural(counts[schema.KindNode], "node")}
	if n := counts[schema.KindEndpoints]; n > 0 {
		parts = append(parts, plural(n, "Endpoints object"))
	}
	if n := counts[schema.KindEndpointSlice]; n > 0 {
		parts = append(parts, plural(n, "endpoint slice"))
	}
	s := "ok: " + strings.Join(parts, ", ")
	if n := len(t.Ignored); n > 0 {
		var ig []string
		for _, i := range t.Ignored {
			ig = append(ig, i.String())
		}
		s += fmt.Sprintf(" (%s ignored: %s)", plural(n, "object"), strings.Join(ig, "; "))
	}
	if n := len(t.Skipped); n > 0 {
		var sk []string
		for _, f := range t.Skipped {
			sk = append(sk, f.String())
		}
		s += fmt.Sprintf(" (%s skipped: %s)", plural(n, "file"), strings.Join(sk, "; "))
	}
	return s
}

func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}
