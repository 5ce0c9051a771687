package state

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// tree returns every regular file under dir: relative slash path → content.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			m[filepath.ToSlash(rel)] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// populate writes files (relative slash path → content) under dir.
func populate(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// stateFiles is m as the Files of PlanFiles and ApplyRecord, without IDs.
func stateFiles(m map[string]string) map[string]File {
	return bytesFiles(bytesMap(m))
}

// bytesFiles is files as Files without IDs.
func bytesFiles(files map[string][]byte) map[string]File {
	out := make(map[string]File, len(files))
	for p, b := range files {
		out[p] = File{Bytes: func() []byte { return b }}
	}
	return out
}

// apply makes the dir hold files as an applier does: their plan.json ("" when
// they have none) is the whole plan that ApplyRecord records, with no delta;
// the others are the zone, env and resolv.conf files.
func apply(d *Dir, files map[string]string) (Changes, error) {
	rest := maps.Clone(files)
	delete(rest, PlanFile)
	return d.ApplyRecord(stateFiles(rest), nil, fullOf(files[PlanFile]))
}

// planFiles is PlanFiles of files but their plan.json, as apply takes them.
func planFiles(d *Dir, files map[string]string) (Changes, error) {
	rest := maps.Clone(files)
	delete(rest, PlanFile)
	return d.PlanFiles(stateFiles(rest))
}

// filesOnly is ch but the record (plan.json), which PlanFiles does not
// compare.
func filesOnly(ch Changes) Changes {
	drop := func(s []string) []string {
		return slices.DeleteFunc(slices.Clone(s), func(p string) bool { return p == PlanFile })
	}
	return Changes{Added: drop(ch.Added), Changed: drop(ch.Changed), Removed: drop(ch.Removed)}
}

func bytesMap(m map[string]string) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range m {
		out[k] = []byte(v)
	}
	return out
}

