package schema

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"netspec.dev/netspec/internal/suggest"

	"cuelang.org/go/cue/cuecontext"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"netspec.dev/netspec/internal/diag"
)

// The Kubernetes Go types of the kinds netspec reads. The schema's field
// sets are generated from them (k8s_fields.cue); these tests check that the
// schema, with netspec's constraints added, accepts all of them.
var k8sKinds = []struct {
	kind, apiVersion string
	typ              reflect.Type
}{
	{KindService, "v1", reflect.TypeFor[corev1.Service]()},
	{KindEndpoints, "v1", reflect.TypeFor[corev1.Endpoints]()},
	{KindEndpointSlice, "discovery.k8s.io/v1", reflect.TypeFor[discoveryv1.EndpointSlice]()},
	{KindPod, "v1", reflect.TypeFor[corev1.Pod]()},
	{KindNode, "v1", reflect.TypeFor[corev1.Node]()},
}

// fillEnums gives string types that the schema constrains to an
// enumeration a value of the enumeration; other strings are "x", which
// meets every name format of the schema.
var fillEnums = map[reflect.Type]string{
	reflect.TypeFor[corev1.ServiceType]():                  "LoadBalancer",
	reflect.TypeFor[corev1.Protocol]():                     "TCP",
	reflect.TypeFor[corev1.ServiceAffinity]():              "ClientIP",
	reflect.TypeFor[corev1.ServiceExternalTrafficPolicy](): "Local",
	reflect.TypeFor[corev1.ServiceInternalTrafficPolicy](): "Cluster",
	reflect.TypeFor[corev1.IPFamilyPolicy]():               "SingleStack",
	reflect.TypeFor[corev1.IPFamily]():                     "IPv4",
	reflect.TypeFor[corev1.LoadBalancerIPMode]():           "VIP",
	reflect.TypeFor[corev1.ConditionStatus]():              "True",
	reflect.TypeFor[corev1.NodeAddressType]():              "InternalIP",
	reflect.TypeFor[discoveryv1.AddressType]():             "IPv4",
}

// fillFields gives plain string fields that the schema constrains.
var fillFields = map[string]string{
	"ServiceSpec.TrafficDistribution": "PreferClose",
}

// fill sets every field of v, at every depth, to a value of its type, as
// kubectl would print a fully populated object.
func fill(t *testing.T, v reflect.Value, owner string, depth int) {
	if depth > 20 {
		t.Fatalf("%s nests deeper than 20", v.Type())
	}
	switch x := v.Addr().Interface().(type) {
	case *metav1.Time:
		*x = metav1.NewTime(time.Date(2026, 11, 26, 1, 2, 3, 0, time.UTC))
		return
	case *metav1.MicroTime:
		*x = metav1.NewMicroTime(time.Date(2026, 11, 26, 1, 2, 3, 4000, time.UTC))
		return
	case *metav1.Duration:
		*x = metav1.Duration{Duration: 90 * time.Second}
		return
	case *resource.Quantity:
		*x = resource.MustParse("100m")
		return
	case *intstr.IntOrString:
		*x = intstr.FromInt32(8080)
		return
	case *metav1.FieldsV1:
		x.Raw = []byte(`{"f:metadata":{"f:labels":{}}}`)
		return
	case *runtime.RawExtension:
		x.Raw = []byte(`{"apiVersion":"v1","kind":"X"}`)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), owner, depth+1)
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			if s, ok := fillFields[v.Type().Name()+"."+f.Name]; ok {
				fv := v.Field(i)
				if fv.Kind() == reflect.Pointer {
					fv.Set(reflect.New(fv.Type().Elem()))
					fv = fv.Elem()
				}
				fv.SetString(s)
				continue
			}
			fill(t, v.Field(i), v.Type().Name(), depth+1)
		}
	case reflect.String:
		if s, ok := fillEnums[v.Type()]; ok {
			v.SetString(s)
		} else {
			v.SetString("x")
		}
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes([]byte("x"))
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(t, v.Index(0), owner, depth+1)
	case reflect.Map:
		k := reflect.New(v.Type().Key()).Elem()
		k.SetString("x")
		e := reflect.New(v.Type().Elem()).Elem()
		fill(t, e, owner, depth+1)
		v.Set(reflect.MakeMap(v.Type()))
		v.SetMapIndex(k, e)
	case reflect.Interface:
		// none in these types; left empty
	default:
		t.Fatalf("%s: cannot fill a %s", owner, v.Kind())
	}
}

