package main

import (
	"cmp"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"

	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/internal/diag"
	"netspec.dev/netspec/schema"
	"netspec.dev/netspec/treediff"
)

type validateFlags struct {
	loadFlags
	locked  bool
	verbose bool
	output  string
}

var validateCommand = &command{
	name:    "validate",
	args:    "TREE [--locked] [--verbose] [--output text|json]",
	summary: "check a tree of specs and report every mistake with its position",
	help: `Validate reads every .yaml, .yml, .json and .cue file below TREE (dot-files
and dot-directories are skipped, and so is what a .netspecignore file
leaves out, in gitignore syntax; kustomization.yaml, Chart.yaml and
values*.yaml are skipped and listed), checks each object against netspec's
embedded CUE schema and the Kubernetes API rules, then checks the objects
against each other (duplicate names, two Services with one IP, a node port
used twice, ...). Every error is printed as file:line:col: field: message,
all of them in one run. Objects of kinds netspec does not use are ignored
and counted by kind; --verbose lists each one with its file:line. A kind
netspec uses with another group's apiVersion, or spelt in another case
(kind: service), is an error, as the API server has no such kind. YAML is
read as kubectl reads it: unquoted yes, no, on, off, y and n are booleans.
Warnings (a selector that matches no pod, a port name repeated across
containers) never fail the run.
` + treeArgHelp + `
With --locked, validate also fails when netspec.lock does not record exactly
the cluster IPs and node ports the tree needs, as 'go mod tidy' checks go.mod:
use it in CI so that allocations are always reviewed and committed.

--output json prints one JSON object on stdout instead, for editors and CI
annotations (nothing on stderr but warnings about the cache):
  {"valid": bool,              false when an error was found (exit 1)
   "errors": n, "warnings": n,
   "findings": [{"file", "line", "column", "severity", "field", "message"}],
   "objects": {"Service": n, ...},         the objects netspec uses, by kind
   "ignored": {"count": n, "kinds": {"Deployment": n, ...},
               "objects": [{"apiVersion", "kind", "name", "file", "line", "column"}]},
   "skipped": [{"file", "what"}]}         kustomize and Helm files not read
Findings are sorted by file, line and column; severity is "error" or
"warning"; line and column are 0 and field is "" when unknown; file is
relative to a TREE directory (a TREE file as given, "<stdin>" for -). A
TREE that cannot be read at all is one finding with the TREE as its file.

Exit status: 0 valid; 1 any error: the tree is invalid, or a usage error
(an unknown flag, a missing TREE).

Examples:
  netspec validate examples/basic
  netspec validate --locked .
  netspec validate --output json . | jq -r '.findings[] | "\(.file):\(.line): \(.message)"'
  kubectl get svc,endpointslices,pods,nodes -A -o yaml | netspec validate -`,
	nargs: 1, want: "one TREE",
	opts: func() options { return &validateFlags{} },
}

func (f *validateFlags) register(fs *flag.FlagSet) {
	f.loadFlags.register(fs)
	fs.BoolVar(&f.locked, "locked", false, "also fail when netspec.lock is missing allocations or has stale ones")
	fs.BoolVar(&f.verbose, "verbose", false, "list every ignored object with its file:line, not only their count by kind")
	fs.StringVar(&f.output, "output", "text", "output `FORMAT`: text (findings on stderr, the summary on stdout) or json (one object on stdout)")
}

func (f *validateFlags) run(e *env, args []string) int {
	if f.output != "text" && f.output != "json" {
		return e.fail("validate", "--output must be text or json, not %q", f.output)
	}
	l, err := loadTree(e, args[0], &f.loadFlags)
	if err != nil {
		if f.output == "json" {
			r := newValidateReport(&schema.Tree{}, nil)
			r.Findings = append(r.Findings, finding{File: args[0], Severity: "error", Message: err.Error()})
			r.Errors++
			return printValidateJSON(e, r)
		}
		return e.fail("validate", "%v", err)
	}
	// With --locked, the lock's differences from what the tree needs, and
	// what to do about them.
	var stale []string
	var hint string
	if f.locked && l.Diags.Errors() == 0 {
		stale = compiler.LockDiff(l.Lock, l.Checked.Alloc.Lock())
		if l.tree.Stream() {
			hint = fmt.Sprintf("the lock document is not up to date: run 'netspec lock' on a directory of these documents and put its %s in", LockFile)
		} else {
			hint = fmt.Sprintf("%s is not up to date: run 'netspec lock %s' and commit it", LockFile, args[0])
		}
	}
	if f.output == "json" {
		r := newValidateReport(l.tree, l.Diags)
		if len(stale) > 0 {
			for _, s := range append(stale, hint) {
				r.Findings = append(r.Findings, finding{File: l.lockFile(), Severity: "error", Message: s})
				r.Errors++
			}
		}
		return printValidateJSON(e, r)
	}
	printDiags(e, l.Diags)
	if errs := l.Diags.Errors(); errs > 0 {
		fmt.Fprintf(e.stderr, "%s, %s\n", treediff.Plural(l.Diags.Files(), "file"), treediff.Plural(errs, "error"))
		return exitError
	}
	if len(stale) > 0 {
		for _, s := range stale {
			fmt.Fprintf(e.stderr, "%s: %s\n", l.lockFile(), s)
		}
		if l.tree.Stream() {
			hint = l.lockFile() + ": " + hint
		}
		fmt.Fprintln(e.stderr, hint)
		return exitError
	}
	fmt.Fprintln(e.stdout, summary(l.tree))
	if f.verbose {
		for _, i := range l.tree.Ignored {
			fmt.Fprintf(e.stdout, "ignored: %s: %s\n", i.Pos, strings.TrimSuffix(i.String(), " in "+i.Pos.File))
		}
	}
	return exitOK
}

