package schema

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"netspec.dev/netspec/internal/diag"
)

// writeTree writes files (slash paths relative to the root) into a new
// temporary directory and returns it.
func writeTree(t testing.TB, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, data := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func loadTree(t testing.TB, root string, opt Options) *Tree {
	t.Helper()
	tr, err := Load(root, opt)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return tr
}

// loadFiles writes files into a temporary tree and loads it.
func loadFiles(t testing.TB, files map[string]string) *Tree {
	t.Helper()
	return loadTree(t, writeTree(t, files), Options{})
}

func diagStrings(l diag.List) []string {
	out := make([]string, len(l))
	for i, d := range l {
		out[i] = d.String()
	}
	return out
}

const webService = `apiVersion: v1
kind: Service
metadata: {name: %s}
spec:
  ports: [{port: 80}]
`

func svcYAML(name string) string { return fmt.Sprintf(webService, name) }

func objectNames(tr *Tree) []string {
	var out []string
	for _, o := range tr.Objects {
		out = append(out, fmt.Sprintf("%s %s/%s", o.Kind, o.Meta().Namespace, o.Meta().Name))
	}
	return out
}

func wantNoDiags(t *testing.T, tr *Tree) {
	t.Helper()
	if len(tr.Diags) != 0 {
		t.Errorf("want no diagnostics, got:\n%s", strings.Join(diagStrings(tr.Diags), "\n"))
	}
}

// wantDiags checks the diagnostics with matchDiags (substrings, one each).
func wantDiags(t *testing.T, tr *Tree, want ...string) {
	t.Helper()
	if msg := matchDiags(diagStrings(tr.Diags), want); msg != "" {
		t.Error(msg)
	}
}

func TestLoadRecursiveAndExtensions(t *testing.T) {
	tr := loadFiles(t, map[string]string{
		"a.yaml":             svcYAML("a"),
		"sub/b.yml":          svcYAML("b"),
		"sub/deeper/c.YAML":  svcYAML("c"),
		"sub/deeper/d.json":  `{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "d"}, "spec": {"ports": [{"port": 80}]}}`,
		"README.md":          "apiVersion: v1\nkind: Service\n",
		"sub/notes.txt":      "not a spec",
		"sub/deeper/x.yaml~": "apiVersion: v1\nkind: Service\n",
	})
	wantNoDiags(t, tr)
	want := []string{"Service default/a", "Service default/b", "Service default/c", "Service default/d"}
	if diff := lineDiff(want, objectNames(tr)); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	if tr.Files != 4 {
		t.Errorf("Files = %d, want 4", tr.Files)
	}
	if got := tr.Objects[2].Src.File; got != "sub/deeper/c.YAML" {
		t.Errorf("Src.File = %q, want a slash path relative to the root", got)
	}
}

func TestLoadMultiDocumentAndList(t *testing.T) {
	tr := loadFiles(t, map[string]string{"all.yaml": `# comment only
---
` + svcYAML("one") + `---
---
# empty document above
` + svcYAML("two") + `---
apiVersion: v1
kind: List
items:
- ` + strings.ReplaceAll(strings.TrimSpace(svcYAML("three")), "\n", "\n  ") + `
- {apiVersion: v1, kind: Node, metadata: {name: n1}}
---
apiVersion: v1
kind: ServiceList
items:
- {apiVersion: v1, kind: Service, metadata: {name: four}, spec: {ports: [{port: 80}]}}
`})
	wantNoDiags(t, tr)
	var got []string
	for _, o := range tr.Objects {
		got = append(got, fmt.Sprintf("%s doc=%d item=%d", o.Meta().Name, o.Src.Doc, o.Src.Item))
	}
	// Doc counts the documents yaml.v3 returns (a comment before the first
	// "---" belongs to the first one); Tree.Locate counts the same way.
	want := []string{"one doc=0 item=-1", "two doc=2 item=-1", "three doc=3 item=0", "n1 doc=3 item=1", "four doc=4 item=0"}
	if diff := lineDiff(want, got); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
}

func TestLoadBadDocuments(t *testing.T) {
	tr := loadFiles(t, map[string]string{
		"list.yaml":     "apiVersion: v1\nkind: List\nitems: {a: b}\n",
		"items.yaml":    "apiVersion: v1\nkind: List\nitems: [1, {apiVersion: v1}]\n",
		"scalar.yaml":   "just a string\n",
		"seq.yaml":      "- a\n- b\n",
		"nokind.yaml":   "apiVersion: v1\nmetadata: {name: x}\n",
		"syntax.yaml":   "apiVersion: v1\nkind: Service\nmetadata: {name: x\n",
		"dupkey.yaml":   "apiVersion: v1\nkind: Service\nkind: Pod\n",
		"bigint.yaml":   "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {ports: [{port: 99999999999999999999}]}\n",
		"nan.yaml":      "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {ports: [{port: .nan}]}\n",
		"syntax.json":   `{"apiVersion": "v1",}`,
		"tab.yaml":      "apiVersion: v1\nkind: Service\nmetadata:\n\tname: x\n",
		"complex.yaml":  "? [a]\n: b\n",
		"after.yaml":    svcYAML("ok") + "---\n: :\n",
		"notutf8.yaml":  "apiVersion: v1\nkind: Service\nmetadata: {name: \xff}\n",
		"nullkind.yaml": "apiVersion: v1\nkind: null\n",
	})
	wantDiags(t, tr,
		"list.yaml:3:8: items: a List needs a list of items",
		"items.yaml:3:9: items[0]: a List item must be a mapping with apiVersion and kind",
		"items.yaml:3:12: object has no kind (string)",
		"scalar.yaml:1:1: this file holds no Kubernetes object (a document must be a mapping with apiVersion and kind, not a string); if netspec should not read it, list it in a .netspecignore file",
		"seq.yaml:1:1: this file holds no Kubernetes object (a document must be a mapping with apiVersion and kind, not a list); if netspec should not read it, list it in a .netspecignore file",
		"nokind.yaml:1:1: object has no kind (string)",
		"syntax.yaml:",
		"dupkey.yaml:3:1: key \"kind\" is repeated in this mapping",
		"bigint.yaml:4:23: spec.ports[0].port: 1e+20 is out of range 1..65535",
		"nan.yaml:4:23: .nan is not a finite number",
		"syntax.json:1:1: object has no kind", // YAML reads JSON: the trailing comma is allowed
		"tab.yaml:",
		"complex.yaml:1:3: a mapping key must be a scalar",
		"after.yaml:",
		"notutf8.yaml:",
		"nullkind.yaml:1:1: object has no kind (string)",
	)
	// The valid document before a broken one is still read.
	if got := objectNames(tr); len(got) != 1 || got[0] != "Service default/ok" {
		t.Errorf("objects = %v, want the one valid Service", got)
	}
}

func TestLoadCUE(t *testing.T) {
	tr := loadFiles(t, map[string]string{
		"cue/defs.cue": `package shop

// A template shared by the other file of the package.
#Web: {
	_name: string
	apiVersion: "v1"
	kind:       "Service"
	metadata: {name: _name, namespace: "shop"}
	spec: {
		selector: app: _name
		ports: [{name: "http", port: 80, targetPort: "http"}]
		...
	}
}
`,
		"cue/objs.cue": `package shop

services: web: #Web & {_name: "web"}
services: api: #Web & {_name: "api", spec: sessionAffinity: "ClientIP"}
nodes: [{apiVersion: "v1", kind: "Node", metadata: name: "n1"}]
_hidden: #Web & {_name: "hidden"}
#NotAnObject: {apiVersion: "v1", kind: "Service", metadata: name: "nope"}
deep: a: b: c: {apiVersion: "v1", kind: "Endpoints", metadata: {name: "web", namespace: "shop"}}
other: {apiVersion: "apps/v1", kind: "Deployment", metadata: name: "d"}
`,
		// Another directory is another package, which may have another name.
		"cue/more/x.cue": `package more

import "strings"

svc: {apiVersion: "v1", kind: "Service", metadata: name: strings.ToLower("MORE"), spec: ports: [{port: 443}]}
`,
	})
	wantNoDiags(t, tr)
	var got []string
	for _, o := range tr.Objects {
		got = append(got, fmt.Sprintf("%s %s/%s at %s %s", o.Kind, o.Meta().Namespace, o.Meta().Name, o.Src.File, o.Src.CUE))
	}
	want := []string{
		"Service shop/web at cue/objs.cue services.web",
		"Service shop/api at cue/objs.cue services.api",
		"Node /n1 at cue/objs.cue nodes[0]",
		"Endpoints shop/web at cue/objs.cue deep.a.b.c",
		"Service default/more at cue/more/x.cue svc",
	}
	// The order of objects within a package is CUE's field order; compare as sets.
	sort.Strings(want)
	sort.Strings(got)
	if diff := lineDiff(want, got); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	if len(tr.Ignored) != 1 || tr.Ignored[0].Kind != "Deployment" {
		t.Errorf("ignored = %v, want the Deployment", tr.Ignored)
	}
	for _, o := range tr.Objects {
		if o.Meta().Name == "api" {
			c := o.Service.Spec.SessionAffinityConfig
			if c == nil || c.ClientIP == nil || c.ClientIP.TimeoutSeconds != 10800 {
				t.Errorf("api: defaults not applied to a CUE object: %+v", c)
			}
			if tp := o.Service.Spec.Ports[0].TargetPort; tp.Str != "http" {
				t.Errorf("api: targetPort = %v, want http", tp)
			}
		}
	}
}

func TestLoadCUEErrors(t *testing.T) {
	tr := loadFiles(t, map[string]string{
		"syntax/a.cue": "package a\n\nx: {\n\ty: 1 +\n}\n",
		"two/a.cue":    "package one\n\na: 1\n",
		"two/b.cue":    "package two\n\nb: 1\n",
		"conflict/a.cue": `package c

svc: {apiVersion: "v1", kind: "Service", metadata: name: "web", spec: ports: [{port: 80}]}
svc: spec: ports: [{port: 81}]
`,
		"invalid/a.cue": `package v

svc: {apiVersion: "v1", kind: "Service", metadata: name: "Web", spec: ports: [{port: 80, protocl: "TCP"}]}
`,
		"imports/a.cue": "package i\n\nimport \"example.com/x\"\n\na: x.b\n",
	})
	wantDiags(t, tr,
		"syntax/a.cue:5:1: expected operand",
		"two/b.cue:1:1: package two differs from package one of the other .cue files in two (one package per directory)",
		"conflict/a.cue:4:27: svc.spec.ports[0].port: conflicting values 81 and 80",
		`invalid/a.cue:3:52: metadata.name: "Web" is not a valid Service name`, // CUE positions are the field's
		`invalid/a.cue:3:90: spec.ports[0].protocl: unknown field "protocl" (did you mean "protocol"?)`,
		`imports/a.cue:3:8: import "example.com/x": only CUE's standard library can be imported`,
	)
}

func TestLoadSkipsDotfiles(t *testing.T) {
	tr := loadFiles(t, map[string]string{
		"a.yaml":              svcYAML("a"),
		".hidden.yaml":        "not: [valid",
		".git/config.yaml":    "not: [valid",
		"sub/.secret/x.yaml":  "not: [valid",
		"sub/.b.yml":          "not: [valid",
		".cue/x.cue":          "package x\n\nnot valid",
		"sub/dir.d/.only.cue": "package x\n\nnot valid",
	})
	wantNoDiags(t, tr)
	if tr.Files != 1 || len(tr.Objects) != 1 {
		t.Errorf("Files = %d, objects = %d; want 1 and 1", tr.Files, len(tr.Objects))
	}
}

func TestLoadSymlinks(t *testing.T) {
	outside := writeTree(t, map[string]string{"o.yaml": svcYAML("outside"), "dir/p.yaml": svcYAML("outside2")})
	root := writeTree(t, map[string]string{
		"a.yaml":            svcYAML("a"),
		".shared/base.yaml": svcYAML("shared"),
		".shared/dir/x.yml": svcYAML("shareddir"),
	})
	links := map[string]string{
		"out.yaml":       filepath.Join(outside, "o.yaml"),
		"outdir":         filepath.Join(outside, "dir"),
		"sub/rel-out":    "../../" + filepath.Base(outside),
		"in.yaml":        ".shared/base.yaml",
		"indir":          ".shared/dir",
		"loop/self":      ".",
		"loop/up":        "..",
		"broken.yaml":    "does-not-exist.yaml",
		"cycle-a.yaml":   "cycle-b.yaml",
		"cycle-b.yaml":   "cycle-a.yaml",
		"sub/escape.yml": "../../../../../../../../../../etc/hostname",
	}
	for name, target := range links {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Skipf("symlinks not supported: %v", err)
		}
	}
	done := make(chan *Tree)
	go func() { done <- loadTree(t, root, Options{}) }()
	var tr *Tree
	select {
	case tr = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Load did not return: a symlink loop is followed forever")
	}
	wantDiags(t, tr,
		"out.yaml: symlink points outside the tree",
		"outdir: symlink points outside the tree",
		"sub/rel-out: symlink points outside the tree",
		"sub/escape.yml:",
		"broken.yaml: broken symlink",
		"cycle-a.yaml: broken symlink",
		"cycle-b.yaml: broken symlink",
	)
	want := []string{"Service default/a", "Service default/shared", "Service default/shareddir"}
	if diff := lineDiff(want, objectNames(tr)); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	for _, o := range tr.Objects {
		if strings.Contains(o.Src.File, ".shared") {
			t.Errorf("%s: an object reached through a symlink is named by the link, not its target", o.Src.File)
		}
	}
	// The tree root itself may be a symlink.
	link := filepath.Join(t.TempDir(), "root-link")
	if err := os.Symlink(root, link); err != nil {
		t.Fatal(err)
	}
	tr2 := loadTree(t, link, Options{})
	if diff := lineDiff(diagStrings(tr.Diags), diagStrings(tr2.Diags)); diff != "" {
		t.Errorf("root through a symlink: diagnostics differ:\n%s", diff)
	}
}

