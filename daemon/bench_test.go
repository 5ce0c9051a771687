package daemon

// Measurements of the watcher on big generated trees, run only when asked
// (NETSPEC_WATCH_BENCH=1, root): network programming latency (one file
// changed → the kernel holds the change) and heap growth over many
// reloads. scripts/bench-watch runs them and prints a table. Nothing here
// asserts a timing: the figures are logged as "watch-…" lines for the
// script to read.
//
// Every watcher programs a network namespace of its own (internal/testnet,
// removed also when the test fails); the host's nftables are never
// touched.

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"netspec.dev/netspec/internal/heapprof"

	"netspec.dev/netspec/applier/nft"
	"netspec.dev/netspec/applier/state"
	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/daemon/probe"
	"netspec.dev/netspec/internal/cache"
	"netspec.dev/netspec/internal/gen/gentree"
	"netspec.dev/netspec/internal/testnet"
	"netspec.dev/netspec/internal/treecheck"
	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/render"
	"netspec.dev/netspec/render/nftmodel"
	"netspec.dev/netspec/schema"
)

// benchEnv skips unless NETSPEC_WATCH_BENCH is set, and returns the
// number of services of the tree (NETSPEC_WATCH_SERVICES, default 10000).
func benchEnv(t *testing.T) int {
	t.Helper()
	if os.Getenv("NETSPEC_WATCH_BENCH") == "" {
		t.Skip("SKIPPED: set NETSPEC_WATCH_BENCH=1 to measure the watcher on a big tree (root; scripts/bench-watch)")
	}
	testnet.Require(t, "nft")
	return benchInt(t, "NETSPEC_WATCH_SERVICES", 10000)
}

func benchInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

// syncRec is one "synced" log record of the watcher.
type syncRec struct {
	at        time.Time // when it was logged: the node holds the plan
	reason    string
	took      time.Duration // the apply: render, kernel, state dir
	validated int64         // files validated (not from the cache)
	// programming is the watcher's network programming latency: from
	// its first file event to the kernel updated (before the state dir).
	programming time.Duration
	files       int64 // state dir files written or removed
}

// recorder is a slog.Handler that keeps what the measurements need from
// the watcher's log: the time of the first file event since the last
// mark, and every "synced" record. Errors are passed to the test's log.
type recorder struct {
	t      *testing.T
	mu     sync.Mutex
	event  time.Time // first "file event" since mark
	synced chan syncRec
}

func newRecorder(t *testing.T) *recorder {
	return &recorder{t: t, synced: make(chan syncRec, 1024)}
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }

func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	switch {
	case rec.Message == "file event":
		r.mu.Lock()
		if r.event.IsZero() {
			r.event = rec.Time
		}
		r.mu.Unlock()
	case rec.Message == "synced":
		s := syncRec{at: rec.Time}
		rec.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "reason":
				s.reason = a.Value.String()
			case "apply": // the kernel and state dir part of the sync
				s.took = a.Value.Duration()
			case "validated_files":
				s.validated = a.Value.Int64()
			case "programming_latency":
				s.programming = a.Value.Duration()
			case "changed_files":
				s.files = a.Value.Int64()
			}
			return true
		})
		select {
		case r.synced <- s:
		default:
		}
	case rec.Level >= slog.LevelWarn:
		var b strings.Builder
		rec.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
		r.t.Logf("watcher %s: %s%s", rec.Level, rec.Message, b.String())
	}
	return nil
}

// mark forgets the file events seen so far.
func (r *recorder) mark() {
	r.mu.Lock()
	r.event = time.Time{}
	r.mu.Unlock()
}

func (r *recorder) firstEvent() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.event
}

// waitChange waits for the next "synced" record of a file change.
func (r *recorder) waitChange(t *testing.T) syncRec {
	t.Helper()
	return r.waitSync(t, "change")
}

