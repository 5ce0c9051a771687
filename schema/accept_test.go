package schema

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestNullIsAbsent: a field that is null is as if absent, at any depth and
// in YAML, JSON and CUE, as the API server reads it: defaults apply, a
// required field is missing, and the other errors keep their positions. An
// entry of a string map that is null is the empty string.
func TestNullIsAbsent(t *testing.T) {
	tr := loadFiles(t, map[string]string{
		// As Helm renders a chart whose values left these empty.
		"helm.yaml": `apiVersion: v1
kind: Service
metadata:
  name: web
  namespace:
  annotations:
  labels:
spec:
  type:
  selector:
    app: web
    tier:
  ports:
  - name: http
    port: 80
    targetPort:
    protocol:
  sessionAffinity: ClientIP
  sessionAffinityConfig:
    clientIP:
      timeoutSeconds:
  externalIPs:
status:
---
apiVersion: v1
kind: Service
metadata: {name: empty, labels: ~}
spec:
  clusterIP: None
  ports:
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, labels: {kubernetes.io/service-name: empty}}
addressType: IPv4
endpoints:
- addresses: [10.1.0.1]
  conditions: {ready: null, serving: null, terminating: null}
  hints:
ports:
- {port: 80, name: null, protocol: null}
---
# As kubectl prints a slice without endpoints.
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: empty-1, labels: {kubernetes.io/service-name: empty}}
addressType: IPv4
endpoints: null
ports: null
`,
		"pod.json": `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0", "labels": {"app": "web", "tier": ""}, "annotations": null},
 "spec": {"nodeName": null, "containers": [{"name": "c", "ports": null}]}, "status": {"podIP": "10.1.0.2", "conditions": null}}`,
		"c/svc.cue": `package c

svc: {apiVersion: "v1", kind: "Service", metadata: {name: "from-cue", annotations: null}, spec: {selector: null, ports: [{port: 53, protocol: null, targetPort: null}]}}
`,
	})
	wantNoDiags(t, tr)
	byName := map[string]*Object{}
	for _, o := range tr.Objects {
		byName[o.Meta().Name] = o
	}
	web := byName["web"].Service
	empty := byName["empty"].Service
	slice := byName["web-1"].EndpointSlice
	pod := byName["web-0"].Pod
	cue := byName["from-cue"].Service
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"namespace", web.Metadata.Namespace, "default"},
		{"annotations", web.Metadata.Annotations.Map(), map[string]string(nil)},
		{"labels", web.Metadata.Labels.Map(), map[string]string(nil)},
		{"type", web.Spec.Type, "ClusterIP"},
		{"selector entry null is empty", web.Spec.Selector.Map(), map[string]string{"app": "web", "tier": ""}},
		{"targetPort", web.Spec.Ports[0].TargetPort, IntOrString{Int: 80}},
		{"protocol", web.Spec.Ports[0].Protocol, "TCP"},
		{"timeoutSeconds", web.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds, int32(10800)},
		{"externalIPs", web.Spec.ExternalIPs, []string(nil)},
		{"ports null", empty.Spec.Ports, []ServicePort(nil)},
		{"slice conditions", slice.Endpoints[0].Conditions, EndpointConditions{Ready: true, Serving: true}},
		{"slice port protocol", slice.Ports[0].Protocol, "TCP"},
		{"pod labels", pod.Metadata.Labels.Map(), map[string]string{"app": "web", "tier": ""}},
		{"pod ports", pod.Spec.Containers[0].Ports, []ContainerPort(nil)},
		{"cue selector", cue.Spec.Selector.Map(), map[string]string(nil)},
		{"cue targetPort", cue.Spec.Ports[0].TargetPort, IntOrString{Int: 53}},
		{"cue protocol", cue.Spec.Ports[0].Protocol, "TCP"},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %#v, want %#v", c.name, c.got, c.want)
		}
	}

	// A required field that is null is missing; the other errors keep
	// their positions, and an unknown field is unknown even when null.
	tr = loadFiles(t, map[string]string{
		"bad.yaml": `apiVersion: v1
kind: Service
metadata:
  name:
  annotations:
spec:
  selector:
  ports:
  - name: http
    port:
    targetPort:
  - name: Bad
    port: 81
  sesionAffinity:
`,
		"bad.json": `{"apiVersion": "v1", "kind": "Pod", "metadata": null, "spec": {"containers": [{"name": null}]}}`,
	})
	wantDiags(t, tr,
		"bad.json:1:37: metadata: is required",
		"bad.json:1:80: spec.containers[0].name: is required",
		"bad.yaml:4:3: metadata.name: is required",
		"bad.yaml:10:5: spec.ports[0].port: is required",
		`bad.yaml:12:11: spec.ports[1].name: "Bad" is not a valid port name`,
		`bad.yaml:14:3: spec.sesionAffinity: unknown field "sesionAffinity" (did you mean "sessionAffinity"?)`,
	)
}