func openTemp(t *testing.T) *Dir {
	t.Helper()
	d, err := Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

var cmpChanges = cmpopts.EquateEmpty()

func TestApply(t *testing.T) {
	z1 := string(zone("cluster.local", 100, "web\tA\t10.0.0.1"))
	z1b := string(zone("cluster.local", 50, "web\tA\t10.0.0.2")) // changed, lower rendered serial
	z1bWritten := string(zone("cluster.local", 101, "web\tA\t10.0.0.2"))
	z2 := string(zone("10.in-addr.arpa", 7, "1.0.0\tPTR\tweb.cluster.local."))
	foreign := map[string]string{
		"README":            "mine",
		"dns/notes.txt":     "not a zone",
		"dns/.hidden.zone":  "dot file: not netspec's",
		"env/keep.env.bak":  "backup",
		"other/x.zone":      "other dir",
		"dns/sub/deep.zone": "subdir",
		"plan.json.old":     "old",
		"resolv/shop.txt":   "not a resolv.conf of netspec's",
	}
	tests := []struct {
		name    string
		before  map[string]string // files in the dir before Apply
		files   map[string]string // rendered
		want    Changes
		after   map[string]string // netspec's files after Apply (foreign ones are checked separately)
		wantErr string
	}{
		{
			name:  "empty dir",
			files: map[string]string{"dns/cluster.local.zone": z1, "env/shop.env": "A=1\n", "plan.json": "{}\n"},
			want:  Changes{Added: []string{"dns/cluster.local.zone", "env/shop.env", "plan.json"}},
			after: map[string]string{"dns/cluster.local.zone": z1, "env/shop.env": "A=1\n", "plan.json": "{}\n"},
		},
		{
			name:   "nothing changed",
			before: map[string]string{"dns/cluster.local.zone": z1, "env/shop.env": "A=1\n", "plan.json": "{}\n"},
			files:  map[string]string{"dns/cluster.local.zone": z1, "env/shop.env": "A=1\n", "plan.json": "{}\n"},
			want:   Changes{},
			after:  map[string]string{"dns/cluster.local.zone": z1, "env/shop.env": "A=1\n", "plan.json": "{}\n"},
		},
		{
			name:   "unchanged zone keeps its serial although the rendered one differs",
			before: map[string]string{"dns/cluster.local.zone": z1, "plan.json": "{}"},
			files:  map[string]string{"dns/cluster.local.zone": string(zone("cluster.local", 3, "web\tA\t10.0.0.1")), "plan.json": "{}"},
			want:   Changes{},
			after:  map[string]string{"dns/cluster.local.zone": z1, "plan.json": "{}"},
		},
		{
			name:   "changed zone gets old serial + 1",
			before: map[string]string{"dns/cluster.local.zone": z1, "plan.json": "{1}"},
			files:  map[string]string{"dns/cluster.local.zone": z1b, "plan.json": "{2}"},
			want:   Changes{Changed: []string{"dns/cluster.local.zone", "plan.json"}},
			after:  map[string]string{"dns/cluster.local.zone": z1bWritten, "plan.json": "{2}"},
		},
		{
			name:   "stale zone and env removed, foreign files kept",
			before: map[string]string{"dns/cluster.local.zone": z1, "dns/10.in-addr.arpa.zone": z2, "env/shop.env": "A=1\n", "env/data.env": "B=2\n", "plan.json": "{}"},
			files:  map[string]string{"dns/cluster.local.zone": z1, "env/shop.env": "A=1\n", "plan.json": "{}"},
			want:   Changes{Removed: []string{"dns/10.in-addr.arpa.zone", "env/data.env"}},
			after:  map[string]string{"dns/cluster.local.zone": z1, "env/shop.env": "A=1\n", "plan.json": "{}"},
		},
		{
			name:   "resolv.conf files written, changed and removed as env files",
			before: map[string]string{"resolv/shop.conf": "search a\n", "resolv/data.conf": "search b\n", "plan.json": "{}"},
			files:  map[string]string{"resolv/shop.conf": "search c\n", "resolv/web.conf": "search d\n", "plan.json": "{}"},
			want:   Changes{Added: []string{"resolv/web.conf"}, Changed: []string{"resolv/shop.conf"}, Removed: []string{"resolv/data.conf"}},
			after:  map[string]string{"resolv/shop.conf": "search c\n", "resolv/web.conf": "search d\n", "plan.json": "{}"},
		},
		{
			name:   "plan without files removes every zone, env and resolv.conf file",
			before: map[string]string{"plan.json": "{}", "env/shop.env": "A=1\n", "dns/cluster.local.zone": z1, "resolv/shop.conf": "search a\n"},
			files:  map[string]string{"plan.json": "{}"},
			want:   Changes{Removed: []string{"dns/cluster.local.zone", "env/shop.env", "resolv/shop.conf"}},
			after:  map[string]string{"plan.json": "{}"},
		},
		{
			name:  "empty file",
			files: map[string]string{"env/empty.env": "", "plan.json": "{}"},
			want:  Changes{Added: []string{"env/empty.env", "plan.json"}},
			after: map[string]string{"env/empty.env": "", "plan.json": "{}"},
		},
		{name: "unknown path", files: map[string]string{"dns/x.txt": "x"}, wantErr: `"dns/x.txt" is not a file of the state dir`},
		{name: "the ruleset", files: map[string]string{"nftables.nft": "table inet netspec {}\n"}, wantErr: `"nftables.nft" is not a file of the state dir`},
		{name: "the record as a file", files: map[string]string{"plan.log": "x"}, wantErr: `"plan.log" is written by ApplyRecord, not given as a file`},
		{name: "escaping path", files: map[string]string{"dns/../x.zone": "x"}, wantErr: "is not a file of the state dir"},
		{name: "dot file", files: map[string]string{"env/.x.env": "x"}, wantErr: "is not a file of the state dir"},
		{name: "rendered zone without SOA", files: map[string]string{"dns/x.zone": "@ 5 IN NS ns.\n"}, wantErr: "dns/x.zone: rendered zone: no SOA record"},
		{
			name:    "zone in the dir without SOA",
			before:  map[string]string{"dns/x.zone": "web 5 IN A 10.0.0.1\n"},
			files:   map[string]string{"dns/x.zone": z1},
			wantErr: "dns/x.zone: zone file in the state dir: no SOA record",
		},
		{
			name:    "zone in the dir that is no zone",
			before:  map[string]string{"dns/x.zone": "hand edited\n"},
			files:   map[string]string{"dns/x.zone": z1},
			wantErr: `dns/x.zone: zone file in the state dir: dns: not a TTL: "edited" at line: 1:11 (fix or remove it`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := openTemp(t)
			populate(t, d.Path(), foreign)
			populate(t, d.Path(), tt.before)
			start := tree(t, d.Path())

			planned, perr := planFiles(d, tt.files)
			got, err := apply(d, tt.files)
			if tt.wantErr != "" {
				for _, e := range []error{perr, err} {
					if e == nil || !strings.Contains(e.Error(), tt.wantErr) || !strings.Contains(e.Error(), d.Path()) {
						t.Errorf("error = %v, want one containing %q and the dir's path", e, tt.wantErr)
					}
				}
				if diff := cmp.Diff(start, tree(t, d.Path())); diff != "" {
					t.Errorf("a failed Apply changed the dir (-before +after):\n%s", diff)
				}
				return
			}
			if perr != nil || err != nil {
				t.Fatalf("Plan: %v; Apply: %v", perr, err)
			}
			if diff := cmp.Diff(tt.want, got, cmpChanges); diff != "" {
				t.Errorf("Apply changes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(planned, filesOnly(got), cmpChanges); diff != "" {
				t.Errorf("PlanFiles and ApplyRecord differ (-PlanFiles +ApplyRecord):\n%s", diff)
			}
			final := tree(t, d.Path())
			mine := map[string]string{}
			for p, c := range final {
				if IsManaged(p) {
					mine[p] = c
				} else if foreign[p] != c {
					t.Errorf("foreign file %s changed or appeared: %q", p, c)
				}
			}
			for p, c := range foreign {
				if final[p] != c {
					t.Errorf("foreign file %s is gone or changed", p)
				}
			}
			if diff := cmp.Diff(tt.after, mine, cmpChanges); diff != "" {
				t.Errorf("dir after Apply (-want +got):\n%s", diff)
			}
			if again, err := planFiles(d, tt.files); err != nil || !again.Empty() {
				t.Errorf("PlanFiles after ApplyRecord = %+v, %v; want no change", again, err)
			}
			checkNoTemp(t, d.Path())
		})
	}
}

func checkNoTemp(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(e.Name(), tmpPrefix) {
			t.Errorf("temporary file left: %s", p)
		}
		return nil
	})
}

