package schema

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The rule tests build a minimal valid object of each kind, patch one or
// two fields, load the result from a temporary tree and compare the
// diagnostics with the expected ones.

const (
	baseService = `
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080}]
`
	baseEndpoints = `
apiVersion: v1
kind: Endpoints
metadata: {name: web, namespace: shop}
subsets:
- addresses: [{ip: 10.1.0.1}]
  ports: [{name: http, port: 8080}]
`
	baseSlice = `
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-abc12, namespace: shop, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
endpoints: [{addresses: [10.1.0.1]}]
ports: [{name: http, port: 8080}]
`
	basePod = `
apiVersion: v1
kind: Pod
metadata: {name: web-0, namespace: shop, labels: {app: web}}
spec:
  containers: [{name: app, image: nginx, ports: [{name: http, containerPort: 8080}]}]
status:
  podIP: 10.1.0.1
  podIPs: [{ip: 10.1.0.1}]
  conditions: [{type: Ready, status: "True"}]
`
	baseNode = `
apiVersion: v1
kind: Node
metadata: {name: node-1, labels: {topology.kubernetes.io/zone: a}}
status:
  addresses: [{type: InternalIP, address: 192.168.1.10}, {type: Hostname, address: node-1}]
`
	baseCluster = `
apiVersion: netspec.dev/v1alpha1
kind: Cluster
metadata: {name: prod}
spec:
  serviceCIDRs: [10.96.0.0/12, "fd00:96::/108"]
  externalIPCIDRs: [203.0.113.0/24]
`
)

// patch changes one field of a base object: with sets it (or appends, for
// an index one past the end of a list), without deletes it.
type patch struct {
	path string // such as spec.ports[0].name
	val  any
	del  bool
}

func with(path string, v any) patch { return patch{path: path, val: v} }
func without(path string) patch     { return patch{path: path, del: true} }

// yv parses a YAML (flow) snippet into a value for with.
func yv(s string) any {
	var v any
	if err := yaml.Unmarshal([]byte(s), &v); err != nil {
		panic(fmt.Sprintf("bad YAML in test: %q: %v", s, err))
	}
	return v
}

func svcObj(ps ...patch) string       { return buildObj(baseService, ps) }
func endpointsObj(ps ...patch) string { return buildObj(baseEndpoints, ps) }
func sliceObj(ps ...patch) string     { return buildObj(baseSlice, ps) }
func podObj(ps ...patch) string       { return buildObj(basePod, ps) }
func nodeObj(ps ...patch) string      { return buildObj(baseNode, ps) }
func clusterObj(ps ...patch) string   { return buildObj(baseCluster, ps) }

func buildObj(base string, ps []patch) string {
	var m any
	if err := yaml.Unmarshal([]byte(base), &m); err != nil {
		panic(err)
	}
	for _, p := range ps {
		m = setIn(m, parseTestPath(p.path), p.val, p.del)
	}
	b, err := yaml.Marshal(m)
	if err != nil {
		panic(err)
	}
	return string(b)
}

var pathElem = regexp.MustCompile(`^([^.\[]+)|^\.([^.\[]+)|^\[(\d+)\]`)

func parseTestPath(s string) []any {
	var out []any
	for s != "" {
		m := pathElem.FindStringSubmatch(s)
		if m == nil {
			panic("bad path in test: " + s)
		}
		switch {
		case m[1] != "":
			out = append(out, m[1])
		case m[2] != "":
			out = append(out, m[2])
		default:
			n, _ := strconv.Atoi(m[3])
			out = append(out, n)
		}
		s = s[len(m[0]):]
	}
	return out
}

func setIn(cur any, p []any, v any, del bool) any {
	if len(p) == 0 {
		return v
	}
	switch k := p[0].(type) {
	case string:
		m, _ := cur.(map[string]any)
		if m == nil {
			m = map[string]any{}
		}
		if len(p) == 1 && del {
			delete(m, k)
			return m
		}
		m[k] = setIn(m[k], p[1:], v, del)
		return m
	case int:
		l, _ := cur.([]any)
		if len(p) == 1 && del {
			return append(l[:k:k], l[k+1:]...)
		}
		for len(l) <= k {
			l = append(l, nil)
		}
		l[k] = setIn(l[k], p[1:], v, del)
		return l
	}
	panic("bad path element")
}

// manyEndpoints returns n slice endpoints with distinct IPv4 addresses.
func manyEndpoints(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = map[string]any{"addresses": []any{fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)}}
	}
	return out
}

// manyNames returns n objects {name: prefix<i>}, as hints list them.
func manyNames(n int, prefix string) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = map[string]any{"name": fmt.Sprintf("%s%d", prefix, i)}
	}
	return out
}

// manyPorts returns n slice ports with distinct names.
func manyPorts(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = map[string]any{"name": fmt.Sprintf("p%d", i), "port": i%65535 + 1}
	}
	return out
}

func manyStrings(n int, f func(i int) string) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

// ruleCase is one accepted or rejected object. want lists the diagnostics
// expected, each as a substring of "file:line:col: path: message" (or, when
// it ends in "$", a suffix); every diagnostic must be wanted and every want
// must match its own diagnostic. A nil want means the object is valid.
type ruleCase struct {
	rule string // one of ruleIDs
	name string
	yaml string
	want []string
}

// ruleIDs are the validation rules of the issue; every one needs at least
// one case that accepts a good value and one that rejects a bad one.
var ruleIDs = []string{
	"service-name", "endpoints-name", "slice-name", "pod-name", "node-name", "namespace",
	"ports-required", "port-name-required", "port-name-unique", "port-name-format",
	"port-range", "protocol", "port-protocol-unique", "nodeport-protocol-unique",
	"target-port", "type", "nodeport-type", "headless-type",
	"external-name", "external-name-no-ips",
	"cluster-ip-equal", "cluster-ip-none", "cluster-ip-count", "cluster-ip-format", "ip-families",
	"ip-family-policy",
	"session-affinity", "affinity-timeout", "affinity-config", "ipvs-scheduler", "service-proxy-name", "topology-hints",
	"external-traffic-policy", "internal-traffic-policy", "health-check-node-port",
	"lb-source-ranges", "lb-ip", "lb-ingress-ip", "traffic-distribution", "external-ips",
	"endpoint-ip", "endpoint-ports", "slice-address-type", "slice-endpoints", "slice-fqdn",
	"pod-ips", "container-ports", "pod-conditions", "hostname", "readiness-probe", "readiness-probe-annotation",
	"node-addresses", "node-name-ref",
	"cluster-cidrs", "cluster-node-port-range", "cluster-domain", "cluster-ttl",
	"cluster-dns-address",
	"unknown-field", "required-field", "type-mismatch",
	"lb-only-fields", "endpoints-subset-addresses", "labels", "annotations", "selector", "app-protocol",
}

