package daemon

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"netspec.dev/netspec/internal/testnet"
)

// deadline is how long a change may take to show: generous, for loaded
// CI machines; the watcher takes a few hundred milliseconds.
const deadline = 20 * time.Second

// copyTree copies the directory src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(out, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// basicTree is a temporary copy of examples/basic.
func basicTree(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tree")
	copyTree(t, "../examples/basic", dir)
	return dir
}

// tlog writes the watcher's log to the test's log.
type tlog struct{ t *testing.T }

func (w tlog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// running is a Watcher run by a test.
type running struct {
	*Watcher
	stateDir string
	ns       *testnet.NS // nil with DataplaneNone
}

// start runs a watcher of tree for node-1 until the test ends, and waits
// for its first sync. With DataplaneNFTables it programs a namespace of
// its own (the host's nftables are never touched).
func start(t *testing.T, tree string, opts Options) *running {
	t.Helper()
	r := &running{stateDir: filepath.Join(t.TempDir(), "state")}
	if opts.Dataplane != DataplaneNone {
		testnet.Require(t, "nft")
		r.ns = testnet.New(t, "watch").NS("node")
		opts.NetNSFd = r.ns.Fd()
	}
	opts.Tree, opts.Node, opts.StateDir = tree, "node-1", r.stateDir
	if opts.Debounce == 0 {
		opts.Debounce = 50 * time.Millisecond
	}
	var out io.Writer = tlog{t}
	opts.Logger = slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	w, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	r.Watcher = w
	runSynced(t, w, deadline)
	return r
}

// runSynced runs w until the test ends (it must then return, without
// error) and waits up to wait for its first sync.
func runSynced(t *testing.T, w *Watcher, wait time.Duration) {
	t.Helper()
	done := runUntilCleanup(t, w)
	select {
	case <-w.Synced():
	case err := <-done:
		t.Fatalf("Run returned before the first sync: %v", err)
	case <-time.After(wait):
		t.Fatalf("no first sync within %s", wait)
	}
}

// runUntilCleanup runs w until the test ends, when it must return without
// error, and returns the channel of Run's result.
func runUntilCleanup(t *testing.T, w *Watcher) <-chan error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	// Registered after testnet.New: runs before the namespace goes.
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(deadline):
			t.Errorf("Run did not return after its context was cancelled")
		}
	})
	return done
}