// fullObject returns a raw object of the kind with every field of its
// Kubernetes type set, encoded by the type's own JSON encoding.
func fullObject(t *testing.T, kind, apiVersion string, typ reflect.Type) rawObject {
	t.Helper()
	v := reflect.New(typ)
	fill(t, v.Elem(), typ.Name(), 0)
	tm := v.Elem().FieldByName("TypeMeta").Addr().Interface().(*metav1.TypeMeta)
	tm.Kind, tm.APIVersion = kind, apiVersion
	data, err := json.Marshal(v.Interface())
	if err != nil {
		t.Fatal(err)
	}
	var dl diag.List
	raws, _ := splitYAML("full.json", data, &dl)
	if len(dl) > 0 || len(raws) != 1 {
		t.Fatalf("%s: %d objects, %v", kind, len(raws), dl)
	}
	return raws[0]
}

// TestEveryKubernetesFieldAccepted builds, for each kind netspec reads, an
// object from its Kubernetes Go type with every field set at every depth
// (metadata.selfLink, spec.containers[0].livenessProbe.httpGet.port,
// status.hostIPs, ...) and checks that both the shape walk and whole-object
// CUE unification accept it.
func TestEveryKubernetesFieldAccepted(t *testing.T) {
	ctx := cuecontext.New()
	s := compileSchema(ctx)
	v := newValidator()
	for _, k := range k8sKinds {
		t.Run(k.kind, func(t *testing.T) {
			r := fullObject(t, k.kind, k.apiVersion, k.typ)
			var ls []diag.Path
			leaves(r.raw, nil, &ls)
			if len(ls) < 15 {
				t.Fatalf("only %d values in the full object", len(ls))
			}
			if dl := shapeWalk(v, k.kind, copyRaw(r.raw).(map[string]any)); len(dl) > 0 {
				t.Errorf("the shape walk rejects a %s with every Kubernetes field set:\n%v", k.kind, dl)
			}
			if paths, valid := fullCUE(ctx, s, k.kind, copyRaw(r.raw).(map[string]any)); !valid {
				t.Errorf("CUE rejects a %s with every Kubernetes field set at %v", k.kind, paths)
			}
			t.Logf("%d values", len(ls))
		})
	}
	// The values above include fields the old hand-written lists lacked.
	pod := fullObject(t, KindPod, "v1", reflect.TypeFor[corev1.Pod]())
	for _, p := range []diag.Path{
		{"metadata", "selfLink"},
		{"metadata", "deletionGracePeriodSeconds"},
		{"metadata", "managedFields", 0, "fieldsV1"},
		{"spec", "containers", 0, "livenessProbe", "httpGet", "port"},
		{"spec", "containers", 0, "resources", "limits", "x"},
		{"status", "hostIPs", 0, "ip"},
		{"status", "containerStatuses", 0, "state", "running", "startedAt"},
	} {
		if _, ok := lookupRaw(pod.raw, p); !ok {
			t.Errorf("the full Pod has no %s", p)
		}
	}
}

// TestMisspeltKubernetesFieldSuggested adds, to every closed struct of the
// full objects, a misspelling of one of its fields (one letter left out),
// and checks that it is an unknown field with the right suggestion and the
// only finding.
func TestMisspeltKubernetesFieldSuggested(t *testing.T) {
	v := newValidator()
	tested := 0
	for _, k := range k8sKinds {
		r := fullObject(t, k.kind, k.apiVersion, k.typ)
		var structs []diag.Path
		collectStructs(r.raw, nil, &structs)
		for _, p := range structs {
			sh := shapeAt(v.c.kinds[k.kind], p)
			if sh == nil || !sh.isStruct || sh.open {
				continue
			}
			field, typo := misspelling(sh.names())
			if typo == "" {
				continue
			}
			m := copyRaw(r.raw).(map[string]any)
			target, _ := lookupRaw(m, p)
			target.(map[string]any)[typo] = "x"
			dl := shapeWalk(v, k.kind, m)
			want := fmt.Sprintf("unknown field %q (did you mean %q?)", typo, field)
			if len(dl) != 1 || dl[0].Msg != want || dl[0].Path.String() != p.Key(typo).String() {
				t.Errorf("%s %s: %s added: got %v, want one finding %q", k.kind, p, typo, dl, want)
			}
			tested++
		}
	}
	if tested < 30 {
		t.Errorf("only %d structs tested", tested)
	}
	t.Logf("%d structs tested", tested)
}

