package explain_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/explain"
	"netspec.dev/netspec/internal/diag"
	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/schema"
)

// causeNode is the node of the trees of TestCausesFoundByValidate.
const causeNode = `apiVersion: v1
kind: Node
metadata: {name: n1}
status: {addresses: [{type: InternalIP, address: 192.168.1.1}]}
`

// causeService is a ClusterIP Service web with cluster IP 10.96.0.10 and
// one port 80 to targetPort TARGET, selecting app: SELECT.
const causeService = `apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  clusterIP: 10.96.0.10
  selector: {app: SELECT}
  ports: [{name: http, port: 80, targetPort: TARGET}]
`

// causeManual is a Service db without selector with cluster IP
// 10.96.0.11 and one port sql 5432, whose endpoints a tree writes or not.
const causeManual = `apiVersion: v1
kind: Service
metadata: {name: db, namespace: shop}
spec:
  clusterIP: 10.96.0.11
  ports: [{name: sql, port: 5432}]
`

// causePod is a pod of node n1 labelled app: web with a container port
// http 8080 and the STATUS given.
const causePod = `apiVersion: v1
kind: Pod
metadata: {name: web-0, namespace: shop, labels: {app: web}}
spec:
  nodeName: n1
  containers: [{name: web, ports: [{name: PORT, containerPort: 8080}]}]
status: STATUS
`

const readyStatus = `{podIP: 10.244.1.10, conditions: [{type: Ready, status: "True"}]}`

// causeTree is a tree of the node, the Service and the pod.
func causeTree(sel, target, port, status string) string {
	svc := strings.NewReplacer("SELECT", sel, "TARGET", target).Replace(causeService)
	pod := strings.NewReplacer("PORT", port, "STATUS", status).Replace(causePod)
	return causeNode + "---\n" + svc + "---\n" + pod
}

