package plan

import (
	"fmt"
	"net/netip"
	"reflect"
	"testing"
)

// fill sets every field of v, recursively, to a non-zero value; slices
// get one element.
func fill(v reflect.Value) {
	switch v.Interface().(type) {
	case netip.Addr:
		v.Set(reflect.ValueOf(netip.MustParseAddr("10.0.0.1")))
		return
	case netip.Prefix:
		v.Set(reflect.ValueOf(netip.MustParsePrefix("10.0.0.0/8")))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("a")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint16, reflect.Uint32:
		v.SetUint(1)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.Struct:
		for i := range v.NumField() {
			fill(v.Field(i))
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	default:
		panic(fmt.Sprintf("fill: add kind %s (%s)", v.Kind(), v.Type()))
	}
}

// leaves lists the paths of every leaf field below v, each with a
// function that changes that leaf in v.
func leaves(v reflect.Value, path string, out map[string]func()) {
	switch v.Interface().(type) {
	case netip.Addr:
		out[path] = func() { v.Set(reflect.ValueOf(netip.MustParseAddr("10.0.0.2"))) }
		return
	case netip.Prefix:
		out[path] = func() { v.Set(reflect.ValueOf(netip.MustParsePrefix("10.0.0.0/9"))) }
		return
	}
	switch v.Kind() {
	case reflect.String:
		out[path] = func() { v.SetString("b") }
	case reflect.Bool:
		out[path] = func() { v.SetBool(false) }
	case reflect.Int, reflect.Int32, reflect.Int64:
		out[path] = func() { v.SetInt(2) }
	case reflect.Uint16, reflect.Uint32:
		out[path] = func() { v.SetUint(2) }
	case reflect.Slice:
		out[path+"(len)"] = func() { v.Set(reflect.Append(v, v.Index(0))) }
		leaves(v.Index(0), path+"[0]", out)
	case reflect.Struct:
		for i := range v.NumField() {
			leaves(v.Field(i), path+"."+v.Type().Field(i).Name, out)
		}
	case reflect.Pointer:
		out[path+"(nil)"] = func() { v.Set(reflect.Zero(v.Type())) }
		leaves(v.Elem(), path, out)
	}
}

// TestEqualSeesEveryField: changing any field of a Plan, a Service (its
// Ports and Endpoints included), a Node, a Cluster, the DNS records or an
// env file makes Equal false, as
// reflect.DeepEqual; a field added to plan without a line in Equal fails
// here.
func TestEqualSeesEveryField(t *testing.T) {
	for _, tc := range []struct {
		name  string
		typ   reflect.Type
		equal func(a, b any) bool
	}{
		{"Service", reflect.TypeFor[Service](), func(a, b any) bool { x, y := a.(Service), b.(Service); return x.Equal(&y) && y.Equal(&x) }},
		{"Node", reflect.TypeFor[Node](), func(a, b any) bool { return a.(Node).Equal(b.(Node)) }},
		{"Cluster", reflect.TypeFor[Cluster](), func(a, b any) bool { return a.(Cluster).Equal(b.(Cluster)) }},
		{"DNS", reflect.TypeFor[DNS](), func(a, b any) bool { return a.(DNS).Equal(b.(DNS)) }},
		{"EnvFile", reflect.TypeFor[EnvFile](), func(a, b any) bool { return a.(EnvFile).Equal(b.(EnvFile)) }},
		{"Plan", reflect.TypeFor[Plan](), func(a, b any) bool { x, y := a.(Plan), b.(Plan); return x.Equal(&y) && y.Equal(&x) }},
	} {
		base := reflect.New(tc.typ).Elem()
		fill(base)
		paths := map[string]func(){}
		probe := reflect.New(tc.typ).Elem()
		fill(probe)
		leaves(probe, tc.name, paths)
		if !tc.equal(base.Interface(), probe.Interface()) {
			t.Fatalf("%s: two equal values are not Equal", tc.name)
		}
		for path := range paths {
			v := reflect.New(tc.typ).Elem()
			fill(v)
			m := map[string]func(){}
			leaves(v, tc.name, m)
			m[path]()
			if reflect.DeepEqual(base.Interface(), v.Interface()) {
				t.Fatalf("%s: the mutation did not change the value", path)
			}
			if tc.equal(base.Interface(), v.Interface()) {
				t.Errorf("%s changed, but Equal says equal", path)
			}
		}
	}
}

// TestSameDataplane: plans that differ only in DNS or env are the same to
// the data plane; one changed Service is not.
func TestSameDataplane(t *testing.T) {
	mk := func() *Plan {
		var s Service
		fill(reflect.ValueOf(&s).Elem())
		return &Plan{FormatVersion: FormatVersion, Services: []Service{s, s}}
	}
	a, b := mk(), mk()
	b.Env = []EnvFile{{Namespace: "x"}}
	b.DNS.Zones = []Zone{{Name: "x."}}
	if !SameDataplane(a, b) {
		t.Error("DNS and env made the plans differ")
	}
	b.Services[1].Ports[0].Endpoints[0].Port++
	if SameDataplane(a, b) {
		t.Error("a changed endpoint port was not seen")
	}
	b = mk()
	b.Services = b.Services[:1]
	if SameDataplane(a, b) {
		t.Error("a removed Service was not seen")
	}
}