func TestApplyModesAndSweep(t *testing.T) {
	d := openTemp(t)
	// A temporary file an interrupted Apply left behind.
	populate(t, d.Path(), map[string]string{"dns/" + tmpPrefix + "x.zone-123": "half", tmpPrefix + "plan.json-9": "half"})
	if _, err := apply(d, map[string]string{"dns/a.zone": string(zone("a", 1)), "plan.json": "{}"}); err != nil {
		t.Fatal(err)
	}
	checkNoTemp(t, d.Path())
	for _, p := range []string{"dns/a.zone", "plan.json"} {
		fi, err := os.Stat(filepath.Join(d.Path(), p))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o644 {
			t.Errorf("%s mode %v, want 0644", p, fi.Mode().Perm())
		}
	}
	fi, err := os.Stat(filepath.Join(d.Path(), "dns"))
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("dns/: %v %v, want mode 0755", fi.Mode(), err)
	}
}

// TestApplyRealRender applies a real rendered tree (the golden files but
// nftables.nft, which the kernel holds) and then one with a zone and a
// namespace less.
func TestApplyRealRender(t *testing.T) {
	golden := tree(t, "../../golden/basic/node-1")
	delete(golden, "nftables.nft")
	d := openTemp(t)
	ch, err := apply(d, golden)
	if err != nil {
		t.Fatal(err)
	}
	want := Changes{Added: []string{"dns/10.in-addr.arpa.zone", "dns/cluster.local.zone", "env/data.env", "env/shop.env", "plan.json", "resolv/data.conf", "resolv/shop.conf"}}
	if diff := cmp.Diff(want, ch, cmpChanges); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	got := tree(t, d.Path())
	if diff := cmp.Diff(golden, got); diff != "" {
		t.Fatalf("the dir does not hold the rendered files as they are (-want +got):\n%s", diff)
	}
	if s, ok := d.Serial("cluster.local."); !ok || s != 3337470925 {
		t.Errorf("Serial(cluster.local.) = %d, %v", s, ok)
	}
	if s, ok := d.Serial("10.in-addr.arpa"); !ok || s != 694177931 {
		t.Errorf("Serial(10.in-addr.arpa) = %d, %v", s, ok)
	}
	if _, ok := d.Serial("nope"); ok {
		t.Error("Serial of a missing zone: ok")
	}
	if _, ok := d.Serial("../x"); ok {
		t.Error("Serial of a bad name: ok")
	}

	// Drop a zone and a namespace; change the other zone.
	next := maps.Clone(golden)
	delete(next, "dns/10.in-addr.arpa.zone")
	delete(next, "env/data.env")
	next["dns/cluster.local.zone"] = strings.Replace(golden["dns/cluster.local.zone"], "10.96.0.50", "10.96.0.51", 1)
	ch, err = apply(d, next)
	if err != nil {
		t.Fatal(err)
	}
	want = Changes{Changed: []string{"dns/cluster.local.zone"}, Removed: []string{"dns/10.in-addr.arpa.zone", "env/data.env"}}
	if diff := cmp.Diff(want, ch, cmpChanges); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	if s, _ := d.Serial("cluster.local"); s != 3337470926 {
		t.Errorf("serial after a change = %d, want 3337470926", s)
	}
}