func TestLoadMaxFileSize(t *testing.T) {
	big := svcYAML("big") + "# " + strings.Repeat("x", 2000) + "\n"
	root := writeTree(t, map[string]string{"big.yaml": big, "small.yaml": svcYAML("small"), "big.cue": "package x\n// " + strings.Repeat("x", 2000) + "\n"})
	tr := loadTree(t, root, Options{MaxFileSize: 1024})
	wantDiags(t, tr,
		"big.yaml: file is larger than the 1 KiB limit",
		"big.cue: file is larger than the 1 KiB limit",
	)
	if got := objectNames(tr); len(got) != 1 || got[0] != "Service default/small" {
		t.Errorf("objects = %v, want the small Service", got)
	}
	// Exactly at the limit is fine.
	tr = loadTree(t, root, Options{MaxFileSize: int64(len(big))})
	if got := objectNames(tr); len(got) != 2 {
		t.Errorf("objects = %v, want both Services", got)
	}
}

// loadWithin fails the test when Load takes longer than d.
func loadWithin(t *testing.T, d time.Duration, files map[string]string) *Tree {
	t.Helper()
	root := writeTree(t, files)
	done := make(chan *Tree, 1)
	start := time.Now()
	go func() {
		tr, err := Load(root, Options{})
		if err != nil {
			t.Error(err)
		}
		done <- tr
	}()
	select {
	case tr := <-done:
		if tr == nil {
			t.FailNow()
		}
		t.Logf("loaded in %v", time.Since(start))
		return tr
	case <-time.After(d):
		t.Fatalf("Load did not return within %v", d)
	}
	return nil
}