// validateReport is the JSON form of validate's result (--output json); its
// fields are documented in validate's --help and must stay compatible.
type validateReport struct {
	Valid    bool           `json:"valid"`
	Errors   int            `json:"errors"`
	Warnings int            `json:"warnings"`
	Findings []finding      `json:"findings"`
	Objects  map[string]int `json:"objects"`
	Ignored  ignoredReport  `json:"ignored"`
	Skipped  []skippedFile  `json:"skipped"`
}

// finding is one diagnostic, for tools.
type finding struct {
	File     string `json:"file"`
	Line     int    `json:"line"`
	Column   int    `json:"column"`
	Severity string `json:"severity"` // "error" or "warning"
	Field    string `json:"field"`    // the path in the object (spec.ports[0].port), "" when unknown
	Message  string `json:"message"`
}

type ignoredReport struct {
	Count   int             `json:"count"`
	Kinds   map[string]int  `json:"kinds"`
	Objects []ignoredObject `json:"objects"`
}

type ignoredObject struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	File       string `json:"file"`
	Line       int    `json:"line"`
	Column     int    `json:"column"`
}

type skippedFile struct {
	File string `json:"file"`
	What string `json:"what"`
}

// newValidateReport is the report of a loaded tree and its diagnostics.
func newValidateReport(t *schema.Tree, dl diag.List) *validateReport {
	r := &validateReport{
		Errors:   dl.Errors(),
		Warnings: dl.Warnings(),
		Findings: []finding{},
		Objects:  map[string]int{},
		Ignored:  ignoredReport{Count: len(t.Ignored), Kinds: map[string]int{}, Objects: []ignoredObject{}},
		Skipped:  []skippedFile{},
	}
	for _, d := range dl {
		sev := "error"
		if d.Severity == diag.Warning {
			sev = "warning"
		}
		r.Findings = append(r.Findings, finding{File: d.Pos.File, Line: d.Pos.Line, Column: d.Pos.Col, Severity: sev, Field: d.Path.String(), Message: d.Msg})
	}
	for _, o := range t.Objects {
		r.Objects[o.Kind]++
	}
	for _, i := range t.Ignored {
		r.Ignored.Kinds[i.Kind]++
		r.Ignored.Objects = append(r.Ignored.Objects, ignoredObject{APIVersion: i.APIVersion, Kind: i.Kind, Name: i.Name, File: i.Pos.File, Line: i.Pos.Line, Column: i.Pos.Col})
	}
	for _, s := range t.Skipped {
		r.Skipped = append(r.Skipped, skippedFile{File: s.File, What: s.What})
	}
	return r
}

// printValidateJSON prints r, valid when it counts no error; the exit
// status says whether the tree is valid.
func printValidateJSON(e *env, r *validateReport) int {
	r.Valid = r.Errors == 0
	if code := e.printJSON("validate", r); code != exitOK || !r.Valid {
		return exitError
	}
	return exitOK
}

// summary is the one-line report of a valid tree.
func summary(t *schema.Tree) string {
	counts := map[string]int{}
	for _, o := range t.Objects {
		counts[o.Kind]++
	}
	parts := []string{treediff.Plural(counts[schema.KindService], "service"), treediff.Plural(counts[schema.KindPod], "pod"), treediff.Plural(counts[schema.KindNode], "node")}
	if n := counts[schema.KindEndpoints]; n > 0 {
		parts = append(parts, treediff.Plural(n, "Endpoints object"))
	}
	if n := counts[schema.KindEndpointSlice]; n > 0 {
		parts = append(parts, treediff.Plural(n, "endpoint slice"))
	}
	s := "ok: " + strings.Join(parts, ", ")
	if len(t.Ignored) > 0 {
		s += fmt.Sprintf(" (%s ignored: %s; --verbose lists them)", treediff.Plural(len(t.Ignored), "object"), ignoredByKind(t.Ignored))
	}
	if n := len(t.Skipped); n > 0 {
		var sk []string
		for _, f := range t.Skipped {
			sk = append(sk, f.String())
		}
		s += fmt.Sprintf(" (%s skipped: %s)", treediff.Plural(n, "file"), strings.Join(sk, "; "))
	}
	return s
}

// shownKinds is how many kinds of ignored objects the summary names; the
// rest are counted together.
const shownKinds = 4

// ignoredByKind counts ignored objects by kind, most frequent first:
// "300 ConfigMap, 100 Deployment, 12 of 3 other kinds".
func ignoredByKind(ig []schema.Ignored) string {
	counts := map[string]int{}
	for _, i := range ig {
		counts[cmp.Or(i.Kind, "(no kind)")]++
	}
	kinds := slices.SortedFunc(maps.Keys(counts), func(a, b string) int {
		return cmp.Or(cmp.Compare(counts[b], counts[a]), strings.Compare(a, b))
	})
	var parts []string
	for i, k := range kinds {
		if i == shownKinds && len(kinds) > shownKinds+1 {
			rest := 0
			for _, k := range kinds[i:] {
				rest += counts[k]
			}
			parts = append(parts, fmt.Sprintf("%d of %d other kinds", rest, len(kinds)-i))
			break
		}
		parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
	}
	return strings.Join(parts, ", ")
}