// waitSync waits for the next "synced" record of a sync for reason.
func (r *recorder) waitSync(t *testing.T, reason string) syncRec {
	t.Helper()
	timeout := time.After(deadline)
	for {
		select {
		case s := <-r.synced:
			if s.reason == reason {
				return s
			}
		case <-timeout:
			t.Fatalf("no sync %q within %s", reason, deadline)
		}
	}
}

// benchTree writes a gentree tree of n services (two pods each) into a
// temporary directory, and returns its path and the config.
func benchTree(t testing.TB, n int) (string, gentree.Config) {
	t.Helper()
	cfg := gentree.Config{Services: n, PodsPerService: 2, Seed: 1}
	dir := filepath.Join(t.TempDir(), "tree")
	start := time.Now()
	if err := gentree.Write(dir, cfg); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote a tree of %d services in %s", n, time.Since(start).Round(time.Millisecond))
	return dir, cfg
}

// editor changes one service file at a time, the way an editor saves: the
// new content is written to a temporary file outside the watched tree (on
// the same file system) and renamed over the file, so that the rename is
// the only event the watcher sees. Each change toggles the container port
// of the "http" port of the service's pods (8080 ↔ 8081): the endpoints
// of the service change, so the plan and the kernel's rules change.
type editor struct {
	tree    string
	tmp     string
	cfg     gentree.Config
	toggled map[int]bool
}

func newEditor(t testing.TB, tree string, cfg gentree.Config) *editor {
	return &editor{tree: tree, tmp: t.TempDir(), cfg: cfg, toggled: map[int]bool{}}
}

// service is the service the k-th change edits: spread over the tree.
func (e *editor) service(k int) int { return (k*7919)%e.cfg.Services + 1 }

// prepare writes the next content of service i and returns the rename
// that installs it; t0 is to be taken just before calling it.
func (e *editor) prepare(t testing.TB, i int) (rename func() error, want string) {
	return e.toggle(t, i, "containerPort: 8080", "containerPort: 8081")
}

// toggle is prepare with another edit: from ↔ to in service i's file.
func (e *editor) toggle(t testing.TB, i int, from, to string) (rename func() error, want string) {
	t.Helper()
	path := filepath.Join(e.tree, filepath.FromSlash(gentree.ServiceFile(e.cfg, i)))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if e.toggled[i] {
		from, to = to, from
	}
	if !strings.Contains(string(data), from) {
		t.Fatalf("%s has no %q", path, from)
	}
	e.toggled[i] = !e.toggled[i]
	tmp := filepath.Join(e.tmp, fmt.Sprintf("svc-%d.yaml", i))
	if err := os.WriteFile(tmp, []byte(strings.ReplaceAll(string(data), from, to)), 0o644); err != nil {
		t.Fatal(err)
	}
	return func() error { return os.Rename(tmp, path) }, strings.TrimSpace(to[strings.LastIndex(to, ":")+1:])
}

// benchWatcher runs a watcher of tree for node-1 in a namespace of its
// own until the test ends, and waits for its first sync.
func benchWatcher(t *testing.T, tree string, debounce time.Duration) (*Watcher, *recorder, *testnet.NS) {
	t.Helper()
	ns := testnet.New(t, "wbench").NS("node")
	rec := newRecorder(t)
	w, err := New(Options{
		Tree: tree, Node: "node-1", StateDir: filepath.Join(t.TempDir(), "state"),
		NetNSFd: ns.Fd(), Debounce: debounce, Resync: -1,
		Logger: slog.New(rec),
	})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	runSynced(t, w, 2*time.Minute)
	t.Logf("first sync (load, validate, compile, full apply) in %s", time.Since(start).Round(time.Millisecond))
	return w, rec, ns
}

// pct is the q-th percentile of sorted d (nearest rank).
func pct(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(float64(len(d))*q/100+0.999999) - 1
	return d[min(max(i, 0), len(d)-1)]
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64)
}

