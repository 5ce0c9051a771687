package watch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"netspec.dev/netspec/applier/nft"
	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/internal/cache"
	"netspec.dev/netspec/internal/gen/gentree"
	"netspec.dev/netspec/internal/treecheck"
	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/render"
	"netspec.dev/netspec/schema"
)

// BenchmarkReload times, stage by stage and without root, what the
// watcher does for a one-file change of a 10,000-service tree: load (stat
// memo and cache), the cross-object checks, compiling the Services,
// comparing with the last plan, rendering and parsing the ruleset — all
// before the kernel — then finishing the plan (DNS records, env files)
// and rendering the state dir's files, which follow the kernel. Each
// stage is reported as <stage>-ms per reload.
func BenchmarkReload(b *testing.B) {
	n := 10000
	cfg := gentree.Config{Services: n, PodsPerService: 2, Seed: 1}
	dir := filepath.Join(b.TempDir(), "tree")
	if err := gentree.Write(dir, cfg); err != nil {
		b.Fatal(err)
	}
	l := &loader{root: dir, node: "node-1", cache: cache.NewMemory()}
	res, err := l.load()
	if err != nil {
		b.Fatal(err)
	}
	good := res.plan.Finish()
	toggled := map[int]bool{}
	var parser nft.Parser
	names := []string{"load", "check", "compile", "compare", "render", "parse", "finish", "statefiles"}
	var st [8]time.Duration
	defer func() {
		for i, n := range names {
			b.ReportMetric(float64(st[i].Microseconds())/1000/float64(b.N), n+"-ms")
		}
	}()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		k := (i*7919)%n + 1
		path := filepath.Join(dir, gentree.ServiceFile(cfg, k))
		data, _ := os.ReadFile(path)
		from, to := "containerPort: 8080", "containerPort: 8081"
		if toggled[k] {
			from, to = to, from
		}
		toggled[k] = !toggled[k]
		os.WriteFile(path+".tmp", []byte(strings.ReplaceAll(string(data), from, to)), 0o644)
		os.Rename(path+".tmp", path)
		b.StartTimer()
		var ts [9]time.Time
		ts[0] = time.Now()
		tr, err := schema.Load(dir, schema.Options{Cache: l.cache, Stats: &l.stats})
		if err != nil {
			b.Fatal(err)
		}
		l.cache.Sweep()
		ts[1] = time.Now()
		c := treecheck.Check(dir, tr)
		ts[2] = time.Now()
		s, err := compiler.CompileStaged(tr.Objects, c.Checked, "node-1")
		if err != nil {
			b.Fatal(err)
		}
		ts[3] = time.Now()
		if plan.SameDataplane(good, s.Plan) {
			b.Fatal("plan did not change")
		}
		ts[4] = time.Now()
		files, err := render.KernelFiles(s.Plan, render.DataplaneNFTables, "")
		if err != nil {
			b.Fatal(err)
		}
		ts[5] = time.Now()
		if _, err := parser.Parse(files["nftables.nft"]); err != nil {
			b.Fatal(err)
		}
		ts[6] = time.Now()
		var p *plan.Plan = s.Finish()
		ts[7] = time.Now()
		if _, err := render.StateFiles(p); err != nil {
			b.Fatal(err)
		}
		ts[8] = time.Now()
		good = p
		for j := range st {
			st[j] += ts[j+1].Sub(ts[j])
		}
	}
}
