package daemon

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"netspec.dev/netspec/schema"
)

// svcObj is a Service object ns/name read from file.
func svcObj(ns, name, file string) *schema.Object {
	return &schema.Object{Kind: schema.KindService, Src: schema.Source{File: file},
		Service: &schema.Service{Metadata: schema.ObjectMeta{Namespace: ns, Name: name}}}
}

// podObj is a Pod object ns/name read from file.
func podObj(ns, name, file string) *schema.Object {
	return &schema.Object{Kind: schema.KindPod, Src: schema.Source{File: file},
		Pod: &schema.Pod{Metadata: schema.ObjectMeta{Namespace: ns, Name: name}}}
}

// names lists objects as kind/ns/name@file.
func names(objs []*schema.Object) string {
	var out []string
	for _, o := range objs {
		out = append(out, keyOf(o).String()+"@"+o.Src.File)
	}
	return strings.Join(out, " ")
}

// TestRemovals walks the removal grace through readings of a tree at
// given times, each applied (committed) with the objects held: what is
// held, what comes back, what is pending, what goes once the grace has
// passed. The times are given: no clock.
func TestRemovals(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	web, web2 := svcObj("shop", "web", "web.yaml"), svcObj("shop", "web", "moved.yaml")
	cart, pod := svcObj("shop", "cart", "cart.yaml"), podObj("shop", "web-0", "pods.yaml")
	type reading struct {
		at   time.Duration // after t0
		objs []*schema.Object
		// want: the objects held, the identities back, and the pending
		// removal after the reading is applied (objects, since, due
		// after t0; objects 0: none).
		held, back string
		pending    int
		since, due time.Duration
		notApplied bool // the reading is not applied (an invalid tree)
	}
	tests := []struct {
		name     string
		grace    time.Duration
		readings []reading
	}{{
		name:  "removal held, then gone after the grace",
		grace: 2 * time.Second,
		readings: []reading{
			{at: 0, objs: []*schema.Object{web, cart, pod}},
			{at: time.Second, objs: []*schema.Object{web, pod},
				held: "Service/shop/cart@cart.yaml", pending: 1, since: time.Second, due: 3 * time.Second},
			// An edit elsewhere keeps it held, with its first time.
			{at: 2 * time.Second, objs: []*schema.Object{web, pod},
				held: "Service/shop/cart@cart.yaml", pending: 1, since: time.Second, due: 3 * time.Second},
			{at: 3 * time.Second, objs: []*schema.Object{web, pod}},
			// Gone for good: its return is an addition, not a cancel.
			{at: 4 * time.Second, objs: []*schema.Object{web, cart, pod}},
		},
	}, {
		name:  "reappearance cancels the removal",
		grace: 2 * time.Second,
		readings: []reading{
			{at: 0, objs: []*schema.Object{web, pod}},
			{at: 50 * time.Millisecond, objs: []*schema.Object{pod},
				held: "Service/shop/web@web.yaml", pending: 1, since: 50 * time.Millisecond, due: 2050 * time.Millisecond},
			{at: 250 * time.Millisecond, objs: []*schema.Object{web, pod}, back: "Service/shop/web"},
			// Missing again later: a grace of its own.
			{at: 5 * time.Second, objs: []*schema.Object{web},
				held: "Pod/shop/web-0@pods.yaml", pending: 1, since: 5 * time.Second, due: 7 * time.Second},
		},
	}, {
		name:  "moved to another file is no removal",
		grace: 2 * time.Second,
		readings: []reading{
			{at: 0, objs: []*schema.Object{web, pod}},
			{at: time.Second, objs: []*schema.Object{web2, pod}},
			{at: 4 * time.Second, objs: []*schema.Object{web2, pod}},
		},
	}, {
		name:  "moved in two steps: held from its old file, then found in the new",
		grace: 2 * time.Second,
		readings: []reading{
			{at: 0, objs: []*schema.Object{web, pod}},
			{at: 100 * time.Millisecond, objs: []*schema.Object{pod},
				held: "Service/shop/web@web.yaml", pending: 1, since: 100 * time.Millisecond, due: 2100 * time.Millisecond},
			{at: 600 * time.Millisecond, objs: []*schema.Object{pod, web2}, back: "Service/shop/web"},
		},
	}, {
		name:  "several, each its own grace, sorted",
		grace: 2 * time.Second,
		readings: []reading{
			{at: 0, objs: []*schema.Object{web, cart, pod}},
			{at: time.Second, objs: []*schema.Object{web},
				held: "Pod/shop/web-0@pods.yaml Service/shop/cart@cart.yaml", pending: 2, since: time.Second, due: 3 * time.Second},
			{at: 2 * time.Second, objs: []*schema.Object{},
				held: "Pod/shop/web-0@pods.yaml Service/shop/cart@cart.yaml Service/shop/web@web.yaml", pending: 3, since: time.Second, due: 3 * time.Second},
			{at: 3 * time.Second, objs: []*schema.Object{},
				held: "Service/shop/web@web.yaml", pending: 1, since: 2 * time.Second, due: 4 * time.Second},
			{at: 4 * time.Second, objs: []*schema.Object{}},
		},
	}, {
		name:  "an invalid tree applies nothing: the removal waits for a valid one",
		grace: 2 * time.Second,
		readings: []reading{
			{at: 0, objs: []*schema.Object{web, cart}},
			{at: time.Second, objs: []*schema.Object{web}, notApplied: true,
				held: "Service/shop/cart@cart.yaml", pending: 1, since: time.Second, due: 3 * time.Second},
			{at: 5 * time.Second, objs: []*schema.Object{web}, notApplied: true,
				pending: 1, since: time.Second, due: 3 * time.Second},
			{at: 6 * time.Second, objs: []*schema.Object{web}},
		},
	}, {
		name:  "grace off",
		grace: -1,
		readings: []reading{
			{at: 0, objs: []*schema.Object{web, cart}},
			{at: time.Second, objs: []*schema.Object{web}},
		},
	}, {
		name:  "nothing applied yet holds nothing",
		grace: 2 * time.Second,
		readings: []reading{
			{at: 0, objs: []*schema.Object{web}, notApplied: true},
			{at: time.Second, objs: []*schema.Object{}},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRemovals(tt.grace)
			for i, rd := range tt.readings {
				held, back := r.hold(rd.objs, t0.Add(rd.at))
				var backs []string
				for _, k := range back {
					backs = append(backs, k.String())
				}
				if got := names(held); got != rd.held {
					t.Errorf("reading %d: held %q, want %q", i, got, rd.held)
				}
				if got := strings.Join(backs, " "); got != rd.back {
					t.Errorf("reading %d: back %q, want %q", i, got, rd.back)
				}
				if !rd.notApplied {
					r.commit(rd.objs, held)
				}
				p := r.pending()
				switch {
				case rd.pending == 0 && p != nil:
					t.Errorf("reading %d: pending %+v, want none", i, *p)
				case rd.pending > 0 && p == nil:
					t.Errorf("reading %d: no removal pending, want %d", i, rd.pending)
				case rd.pending > 0:
					want := PendingRemoval{Objects: rd.pending, Since: t0.Add(rd.since), Due: t0.Add(rd.due)}
					if *p != want {
						t.Errorf("reading %d: pending %+v, want %+v", i, *p, want)
					}
				}
			}
		})
	}
}