func TestLoadBillionLaughs(t *testing.T) {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Service\nmetadata: {name: lol}\n")
	b.WriteString(`a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]` + "\n")
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [", i, i)
		for j := 0; j < 9; j++ {
			if j > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "*a%d", i-1)
		}
		b.WriteString("]\n")
	}
	// The same with merge keys: each level merges the one below nine times.
	// The mapping at the bottom is empty, so that no value is ever built:
	// only the merges themselves can count against the budget.
	var m strings.Builder
	m.WriteString("m0: &m0 {}\n")
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&m, "m%d: &m%d {<<: [", i, i)
		for j := 0; j < 9; j++ {
			if j > 0 {
				m.WriteString(", ")
			}
			fmt.Fprintf(&m, "*m%d", i-1)
		}
		m.WriteString("]}\n")
	}
	tr := loadWithin(t, 5*time.Second, map[string]string{
		"bomb.yaml":       b.String(),
		"mergebomb.yaml":  m.String(),
		"self.yaml":       "a: &x [*x]\n",
		"selfmap.yaml":    "a: &x {b: *x}\n",
		"selfmerge.yaml":  "apiVersion: v1\nkind: Service\nmetadata: &m\n  name: web\n  <<: *m\n",
		"mutual.yaml":     "a: &a {b: &b {<<: *a}}\n",
		"deep.yaml":       strings.Repeat("[", 500) + strings.Repeat("]", 500) + "\n",
		"deepmap.yaml":    strings.Repeat("{a: ", 300) + "1" + strings.Repeat("}", 300) + "\n",
		"mergescalar.yml": "a: &s x\nb: {<<: *s}\n",
	})
	wantDiags(t, tr,
		"bomb.yaml:",
		"mergebomb.yaml:",
		"self.yaml:1:4: nesting deeper than 100 levels",
		"selfmap.yaml:",
		"selfmerge.yaml:",
		"mutual.yaml:",
		"deep.yaml:",
		"deepmap.yaml:",
		"mergescalar.yml:2:9: a merge key (<<) needs a mapping or a list of mappings",
	)
	for _, d := range tr.Diags {
		if strings.HasPrefix(d.Pos.File, "bomb.yaml") && !strings.Contains(d.Msg, "billion laughs") {
			t.Errorf("bomb.yaml: message does not explain the problem: %s", d)
		}
	}
}

