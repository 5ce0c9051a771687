package schema

import (
	"reflect"
	"testing"
)

// TestTargetRefDecoded: the targetRef of Endpoints addresses (ready and
// not ready) and of EndpointSlice endpoints, as kubectl prints them,
// validates and is decoded; every field of a Kubernetes ObjectReference
// is accepted, and a misspelt one is an unknown field, as elsewhere in
// the kinds netspec reads. The API server checks no value of a targetRef,
// so neither does netspec.
func TestTargetRefDecoded(t *testing.T) {
	tr := loadFiles(t, map[string]string{"dump.yaml": `apiVersion: v1
kind: List
metadata: {resourceVersion: ""}
items:
- apiVersion: v1
  kind: Endpoints
  metadata:
    name: web
    namespace: shop
    resourceVersion: "811"
    uid: 0b7c4e52-3d1a-4f6e-9c2b-7a8d5e1f0c34
  subsets:
  - addresses:
    - ip: 10.244.1.9
      nodeName: kind-worker
      targetRef:
        kind: Pod
        name: web-0
        namespace: shop
        uid: 5e2f7a90-1c3b-4d8e-a6f1-9b0c2d4e6f78
    notReadyAddresses:
    - ip: 10.244.2.7
      targetRef: {kind: Pod, name: web-1, namespace: shop, uid: 1f0e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b, apiVersion: v1, resourceVersion: "802", fieldPath: "spec.containers{web}"}
    ports:
    - {name: http, port: 8080, protocol: TCP}
- addressType: IPv4
  apiVersion: discovery.k8s.io/v1
  kind: EndpointSlice
  metadata:
    labels: {kubernetes.io/service-name: web}
    name: web-x7k2p
    namespace: shop
  endpoints:
  - addresses: [10.244.1.9]
    conditions: {ready: true, serving: true, terminating: false}
    nodeName: kind-worker
    targetRef: {kind: Pod, name: web-0, namespace: shop, uid: 5e2f7a90-1c3b-4d8e-a6f1-9b0c2d4e6f78}
  - addresses: [192.0.2.10]
    targetRef: {kind: Node, name: kind-worker}
  - addresses: [192.0.2.11]
  ports:
  - {name: http, port: 8080, protocol: TCP}
`})
	wantNoDiags(t, tr)
	if len(tr.Objects) != 2 {
		t.Fatalf("got %d objects, want 2", len(tr.Objects))
	}
	ep := tr.Objects[0].Endpoints
	sl := tr.Objects[1].EndpointSlice
	if ep == nil || sl == nil {
		t.Fatalf("objects are %s and %s, want Endpoints and EndpointSlice", tr.Objects[0].Kind, tr.Objects[1].Kind)
	}
	for _, tc := range []struct {
		name string
		got  *ObjectReference
		want *ObjectReference
	}{
		{name: "Endpoints address", got: ep.Subsets[0].Addresses[0].TargetRef,
			want: &ObjectReference{Kind: "Pod", Name: "web-0", Namespace: "shop", UID: "5e2f7a90-1c3b-4d8e-a6f1-9b0c2d4e6f78"}},
		{name: "Endpoints not-ready address", got: ep.Subsets[0].NotReadyAddresses[0].TargetRef,
			want: &ObjectReference{Kind: "Pod", Name: "web-1", Namespace: "shop", UID: "1f0e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b",
				APIVersion: "v1", ResourceVersion: "802", FieldPath: "spec.containers{web}"}},
		{name: "slice endpoint of a Pod", got: sl.Endpoints[0].TargetRef,
			want: &ObjectReference{Kind: "Pod", Name: "web-0", Namespace: "shop", UID: "5e2f7a90-1c3b-4d8e-a6f1-9b0c2d4e6f78"}},
		{name: "slice endpoint of another kind", got: sl.Endpoints[1].TargetRef,
			want: &ObjectReference{Kind: "Node", Name: "kind-worker"}},
		{name: "slice endpoint without targetRef", got: sl.Endpoints[2].TargetRef, want: nil},
	} {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s: targetRef = %+v, want %+v", tc.name, tc.got, tc.want)
		}
	}

	tr = loadFiles(t, map[string]string{"ep.yaml": `apiVersion: v1
kind: Endpoints
metadata: {name: web}
subsets:
- addresses:
  - ip: 10.244.1.9
    targetRef: {kind: Pod, nmae: web-0}
  ports: [{port: 8080}]
`})
	wantDiags(t, tr, `ep.yaml:7:28: subsets[0].addresses[0].targetRef.nmae: unknown field "nmae" (did you mean "name"?)`)
}

// TestPodRef: which targetRefs name a Pod, and in which namespace.
func TestPodRef(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ref    *ObjectReference
		wantNS string
		wantN  string
		wantOK bool
	}{
		{name: "nil", ref: nil},
		{name: "pod with namespace", ref: &ObjectReference{Kind: "Pod", Namespace: "other", Name: "web-0"}, wantNS: "other", wantN: "web-0", wantOK: true},
		{name: "pod without namespace", ref: &ObjectReference{Kind: "Pod", Name: "web-0"}, wantNS: "shop", wantN: "web-0", wantOK: true},
		{name: "pod of v1", ref: &ObjectReference{Kind: "Pod", APIVersion: "v1", Name: "web-0"}, wantNS: "shop", wantN: "web-0", wantOK: true},
		{name: "pod of another group", ref: &ObjectReference{Kind: "Pod", APIVersion: "example.com/v1", Name: "web-0"}},
		{name: "no kind", ref: &ObjectReference{Name: "web-0"}},
		{name: "kind in lower case", ref: &ObjectReference{Kind: "pod", Name: "web-0"}},
		{name: "another kind", ref: &ObjectReference{Kind: "Node", Name: "web-0"}},
		{name: "no name", ref: &ObjectReference{Kind: "Pod", Namespace: "shop"}},
	} {
		ns, n, ok := tc.ref.PodRef("shop")
		if ns != tc.wantNS || n != tc.wantN || ok != tc.wantOK {
			t.Errorf("%s: PodRef = %q, %q, %v; want %q, %q, %v", tc.name, ns, n, ok, tc.wantNS, tc.wantN, tc.wantOK)
		}
	}
}