func TestPlanMatchesApply(t *testing.T) {
	d := openTemp(t)
	populate(t, d.Path(), map[string]string{"notes": "x"})
	steps := []map[string]string{
		{"dns/a.zone": string(zone("a", 10, "x\tA\t1.1.1.1")), "env/n1.env": "A=1\n", "plan.json": "1"},
		{"dns/a.zone": string(zone("a", 20, "x\tA\t1.1.1.1")), "dns/b.zone": string(zone("b", 1)), "env/n1.env": "A=1\n", "plan.json": "2"},
		{"dns/a.zone": string(zone("a", 5, "x\tA\t1.1.1.2")), "env/n2.env": "B=1\n", "plan.json": "3"},
		{"dns/a.zone": string(zone("a", 5, "x\tA\t1.1.1.2")), "env/n2.env": "B=1\n", "plan.json": "3"},
		{},
		{"plan.json": "4"},
	}
	for i, files := range steps {
		planned, err := planFiles(d, files)
		if err != nil {
			t.Fatal(err)
		}
		before := tree(t, d.Path())
		if _, err := planFiles(d, files); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(before, tree(t, d.Path())); diff != "" {
			t.Fatalf("step %d: PlanFiles wrote to the dir:\n%s", i, diff)
		}
		applied, err := apply(d, files)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(planned, filesOnly(applied), cmpChanges); diff != "" {
			t.Errorf("step %d: (-PlanFiles +ApplyRecord):\n%s", i, diff)
		}
		// What Plan announced is what the dir went through.
		after := tree(t, d.Path())
		for _, p := range planned.Added {
			if _, ok := before[p]; ok {
				t.Errorf("step %d: %s added but was there", i, p)
			}
		}
		for _, p := range planned.Changed {
			if before[p] == after[p] {
				t.Errorf("step %d: %s changed but is the same", i, p)
			}
		}
		for _, p := range planned.Removed {
			if _, ok := after[p]; ok {
				t.Errorf("step %d: %s removed but is there", i, p)
			}
		}
		for p, c := range after {
			if IsManaged(p) && p != PlanFile && before[p] != c && !slices.Contains(planned.Added, p) && !slices.Contains(planned.Changed, p) {
				t.Errorf("step %d: %s changed unannounced", i, p)
			}
		}
		if after["notes"] != "x" {
			t.Errorf("step %d: foreign file lost", i)
		}
	}
}