func TestLoadMergeKeys(t *testing.T) {
	tr := loadFiles(t, map[string]string{"m.yaml": `apiVersion: v1
kind: List
items:
- &base
  apiVersion: v1
  kind: Service
  metadata: &meta {name: a, namespace: shop, labels: {team: x}}
  spec: &spec
    selector: {app: a}
    ports: [{name: http, port: 80}]
- <<: *base
  metadata: {<<: *meta, name: b}
- <<: *base
  metadata: {<<: [*meta, {labels: {team: y}}], name: c}
  spec: {<<: *spec, type: NodePort}
`})
	wantNoDiags(t, tr)
	var got []string
	for _, o := range tr.Objects {
		m := o.Meta()
		got = append(got, fmt.Sprintf("%s/%s team=%s type=%s ports=%d", m.Namespace, m.Name, m.Labels.Get("team"), o.Service.Spec.Type, len(o.Service.Spec.Ports)))
	}
	// In a merge list the first mapping wins; the mapping's own keys win over all.
	want := []string{"shop/a team=x type=ClusterIP ports=1", "shop/b team=x type=ClusterIP ports=1", "shop/c team=x type=NodePort ports=1"}
	if diff := lineDiff(want, got); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
}

func TestLoadJSON(t *testing.T) {
	tr := loadFiles(t, map[string]string{
		"list.json": `{"apiVersion": "v1", "kind": "List", "items": [
  {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
   "spec": {"ports": [{"port": 80, "targetPort": "http"}], "sessionAffinity": "ClientIP",
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 60}}}},
  {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": {"name": "web-1", "labels": {"kubernetes.io/service-name": "web"}},
   "addressType": "IPv6", "endpoints": [{"addresses": ["2001:db8::1"], "conditions": {"ready": false}}], "ports": [{"port": 8080, "name": ""}]}
]}`,
	})
	wantNoDiags(t, tr)
	if len(tr.Objects) != 2 {
		t.Fatalf("got %d objects, want 2", len(tr.Objects))
	}
	s := tr.Objects[0].Service
	if s.Spec.Ports[0].TargetPort.Str != "http" || s.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds != 60 {
		t.Errorf("service decoded wrong: %+v", s.Spec)
	}
	e := tr.Objects[1].EndpointSlice
	if c := e.Endpoints[0].Conditions; c.Ready || !c.Serving || c.Terminating {
		t.Errorf("conditions = %+v, want ready false, serving true, terminating false", c)
	}
}

