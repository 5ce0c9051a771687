package render

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"netspec.dev/netspec/plan"
)

// TestFilesMemoRandomEdits follows a plan through random edits of its
// zones, env files and cluster, as a daemon's compiler hands them on
// (slices shared when unchanged, new ones otherwise, with equal or other
// content), and checks that the memo's files equal ZoneEnvFiles' at every
// step, that a file whose input is shared keeps its ID, and that one ID
// always has the same bytes.
func TestFilesMemoRandomEdits(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	record := func(i int) plan.Record {
		return plan.Record{Name: fmt.Sprintf("s%d.ns.svc.cluster.local.", i), TTL: 5, Type: "A", Data: fmt.Sprintf("10.96.0.%d", i%250+1)}
	}
	soa := plan.Record{Name: "cluster.local.", TTL: 5, Type: "SOA", Data: "ns.dns.cluster.local. hostmaster.cluster.local. 1 7200 1800 86400 5"}
	newRecords := func() []plan.Record {
		rs := []plan.Record{soa}
		for range r.IntN(6) {
			rs = append(rs, record(r.IntN(50)))
		}
		return rs
	}
	newVars := func() []plan.EnvVar {
		var vs []plan.EnvVar
		for range r.IntN(5) {
			vs = append(vs, plan.EnvVar{Name: fmt.Sprintf("S%d_SERVICE_HOST", r.IntN(20)), Value: fmt.Sprintf("10.96.0.%d", r.IntN(250))})
		}
		return vs
	}
	zoneNames := []string{"cluster.local.", "96.10.in-addr.arpa.", "example.", "a.example."}
	namespaces := []string{"default", "shop", "kube-system", "web"}
	p := &plan.Plan{Cluster: plan.Cluster{Domain: "cluster.local"}}
	p.DNS.Zones = []plan.Zone{{Name: zoneNames[0], Records: newRecords()}}
	p.Env = []plan.EnvFile{{Namespace: namespaces[0], Vars: newVars()}}

	var m FilesMemo
	var last *plan.Plan
	var lastTexts map[string]Text
	seen := map[uint64][]byte{} // every ID's bytes
	for step := range 2000 {
		texts, err := m.ZoneEnvTexts(p)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		got := textBytes(texts)
		for path, x := range texts {
			if x.ID == 0 {
				t.Fatalf("step %d: %s has ID 0", step, path)
			}
			if b, ok := seen[x.ID]; ok && !bytes.Equal(b, got[path]) {
				t.Fatalf("step %d: %s: ID %d was %q, now %q", step, path, x.ID, b, got[path])
			}
			seen[x.ID] = got[path]
		}
		want, err := ZoneEnvFiles(p)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.EqualFunc(got, want, bytes.Equal) {
			t.Fatalf("step %d: memo's files differ from ZoneEnvFiles'\nmemo:  %q\nfresh: %q", step, got, want)
		}
		if last != nil {
			for _, z := range p.DNS.Zones {
				i := slices.IndexFunc(last.DNS.Zones, func(o plan.Zone) bool { return o.Name == z.Name })
				path := "dns/" + z.Name[:len(z.Name)-1] + ".zone"
				if i >= 0 && plan.Shared(last.DNS.Zones[i].Records, z.Records) && texts[path].ID != lastTexts[path].ID {
					t.Fatalf("step %d: %s: same records, a new ID", step, path)
				}
			}
			for _, f := range p.Env {
				i := slices.IndexFunc(last.Env, func(o plan.EnvFile) bool { return o.Namespace == f.Namespace })
				path := "env/" + f.Namespace + ".env"
				if i >= 0 && plan.Shared(last.Env[i].Vars, f.Vars) && texts[path].ID != lastTexts[path].ID {
					t.Fatalf("step %d: %s: same variables, a new ID", step, path)
				}
			}
		}
		last, lastTexts = p, texts

		// The next plan: a copy sharing every slice, then edits.
		q := &plan.Plan{Cluster: p.Cluster}
		q.DNS.Zones = slices.Clone(p.DNS.Zones)
		q.Env = slices.Clone(p.Env)
		for range r.IntN(3) {
			switch r.IntN(10) {
			case 0: // a zone's records changed
				if len(q.DNS.Zones) > 0 {
					q.DNS.Zones[r.IntN(len(q.DNS.Zones))].Records = newRecords()
				}
			case 1: // equal records in a new slice
				if len(q.DNS.Zones) > 0 {
					z := &q.DNS.Zones[r.IntN(len(q.DNS.Zones))]
					z.Records = slices.Clone(z.Records)
				}
			case 2: // a prefix of the same array
				if len(q.DNS.Zones) > 0 {
					z := &q.DNS.Zones[r.IntN(len(q.DNS.Zones))]
					z.Records = z.Records[:r.IntN(len(z.Records)+1)]
				}
			case 3: // a zone added or removed
				name := zoneNames[r.IntN(len(zoneNames))]
				i := slices.IndexFunc(q.DNS.Zones, func(z plan.Zone) bool { return z.Name == name })
				if i >= 0 {
					q.DNS.Zones = slices.Delete(q.DNS.Zones, i, i+1)
				} else {
					q.DNS.Zones = append(q.DNS.Zones, plan.Zone{Name: name, Records: newRecords()})
				}
			case 4: // another zone with the records of one
				if len(q.DNS.Zones) > 0 {
					i := r.IntN(len(q.DNS.Zones))
					name := zoneNames[r.IntN(len(zoneNames))]
					if !slices.ContainsFunc(q.DNS.Zones, func(z plan.Zone) bool { return z.Name == name }) {
						q.DNS.Zones[i].Name = name
					}
				}
			case 5: // an env file's variables changed
				if len(q.Env) > 0 {
					q.Env[r.IntN(len(q.Env))].Vars = newVars()
				}
			case 6: // equal variables in a new slice, or a prefix
				if len(q.Env) > 0 {
					f := &q.Env[r.IntN(len(q.Env))]
					if r.IntN(2) == 0 {
						f.Vars = slices.Clone(f.Vars)
					} else {
						f.Vars = f.Vars[:r.IntN(len(f.Vars)+1)]
					}
				}
			case 7: // a namespace added or removed
				ns := namespaces[r.IntN(len(namespaces))]
				i := slices.IndexFunc(q.Env, func(f plan.EnvFile) bool { return f.Namespace == ns })
				if i >= 0 {
					q.Env = slices.Delete(q.Env, i, i+1)
				} else {
					q.Env = append(q.Env, plan.EnvFile{Namespace: ns, Vars: newVars()})
				}
			case 8: // another namespace with the variables of one
				if len(q.Env) > 0 {
					ns := namespaces[r.IntN(len(namespaces))]
					if !slices.ContainsFunc(q.Env, func(f plan.EnvFile) bool { return f.Namespace == ns }) {
						q.Env[r.IntN(len(q.Env))].Namespace = ns
					}
				}
			case 9: // the cluster's domain or DNS address
				if r.IntN(2) == 0 {
					q.Cluster.Domain = []string{"cluster.local", "example.org"}[r.IntN(2)]
				} else {
					q.Cluster.DNSAddress = []netip.Addr{{}, netip.MustParseAddr("169.254.20.10")}[r.IntN(2)]
				}
			}
		}
		p = q
	}
}