// summary is "p50_ms=… p99_ms=…" of d (sorted in place) with prefix.
func summary(prefix string, d []time.Duration) string {
	slices.Sort(d)
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	mean := time.Duration(0)
	if len(d) > 0 {
		mean = sum / time.Duration(len(d))
	}
	return fmt.Sprintf("%sp50_ms=%s %sp99_ms=%s %smax_ms=%s %smean_ms=%s",
		prefix, ms(pct(d, 50)), prefix, ms(pct(d, 99)), prefix, ms(d[len(d)-1]), prefix, ms(mean))
}

// histogram is the count and sum of a histogram of w's registry.
func histogram(t *testing.T, w *Watcher, name string) (count uint64, sum float64) {
	t.Helper()
	mfs, err := w.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				if h := m.GetHistogram(); h != nil {
					count += h.GetSampleCount()
					sum += h.GetSampleSum()
				}
			}
		}
	}
	return count, sum
}

// TestWatchLatency measures network programming latency: one service file
// of a big tree saved → the watcher has applied the change to the kernel
// (its "synced" log record, written once Update returned). t0 is taken
// just before the rename. It runs once per debounce of
// NETSPEC_WATCH_DEBOUNCES (default "200ms,20ms"), NETSPEC_WATCH_CHANGES
// changes each (default 50), and logs
//
//	watch-latency debounce=200ms services=10000 n=50 total_p50_ms=… total_p99_ms=… …
//
// with the parts of the time: notify (t0 → the watcher's first file
// event), debounce+load (→ the apply starts: the debounce timer, rescan,
// reading, validating and compiling the tree) and apply (render,
// kernel update, state dir). The first change of each run is checked
// against the kernel by polling `nft list map` in the namespace.
func TestWatchLatency(t *testing.T) {
	n := benchEnv(t)
	changes := benchInt(t, "NETSPEC_WATCH_CHANGES", 50)
	debounces := os.Getenv("NETSPEC_WATCH_DEBOUNCES")
	if debounces == "" {
		debounces = "200ms,20ms"
	}
	tree, cfg := benchTree(t, n)
	ed := newEditor(t, tree, cfg)
	k := 0 // changes made so far, over all runs
	for _, ds := range strings.Split(debounces, ",") {
		debounce, err := time.ParseDuration(strings.TrimSpace(ds))
		if err != nil || debounce <= 0 {
			t.Fatalf("NETSPEC_WATCH_DEBOUNCES: %q is not a positive duration", ds)
		}
		t.Run("debounce="+debounce.String(), func(t *testing.T) {
			w, rec, ns := benchWatcher(t, tree, debounce)
			crossCheck(t, rec, ns, ed, k)
			k++
			var total, kernel, notify, loadPart, apply []time.Duration
			var validated int64
			for range changes {
				time.Sleep(20 * time.Millisecond) // let the watcher settle after the last sync
				rename, _ := ed.prepare(t, ed.service(k))
				k++
				rec.mark()
				t0 := time.Now()
				if err := rename(); err != nil {
					t.Fatal(err)
				}
				s := rec.waitChange(t)
				ev := rec.firstEvent()
				if ev.IsZero() || ev.Before(t0) {
					ev = t0
				}
				total = append(total, s.at.Sub(t0))
				if s.programming <= 0 {
					t.Fatalf("the synced record of a change has no programming_latency")
				}
				kernel = append(kernel, ev.Sub(t0)+s.programming)
				notify = append(notify, ev.Sub(t0))
				loadPart = append(loadPart, s.at.Sub(ev)-s.took)
				apply = append(apply, s.took)
				validated = max(validated, s.validated)
			}
			count, sum := histogram(t, w, "netspec_network_programming_duration_seconds")
			hmean := 0.0
			if count > 0 {
				hmean = sum / float64(count) * 1000
			}
			t.Logf("watch-latency debounce=%s services=%d n=%d %s %s %s %s %s validated_files_max=%d hist_count=%d hist_mean_ms=%.1f",
				debounce, n, changes, summary("kernel_", kernel), summary("total_", total), summary("notify_", notify),
				summary("debounce_load_", loadPart), summary("apply_", apply), validated, count, hmean)
		})
	}
	if !t.Failed() {
		stages(t, tree, cfg, ed, k)
	}
}