var ruleCases = []ruleCase{
	// ---- names ----
	{rule: "service-name", name: "valid", yaml: svcObj(with("metadata.name", "a-1"))},
	{rule: "service-name", name: "63 characters", yaml: svcObj(with("metadata.name", "a"+strings.Repeat("b", 62)))},
	{rule: "service-name", name: "uppercase", yaml: svcObj(with("metadata.name", "Web")),
		want: []string{`metadata.name: "Web" is not a valid Service name (a DNS-1035 label`}},
	{rule: "service-name", name: "starts with a digit", yaml: svcObj(with("metadata.name", "1web")),
		want: []string{`metadata.name: "1web" is not a valid Service name`}},
	{rule: "service-name", name: "trailing dash", yaml: svcObj(with("metadata.name", "web-")),
		want: []string{`metadata.name: "web-" is not a valid Service name`}},
	{rule: "service-name", name: "dot", yaml: svcObj(with("metadata.name", "web.shop")),
		want: []string{`metadata.name: "web.shop" is not a valid Service name`}},
	{rule: "service-name", name: "64 characters", yaml: svcObj(with("metadata.name", "a"+strings.Repeat("b", 63))),
		want: []string{`metadata.name: "abbb`}},
	{rule: "endpoints-name", name: "subdomain", yaml: endpointsObj(with("metadata.name", "1web.shop-2"))},
	{rule: "endpoints-name", name: "253 characters", yaml: endpointsObj(with("metadata.name", longSubdomain(253)))},
	{rule: "endpoints-name", name: "254 characters", yaml: endpointsObj(with("metadata.name", longSubdomain(254))),
		want: []string{`metadata.name: is 254 characters long; at most 253 are allowed`}},
	{rule: "endpoints-name", name: "uppercase", yaml: endpointsObj(with("metadata.name", "Web")),
		want: []string{`metadata.name: "Web" is not a valid name (a DNS-1123 subdomain)`}},
	{rule: "endpoints-name", name: "empty label", yaml: endpointsObj(with("metadata.name", "web..shop")),
		want: []string{`metadata.name: "web..shop" is not a valid name`}},
	{rule: "slice-name", name: "subdomain", yaml: sliceObj(with("metadata.name", "web.x-1"))},
	{rule: "slice-name", name: "254 characters", yaml: sliceObj(with("metadata.name", longSubdomain(254))),
		want: []string{`metadata.name: is 254 characters long; at most 253 are allowed`}},
	{rule: "slice-name", name: "underscore", yaml: sliceObj(with("metadata.name", "web_1")),
		want: []string{`metadata.name: "web_1" is not a valid name (a DNS-1123 subdomain)`}},
	{rule: "pod-name", name: "subdomain", yaml: podObj(with("metadata.name", "web-0.x"))},
	{rule: "pod-name", name: "leading dash", yaml: podObj(with("metadata.name", "-web")),
		want: []string{`metadata.name: "-web" is not a valid name`}},
	{rule: "node-name", name: "fqdn", yaml: nodeObj(with("metadata.name", "node-1.example.com"))},
	{rule: "node-name", name: "uppercase", yaml: nodeObj(with("metadata.name", "Node1")),
		want: []string{`metadata.name: "Node1" is not a valid name`}},
	{rule: "namespace", name: "default when absent", yaml: svcObj(without("metadata.namespace"))},
	{rule: "namespace", name: "uppercase", yaml: svcObj(with("metadata.namespace", "Shop")),
		want: []string{`metadata.namespace: "Shop" is not a valid namespace (a DNS-1123 label`}},
	{rule: "namespace", name: "dot", yaml: podObj(with("metadata.namespace", "a.b")),
		want: []string{`metadata.namespace: "a.b" is not a valid namespace`}},

	// ---- ports ----
	{rule: "ports-required", name: "headless without ports", yaml: svcObj(without("spec.ports"), with("spec.clusterIP", "None"))},
	{rule: "ports-required", name: "ExternalName without ports", yaml: svcObj(without("spec.ports"), without("spec.selector"),
		with("spec.type", "ExternalName"), with("spec.externalName", "db.example.com"))},
	{rule: "ports-required", name: "ClusterIP without ports", yaml: svcObj(without("spec.ports")),
		want: []string{`spec.ports: a Service needs at least one port`}},
	{rule: "ports-required", name: "empty list", yaml: svcObj(with("spec.ports", yv(`[]`))),
		want: []string{`spec.ports: a Service needs at least one port`}},
	{rule: "ports-required", name: "headless via clusterIPs", yaml: svcObj(without("spec.ports"), with("spec.clusterIP", "None"), with("spec.clusterIPs", yv(`[None]`)))},
	{rule: "port-name-required", name: "one unnamed port", yaml: svcObj(without("spec.ports[0].name"))},
	{rule: "port-name-required", name: "two ports, one unnamed", yaml: svcObj(with("spec.ports[1]", yv(`{port: 443}`))),
		want: []string{`spec.ports[1].name: is required when a Service has more than one port`}},
	{rule: "port-name-unique", name: "two names", yaml: svcObj(with("spec.ports[1]", yv(`{name: https, port: 443}`)))},
	{rule: "port-name-unique", name: "repeated", yaml: svcObj(with("spec.ports[1]", yv(`{name: http, port: 443}`))),
		want: []string{`spec.ports[1].name: "http" is already the name of ports[0]`}},
	{rule: "port-name-format", name: "digits and dash", yaml: svcObj(with("spec.ports[0].name", "h-2"))},
	{rule: "port-name-format", name: "uppercase", yaml: svcObj(with("spec.ports[0].name", "Http")),
		want: []string{`spec.ports[0].name: "Http" is not a valid port name (lowercase letters, digits and '-')`}},
	{rule: "port-name-format", name: "underscore", yaml: svcObj(with("spec.ports[0].name", "http_1")),
		want: []string{`spec.ports[0].name: "http_1" is not a valid port name`}},
	{rule: "port-name-format", name: "64 characters", yaml: svcObj(with("spec.ports[0].name", strings.Repeat("a", 64))),
		want: []string{`spec.ports[0].name: "aaaa`}},
	{rule: "port-range", name: "1 and 65535", yaml: svcObj(with("spec.ports[0].port", 1), with("spec.ports[1]", yv(`{name: b, port: 65535}`)))},
	{rule: "port-range", name: "0", yaml: svcObj(with("spec.ports[0].port", 0), without("spec.ports[0].targetPort")),
		want: []string{`spec.ports[0].port: 0 is out of range 1..65535`}},
	{rule: "port-range", name: "65536", yaml: svcObj(with("spec.ports[0].port", 65536)),
		want: []string{`spec.ports[0].port: 65536 is out of range 1..65535`}},
	{rule: "protocol", name: "UDP and SCTP", yaml: svcObj(with("spec.ports[0].protocol", "UDP"), with("spec.ports[1]", yv(`{name: b, port: 81, protocol: SCTP}`)))},
	{rule: "protocol", name: "ICMP", yaml: svcObj(with("spec.ports[0].protocol", "ICMP")),
		want: []string{`spec.ports[0].protocol: "ICMP" is not a protocol (TCP, UDP or SCTP)`}},
	{rule: "protocol", name: "lowercase", yaml: svcObj(with("spec.ports[0].protocol", "tcp")),
		want: []string{`spec.ports[0].protocol: "tcp" is not a protocol`}},
	{rule: "port-protocol-unique", name: "same port, TCP and UDP", yaml: svcObj(with("spec.ports[1]", yv(`{name: dns, port: 80, protocol: UDP}`)))},
	{rule: "port-protocol-unique", name: "same port and protocol", yaml: svcObj(with("spec.ports[1]", yv(`{name: b, port: 80, protocol: TCP}`))),
		want: []string{`spec.ports[1].port: 80/TCP is already used by ports[0]`}},
	{rule: "port-protocol-unique", name: "default protocol counts as TCP", yaml: svcObj(with("spec.ports[0].protocol", "TCP"), with("spec.ports[1]", yv(`{name: b, port: 80}`))),
		want: []string{`spec.ports[1].port: 80/TCP is already used by ports[0]`}},
	{rule: "nodeport-protocol-unique", name: "same nodePort, TCP and UDP", yaml: svcObj(with("spec.type", "NodePort"),
		with("spec.ports", yv(`[{name: a, port: 53, nodePort: 30053}, {name: b, port: 53, protocol: UDP, nodePort: 30053}]`)))},
	{rule: "nodeport-protocol-unique", name: "same nodePort twice", yaml: svcObj(with("spec.type", "NodePort"),
		with("spec.ports", yv(`[{name: a, port: 80, nodePort: 30080}, {name: b, port: 81, nodePort: 30080}]`))),
		want: []string{`spec.ports[1].nodePort: node port 30080/TCP is already used by ports[0]`}},
	{rule: "nodeport-protocol-unique", name: "nodePort out of range", yaml: svcObj(with("spec.type", "NodePort"), with("spec.ports[0].nodePort", 70000)),
		want: []string{`spec.ports[0].nodePort: 70000 is out of range 1..65535 (0: allocate one)`}},
	{rule: "nodeport-protocol-unique", name: "nodePort 0 means allocate", yaml: svcObj(with("spec.type", "NodePort"), with("spec.ports", yv(`[{name: a, port: 80, nodePort: 0}, {name: b, port: 81, nodePort: 0}]`)))},
	{rule: "nodeport-type", name: "nodePort 0 on ClusterIP is no node port", yaml: svcObj(with("spec.ports[0].nodePort", 0))},

	// ---- targetPort ----
	{rule: "target-port", name: "number bounds", yaml: svcObj(with("spec.ports[0].targetPort", 1), with("spec.ports[1]", yv(`{name: b, port: 81, targetPort: 65535}`)))},
	{rule: "target-port", name: "names", yaml: svcObj(with("spec.ports", yv(`[{name: a, port: 80, targetPort: http}, {name: b, port: 81, targetPort: a-1},
		{name: c, port: 82, targetPort: abcdefghijklmno}, {name: d, port: 83, targetPort: 8x}]`)))},
	{rule: "target-port", name: "absent", yaml: svcObj(without("spec.ports[0].targetPort"))},
	{rule: "target-port", name: "-1", yaml: svcObj(with("spec.ports[0].targetPort", -1)),
		want: []string{`spec.ports[0].targetPort: -1 is not a port number 1..65535 nor a port name`}},
	{rule: "target-port", name: "65536", yaml: svcObj(with("spec.ports[0].targetPort", 65536)),
		want: []string{`spec.ports[0].targetPort: 65536 is not a port number 1..65535 nor a port name`}},
	{rule: "target-port", name: "digits only", yaml: svcObj(with("spec.ports[0].targetPort", "8080")),
		want: []string{`spec.ports[0].targetPort: "8080" is not a port number`}},
	{rule: "target-port", name: "double dash", yaml: svcObj(with("spec.ports[0].targetPort", "a--b")),
		want: []string{`spec.ports[0].targetPort: "a--b" is not a port number`}},
	{rule: "target-port", name: "leading dash", yaml: svcObj(with("spec.ports[0].targetPort", "-http")),
		want: []string{`spec.ports[0].targetPort: "-http" is not a port number`}},
	{rule: "target-port", name: "trailing dash", yaml: svcObj(with("spec.ports[0].targetPort", "http-")),
		want: []string{`spec.ports[0].targetPort: "http-" is not a port number`}},
	{rule: "target-port", name: "16 characters", yaml: svcObj(with("spec.ports[0].targetPort", "abcdefghijklmnop")),
		want: []string{`spec.ports[0].targetPort: "abcdefghijklmnop" is not a port number`}},
	{rule: "target-port", name: "uppercase", yaml: svcObj(with("spec.ports[0].targetPort", "HTTP")),
		want: []string{`spec.ports[0].targetPort: "HTTP" is not a port number`}},

	// ---- type ----
	{rule: "type", name: "NodePort", yaml: svcObj(with("spec.type", "NodePort"))},
	{rule: "type", name: "LoadBalancer", yaml: svcObj(with("spec.type", "LoadBalancer"))},
	{rule: "type", name: "unknown", yaml: svcObj(with("spec.type", "Ingress")),
		want: []string{`spec.type: "Ingress" is not a Service type (ClusterIP, NodePort, LoadBalancer or ExternalName)`}},
	{rule: "nodeport-type", name: "nodePort on NodePort and LoadBalancer", yaml: svcObj(with("spec.type", "LoadBalancer"), with("spec.ports[0].nodePort", 30080))},
	{rule: "nodeport-type", name: "nodePort on ClusterIP", yaml: svcObj(with("spec.ports[0].nodePort", 30080)),
		want: []string{`spec.ports[0].nodePort: may only be set when type is NodePort or LoadBalancer, not ClusterIP`}},
	{rule: "headless-type", name: "headless ClusterIP", yaml: svcObj(with("spec.clusterIP", "None"))},
	{rule: "headless-type", name: "headless NodePort", yaml: svcObj(with("spec.type", "NodePort"), with("spec.clusterIP", "None")),
		want: []string{`spec.clusterIP: a NodePort Service cannot be headless (clusterIP: None)`}},
	{rule: "headless-type", name: "headless LoadBalancer via clusterIPs", yaml: svcObj(with("spec.type", "LoadBalancer"), with("spec.clusterIP", "None"), with("spec.clusterIPs", yv(`[None]`))),
		want: []string{`spec.clusterIP: a LoadBalancer Service cannot be headless`}},

	// ---- ExternalName ----
	{rule: "external-name", name: "trailing dot", yaml: extNameObj(with("spec.externalName", "db.example.com."))},
	{rule: "external-name", name: "single label", yaml: extNameObj(with("spec.externalName", "db"))},
	{rule: "external-name", name: "an IPv4 address: a warning", yaml: extNameObj(with("spec.externalName", "192.0.2.10")),
		want: []string{`warning: spec.externalName: "192.0.2.10" looks like an IPv4 address, but it is a DNS name of digits to Kubernetes and to DNS, which resolves nowhere: as CoreDNS, netspec gives the Service's name no record`}},
	{rule: "external-name", name: "digits that are no address", yaml: extNameObj(with("spec.externalName", "1.2.3.4.5"))},
	{rule: "external-name", name: "missing", yaml: extNameObj(without("spec.externalName")),
		want: []string{`spec.externalName: is required for an ExternalName Service`}},
	{rule: "external-name", name: "underscore", yaml: extNameObj(with("spec.externalName", "db_1.example.com")),
		want: []string{`spec.externalName: "db_1.example.com" is not a valid DNS name (a DNS-1123 subdomain`}},
	{rule: "external-name", name: "two trailing dots", yaml: extNameObj(with("spec.externalName", "db.example.com..")),
		want: []string{`spec.externalName: "db.example.com.." is not a valid DNS name`}},
	{rule: "external-name", name: "only a dot", yaml: extNameObj(with("spec.externalName", ".")),
		want: []string{`spec.externalName: "." is not a valid DNS name`}},
	{rule: "external-name", name: "too long", yaml: extNameObj(with("spec.externalName", longSubdomain(254))),
		want: []string{`spec.externalName: "aaaa`}},
	{rule: "external-name-no-ips", name: "none set", yaml: extNameObj(with("spec.sessionAffinity", "None"))},
	{rule: "external-name-no-ips", name: "clusterIP", yaml: extNameObj(with("spec.clusterIP", "10.96.0.10")),
		want: []string{`spec.clusterIP: must not be set for an ExternalName Service`}},
	{rule: "external-name-no-ips", name: "clusterIPs, ipFamilies and ipFamilyPolicy", yaml: extNameObj(
		with("spec.clusterIPs", yv(`[10.96.0.10]`)), with("spec.ipFamilies", yv(`[IPv4]`)), with("spec.ipFamilyPolicy", "SingleStack")),
		want: []string{
			`spec.clusterIPs: must not be set for an ExternalName Service`,
			`spec.ipFamilies: must not be set for an ExternalName Service`,
			`spec.ipFamilyPolicy: must not be set for an ExternalName Service`,
		}},
	{rule: "external-name-no-ips", name: "headless ExternalName", yaml: extNameObj(with("spec.clusterIP", "None")),
		want: []string{`spec.clusterIP: must not be set for an ExternalName Service`}},

	// ---- cluster IPs and families ----
	{rule: "cluster-ip-equal", name: "clusterIP is clusterIPs[0]", yaml: svcObj(with("spec.clusterIP", "10.96.0.10"), with("spec.clusterIPs", yv(`[10.96.0.10, "fd00:96::10"]`)))},
	{rule: "cluster-ip-equal", name: "differs", yaml: svcObj(with("spec.clusterIP", "10.96.0.10"), with("spec.clusterIPs", yv(`[10.96.0.11]`))),
		want: []string{`spec.clusterIP: "10.96.0.10" differs from clusterIPs[0] "10.96.0.11"; they must be equal`}},
	{rule: "cluster-ip-equal", name: "clusterIPs without clusterIP", yaml: svcObj(with("spec.clusterIPs", yv(`[10.96.0.10, "fd00:96::10"]`))),
		want: []string{`spec.clusterIPs: is set without clusterIP, which the API server refuses; set clusterIP to clusterIPs[0] (clusterIP: 10.96.0.10) too`}},
	{rule: "cluster-ip-equal", name: "headless clusterIPs without clusterIP", yaml: svcObj(with("spec.clusterIPs", yv(`[None]`))),
		want: []string{`spec.clusterIPs: is set without clusterIP, which the API server refuses; set clusterIP to clusterIPs[0] (clusterIP: None) too`}},
	{rule: "cluster-ip-none", name: "None alone", yaml: svcObj(with("spec.clusterIP", "None"), with("spec.clusterIPs", yv(`[None]`)))},
	{rule: "cluster-ip-none", name: "None with an IP", yaml: svcObj(with("spec.clusterIP", "None"), with("spec.clusterIPs", yv(`[None, 10.96.0.10]`))),
		want: []string{`spec.clusterIPs[0]: None must be the only cluster IP`}},
	{rule: "cluster-ip-count", name: "one per family", yaml: svcObj(with("spec.clusterIP", "fd00:96::10"), with("spec.clusterIPs", yv(`["fd00:96::10", 10.96.0.10]`)))},
	{rule: "cluster-ip-count", name: "three", yaml: svcObj(with("spec.clusterIP", "10.96.0.10"), with("spec.clusterIPs", yv(`[10.96.0.10, "fd00:96::10", 10.96.0.11]`))),
		want: []string{
			`spec.clusterIPs: has 3 addresses; at most two are allowed, one per family`,
			`spec.clusterIPs[2]: 10.96.0.11 is a second IPv4 address (clusterIPs[0] is one)`,
		}},
	{rule: "cluster-ip-count", name: "two IPv4", yaml: svcObj(with("spec.clusterIP", "10.96.0.10"), with("spec.clusterIPs", yv(`[10.96.0.10, 10.96.0.11]`))),
		want: []string{`spec.clusterIPs[1]: 10.96.0.11 is a second IPv4 address (clusterIPs[0] is one); dual-stack needs one IPv4 and one IPv6 address`}},
	{rule: "cluster-ip-format", name: "IPv6", yaml: svcObj(with("spec.clusterIP", "fd00:96::10"))},
	{rule: "cluster-ip-format", name: "not an IP", yaml: svcObj(with("spec.clusterIP", "10.96.0.300")),
		want: []string{`spec.clusterIP: "10.96.0.300" is not an IP address (nor None, for a headless Service)`}},
	{rule: "cluster-ip-format", name: "empty second address", yaml: svcObj(with("spec.ipFamilyPolicy", "PreferDualStack"), with("spec.clusterIP", "10.96.0.10"), with("spec.clusterIPs", yv(`[10.96.0.10, ""]`))),
		want: []string{`spec.clusterIPs[1]: "" is not an IP address (nor None, for a headless Service)`}},
	{rule: "cluster-ip-format", name: "zone", yaml: svcObj(with("spec.clusterIP", "fd00:96::10%eth0"), with("spec.clusterIPs", yv(`["fd00:96::10%eth0"]`))),
		want: []string{`spec.clusterIPs[0]: "fd00:96::10%eth0" is not an IP address`}},
	{rule: "ip-families", name: "match the IPs", yaml: svcObj(with("spec.clusterIP", "fd00:96::10"), with("spec.clusterIPs", yv(`["fd00:96::10", 10.96.0.10]`)), with("spec.ipFamilies", yv(`[IPv6, IPv4]`)))},
	{rule: "ip-families", name: "headless dual-stack", yaml: svcObj(with("spec.clusterIP", "None"), with("spec.ipFamilies", yv(`[IPv4, IPv6]`)))},
	{rule: "ip-families", name: "mismatch", yaml: svcObj(with("spec.clusterIP", "10.96.0.10"), with("spec.clusterIPs", yv(`[10.96.0.10]`)), with("spec.ipFamilies", yv(`[IPv6]`))),
		want: []string{`spec.ipFamilies[0]: IPv6 does not match clusterIPs[0] 10.96.0.10, which is IPv4`}},
	{rule: "ip-families", name: "listed twice", yaml: svcObj(with("spec.ipFamilies", yv(`[IPv4, IPv4]`))),
		want: []string{`spec.ipFamilies[1]: IPv4 is listed twice`}},
	{rule: "ip-families", name: "three", yaml: svcObj(with("spec.ipFamilies", yv(`[IPv4, IPv6, IPv4]`))),
		want: []string{`spec.ipFamilies: has 3 families; at most two are allowed`}},
	{rule: "ip-families", name: "unknown family", yaml: svcObj(with("spec.ipFamilies", yv(`[IPv5]`))),
		want: []string{`spec.ipFamilies[0]: "IPv5"`}},
	{rule: "ip-family-policy", name: "RequireDualStack", yaml: svcObj(with("spec.ipFamilyPolicy", "RequireDualStack"), with("spec.clusterIP", "10.96.0.10"), with("spec.clusterIPs", yv(`[10.96.0.10, "fd00:96::10"]`)))},
	{rule: "ip-family-policy", name: "SingleStack with two IPs", yaml: svcObj(with("spec.ipFamilyPolicy", "SingleStack"), with("spec.clusterIP", "10.96.0.10"), with("spec.clusterIPs", yv(`[10.96.0.10, "fd00:96::10"]`))),
		want: []string{`spec.ipFamilyPolicy: SingleStack allows one cluster IP and one family`}},
	{rule: "ip-family-policy", name: "unknown", yaml: svcObj(with("spec.ipFamilyPolicy", "DualStack")),
		want: []string{`spec.ipFamilyPolicy: "DualStack" is not an IP family policy (SingleStack, PreferDualStack or RequireDualStack)`}},

	// ---- IPVS scheduler annotation ----
	{rule: "ipvs-scheduler", name: "every scheduler", yaml: svcObj(with("metadata.annotations", map[string]any{"netspec.dev/ipvs-scheduler": "mh", "other": "x"}))},
	{rule: "ipvs-scheduler", name: "unknown", yaml: svcObj(with("metadata.annotations", map[string]any{"netspec.dev/ipvs-scheduler": "fastest"})),
		want: []string{`metadata.annotations["netspec.dev/ipvs-scheduler"]: "fastest" is not an IPVS scheduler (rr, wrr, lc, wlc, sh, dh, sed, nq or mh)`}},

	// ---- session affinity ----
	{rule: "session-affinity", name: "ClientIP without config", yaml: svcObj(with("spec.sessionAffinity", "ClientIP"))},
	{rule: "session-affinity", name: "unknown", yaml: svcObj(with("spec.sessionAffinity", "Cookie")),
		want: []string{`spec.sessionAffinity: "Cookie" is not a session affinity (None or ClientIP)`}},
	{rule: "affinity-timeout", name: "1 and 86400", yaml: svcObj(with("spec.sessionAffinity", "ClientIP"), with("spec.sessionAffinityConfig.clientIP.timeoutSeconds", 1)) +
		"---\n" + svcObj(with("metadata.name", "b"), with("spec.sessionAffinity", "ClientIP"), with("spec.sessionAffinityConfig.clientIP.timeoutSeconds", 86400))},
	{rule: "affinity-timeout", name: "0", yaml: svcObj(with("spec.sessionAffinity", "ClientIP"), with("spec.sessionAffinityConfig.clientIP.timeoutSeconds", 0)),
		want: []string{`spec.sessionAffinityConfig.clientIP.timeoutSeconds: 0 is out of range 1..86400`}},
	{rule: "affinity-timeout", name: "86401", yaml: svcObj(with("spec.sessionAffinity", "ClientIP"), with("spec.sessionAffinityConfig.clientIP.timeoutSeconds", 86401)),
		want: []string{`spec.sessionAffinityConfig.clientIP.timeoutSeconds: 86401 is out of range 1..86400`}},
	{rule: "affinity-config", name: "config with None", yaml: svcObj(with("spec.sessionAffinity", "None"), with("spec.sessionAffinityConfig.clientIP.timeoutSeconds", 60)),
		want: []string{`warning: spec.sessionAffinityConfig: has no effect: sessionAffinity is None, and the API server drops sessionAffinityConfig then; set sessionAffinity: ClientIP for client affinity`}},
	{rule: "affinity-config", name: "config with default affinity", yaml: svcObj(with("spec.sessionAffinityConfig", yv(`{}`))),
		want: []string{`warning: spec.sessionAffinityConfig: has no effect: sessionAffinity is None, and the API server drops sessionAffinityConfig then; set sessionAffinity: ClientIP for client affinity`}},
	{rule: "service-proxy-name", name: "another proxy: a warning", yaml: svcObj(with("metadata.labels", yv(`{service.kubernetes.io/service-proxy-name: multus-proxy}`))),
		want: []string{`warning: metadata.labels["service.kubernetes.io/service-proxy-name"]: gives the Service to the proxy "multus-proxy": as kube-proxy, netspec installs no rule for it`}},
	{rule: "service-proxy-name", name: "empty value: a warning", yaml: svcObj(with("metadata.labels", yv(`{service.kubernetes.io/service-proxy-name: ""}`))),
		want: []string{`warning: metadata.labels["service.kubernetes.io/service-proxy-name"]: gives the Service to the proxy ""`}},
	{rule: "service-proxy-name", name: "headless: no data plane either way", yaml: svcObj(with("spec.clusterIP", "None"), with("metadata.labels", yv(`{service.kubernetes.io/service-proxy-name: multus-proxy}`)))},
	{rule: "topology-hints", name: "topology-mode Auto: a warning", yaml: svcObj(with("metadata.annotations", yv(`{service.kubernetes.io/topology-mode: Auto}`))),
		want: []string{`warning: metadata.annotations["service.kubernetes.io/topology-mode"]: asks the EndpointSlice controller for topology-aware hints, which it allocates by the zones' CPU; netspec does not compute them for the endpoints it takes from a selector, so its traffic is not kept in zones; spec.trafficDistribution: PreferClose keeps it in the client's zone, and netspec follows it$`}},
	{rule: "topology-hints", name: "deprecated annotation, with trafficDistribution", yaml: svcObj(with("metadata.annotations", yv(`{service.kubernetes.io/topology-aware-hints: auto}`)), with("spec.trafficDistribution", "PreferClose")),
		want: []string{`warning: metadata.annotations["service.kubernetes.io/topology-aware-hints"]: asks the EndpointSlice controller for topology-aware hints, which it allocates by the zones' CPU; netspec does not compute them for the endpoints it takes from a selector, so netspec follows spec.trafficDistribution instead (Kubernetes ignores it while this annotation asks for hints)$`}},
	{rule: "topology-hints", name: "the deprecated key wins", yaml: svcObj(with("metadata.annotations", yv(`{service.kubernetes.io/topology-aware-hints: Disabled, service.kubernetes.io/topology-mode: Auto}`)))},
	{rule: "topology-hints", name: "Disabled, or no selector", yaml: svcObj(with("metadata.annotations", yv(`{service.kubernetes.io/topology-mode: Disabled}`))) +
		"---\n" + svcObj(with("metadata.name", "b"), with("metadata.annotations", yv(`{service.kubernetes.io/topology-mode: Auto}`)), without("spec.selector"))},
	{rule: "affinity-config", name: "config with ClientIP", yaml: svcObj(with("spec.sessionAffinity", "ClientIP"), with("spec.sessionAffinityConfig", yv(`{clientIP: {}}`)))},

	// ---- traffic policies, load balancers ----
	{rule: "external-traffic-policy", name: "NodePort Local", yaml: svcObj(with("spec.type", "NodePort"), with("spec.externalTrafficPolicy", "Local"))},
	{rule: "external-traffic-policy", name: "LoadBalancer Cluster", yaml: svcObj(with("spec.type", "LoadBalancer"), with("spec.externalTrafficPolicy", "Cluster"))},
	{rule: "external-traffic-policy", name: "ClusterIP with externalIPs", yaml: svcObj(with("spec.externalIPs", yv(`[203.0.113.10]`)), with("spec.externalTrafficPolicy", "Local"))},
	{rule: "external-traffic-policy", name: "ClusterIP without externalIPs", yaml: svcObj(with("spec.externalTrafficPolicy", "Local")),
		want: []string{`spec.externalTrafficPolicy: may only be set for NodePort and LoadBalancer Services, or ClusterIP Services with externalIPs`}},
	{rule: "external-traffic-policy", name: "ExternalName with externalIPs", yaml: extNameObj(with("spec.externalIPs", yv(`[203.0.113.10]`)), with("spec.externalTrafficPolicy", "Cluster")),
		want: []string{`spec.externalTrafficPolicy: may only be set for NodePort and LoadBalancer Services`}},
	{rule: "external-traffic-policy", name: "unknown", yaml: svcObj(with("spec.type", "NodePort"), with("spec.externalTrafficPolicy", "Node")),
		want: []string{`spec.externalTrafficPolicy: "Node" is not a traffic policy (Cluster or Local)`}},
	{rule: "internal-traffic-policy", name: "Local", yaml: svcObj(with("spec.internalTrafficPolicy", "Local"))},
	{rule: "internal-traffic-policy", name: "unknown", yaml: svcObj(with("spec.internalTrafficPolicy", "Node")),
		want: []string{`spec.internalTrafficPolicy: "Node" is not a traffic policy (Cluster or Local)`}},
	{rule: "health-check-node-port", name: "LoadBalancer Local", yaml: svcObj(with("spec.type", "LoadBalancer"), with("spec.externalTrafficPolicy", "Local"), with("spec.healthCheckNodePort", 32000))},
	{rule: "health-check-node-port", name: "LoadBalancer Cluster", yaml: svcObj(with("spec.type", "LoadBalancer"), with("spec.healthCheckNodePort", 32000)),
		want: []string{`spec.healthCheckNodePort: may only be set when type is LoadBalancer and externalTrafficPolicy is Local`}},
	{rule: "health-check-node-port", name: "zero allocates", yaml: svcObj(with("spec.type", "LoadBalancer"), with("spec.externalTrafficPolicy", "Local"), with("spec.healthCheckNodePort", 0))},
	{rule: "health-check-node-port", name: "zero on ClusterIP", yaml: svcObj(with("spec.healthCheckNodePort", 0))},
	{rule: "health-check-node-port", name: "out of range", yaml: svcObj(with("spec.type", "LoadBalancer"), with("spec.externalTrafficPolicy", "Local"), with("spec.healthCheckNodePort", 65536)),
		want: []string{`spec.healthCheckNodePort: 65536 is out of range 1..65535 (0: allocate one)`}},
	{rule: "lb-source-ranges", name: "LoadBalancer", yaml: svcObj(with("spec.type", "LoadBalancer"), with("spec.loadBalancerSourceRanges", yv(`[10.0.0.0/8, "2001:db8::/32", " 192.0.2.0/24 "]`)))},
	{rule: "lb-source-ranges", name: "NodePort", yaml: svcObj(with("spec.type", "NodePort"), with("spec.loadBalancerSourceRanges", yv(`[10.0.0.0/8]`))),
		want: []string{`spec.loadBalancerSourceRanges: may only be set for LoadBalancer Services`}},
	{rule: "lb-source-ranges", name: "the annotation on a LoadBalancer", yaml: svcObj(with("spec.type", "LoadBalancer"), with("metadata.annotations", yv(`{service.beta.kubernetes.io/load-balancer-source-ranges: "10.0.0.0/8, 192.0.2.0/24"}`)))},
	{rule: "lb-source-ranges", name: "the annotation on a ClusterIP Service", yaml: svcObj(with("metadata.annotations", yv(`{service.beta.kubernetes.io/load-balancer-source-ranges: "10.0.0.0/8"}`))),
		want: []string{`obj.yaml:5:65: metadata.annotations["service.beta.kubernetes.io/load-balancer-source-ranges"]: may only be set for LoadBalancer Services$`}},
	{rule: "lb-source-ranges", name: "the annotation, not CIDRs", yaml: svcObj(with("spec.type", "LoadBalancer"), with("metadata.annotations", yv(`{service.beta.kubernetes.io/load-balancer-source-ranges: "10.0.0.0/8,x"}`))),
		want: []string{`load-balancer-source-ranges"]: "10.0.0.0/8,x" is not a list of CIDRs`}},
	{rule: "lb-source-ranges", name: "the annotation beside the field is not checked", yaml: svcObj(with("spec.loadBalancerSourceRanges", yv(`[10.0.0.0/8]`)), with("spec.type", "LoadBalancer"), with("metadata.annotations", yv(`{service.beta.kubernetes.io/load-balancer-source-ranges: "x"}`)))},
	{rule: "lb-source-ranges", name: "not CIDRs", yaml: svcObj(with("spec.type", "LoadBalancer"), with("spec.loadBalancerSourceRanges", yv(`[10.0.0.0/33, 10.0.0.1, "*"]`))),
		want: []string{
			`spec.loadBalancerSourceRanges[0]: "10.0.0.0/33" is not a CIDR (such as 203.0.113.0/24)`,
			`spec.loadBalancerSourceRanges[1]: "10.0.0.1" is not a CIDR`,
			`spec.loadBalancerSourceRanges[2]: "*" is not a CIDR`,
		}},
	{rule: "lb-ip", name: "LoadBalancer", yaml: svcObj(with("spec.type", "LoadBalancer"), with("spec.loadBalancerIP", "203.0.113.7"))},
	{rule: "lb-ip", name: "ClusterIP", yaml: svcObj(with("spec.loadBalancerIP", "203.0.113.7")),
		want: []string{`spec.loadBalancerIP: may only be set for LoadBalancer Services`}},
	{rule: "lb-ip", name: "not an IP", yaml: svcObj(with("spec.type", "LoadBalancer"), with("spec.loadBalancerIP", "lb.example.com")),
		want: []string{`spec.loadBalancerIP: "lb.example.com" is not an IP address`}},
	{rule: "lb-ingress-ip", name: "IP and hostname", yaml: svcObj(with("spec.type", "LoadBalancer"), with("status.loadBalancer.ingress", yv(`[{ip: 203.0.113.7}, {hostname: lb.example.com}]`)))},
	{rule: "lb-ingress-ip", name: "not an IP", yaml: svcObj(with("spec.type", "LoadBalancer"), with("status.loadBalancer.ingress", yv(`[{ip: 203.0.113}]`))),
		want: []string{`status.loadBalancer.ingress[0].ip: "203.0.113" is not an IP address`}},
	{rule: "traffic-distribution", name: "all three", yaml: svcObj(with("spec.trafficDistribution", "PreferClose")) + "---\n" +
		svcObj(with("metadata.name", "b"), with("spec.trafficDistribution", "PreferSameZone")) + "---\n" +
		svcObj(with("metadata.name", "c"), with("spec.trafficDistribution", "PreferSameNode"))},
	{rule: "traffic-distribution", name: "unknown", yaml: svcObj(with("spec.trafficDistribution", "PreferRegion")),
		want: []string{`spec.trafficDistribution: "PreferRegion" is not a traffic distribution (PreferClose, PreferSameZone or PreferSameNode)`}},
	{rule: "external-ips", name: "IPv4 and IPv6", yaml: svcObj(with("spec.externalIPs", yv(`[203.0.113.10, "2001:db8::10"]`)))},
	{rule: "external-ips", name: "not IPs", yaml: svcObj(with("spec.externalIPs", yv(`[203.0.113, "2001:db8::10%eth0", ""]`))),
		want: []string{
			`spec.externalIPs[0]: "203.0.113" is not an IP address`,
			`spec.externalIPs[1]: "2001:db8::10%eth0" is not an IP address`,
			`spec.externalIPs[2]: "" is not an IP address`,
		}},
	{rule: "external-ips", name: "special addresses", yaml: svcObj(with("spec.externalIPs", yv(`[0.0.0.0, 127.0.0.1, "fe80::1"]`))),
		want: []string{
			`spec.externalIPs[0]: 0.0.0.0 is the unspecified address and cannot be an external IP`,
			`spec.externalIPs[1]: 127.0.0.1 is a loopback address and cannot be an external IP`,
			`spec.externalIPs[2]: fe80::1 is a link-local address and cannot be an external IP`,
		}},

	// ---- endpoints ----
	{rule: "endpoint-ip", name: "ordinary addresses", yaml: endpointsObj(with("subsets[0].addresses", yv(`[{ip: 10.1.0.1}, {ip: "2001:db8::1"}, {ip: 169.253.0.1}, {ip: 224.0.1.1}, {ip: "ff05::1"}]`)))},
	{rule: "endpoint-ip", name: "special addresses", yaml: endpointsObj(with("subsets[0].addresses", yv(`[{ip: 0.0.0.0}, {ip: "::"}, {ip: 127.0.0.1}, {ip: "::1"},
		{ip: 169.254.1.1}, {ip: "fe80::1"}, {ip: 224.0.0.251}, {ip: "ff02::1"}, {ip: "::ffff:127.0.0.1"}]`))),
		want: []string{
			`subsets[0].addresses[0].ip: 0.0.0.0 is the unspecified address and cannot be an endpoint`,
			`subsets[0].addresses[1].ip: :: is the unspecified address`,
			`subsets[0].addresses[2].ip: 127.0.0.1 is a loopback address`,
			`subsets[0].addresses[3].ip: ::1 is a loopback address`,
			`subsets[0].addresses[4].ip: 169.254.1.1 is a link-local address`,
			`subsets[0].addresses[5].ip: fe80::1 is a link-local address`,
			`subsets[0].addresses[6].ip: 224.0.0.251 is a link-local multicast address`,
			`subsets[0].addresses[7].ip: ff02::1 is a link-local multicast address`,
			`subsets[0].addresses[8].ip: ::ffff:127.0.0.1 is a loopback address`,
		}},
	{rule: "endpoint-ip", name: "not ready address, not an IP", yaml: endpointsObj(with("subsets[0].notReadyAddresses", yv(`[{ip: web-0}]`))),
		want: []string{`subsets[0].notReadyAddresses[0].ip: "web-0" is not an IP address`}},
	{rule: "endpoint-ip", name: "slice loopback", yaml: sliceObj(with("endpoints[0].addresses", yv(`[127.0.0.2]`))),
		want: []string{`endpoints[0].addresses[0]: 127.0.0.2 is a loopback address and cannot be an endpoint`}},
	{rule: "endpoint-ip", name: "pod link-local", yaml: podObj(with("status.podIP", "169.254.0.5"), with("status.podIPs", yv(`[{ip: 169.254.0.5}]`))),
		want: []string{
			`status.podIP: 169.254.0.5 is a link-local address and cannot be an endpoint`,
			`status.podIPs[0].ip: 169.254.0.5 is a link-local address`,
		}},
	{rule: "endpoint-ports", name: "two named ports", yaml: endpointsObj(with("subsets[0].ports[1]", yv(`{name: metrics, port: 9090, protocol: UDP}`)))},
	{rule: "endpoint-ports", name: "unnamed and repeated", yaml: endpointsObj(with("subsets[0].ports", yv(`[{name: a, port: 1}, {port: 2}, {name: a, port: 3}]`))),
		want: []string{
			`subsets[0].ports[1].name: is required when there is more than one port`,
			`subsets[0].ports[2].name: "a" is already the name of ports[0]`,
		}},
	{rule: "endpoint-ports", name: "slice ports", yaml: sliceObj(with("ports", yv(`[{name: a, port: 0}, {name: a, port: 2, protocol: ICMP}, {name: B}]`))),
		want: []string{
			`ports[0].port: 0 is out of range 1..65535`,
			`ports[1].name: "a" is already the name of ports[0]`,
			`ports[1].protocol: "ICMP" is not a protocol`,
			`ports[2].name: "B" is not a valid port name`,
		}},
	{rule: "endpoint-ports", name: "slice port with empty name", yaml: sliceObj(with("ports", yv(`[{name: "", port: 80}]`)))},
	{rule: "endpoint-ports", name: "slice ports, one unnamed", yaml: sliceObj(with("ports", yv(`[{name: http, port: 80}, {port: 81}]`)))},
	{rule: "endpoint-ports", name: "slice ports, two unnamed", yaml: sliceObj(with("ports", yv(`[{port: 80}, {name: http, port: 81}, {name: "", port: 82}]`))),
		want: []string{`ports[2].name: ports[0] is unnamed too; port names are unique in a slice, so at most one port may be unnamed`}},
	{rule: "slice-address-type", name: "IPv6", yaml: sliceObj(with("addressType", "IPv6"), with("endpoints[0].addresses", yv(`["2001:db8::1"]`)))},
	{rule: "slice-address-type", name: "mismatch", yaml: sliceObj(with("endpoints[0].addresses", yv(`[10.1.0.1, "2001:db8::1"]`))) + "---\n" +
		sliceObj(with("metadata.name", "b"), with("addressType", "IPv6"), with("endpoints[0].addresses", yv(`[10.1.0.2]`))),
		want: []string{
			`endpoints[0].addresses[1]: 2001:db8::1 is not an IPv4 address, as the slice's addressType says`,
			`endpoints[0].addresses[0]: 10.1.0.2 is not an IPv6 address, as the slice's addressType says`,
		}},
	{rule: "slice-address-type", name: "unknown", yaml: sliceObj(with("addressType", "IP")),
		want: []string{`addressType: "IP" is not an address type (IPv4, IPv6 or FQDN)`}},
	{rule: "slice-endpoints", name: "1000 endpoints", yaml: sliceObj(with("endpoints", manyEndpoints(1000)))},
	{rule: "slice-endpoints", name: "1001 endpoints", yaml: sliceObj(with("endpoints", manyEndpoints(1001))),
		want: []string{`endpoints: has 1001 endpoints; a slice holds at most 1000`}},
	{rule: "slice-endpoints", name: "no address", yaml: sliceObj(with("endpoints[0].addresses", yv(`[]`))),
		want: []string{`endpoints[0].addresses: needs at least one address`}},
	{rule: "slice-endpoints", name: "101 addresses", yaml: sliceObj(with("endpoints[0].addresses", manyStrings(101, func(i int) string { return fmt.Sprintf("10.2.0.%d", i+1) }))),
		want: []string{`endpoints[0].addresses: has 101 addresses; at most 100 are allowed`}},
	{rule: "slice-endpoints", name: "conditions, topology and hints", yaml: sliceObj(with("endpoints[0]", yv(`{addresses: [10.1.0.1], conditions: {ready: false, serving: true, terminating: true},
		nodeName: node-1, zone: a, hostname: web-0, hints: {forZones: [{name: a}], forNodes: [{name: node-1}]}}`)))},
	{rule: "slice-endpoints", name: "condition not a boolean", yaml: sliceObj(with("endpoints[0].conditions.ready", "yes")),
		want: []string{`endpoints[0].conditions.ready: "yes"`}},
	{rule: "slice-endpoints", name: "8 hints each", yaml: sliceObj(with("endpoints[0].hints", map[string]any{
		"forZones": manyNames(8, "z"), "forNodes": manyNames(8, "n")}))},
	{rule: "slice-endpoints", name: "9 hints each", yaml: sliceObj(with("endpoints[0].hints", map[string]any{
		"forZones": manyNames(9, "z"), "forNodes": manyNames(9, "n")})),
		want: []string{
			`endpoints[0].hints.forZones: has 9 zones; at most 8 are allowed`,
			`endpoints[0].hints.forNodes: has 9 nodes; at most 8 are allowed`,
		}},
	{rule: "slice-endpoints", name: "hints named twice", yaml: sliceObj(with("endpoints[0].hints", yv(`{forZones: [{name: a}, {name: b}, {name: a}], forNodes: [{name: n1}, {name: n1}]}`))),
		want: []string{
			`endpoints[0].hints.forZones[2].name: "a" is already the name of forZones[0]`,
			`endpoints[0].hints.forNodes[1].name: "n1" is already the name of forNodes[0]`,
		}},
	{rule: "endpoint-ports", name: "slice of 20000 ports", yaml: sliceObj(with("ports", manyPorts(20000)))},
	{rule: "endpoint-ports", name: "slice of 20001 ports", yaml: sliceObj(with("ports", manyPorts(20001))),
		want: []string{`ports: has 20001 ports; a slice holds at most 20000`}},
	{rule: "slice-fqdn", name: "FQDN", yaml: sliceObj(with("addressType", "FQDN"), with("endpoints[0].addresses", yv(`[db.example.com]`)))},
	{rule: "slice-fqdn", name: "FQDN not a name", yaml: sliceObj(with("addressType", "FQDN"), with("endpoints[0].addresses", yv(`[db_1.example.com]`))),
		want: []string{`endpoints[0].addresses[0]: "db_1.example.com" is not a valid DNS name`}},
	{rule: "slice-fqdn", name: "FQDN with a trailing dot", yaml: sliceObj(with("addressType", "FQDN"), with("endpoints[0].addresses", yv(`[db.example.com.]`)))},
	{rule: "slice-fqdn", name: "FQDN of one label", yaml: sliceObj(with("addressType", "FQDN"), with("endpoints[0].addresses", yv(`[db]`))),
		want: []string{`endpoints[0].addresses[0]: "db" is not a valid DNS name (at least two labels separated by dots, such as db.example.com)`}},
	{rule: "slice-fqdn", name: "FQDN label of 64", yaml: sliceObj(with("addressType", "FQDN"), with("endpoints[0].addresses", yv(`[`+strings.Repeat("a", 64)+`.example.com]`))),
		want: []string{`is 64 characters long; at most 63 are allowed)`}},

	{rule: "node-name-ref", name: "node names and zones", yaml: sliceObj(with("endpoints[0]", yv(`{addresses: [10.1.0.1], nodeName: node-1.example.com,
		hints: {forZones: [{name: eu-West_1.a}], forNodes: [{name: node-1.example.com}]}}`))) + "---\n" +
		endpointsObj(with("subsets[0].addresses[0].nodeName", "node-1")) + "---\n" + podObj(with("spec.nodeName", "node-1"))},
	{rule: "node-name-ref", name: "not DNS subdomains", yaml: sliceObj(with("endpoints[0]", yv(`{addresses: [10.1.0.1], nodeName: Node_1,
		hints: {forZones: [{name: "eu west"}], forNodes: [{name: "node-1."}]}}`))) + "---\n" +
		endpointsObj(with("subsets[0].addresses[0].nodeName", "Node1")) + "---\n" + podObj(with("spec.nodeName", "node..1")),
		want: []string{
			`endpoints[0].nodeName: "Node_1" is not a valid node name (a DNS-1123 subdomain)`,
			`endpoints[0].hints.forZones[0].name: "eu west" is not a valid zone name (a label value`,
			`endpoints[0].hints.forNodes[0].name: "node-1." is not a valid node name`,
			`subsets[0].addresses[0].nodeName: "Node1" is not a valid node name`,
			`spec.nodeName: "node..1" is not a valid node name`,
		}},

	// ---- pods ----
	{rule: "pod-ips", name: "dual-stack", yaml: podObj(with("status.podIPs[1]", yv(`{ip: "2001:db8::5"}`)))},
	{rule: "pod-ips", name: "podIP differs from podIPs[0]", yaml: podObj(with("status.podIPs", yv(`[{ip: 10.1.0.2}]`))),
		want: []string{`status.podIPs[0].ip: "10.1.0.2" differs from status.podIP "10.1.0.1"; they must be equal`}},
	{rule: "pod-ips", name: "two IPv4 and three in all", yaml: podObj(with("status.podIPs", yv(`[{ip: 10.1.0.1}, {ip: 10.1.0.2}, {ip: "2001:db8::5"}]`))),
		want: []string{
			`status.podIPs: has 3 addresses; at most two are allowed, one per family`,
			`status.podIPs[1].ip: 10.1.0.2 is a second IPv4 address (podIPs[0] is one)`,
		}},
	{rule: "container-ports", name: "names unique across containers", yaml: podObj(with("spec.containers[1]", yv(`{name: side, ports: [{name: metrics, containerPort: 9090, protocol: UDP}]}`)))},
	{rule: "container-ports", name: "name repeated in another container: a warning", yaml: podObj(with("spec.containers[1]", yv(`{name: side, ports: [{name: http, containerPort: 9090}]}`)),
		with("spec.containers[2]", yv(`{name: third, ports: [{name: http, containerPort: 9091}]}`))),
		want: []string{
			`obj.yaml:18:21: warning: spec.containers[1].ports[0].name: "http" is also the name of containers[0].ports[0]; a Service's targetPort "http" takes the first port of that name (with the Service port's protocol) in container order, as in Kubernetes$`,
			`warning: spec.containers[2].ports[0].name: "http" is also the name of containers[0].ports[0]`,
		}},
	{rule: "container-ports", name: "name repeated in a native sidecar: a warning, the containers first", yaml: podObj(
		with("spec.initContainers", yv(`[{name: proxy, restartPolicy: Always, ports: [{name: http, containerPort: 15001}]}]`))),
		want: []string{`warning: spec.initContainers[0].ports[0].name: "http" is also the name of containers[0].ports[0]`}},
	{rule: "container-ports", name: "name repeated in one native sidecar", yaml: podObj(
		with("spec.initContainers", yv(`[{name: proxy, restartPolicy: Always, ports: [{name: admin, containerPort: 15000}, {name: admin, containerPort: 15001}]}]`))),
		want: []string{`spec.initContainers[0].ports[1].name: "admin" is already the name of ports[0] of this container; port names are unique in a container`}},
	{rule: "container-ports", name: "name repeated in one container", yaml: podObj(with("spec.containers[0].ports[1]", yv(`{name: http, containerPort: 9090}`))),
		want: []string{`spec.containers[0].ports[1].name: "http" is already the name of ports[0] of this container; port names are unique in a container`}},
	{rule: "container-ports", name: "bad name, port and protocol", yaml: podObj(with("spec.containers[0].ports", yv(`[{name: abcdefghijklmnop, containerPort: 0, protocol: ICMP, hostPort: 70000}]`))),
		want: []string{
			`spec.containers[0].ports[0].name: "abcdefghijklmnop" is not a valid port name (at most 15 of a-z, 0-9 and '-', with a letter)`,
			`spec.containers[0].ports[0].containerPort: 0 is out of range 1..65535`,
			`spec.containers[0].ports[0].protocol: "ICMP" is not a protocol`,
			`spec.containers[0].ports[0].hostPort: 70000 is out of range 1..65535`,
		}},
	{rule: "readiness-probe", name: "httpGet on a named port", yaml: podObj(with("spec.containers[0].readinessProbe",
		yv(`{httpGet: {path: /healthz, port: http, scheme: HTTPS, httpHeaders: [{name: X-Probe, value: "1"}]}, periodSeconds: 1, failureThreshold: 2}`)))},
	{rule: "readiness-probe", name: "tcpSocket and grpc", yaml: podObj(with("spec.containers[0].readinessProbe", yv(`{tcpSocket: {port: 8080}}`)),
		with("spec.containers[1]", yv(`{name: side, readinessProbe: {grpc: {port: 9090, service: health}}}`)))},
	{rule: "readiness-probe", name: "no action", yaml: podObj(with("spec.containers[0].readinessProbe", yv(`{periodSeconds: 5}`))),
		want: []string{`spec.containers[0].readinessProbe: needs an action: httpGet, tcpSocket, grpc or exec`}},
	{rule: "readiness-probe", name: "two actions", yaml: podObj(with("spec.containers[0].readinessProbe", yv(`{tcpSocket: {port: 80}, grpc: {port: 80}}`))),
		want: []string{`spec.containers[0].readinessProbe: has 2 actions; exactly one of httpGet, tcpSocket, grpc and exec is allowed`}},
	{rule: "readiness-probe", name: "ports, scheme, header, timing", yaml: podObj(with("spec.containers[0].readinessProbe",
		yv(`{httpGet: {port: metrics, scheme: ftp, httpHeaders: [{name: "a b", value: x}]}, periodSeconds: -1, failureThreshold: -2}`)),
		with("spec.containers[1]", yv(`{name: side, readinessProbe: {tcpSocket: {port: 70000}}}`)),
		with("spec.containers[2]", yv(`{name: third, readinessProbe: {tcpSocket: {port: "Not_A_Name"}}}`))),
		want: []string{
			`warning: spec.containers[0].readinessProbe.httpGet.port: "metrics" names no port of this container`,
			`spec.containers[0].readinessProbe.httpGet.scheme: "ftp" is not a scheme (HTTP or HTTPS)`,
			`spec.containers[0].readinessProbe.httpGet.httpHeaders[0].name: "a b" is not an HTTP header name`,
			`spec.containers[0].readinessProbe.periodSeconds: -1 is negative; give at least 1`,
			`spec.containers[0].readinessProbe.failureThreshold: -2 is negative; give at least 1`,
			`spec.containers[1].readinessProbe.tcpSocket.port: 70000 is out of range 1..65535`,
			`spec.containers[2].readinessProbe.tcpSocket.port: "Not_A_Name" is not a port number 1..65535 nor a port name`,
		}},
	{rule: "readiness-probe", name: "named port of another container", yaml: podObj(with("spec.containers[1]", yv(`{name: side, readinessProbe: {tcpSocket: {port: http}}}`))),
		want: []string{`warning: spec.containers[1].readinessProbe.tcpSocket.port: "http" names no port of this container: the kubelet fails this probe at every period (port http not found), so the container never becomes ready; netspec watch fails it too, and takes the endpoint out on its node after failureThreshold failures$`}},
	{rule: "readiness-probe", name: "native sidecar: a named port of its own", yaml: podObj(with("spec.initContainers",
		yv(`[{name: envoy, restartPolicy: Always, ports: [{name: admin, containerPort: 15000}], readinessProbe: {httpGet: {port: admin, path: /ready}}}]`)))},
	{rule: "readiness-probe", name: "native sidecar: a named port of another container", yaml: podObj(with("spec.initContainers",
		yv(`[{name: setup}, {name: envoy, restartPolicy: Always, readinessProbe: {tcpSocket: {port: http}}}]`))),
		want: []string{`warning: spec.initContainers[1].readinessProbe.tcpSocket.port: "http" names no port of this container: the kubelet fails this probe at every period (port http not found), so the container never becomes ready; netspec watch fails it too, and takes the endpoint out on its node after failureThreshold failures$`}},
	{rule: "readiness-probe", name: "exec is not probed: one warning per pod", yaml: podObj(with("spec.containers[0].readinessProbe", yv(`{exec: {command: [cat, /ready]}}`)),
		with("spec.containers[1]", yv(`{name: side, readinessProbe: {exec: {command: ["true"]}}}`))),
		want: []string{`spec.containers[0].readinessProbe.exec: an exec readiness probe runs inside the container; netspec cannot run it from the node, so it is not probed (the pod's Ready condition in the tree stands)$`}},
	{rule: "readiness-probe-annotation", name: "JSON", yaml: svcObj(with("metadata.annotations", yv(`{netspec.dev/readiness-probe: '{"httpGet": {"port": 8080, "path": "/ready"}, "periodSeconds": 2}'}`)))},
	{rule: "readiness-probe-annotation", name: "YAML", yaml: svcObj(with("metadata.annotations", yv(`{netspec.dev/readiness-probe: "tcpSocket: {port: 5432}\nfailureThreshold: 2"}`)))},
	{rule: "readiness-probe-annotation", name: "not YAML", yaml: svcObj(with("metadata.annotations", yv(`{netspec.dev/readiness-probe: "{tcpSocket: "}`))),
		want: []string{`metadata.annotations["netspec.dev/readiness-probe"]: is neither JSON nor YAML`}},
	{rule: "readiness-probe-annotation", name: "a list", yaml: svcObj(with("metadata.annotations", yv(`{netspec.dev/readiness-probe: "[1]"}`))),
		want: []string{`metadata.annotations["netspec.dev/readiness-probe"]: must be a probe's fields (a mapping such as {"tcpSocket": {"port": 8080}}), not a list`}},
	{rule: "readiness-probe-annotation", name: "unknown field", yaml: svcObj(with("metadata.annotations", yv(`{netspec.dev/readiness-probe: "{tcpSocket: {port: 1}, perod: 2}"}`))),
		want: []string{`metadata.annotations["netspec.dev/readiness-probe"]: is no probe: unknown field "perod"`}},
	{rule: "readiness-probe-annotation", name: "wrong type", yaml: svcObj(with("metadata.annotations", yv(`{netspec.dev/readiness-probe: "{tcpSocket: {port: 1}, periodSeconds: ten}"}`))),
		want: []string{`metadata.annotations["netspec.dev/readiness-probe"]: is no probe: periodSeconds: want int32, not string`}},
	{rule: "readiness-probe-annotation", name: "exec", yaml: svcObj(with("metadata.annotations", yv(`{netspec.dev/readiness-probe: "{exec: {command: [x]}}"}`))),
		want: []string{`metadata.annotations["netspec.dev/readiness-probe"]: exec: cannot run from the node; use httpGet, tcpSocket or grpc`}},
	{rule: "readiness-probe-annotation", name: "named port", yaml: svcObj(with("metadata.annotations", yv(`{netspec.dev/readiness-probe: "{httpGet: {port: http}}"}`))),
		want: []string{`metadata.annotations["netspec.dev/readiness-probe"]: httpGet.port: "http" is a port name, which only a Pod's container can resolve; give the port number`}},
	{rule: "readiness-probe-annotation", name: "threshold", yaml: svcObj(with("metadata.annotations", yv(`{netspec.dev/readiness-probe: "{grpc: {port: 50051}, successThreshold: -1}"}`))),
		want: []string{`metadata.annotations["netspec.dev/readiness-probe"]: successThreshold: -1 is negative`}},
	{rule: "pod-conditions", name: "status Unknown", yaml: podObj(with("status.conditions[0].status", "Unknown"))},
	{rule: "pod-conditions", name: "status yes", yaml: podObj(with("status.conditions[0].status", "Yes")),
		want: []string{`status.conditions[0].status: "Yes" is not a condition status (True, False or Unknown)`}},
	{rule: "hostname", name: "pod hostname and subdomain", yaml: podObj(with("spec.hostname", "web-0"), with("spec.subdomain", "web"))},
	{rule: "hostname", name: "pod hostname and subdomain with dots", yaml: podObj(with("spec.hostname", "web.0"), with("spec.subdomain", "Web")),
		want: []string{
			`spec.hostname: "web.0" is not a valid hostname (a DNS-1123 label)`,
			`spec.subdomain: "Web" is not a valid subdomain (a DNS-1123 label)`,
		}},
	{rule: "hostname", name: "endpoint hostnames", yaml: endpointsObj(with("subsets[0].addresses[0].hostname", "web_0")) + "---\n" + sliceObj(with("endpoints[0].hostname", "Web")),
		want: []string{
			`subsets[0].addresses[0].hostname: "web_0" is not a valid hostname`,
			`endpoints[0].hostname: "Web" is not a valid hostname`,
		}},

	// ---- nodes ----
	{rule: "node-addresses", name: "all types", yaml: nodeObj(with("status.addresses", yv(`[{type: InternalIP, address: 192.168.1.10}, {type: ExternalIP, address: "2001:db8::10"},
		{type: Hostname, address: node-1}, {type: InternalDNS, address: node-1.internal}, {type: ExternalDNS, address: node-1.example.com}]`)))},
	{rule: "node-addresses", name: "bad type and address", yaml: nodeObj(with("status.addresses", yv(`[{type: PrivateIP, address: 192.168.1.10}, {type: InternalIP, address: node-1}]`))),
		want: []string{
			`status.addresses[0].type: "PrivateIP" is not a node address type`,
			`status.addresses[1].address: "node-1" is not an IP address, as type InternalIP needs`,
		}},

	// ---- Cluster ----
	{rule: "cluster-cidrs", name: "defaults", yaml: clusterObj(without("spec"), with("spec", yv(`{}`)))},
	{rule: "cluster-cidrs", name: "empty", yaml: clusterObj(with("spec.serviceCIDRs", yv(`[]`))),
		want: []string{`spec.serviceCIDRs: needs at least one CIDR`}},
	{rule: "cluster-cidrs", name: "bad CIDRs", yaml: clusterObj(with("spec.serviceCIDRs", yv(`[10.96.0.0/12, 10.100.0.0/16, "fd00::1/64", "fd01::/127"]`)),
		with("spec.externalIPCIDRs", yv(`[203.0.113.0]`)), with("spec.loadBalancerIPCIDRs", yv(`[198.51.100.1/24]`)), with("spec.podCIDRs", yv(`[10.244.0.0/33]`))),
		want: []string{
			`spec.serviceCIDRs[1]: 10.100.0.0/16 is a second IPv4 CIDR (serviceCIDRs[0] is one); at most one per family`,
			`spec.serviceCIDRs[2]: fd00::1/64 has host bits set; write fd00::/64`,
			`spec.serviceCIDRs[3]: fd01::/127 is too small to allocate service IPs from`,
			`spec.externalIPCIDRs[0]: "203.0.113.0" is not a CIDR (such as 10.96.0.0/12)`,
			`spec.loadBalancerIPCIDRs[0]: 198.51.100.1/24 has host bits set; write 198.51.100.0/24`,
			`spec.podCIDRs[0]: "10.244.0.0/33" is not a CIDR`,
		}},
	{rule: "cluster-cidrs", name: "node-port addresses", yaml: clusterObj(with("spec.nodePortAddresses", yv(`[192.168.10.0/24, "fd00::/64"]`)))},
	{rule: "cluster-cidrs", name: "bad node-port addresses", yaml: clusterObj(with("spec.nodePortAddresses", yv(`[192.168.10.0/24, 192.168.10.7, 10.0.0.1/8]`))),
		want: []string{
			`spec.nodePortAddresses[1]: "192.168.10.7" is not a CIDR (such as 10.96.0.0/12)`,
			`spec.nodePortAddresses[2]: 10.0.0.1/8 has host bits set; write 10.0.0.0/8`,
		}},
	{rule: "cluster-dns-address", name: "link-local", yaml: clusterObj(with("spec.dnsAddress", "169.254.20.10"))},
	{rule: "cluster-dns-address", name: "IPv6", yaml: clusterObj(with("spec.dnsAddress", "fd00::53"))},
	{rule: "cluster-dns-address", name: "a CIDR", yaml: clusterObj(with("spec.dnsAddress", "169.254.20.10/32")),
		want: []string{`spec.dnsAddress: "169.254.20.10/32" is not a unicast IP address (such as 169.254.20.10)`}},
	{rule: "cluster-dns-address", name: "unspecified", yaml: clusterObj(with("spec.dnsAddress", "0.0.0.0")),
		want: []string{`spec.dnsAddress: "0.0.0.0" is not a unicast IP address`}},
	{rule: "cluster-dns-address", name: "with port", yaml: clusterObj(with("spec.dnsAddress", "169.254.20.10:53")),
		want: []string{`spec.dnsAddress: "169.254.20.10:53" is not a unicast IP address`}},
	{rule: "cluster-node-port-range", name: "custom", yaml: clusterObj(with("spec.nodePortRange", "20000-20999"))},
	{rule: "cluster-node-port-range", name: "one number", yaml: clusterObj(with("spec.nodePortRange", "30000")),
		want: []string{`spec.nodePortRange: "30000" is not a port range (FROM-TO)`}},
	{rule: "cluster-node-port-range", name: "reversed", yaml: clusterObj(with("spec.nodePortRange", "32767-30000")),
		want: []string{`spec.nodePortRange: "32767-30000" is not a port range within 1-65535 with FROM <= TO`}},
	{rule: "cluster-node-port-range", name: "leading zero", yaml: clusterObj(with("spec.nodePortRange", "03000-32767")),
		want: []string{`spec.nodePortRange: "03000-32767" is not a port range (FROM-TO, such as 30000-32767)`}},
	{rule: "cluster-node-port-range", name: "six digits", yaml: clusterObj(with("spec.nodePortRange", "30000-327670")),
		want: []string{`spec.nodePortRange: "30000-327670" is not a port range (FROM-TO)`}},
	{rule: "cluster-node-port-range", name: "past 65535", yaml: clusterObj(with("spec.nodePortRange", "30000-65536")),
		want: []string{`spec.nodePortRange: "30000-65536" is not a port range within 1-65535 with FROM <= TO`}},
	{rule: "cluster-domain", name: "custom", yaml: clusterObj(with("spec.clusterDomain", "k8s.example.com"))},
	{rule: "cluster-domain", name: "uppercase", yaml: clusterObj(with("spec.clusterDomain", "Cluster.Local")),
		want: []string{`spec.clusterDomain: "Cluster.Local" is not a valid domain (a DNS-1123 subdomain)`}},
	{rule: "cluster-ttl", name: "0", yaml: clusterObj(with("spec.dnsTTL", 0))},
	{rule: "cluster-ttl", name: "too large", yaml: clusterObj(with("spec.dnsTTL", 86401)),
		want: []string{`spec.dnsTTL: 86401 is out of range 0..86400`}},

	// ---- structure ----
	{rule: "unknown-field", name: "fields Kubernetes writes", yaml: svcObj(with("metadata.uid", "x"), with("metadata.resourceVersion", "1"),
		with("metadata.creationTimestamp", nil), with("metadata.annotations", yv(`{a: b}`)), with("spec.ports[0].appProtocol", "http"),
		with("status.conditions", yv(`[]`)))},
	{rule: "unknown-field", name: "typo in a port", yaml: svcObj(with("spec.ports[0].protocl", "TCP")),
		want: []string{`spec.ports[0].protocl: unknown field "protocl" (did you mean "protocol"?)`}},
	{rule: "unknown-field", name: "typo at the top", yaml: svcObj(with("spek", yv(`{}`))),
		want: []string{`spek: unknown field "spek" (did you mean "spec"?)`}},
	{rule: "unknown-field", name: "typo in a container", yaml: podObj(with("spec.containers[0].imagee", "nginx")),
		want: []string{`spec.containers[0].imagee: unknown field "imagee" (did you mean "image"?)`}},
	{rule: "unknown-field", name: "no suggestion", yaml: svcObj(with("spec.zzzqqq", 1)),
		want: []string{`spec.zzzqqq: unknown field "zzzqqq"$`}},
	{rule: "unknown-field", name: "Service status", yaml: svcObj(with("status.loadBalancer.ingress", yv(`[{ip: 203.0.113.7, ipMode: VIP, port: 1}]`))),
		want: []string{`status.loadBalancer.ingress[0].port: unknown field "port" (did you mean "ports"?)`}},
	{rule: "unknown-field", name: "Cluster", yaml: clusterObj(with("spec.serviceCIDR", "10.96.0.0/12")),
		want: []string{`spec.serviceCIDR: unknown field "serviceCIDR" (did you mean "serviceCIDRs"?)`}},
	{rule: "required-field", name: "all present", yaml: sliceObj()},
	{rule: "required-field", name: "Service name", yaml: svcObj(without("metadata.name")),
		want: []string{`metadata.name: is required`}},
	{rule: "required-field", name: "metadata", yaml: svcObj(without("metadata")),
		want: []string{`metadata: is required`}},
	{rule: "required-field", name: "port", yaml: svcObj(without("spec.ports[0].port")),
		want: []string{`spec.ports[0].port: is required`}},
	{rule: "required-field", name: "slice fields", yaml: sliceObj(without("addressType"), without("endpoints")),
		want: []string{`addressType: is required`}},
	{rule: "required-field", name: "nested in lists", yaml: podObj(with("spec.containers[0]", yv(`{ports: [{name: http}]}`)), with("status.conditions[0]", yv(`{}`))),
		want: []string{
			`spec.containers[0].name: is required`,
			`spec.containers[0].ports[0].containerPort: is required`,
			`status.conditions[0].status: is required`,
			`status.conditions[0].type: is required`,
		}},
	// ---- fields the API server checks beside those netspec uses ----
	{rule: "lb-only-fields", name: "on a LoadBalancer", yaml: svcObj(with("spec.type", "LoadBalancer"), with("spec.allocateLoadBalancerNodePorts", false),
		with("spec.loadBalancerClass", "example.com/internal-vip"))},
	{rule: "lb-only-fields", name: "on a ClusterIP and a NodePort Service", yaml: svcObj(with("spec.allocateLoadBalancerNodePorts", true), with("spec.loadBalancerClass", "example.com/lb")),
		want: []string{
			`obj.yaml:7:36: spec.allocateLoadBalancerNodePorts: may only be set for LoadBalancer Services$`,
			`obj.yaml:8:24: spec.loadBalancerClass: may only be set for LoadBalancer Services$`,
		}},
	{rule: "lb-only-fields", name: "NodePort", yaml: svcObj(with("spec.type", "NodePort"), with("spec.loadBalancerClass", "x")),
		want: []string{`spec.loadBalancerClass: may only be set for LoadBalancer Services$`}},
	{rule: "lb-only-fields", name: "class not a qualified name", yaml: svcObj(with("spec.type", "LoadBalancer"), with("spec.loadBalancerClass", "not valid")),
		want: []string{`spec.loadBalancerClass: "not valid" is not a qualified name (the name takes letters, digits, '-', '_' and '.', and starts and ends with a letter or digit)$`}},
	{rule: "endpoints-subset-addresses", name: "notReadyAddresses only", yaml: endpointsObj(with("subsets[0]", yv(`{notReadyAddresses: [{ip: 10.1.0.2}], ports: [{name: http, port: 8080}]}`)))},
	{rule: "endpoints-subset-addresses", name: "no address", yaml: endpointsObj(with("subsets[1]", yv(`{ports: [{name: http, port: 8080}]}`))),
		want: []string{`obj.yaml:12:7: subsets[1]: needs addresses or notReadyAddresses (at least one address)$`}},
	{rule: "labels", name: "qualified keys and label values", yaml: podObj(with("metadata.labels", yv(`{app: web, app.kubernetes.io/name: Web_1.x, example.com/Empty: "", a: `+strings.Repeat("v", 63)+`}`)))},
	{rule: "labels", name: "bad keys and values", yaml: podObj(with("metadata.labels", yv(`{"Foo/bar": x, "ex.com/": y, "a/b/c": z, "-a": z, long: `+strings.Repeat("v", 64)+`, v: "a b", `+strings.Repeat("k", 64)+`: x}`))),
		want: []string{
			`metadata.labels["Foo/bar"]: "Foo/bar" is not a valid label key (the prefix "Foo" is not a DNS-1123 subdomain: lowercase letters, digits, '-' and '.')$`,
			`metadata.labels["ex.com/"]: "ex.com/" is not a valid label key (the name is empty)$`,
			`metadata.labels["a/b/c"]: "a/b/c" is not a valid label key (at most one '/'`,
			`metadata.labels["-a"]: "-a" is not a valid label key (the name takes letters`,
			`metadata.labels.long: "vvvv` + strings.Repeat("v", 60) + `" is not a valid label value (it is 64 characters long; at most 63 are allowed)$`,
			`metadata.labels.v: "a b" is not a valid label value (it takes letters, digits`,
			`is not a valid label key (the name is 64 characters long; at most 63 are allowed)$`,
		}},
	{rule: "labels", name: "empty prefix", yaml: nodeObj(with("metadata.labels", yv(`{"/x": y}`))),
		want: []string{`metadata.labels["/x"]: "/x" is not a valid label key (the prefix before '/' is empty)$`}},
	{rule: "annotations", name: "keys of any case", yaml: svcObj(with("metadata.annotations", yv(`{Example.COM/Note: "a b", kubectl.kubernetes.io/last-applied-configuration: "{}"}`)))},
	{rule: "annotations", name: "bad key", yaml: svcObj(with("metadata.annotations", yv(`{"-x": y}`))),
		want: []string{`metadata.annotations["-x"]: "-x" is not a valid annotation key (the name takes letters, digits, '-', '_' and '.', and starts and ends with a letter or digit)$`}},
	{rule: "annotations", name: "too large", yaml: podObj(with("metadata.annotations", yv(`{a: `+strings.Repeat("x", 256*1024)+`}`))),
		want: []string{`metadata.annotations: hold 262145 bytes; at most 262144 are allowed$`}},
	{rule: "selector", name: "qualified key", yaml: svcObj(with("spec.selector", yv(`{app.kubernetes.io/name: web}`)))},
	{rule: "selector", name: "bad key and value", yaml: svcObj(with("spec.selector", yv(`{"a b": x, app: "-web"}`))),
		want: []string{
			`spec.selector["a b"]: "a b" is not a valid label key (the name takes letters`,
			`spec.selector.app: "-web" is not a valid label value (it takes letters`,
		}},
	{rule: "app-protocol", name: "qualified names", yaml: svcObj(with("spec.ports[0].appProtocol", "kubernetes.io/h2c"))},
	{rule: "app-protocol", name: "not qualified names", yaml: svcObj(with("spec.ports[0].appProtocol", "a b")),
		want: []string{`spec.ports[0].appProtocol: "a b" is not a valid appProtocol, a qualified name such as http or kubernetes.io/h2c (the name takes letters, digits, '-', '_' and '.', and starts and ends with a letter or digit)$`}},
	{rule: "app-protocol", name: "endpoint ports", yaml: sliceObj(with("ports[0].appProtocol", "ex.com/")),
		want: []string{`ports[0].appProtocol: "ex.com/" is not a valid appProtocol`}},

	{rule: "type-mismatch", name: "numbers as numbers", yaml: svcObj(with("spec.ports[0].port", 8443), with("spec.publishNotReadyAddresses", true))},
	{rule: "type-mismatch", name: "string port", yaml: svcObj(with("spec.ports[0].port", "80")),
		want: []string{`spec.ports[0].port: "80" is a string; want an integer 1..65535$`}},
	{rule: "type-mismatch", name: "boolean port, string nodePort, string timeout", yaml: svcObj(with("spec.ports[0].port", true),
		with("spec.type", "NodePort"), with("spec.ports[0].nodePort", "30080"),
		with("spec.sessionAffinity", "ClientIP"), with("spec.sessionAffinityConfig.clientIP.timeoutSeconds", "3600")),
		want: []string{
			`spec.ports[0].port: true is a boolean; want an integer 1..65535$`,
			`spec.ports[0].nodePort: "30080" is a string; want an integer 1..65535 (0: allocate one)$`,
			`spec.sessionAffinityConfig.clientIP.timeoutSeconds: "3600" is a string; want an integer 1..86400$`,
		}},
	// kubectl turns YAML into JSON (sigs.k8s.io/yaml): 80.0 and 8e1 are
	// sent as 80, 80.5 as 80.5, which the API server refuses.
	{rule: "type-mismatch", name: "decimal port", yaml: strings.Replace(svcObj(with("spec.ports[1]", yv(`{name: b, port: 80.5}`))), "port: 80\n", "port: 80.0\n", 1),
		want: []string{
			`spec.ports[1].port: 80.5 is a number; want an integer 1..65535$`,
		}},
	{rule: "type-mismatch", name: "integral decimals are integers, as kubectl sends them", yaml: strings.Replace(svcObj(with("spec.ports[1]", yv(`{name: b, port: 81}`))), "port: 81\n", "port: 8.1e1\n", 1)},
	{rule: "type-mismatch", name: "a value of another type where the field lists its values", yaml: svcObj(with("spec.ports[0].protocol", 5)),
		want: []string{`spec.ports[0].protocol: 5 is not a protocol (TCP, UDP or SCTP)$`}},
	{rule: "type-mismatch", name: "other errors still reported", yaml: svcObj(with("spec.ports[0].port", "80"), with("spec.ports[1]", yv(`{port: 81}`)),
		with("spec.externalTrafficPolicy", "Local"), with("spec.sessionAffinityConfig.clientIP.timeoutSeconds", int64(1e12))),
		want: []string{
			`spec.ports[0].port: "80"`,
			`spec.ports[1].name: is required when a Service has more than one port`,
			`spec.externalTrafficPolicy: may only be set for NodePort and LoadBalancer Services`,
			`spec.sessionAffinityConfig.clientIP.timeoutSeconds: 1000000000000 is out of range 1..86400`,
			`warning: spec.sessionAffinityConfig: has no effect: sessionAffinity is None`,
		}},
	{rule: "type-mismatch", name: "no findings below a refused value", yaml: svcObj(with("spec", "x")),
		want: []string{`spec: "x"`}},
	{rule: "type-mismatch", name: "map for a list", yaml: svcObj(with("spec.ports", yv(`{name: http, port: 80}`))),
		want: []string{`spec.ports: is a mapping; want a list$`}},
	{rule: "type-mismatch", name: "list for a map", yaml: svcObj(with("spec.selector", yv(`[app]`))),
		want: []string{`spec.selector: is a list; want a mapping$`}},
	{rule: "type-mismatch", name: "scalar for a list", yaml: svcObj(with("spec.externalIPs", "1.2.3.4")),
		want: []string{`spec.externalIPs: "1.2.3.4" is a string; want a list$`}},
	{rule: "type-mismatch", name: "label value", yaml: svcObj(with("metadata.labels", yv(`{app: 1, on: true}`))),
		want: []string{
			`metadata.labels.app: 1 is an integer; want a string (quote it: "1")$`,
			`metadata.labels.on: true is a boolean; want a string (unquoted, true, yes, on and y are the boolean true, and false, no, off and n false, as kubectl reads YAML: quote the value)$`,
		}},
	{rule: "type-mismatch", name: "apiVersion of the kind's group: the expected one", yaml: sliceObj(with("apiVersion", "discovery.k8s.io/v1beta1")),
		want: []string{`obj.yaml:2:13: apiVersion: "discovery.k8s.io/v1beta1" must be "discovery.k8s.io/v1"$`}},
	{rule: "type-mismatch", name: "apiVersion of the core group", yaml: svcObj(with("apiVersion", "v1beta1")),
		want: []string{`apiVersion: "v1beta1" must be "v1"$`}},
}

