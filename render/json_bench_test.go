package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/internal/gen/gentree"
	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/schema"
)

// This file is in package render, not render_test, so that it can hold
// PlanJSON to the encoding/json path it replaced (toJSONPlan, indentJSON);
// package compiler does not import render, so there is no cycle.

// BenchmarkPlanJSON measures plan.json of a 10,000-service plan (about
// 20,000 endpoints, 27 MB), compiled once beforehand.
func BenchmarkPlanJSON(b *testing.B) {
	benchmarkPlanJSON(b, PlanJSON)
}

// BenchmarkPlanJSONEncodingJSON measures the encoding/json path PlanJSON
// replaced, on the same plan, for comparison.
func BenchmarkPlanJSONEncodingJSON(b *testing.B) {
	benchmarkPlanJSON(b, func(p *plan.Plan) ([]byte, error) { return referencePlanJSON(b, p), nil })
}

func benchmarkPlanJSON(b *testing.B, planJSON func(*plan.Plan) ([]byte, error)) {
	p := generatedPlan(b, 10000)
	b.ReportAllocs()
	b.ResetTimer()
	var n int
	for b.Loop() {
		out, err := planJSON(p)
		if err != nil {
			b.Fatal(err)
		}
		n = len(out)
	}
	b.SetBytes(int64(n))
}

// generatedPlans holds a func returning generatedPlan's plan of each size,
// made once per test binary: writing and compiling a generated tree costs
// more than the tests that read its plan, and none of them changes it.
var generatedPlans sync.Map // int -> func() (*plan.Plan, error)

// generatedPlan compiles, for node-1, a generated tree of the given size.
// The plan is shared: callers must not change it.
func generatedPlan(tb testing.TB, services int) *plan.Plan {
	tb.Helper()
	f, _ := generatedPlans.LoadOrStore(services, sync.OnceValues(func() (*plan.Plan, error) {
		dir, err := os.MkdirTemp("", "netspec-render-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		return compiledPlan(dir, services)
	}))
	p, err := f.(func() (*plan.Plan, error))()
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// compiledPlan writes a generated tree of the given size to dir and
// compiles it for node-1.
func compiledPlan(dir string, services int) (*plan.Plan, error) {
	if err := gentree.Write(dir, gentree.Config{Services: services, PodsPerService: 2}); err != nil {
		return nil, err
	}
	tr, err := schema.Load(dir, schema.Options{})
	if err != nil {
		return nil, err
	}
	if tr.Diags.Errors() > 0 {
		return nil, tr.Diags.Err()
	}
	checked := compiler.Validate(tr.Objects, nil, tr)
	return compiler.Compile(tr.Objects, checked, "node-1")
}

// referencePlanJSON is how PlanJSON used to write plan.json: encoding/json
// on the mirror types, laid out by indentJSON. PlanJSON must give the same
// bytes.
func referencePlanJSON(t testing.TB, p *plan.Plan) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(toJSONPlan(p)); err != nil {
		t.Fatal(err)
	}
	return indentJSON(bytes.TrimSpace(b.Bytes()))
}

func TestPlanJSONMatchesEncodingJSON(t *testing.T) {
	plans := map[string]*plan.Plan{
		"empty":         {},
		"text fixture":  textFixturePlan(),
		"generated":     generatedPlan(t, 300),
		"odd addresses": oddAddressPlan(),
	}
	for _, seed := range []int{0, 1, 2} {
		plans[fmt.Sprintf("full, seed %d", seed)] = filledPlan(t, seed, func(int) int { return 2 }, validStrings)
		plans[fmt.Sprintf("some lists empty, seed %d", seed)] = filledPlan(t, seed, func(n int) int { return n % 3 }, validStrings)
		plans[fmt.Sprintf("invalid UTF-8, seed %d", seed)] = filledPlan(t, seed, func(n int) int { return n % 3 }, oddStrings)
	}
	for name, p := range plans {
		t.Run(name, func(t *testing.T) {
			got, err := PlanJSON(p)
			if err != nil {
				t.Fatal(err)
			}
			want := referencePlanJSON(t, p)
			if !bytes.Equal(got, want) {
				t.Errorf("PlanJSON differs from encoding/json and indentJSON:\n%s", cmp.Diff(string(want), string(got)))
			}
		})
	}
}

// TestPlanJSONWritesEveryField checks, on a plan with every field set and
// every list holding two elements, that plan.json holds each field of
// plan's types under its name (lowerCamel, as the mirror types are
// checked to be), in order, and that it reads back to the same plan: a
// field added to plan.go fails here until PlanJSON writes it.
func TestPlanJSONWritesEveryField(t *testing.T) {
	p := filledPlan(t, 0, func(int) int { return 2 }, validStrings)
	data, err := PlanJSON(p)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	checkJSONKeys(t, dec, reflect.TypeFor[plan.Plan](), "plan")
	back, err := ParsePlanJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(p, back, cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})); diff != "" {
		t.Errorf("plan.json round trip (-want +got):\n%s", diff)
	}
}