// crossCheck makes one change and times it twice: by the watcher's
// "synced" record and by polling `nft list map` in the namespace until the
// service chain's endpoint map holds the new endpoint port at the chain's
// offset.
func crossCheck(t *testing.T, rec *recorder, ns *testnet.NS, ed *editor, k int) {
	t.Helper()
	i := ed.service(k)
	key := fmt.Sprintf("-%s/svc-%d/tcp/http", path.Dir(gentree.ServiceFile(ed.cfg, i)), i)
	out, err := ns.Run("nft", "list", "chains", "ip")
	if err != nil {
		t.Fatal(err)
	}
	var chain string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "chain" {
			if name := strings.Trim(f[1], `"`); strings.HasPrefix(name, "service-") && strings.HasSuffix(name, key) {
				chain = name
			}
		}
	}
	if chain == "" {
		t.Fatalf("no chain service-…%s in the namespace", key)
	}
	out, err = ns.Run("nft", "list", "chain", "ip", "netspec", chain)
	if err != nil {
		t.Fatal(err)
	}
	pick := regexp.MustCompile(`numgen random mod \d+(?: offset (\d+))? map @(\S+)`).FindStringSubmatch(out)
	if pick == nil {
		t.Fatalf("chain %s picks no endpoint through a map:\n%s", chain, out)
	}
	offset, endpoints := cmp.Or(pick[1], "0"), pick[2]
	rename, want := ed.prepare(t, i)
	// The first range of the pick: "OFFSET-END : ADDR . PORT".
	first := regexp.MustCompile(`(?:^|[\s{,])` + offset + `(?:-\d+)? : \S+ \. ` + want + `\b`)
	rec.mark()
	t0 := time.Now()
	if err := rename(); err != nil {
		t.Fatal(err)
	}
	var polled time.Duration
	for polls := 0; ; polls++ {
		out, err := ns.Run("nft", "list", "map", "ip", "netspec", endpoints)
		if err != nil {
			t.Fatal(err)
		}
		if first.MatchString(out) {
			polled = time.Since(t0)
			break
		}
		if time.Since(t0) > deadline {
			t.Fatalf("after %s, map %s still without port %s at offset %s (chain %s):\n%s", deadline, endpoints, want, offset, chain, out)
		}
		time.Sleep(2 * time.Millisecond)
	}
	s := rec.waitChange(t)
	t.Logf("watch-crosscheck chain=%s nft_poll_ms=%s watcher_ms=%s", chain, ms(polled), ms(s.at.Sub(t0)))
}

// stageNames name the stages of one reload that a reloader times, in
// order.
var stageNames = [...]string{"rescan", "schema_load", "treecheck", "compile", "compare", "render", "kernel", "finish", "state_dir"}

// reloader runs the parts of one reload outside the watcher, in the
// watcher's order, timing each (stageNames): the rescan of the tree's
// directories, reading and validating it (cache and stat memo), the lock
// and tree checks, compiling the Services, comparing them with the last
// plan's, rendering the ruleset's model, the kernel update (which encodes
// the model); then, after the kernel, finishing the plan (DNS records, env
// files) with rendering the state dir's zone and env files and the plan's
// delta, and writing them (state.Dir.ApplyRecord, as applier.Node does).
type reloader struct {
	tree   string
	kernel func(*nftmodel.Ruleset) error // the kernel update; nil: none
	// files writes the state dir; nil: none.
	files func(files map[string]state.File, delta []byte, full func(io.Writer) error) error
	mem   *cache.Memory
	stats schema.StatCache
	memo  *compiler.Memo
	last  *plan.Plan // the previous plan
	// render builds the ruleset's model, reusing the last one (render.Memo).
	render render.Memo
	// files renders the zone, env and resolv.conf files, reusing those of
	// unchanged inputs, as applier.Node does (render.FilesMemo).
	filesMemo render.FilesMemo
	fileIDs   map[string]uint64 // the last files' IDs
	// changed are the paths changed since the last once, as the watcher's
	// events name them: once then neither rescans nor walks the tree, as
	// the watcher does (schema.Options.Changed). nil: unknown.
	changed []string
}