// textBytes is each Text's bytes.
func textBytes(texts map[string]Text) map[string][]byte {
	out := make(map[string][]byte, len(texts))
	for p, x := range texts {
		out[p] = x.Bytes()
	}
	return out
}

// TestFilesMemoError checks that an error leaves the memo rendering
// afresh, and that a nil memo is ZoneEnvFiles, with IDs 0.
func TestFilesMemoError(t *testing.T) {
	good := &plan.Plan{Env: []plan.EnvFile{{Namespace: "shop"}}}
	bad := &plan.Plan{Env: []plan.EnvFile{{Namespace: "shop"}, {Namespace: "shop"}}}
	var m FilesMemo
	if _, err := m.ZoneEnvTexts(good); err != nil {
		t.Fatal(err)
	}
	if _, err := m.ZoneEnvTexts(bad); err == nil {
		t.Fatal("two env files of one namespace: no error")
	}
	if m.files != nil {
		t.Errorf("memo kept files after an error: %+v", m)
	}
	var nilMemo *FilesMemo
	texts, err := nilMemo.ZoneEnvTexts(good)
	got := textBytes(texts)
	want, _ := ZoneEnvFiles(good)
	if err != nil || !maps.EqualFunc(got, want, bytes.Equal) {
		t.Errorf("nil memo: %q, %v; want %q", got, err, want)
	}
	for path, x := range texts {
		if x.ID != 0 {
			t.Errorf("nil memo: %s has ID %d, want 0", path, x.ID)
		}
	}
}