// checkJSONKeys reads the next value from dec and checks that it has the
// shape of typ: an object for a struct, with typ's fields as keys in
// order; a list for a slice.
func checkJSONKeys(t *testing.T, dec *json.Decoder, typ reflect.Type, path string) {
	t.Helper()
	textType := reflect.TypeFor[interface{ MarshalText() ([]byte, error) }]()
	switch {
	case typ.Implements(textType) || typ.Kind() != reflect.Struct && typ.Kind() != reflect.Slice:
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if _, isList := v.([]any); isList {
			t.Fatalf("%s is a list, want a plain value", path)
		}
	case typ.Kind() == reflect.Slice:
		expectDelim(t, dec, '[', path)
		for i := 0; dec.More(); i++ {
			checkJSONKeys(t, dec, typ.Elem(), fmt.Sprintf("%s[%d]", path, i))
		}
		expectDelim(t, dec, ']', path)
	default:
		expectDelim(t, dec, '{', path)
		for i, f := range jsonFields(typ) {
			tok, err := dec.Token()
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if want := lowerCamel(f.Name); tok != want {
				t.Fatalf("%s: key %d is %v, want %q for %v.%s", path, i, tok, want, typ, f.Name)
			}
			checkJSONKeys(t, dec, f.Type, path+"."+f.Name)
		}
		if dec.More() {
			tok, _ := dec.Token()
			t.Fatalf("%s: key %v after the fields of %v", path, tok, typ)
		}
		expectDelim(t, dec, '}', path)
	}
}

func expectDelim(t *testing.T, dec *json.Decoder, want json.Delim, path string) {
	t.Helper()
	tok, err := dec.Token()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if tok != want {
		t.Fatalf("%s: got %v, want %v", path, tok, want)
	}
}

// Strings that encoding/json escapes in every way it can.
var (
	validStrings = []string{
		"", "plain", `quote " and backslash \ and slash /`, "<html> & </html>",
		"tab\tnewline\ncr\rbs\bff\f", "nul\x00 unit\x1f del\x7f",
		"é ü ß 日本 🙂", "line\u2028para\u2029", "\ufffd literal", "\u00a0\u200b\ufeff",
	}
	oddStrings = append([]string{
		"\xff", "a\xc3", "\xc3(", "\xed\xa0\x80 surrogate", "\xc0\xaf overlong",
		"\xf4\x90\x80\x80 too big", "\xe2\x80 cut", "mixed \xe2\x80\xa8\xe2\x80",
	}, validStrings...)
)