// waitFor polls cond until it holds, failing the test at the deadline
// with what cond last said.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	end := time.Now().Add(deadline)
	for {
		ok, got := cond()
		if ok {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("after %s, still not %s; last seen:\n%s", deadline, what, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// idle waits until the watcher is between syncs: the reload that put
// what a test saw into the kernel has finished writing the state dir too
// (the kernel comes first). Waiting for the kernel alone is not enough to
// read the state dir.
func (r *running) idle(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := r.waitIdle(ctx); err != nil {
		t.Fatalf("the watcher did not finish its sync within %s", deadline)
	}
}

// nft lists the namespace's table ip netspec.
func (r *running) nft(t *testing.T) string {
	t.Helper()
	out, err := r.ns.Run("nft", "list", "table", "ip", "netspec")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// nftHas waits until the table holds s.
func (r *running) nftHas(t *testing.T, s string) {
	t.Helper()
	waitFor(t, "in the kernel: "+s, func() (bool, string) {
		out := r.nft(t)
		return strings.Contains(out, s), out
	})
}

// file reads a file of the state dir ("" when missing).
func (r *running) file(t *testing.T, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(r.stateDir, rel))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(data)
}

// fileHas waits until the state dir's file rel holds s.
func (r *running) fileHas(t *testing.T, rel, s string) {
	t.Helper()
	waitFor(t, "in "+rel+": "+s, func() (bool, string) {
		out := r.file(t, rel)
		return strings.Contains(out, s), out
	})
}

// stateFiles reads every file of the state dir.
func (r *running) stateFiles(t *testing.T) map[string]string {
	t.Helper()
	files := map[string]string{}
	filepath.WalkDir(r.stateDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			data, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(r.stateDir, p)
			files[rel] = string(data)
		}
		return nil
	})
	return files
}

// metric is the value of a gauge or counter without labels.
func (r *running) metric(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := r.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}

// metricIs waits until a metric has the value want.
func (r *running) metricIs(t *testing.T, name string, want float64) {
	t.Helper()
	waitFor(t, name+" = "+strconv.FormatFloat(want, 'g', -1, 64), func() (bool, string) {
		got := r.metric(t, name)
		return got == want, strconv.FormatFloat(got, 'g', -1, 64)
	})
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// atomicWrite saves as editors do: a temp file in the same directory,
// renamed over the file.
func atomicWrite(t *testing.T, path, data string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".swp~")
	writeFile(t, tmp, data)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// webService is examples/basic's web Service on another port.
func webService(port string) string {
	return `apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: shop
spec:
  selector:
    app: web
  ports:
  - name: http
    port: ` + port + `
    targetPort: http
  externalIPs: ["203.0.113.10"]
`
}

const apiService = `apiVersion: v1
kind: Service
metadata:
  name: api
  namespace: shop
spec:
  selector:
    app: web
  ports:
  - name: http
    port: 8081
    targetPort: http
`

// batchPod is a Pod in a namespace of its own, selected by no Service.
const batchPod = `apiVersion: v1
kind: Pod
metadata:
  name: job-0
  namespace: batch
spec:
  nodeName: node-1
  containers:
  - name: job
    image: registry.example.com/job:1.0
status:
  podIP: 10.244.7.7
`

// lookup asks the watcher's DNS server for name's A records: the
// addresses, or the response code when not NOERROR.
func lookup(t *testing.T, addr, name string) string {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), dns.TypeA)
	c := &dns.Client{Timeout: 2 * time.Second}
	in, _, err := c.Exchange(m, addr)
	if err != nil {
		return "error: " + err.Error()
	}
	if in.Rcode != dns.RcodeSuccess {
		return dns.RcodeToString[in.Rcode]
	}
	var ips []string
	for _, rr := range in.Answer {
		if a, ok := rr.(*dns.A); ok {
			ips = append(ips, a.A.String())
		}
	}
	return strings.Join(ips, ",")
}

