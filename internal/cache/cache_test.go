package cache

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"netspec.dev/netspec/internal/diag"
	"netspec.dev/netspec/internal/gen/gentree"
	"netspec.dev/netspec/schema"
)

func key(i int) schema.Key {
	var k schema.Key
	binary.LittleEndian.PutUint64(k[:], uint64(i)+1)
	k[31] = byte(i * 7)
	return k
}

// sampleResult holds every kind with nil and empty slices and maps, pointers,
// both forms of IntOrString and a diagnostic whose path mixes keys and indexes.
func sampleResult(i int) *schema.UnitResult {
	yes := true
	return &schema.UnitResult{
		Objects: []*schema.Object{
			{
				Src:        schema.Source{File: fmt.Sprintf("ns/svc-%d.yaml", i), Doc: 0, Item: -1},
				APIVersion: "v1",
				Kind:       schema.KindService,
				Service: &schema.Service{
					Metadata: schema.ObjectMeta{Name: fmt.Sprint("svc-", i), Namespace: "ns", Labels: schema.NewStringMap(map[string]string{"app": "web", "": ""}), Annotations: schema.NewStringMap(map[string]string{})},
					Spec: schema.ServiceSpec{
						Type: "NodePort",
						Ports: []schema.ServicePort{
							{Name: "http", Protocol: "TCP", Port: 80, TargetPort: schema.IntOrString{Str: "http"}, NodePort: 30080},
							{Name: "dns", Protocol: "UDP", Port: 53, TargetPort: schema.IntOrString{Int: 5353}},
						},
						Selector:                      schema.NewStringMap(map[string]string{"app": "web"}),
						ClusterIPs:                    []string{},
						SessionAffinity:               "ClientIP",
						SessionAffinityConfig:         &schema.SessionAffinityConfig{ClientIP: &schema.ClientIPConfig{TimeoutSeconds: -1}},
						AllocateLoadBalancerNodePorts: &yes,
						PublishNotReadyAddresses:      true,
					},
					Status: schema.ServiceStatus{LoadBalancer: schema.LoadBalancerStatus{Ingress: []schema.LoadBalancerIngress{{IP: "203.0.113.1"}}}},
				},
			},
			{
				Src:  schema.Source{File: "p.yaml", Doc: 3, Item: 2, CUE: "pods.a"},
				Kind: schema.KindPod,
				Pod: &schema.Pod{
					Metadata: schema.ObjectMeta{Name: "p", DeletionTimestamp: "2024-01-01T00:00:00Z"},
					Spec:     schema.PodSpec{Containers: []schema.Container{{Name: "c", Ports: []schema.ContainerPort{{Name: "h", ContainerPort: 65535, Protocol: "SCTP"}}}}},
					Status:   schema.PodStatus{PodIP: "10.0.0.1", PodIPs: []schema.PodIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}}, Conditions: []schema.PodCondition{{Type: "Ready", Status: "True"}}},
				},
			},
			{Kind: schema.KindCluster, Cluster: &schema.Cluster{Spec: schema.DefaultClusterSpec()}},
			{Kind: schema.KindEndpointSlice, EndpointSlice: &schema.EndpointSlice{Endpoints: []schema.SliceEndpoint{{Addresses: []string{"a"}, Hints: &schema.EndpointHints{ForZones: []schema.ForZone{{Name: "z"}}}}}}},
		},
		Ignored: nil,
		Diags: diag.List{
			{Pos: diag.Pos{File: "f.yaml", Line: 3, Col: 7}, Path: diag.Path{"spec", "ports", 1, "name"}, Severity: diag.Warning, Msg: "ünïcode \x00 msg"},
			{Pos: diag.Pos{File: "f.yaml"}, Path: diag.Path{}, Msg: "empty path"},
			{Pos: diag.Pos{File: "f.yaml"}, Msg: "nil path"},
		},
	}
}

