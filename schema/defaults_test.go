package schema

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"

	"netspec.dev/netspec/internal/diag"
)

// defaultCases cover every default the schema declares. Each is decoded
// twice: by Load (Go: encoding/json and applyDefaults) and by CUE (the
// kind's definition unified with the raw object, then Decode); both must
// give the same typed object.
var defaultCases = []struct {
	name string
	yaml string
}{
	{name: "service minimal", yaml: `{apiVersion: v1, kind: Service, metadata: {name: web}, spec: {ports: [{port: 80}]}}`},
	{name: "service ports", yaml: `{apiVersion: v1, kind: Service, metadata: {name: web, namespace: shop}, spec: {ports: [
		{name: a, port: 80}, {name: b, port: 81, protocol: UDP}, {name: c, port: 82, targetPort: 8082}, {name: d, port: 83, targetPort: http, protocol: SCTP}]}}`},
	{name: "service ClientIP", yaml: `{apiVersion: v1, kind: Service, metadata: {name: web}, spec: {sessionAffinity: ClientIP, ports: [{port: 80}]}}`},
	{name: "service ClientIP empty config", yaml: `{apiVersion: v1, kind: Service, metadata: {name: web}, spec: {sessionAffinity: ClientIP, sessionAffinityConfig: {}, ports: [{port: 80}]}}`},
	{name: "service ClientIP empty clientIP", yaml: `{apiVersion: v1, kind: Service, metadata: {name: web}, spec: {sessionAffinity: ClientIP, sessionAffinityConfig: {clientIP: {}}, ports: [{port: 80}]}}`},
	{name: "service ClientIP timeout", yaml: `{apiVersion: v1, kind: Service, metadata: {name: web}, spec: {sessionAffinity: ClientIP, sessionAffinityConfig: {clientIP: {timeoutSeconds: 60}}, ports: [{port: 80}]}}`},
	{name: "service NodePort", yaml: `{apiVersion: v1, kind: Service, metadata: {name: web}, spec: {type: NodePort, ports: [{port: 80, nodePort: 30080}]}}`},
	{name: "service LoadBalancer", yaml: `{apiVersion: v1, kind: Service, metadata: {name: web}, spec: {type: LoadBalancer, ports: [{port: 80}]}}`},
	{name: "service LoadBalancer Local", yaml: `{apiVersion: v1, kind: Service, metadata: {name: web}, spec: {type: LoadBalancer, externalTrafficPolicy: Local, internalTrafficPolicy: Local, ports: [{port: 80}]}}`},
	{name: "service externalIPs", yaml: `{apiVersion: v1, kind: Service, metadata: {name: web}, spec: {externalIPs: [203.0.113.1], ports: [{port: 80}]}}`},
	{name: "service dual-stack IPs", yaml: `{apiVersion: v1, kind: Service, metadata: {name: web}, spec: {clusterIP: 10.96.0.10, clusterIPs: [10.96.0.10, "fd00::10"], ports: [{port: 80}]}}`},
	{name: "service dual-stack families", yaml: `{apiVersion: v1, kind: Service, metadata: {name: web}, spec: {ipFamilies: [IPv6, IPv4], ports: [{port: 80}]}}`},
	{name: "service one IP", yaml: `{apiVersion: v1, kind: Service, metadata: {name: web}, spec: {clusterIP: 10.96.0.10, clusterIPs: [10.96.0.10], ipFamilies: [IPv4], ports: [{port: 80}]}}`},
	{name: "service headless dual-stack", yaml: `{apiVersion: v1, kind: Service, metadata: {name: web}, spec: {clusterIP: None, ipFamilies: [IPv4, IPv6]}}`},
	{name: "service PreferDualStack", yaml: `{apiVersion: v1, kind: Service, metadata: {name: web}, spec: {ipFamilyPolicy: PreferDualStack, ports: [{port: 80}]}}`},
	{name: "service ExternalName", yaml: `{apiVersion: v1, kind: Service, metadata: {name: web}, spec: {type: ExternalName, externalName: db.example.com}}`},
	{name: "service status", yaml: `{apiVersion: v1, kind: Service, metadata: {name: web, labels: {a: b}}, spec: {type: LoadBalancer, ports: [{port: 80}], publishNotReadyAddresses: true,
		allocateLoadBalancerNodePorts: false}, status: {loadBalancer: {ingress: [{ip: 203.0.113.9}]}}}`},
	{name: "endpoints", yaml: `{apiVersion: v1, kind: Endpoints, metadata: {name: web}, subsets: [{addresses: [{ip: 10.1.0.1, hostname: a}], notReadyAddresses: [{ip: 10.1.0.2}],
		ports: [{name: a, port: 80}, {name: b, port: 53, protocol: UDP}]}]}`},
	{name: "endpoints empty", yaml: `{apiVersion: v1, kind: Endpoints, metadata: {name: web}}`},
	{name: "slice conditions", yaml: `{apiVersion: discovery.k8s.io/v1, kind: EndpointSlice, metadata: {name: web-1}, addressType: IPv4, endpoints: [
		{addresses: [10.1.0.1]},
		{addresses: [10.1.0.2], conditions: {}},
		{addresses: [10.1.0.3], conditions: {ready: false}},
		{addresses: [10.1.0.4], conditions: {serving: false, terminating: true}},
		{addresses: [10.1.0.5], conditions: {ready: true, serving: true, terminating: false}, nodeName: n1, zone: a, hints: {forZones: [{name: a}]}}],
		ports: [{name: a, port: 80}, {name: b, port: 53, protocol: UDP}]}`},
	{name: "slice unnamed port", yaml: `{apiVersion: discovery.k8s.io/v1, kind: EndpointSlice, metadata: {name: web-1}, addressType: IPv6, endpoints: [{addresses: ["2001:db8::1"]}], ports: [{name: "", port: 81}]}`},
	{name: "slice no ports", yaml: `{apiVersion: discovery.k8s.io/v1, kind: EndpointSlice, metadata: {name: web-1, namespace: x}, addressType: FQDN, endpoints: [{addresses: [a.example.com]}]}`},
	{name: "pod", yaml: `{apiVersion: v1, kind: Pod, metadata: {name: web-0, labels: {app: web}}, spec: {nodeName: n1, hostname: h, subdomain: s, containers: [
		{name: a, ports: [{containerPort: 80}, {name: dns, containerPort: 53, protocol: UDP}]}, {name: b}]},
		status: {podIP: 10.1.0.1, podIPs: [{ip: 10.1.0.1}], conditions: [{type: Ready, status: "True"}]}}`},
	{name: "pod empty", yaml: `{apiVersion: v1, kind: Pod, metadata: {name: web-0}, spec: {}}`},
	{name: "node", yaml: `{apiVersion: v1, kind: Node, metadata: {name: n1, labels: {topology.kubernetes.io/zone: a}}, status: {addresses: [{type: InternalIP, address: 192.168.1.1}]}}`},
	{name: "cluster defaults", yaml: `{apiVersion: netspec.dev/v1alpha1, kind: Cluster, metadata: {name: c}, spec: {}}`},
	{name: "cluster set", yaml: `{apiVersion: netspec.dev/v1alpha1, kind: Cluster, metadata: {name: c}, spec: {serviceCIDRs: ["fd00::/108"], nodePortRange: 20000-21000,
		clusterDomain: example.com, dnsTTL: 0, externalIPCIDRs: [203.0.113.0/24], loadBalancerIPCIDRs: [198.51.100.0/24], podCIDRs: [10.244.0.0/16],
		nodePortAddresses: [192.168.1.0/24]}}`},
}