// TestCausesFoundByValidate holds explain's causes and validate's
// findings together: every cause explain names (its Cause* constants)
// has a row here, with a tree that shows it, of which explain names the
// cause and validate reports the finding; or, for a cause that is a
// packet's or the node's live state and no mistake of the tree, the
// reason validate has nothing to say. A cause added to explain without a
// row makes the test fail.
func TestCausesFoundByValidate(t *testing.T) {
	rows := []struct {
		cause   string
		tree    string
		to      string // the packet's destination, ip:port
		finding string // part of validate's finding
		notTree string // why validate has no finding: not the tree's mistake
	}{
		{cause: explain.CauseNoPodMatches, tree: causeTree("wbe", "8080", "http", readyStatus), to: "10.96.0.10:80",
			finding: "spec.selector: matches no Pod in namespace shop"},
		{cause: explain.CauseNoNamedPort, tree: causeTree("web", "http", "web", readyStatus), to: "10.96.0.10:80",
			finding: `spec.ports[0].targetPort: no selected Pod has a container port named http/TCP (web-0), so port http has no endpoints; name a container port so`},
		{cause: explain.CauseNoReadyEndpoint, tree: causeTree("web", "http", "http", `{podIP: 10.244.1.10}`), to: "10.96.0.10:80",
			finding: "Pod shop/web-0 is not Ready"},
		{cause: explain.CauseNoReadyEndpoint, tree: causeTree("web", "http", "http", `{phase: Pending}`), to: "10.96.0.10:80",
			finding: "Pod shop/web-0 has no status.podIP"},
		{cause: explain.CauseNoReadyEndpoint, tree: causeTree("web", "http", "http", `{phase: Succeeded, podIP: 10.244.1.10, conditions: [{type: Ready, status: "True"}]}`), to: "10.96.0.10:80",
			finding: "Pod shop/web-0 has finished (phase Succeeded)"},
		{cause: explain.CauseNoEndpointObjects, tree: causeNode + "---\n" + causeManual + `---
apiVersion: v1
kind: Endpoints
metadata: {name: db, namespace: shop}
subsets: [{addresses: [{ip: 10.244.1.20}], ports: [{name: postgres, port: 5432}]}]
`, to: "10.96.0.11:5432", finding: `no Endpoints object or EndpointSlice of Service shop/db has an address for a port named "sql"/TCP`},
		{cause: explain.CauseNoEndpointObjects, tree: causeNode + "---\n" + causeManual, to: "10.96.0.11:5432",
			finding: "metadata.name: the Service has no selector and no Endpoints object or EndpointSlice with an address, so every port of it refuses connections"},
		{cause: explain.CauseOtherFamily, tree: causeNode + `---
apiVersion: netspec.dev/v1alpha1
kind: Cluster
metadata: {name: c}
spec: {externalIPCIDRs: ["2001:db8:e::/64"]}
---
apiVersion: v1
kind: Service
metadata: {name: v4, namespace: shop}
spec:
  clusterIP: 10.96.0.12
  externalIPs: ["2001:db8:e::5"]
  ports: [{port: 80}]
`, to: "[2001:db8:e::5]:80", finding: "spec.externalIPs[0]: 2001:db8:e::5 is an IPv6 address, but the Service has no IPv6 cluster IP"},
		{cause: explain.CauseOtherProxy, tree: causeNode + `---
apiVersion: v1
kind: Service
metadata: {name: nfs, namespace: shop, labels: {service.kubernetes.io/service-proxy-name: other}}
spec:
  clusterIP: 10.96.0.13
  ports: [{port: 2049}]
`, to: "10.96.0.13:2049", finding: `gives the Service to the proxy "other"`},

		// (A Local policy that drops on a node whose endpoints are on
		// other nodes is by design: those nodes serve.)
		{cause: explain.CauseLocalNoEndpoint, tree: causeNode + `---
apiVersion: v1
kind: Service
metadata: {name: cache, namespace: shop}
spec:
  clusterIP: 10.96.0.14
  internalTrafficPolicy: Local
  ports: [{name: redis, port: 6379}]
---
apiVersion: v1
kind: Endpoints
metadata: {name: cache, namespace: shop}
subsets: [{addresses: [{ip: 10.244.1.30}], ports: [{name: redis, port: 6379}]}]
`, to: "10.96.0.14:6379", finding: "subsets[0].addresses[0]: 1 address(es) without nodeName: Service shop/cache has internalTrafficPolicy Local"},
		{cause: explain.CauseSourceOutside, notTree: "the packet's source is outside loadBalancerSourceRanges, as the Service means"},
		{cause: explain.CausePortNotServed, notTree: "the packet's port is one the Service does not serve"},
		{cause: explain.CauseUnallocated, notTree: "the packet's destination is an address of the service CIDR no Service holds"},
		{cause: explain.CauseNodePortNotAddress, notTree: "the packet's destination is not a node-port address of the node"},
		{cause: explain.CauseNotService, notTree: "the packet's destination is no Service's"},
		{cause: explain.CauseProbeFailing, notTree: "a readiness probe fails on the node: its live state (explain --live)"},
		{cause: explain.CauseKernelDiffers, notTree: "the node's kernel differs from the plan: its live state (explain --live)"},
		{cause: explain.CauseHealthCheckNodePort, notTree: "the health check node port is answered on the node by design"},
		{cause: explain.CauseLoadBalancerProxy, notTree: "a LoadBalancer IP with ipMode Proxy is the load balancer's by design"},
	}
	consts := causeConstants(t)
	var covered []string
	for _, r := range rows {
		covered = append(covered, r.cause)
		if !slices.Contains(consts, r.cause) {
			t.Errorf("row for %q, which is no Cause constant of explain.go", r.cause)
		}
	}
	for _, c := range consts {
		if !slices.Contains(covered, c) {
			t.Errorf("cause %q has no row: add a tree that shows it and validate's finding, or why it is not the tree's mistake", c)
		}
	}
	for _, r := range rows {
		if r.tree == "" {
			if r.notTree == "" {
				t.Errorf("%s: neither a tree nor a reason", r.cause)
			}
			continue
		}
		t.Run(r.cause+"/"+r.finding, func(t *testing.T) {
			tr, dl, p := compileStream(t, r.tree)
			if !slices.ContainsFunc(dl, func(d diag.Diagnostic) bool { return strings.Contains(d.String(), r.finding) }) {
				t.Errorf("validate does not report %q; it reports %v", r.finding, dl)
			}
			to := netip.MustParseAddrPort(r.to)
			x := explain.PacketWith(p, tr.Objects, plan.Packet{Src: explain.DefaultSource(to.Addr()), Dst: to.Addr(), Port: to.Port(), Protocol: "TCP"}, explain.Options{})
			if x.Cause == nil || x.Cause.Kind != r.cause {
				t.Errorf("explain names cause %+v, want %s; steps:\n%s", x.Cause, r.cause, strings.Join(x.Steps, "\n"))
			}
		})
	}
}