// TestTargetPortDefault: targetPort absent, null, 0 or "" is the port
// itself, as the API server defaults it; a name or number stays.
func TestTargetPortDefault(t *testing.T) {
	tr := loadFiles(t, map[string]string{"svc.yaml": `apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  ports:
  - {name: a, port: 80}
  - {name: b, port: 81, targetPort: null}
  - {name: c, port: 82, targetPort: 0}
  - {name: d, port: 83, targetPort: ""}
  - {name: e, port: 84, targetPort: 8084}
  - {name: f, port: 85, targetPort: http}
`})
	wantNoDiags(t, tr)
	want := []IntOrString{{Int: 80}, {Int: 81}, {Int: 82}, {Int: 83}, {Int: 8084}, {Str: "http"}}
	for i, p := range tr.Objects[0].Service.Spec.Ports {
		if p.TargetPort != want[i] {
			t.Errorf("ports[%d].targetPort = %v, want %v", i, p.TargetPort, want[i])
		}
	}
}

// TestTypedListItems: the items of a typed list (kubectl get --raw) take
// the list's apiVersion and kind when they have none; an item with its own
// keeps it; the items of a kind: List need their own.
func TestTypedListItems(t *testing.T) {
	tr := loadFiles(t, map[string]string{
		"svc.json": `{"kind": "ServiceList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": [
  {"metadata": {"name": "web", "namespace": "shop"}, "spec": {"ports": [{"port": 80}], "selector": {"app": "web"}}},
  {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "own"}, "spec": {"ports": [{"port": 81}]}}]}`,
		"pods.yaml": `kind: PodList
apiVersion: v1
items:
- metadata: {name: web-0, namespace: shop, labels: {app: web}}
  spec: {nodeName: n1}
  status: {podIP: 10.1.0.1, conditions: [{type: Ready, status: "True"}]}
`,
		"slices.yaml": `kind: EndpointSliceList
apiVersion: discovery.k8s.io/v1
items:
- metadata: {name: web-abc, namespace: shop, labels: {kubernetes.io/service-name: web}}
  addressType: IPv4
  endpoints: [{addresses: [10.1.0.1]}]
  ports: [{port: 80}]
`,
		"other.yaml": `kind: NodeList
apiVersion: v1
items:
- metadata: {name: n1}
---
kind: EndpointsList
apiVersion: v1
items:
- metadata: {name: manual}
---
kind: DeploymentList
apiVersion: apps/v1
items:
- metadata: {name: web}
---
kind: ServiceList
apiVersion: v1
items: null
`,
		"plain.yaml": `apiVersion: v1
kind: List
items:
- metadata: {name: anonymous}
`,
	})
	wantDiags(t, tr, "plain.yaml:4:3: object has no apiVersion or kind (string)")
	var got []string
	for _, o := range tr.Objects {
		got = append(got, o.APIVersion+" "+o.Kind+" "+o.Meta().Namespace+"/"+o.Meta().Name)
	}
	want := []string{
		"v1 Node /n1",
		"v1 Endpoints default/manual",
		"v1 Pod shop/web-0",
		"discovery.k8s.io/v1 EndpointSlice shop/web-abc",
		"v1 Service shop/web",
		"v1 Service default/own",
	}
	if diff := lineDiff(want, got); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	if len(tr.Ignored) != 1 || tr.Ignored[0].String() != "apps/v1 Deployment web in other.yaml" {
		t.Errorf("ignored = %v, want the Deployment", tr.Ignored)
	}
	// Positions point into the item.
	tr = loadFiles(t, map[string]string{"svc.yaml": "kind: ServiceList\napiVersion: v1\nitems:\n- metadata: {name: Web}\n  spec: {clusterIP: None}\n"})
	wantDiags(t, tr, `svc.yaml:4:20: metadata.name: "Web" is not a valid Service name`)
}