// misspelling picks a field of the struct and drops one of its letters so
// that the result is nearer to that field than to any other.
func misspelling(names []string) (field, typo string) {
	for _, n := range names {
		if len(n) < 5 {
			continue
		}
		for i := 1; i < len(n)-1; i++ {
			c := n[:i] + n[i+1:]
			unique := true
			for _, o := range names {
				if o != n && (o == c || suggest.Distance(strings.ToLower(c), strings.ToLower(o)) <= 1) {
					unique = false
				}
			}
			if unique {
				return n, c
			}
		}
	}
	return "", ""
}

// shapeAt follows p from sh.
func shapeAt(sh *shape, p diag.Path) *shape {
	for _, e := range p {
		if sh == nil {
			return nil
		}
		switch e := e.(type) {
		case string:
			if f, ok := sh.fields[e]; ok {
				sh = f
			} else {
				sh = sh.pattern
			}
		case int:
			sh = sh.elem
		}
	}
	return sh
}

// TestSchemaFieldsAreKubernetesFields walks the schema's shape of each kind
// beside its Kubernetes Go type: every field the schema allows must be a
// field of the type (a constraint that netspec.cue adds on a misspelt name
// would otherwise allow that name), and every field of the type must be
// allowed.
func TestSchemaFieldsAreKubernetesFields(t *testing.T) {
	v := newValidator()
	closed := 0
	var walk func(sh *shape, typ reflect.Type, at string)
	walk = func(sh *shape, typ reflect.Type, at string) {
		for typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		if sh == nil {
			return
		}
		switch {
		case sh.isList && typ.Kind() == reflect.Slice:
			walk(sh.elem, typ.Elem(), at+"[]")
		case sh.isStruct && typ.Kind() == reflect.Map:
			walk(sh.pattern, typ.Elem(), at+".*")
		case sh.isStruct && typ.Kind() == reflect.Struct && !sh.open:
			closed++
			fields := jsonFields(typ)
			for _, name := range sh.names() {
				ft, ok := fields[name]
				if !ok {
					t.Errorf("%s.%s is in the schema but not a field of %s", at, name, typ)
					continue
				}
				walk(sh.fields[name], ft, at+"."+name)
			}
			for name := range fields {
				if _, ok := sh.fields[name]; !ok {
					t.Errorf("%s.%s is a field of %s but not in the schema", at, name, typ)
				}
			}
		}
	}
	for _, k := range k8sKinds {
		walk(v.c.kinds[k.kind], k.typ, k.kind)
	}
	if closed < 30 {
		t.Errorf("only %d closed structs compared", closed)
	}
}

// jsonFields maps the JSON names of a struct's fields to their types, with
// embedded structs without a name (`json:",inline"`) flattened.
func jsonFields(typ reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		if f.Anonymous && name == "" {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// TestShapeAgreesWithCUEOnKubernetesFields is TestShapeAgreesWithCUE on the
// full objects: every value that the schema's shape reaches (those inside
// structures netspec does not read are accepted whole) is replaced by values
// of other types, and the shape walk and whole-object unification must
// agree.
func TestShapeAgreesWithCUEOnKubernetesFields(t *testing.T) {
	ctx := cuecontext.New()
	s := compileSchema(ctx)
	v := newValidator()
	replacements := []any{"X_Y", int64(0), int64(-1), true, nil, float64(1.5), map[string]any{"x": "y"}, []any{"z"}}
	cases := 0
	for _, k := range k8sKinds {
		r := fullObject(t, k.kind, k.apiVersion, k.typ)
		var ls []diag.Path
		leaves(r.raw, nil, &ls)
		for _, p := range ls {
			if shapeAt(v.c.kinds[k.kind], p) == nil {
				continue
			}
			for _, x := range replacements {
				m := copyRaw(r.raw).(map[string]any)
				setAt(m, p, x)
				cases++
				ref := copyRaw(m).(map[string]any)
				nullsAbsent(ref, v.c.kinds[k.kind]) // as the API server reads null
				want, valid := fullCUE(ctx, s, k.kind, ref)
				got := shapeWalk(v, k.kind, copyRaw(m).(map[string]any))
				name := fmt.Sprintf("%s %s=%#v", k.kind, p, x)
				if valid != (len(got) == 0) {
					t.Errorf("%s: CUE says valid=%v (%v), the shape walk reports %v", name, valid, want, got)
					continue
				}
				for _, w := range want {
					if !blames(got, w) {
						t.Errorf("%s: CUE blames %s, the shape walk does not (it reports %v)", name, w, got)
					}
				}
			}
		}
	}
	if cases < 500 {
		t.Errorf("only %d cases", cases)
	}
	t.Logf("%d objects compared", cases)
}