// extName builds a valid ExternalName Service and patches it.
func extNameObj(ps ...patch) string {
	base := []patch{without("spec.ports"), without("spec.selector"), with("spec.type", "ExternalName"), with("spec.externalName", "db.example.com")}
	return svcObj(append(base, ps...)...)
}

// longSubdomain returns a DNS-1123 subdomain of n characters (n >= 1).
func longSubdomain(n int) string {
	var b strings.Builder
	for b.Len() < n {
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(strings.Repeat("a", min(63, n-b.Len())))
	}
	s := b.String()
	if strings.HasSuffix(s, ".") || len(s) != n {
		panic("longSubdomain")
	}
	return s
}

func TestRules(t *testing.T) {
	var seen []string // every diagnostic of the rejecting cases, for the coverage check
	ran := 0
	for _, tc := range ruleCases {
		t.Run(tc.rule+"/"+tc.name, func(t *testing.T) {
			ran++
			tr := loadFiles(t, map[string]string{"obj.yaml": tc.yaml})
			got := diagStrings(tr.Diags)
			seen = append(seen, got...)
			if tc.want == nil {
				if len(got) != 0 {
					t.Errorf("want no diagnostics, got:\n%s\nYAML:\n%s", strings.Join(got, "\n"), tc.yaml)
				}
				if len(tr.Objects) == 0 {
					t.Errorf("no object decoded")
				}
				return
			}
			if msg := matchDiags(got, tc.want); msg != "" {
				t.Errorf("%s\nYAML:\n%s", msg, tc.yaml)
			}
		})
	}
	if ran != len(ruleCases) {
		return // filtered with -run: the coverage checks need every case
	}
	t.Run("coverage/cases", func(t *testing.T) {
		accept, reject := map[string]int{}, map[string]int{}
		known := map[string]bool{}
		for _, id := range ruleIDs {
			known[id] = true
		}
		for _, tc := range ruleCases {
			if !known[tc.rule] {
				t.Errorf("case %s/%s: rule %q is not in ruleIDs", tc.rule, tc.name, tc.rule)
			}
			if tc.want == nil {
				accept[tc.rule]++
			} else {
				reject[tc.rule]++
			}
		}
		for _, id := range ruleIDs {
			if accept[id] == 0 || reject[id] == 0 {
				t.Errorf("rule %s has %d accepting and %d rejecting cases; it needs at least one of each", id, accept[id], reject[id])
			}
		}
	})
	t.Run("coverage/rules.go", func(t *testing.T) {
		for _, f := range errorfFormats(t, "rules.go") {
			re := formatRegexp(f.format)
			if !anyMatch(seen, re) {
				t.Errorf("rules.go:%d: no rule case produces %q", f.line, f.format)
			}
		}
	})
	t.Run("coverage/netspec.cue", func(t *testing.T) {
		src, err := os.ReadFile("netspec.cue")
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`@msg\("([^"]*)"\)`).FindAllStringSubmatch(string(src), -1) {
			if !anyMatch(seen, regexp.MustCompile(regexp.QuoteMeta(m[1]))) {
				t.Errorf("no rule case produces the schema message %q", m[1])
			}
		}
	})
}