func newReloader(tree string) *reloader {
	return &reloader{tree: tree, mem: cache.NewMemory(), memo: compiler.NewMemo()}
}

// once reloads the tree and returns each stage's time.
func (r *reloader) once(tb testing.TB) (times [len(stageNames)]time.Duration) {
	tb.Helper()
	at := time.Now()
	lap := func(i int) {
		now := time.Now()
		times[i], at = now.Sub(at), now
	}
	changed := r.changed
	r.changed = nil
	if changed == nil {
		scan(r.tree)
	}
	lap(0)
	tr, err := schema.Load(r.tree, schema.Options{Cache: r.mem, Stats: &r.stats, Changed: changed})
	if err != nil {
		tb.Fatal(err)
	}
	r.mem.Sweep()
	lap(1)
	c := treecheck.CheckWith(r.tree, tr, r.memo)
	if c.Diags.Errors() > 0 {
		tb.Fatalf("tree invalid: %v", c.Diags)
	}
	lap(2)
	st, err := r.memo.CompileStaged(tr.Objects, c.Checked, "node-1")
	if err != nil {
		tb.Fatal(err)
	}
	lap(3)
	if r.last != nil && plan.SameDataplane(r.last, st.Plan) {
		tb.Fatal("the change did not change the plan's Services")
	}
	lap(4)
	rs := r.render.NFTablesModel(st.Plan)
	lap(5)
	if r.kernel != nil {
		if err := r.kernel(rs); err != nil {
			tb.Fatal(err)
		}
	}
	lap(6)
	prev := r.last
	r.last = st.Finish()
	texts, err := r.filesMemo.ZoneEnvTexts(r.last)
	if err != nil {
		tb.Fatal(err)
	}
	files := make(map[string]state.File, len(texts))
	for path, t := range texts {
		files[path] = state.File(t)
		if r.files == nil && r.fileIDs[path] != t.ID {
			t.Bytes() // as the state dir asks for a changed file's bytes
		}
	}
	r.fileIDs = make(map[string]uint64, len(texts))
	for path, t := range texts {
		r.fileIDs[path] = t.ID
	}
	var delta []byte
	if prev != nil {
		if delta, err = render.PlanDeltaJSON(plan.Diff(prev, r.last)); err != nil {
			tb.Fatal(err)
		}
	}
	p := r.last
	lap(7)
	if r.files != nil {
		if err := r.files(files, delta, func(w io.Writer) error { return render.WritePlanJSON(w, p) }); err != nil {
			tb.Fatal(err)
		}
	}
	lap(8)
	return times
}