// filledPlan builds a plan through reflection, so that it keeps up with
// plan.go: every string from strs (in turn, with a counter), every bool
// true, every number and address different, and every list lens(n) long
// for a counter n.
func filledPlan(t *testing.T, seed int, lens func(n int) int, strs []string) *plan.Plan {
	var p plan.Plan
	n := seed
	var fill func(v reflect.Value)
	fill = func(v reflect.Value) {
		n++
		switch v.Type() {
		case reflect.TypeFor[netip.Addr]():
			a := netip.AddrFrom4([4]byte{10, byte(n >> 16), byte(n >> 8), byte(n)})
			if n%2 == 0 {
				a = netip.AddrFrom16([16]byte{0: 0xfd, 14: byte(n >> 8), 15: byte(n)})
			}
			v.Set(reflect.ValueOf(a))
			return
		case reflect.TypeFor[netip.Prefix]():
			v.Set(reflect.ValueOf(netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(n), 0, 0}), 16)))
			return
		}
		switch v.Kind() {
		case reflect.String:
			v.SetString(fmt.Sprint(strs[n%len(strs)], n))
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			v.SetInt(int64(n))
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			v.SetUint(uint64(n))
		case reflect.Slice:
			s := reflect.MakeSlice(v.Type(), lens(n), lens(n))
			for i := range s.Len() {
				fill(s.Index(i))
			}
			v.Set(s)
		case reflect.Struct:
			for i := range v.NumField() {
				fill(v.Field(i))
			}
		case reflect.Pointer:
			v.Set(reflect.New(v.Type().Elem()))
			fill(v.Elem())
		default:
			t.Fatalf("filledPlan cannot fill a %v", v.Type())
		}
	}
	fill(reflect.ValueOf(&p).Elem())
	p.FormatVersion = plan.FormatVersion
	return &p
}

// oddAddressPlan has addresses and prefixes of every form, zero and
// invalid ones and zones that need escaping included.
func oddAddressPlan() *plan.Plan {
	a := netip.MustParseAddr
	addrs := []netip.Addr{
		{}, a("0.0.0.0"), a("255.255.255.255"), a("::"), a("::ffff:1.2.3.4"),
		a("fe80::1%eth0"), a("fe80::1").WithZone("a\"b\\c\x00\xff\u2028é"),
		a("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"), a("2001:db8::1:0:0:1"),
	}
	prefixes := []netip.Prefix{
		{}, netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/64"),
		netip.MustParsePrefix("::ffff:10.0.0.0/104"), netip.PrefixFrom(a("10.0.0.1"), 99),
		netip.MustParsePrefix("0.0.0.0/0"),
	}
	eps := make([]plan.Endpoint, len(addrs))
	for i, ip := range addrs {
		eps[i] = plan.Endpoint{IP: ip, Port: 65535}
	}
	return &plan.Plan{
		Node:    plan.Node{IPs: addrs},
		Cluster: plan.Cluster{ServiceCIDRs: prefixes, PodCIDRs: prefixes[1:2], DNSTTL: 1<<32 - 1},
		Services: []plan.Service{
			{ClusterIPs: addrs, ExternalIPs: addrs[:1], LoadBalancerIPs: addrs[5:], SourceRanges: prefixes, AffinitySeconds: -1 << 31},
			{AffinitySeconds: 1<<31 - 1, Ports: []plan.Port{{Endpoints: eps, Cluster: []int{-1, 0, 1 << 40}}, {}}},
		},
	}
}

func TestAppendJSONString(t *testing.T) {
	var strs []string
	for c := range 256 {
		strs = append(strs, string(rune(c)), string([]byte{byte(c)}), "a"+string([]byte{byte(c)})+"b")
		for d := 0x80; d < 256; d += 7 {
			strs = append(strs, string([]byte{byte(c), byte(d)}), string([]byte{0xe2, byte(c), byte(d)}))
		}
	}
	strs = append(strs, oddStrings...)
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "\"", "\\", "\n", "\x01", "\x7f", "\x80", "\xc3", "\xa9", "\xe2", "\x80", "\xa8", "é", "\u2028", "\u2029", "🙂", "<", "&"}
	for range 20000 {
		var sb strings.Builder
		for range r.IntN(12) {
			sb.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		strs = append(strs, sb.String())
	}
	for _, s := range strs {
		if got, want := string(appendJSONString(nil, s)), encodingJSONString(s); got != want {
			t.Errorf("appendJSONString(%q) = %s, encoding/json writes %s", s, got, want)
		}
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range oddStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := string(appendJSONString([]byte("x"), s)), "x"+encodingJSONString(s); got != want {
			t.Errorf("appendJSONString(%q) = %s, encoding/json writes %s", s, got, want)
		}
	})
}