func TestDiagnosticsSorted(t *testing.T) {
	bad := func(name string) string {
		return svcYAML(name) + "  type: Bad\n---\n" + svcYAML("x"+name) + "  sessionAffinity: Bad\n  typo: 1\n"
	}
	tr := loadFiles(t, map[string]string{
		"b.yaml":     bad("b"),
		"a.yaml":     bad("a"),
		"a/a.yaml":   bad("c"),
		"z.cue":      "package z\n\ns: {apiVersion: \"v1\", kind: \"Service\", metadata: name: \"Z\", spec: {type: \"Bad\", ports: [{port: 0}]}}\n",
		"a0.yaml":    "kind: [",
		"big.yaml":   "apiVersion: v1\nkind: Node\nmetadata: {name: Big}\nstatus: {addresses: [{type: InternalIP, address: x}, {type: InternalIP, address: y}]}\n",
		"empty.yaml": "",
	})
	if len(tr.Diags) < 10 {
		t.Fatalf("want many diagnostics, got:\n%s", strings.Join(diagStrings(tr.Diags), "\n"))
	}
	for i := 1; i < len(tr.Diags); i++ {
		a, b := tr.Diags[i-1].Pos, tr.Diags[i].Pos
		if a.File > b.File || a.File == b.File && (a.Line > b.Line || a.Line == b.Line && a.Col > b.Col) {
			t.Errorf("not sorted:\n%s\n%s", tr.Diags[i-1], tr.Diags[i])
		}
	}
}

