package schema

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"netspec.dev/netspec/internal/diag"
	"netspec.dev/netspec/internal/gen/gentree"
)

// TestInternerKeepsObjects decodes the objects of the examples and of a
// generated tree with one interner, as a validator does over a Load, and
// checks that each equals the object decoded on its own: sharing values
// changes no object, also not one decoded earlier (defaults write into
// lists: shared ones must not be written).
func TestInternerKeepsObjects(t *testing.T) {
	gen := t.TempDir()
	if err := gentree.Write(gen, gentree.Config{Services: 30, PodsPerService: 2, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, dir := range []string{"../examples", gen} {
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml") || strings.HasSuffix(p, ".json")) {
				files = append(files, p)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	in := newInterner()
	type decoded struct {
		raw rawObject
		obj *Object
	}
	var all []decoded
	kinds := map[string]int{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var dl diag.List
		raws, _ := splitDocs(f, data, &dl, nil, in)
		for _, r := range raws {
			o, err := decode(r, in)
			if err != nil {
				continue // not valid: the schema reports it
			}
			all = append(all, decoded{r, o})
			kinds[r.kind]++
		}
	}
	for _, k := range []string{KindService, KindPod, KindEndpoints, KindEndpointSlice, KindNode} {
		if kinds[k] == 0 {
			t.Errorf("no %s decoded: the test covers less than it should", k)
		}
	}
	for _, d := range all {
		want, err := decode(d.raw, nil)
		if err != nil {
			t.Fatalf("%s: %v", d.raw.src.File, err)
		}
		if diff := cmp.Diff(want, d.obj); diff != "" {
			t.Errorf("%s document %d: decoded with the interner differs (-alone +shared):\n%s", d.raw.src.File, d.raw.src.Doc, diff)
		}
	}
}

// TestInternerShares checks that the pods of a workload, read one after
// the other, share their labels, containers and conditions, and that a
// Service's ports and selector are shared with an equal Service's.
func TestInternerShares(t *testing.T) {
	const pod = `apiVersion: v1
kind: Pod
metadata:
  name: %s
  labels:
    app: web
    tier: front
spec:
  containers:
  - name: app
    image: example.com/web:1
    ports:
    - name: http
      containerPort: 8080
status:
  podIP: 10.0.0.1
  conditions:
  - type: Ready
    status: "True"
`
	const svc = `apiVersion: v1
kind: Service
metadata:
  name: %s
spec:
  selector:
    app: web
  ports:
  - name: http
    port: 80
    targetPort: http
`
	in := newInterner()
	var objs []*Object
	for _, doc := range []string{
		strings.ReplaceAll(pod, "%s", "a"), strings.ReplaceAll(pod, "%s", "b"),
		strings.ReplaceAll(svc, "%s", "s1"), strings.ReplaceAll(svc, "%s", "s2"),
	} {
		var dl diag.List
		raws, _ := splitDocs("f.yaml", []byte(doc), &dl, nil, in)
		if len(raws) != 1 || len(dl) > 0 {
			t.Fatalf("%d objects, diagnostics %v", len(raws), dl)
		}
		o, err := decode(raws[0], in)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o)
	}
	a, b := objs[0].Pod, objs[1].Pod
	same := func(what string, x, y any) {
		t.Helper()
		if reflect.ValueOf(x).UnsafePointer() != reflect.ValueOf(y).UnsafePointer() {
			t.Errorf("%s not shared", what)
		}
	}
	same("labels", a.Metadata.Labels.p, b.Metadata.Labels.p)
	same("containers", a.Spec.Containers, b.Spec.Containers)
	same("conditions", a.Status.Conditions, b.Status.Conditions)
	same("service ports", objs[2].Service.Spec.Ports, objs[3].Service.Spec.Ports)
	same("selector", objs[2].Service.Spec.Selector.p, objs[3].Service.Spec.Selector.p)
	if unsafe.StringData(objs[2].Service.Metadata.Name) == unsafe.StringData(objs[3].Service.Metadata.Name) {
		t.Errorf("names shared: %q", objs[2].Service.Metadata.Name)
	}
	same("pod IP", unsafe.StringData(a.Status.PodIP), unsafe.StringData(b.Status.PodIP))
	if a.Metadata.Name == b.Metadata.Name {
		t.Errorf("pods named alike: %q", a.Metadata.Name)
	}
}

// TestContainerKeyCoversContainer guards containerKey: a field added to
// Container must be added to the key too, or containers that differ in it
// would be shared.
func TestContainerKeyCoversContainer(t *testing.T) {
	var names []string
	for f := range reflect.TypeFor[Container]().Fields() {
		names = append(names, f.Name)
	}
	if got, want := strings.Join(names, " "), "Name Image Ports RestartPolicy ReadinessProbe"; got != want {
		t.Errorf("Container has fields %s; containerKey covers %s: extend it", got, want)
	}
}

// TestInternerKeepsEmptyApart checks that lists and maps that differ only
// in being empty or absent are not shared: a pod with "ports: []" keeps an
// empty list, one without ports none.
func TestInternerKeepsEmptyApart(t *testing.T) {
	const pod = `apiVersion: v1
kind: Pod
metadata:
  name: p
  labels: %s
spec:
  containers:
  - name: app
    image: example.com/web:1
%s
`
	in := newInterner()
	var pods []*Pod
	for _, doc := range []string{
		strings.Replace(strings.Replace(pod, "%s", "{}", 1), "%s", "", 1),
		strings.Replace(strings.Replace(pod, "%s", "", 1), "%s", "    ports: []", 1),
	} {
		var dl diag.List
		raws, _ := splitDocs("f.yaml", []byte(doc), &dl, nil, in)
		if len(raws) != 1 {
			t.Fatalf("%d objects, diagnostics %v", len(raws), dl)
		}
		o, err := decode(raws[0], in)
		if err != nil {
			t.Fatal(err)
		}
		pods = append(pods, o.Pod)
	}
	if l := pods[0].Spec.Containers[0].Ports; l != nil {
		t.Errorf("pod without ports has ports %#v", l)
	}
	if l := pods[1].Spec.Containers[0].Ports; l == nil {
		t.Errorf("pod with ports: [] has nil ports")
	}
	if m := pods[0].Metadata.Labels; m.IsNil() {
		t.Errorf("pod with labels: {} has nil labels")
	}
	if m := pods[1].Metadata.Labels; !m.IsNil() {
		t.Errorf("pod without labels has labels %#v", m)
	}
}