func TestDefaultsMatchSchema(t *testing.T) {
	type input struct{ name, yaml string }
	var inputs []input
	for _, c := range defaultCases {
		inputs = append(inputs, input{c.name, c.yaml})
	}
	// Every valid object of the rule tests too (but the bulk ones).
	for _, c := range ruleCases {
		if c.want == nil && !bulkCase(c.yaml) {
			inputs = append(inputs, input{"rule " + c.rule + "/" + c.name, c.yaml})
		}
	}
	ctx := cuecontext.New()
	s := ctx.CompileBytes(schemaSource)
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	for _, in := range inputs {
		t.Run(in.name, func(t *testing.T) {
			tr := loadFiles(t, map[string]string{"obj.yaml": in.yaml})
			wantNoDiags(t, tr)
			var dl diag.List
			raws, _ := splitYAML("obj.yaml", []byte(in.yaml), &dl)
			if len(raws) != len(tr.Objects) {
				t.Fatalf("%d raw objects, %d loaded", len(raws), len(tr.Objects))
			}
			for i, r := range raws {
				goObj := tr.Objects[i]
				u := s.LookupPath(cue.ParsePath("#" + r.kind)).Unify(ctx.Encode(r.raw))
				if err := u.Validate(cue.Concrete(true)); err != nil {
					t.Fatalf("CUE: %v", err)
				}
				cueObj := &Object{Kind: r.kind}
				var target, goVal any
				switch r.kind {
				case KindService:
					cueObj.Service, goVal = &Service{}, goObj.Service
					target = cueObj.Service
				case KindEndpoints:
					cueObj.Endpoints, goVal = &Endpoints{}, goObj.Endpoints
					target = cueObj.Endpoints
				case KindEndpointSlice:
					cueObj.EndpointSlice, goVal = &EndpointSlice{}, goObj.EndpointSlice
					target = cueObj.EndpointSlice
				case KindPod:
					cueObj.Pod, goVal = &Pod{}, goObj.Pod
					target = cueObj.Pod
				case KindNode:
					cueObj.Node, goVal = &Node{}, goObj.Node
					target = cueObj.Node
				case KindCluster:
					cueObj.Cluster, goVal = &Cluster{}, goObj.Cluster
					target = cueObj.Cluster
				}
				if err := u.Decode(target); err != nil {
					t.Fatalf("CUE decode: %v", err)
				}
				if diffs := deepDiff(goVal, target); len(diffs) > 0 {
					t.Errorf("%s %s: Go and CUE defaults differ (go | cue):\n\t%s", r.kind, goObj.Meta().Name, strings.Join(diffs, "\n\t"))
				}
			}
		})
	}
}

