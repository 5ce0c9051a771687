package main

import (
	"cmp"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"

	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/schema"
	"netspec.dev/netspec/treediff"
)

type diffFlags struct {
	loadFlags
	node     string
	format   string
	detailed bool
}

var diffCommand = &command{
	name:    "diff",
	args:    "OLD_TREE NEW_TREE [--node N] [--format text|markdown|json] [--detailed-exitcode]",
	summary: "show what changing OLD_TREE into NEW_TREE changes, for review",
	help: `Diff validates both trees, compiles each for every node (the Node objects of
either tree) and compares the results: not the files, but what the nodes
would do.

It reports Services added, removed and changed (type, cluster IPs, external
and LoadBalancer IPs, node ports, session affinity, traffic policies, ports),
endpoints added, removed or changed (ready, serving, terminating, node), the
endpoints a node starts or stops forwarding traffic to (under a Local traffic
policy or topology this differs between nodes and is reported per node),
DNS records added and removed per zone, service environment variables per
namespace, and per node the nftables changes, counted by comparing the two
rulesets as netspec would install them: chains added, removed or changed, and
set and map elements added or removed. A change that is the same on every node is reported once.

An invalid tree is an error: its diagnostics are printed and diff exits 1.

Either tree may be a single YAML or JSON file, or - (one of them) for a
stream of documents on standard input; see 'netspec validate --help'.

Formats:
  text      one line per change: + added, - removed, ~ changed (default)
  markdown  for a pull-request comment: summary, a section per Service,
            DNS and env changes as diff blocks, the per-node counts as a table
  json      the whole diff, with stable lowerCamelCase field names

Exit status: 0 done, whether or not there are differences; 1 any error (an
invalid tree, a node in neither tree, a usage error such as an unknown
flag). With --detailed-exitcode, as terraform plan: 0 no differences,
2 differences, 1 any error; 2 never means anything else.

Examples:
  netspec diff main/ pr/
  netspec diff --node node-1 main/ pr/
  netspec diff --format markdown main/ pr/ > comment.md
  netspec diff --format json main/ pr/ | jq '.services[].name'
  netspec diff --detailed-exitcode main/ pr/; [ $? -ne 1 ]   # in CI: 2 means changes
  git worktree add /tmp/main origin/main && netspec diff /tmp/main .
  kubectl get svc,endpointslices,pods,nodes -A -o yaml | netspec diff . -`,
	nargs: 2, want: "OLD_TREE and NEW_TREE",
	opts: func() options { return &diffFlags{} },
}

func (f *diffFlags) register(fs *flag.FlagSet) {
	f.loadFlags.register(fs)
	fs.StringVar(&f.node, "node", "", "compare the plans of node `N` only (default: every node of either tree)")
	fs.StringVar(&f.format, "format", "text", "output `FORMAT`: text, markdown or json")
	fs.BoolVar(&f.detailed, "detailed-exitcode", false, "exit 0 when there are no differences, 2 when there are, 1 on error")
}

func (f *diffFlags) run(e *env, args []string) int {
	if !slices.Contains([]string{"text", "markdown", "json"}, f.format) {
		return e.fail("diff", "--format %q: want text, markdown or json", f.format)
	}
	if args[0] == "-" && args[1] == "-" {
		return e.fail("diff", "only one tree can be - (standard input)")
	}
	var trees [2]*loaded
	names := map[string]bool{} // the nodes of either tree
	failed := false
	for i, root := range args {
		l, err := loadTree(e, root, &f.loadFlags)
		if err != nil {
			return e.fail("diff", "%v", err)
		}
		if n := l.Diags.Errors(); n > 0 {
			printDiags(e, l.Diags)
			fmt.Fprintf(e.stderr, "%s is invalid: %s, %s\n", root, treediff.Plural(l.Diags.Files(), "file"), treediff.Plural(n, "error"))
			failed = true
		}
		trees[i] = l
		maps.Copy(names, treeNodes(l.tree))
	}
	if failed {
		return exitError
	}
	if f.node != "" {
		if !names[f.node] {
			nodes := cmp.Or(strings.Join(slices.Sorted(maps.Keys(names)), ", "), "none")
			return e.fail("diff", "node %s is in neither tree (their nodes: %s)", f.node, nodes)
		}
		names = map[string]bool{f.node: true}
	}
	var plans [2]map[string]*plan.Plan
	for i, l := range trees {
		p, err := compileNodes(l, names)
		if err != nil {
			return e.fail("diff", "%s: %v", args[i], err)
		}
		plans[i] = p
	}
	d := treediff.Diff(plans[0], plans[1])

	switch f.format {
	case "json":
		if err := treediff.WriteJSON(e.stdout, d); err != nil {
			return e.fail("diff", "%v", err)
		}
	case "markdown":
		treediff.WriteMarkdown(e.stdout, d)
	default:
		treediff.WriteText(e.stdout, d, treediff.TextOptions{Records: true})
	}
	if f.detailed && !d.Empty() {
		return exitChanges
	}
	return exitOK
}

// treeNodes returns the names of a tree's Node objects.
func treeNodes(t *schema.Tree) map[string]bool {
	out := map[string]bool{}
	for _, o := range t.Objects {
		if o.Node != nil {
			out[o.Node.Metadata.Name] = true
		}
	}
	return out
}

// compileNodes compiles a tree for each of the nodes it has. When neither
// tree has Node objects (names is empty), the tree is compiled for a node
// of its own, treediff.EveryNode, that holds no endpoint.
func compileNodes(l *loaded, names map[string]bool) (map[string]*plan.Plan, error) {
	objs, has := l.tree.Objects, treeNodes(l.tree)
	if len(names) == 0 {
		names = map[string]bool{treediff.EveryNode: true}
		objs = append(objs[:len(objs):len(objs)], &schema.Object{
			APIVersion: "v1", Kind: schema.KindNode,
			Node: &schema.Node{Metadata: schema.ObjectMeta{Name: treediff.EveryNode}},
		})
		has = names
	}
	out := map[string]*plan.Plan{}
	for n := range names {
		if !has[n] {
			continue
		}
		p, err := compiler.Compile(objs, l.Checked, n)
		if err != nil {
			return nil, err
		}
		out[n] = p
	}
	return out, nil
}