// BenchmarkRemovalsHold times the removal grace's part of a reload of a
// big tree (10,000 Services, 30,000 Pods) after an edit of one file, as
// most reloads are, and commits it: reported as hold-ms per reload.
func BenchmarkRemovalsHold(b *testing.B) {
	var objs []*schema.Object
	for i := range 10000 {
		objs = append(objs, svcObj("ns", fmt.Sprintf("svc-%d", i), fmt.Sprintf("svc-%d.yaml", i)))
	}
	for i := range 30000 {
		objs = append(objs, podObj("ns", fmt.Sprintf("pod-%d", i), "pods.yaml"))
	}
	// Two readings: the second has svc-5000 edited (another object).
	readings := [2][]*schema.Object{objs, slices.Clone(objs)}
	readings[1][5000] = svcObj("ns", "svc-5000", "svc-5000.yaml")
	r := newRemovals(DefaultRemovalGrace)
	r.commit(readings[0], nil)
	now := time.Now()
	i := 0
	for b.Loop() {
		i++
		b.StopTimer()
		read := slices.Clone(readings[i%2]) // a reading's slice is new, its objects not
		b.StartTimer()
		held, _ := r.hold(read, now)
		if len(held) != 0 {
			b.Fatalf("held %d", len(held))
		}
		r.commit(read, held)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "hold-ms")
}