// TestReload follows a tree through edits, an atomic save, a new
// directory, an invalid edit and its fix, checking the kernel, the state
// dir, DNS and the metrics after each.
func TestReload(t *testing.T) {
	tree := basicTree(t)
	dnsAddr := testnet.FreeLoopbackAddr(t)
	r := start(t, tree, Options{DNSListen: dnsAddr, MetricsListen: "127.0.0.1:0"})

	r.nftHas(t, "10.101.9.155 . tcp . 80 : goto service-")
	r.fileHas(t, "env/shop.env", "WEB_PORT_80_TCP=tcp://10.101.9.155:80")
	r.metricIs(t, "netspec_tree_valid", 1)
	select {
	case <-r.DNSReady():
	case <-time.After(deadline):
		t.Fatal("DNS server not ready")
	}
	waitFor(t, "web resolving", func() (bool, string) {
		got := lookup(t, dnsAddr, "web.shop.svc.cluster.local")
		return got == "10.101.9.155", got
	})
	if got := lookup(t, dnsAddr, "api.shop.svc.cluster.local"); got != "NXDOMAIN" {
		t.Errorf("api.shop before it exists: %s, want NXDOMAIN", got)
	}
	if got := lookup(t, dnsAddr, "10-244-1-40.data.pod.cluster.local"); got != "10.244.1.40" {
		t.Errorf("a pod name: %s, want 10.244.1.40", got)
	}
	if got := lookup(t, dnsAddr, "10-244-7-7.batch.pod.cluster.local"); got != "NXDOMAIN" {
		t.Errorf("a pod name in a namespace not in the tree: %s, want NXDOMAIN", got)
	}
	base := "http://" + r.MetricsAddr().String()
	for _, path := range []string{"/readyz", "/healthz"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s after the first sync: %s", path, resp.Status)
		}
	}

	t.Run("edit", func(t *testing.T) {
		writeFile(t, filepath.Join(tree, "web/service.yaml"), webService("8088"))
		r.nftHas(t, "10.101.9.155 . tcp . 8088 : goto service-")
		r.fileHas(t, "env/shop.env", "WEB_PORT_8088_TCP=tcp://10.101.9.155:8088")
	})
	t.Run("atomic save", func(t *testing.T) {
		atomicWrite(t, filepath.Join(tree, "web/service.yaml"), webService("8089"))
		r.nftHas(t, "10.101.9.155 . tcp . 8089 : goto service-")
		r.fileHas(t, "env/shop.env", "WEB_PORT_8089_TCP=tcp://10.101.9.155:8089")
	})
	t.Run("new directory", func(t *testing.T) {
		dir := filepath.Join(tree, "api")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "service.yaml"), apiService)
		r.nftHas(t, ". tcp . 8081 : goto service-")
		r.fileHas(t, "env/shop.env", "API_PORT_8081_TCP=")
		waitFor(t, "api.shop resolving", func() (bool, string) {
			got := lookup(t, dnsAddr, "api.shop.svc.cluster.local")
			return net.ParseIP(got) != nil, got
		})
	})
	t.Run("new namespace", func(t *testing.T) {
		// A namespace of Pods only changes no record of the plan, and
		// still makes its pod names exist.
		writeFile(t, filepath.Join(tree, "batch.yaml"), batchPod)
		waitFor(t, "a pod name in namespace batch resolving", func() (bool, string) {
			got := lookup(t, dnsAddr, "10-244-7-7.batch.pod.cluster.local")
			return got == "10.244.7.7", got
		})
	})
	t.Run("edit in new directory", func(t *testing.T) {
		writeFile(t, filepath.Join(tree, "api/service.yaml"), strings.Replace(apiService, "8081", "8082", 1))
		r.nftHas(t, ". tcp . 8082 : goto service-")
	})
	t.Run("invalid edit", func(t *testing.T) {
		// The kernel shows the last edit; its reload may still be
		// writing the state dir.
		r.idle(t)
		kernel, files := r.nft(t), r.stateFiles(t)
		apiIP := lookup(t, dnsAddr, "api.shop.svc.cluster.local")
		// A port out of range, and the cart Service removed: were the
		// tree applied, both would show.
		// Saved atomically: a file truncated for an in-place write is a
		// valid (empty) one for a moment.
		atomicWrite(t, filepath.Join(tree, "web/service.yaml"), webService("70000"))
		if err := os.Remove(filepath.Join(tree, "cart/service.yaml")); err != nil {
			t.Fatal(err)
		}
		r.metricIs(t, "netspec_tree_valid", 0)
		if n := r.metric(t, "netspec_tree_errors"); n < 1 {
			t.Errorf("netspec_tree_errors = %v, want ≥ 1", n)
		}
		time.Sleep(300 * time.Millisecond) // a late event would reload again
		if got := r.nft(t); got != kernel {
			t.Errorf("an invalid tree changed the kernel:\nbefore:\n%s\nafter:\n%s", kernel, got)
		}
		after := r.stateFiles(t)
		for name, data := range files {
			if after[name] != data {
				t.Errorf("an invalid tree changed the state dir's %s", name)
			}
		}
		if len(after) != len(files) {
			t.Errorf("an invalid tree changed the state dir: %d files, was %d", len(after), len(files))
		}
		if got := lookup(t, dnsAddr, "api.shop.svc.cluster.local"); got != apiIP {
			t.Errorf("an invalid tree changed DNS: api.shop is %s, was %s", got, apiIP)
		}
		if got := lookup(t, dnsAddr, "cart.shop.svc.cluster.local"); got != "10.103.99.93" {
			t.Errorf("an invalid tree changed DNS: cart.shop is %s, want 10.103.99.93", got)
		}
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), "\nnetspec_tree_valid 0\n") {
			t.Errorf("/metrics lacks netspec_tree_valid 0:\n%s", body)
		}
	})
	t.Run("fixed", func(t *testing.T) {
		writeFile(t, filepath.Join(tree, "web/service.yaml"), webService("8090"))
		r.metricIs(t, "netspec_tree_valid", 1)
		r.nftHas(t, "10.101.9.155 . tcp . 8090 : goto service-")
		waitFor(t, "cart.shop gone from DNS", func() (bool, string) {
			got := lookup(t, dnsAddr, "cart.shop.svc.cluster.local")
			return got == "NXDOMAIN", got
		})
		if got := r.nft(t); strings.Contains(got, "10.103.99.93") {
			t.Errorf("the removed cart Service is still in the kernel:\n%s", got)
		}
	})
	if n := r.metric(t, "netspec_sync_failures_total"); n != 0 {
		t.Errorf("netspec_sync_failures_total = %v, want 0", n)
	}
}