// stages times the stages of one reload (reloader) on the same tree as
// the watcher ran, with the kernel update in a namespace of its own and a
// state dir, and logs
//
//	watch-stages services=10000 n=… schema_load_p50_ms=… …
func stages(t *testing.T, tree string, cfg gentree.Config, ed *editor, k int) {
	t.Helper()
	ns := testnet.New(t, "wbench").NS("stages")
	a, err := nft.Open(ns.Fd())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	dir, err := state.Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	r := newReloader(tree)
	r.kernel = func(rs *nftmodel.Ruleset) error { _, err := a.Update(rs); return err }
	r.files = func(files map[string]state.File, delta []byte, full func(io.Writer) error) error {
		_, err := dir.ApplyRecord(files, delta, full)
		return err
	}
	real, err := filepath.EvalSymlinks(tree)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r.once(t) // cold: fills the cache and installs the ruleset whole
	// As in a watcher that has run a while, the stat memo trusts the files
	// (BenchmarkReloadHinted), and each reload is told the path changed.
	time.Sleep(2*time.Second + 100*time.Millisecond - time.Since(start))
	rename, _ := ed.prepare(t, ed.service(k))
	k++
	if err := rename(); err != nil {
		t.Fatal(err)
	}
	r.once(t)
	runs := benchInt(t, "NETSPEC_WATCH_STAGES", 10)
	var samples [len(stageNames)][]time.Duration
	for range runs {
		i := ed.service(k)
		rename, _ := ed.prepare(t, i)
		k++
		if err := rename(); err != nil {
			t.Fatal(err)
		}
		r.changed = []string{filepath.Join(real, filepath.FromSlash(gentree.ServiceFile(cfg, i)))}
		for i, d := range r.once(t) {
			samples[i] = append(samples[i], d)
		}
	}
	fields := []string{fmt.Sprintf("watch-stages services=%d n=%d", cfg.Services, runs)}
	for i, name := range stageNames {
		fields = append(fields, summary(name+"_", samples[i]))
	}
	t.Log(strings.Join(fields, " "))
}

// TestWatchMemory measures the heap of a watcher of a big tree after its
// first sync, after half of NETSPEC_WATCH_RELOADS (default 100) reloads
// and after all of them, each of one changed file (debounce 20ms), and
// logs
//
//	watch-memory services=10000 reloads=100 heap_before_mb=… heap_mid_mb=… heap_after_mb=… growth_pct=… rss_before_mb=… rss_after_mb=…
//
// The heap is runtime.MemStats.HeapInuse after two runtime.GC, of the
// whole test process (the watcher is most of it). With
// NETSPEC_WATCH_HEAPPROFILE=FILE it also writes heap profiles taken
// after the first sync to FILE and after the reloads to FILE.after (go
// tool pprof -top -inuse_space FILE; -base FILE FILE.after shows what
// the reloads left).
func TestWatchMemory(t *testing.T) {
	n := benchEnv(t)
	reloads := benchInt(t, "NETSPEC_WATCH_RELOADS", 100)
	tree, cfg := benchTree(t, n)
	ed := newEditor(t, tree, cfg)
	_, rec, _ := benchWatcher(t, tree, 20*time.Millisecond)
	heap := func() (inuse, alloc, rss float64) {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return float64(m.HeapInuse) / (1 << 20), float64(m.HeapAlloc) / (1 << 20), rssMB(t)
	}
	time.Sleep(100 * time.Millisecond)
	inuse0, alloc0, rss0 := heap()
	if out := os.Getenv("NETSPEC_WATCH_HEAPPROFILE"); out != "" {
		heapprof.Write(t, out)
	}
	var inuseMid float64
	start := time.Now()
	for k := range reloads {
		if k == reloads/2 {
			time.Sleep(100 * time.Millisecond)
			inuseMid, _, _ = heap()
		}
		rename, _ := ed.prepare(t, ed.service(k))
		rec.mark()
		if err := rename(); err != nil {
			t.Fatal(err)
		}
		rec.waitChange(t)
	}
	took := time.Since(start)
	time.Sleep(100 * time.Millisecond)
	inuse1, alloc1, rss1 := heap()
	if out := os.Getenv("NETSPEC_WATCH_HEAPPROFILE"); out != "" {
		heapprof.Write(t, out+".after")
	}
	t.Logf("watch-memory services=%d reloads=%d heap_before_mb=%.1f heap_mid_mb=%.1f heap_after_mb=%.1f growth_pct=%+.1f alloc_before_mb=%.1f alloc_after_mb=%.1f rss_before_mb=%.1f rss_after_mb=%.1f reloads_took_s=%.1f",
		n, reloads, inuse0, inuseMid, inuse1, 100*(inuse1-inuse0)/inuse0, alloc0, alloc1, rss0, rss1, took.Seconds())
}