func TestCodecRoundTrip(t *testing.T) {
	for _, r := range []*schema.UnitResult{sampleResult(1), {}, {Objects: []*schema.Object{}, Diags: diag.List{}}, {Objects: []*schema.Object{nil}}} {
		b, err := encodeResult(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeResult(b)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(r, got); diff != "" {
			t.Errorf("round trip changed the result (-want +got):\n%s", diff)
		}
		b2, _ := encodeResult(nil, got)
		if !bytes.Equal(b, b2) {
			t.Errorf("encoding is not deterministic")
		}
	}
}

// TestCodecCoversAllFields fills every field of every type reachable from
// UnitResult with non-zero values and checks the round trip, so that a field
// added to the schema types is either stored or makes this test fail.
func TestCodecCoversAllFields(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		r := new(schema.UnitResult)
		fill(reflect.ValueOf(r).Elem(), rng, 0)
		b, err := encodeResult(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeResult(b)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(r, got); diff != "" {
			t.Fatalf("round trip changed the result (-want +got):\n%s", diff)
		}
	}
}

// TestCodecRealTree round-trips the results of a generated tree.
func TestCodecRealTree(t *testing.T) {
	root := t.TempDir()
	if err := gentree.Write(root, gentree.Config{Services: 20, PodsPerService: 2}); err != nil {
		t.Fatal(err)
	}
	m := NewMemory()
	if _, err := schema.Load(root, schema.Options{Cache: m}); err != nil {
		t.Fatal(err)
	}
	if m.Len() != 22 {
		t.Fatalf("%d results cached, want 22", m.Len())
	}
	for k, e := range m.entries {
		b, err := encodeResult(nil, e.r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeResult(b)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(e.r, got); diff != "" {
			t.Errorf("%x: round trip changed the result (-want +got):\n%s", k[:4], diff)
		}
	}
}

func fill(v reflect.Value, rng *rand.Rand, depth int) {
	if v.Type() == reflect.TypeFor[schema.StringMap]() {
		// Its entries are unexported: fill it as the map it stands for.
		m := map[string]string{}
		for range 1 + rng.IntN(3) {
			m[fmt.Sprintf("s%d", rng.IntN(1000))] = fmt.Sprintf("s%d", rng.IntN(1000))
		}
		v.Set(reflect.ValueOf(schema.NewStringMap(m)))
		return
	}
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(rng.IntN(200000)) - 100000)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(rng.IntN(250) + 1))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(rng.Float64())
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", rng.IntN(1000)))
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), rng, depth+1)
		v.Set(p)
	case reflect.Slice:
		n := 1 + rng.IntN(3)
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fill(s.Index(i), rng, depth+1)
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for range 1 + rng.IntN(3) {
			k, x := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(k, rng, depth+1)
			fill(x, rng, depth+1)
			m.SetMapIndex(k, x)
		}
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			fill(v.Field(i), rng, depth+1)
		}
	case reflect.Interface:
		if rng.IntN(2) == 0 {
			v.Set(reflect.ValueOf(fmt.Sprint("k", rng.IntN(9))))
		} else {
			v.Set(reflect.ValueOf(rng.IntN(9)))
		}
	}
}

func TestCodecRejectsCorruptEntries(t *testing.T) {
	b, err := encodeResult(nil, sampleResult(1))
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(b) {
		if _, err := decodeResult(b[:n]); err == nil {
			t.Fatalf("decoding a %d-byte prefix of %d bytes succeeded", n, len(b))
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		c := bytes.Clone(b)
		for range 1 + rng.IntN(4) {
			c[rng.IntN(len(c))] = byte(rng.Uint32())
		}
		decodeResult(c) // must not panic; may succeed with other values
	}
	// A huge length must not allocate.
	if _, err := decodeResult([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}); err == nil {
		t.Fatal("decoding a huge length succeeded")
	}
}

func openDisk(t *testing.T, dir, root string) *Disk {
	t.Helper()
	d, err := OpenDisk(dir, root)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDiskRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	root := t.TempDir()
	d := openDisk(t, dir, root)
	if d.Loaded != 0 || d.Ignored != "" {
		t.Fatalf("fresh cache: Loaded %d, Ignored %q", d.Loaded, d.Ignored)
	}
	want := map[schema.Key]*schema.UnitResult{}
	for i := range 50 {
		want[key(i)] = sampleResult(i)
		d.Put(key(i), sampleResult(i))
	}
	if err := d.Save(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(d.Path())
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("pack mode %v, want 0600", st.Mode().Perm())
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("cache dir: %v, %v; want mode 0700", st.Mode().Perm(), err)
	}

	d = openDisk(t, dir, root)
	if d.Loaded != 50 {
		t.Fatalf("Loaded %d, want 50 (Ignored %q)", d.Loaded, d.Ignored)
	}
	for k, w := range want {
		got, ok := d.Get(k)
		if !ok {
			t.Fatalf("Get(%x) missed", k[:4])
		}
		if diff := cmp.Diff(w, got); diff != "" {
			t.Fatalf("Get(%x) (-want +got):\n%s", k[:4], diff)
		}
	}
	if _, ok := d.Get(key(1000)); ok {
		t.Fatal("Get of a key never stored hit")
	}
	// Another tree root has its own pack.
	if other := openDisk(t, dir, t.TempDir()); other.Loaded != 0 || other.Path() == d.Path() {
		t.Fatalf("another root shares the pack %s", other.Path())
	}
	// The same root spelt differently shares it.
	if rel, err := filepath.Rel(mustGetwd(t), root); err == nil {
		if same := openDisk(t, dir, rel); same.Path() != d.Path() {
			t.Errorf("relative root %s: pack %s, want %s", rel, same.Path(), d.Path())
		}
	}
}

func mustGetwd(t *testing.T) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}

