package plan_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"netspec.dev/netspec/internal/gen/genplan"
	"netspec.dev/netspec/plan"
)

var cmpPlan = cmp.Options{cmpopts.EquateEmpty(), cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })}

// checkDelta: Diff(old, new) applied to old gives new, exactly.
func checkDelta(t *testing.T, step string, old, new *plan.Plan) *plan.Delta {
	t.Helper()
	d := plan.Diff(old, new)
	got, err := d.Apply(old)
	if err != nil {
		t.Fatalf("%s: Apply: %v", step, err)
	}
	if diff := cmp.Diff(new, got, cmpPlan); diff != "" {
		t.Fatalf("%s: Apply(Diff(old, new)) differs from new (-want +got):\n%s", step, diff)
	}
	return d
}

// randomPlan is a plan of n Services in namespaces a, b, c, with records
// and variables derived from them, lists in the order the compiler keeps
// (but Delta must not depend on it: some lists are shuffled).
func randomPlan(r *rand.Rand, n int) *plan.Plan {
	p := &plan.Plan{FormatVersion: plan.FormatVersion, Node: plan.Node{Name: "node-1"}, Cluster: plan.Cluster{Domain: "cluster.local", DNSTTL: 5}}
	zone := plan.Zone{Name: "cluster.local.", Records: []plan.Record{{Name: "cluster.local.", Type: "SOA", TTL: 5, Data: "x"}}}
	env := map[string][]plan.EnvVar{}
	for i := range n {
		ns := string(rune('a' + r.IntN(3)))
		s := plan.Service{Namespace: ns, Name: fmt.Sprintf("svc-%03d", i), Type: "ClusterIP",
			ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})},
			Ports:      []plan.Port{{Protocol: "TCP", Port: 80, Endpoints: []plan.Endpoint{{IP: netip.AddrFrom4([4]byte{10, 1, byte(i), 1}), Port: uint16(8000 + r.IntN(3)), Ready: true}}, Cluster: []int{0}}}}
		p.Services = append(p.Services, s)
		zone.Records = append(zone.Records, plan.Record{Name: s.Name + "." + ns + ".svc.cluster.local.", Type: "A", TTL: 5, Data: s.ClusterIPs[0].String()})
		env[ns] = append(env[ns], plan.EnvVar{Name: fmt.Sprintf("SVC_%03d_SERVICE_HOST", i), Value: s.ClusterIPs[0].String()})
	}
	slices.SortFunc(p.Services, func(a, b plan.Service) int {
		if a.Namespace != b.Namespace {
			return cmpString(a.Namespace, b.Namespace)
		}
		return cmpString(a.Name, b.Name)
	})
	p.DNS.Zones = []plan.Zone{zone}
	for _, ns := range []string{"a", "b", "c"} {
		if vars := env[ns]; len(vars) > 0 || r.IntN(2) == 0 {
			p.Env = append(p.Env, plan.EnvFile{Namespace: ns, Vars: vars})
		}
	}
	return p
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// edit returns a copy of p with a random edit: a Service added, removed,
// changed or moved, a record or variable added, removed or changed, a
// zone or env file added or removed, the node changed.
func edit(r *rand.Rand, p *plan.Plan) (*plan.Plan, string) {
	q := *p
	q.Services = slices.Clone(p.Services)
	q.DNS.Zones = slices.Clone(p.DNS.Zones)
	for i := range q.DNS.Zones {
		q.DNS.Zones[i].Records = slices.Clone(q.DNS.Zones[i].Records)
	}
	q.Env = slices.Clone(p.Env)
	for i := range q.Env {
		q.Env[i].Vars = slices.Clone(q.Env[i].Vars)
	}
	switch k := r.IntN(11); {
	case k == 0 && len(q.Services) > 0:
		i := r.IntN(len(q.Services))
		q.Services = slices.Delete(q.Services, i, i+1)
		return &q, "service removed"
	case k == 1:
		i := r.IntN(len(q.Services) + 1)
		q.Services = slices.Insert(q.Services, i, plan.Service{Namespace: "z", Name: fmt.Sprintf("new-%d", r.IntN(1e6)), Type: "NodePort"})
		return &q, "service added"
	case k == 2 && len(q.Services) > 0:
		i := r.IntN(len(q.Services))
		s := q.Services[i]
		s.Ports = slices.Clone(s.Ports)
		if len(s.Ports) > 0 {
			s.Ports[0].Port++
		}
		s.Type = "LoadBalancer"
		q.Services[i] = s
		return &q, "service changed"
	case k == 3 && len(q.Services) > 1:
		i, j := r.IntN(len(q.Services)), r.IntN(len(q.Services))
		q.Services[i], q.Services[j] = q.Services[j], q.Services[i]
		return &q, "services swapped"
	case k == 4 && len(q.DNS.Zones) > 0:
		z := &q.DNS.Zones[r.IntN(len(q.DNS.Zones))]
		if len(z.Records) > 0 && r.IntN(2) == 0 {
			i := r.IntN(len(z.Records))
			z.Records = slices.Delete(z.Records, i, i+1)
			return &q, "record removed"
		}
		i := r.IntN(len(z.Records) + 1)
		z.Records = slices.Insert(z.Records, i, plan.Record{Name: fmt.Sprintf("r%d.", r.IntN(1e6)), Type: "TXT", TTL: 5, Data: "\"x\""})
		return &q, "record added"
	case k == 5:
		i := r.IntN(len(q.DNS.Zones) + 1)
		q.DNS.Zones = slices.Insert(q.DNS.Zones, i, plan.Zone{Name: fmt.Sprintf("%d.in-addr.arpa.", r.IntN(1e6)),
			Records: []plan.Record{{Name: "x.", Type: "PTR", TTL: 5, Data: "y."}}})
		return &q, "zone added"
	case k == 6 && len(q.DNS.Zones) > 0:
		i := r.IntN(len(q.DNS.Zones))
		q.DNS.Zones = slices.Delete(q.DNS.Zones, i, i+1)
		return &q, "zone removed"
	case k == 7 && len(q.Env) > 0:
		f := &q.Env[r.IntN(len(q.Env))]
		switch {
		case len(f.Vars) > 0 && r.IntN(3) == 0:
			i := r.IntN(len(f.Vars))
			f.Vars = slices.Delete(f.Vars, i, i+1)
			return &q, "variable removed"
		case len(f.Vars) > 0 && r.IntN(2) == 0:
			f.Vars[r.IntN(len(f.Vars))].Value += "1"
			return &q, "variable changed"
		}
		f.Vars = slices.Insert(f.Vars, r.IntN(len(f.Vars)+1), plan.EnvVar{Name: fmt.Sprintf("V%d", r.IntN(1e6)), Value: "1"})
		return &q, "variable added"
	case k == 8:
		if len(q.Env) > 0 && r.IntN(2) == 0 {
			i := r.IntN(len(q.Env))
			q.Env = slices.Delete(q.Env, i, i+1)
			return &q, "env file removed"
		}
		q.Env = slices.Insert(q.Env, r.IntN(len(q.Env)+1), plan.EnvFile{Namespace: fmt.Sprintf("ns%d", r.IntN(1e6))})
		return &q, "env file added"
	case k == 9:
		q.Node.Zone = fmt.Sprint(r.IntN(3))
		q.Cluster.DNSTTL = uint32(r.IntN(3))
		return &q, "node and cluster"
	}
	return &q, "nothing"
}