// TestSymlinkSwap follows a tree that is a symlink swapped atomically to
// another checkout, as git-sync does.
func TestSymlinkSwap(t *testing.T) {
	dir := t.TempDir()
	copyTree(t, "../examples/basic", filepath.Join(dir, "v1"))
	copyTree(t, "../examples/basic", filepath.Join(dir, "v2"))
	writeFile(t, filepath.Join(dir, "v2/web/service.yaml"), webService("8091"))
	current := filepath.Join(dir, "current")
	if err := os.Symlink("v1", current); err != nil {
		t.Fatal(err)
	}
	r := start(t, current, Options{})
	r.nftHas(t, "10.101.9.155 . tcp . 80 : goto service-")

	if err := os.Symlink("v2", current+".tmp"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(current+".tmp", current); err != nil {
		t.Fatal(err)
	}
	r.nftHas(t, "10.101.9.155 . tcp . 8091 : goto service-")
	r.fileHas(t, "env/shop.env", "WEB_PORT_8091_TCP=")

	// The new checkout is watched, the old one no longer matters.
	writeFile(t, filepath.Join(dir, "v2/web/service.yaml"), webService("8092"))
	r.nftHas(t, "10.101.9.155 . tcp . 8092 : goto service-")
}

// TestDrift flushes a chain by hand and waits for the resync to repair it.
func TestDrift(t *testing.T) {
	r := start(t, basicTree(t), Options{Resync: time.Second})
	want := r.nft(t)
	if !strings.Contains(want, "jump services") {
		t.Fatalf("no jump to services in the table:\n%s", want)
	}
	r.ns.MustRun("nft", "flush", "chain", "ip", "netspec", "nat-prerouting")
	waitFor(t, "drift repaired", func() (bool, string) {
		got := r.nft(t)
		return got == want, got
	})
	if n := r.metric(t, "netspec_drift_repairs_total"); n < 1 {
		t.Errorf("netspec_drift_repairs_total = %v after a repair, want ≥ 1", n)
	}
}

// TestDriftSIGHUP: drift repaired by SIGHUP is counted as the resync's
// is, in the metric and the status.
func TestDriftSIGHUP(t *testing.T) {
	r := start(t, basicTree(t), Options{Resync: -1})
	want := r.nft(t)
	r.ns.MustRun("nft", "flush", "chain", "ip", "netspec", "nat-prerouting")
	r.Reload()
	waitFor(t, "drift repaired", func() (bool, string) {
		got := r.nft(t)
		return got == want, got
	})
	st := r.statusUntil(t, "a drift repair in the status", func(s *Status) bool { return s.DriftRepairs.Count == 1 })
	if st.LastSync.Reason != "reload" || st.DriftRepairs.Last == nil {
		t.Errorf("last sync %+v, drift repairs %+v: want reason reload, a last repair", st.LastSync, st.DriftRepairs)
	}
	if n := r.metric(t, "netspec_drift_repairs_total"); n != 1 {
		t.Errorf("netspec_drift_repairs_total = %v after SIGHUP repaired drift, want 1", n)
	}
	// A SIGHUP with nothing to repair is no repair.
	r.Reload()
	r.statusUntil(t, "a second reload", func(s *Status) bool { return s.LastSync.Ended.After(st.LastSync.Ended) })
	if n := r.metric(t, "netspec_drift_repairs_total"); n != 1 {
		t.Errorf("netspec_drift_repairs_total = %v after a SIGHUP without drift, want 1", n)
	}
}

// TestDataplaneNone keeps the state dir in step without a kernel; it
// needs no root.
func TestDataplaneNone(t *testing.T) {
	tree := basicTree(t)
	r := start(t, tree, Options{Dataplane: DataplaneNone})
	r.fileHas(t, "env/shop.env", "WEB_PORT_80_TCP=tcp://10.101.9.155:80")
	if _, err := os.Stat(filepath.Join(r.stateDir, "nftables.nft")); err == nil {
		t.Error("--dataplane none wrote nftables.nft")
	}
	atomicWrite(t, filepath.Join(tree, "web/service.yaml"), webService("8088"))
	r.fileHas(t, "env/shop.env", "WEB_PORT_8088_TCP=tcp://10.101.9.155:8088")
	r.Reload() // SIGHUP: nothing changed, nothing breaks
	// Saved atomically: the reload above may read the file at any time,
	// and a file truncated for an in-place write is a valid (empty) one.
	atomicWrite(t, filepath.Join(tree, "web/service.yaml"), "kind: Service\nmetadata: {name: web\n")
	r.metricIs(t, "netspec_tree_valid", 0)
	if got := r.file(t, "env/shop.env"); !strings.Contains(got, "WEB_PORT_8088_TCP=") {
		t.Errorf("an invalid tree changed env/shop.env:\n%s", got)
	}
}

// TestDigAgainstWatch queries a running watcher's DNS server with dig
// (interoperability), sees an edit reach the answers, and the queries
// counted in netspec_dns_requests_total.
func TestDigAgainstWatch(t *testing.T) {
	dig, err := exec.LookPath("dig")
	if err != nil {
		t.Skip("SKIPPED: dig not found (apt-get install dnsutils; CI installs it)")
	}
	tree := basicTree(t)
	addr := testnet.FreeLoopbackAddr(t)
	host, port, _ := net.SplitHostPort(addr)
	r := start(t, tree, Options{Dataplane: DataplaneNone, DNSListen: addr})
	<-r.DNSReady()
	query := func(name, typ string) string {
		out, err := exec.Command(dig, "@"+host, "-p", port, "+short", "+time=2", "+tries=1", name, typ).CombinedOutput()
		if err != nil {
			t.Fatalf("dig %s %s: %v\n%s", name, typ, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := query("web.shop.svc.cluster.local.", "A"); got != "10.101.9.155" {
		t.Errorf("dig web A: %q, want 10.101.9.155", got)
	}
	if got := query("_http._tcp.web.shop.svc.cluster.local.", "SRV"); got != "0 100 80 web.shop.svc.cluster.local." {
		t.Errorf("dig web SRV: %q", got)
	}
	atomicWrite(t, filepath.Join(tree, "web/service.yaml"), webService("8088"))
	waitFor(t, "the SRV record on port 8088", func() (bool, string) {
		got := query("_http._tcp.web.shop.svc.cluster.local.", "SRV")
		return got == "0 100 8088 web.shop.svc.cluster.local.", got
	})
	if n := r.metric(t, "netspec_dns_requests_total"); n < 3 {
		t.Errorf("netspec_dns_requests_total = %g after at least 3 queries", n)
	}
}