type errorfCall struct {
	line   int
	format string
}

// errorfFormats lists the format strings of the errorf calls in a file:
// each is one rule.
func errorfFormats(t *testing.T, file string) []errorfCall {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []errorfCall
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "errorf" || len(call.Args) < 2 {
			return true
		}
		lit, ok := call.Args[1].(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			t.Errorf("%s: errorf with a format that is not a literal", fset.Position(call.Pos()))
			return true
		}
		s, err := strconv.Unquote(lit.Value)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, errorfCall{line: fset.Position(call.Pos()).Line, format: s})
		return true
	})
	if len(out) < 20 {
		t.Fatalf("found only %d errorf calls in %s; has the reporter changed?", len(out), file)
	}
	return out
}

var verb = regexp.MustCompile(`%[-+# 0-9.]*[a-zA-Z]`)

// formatRegexp turns a format string into a regexp matching its output at
// the end of a diagnostic.
func formatRegexp(format string) *regexp.Regexp {
	parts := verb.Split(format, -1)
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile(": " + strings.Join(parts, ".+") + "$")
}

func anyMatch(ss []string, re *regexp.Regexp) bool {
	for _, s := range ss {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

// matchDiags pairs every wanted string with its own diagnostic (a want
// ending in "$" must be a suffix, any other a substring) and reports what
// is missing or unexpected, or "" when all pair up.
func matchDiags(got, want []string) string {
	matches := func(g, w string) bool {
		if strings.HasSuffix(w, "$") {
			return strings.HasSuffix(g, w[:len(w)-1])
		}
		return strings.Contains(g, w)
	}
	// Bipartite matching (augmenting paths): wants are few.
	owner := make([]int, len(got)) // want index matched to got[i], or -1
	for i := range owner {
		owner[i] = -1
	}
	var try func(w int, seen []bool) bool
	try = func(w int, seen []bool) bool {
		for g := range got {
			if seen[g] || !matches(got[g], want[w]) {
				continue
			}
			seen[g] = true
			if owner[g] < 0 || try(owner[g], seen) {
				owner[g] = w
				return true
			}
		}
		return false
	}
	var missing []string
	for w := range want {
		if !try(w, make([]bool, len(got))) {
			missing = append(missing, want[w])
		}
	}
	var extra []string
	for g, o := range owner {
		if o < 0 {
			extra = append(extra, got[g])
		}
	}
	if len(missing) == 0 && len(extra) == 0 {
		return ""
	}
	sort.Strings(missing)
	var b strings.Builder
	if len(missing) > 0 {
		fmt.Fprintf(&b, "missing diagnostics:\n\t%s\n", strings.Join(missing, "\n\t"))
	}
	if len(extra) > 0 {
		fmt.Fprintf(&b, "unexpected diagnostics:\n\t%s\n", strings.Join(extra, "\n\t"))
	}
	fmt.Fprintf(&b, "all diagnostics:\n\t%s", strings.Join(got, "\n\t"))
	return b.String()
}

// TestAllErrorsInOneRun checks that every mistake of an object is reported
// at once, each at its exact position: schema errors, unknown fields, Go
// rules and missing fields, in several objects of one file.
func TestAllErrorsInOneRun(t *testing.T) {
	const src = `apiVersion: v1
kind: Service
metadata:
  name: Web
  labels: {app: web}
spec:
  sessionAffinity: ClientIP
  sessionAffinityConfig:
    clientIP: {timeoutSeconds: 0}
  ports:
  - name: Http
    port: 80
    protocl: TCP
  - port: 81
    targetPort: a--b
---
apiVersion: v1
kind: Pod
metadata:
  namespace: shop
spec:
  containers:
  - name: app
    ports:
    - {containerPort: 8080, name: http}
status:
  podIP: 127.0.0.1
`
	tr := loadFiles(t, map[string]string{"svc/web.yaml": src})
	want := []string{
		`svc/web.yaml:4:9: metadata.name: "Web" is not a valid Service name (a DNS-1035 label: lowercase letters, digits and '-', starting with a letter, at most 63)`,
		`svc/web.yaml:9:32: spec.sessionAffinityConfig.clientIP.timeoutSeconds: 0 is out of range 1..86400`,
		`svc/web.yaml:11:11: spec.ports[0].name: "Http" is not a valid port name (lowercase letters, digits and '-')`,
		`svc/web.yaml:13:5: spec.ports[0].protocl: unknown field "protocl" (did you mean "protocol"?)`,
		`svc/web.yaml:14:5: spec.ports[1].name: is required when a Service has more than one port`,
		`svc/web.yaml:15:17: spec.ports[1].targetPort: "a--b" is not a port number 1..65535 nor a port name (at most 15 of a-z, 0-9 and '-', with a letter)`,
		`svc/web.yaml:20:3: metadata.name: is required`,
		`svc/web.yaml:27:10: status.podIP: 127.0.0.1 is a loopback address and cannot be an endpoint`,
	}
	if diff := lineDiff(want, diagStrings(tr.Diags)); diff != "" {
		t.Errorf("diagnostics (-want +got):\n%s", diff)
	}
}

// TestPositions checks line:col of diagnostics in JSON, in a kind: List (the
// path is relative to the item, the position in the file) and in a later
// document of a multi-document file.
func TestPositions(t *testing.T) {
	files := map[string]string{
		"a.json": `{
  "apiVersion": "v1",
  "kind": "Service",
  "metadata": {"name": "web"},
  "spec": {"ports": [{"port": 80, "protocol": "tcp"}], "typo": 1}
}
`,
		"b.yaml": `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Endpoints
  metadata: {name: web}
  subsets:
  - addresses:
    - ip: 10.1.0.1
    - ip: 127.0.0.1
`,
		"c.yml": `# leading comment
---
apiVersion: v1
kind: Node
metadata: {name: n1}
---
apiVersion: v1
kind: Node
metadata: {name: n2}
status:
  addresses:
  - type: InternalIP
    address: not-an-ip
`,
	}
	tr := loadFiles(t, files)
	want := []string{
		`a.json:5:47: spec.ports[0].protocol: "tcp" is not a protocol (TCP, UDP or SCTP)`,
		`a.json:5:56: spec.typo: unknown field "typo" (did you mean "type"?)`,
		`b.yaml:10:11: subsets[0].addresses[1].ip: 127.0.0.1 is a loopback address and cannot be an endpoint`,
		`c.yml:13:14: status.addresses[0].address: "not-an-ip" is not an IP address, as type InternalIP needs`,
	}
	if diff := lineDiff(want, diagStrings(tr.Diags)); diff != "" {
		t.Errorf("diagnostics (-want +got):\n%s", diff)
	}
}

func TestIgnoredKinds(t *testing.T) {
	files := map[string]string{
		"a.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec: {replicas: 3, whatever: [1, 2]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg}
data: {a: b}
---
apiVersion: example.com/v1
kind: Service
metadata: {name: not-core}
---
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Secret, metadata: {name: s}}
- {apiVersion: v1, kind: Service, metadata: {name: web}, spec: {ports: [{port: 80}]}}
`,
		"b.cue": `package x

cm: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "from-cue"}
`,
	}
	tr := loadFiles(t, files)
	if len(tr.Diags) != 0 {
		t.Errorf("want no diagnostics, got:\n%s", strings.Join(diagStrings(tr.Diags), "\n"))
	}
	var got []string
	for _, ig := range tr.Ignored {
		got = append(got, fmt.Sprintf("%s %s %s %s", ig.Pos, ig.APIVersion, ig.Kind, ig.Name))
	}
	want := []string{
		"a.yaml:1:1 apps/v1 Deployment web",
		"a.yaml:6:1 v1 ConfigMap cfg",
		"a.yaml:11:1 example.com/v1 Service not-core",
		"a.yaml:18:3 v1 Secret s",
		"b.cue:3:1 v1 ConfigMap from-cue",
	}
	if diff := lineDiff(want, got); diff != "" {
		t.Errorf("ignored (-want +got):\n%s", diff)
	}
	if len(tr.Objects) != 1 || tr.Objects[0].Kind != KindService {
		t.Errorf("objects: want the one Service, got %d", len(tr.Objects))
	}
}

// lineDiff returns "" when the lists are equal, else a simple -want +got
// listing.
func lineDiff(want, got []string) string {
	if strings.Join(want, "\n") == strings.Join(got, "\n") {
		return ""
	}
	inGot := map[string]int{}
	for _, g := range got {
		inGot[g]++
	}
	inWant := map[string]int{}
	for _, w := range want {
		inWant[w]++
	}
	var b strings.Builder
	for _, w := range want {
		if inGot[w] == 0 {
			fmt.Fprintf(&b, "- %s\n", w)
		}
	}
	for _, g := range got {
		if inWant[g] == 0 {
			fmt.Fprintf(&b, "+ %s\n", g)
		}
	}
	if b.Len() == 0 {
		b.WriteString("same lines, different order or count:\n")
		for _, g := range got {
			fmt.Fprintf(&b, "  %s\n", g)
		}
	}
	return b.String()
}