// Put snapshots the result: changing it afterwards changes nothing saved.
func TestDiskPutSnapshots(t *testing.T) {
	dir, root := t.TempDir(), t.TempDir()
	d := openDisk(t, dir, root)
	r := sampleResult(1)
	d.Put(key(1), r)
	r.Objects[0].Service.Metadata.Name = "changed"
	if err := d.Save(); err != nil {
		t.Fatal(err)
	}
	got, ok := openDisk(t, dir, root).Get(key(1))
	if !ok {
		t.Fatal("miss")
	}
	if diff := cmp.Diff(sampleResult(1), got); diff != "" {
		t.Fatalf("Get after Put and change (-want +got):\n%s", diff)
	}
}

func TestDiskSaveKeepsOnlyUsed(t *testing.T) {
	dir, root := t.TempDir(), t.TempDir()
	d := openDisk(t, dir, root)
	for i := range 10 {
		d.Put(key(i), sampleResult(i))
	}
	if err := d.Save(); err != nil {
		t.Fatal(err)
	}

	// Second run: uses 0..4, adds 10.
	d = openDisk(t, dir, root)
	for i := range 5 {
		if _, ok := d.Get(key(i)); !ok {
			t.Fatalf("miss %d", i)
		}
	}
	d.Put(key(10), sampleResult(10))
	if err := d.Save(); err != nil {
		t.Fatal(err)
	}

	d = openDisk(t, dir, root)
	if d.Loaded != 6 {
		t.Fatalf("pack holds %d entries, want 6", d.Loaded)
	}
	for i := range 11 {
		_, ok := d.Get(key(i))
		if want := i < 5 || i == 10; ok != want {
			t.Errorf("key %d: hit %v, want %v", i, ok, want)
		}
	}
}

// A run that only hits does not rewrite the pack.
func TestDiskSaveUnchangedWritesNothing(t *testing.T) {
	dir, root := t.TempDir(), t.TempDir()
	d := openDisk(t, dir, root)
	d.Put(key(1), sampleResult(1))
	if err := d.Save(); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(d.Path())
	if err != nil {
		t.Fatal(err)
	}
	d = openDisk(t, dir, root)
	if _, ok := d.Get(key(1)); !ok {
		t.Fatal("miss")
	}
	for range 2 {
		if err := d.Save(); err != nil {
			t.Fatal(err)
		}
		after, err := os.Stat(d.Path())
		if err != nil {
			t.Fatal(err)
		}
		if !os.SameFile(before, after) {
			t.Fatal("Save of an unchanged cache replaced the pack")
		}
	}
	// After a Put it does.
	d.Put(key(2), sampleResult(2))
	if err := d.Save(); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.Stat(d.Path()); os.SameFile(before, after) {
		t.Fatal("Save after Put did not write")
	}
}

func TestDiskSaveError(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	d := openDisk(t, dir, t.TempDir()) // dir is a file: reading fails quietly
	d.Put(key(1), sampleResult(1))
	if err := d.Save(); err == nil {
		t.Fatal("Save into a file as directory succeeded")
	}
}