// compileStream validates a tree of YAML documents, which must have no
// error, and compiles it for node n1; it returns the tree, the findings
// and the plan.
func compileStream(t *testing.T, yaml string) (*schema.Tree, diag.List, *plan.Plan) {
	t.Helper()
	tr, err := schema.LoadStream(schema.StdinName, strings.NewReader(yaml), schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	checked := compiler.Validate(tr.Objects, nil, tr)
	dl := append(slices.Clone(tr.Diags), checked.Diags...)
	if dl.Errors() > 0 {
		t.Fatalf("tree invalid: %v", dl)
	}
	p, err := compiler.Compile(tr.Objects, checked, "n1")
	if err != nil {
		t.Fatal(err)
	}
	return tr, dl, p
}

// causeConstants reads the values of the Cause* constants of explain.go.
func causeConstants(t *testing.T) []string {
	f, err := parser.ParseFile(token.NewFileSet(), "explain.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if !strings.HasPrefix(n.Name, "Cause") || i >= len(vs.Values) {
					continue
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					v, _ := strconv.Unquote(lit.Value)
					out = append(out, v)
				}
			}
		}
	}
	if len(out) < 10 {
		t.Fatalf("found %d Cause constants in explain.go: the test no longer reads them", len(out))
	}
	return out
}

// TestNearestPod: for a selector that matches no pod, explain names the
// pod whose labels are nearest: the same key with a close value beats a
// far value (app: wbe is a typo of web, not of cart, which sorts first)
// and a close key with the value.
func TestNearestPod(t *testing.T) {
	n := 0
	pod := func(name, labels string) string {
		n++
		return "---\napiVersion: v1\nkind: Pod\nmetadata: {name: " + name + ", namespace: shop, labels: " + labels + "}\n" +
			"spec: {nodeName: n1}\nstatus: " + strings.Replace(readyStatus, "10.244.1.10", "10.244.1."+strconv.Itoa(n), 1) + "\n"
	}
	for _, tc := range []struct {
		name, selector, want string
	}{
		{name: "close value", selector: "wbe", want: "nearest pod web-7d9f-a (labels {app=web}): app=wbe wanted, the pod has app=web"},
		{name: "another close value", selector: "crt", want: "nearest pod cart-5c4b-a (labels {app=cart}): app=crt wanted, the pod has app=cart"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := strings.NewReplacer("SELECT", tc.selector, "TARGET", "8080").Replace(causeService)
			tree := causeNode + "---\n" + svc + pod("cart-5c4b-a", "{app: cart}") + pod("web-7d9f-a", "{app: web}") +
				pod("api-1", "{ap: wbe}") + pod("zzz", "{tier: wbe}")
			tr, _, p := compileStream(t, tree)
			x := explain.PacketWith(p, tr.Objects, plan.Packet{Src: explain.DefaultSource(netip.MustParseAddr("10.96.0.10")), Dst: netip.MustParseAddr("10.96.0.10"), Port: 80, Protocol: "TCP"}, explain.Options{})
			if x.Cause == nil || !strings.Contains(x.Cause.Text, tc.want) {
				t.Errorf("cause %+v, want it to say %q", x.Cause, tc.want)
			}
		})
	}
}