// TestSkippedFiles: kustomize and Helm files are not read, and listed;
// a Kustomization object is ignored also without its apiVersion; a file
// with no object in it is an error that tells of the ignore file.
func TestSkippedFiles(t *testing.T) {
	tr := loadFiles(t, map[string]string{
		"kustomization.yaml":          "resources: [svc.yaml]\n",
		"svc.yaml":                    svcYAML("web"),
		"chart/Chart.yaml":            "apiVersion: v2\nname: web\nversion: 0.1.0\n",
		"chart/values.yaml":           "replicas: {{ bad\n",
		"chart/values-prod.yml":       "replicas: 3\n",
		"chart/values.schema.json":    `{"$schema": "https://json-schema.org/draft-07/schema"}`,
		"overlay/kustomization.yml":   "resources: [../svc.yaml]\n",
		"overlay/kustomize.yaml":      "kind: Kustomization\nresources: [../svc.yaml]\n",
		"overlay/kustomize-full.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nmetadata: {name: k}\n",
	})
	wantNoDiags(t, tr)
	var got []string
	for _, s := range tr.Skipped {
		got = append(got, s.String())
	}
	want := []string{
		"chart/Chart.yaml (Helm chart)",
		"chart/values-prod.yml (Helm values)",
		"chart/values.schema.json (Helm values schema)",
		"chart/values.yaml (Helm values)",
		"kustomization.yaml (kustomize)",
		"overlay/kustomization.yml (kustomize)",
	}
	if diff := lineDiff(want, got); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
	got = nil
	for _, ig := range tr.Ignored {
		got = append(got, ig.String())
	}
	want = []string{"kustomize.config.k8s.io/v1beta1 Kustomization k in overlay/kustomize-full.yaml", "Kustomization in overlay/kustomize.yaml"}
	if diff := lineDiff(want, got); diff != "" {
		t.Errorf("ignored (-want +got):\n%s", diff)
	}
	if len(tr.Objects) != 1 {
		t.Errorf("%d objects, want the Service", len(tr.Objects))
	}

	tr = loadFiles(t, map[string]string{
		"config.yaml": "# settings\nlogLevel: debug\n---\nother: 1\n",
		"mixed.yaml":  svcYAML("web") + "---\nlogLevel: debug\n",
		"empty.yaml":  "# nothing yet\n",
	})
	wantDiags(t, tr,
		"config.yaml:2:1: this file holds no Kubernetes object (object has no apiVersion or kind (string)); if netspec should not read it, list it in a .netspecignore file",
		"empty.yaml:1:1: this file holds no Kubernetes object (it holds only comments), as kubectl apply would refuse it; delete it, or list it in a .netspecignore file",
		"mixed.yaml:7:1: object has no apiVersion or kind (string)",
	)
	if len(tr.Diags) != 3 {
		t.Errorf("want one error per file, got:\n%s", strings.Join(diagStrings(tr.Diags), "\n"))
	}
}

// TestIgnoreFileLoad: .netspecignore files leave paths out of a Load, as
// .gitignore files do in git: a file left out is not even read.
func TestIgnoreFileLoad(t *testing.T) {
	files := map[string]string{
		".netspecignore":        "# drafts and tools\n*.draft.yaml\n/tools/\n!keep.draft.yaml\nbuild\n",
		"a.yaml":                svcYAML("aa"),
		"x.draft.yaml":          "broken: [",
		"keep.draft.yaml":       svcYAML("keep"),
		"tools/gen.yaml":        "broken: [",
		"sub/tools/t.yaml":      svcYAML("subtools"), // /tools/ is anchored to the root
		"sub/build/b.yaml":      "broken: [",
		"sub/y.draft.yaml":      "broken: [",
		"sub/.netspecignore":    "c.yaml\n!x.draft.yaml\n",
		"sub/c.yaml":            "broken: [",
		"sub/x.draft.yaml":      svcYAML("subdraft"),
		"sub/deep/c.yaml":       "broken: [", // c.yaml has no slash: any depth below sub
		"other/c.yaml":          svcYAML("otherc"),
		"other/deep/a/b/z.yaml": svcYAML("z"),
		"other/.netspecignore":  "deep/**/y.yaml\n",
		"other/deep/q/y.yaml":   "broken: [",
	}
	root := writeTree(t, files)
	reads := countReads(t)
	tr := loadTree(t, root, Options{})
	wantNoDiags(t, tr)
	var got []string
	for _, o := range tr.Objects {
		got = append(got, o.Meta().Name)
	}
	want := []string{"aa", "keep", "otherc", "z", "subtools", "subdraft"}
	if diff := lineDiff(want, got); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	if n := reads.Load(); n != int64(len(want)+3) {
		t.Errorf("opened %d files, want %d: the objects' and the 3 ignore files", n, len(want)+3)
	}
	if len(tr.Skipped) != 0 {
		t.Errorf("skipped %v: files left out by an ignore file are not listed", tr.Skipped)
	}
}