// TestDefaultValues pins the defaults themselves, so that the Go and CUE
// sides cannot agree on a wrong value.
func TestDefaultValues(t *testing.T) {
	tr := loadFiles(t, map[string]string{"a.yaml": `apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Service, metadata: {name: a}, spec: {ports: [{port: 80}]}}
- {apiVersion: v1, kind: Service, metadata: {name: b}, spec: {type: NodePort, sessionAffinity: ClientIP, clusterIP: 10.96.0.1, clusterIPs: [10.96.0.1, "fd00::1"], ports: [{port: 80, targetPort: web}]}}
- {apiVersion: discovery.k8s.io/v1, kind: EndpointSlice, metadata: {name: c}, addressType: IPv4, endpoints: [{addresses: [10.1.0.1]}], ports: [{port: 80}]}
- {apiVersion: v1, kind: Endpoints, metadata: {name: d}, subsets: [{addresses: [{ip: 10.1.0.1}], ports: [{port: 80}]}]}
- {apiVersion: v1, kind: Pod, metadata: {name: e}, spec: {containers: [{name: c, ports: [{containerPort: 80}]}]}}
- {apiVersion: netspec.dev/v1alpha1, kind: Cluster, metadata: {name: f}, spec: {}}
`})
	wantNoDiags(t, tr)
	if len(tr.Objects) != 6 {
		t.Fatalf("got %d objects", len(tr.Objects))
	}
	a, b := tr.Objects[0].Service, tr.Objects[1].Service
	checks := []struct {
		name      string
		got, want any
	}{
		{"namespace", a.Metadata.Namespace, "default"},
		{"type", a.Spec.Type, "ClusterIP"},
		{"protocol", a.Spec.Ports[0].Protocol, "TCP"},
		{"targetPort", a.Spec.Ports[0].TargetPort, IntOrString{Int: 80}},
		{"sessionAffinity", a.Spec.SessionAffinity, "None"},
		{"sessionAffinityConfig", a.Spec.SessionAffinityConfig == nil, true},
		{"internalTrafficPolicy", a.Spec.InternalTrafficPolicy, "Cluster"},
		{"externalTrafficPolicy ClusterIP", a.Spec.ExternalTrafficPolicy, ""},
		{"ipFamilyPolicy", a.Spec.IPFamilyPolicy, "SingleStack"},
		{"named targetPort", b.Spec.Ports[0].TargetPort, IntOrString{Str: "web"}},
		{"timeoutSeconds", b.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds, int32(10800)},
		{"externalTrafficPolicy NodePort", b.Spec.ExternalTrafficPolicy, "Cluster"},
		{"ipFamilyPolicy two IPs", b.Spec.IPFamilyPolicy, "RequireDualStack"},
		{"slice conditions", tr.Objects[2].EndpointSlice.Endpoints[0].Conditions, EndpointConditions{Ready: true, Serving: true, Terminating: false}},
		{"slice port protocol", tr.Objects[2].EndpointSlice.Ports[0].Protocol, "TCP"},
		{"endpoints port protocol", tr.Objects[3].Endpoints.Subsets[0].Ports[0].Protocol, "TCP"},
		{"container port protocol", tr.Objects[4].Pod.Spec.Containers[0].Ports[0].Protocol, "TCP"},
		{"cluster", tr.Objects[5].Cluster.Spec, DefaultClusterSpec()},
		{"cluster namespace", tr.Objects[5].Cluster.Metadata.Namespace, ""},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %#v, want %#v", c.name, c.got, c.want)
		}
	}
}