func TestSerialStrictlyIncreases(t *testing.T) {
	tests := []struct {
		name  string
		first uint32 // rendered serial of the first zone, kept as is
		want  []uint32
	}{
		{name: "low", first: 1000, want: []uint32{1000, 1001, 1002, 1003, 1004}},
		{name: "near the wrap", first: 4294967293, want: []uint32{4294967293, 4294967294, 4294967295, 1, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := openTemp(t)
			// Rendered serials that go down (and up) while the content changes.
			rendered := []uint32{tt.first, 900, 5, 4000000000, 3}
			var prev uint32
			for i, rs := range rendered {
				z := zone("cluster.local", rs, "web\tA\t10.0.0."+string(rune('1'+i)))
				ch, err := apply(d, map[string]string{"dns/cluster.local.zone": string(z)})
				if err != nil {
					t.Fatal(err)
				}
				if ch = filesOnly(ch); i == 0 && len(ch.Added) != 1 || i > 0 && len(ch.Changed) != 1 {
					t.Fatalf("apply %d: changes %+v", i, ch)
				}
				s, ok := d.Serial("cluster.local")
				if !ok {
					t.Fatalf("apply %d: no serial", i)
				}
				if s != tt.want[i] {
					t.Errorf("apply %d: serial %d, want %d", i, s, tt.want[i])
				}
				if i > 0 && !serialGreater(s, prev) {
					t.Errorf("apply %d: serial %d not greater than %d (RFC 1982)", i, s, prev)
				}
				prev = s
				// The same zone again, with yet another rendered serial: no change.
				again := zone("cluster.local", rs+12345, "web\tA\t10.0.0."+string(rune('1'+i)))
				if ch, err := apply(d, map[string]string{"dns/cluster.local.zone": string(again)}); err != nil || !ch.Empty() {
					t.Fatalf("apply %d again: %+v, %v", i, ch, err)
				}
				if s2, _ := d.Serial("cluster.local"); s2 != s {
					t.Errorf("apply %d again: serial %d, want it kept at %d", i, s2, s)
				}
			}
		})
	}
}

func TestCleanup(t *testing.T) {
	tests := []struct {
		name       string
		before     map[string]string
		want       []string
		remains    map[string]string
		dirsRemain []string
	}{
		{
			name:   "only netspec's",
			before: map[string]string{"plan.json": "{}", "dns/a.zone": "x", "env/n.env": "y", tmpPrefix + "plan.json-1": "half"},
			want:   []string{"dns/a.zone", "env/n.env", "plan.json"},
		},
		{
			name:       "foreign files stay, with their dirs",
			before:     map[string]string{"plan.json": "{}", "dns/a.zone": "x", "dns/keep.txt": "k", "env/n.env": "y", "README": "r"},
			want:       []string{"dns/a.zone", "env/n.env", "plan.json"},
			remains:    map[string]string{"dns/keep.txt": "k", "README": "r"},
			dirsRemain: []string{"dns"},
		},
		{name: "empty dir", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := openTemp(t)
			populate(t, d.Path(), tt.before)
			got, err := d.Cleanup()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmpChanges); diff != "" {
				t.Errorf("removed (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.remains, tree(t, d.Path()), cmpChanges); diff != "" {
				t.Errorf("left (-want +got):\n%s", diff)
			}
			for _, sub := range []string{"dns", "env"} {
				_, err := os.Stat(filepath.Join(d.Path(), sub))
				if exists, want := err == nil, slices.Contains(tt.dirsRemain, sub); exists != want {
					t.Errorf("%s/ exists = %v, want %v", sub, exists, want)
				}
			}
			if _, err := os.Stat(d.Path()); err != nil {
				t.Errorf("the state dir itself: %v", err)
			}
			if p, _, err := d.LastPlan(); p != nil || err != nil {
				t.Errorf("LastPlan after Cleanup = %q, %v", p, err)
			}
		})
	}
}