// TestIgnoreMatch pins the matcher to git's answers for one path (checked
// with git check-ignore --no-index on the same patterns; git answers
// "ignored" also for a path below a directory that a pattern matches, such
// as x/a/b for x/a*, which the walk never enters).
func TestIgnoreMatch(t *testing.T) {
	cases := []struct {
		patterns string
		path     string
		dir      bool
		want     bool
	}{
		{patterns: "*.yaml", path: "a.yaml", want: true},
		{patterns: "*.yaml", path: "sub/deep/a.yaml", want: true},
		{patterns: "*.yaml", path: "a.yml", want: false},
		{patterns: "*.yaml\n!a.yaml", path: "a.yaml", want: false},
		{patterns: "!a.yaml\n*.yaml", path: "a.yaml", want: true},
		{patterns: "/a.yaml", path: "a.yaml", want: true},
		{patterns: "/a.yaml", path: "sub/a.yaml", want: false},
		{patterns: "sub/a.yaml", path: "sub/a.yaml", want: true},
		{patterns: "sub/a.yaml", path: "x/sub/a.yaml", want: false},
		{patterns: "build/", path: "build", dir: true, want: true},
		{patterns: "build/", path: "build", dir: false, want: false},
		{patterns: "build/", path: "x/build", dir: true, want: true},
		{patterns: "build", path: "x/build", dir: false, want: true},
		{patterns: "**/foo", path: "foo", want: true},
		{patterns: "**/foo", path: "a/b/foo", want: true},
		{patterns: "a/**/b", path: "a/b", want: true},
		{patterns: "a/**/b", path: "a/x/y/b", want: true},
		{patterns: "a/**/b", path: "xa/x/b", want: false},
		{patterns: "a/**", path: "a", dir: true, want: false},
		{patterns: "a/**", path: "a/x", want: true},
		{patterns: "a/**", path: "a/x/y", want: true},
		{patterns: "a**b", path: "axxb", want: true},
		{patterns: "a**b", path: "a/b", want: false},
		{patterns: "a*", path: "x/ab", want: true},
		{patterns: "x/a*", path: "x/a/b", want: false},
		{patterns: "?.yaml", path: "a.yaml", want: true},
		{patterns: "?.yaml", path: "ab.yaml", want: false},
		{patterns: "[ab].yaml", path: "b.yaml", want: true},
		{patterns: "[!ab].yaml", path: "b.yaml", want: false},
		{patterns: "[!ab].yaml", path: "c.yaml", want: true},
		{patterns: "[^ab].yaml", path: "c.yaml", want: true},
		{patterns: "[a-c]x", path: "bx", want: true},
		{patterns: "[a-c]x", path: "dx", want: false},
		{patterns: "[]]x", path: "]x", want: true},
		{patterns: "[[:digit:]]x", path: "7x", want: true},
		{patterns: "[[:digit:]]x", path: "ax", want: false},
		{patterns: "[ab", path: "[ab", want: false},
		{patterns: `\#a`, path: "#a", want: true},
		{patterns: "#a", path: "#a", want: false},
		{patterns: `\!a`, path: "!a", want: true},
		{patterns: `a\*`, path: "a*", want: true},
		{patterns: `a\*`, path: "ab", want: false},
		{patterns: "a.yaml   ", path: "a.yaml", want: true},
		{patterns: `a\ `, path: "a ", want: true},
		{patterns: "a.yaml\r", path: "a.yaml", want: true},
		{patterns: "\n\n", path: "a.yaml", want: false},
	}
	for _, c := range cases {
		r := parseIgnore(".", []byte(c.patterns))
		if got := ignored([]*ignoreRules{r}, c.path, c.dir); got != c.want {
			t.Errorf("patterns %q, path %q (dir %v): ignored = %v, want %v", c.patterns, c.path, c.dir, got, c.want)
		}
	}
	// A deeper file overrides a higher one; its patterns are relative to
	// its directory.
	rules := []*ignoreRules{parseIgnore(".", []byte("*.yaml\n")), parseIgnore("sub", []byte("!/a.yaml\n"))}
	for _, c := range []struct {
		path string
		want bool
	}{{"a.yaml", true}, {"sub/a.yaml", false}, {"sub/b.yaml", true}, {"sub/x/a.yaml", true}} {
		if got := ignored(rules, c.path, false); got != c.want {
			t.Errorf("nested: %s: ignored = %v, want %v", c.path, got, c.want)
		}
	}
}

// TestIgnoreFileSymlinks: a symlink left out is not followed, so a broken
// one or one that leaves the tree is no error; as in git, a symlink to a
// directory is not a directory for a pattern that ends in "/".
func TestIgnoreFileSymlinks(t *testing.T) {
	outside := writeTree(t, map[string]string{"o.yaml": svcYAML("outside")})
	root := writeTree(t, map[string]string{
		".netspecignore": "broken.yaml\nout.yaml\nlinked/\n",
		"a.yaml":         svcYAML("a"),
		"real/b.yaml":    svcYAML("b"),
	})
	for name, target := range map[string]string{
		"broken.yaml": "does-not-exist.yaml",
		"out.yaml":    filepath.Join(outside, "o.yaml"),
		"linked":      "real", // not left out by linked/: read as linked/b.yaml, once
	} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Skipf("symlinks not supported: %v", err)
		}
	}
	tr := loadTree(t, root, Options{})
	wantNoDiags(t, tr)
	if got := objectNames(tr); strings.Join(got, ",") != "Service default/a,Service default/b" {
		t.Errorf("objects = %v, want a and b", got)
	}
}