// deepDiff lists the places where a and b differ, as "path: a | b".
func deepDiff(a, b any) []string {
	var out []string
	diffValue("", reflect.ValueOf(a), reflect.ValueOf(b), &out)
	return out
}

func diffValue(path string, a, b reflect.Value, out *[]string) {
	if a.IsValid() != b.IsValid() || a.IsValid() && a.Type() != b.Type() {
		*out = append(*out, fmt.Sprintf("%s: %v | %v", path, a, b))
		return
	}
	if !a.IsValid() {
		return
	}
	if a.Type() == stringMapType {
		x, y := a.Interface().(StringMap).Map(), b.Interface().(StringMap).Map()
		if !reflect.DeepEqual(x, y) {
			*out = append(*out, fmt.Sprintf("%s: %s | %s", path, show(reflect.ValueOf(x)), show(reflect.ValueOf(y))))
		}
		return
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				*out = append(*out, fmt.Sprintf("%s: %s | %s", path, show(a), show(b)))
			}
			return
		}
		diffValue(path, a.Elem(), b.Elem(), out)
	case reflect.Struct:
		for i := 0; i < a.NumField(); i++ {
			diffValue(path+"."+a.Type().Field(i).Name, a.Field(i), b.Field(i), out)
		}
	case reflect.Slice:
		if a.IsNil() != b.IsNil() {
			*out = append(*out, fmt.Sprintf("%s: %s | %s", path, show(a), show(b)))
			return
		}
		if a.Len() != b.Len() {
			*out = append(*out, fmt.Sprintf("%s: len %d | len %d", path, a.Len(), b.Len()))
			return
		}
		for i := 0; i < a.Len(); i++ {
			diffValue(fmt.Sprintf("%s[%d]", path, i), a.Index(i), b.Index(i), out)
		}
	case reflect.Map:
		if a.IsNil() != b.IsNil() || !reflect.DeepEqual(a.Interface(), b.Interface()) {
			*out = append(*out, fmt.Sprintf("%s: %s | %s", path, show(a), show(b)))
		}
	default:
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			*out = append(*out, fmt.Sprintf("%s: %#v | %#v", path, a.Interface(), b.Interface()))
		}
	}
}

func show(v reflect.Value) string {
	if (v.Kind() == reflect.Pointer || v.Kind() == reflect.Slice || v.Kind() == reflect.Map || v.Kind() == reflect.Interface) && v.IsNil() {
		return "nil"
	}
	return fmt.Sprintf("%+v", v.Interface())
}