func TestLastPlan(t *testing.T) {
	d := openTemp(t)
	if p, _, err := d.LastPlan(); p != nil || err != nil {
		t.Fatalf("LastPlan of an empty dir = %q, %v; want nil, nil", p, err)
	}
	if _, err := apply(d, map[string]string{"plan.json": `{"v":1}`}); err != nil {
		t.Fatal(err)
	}
	if p, _, err := d.LastPlan(); string(p) != `{"v":1}` || err != nil {
		t.Fatalf("LastPlan = %q, %v", p, err)
	}
}

func TestOpen(t *testing.T) {
	base := t.TempDir()
	t.Run("creates missing dirs 0755", func(t *testing.T) {
		p := filepath.Join(base, "a", "b")
		d, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(p)
		if err != nil || !fi.IsDir() || fi.Mode().Perm()&^0o755 != 0 {
			t.Fatalf("%v %v", fi.Mode(), err)
		}
		if d.Path() != p {
			t.Errorf("Path() = %q, want %q", d.Path(), p)
		}
	})
	t.Run("existing dir", func(t *testing.T) {
		if _, err := Open(base); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a file", func(t *testing.T) {
		p := filepath.Join(base, "file")
		populate(t, base, map[string]string{"file": "x"})
		_, err := Open(p)
		if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "not a directory") {
			t.Fatalf("Open(file) = %v", err)
		}
	})
	t.Run("under a file", func(t *testing.T) {
		if _, err := Open(filepath.Join(base, "file", "x")); err == nil {
			t.Fatal("no error")
		}
	})
	t.Run("empty", func(t *testing.T) {
		if _, err := Open(""); err == nil {
			t.Fatal("no error")
		}
	})
}

// asUnprivileged runs f without the power to write other users' files: as
// is when not root, else with the effective uid set to nobody for f's
// duration (setresuid applies to every thread of the process; the saved
// uid stays 0, so it is given back).
func asUnprivileged(t *testing.T, f func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		f()
		return
	}
	if err := syscall.Setresuid(-1, 65534, -1); err != nil {
		t.Skipf("SKIPPED: cannot drop root to test a permission error: setresuid: %v", err)
	}
	defer func() {
		if err := syscall.Setresuid(-1, 0, -1); err != nil {
			panic("cannot get root back: " + err.Error())
		}
	}()
	f()
}

func TestNotWritable(t *testing.T) {
	base := t.TempDir()
	// Let nobody reach base (t.TempDir makes it and its parent 0700).
	for _, p := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	stateDir := filepath.Join(base, "state")
	d, err := Open(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	populate(t, stateDir, map[string]string{"env/old.env": "x"})
	for _, p := range []string{filepath.Join(stateDir, "env"), stateDir} {
		if err := os.Chmod(p, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(p, 0o755) })
	}

	var applyErr, writeErr, cleanupErr, openErr, planErr error
	var ch Changes
	asUnprivileged(t, func() {
		ch, planErr = planFiles(d, map[string]string{"plan.json": "{}"})
		_, applyErr = apply(d, map[string]string{"plan.json": "{}"})
		_, writeErr = apply(d, map[string]string{"plan.json": "{}", "env/old.env": "x"})
		_, openErr = Open(filepath.Join(stateDir, "sub"))
		_, cleanupErr = d.Cleanup()
	})
	// A read-only dir can still be planned.
	if planErr != nil || len(ch.Added) != 0 || !slices.Equal(ch.Removed, []string{"env/old.env"}) {
		t.Errorf("PlanFiles on a read-only dir = %+v, %v", ch, planErr)
	}
	for _, c := range []struct {
		name string
		err  error
	}{{"ApplyRecord", applyErr}, {"ApplyRecord (write)", writeErr}, {"Open", openErr}, {"Cleanup", cleanupErr}} {
		if c.err == nil {
			t.Errorf("%s in a read-only dir: no error", c.name)
			continue
		}
		msg := c.err.Error()
		t.Logf("%s: %s", c.name, msg)
		if !strings.Contains(msg, stateDir) || !strings.Contains(msg, "permission denied") || !strings.Contains(msg, "check --state-dir") {
			t.Errorf("%s error %q does not name the dir, the cause and what to check", c.name, msg)
		}
	}
	if got := tree(t, stateDir); !cmp.Equal(got, map[string]string{"env/old.env": "x"}) {
		t.Errorf("dir after failed writes: %v", got)
	}
	checkNoTemp(t, stateDir)
}