// rssMB is the process's resident set (VmRSS), in MiB.
func rssMB(t *testing.T) float64 {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// TestWatchDisk measures what a watcher writes to disk per one-service
// reload of a big tree: write_bytes of /proc/self/io (bytes the process
// caused to be sent to storage, counted by page as it dirties them; the
// file system's journal is not counted) around each reload, with
// NETSPEC_WATCH_DISK_RELOADS (default 20) reloads of each kind of change:
//
//   - endpoints: the pods' container port (8080 ↔ 8081), which changes
//     the plan and the kernel but no DNS record or env variable;
//   - service-port: the Service's port (80 ↔ 81), which also changes its
//     SRV record (the cluster zone) and its env variables (its namespace's
//     env file).
//
// It logs, per kind,
//
//	watch-disk services=10000 kind=endpoints reloads=20 write_kb_p50=… write_kb_max=… write_kb_mean=… files_max=…
//
// The watcher runs with --dataplane none: what reaches the disk does not
// depend on the data plane, and no root is needed. The test process
// writes nothing else during a reload (the edit is written before).
func TestWatchDisk(t *testing.T) {
	if os.Getenv("NETSPEC_WATCH_BENCH") == "" {
		t.Skip("SKIPPED: set NETSPEC_WATCH_BENCH=1 to measure the watcher on a big tree (scripts/bench-watch)")
	}
	n := benchInt(t, "NETSPEC_WATCH_SERVICES", 10000)
	reloads := benchInt(t, "NETSPEC_WATCH_DISK_RELOADS", 20)
	tree, cfg := benchTree(t, n)
	ed := newEditor(t, tree, cfg)
	rec := newRecorder(t)
	stateDir := filepath.Join(t.TempDir(), "state")
	w, err := New(Options{Tree: tree, Node: "node-1", StateDir: stateDir, Dataplane: DataplaneNone,
		Debounce: 20 * time.Millisecond, Resync: -1, Logger: slog.New(rec)})
	if err != nil {
		t.Fatal(err)
	}
	before := writeBytes(t)
	runSynced(t, w, 2*time.Minute)
	t.Logf("watch-disk services=%d kind=first-sync write_kb=%.0f", n, float64(writeBytes(t)-before)/1024)
	kinds := []struct{ name, from, to string }{
		{"endpoints", "containerPort: 8080", "containerPort: 8081"},
		{"service-port", "    port: 80\n", "    port: 81\n"},
	}
	k := 0
	for _, kind := range kinds {
		var written []float64
		var files int64
		for range reloads {
			rename, _ := ed.toggle(t, ed.service(k), kind.from, kind.to)
			k++
			rec.mark()
			before := writeBytes(t)
			if err := rename(); err != nil {
				t.Fatal(err)
			}
			s := rec.waitChange(t)
			written = append(written, float64(writeBytes(t)-before)/1024)
			files = max(files, s.files)
		}
		slices.Sort(written)
		var sum float64
		for _, v := range written {
			sum += v
		}
		t.Logf("watch-disk services=%d kind=%s reloads=%d write_kb_p50=%.1f write_kb_max=%.1f write_kb_mean=%.1f files_max=%d",
			n, kind.name, reloads, written[(len(written)-1)/2], written[len(written)-1], sum/float64(len(written)), files)
	}
	entries, _ := os.ReadDir(stateDir)
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && !e.IsDir() {
			t.Logf("watch-disk state dir: %s %d bytes", e.Name(), fi.Size())
		}
	}
}

// writeBytes is write_bytes of /proc/self/io.
func writeBytes(t *testing.T) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "write_bytes: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("/proc/self/io has no write_bytes")
	return 0
}

