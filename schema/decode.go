package schema

import (
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// decodeValue fills dst from a raw value (map[string]any, []any, string,
// int64, float64, bool, nil) by the json names of dst's fields. It is the
// decoder of validated objects: about four times faster than a round trip
// through encoding/json, which dominated a cold load. Unknown keys are
// ignored (the schema has reported them); a value of the wrong type is an
// error (the schema has reported it too). in, when not nil, shares equal
// strings and string maps with the objects decoded before.
func decodeValue(dst reflect.Value, src any, in *interner) error {
	if src == nil {
		return nil // null: leave the zero value, as encoding/json does
	}
	if dst.Type() == stringMapType {
		m, ok := src.(map[string]any)
		if !ok {
			return fmt.Errorf("want a mapping, not %s", typeName(src))
		}
		if in == nil {
			in = &interner{} // one that shares nothing
		}
		out, err := in.stringMap(m)
		if err != nil {
			return err
		}
		dst.Set(reflect.ValueOf(out))
		return nil
	}
	if dst.Type() == intOrStringType {
		v := dst.Addr().Interface().(*IntOrString)
		switch s := src.(type) {
		case string:
			*v = IntOrString{Str: s}
			return nil
		case int64:
			if s < math.MinInt32 || s > math.MaxInt32 {
				return fmt.Errorf("%d is out of range", s)
			}
			*v = IntOrString{Int: int32(s)}
			return nil
		}
		return fmt.Errorf("want a number or a name, not %s", typeName(src))
	}
	switch dst.Kind() {
	case reflect.Pointer:
		if dst.IsNil() {
			dst.Set(reflect.New(dst.Type().Elem()))
		}
		return decodeValue(dst.Elem(), src, in)
	case reflect.Struct:
		m, ok := src.(map[string]any)
		if !ok {
			return fmt.Errorf("want a mapping, not %s", typeName(src))
		}
		fields := structFields(dst.Type())
		for k, v := range m {
			i, ok := fields[k]
			if !ok {
				continue
			}
			if err := decodeValue(dst.Field(i), v, in); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
		}
		return nil
	case reflect.Map:
		m, ok := src.(map[string]any)
		if !ok {
			return fmt.Errorf("want a mapping, not %s", typeName(src))
		}
		out := reflect.MakeMapWithSize(dst.Type(), len(m))
		for k, v := range m {
			e := reflect.New(dst.Type().Elem()).Elem()
			if err := decodeValue(e, v, in); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			out.SetMapIndex(reflect.ValueOf(k), e)
		}
		dst.Set(out)
		return nil
	case reflect.Slice:
		l, ok := src.([]any)
		if !ok {
			return fmt.Errorf("want a list, not %s", typeName(src))
		}
		out := reflect.MakeSlice(dst.Type(), len(l), len(l))
		for i, v := range l {
			if err := decodeValue(out.Index(i), v, in); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
		dst.Set(out)
		return nil
	case reflect.String:
		s, ok := src.(string)
		if !ok {
			return fmt.Errorf("want a string, not %s", typeName(src))
		}
		dst.SetString(s)
		return nil
	case reflect.Bool:
		b, ok := src.(bool)
		if !ok {
			return fmt.Errorf("want a boolean, not %s", typeName(src))
		}
		dst.SetBool(b)
		return nil
	case reflect.Int, reflect.Int32, reflect.Int64:
		var n int64
		switch x := src.(type) {
		case int64:
			n = x
		case float64:
			if x != math.Trunc(x) || x < math.MinInt64 || x > math.MaxInt64 {
				return fmt.Errorf("want an integer, not %v", x)
			}
			n = int64(x)
		default:
			return fmt.Errorf("want an integer, not %s", typeName(src))
		}
		if dst.OverflowInt(n) {
			return fmt.Errorf("%d is out of range", n)
		}
		dst.SetInt(n)
		return nil
	}
	return fmt.Errorf("cannot decode into %s", dst.Type())
}

var intOrStringType = reflect.TypeFor[IntOrString]()

var fieldCache sync.Map // reflect.Type → map[string]int

// structFields maps the json names of a struct's fields to their indexes.
func structFields(t reflect.Type) map[string]int {
	if f, ok := fieldCache.Load(t); ok {
		return f.(map[string]int)
	}
	m := map[string]int{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = i
	}
	fieldCache.Store(t, m)
	return m
}

var stringMapType = reflect.TypeFor[StringMap]()

// maxInterned bounds each table of an interner: a full table starts again
// empty, so that a validator that decodes a whole tree holds no more than
// this many entries besides its objects.
const maxInterned = 4096

// maxStrings bounds the strings of an interner: a table that stays in
// the processor's cache, as the common strings did.
const maxStrings = 1024

// interner shares equal strings, maps of strings (labels, selectors,
// annotations) and short lists among the objects one validator reads. A
// tree's objects stay in memory for as long as a daemon watches it, and
// they repeat themselves: names, namespaces and images; the pods of one
// workload carry the same labels, containers and conditions. Shared values
// are never written (objects are read-only once decoded: Cache), so
// sharing is invisible but for the memory it saves
// (BenchmarkLoadRetained). Strings are shared as fastYAML reads them; the
// files that yaml.v3 or CUE read share maps and lists only.
type interner struct {
	strs map[string]string    // with the common strings
	maps map[string]StringMap // by their encoded entries (stringMap)
	keys []string             // scratch: a map's keys
	enc  []byte               // scratch: a map's encoded entries

	// Short lists by content (shareSlices), which defaults have filled in.
	servicePorts   sliceTable[ServicePort]
	containerPorts sliceTable[ContainerPort]
	containers     struct {
		one map[containerKey][]Container
		few map[sliceKey[containerKey]][]Container
	}
	conditions    sliceTable[PodCondition]
	endpointPorts sliceTable[EndpointPort]
	strings       sliceTable[string]
}

func newInterner() *interner {
	in := &interner{strs: make(map[string]string, len(common)), maps: map[string]StringMap{}}
	maps.Copy(in.strs, common)
	return in
}

// reset forgets every value, so that a validator kept from one Load to the
// next keeps none of the objects' values alive, nor the tables' room.
func (in *interner) reset() {
	*in = *newInterner()
}

// bytes returns b as a string, one read before when there is one.
func (in *interner) bytes(b []byte) string {
	if s, ok := in.strs[string(b)]; ok {
		return s
	}
	if len(in.strs) >= maxStrings {
		clear(in.strs)
		maps.Copy(in.strs, common)
	}
	s := string(b)
	in.strs[s] = s
	return s
}

// stringMap decodes m into a StringMap as decodeValue does (null values
// are ""), or returns an equal one decoded before.
func (in *interner) stringMap(m map[string]any) (StringMap, error) {
	in.keys = in.keys[:0]
	for k, v := range m {
		if _, ok := v.(string); !ok && v != nil {
			return StringMap{}, in.mapError(m)
		}
		in.keys = append(in.keys, k)
	}
	slices.Sort(in.keys)
	in.enc = in.enc[:0]
	for _, k := range in.keys {
		s, _ := m[k].(string)
		in.enc = appendEntry(in.enc, k, s)
	}
	if c, ok := in.maps[string(in.enc)]; ok {
		return c, nil
	}
	out := stringMapOf(in.enc)
	if in.maps == nil {
		return out, nil // an interner that shares nothing
	}
	if len(in.maps) >= maxInterned {
		clear(in.maps)
	}
	in.maps[out.entries()] = out
	return out, nil
}

// mapError is the error of a map whose value for a key, the first in
// order that has one, is neither a string nor null.
func (in *interner) mapError(m map[string]any) error {
	in.keys = in.keys[:0]
	for k := range m {
		in.keys = append(in.keys, k)
	}
	slices.Sort(in.keys)
	for _, k := range in.keys {
		switch v := m[k].(type) {
		case string, nil:
		default:
			return fmt.Errorf("%s: want a string, not %s", k, typeName(v))
		}
	}
	return nil
}

// maxSharedLen is the longest list an interner shares: the lists that
// repeat (ports, conditions) are short.
const maxSharedLen = 4

// sliceKey is the content of a list of 2 to maxSharedLen elements.
type sliceKey[T comparable] struct {
	n int
	a [maxSharedLen]T
}

// sliceTable holds short lists by content: those of one element (most)
// by it, to hash no more than it.
type sliceTable[T comparable] struct {
	one map[T][]T
	few map[sliceKey[T]][]T
}

// share returns l, or an equal list that t holds.
func (t *sliceTable[T]) share(l []T) []T {
	switch {
	case len(l) == 0 || len(l) > maxSharedLen:
		return l
	case len(l) == 1:
		return shareBy(&t.one, l[0], l)
	}
	k := sliceKey[T]{n: len(l)}
	copy(k.a[:], l)
	return shareBy(&t.few, k, l)
}

// shareBy returns the list *tab holds under k, else l, which it then holds.
func shareBy[K comparable, T any](tab *map[K][]T, k K, l []T) []T {
	if c, ok := (*tab)[k]; ok {
		return c
	}
	if *tab == nil || len(*tab) >= maxInterned {
		*tab = map[K][]T{}
	}
	(*tab)[k] = l
	return l
}

// containerKey is what tells a Container from another once its ports are
// shared: equal ports are the same list (or both nil, or both empty).
type containerKey struct {
	name, image   string
	restartPolicy string
	ports         *ContainerPort
	nPorts        int
	nilPorts      bool
	probe         *Probe
}

// shareSlices shares o's short lists with equal ones of the objects
// decoded before. It runs after applyDefaults, which writes into lists.
func (in *interner) shareSlices(o *Object) {
	switch {
	case o.Service != nil:
		s := &o.Service.Spec
		s.Ports = in.servicePorts.share(s.Ports)
		s.IPFamilies = in.strings.share(s.IPFamilies)
	case o.Pod != nil:
		cs := o.Pod.Spec.Containers
		if len(cs) == 0 || len(cs) > maxSharedLen {
			break
		}
		k := sliceKey[containerKey]{n: len(cs)}
		for i := range cs {
			c := &cs[i]
			c.Ports = in.containerPorts.share(c.Ports)
			k.a[i] = containerKey{name: c.Name, image: c.Image, restartPolicy: c.RestartPolicy, nPorts: len(c.Ports), nilPorts: c.Ports == nil, probe: c.ReadinessProbe}
			if len(c.Ports) > 0 {
				k.a[i].ports = &c.Ports[0]
			}
		}
		if len(cs) == 1 {
			o.Pod.Spec.Containers = shareBy(&in.containers.one, k.a[0], cs)
		} else {
			o.Pod.Spec.Containers = shareBy(&in.containers.few, k, cs)
		}
		o.Pod.Status.Conditions = in.conditions.share(o.Pod.Status.Conditions)
	case o.Endpoints != nil:
		for i := range o.Endpoints.Subsets {
			ss := &o.Endpoints.Subsets[i]
			ss.Ports = in.endpointPorts.share(ss.Ports)
		}
	case o.EndpointSlice != nil:
		o.EndpointSlice.Ports = in.endpointPorts.share(o.EndpointSlice.Ports)
	}
}
