package compiler

import (
	"fmt"
	"testing"

	"netspec.dev/netspec/schema"
)

func TestSelectPods(t *testing.T) {
	pod := func(ns, name string, labels map[string]string) *schema.Object {
		return &schema.Object{Kind: schema.KindPod, Pod: &schema.Pod{Metadata: schema.ObjectMeta{Name: name, Namespace: ns, Labels: schema.NewStringMap(labels)}}}
	}
	objs := []*schema.Object{
		pod("shop", "web-1", map[string]string{"app": "web", "tier": "front"}),
		pod("shop", "web-2", map[string]string{"app": "web"}),
		pod("shop", "api-1", map[string]string{"app": "api", "tier": "front"}),
		pod("data", "web-3", map[string]string{"app": "web", "tier": "front"}),
		// The index has the label keys that the tree's selectors use.
		{Kind: schema.KindService, Service: &schema.Service{
			Metadata: schema.ObjectMeta{Name: "keys", Namespace: "shop"},
			Spec:     schema.ServiceSpec{Selector: schema.NewStringMap(map[string]string{"app": "x", "tier": "x", "zone": "x"})},
		}},
	}
	idx := newPodIndex(objs)
	tests := []struct {
		name string
		ns   string
		sel  map[string]string
		want string
	}{
		{name: "one label", ns: "shop", sel: map[string]string{"app": "web"}, want: "[web-1 web-2]"},
		{name: "two labels", ns: "shop", sel: map[string]string{"app": "web", "tier": "front"}, want: "[web-1]"},
		{name: "other namespace", ns: "data", sel: map[string]string{"app": "web"}, want: "[web-3]"},
		{name: "value differs", ns: "shop", sel: map[string]string{"app": "db"}, want: "[]"},
		{name: "one label missing", ns: "shop", sel: map[string]string{"app": "api", "zone": "a"}, want: "[]"},
		{name: "empty selector", ns: "shop", sel: map[string]string{}, want: "[]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var names []string
			for _, p := range idx.selectPods(tc.ns, schema.NewStringMap(tc.sel)) {
				names = append(names, p.Metadata.Name)
			}
			if got := fmt.Sprint(names); got != tc.want && !(tc.want == "[]" && names == nil) {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}