// TestWatchProbeFlip measures one readiness probe flip at NETSPEC_WATCH_SERVICES
// services (every pod with a probe): the time from the prober's report
// to the kernel holding the change (the sync's programming_latency; the
// namespace's nftables), the whole sync, and the bytes the process wrote
// to disk (the state dir: plan.log, and the zone file when DNS changes).
// Each of NETSPEC_WATCH_FLIPS rounds fails one pod's check, then passes it
// again; both are measured, NETSPEC_WATCH_FLIP_GAP_MS (150) apart: a storm
// (a check flips at most once a probe period, and flips that come during
// a sync are folded into the next), but slower than a garbage collection
// takes, which the watcher starts between reloads (idleGC). The rounds
// start right after the first sync,
// or NETSPEC_WATCH_FLIP_SETTLE_MS milliseconds later (2500: past the 2 s
// in which the state dir does not yet trust its files' stat, so that the
// flips measure a settled node). The prober is a stand-in (the flips are the
// test's), so that nothing but the watcher's work is timed. It logs
//
//	watch-probe-flip services=10000 flips=40 kernel_p50_ms=… kernel_p99_ms=… sync_p50_ms=… write_kb_p50=… write_kb_max=…
func TestWatchProbeFlip(t *testing.T) {
	n := benchEnv(t)
	flips := benchInt(t, "NETSPEC_WATCH_FLIPS", 20)
	cfg := gentree.Config{Services: n, PodsPerService: 2, Seed: 1, ReadinessProbes: true}
	tree := filepath.Join(t.TempDir(), "tree")
	if err := gentree.Write(tree, cfg); err != nil {
		t.Fatal(err)
	}
	ns := testnet.New(t, "wflip").NS("node")
	rec := newRecorder(t)
	w, err := New(Options{
		Tree: tree, Node: "node-1", StateDir: filepath.Join(t.TempDir(), "state"),
		NetNSFd: ns.Fd(), Debounce: DefaultDebounce, Resync: -1, Probes: true,
		Logger: slog.New(rec),
	})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeProber{failing: map[netip.Addr]string{}, since: map[netip.Addr]time.Time{}}
	w.newProber = func(o probe.Options) prober {
		f.onChange = o.OnChange
		return f
	}
	start := time.Now()
	runSynced(t, w, 2*time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := w.waitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("first sync in %s; %d checks", time.Since(start).Round(time.Millisecond), len(f.targets))
	if len(f.targets) < n {
		t.Fatalf("%d checks for %d services of two pods with probes", len(f.targets), n)
	}
	if v := os.Getenv("NETSPEC_WATCH_FLIP_SETTLE_MS"); v != "" {
		time.Sleep(time.Duration(benchInt(t, "NETSPEC_WATCH_FLIP_SETTLE_MS", 1)) * time.Millisecond)
	}
	gap := time.Duration(benchInt(t, "NETSPEC_WATCH_FLIP_GAP_MS", 150)) * time.Millisecond
	var kernel, took []time.Duration
	var written []float64
	for i := range flips {
		addr := f.targets[(i*7919)%len(f.targets)].Addr.String()
		for _, fail := range []string{"connection refused", ""} {
			time.Sleep(gap) // let the watcher settle
			before := writeBytes(t)
			f.set(fail, addr)
			s := rec.waitSync(t, "probe")
			written = append(written, float64(writeBytes(t)-before)/1024)
			if s.programming <= 0 {
				t.Fatalf("the synced record of a probe flip has no programming_latency")
			}
			kernel = append(kernel, s.programming)
			took = append(took, s.took)
		}
	}
	slices.Sort(written)
	t.Logf("watch-probe-flip services=%d flips=%d %s %s write_kb_p50=%.1f write_kb_max=%.1f",
		n, len(kernel), summary("kernel_", kernel), summary("apply_", took), written[(len(written)-1)/2], written[len(written)-1])
}