// TestLoadDeterministic loads a tree of many files twice, with different
// numbers of workers, and expects identical results.
func TestLoadDeterministic(t *testing.T) {
	files := map[string]string{}
	for i := 0; i < 40; i++ {
		files[fmt.Sprintf("d%d/s%02d.yaml", i%4, i)] = svcYAML(fmt.Sprintf("s%d", i)) + fmt.Sprintf("  typo%d: 1\n", i%3) +
			"---\n" + strings.ReplaceAll(baseSlice, "web-abc12", fmt.Sprintf("slice-%d", i))
	}
	files["c/x.cue"] = "package c\n\na: {apiVersion: \"v1\", kind: \"Service\", metadata: name: \"c\", spec: ports: [{port: 80}]}\nb: {apiVersion: \"v1\", kind: \"Pod\", metadata: name: \"p\", spec: {}}\n"
	files["c/y.cue"] = "package c\n\nd: {apiVersion: \"v1\", kind: \"Node\", metadata: name: \"N\"}\n"
	root := writeTree(t, files)
	first := snapshot(t, loadTree(t, root, Options{Workers: 1}))
	for _, w := range []int{0, 3, 16} {
		if got := snapshot(t, loadTree(t, root, Options{Workers: w})); got != first {
			t.Fatalf("Workers=%d: result differs from the first load:\n%s", w, lineDiff(strings.Split(first, "\n"), strings.Split(got, "\n")))
		}
	}
}