// encodingJSONString is s as encoding/json writes it, without HTML escaping.
func encodingJSONString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		panic(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// TestPlanJSONSize checks that PlanJSON's buffer estimate is enough, so
// that the buffer does not grow, and not much more.
func TestPlanJSONSize(t *testing.T) {
	for name, p := range map[string]*plan.Plan{
		"empty":        {},
		"text fixture": textFixturePlan(),
		"generated":    generatedPlan(t, 300),
		"full":         filledPlan(t, 0, func(int) int { return 2 }, []string{"s"}),
	} {
		out, err := PlanJSON(p)
		if err != nil {
			t.Fatal(err)
		}
		if size := planJSONSize(p); size < len(out) || size > 2*len(out) && size > 1024 {
			t.Errorf("%s: planJSONSize = %d, plan.json has %d bytes", name, size, len(out))
		} else {
			t.Logf("%s: planJSONSize = %d, plan.json has %d bytes (%.2f)", name, size, len(out), float64(size)/float64(len(out)))
		}
	}
}

// The json* types mirror plan's types field by field, in the same order,
// with the JSON names: they define what PlanJSON writes (referencePlanJSON).
// A field added to plan must be added here, to toJSONPlan, to the
// jsonWriter methods and, for Endpoint, to decodedEndpoint: the tests
// catch one that is not.

type jsonPlan struct {
	FormatVersion int           `json:"formatVersion"`
	Node          jsonNode      `json:"node"`
	Cluster       jsonCluster   `json:"cluster"`
	Services      []jsonService `json:"services"`
	DNS           jsonDNS       `json:"dns"`
	Env           []jsonEnvFile `json:"env"`
}

type jsonNode struct {
	Name string       `json:"name"`
	Zone string       `json:"zone"`
	IPs  []netip.Addr `json:"ips"`
}

type jsonCluster struct {
	Domain            string         `json:"domain"`
	ServiceCIDRs      []netip.Prefix `json:"serviceCIDRs"`
	PodCIDRs          []netip.Prefix `json:"podCIDRs"`
	NodePortAddresses []netip.Prefix `json:"nodePortAddresses"`
	DNSTTL            uint32         `json:"dnsTTL"`
	DNSAddress        netip.Addr     `json:"dnsAddress,omitzero"`
}

type jsonService struct {
	Namespace           string         `json:"namespace"`
	Name                string         `json:"name"`
	Type                string         `json:"type"`
	ClusterIPs          []netip.Addr   `json:"clusterIPs"`
	Headless            bool           `json:"headless"`
	ExternalName        string         `json:"externalName"`
	ExternalIPs         []netip.Addr   `json:"externalIPs"`
	LoadBalancerIPs     []netip.Addr   `json:"loadBalancerIPs"`
	SourceRanges        []netip.Prefix `json:"sourceRanges"`
	AffinitySeconds     int32          `json:"affinitySeconds"`
	InternalLocal       bool           `json:"internalLocal"`
	ExternalLocal       bool           `json:"externalLocal"`
	HealthCheckNodePort uint16         `json:"healthCheckNodePort"`
	IPVSScheduler       string         `json:"ipvsScheduler"`
	ProxyName           string         `json:"proxyName,omitempty"`
	Ports               []jsonPort     `json:"ports"`
}

type jsonPort struct {
	Name         string         `json:"name"`
	Protocol     string         `json:"protocol"`
	Port         uint16         `json:"port"`
	NodePort     uint16         `json:"nodePort"`
	Endpoints    []jsonEndpoint `json:"endpoints"`
	Cluster      []int          `json:"cluster"`
	External     []int          `json:"external"`
	ShortCircuit []int          `json:"shortCircuit,omitempty"`
}

type jsonEndpoint struct {
	IP          netip.Addr  `json:"ip"`
	Port        uint16      `json:"port"`
	Ready       bool        `json:"ready"`
	Serving     bool        `json:"serving"`
	Terminating bool        `json:"terminating"`
	NodeName    string      `json:"nodeName"`
	Zone        string      `json:"zone"`
	Hostname    string      `json:"hostname"`
	ZoneHints   []string    `json:"zoneHints"`
	NodeHints   []string    `json:"nodeHints"`
	Pod         string      `json:"pod"`
	Probes      []jsonProbe `json:"probes"`
}

type jsonProbe struct {
	Action              plan.ProbeAction  `json:"action"`
	Port                uint16            `json:"port"`
	PortName            string            `json:"portName,omitempty"`
	Scheme              string            `json:"scheme"`
	Host                string            `json:"host"`
	Path                string            `json:"path"`
	Headers             []jsonProbeHeader `json:"headers"`
	GRPCService         string            `json:"grpcService"`
	InitialDelaySeconds int32             `json:"initialDelaySeconds"`
	PeriodSeconds       int32             `json:"periodSeconds"`
	TimeoutSeconds      int32             `json:"timeoutSeconds"`
	SuccessThreshold    int32             `json:"successThreshold"`
	FailureThreshold    int32             `json:"failureThreshold"`
}

type jsonProbeHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type jsonDNS struct {
	Zones []jsonZone `json:"zones"`
}

type jsonZone struct {
	Name    string       `json:"name"`
	Records []jsonRecord `json:"records"`
}

type jsonRecord struct {
	Name string `json:"name"`
	Type string `json:"type"`
	TTL  uint32 `json:"ttl"`
	Data string `json:"data"`
}

type jsonEnvFile struct {
	Namespace string       `json:"namespace"`
	Vars      []jsonEnvVar `json:"vars"`
}

type jsonEnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// jsonSame is the identity, for jsonList.
func jsonSame[T any](x T) T { return x }

// toJSONPlan converts a Plan to the mirror types, for referencePlanJSON.
func toJSONPlan(p *plan.Plan) *jsonPlan {
	return &jsonPlan{
		FormatVersion: plan.FormatVersion,
		Node:          jsonNode{Name: p.Node.Name, Zone: p.Node.Zone, IPs: jsonList(p.Node.IPs, jsonSame)},
		Cluster: jsonCluster{
			Domain:            p.Cluster.Domain,
			ServiceCIDRs:      jsonList(p.Cluster.ServiceCIDRs, jsonSame),
			PodCIDRs:          jsonList(p.Cluster.PodCIDRs, jsonSame),
			NodePortAddresses: jsonList(p.Cluster.NodePortAddresses, jsonSame),
			DNSTTL:            p.Cluster.DNSTTL,
			DNSAddress:        p.Cluster.DNSAddress,
		},
		Services: jsonList(p.Services, func(s plan.Service) jsonService {
			return jsonService{
				Namespace:           s.Namespace,
				Name:                s.Name,
				Type:                s.Type,
				ClusterIPs:          jsonList(s.ClusterIPs, jsonSame),
				Headless:            s.Headless,
				ExternalName:        s.ExternalName,
				ExternalIPs:         jsonList(s.ExternalIPs, jsonSame),
				LoadBalancerIPs:     jsonList(s.LoadBalancerIPs, jsonSame),
				SourceRanges:        jsonList(s.SourceRanges, jsonSame),
				AffinitySeconds:     s.AffinitySeconds,
				InternalLocal:       s.InternalLocal,
				ExternalLocal:       s.ExternalLocal,
				HealthCheckNodePort: s.HealthCheckNodePort,
				IPVSScheduler:       s.IPVSScheduler,
				ProxyName:           s.ProxyName,
				Ports: jsonList(s.Ports, func(pt plan.Port) jsonPort {
					return jsonPort{
						Name:     pt.Name,
						Protocol: pt.Protocol,
						Port:     pt.Port,
						NodePort: pt.NodePort,
						Endpoints: jsonList(pt.Endpoints, func(e plan.Endpoint) jsonEndpoint {
							return jsonEndpoint{
								IP:          e.IP,
								Port:        e.Port,
								Ready:       e.Ready,
								Serving:     e.Serving,
								Terminating: e.Terminating,
								NodeName:    e.NodeName,
								Zone:        e.Zone,
								Hostname:    e.Hostname(),
								ZoneHints:   jsonList(e.ZoneHints(), jsonSame),
								NodeHints:   jsonList(e.NodeHints(), jsonSame),
								Pod:         e.Pod,
								Probes: jsonList(e.Probes, func(p plan.Probe) jsonProbe {
									return jsonProbe{
										Action: p.Action, Port: p.Port, PortName: p.PortName, Scheme: p.Scheme, Host: p.Host, Path: p.Path,
										Headers: jsonList(p.Headers, func(h plan.ProbeHeader) jsonProbeHeader {
											return jsonProbeHeader{Name: h.Name, Value: h.Value}
										}),
										GRPCService:         p.GRPCService,
										InitialDelaySeconds: p.InitialDelaySeconds,
										PeriodSeconds:       p.PeriodSeconds,
										TimeoutSeconds:      p.TimeoutSeconds,
										SuccessThreshold:    p.SuccessThreshold,
										FailureThreshold:    p.FailureThreshold,
									}
								}),
							}
						}),
						Cluster:      jsonList(pt.Cluster, jsonSame),
						External:     jsonList(pt.External, jsonSame),
						ShortCircuit: pt.ShortCircuit,
					}
				}),
			}
		}),
		DNS: jsonDNS{Zones: jsonList(p.DNS.Zones, func(z plan.Zone) jsonZone {
			return jsonZone{Name: z.Name, Records: jsonList(z.Records, func(r plan.Record) jsonRecord {
				return jsonRecord{Name: r.Name, Type: r.Type, TTL: r.TTL, Data: r.Data}
			})}
		})},
		Env: jsonList(p.Env, func(f plan.EnvFile) jsonEnvFile {
			return jsonEnvFile{Namespace: f.Namespace, Vars: jsonList(f.Vars, func(v plan.EnvVar) jsonEnvVar {
				return jsonEnvVar{Name: v.Name, Value: v.Value}
			})}
		}),
	}
}

// TestWritePlanJSON: WritePlanJSON writes PlanJSON's bytes, in pieces
// (the generated plan is several times spillSize), and returns the first
// error of its writer.
func TestWritePlanJSON(t *testing.T) {
	plans := map[string]*plan.Plan{
		"empty":     {},
		"fixture":   textFixturePlan(),
		"generated": generatedPlan(t, 3000),
	}
	for name, p := range plans {
		t.Run(name, func(t *testing.T) {
			want, err := PlanJSON(p)
			if err != nil {
				t.Fatal(err)
			}
			w := &countingWriter{}
			if err := WritePlanJSON(w, p); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(w.b, want) {
				t.Errorf("WritePlanJSON differs from PlanJSON:\n%s", cmp.Diff(string(want), string(w.b)))
			}
			if name == "generated" && w.writes < 2 {
				t.Errorf("a plan of %d bytes was written in %d pieces, want several", len(want), w.writes)
			}
		})
	}
	t.Run("writer fails", func(t *testing.T) {
		errFull := errors.New("disk full")
		w := &countingWriter{fail: errFull}
		if err := WritePlanJSON(w, generatedPlan(t, 3000)); !errors.Is(err, errFull) {
			t.Errorf("WritePlanJSON = %v, want %v", err, errFull)
		}
		if w.writes != 1 {
			t.Errorf("%d writes after the writer failed, want none", w.writes-1)
		}
	})
	t.Run("bad plan", func(t *testing.T) {
		w := &countingWriter{}
		if err := WritePlanJSON(w, &plan.Plan{FormatVersion: plan.FormatVersion + 1}); err == nil || w.writes > 0 {
			t.Errorf("WritePlanJSON of another format version = %v after %d writes, want an error and none", err, w.writes)
		}
	})
}

// countingWriter keeps what it is given and counts the writes; with fail
// set, every write fails.
type countingWriter struct {
	b      []byte
	writes int
	fail   error
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	if w.fail != nil {
		return 0, w.fail
	}
	w.b = append(w.b, p...)
	return len(p), nil
}