// TestDeltaRandomEdits: over random edits (and runs of them), applying
// the Delta of two plans to the first gives the second, and a Delta
// applied to a plan it was not made from fails or still gives a plan
// (never panics).
func TestDeltaRandomEdits(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	p := randomPlan(r, 40)
	checkDelta(t, "from nothing", nil, p)
	checkDelta(t, "to nothing", p, &plan.Plan{})
	for i := range 2000 {
		q, what := edit(r, p)
		for range r.IntN(3) { // several edits in one reload, at times
			var more string
			q, more = edit(r, q)
			what += ", " + more
		}
		d := checkDelta(t, fmt.Sprintf("edit %d (%s)", i, what), p, q)
		if q.Equal(p) && !(d.Services.Empty() && allEmpty(d)) {
			t.Fatalf("edit %d (%s): plans equal but the delta is not empty: %+v", i, what, d)
		}
		p = q
	}
}

func allEmpty(d *plan.Delta) bool {
	for _, z := range d.Zones {
		if !z.Records.Empty() {
			return false
		}
	}
	for _, e := range d.Env {
		if !e.Vars.Empty() {
			return false
		}
	}
	return true
}

// TestDeltaSmall: a one-Service change of a compiled plan makes a Delta
// of that Service and its records alone.
func TestDeltaSmall(t *testing.T) {
	p := genplan.Plan(t, 200, "node-1")
	for name, q := range map[string]*plan.Plan{
		"extra service":  genplan.WithExtraService(t, p),
		"moved endpoint": genplan.WithMovedEndpoint(t, p),
	} {
		d := checkDelta(t, name, p, q)
		if n := len(d.Services.Added); n != 1 {
			t.Errorf("%s: %d services in the delta, want 1", name, n)
		}
		records := 0
		for _, z := range d.Zones {
			records += len(z.Records.Added) + len(z.Records.Removed)
		}
		if records > 10 {
			t.Errorf("%s: %d records in the delta", name, records)
		}
	}
}

func TestDeltaMisfit(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	p := randomPlan(r, 10)
	q := *p
	q.Services = p.Services[1:]
	d := plan.Diff(p, &q)
	if len(d.Services.Removed) != 1 {
		t.Fatalf("removing a service: delta %+v", d.Services)
	}
	if _, err := d.Apply(&plan.Plan{}); err == nil {
		t.Error("a delta removing a service applied to the empty plan without an error")
	}
	bad := plan.Delta{Services: plan.ListDelta[plan.Service]{Removed: []int{5, 2}}}
	if _, err := bad.Apply(p); err == nil {
		t.Error("removals out of order: no error")
	}
	bad = plan.Delta{Services: plan.ListDelta[plan.Service]{At: []int{len(p.Services) + 5}, Added: []plan.Service{{}}}}
	if _, err := bad.Apply(p); err == nil {
		t.Error("an addition past the end: no error")
	}
}