// TestLocate checks that Tree.Locate finds, after loading, the position the
// loader reported for a field: in plain, multi-document, List, JSON and CUE
// files. Every Service has one bad port name that embeds its own name.
func TestLocate(t *testing.T) {
	bad := func(name string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata: {name: %s}\nspec:\n  ports:\n  - port: 80\n    name: Bad-%s\n", name, name)
	}
	files := map[string]string{
		"one.yaml": bad("one"),
		"multi.yaml": "# first\n" + bad("m1") + "---\n" + bad("m2") + "---\n---\n" +
			"apiVersion: v1\nkind: List\nitems:\n- " + strings.ReplaceAll(strings.TrimSpace(bad("l1")), "\n", "\n  ") +
			"\n- " + strings.ReplaceAll(strings.TrimSpace(bad("l2")), "\n", "\n  ") + "\n",
		"j.json": `{"apiVersion": "v1", "kind": "List", "items": [
 {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "j1"}, "spec": {"ports": [{"port": 80, "name": "Bad-j1"}]}}]}`,
		"c/a.cue": "package c\n\n#T: {apiVersion: \"v1\", kind: \"Service\", metadata: name: string, spec: ports: [{port: 80, name: string}]}\n",
		"c/b.cue": "package c\n\nsvc: c1: #T & {metadata: name: \"c1\", spec: ports: [{name: \"Bad-c1\"}]}\n",
		"merge.yaml": "apiVersion: v1\nkind: Service\nmetadata: {name: mg}\nspec:\n  ports:\n  - &p {port: 80, name: Bad-mg}\n" +
			"---\napiVersion: v1\nkind: Service\nmetadata: {name: mg2}\nspec:\n  ports:\n  - {<<: *p, name: Bad-mg2}\n",
	}
	tr := loadFiles(t, files)
	byName := map[string]diagPos{}
	for _, d := range tr.Diags {
		if i := strings.Index(d.Msg, `"Bad-`); i >= 0 {
			name := strings.TrimPrefix(strings.SplitN(d.Msg[i+1:], `"`, 2)[0], "Bad-")
			byName[name] = diagPos{d.Pos.String(), d.Path.String()}
		}
	}
	names := []string{"one", "m1", "m2", "l1", "l2", "j1", "c1", "mg", "mg2"}
	if len(byName) != len(names) {
		t.Fatalf("want %d bad port names, got diagnostics:\n%s", len(names), strings.Join(diagStrings(tr.Diags), "\n"))
	}
	p := diag.Path{"spec", "ports", 0, "name"}
	found := 0
	for _, o := range tr.Objects {
		want, ok := byName[o.Meta().Name]
		if !ok {
			continue
		}
		found++
		if want.path != p.String() {
			t.Errorf("%s: diagnostic at path %s, want %s", o.Meta().Name, want.path, p)
		}
		if got := tr.Locate(o.Src, p).String(); got != want.pos {
			t.Errorf("%s (%+v): Locate = %s, the loader said %s", o.Meta().Name, o.Src, got, want.pos)
		}
	}
	if found != len(names) {
		t.Errorf("found %d of the %d objects", found, len(names))
	}
	// A path the object lacks is located at its deepest existing part.
	for _, o := range tr.Objects {
		if o.Meta().Name == "one" {
			if got := tr.Locate(o.Src, diag.Path{"spec", "clusterIP"}).String(); got != "one.yaml:5:3" {
				t.Errorf("missing field: Locate = %s, want one.yaml:5:3 (spec)", got)
			}
			// After the file changes, Locate gives the file alone.
			if err := os.WriteFile(filepath.Join(tr.Root, "one.yaml"), []byte("\n\n"+bad("one")), 0o644); err != nil {
				t.Fatal(err)
			}
			fresh := &Tree{Root: tr.Root, hashes: tr.hashes} // without tr's parsed documents
			if got := fresh.Locate(o.Src, p).String(); got != "one.yaml" {
				t.Errorf("changed file: Locate = %s, want one.yaml", got)
			}
		}
	}
}

