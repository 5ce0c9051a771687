package main

import (
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"netspec.dev/netspec/applier/state"
	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/internal/atomicfile"
	"netspec.dev/netspec/render"
)

type renderFlags struct {
	loadFlags
	dataplaneFlags
	node string
	out  string
}

var renderCommand = &command{
	name:    "render",
	args:    "TREE --node NODE --out DIR [--dataplane nftables|ipvs] [--ipvs-scheduler rr]",
	summary: "write a node's ruleset, DNS zones, env files and plan as text, for review",
	help: `Render validates TREE, compiles the plan of one node and writes it as text:

  DIR/nftables.nft          the node's ruleset, loadable with 'nft -f'
  DIR/ipvs.txt              with --dataplane ipvs: the IPVS virtual servers, as
                            'ipvsadm -S -n' prints them ('ipvsadm -R' loads
                            them); nftables.nft then holds only what IPVS
                            cannot do (masquerade, source ranges, reject)
  DIR/dns/<zone>.zone       RFC 1035 zone files: the cluster domain and reverse zones
  DIR/env/<namespace>.env   service variables as the kubelet sets them
  DIR/resolv/<namespace>.conf  the resolv.conf the kubelet writes for the
                            namespace's pods (search path, ndots:5, and the
                            Cluster's dnsAddress as nameserver)
  DIR/resolved/             with a Cluster dnsAddress: netspec0.netdev and
                            netspec0.network (systemd-networkd) and
                            resolvectl.sh, which send the zones netspec
                            serves, and only those, to it through
                            systemd-resolved (see deploy/README.md)
  DIR/plan.json             the plan itself

Commit the output (for example under golden/) and every pull request shows
exactly which rules, DNS records and variables change on which node.
Files of these kinds that the plan no longer has (a zone or namespace that
is gone) are removed from DIR; other files in DIR are left alone. Nothing is
written when the tree is invalid.

TREE may also be a single YAML or JSON file, or - for a stream of documents
on standard input (the Cluster, Node, Service, ... objects, and the lock if
any); see 'netspec validate --help'.

Exit status: 0 written; 1 any error (an invalid tree, a usage error such as
an unknown flag).

Examples:
  netspec render examples/basic --node node-1 --out out/node-1
  for n in node-1 node-2; do netspec render . --node $n --out rendered/$n; done
  helm template ./chart | netspec render - --node node-1 --out out/`,
	nargs: 1, want: "one TREE",
	opts: func() options { return &renderFlags{} },
}

func (f *renderFlags) register(fs *flag.FlagSet) {
	f.loadFlags.register(fs)
	f.dataplaneFlags.register(fs, "the data plane to render (`nftables|ipvs`)")
	fs.StringVar(&f.node, "node", "", "the `NODE` to render the plan of (a Node object's name)")
	fs.StringVar(&f.out, "out", "", "the `DIR` to write into (created when missing)")
}

func (f *renderFlags) run(e *env, args []string) int {
	if f.node == "" || f.out == "" {
		return e.usageError("render", "--node and --out are required")
	}
	if !f.checkDataplane(e, "render") {
		return exitError
	}
	l := loadValid(e, "render", args[0], &f.loadFlags, "nothing written")
	if l == nil {
		return exitError
	}
	p := compileLoaded(e, "render", l, f.node, compiler.Options{})
	if p == nil {
		return exitError
	}
	var files map[string][]byte
	var err error
	if f.dataplane == "ipvs" {
		files, err = render.FilesIPVS(p, f.ipvsScheduler)
	} else {
		files, err = render.Files(p, render.DataplaneNFTables)
	}
	if err != nil {
		return e.fail("render", "%v", err)
	}
	written, removed, err := writeRendered(f.out, files)
	if err != nil {
		return e.fail("render", "%v", err)
	}
	fmt.Fprintf(e.stdout, "rendered node %s into %s: %s\n", f.node, f.out, strings.Join(written, ", "))
	if len(removed) > 0 {
		fmt.Fprintf(e.stdout, "removed files the plan no longer has: %s\n", strings.Join(removed, ", "))
	}
	return exitOK
}

// renderedKind reports whether a path inside an output directory is a file
// that render writes, so that stale ones can be removed and nothing else
// is: the kernel's files and systemd-resolved's, and those a state dir
// holds but its plan.log.
func renderedKind(rel string) bool {
	switch rel {
	case "nftables.nft", "ipvs.txt",
		"resolved/" + render.DNSLink + ".netdev", "resolved/" + render.DNSLink + ".network", "resolved/resolvectl.sh":
		return true
	}
	return rel != state.LogFile && state.IsManaged(rel)
}

// writeRendered writes files (slash paths) below dir, each atomically,
// skipping files whose content is unchanged, and removes rendered files
// that are not in files. It returns the written paths (all of files, in
// order) and the removed ones.
func writeRendered(dir string, files map[string][]byte) (written, removed []string, err error) {
	written = slices.Sorted(maps.Keys(files))
	for _, name := range written {
		full := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return nil, nil, err
		}
		if old, err := os.ReadFile(full); err == nil && string(old) == string(files[name]) {
			continue
		}
		if err := atomicfile.WriteFile(full, files[name], 0o644); err != nil {
			return nil, nil, err
		}
	}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if _, keep := files[rel]; keep || !renderedKind(rel) {
			return nil
		}
		removed = append(removed, rel)
		return os.Remove(p)
	})
	return written, removed, err
}