// writePack saves one entry and returns the pack's bytes and name.
func writePack(t *testing.T, dir, root string) ([]byte, string) {
	t.Helper()
	d := openDisk(t, dir, root)
	d.Put(key(1), sampleResult(1))
	d.Put(key(2), sampleResult(2))
	if err := d.Save(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(d.Path())
	if err != nil {
		t.Fatal(err)
	}
	return data, d.Path()
}

func TestDiskIgnoresBadPacks(t *testing.T) {
	dir, root := t.TempDir(), t.TempDir()
	good, name := writePack(t, dir, root)
	if d := openDisk(t, dir, root); d.Loaded != 2 {
		t.Fatalf("good pack: Loaded %d, Ignored %q", d.Loaded, d.Ignored)
	}

	rng := rand.New(rand.NewPCG(5, 6))
	random := make([]byte, 4096)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	with := func(off int, b ...byte) []byte {
		c := bytes.Clone(good)
		copy(c[off:], b)
		return c
	}
	bodyFlip := bytes.Clone(good)
	bodyFlip[len(bodyFlip)-3] ^= 0x40
	cases := map[string][]byte{
		"empty":          {},
		"random":         random,
		"magic only":     []byte(packMagic),
		"header only":    good[:headerLen],
		"truncated":      good[:len(good)-1],
		"truncated half": good[:len(good)/2],
		"extended":       append(bytes.Clone(good), 0),
		"version":        with(8, formatVersion+1),
		"salt":           with(12, good[12]^1),
		"count":          with(44, good[44]+1),
		"body bit":       bodyFlip,
		"random body":    append(bytes.Clone(good[:headerLen]), random...),
	}
	for what, data := range cases {
		if err := os.WriteFile(name, data, 0o600); err != nil {
			t.Fatal(err)
		}
		d := openDisk(t, dir, root)
		if d.Loaded != 0 || d.Ignored == "" && len(data) > 0 {
			t.Errorf("%s: Loaded %d, Ignored %q", what, d.Loaded, d.Ignored)
		}
		if _, ok := d.Get(key(1)); ok {
			t.Errorf("%s: Get hit", what)
		}
		// The cache still works, and Save replaces the bad pack.
		d.Put(key(3), sampleResult(3))
		if err := d.Save(); err != nil {
			t.Fatal(err)
		}
		if d := openDisk(t, dir, root); d.Loaded != 1 {
			t.Errorf("%s: after Save: Loaded %d, Ignored %q", what, d.Loaded, d.Ignored)
		}
	}

	// A pack that cannot be read is ignored too.
	if err := os.Remove(name); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(name, 0o700); err != nil {
		t.Fatal(err)
	}
	if d := openDisk(t, dir, root); d.Loaded != 0 || d.Ignored == "" {
		t.Errorf("directory as pack: Loaded %d, Ignored %q", d.Loaded, d.Ignored)
	}
}

// A pack with a valid checksum but an entry that does not decode: that
// entry misses, the others hit.
func TestDiskBadEntryMisses(t *testing.T) {
	dir, root := t.TempDir(), t.TempDir()
	d := openDisk(t, dir, root)
	d.entries[key(1)] = &entry{raw: []byte{0xff}}
	d.entries[key(1)].used.Store(true)
	d.dirty = true
	d.Put(key(2), sampleResult(2))
	if err := d.Save(); err != nil {
		t.Fatal(err)
	}
	d = openDisk(t, dir, root)
	if d.Loaded != 2 {
		t.Fatalf("Loaded %d, Ignored %q", d.Loaded, d.Ignored)
	}
	if _, ok := d.Get(key(1)); ok {
		t.Error("bad entry hit")
	}
	if _, ok := d.Get(key(2)); !ok {
		t.Error("good entry missed")
	}
}

func TestConcurrent(t *testing.T) {
	dir, root := t.TempDir(), t.TempDir()
	d := openDisk(t, dir, root)
	for i := range 100 {
		d.Put(key(i), sampleResult(i))
	}
	if err := d.Save(); err != nil {
		t.Fatal(err)
	}
	caches := map[string]schema.Cache{"memory": NewMemory(), "disk": openDisk(t, dir, root)}
	for name, c := range caches {
		t.Run(name, func(t *testing.T) {
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					for i := range 200 {
						k := key((i*7 + g) % 200)
						if r, ok := c.Get(k); ok {
							if r.Objects[0].Service == nil {
								t.Error("bad result")
							}
						} else {
							c.Put(k, sampleResult(i))
						}
					}
				})
			}
			if dc, ok := c.(*Disk); ok {
				wg.Go(func() {
					if err := dc.Save(); err != nil {
						t.Error(err)
					}
				})
			}
			if mc, ok := c.(*Memory); ok {
				wg.Go(func() { mc.Sweep() })
			}
			wg.Wait()
		})
	}
}

func TestMemorySweep(t *testing.T) {
	m := NewMemory()
	m.Put(key(1), sampleResult(1))
	m.Put(key(2), sampleResult(2))
	if n := m.Sweep(); n != 0 {
		t.Fatalf("first Sweep dropped %d", n)
	}
	if _, ok := m.Get(key(1)); !ok {
		t.Fatal("miss")
	}
	if n := m.Sweep(); n != 1 || m.Len() != 1 {
		t.Fatalf("Sweep dropped %d, left %d; want 1, 1", n, m.Len())
	}
	if _, ok := m.Get(key(2)); ok {
		t.Fatal("swept entry hit")
	}
	r := sampleResult(3)
	m.Put(key(3), r)
	if got, _ := m.Get(key(3)); got != r {
		t.Fatal("Memory does not return the stored result")
	}
}

func TestBuildID(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	id := buildID(exe)
	if id == "" {
		t.Fatal("no build ID in the test binary")
	}
	t.Logf("build ID %s", id)
	if raw := rawBuildID(exe); raw != "" && raw != id {
		t.Errorf("raw scan found %q, ELF note %q", raw, id)
	}
	if binarySalt() == unusableSalt {
		t.Fatal("unusable salt")
	}
}

func TestDefaultDir(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", "/x/cache")
	t.Setenv("HOME", "/x/home")
	if d := DefaultDir(); d != "/x/cache/netspec" && d != "/x/home/Library/Caches/netspec" {
		t.Errorf("DefaultDir() = %q", d)
	}
}