type diagPos struct{ pos, path string }

func TestLoadRootErrors(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "missing"), Options{}); err == nil {
		t.Error("missing root: want an error")
	}
	f := filepath.Join(t.TempDir(), "file.yaml")
	if err := os.WriteFile(f, []byte(svcYAML("a")), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(f, Options{}); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("file as root: err = %v, want not a directory", err)
	}
	tr := loadTree(t, t.TempDir(), Options{})
	if len(tr.Objects)+len(tr.Diags)+tr.Files != 0 {
		t.Errorf("empty tree: %+v", tr)
	}
}

// TestLoadMisplacedKinds: an object of one of netspec's kinds with an
// apiVersion the API server has no such kind in ("no matches for kind X
// in version Y"), or with a kind spelt in another case, is an error at
// the field to fix, not an ignored object; kinds of other groups that
// share a name (a Knative Service, a Cluster API Cluster) and other kinds
// of netspec's groups (ConfigMap) stay ignored. A kind in the plural is
// refused too.
func TestLoadMisplacedKinds(t *testing.T) {
	doc := func(apiVersion, kind string) string {
		return fmt.Sprintf("apiVersion: %s\nkind: %s\nmetadata: {name: x}\n", apiVersion, kind)
	}
	tr := loadFiles(t, map[string]string{
		"slice-v1.yaml":       doc("v1", "EndpointSlice"),
		"endpoints-disc.yaml": doc("discovery.k8s.io/v1", "Endpoints"),
		"core.yaml":           doc("core/v1", "Service"),
		"lower.yaml":          doc("v1", "service"),
		"plural.yaml":         doc("v1", "Services"),
		"plural-lower.yaml":   doc("v1", "pods"),
		"cluster-v1.yaml":     doc("v1", "Cluster"),
		"knative.yaml":        doc("serving.knative.dev/v1", "Service"),
		"capi.yaml":           doc("cluster.x-k8s.io/v1beta1", "Cluster"),
		"configmap.yaml":      doc("v1", "ConfigMap"),
		"lower-other.yaml":    doc("example.com/v1", "service"),
	})
	wantDiags(t, tr,
		`slice-v1.yaml:1:13: apiVersion: no kind EndpointSlice in version "v1": the apiVersion of EndpointSlice is "discovery.k8s.io/v1"$`,
		`endpoints-disc.yaml:1:13: apiVersion: no kind Endpoints in version "discovery.k8s.io/v1": the apiVersion of Endpoints is "v1"$`,
		`core.yaml:1:13: apiVersion: no kind Service in version "core/v1": the core group has no name in an apiVersion; write "v1"$`,
		`lower.yaml:2:7: kind: "service" is not a kind (kinds are case-sensitive); write Service$`,
		`plural.yaml:2:7: kind: "Services" is not a kind (a kind is singular); write Service$`,
		`plural-lower.yaml:2:7: kind: "pods" is not a kind (a kind is singular); write Pod$`,
		`cluster-v1.yaml:1:13: apiVersion: no kind Cluster in version "v1": the apiVersion of Cluster is "netspec.dev/v1alpha1"$`,
	)
	var ignored []string
	for _, ig := range tr.Ignored {
		ignored = append(ignored, ig.APIVersion+" "+ig.Kind)
	}
	sort.Strings(ignored)
	want := []string{"cluster.x-k8s.io/v1beta1 Cluster", "example.com/v1 service", "serving.knative.dev/v1 Service", "v1 ConfigMap"}
	if fmt.Sprint(ignored) != fmt.Sprint(want) {
		t.Errorf("ignored = %v, want %v", ignored, want)
	}
}