// TestConcurrentApply: appliers that race on one dir (each with its own
// Dir, as two processes would) are serialized by the lock: the dir ends up
// holding exactly one of the plans, with no temporary file left.
func TestConcurrentApply(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	plans := make([]map[string]string, 8)
	for i := range plans {
		plans[i] = map[string]string{
			"plan.json":                            string(rune('0' + i)),
			"env/n" + string(rune('0'+i)) + ".env": "A=1\n",
			"dns/z.zone":                           string(zone("z", uint32(100-i), "x\tA\t10.0.0."+string(rune('0'+i)))),
		}
	}
	errs := make(chan error, len(plans)*5)
	done := make(chan struct{})
	for i := range plans {
		go func() {
			defer func() { done <- struct{}{} }()
			d, err := Open(path)
			if err != nil {
				errs <- err
				return
			}
			for range 5 {
				if _, err := apply(d, plans[i]); err != nil {
					errs <- err
				}
			}
		}()
	}
	for range plans {
		<-done
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got := tree(t, path)
	i := int(got["plan.json"][0] - '0')
	d, _ := Open(path)
	if ch, err := planFiles(d, plans[i]); err != nil || !ch.Empty() || recorded(t, d) != plans[i][PlanFile] {
		t.Errorf("the dir does not hold plan %d alone: %+v %v\n%v", i, ch, err, got)
	}
	if _, ok := d.Serial("z"); !ok {
		t.Error("no zone serial after concurrent applies")
	}
	checkNoTemp(t, path)
}

// TestOpenNoCreate: plan and cleanup open the state dir without creating
// it; a missing dir holds nothing, stays missing through Plan, LastPlan,
// Serial and Cleanup, and Apply creates it.
func TestOpenNoCreate(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a", "state")
	d, err := OpenNoCreate(p)
	if err != nil {
		t.Fatal(err)
	}
	missing := func(after string) {
		t.Helper()
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("after %s, the state dir: %v; want it still missing", after, err)
		}
		if _, err := os.Stat(filepath.Dir(p)); !os.IsNotExist(err) {
			t.Fatalf("after %s, its parent: %v; want it still missing", after, err)
		}
	}
	missing("OpenNoCreate")
	files := map[string]string{"plan.json": "{}", "env/shop.env": "A=1\n"}
	ch, err := planFiles(d, files)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Changes{Added: []string{"env/shop.env"}}, ch, cmpChanges); diff != "" {
		t.Errorf("PlanFiles of a missing dir (-want +got):\n%s", diff)
	}
	missing("PlanFiles")
	if b, _, err := d.LastPlan(); b != nil || err != nil {
		t.Errorf("LastPlan of a missing dir = %q, %v; want nil, nil", b, err)
	}
	if _, ok := d.Serial("cluster.local"); ok {
		t.Error("Serial of a missing dir found a zone")
	}
	removed, err := d.Cleanup()
	if err != nil || len(removed) != 0 {
		t.Errorf("Cleanup of a missing dir = %q, %v; want nothing", removed, err)
	}
	missing("Cleanup")

	if ch, err = apply(d, files); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Changes{Added: []string{"env/shop.env", "plan.json"}}, ch, cmpChanges); diff != "" {
		t.Errorf("ApplyRecord (-want +got):\n%s", diff)
	}
	if got := tree(t, p); len(got) != 2 {
		t.Errorf("after ApplyRecord the dir holds %v", got)
	}

	t.Run("a file", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "file")
		populate(t, filepath.Dir(f), map[string]string{"file": "x"})
		if _, err := OpenNoCreate(f); err == nil || !strings.Contains(err.Error(), "not a directory") {
			t.Fatalf("OpenNoCreate(file) = %v", err)
		}
	})
}
