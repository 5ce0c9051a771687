package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"netspec.dev/netspec/daemon/dnsserver"
	"netspec.dev/netspec/daemon/dnsserver/dnstest"
	"netspec.dev/netspec/internal/testnet"
	"netspec.dev/netspec/internal/vmtest"
	"netspec.dev/netspec/plan"
)

// hasDummy tells whether the kernel makes dummy links, trying in a
// namespace of its own.
func hasDummy(t *testing.T) bool {
	t.Helper()
	ns := testnet.New(t, "dummyprobe").NS("probe")
	_, err := ns.Run("ip", "link", "add", "probe0", "type", "dummy")
	return err == nil
}

// TestWatchDNSLink runs netspec watch --dns-link netspec0 in a network
// namespace: it makes the dummy link with 169.254.20.10, answers the tree's
// names there, leaves the link when it stops, and starts again on the
// link it finds.
func TestWatchDNSLink(t *testing.T) {
	testnet.Require(t)
	if !hasDummy(t) {
		if vmtest.InVM() {
			t.Fatal("the VM's kernel has no dummy links")
		}
		t.Skip("SKIPPED: the kernel has no dummy links; applier/vmsuite runs this test in a VM")
	}
	ns := testnet.New(t, "watchdns").NS("node")
	bin, state, tree := watchFiles(t)
	start := func() *watchProc {
		cmd := exec.Command("ip", "netns", "exec", ns.Name, bin, "watch", tree, "--node", "node-1",
			"--dataplane", "none", "--state-dir", state, "--dns-link", "netspec0", "--log-format", "json")
		return startWatch(t, cmd)
	}
	// query asks netspec on 169.254.20.10 from inside the namespace.
	query := func(name string, qtype uint16) *dns.Msg {
		t.Helper()
		m := new(dns.Msg)
		m.SetQuestion(name, qtype)
		c := &dns.Client{Timeout: 5 * time.Second}
		var r *dns.Msg
		var err error
		if derr := ns.Do(func() error { r, _, err = c.Exchange(m, "169.254.20.10:53"); return nil }); derr != nil {
			t.Fatal(derr)
		}
		if err != nil {
			t.Fatalf("%s from 169.254.20.10: %v", name, err)
		}
		return r
	}

	w := start()
	r := query("web.shop.svc.cluster.local.", dns.TypeA)
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
		t.Fatalf("web.shop.svc.cluster.local A: %v", r)
	}
	if got := query("www.example.org.", dns.TypeA).Rcode; got != dns.RcodeRefused {
		t.Errorf("www.example.org: rcode %s, want REFUSED", dns.RcodeToString[got])
	}
	log := w.stop()
	if !strings.Contains(log, `"msg":"dns link ready","link":"netspec0","addr":"169.254.20.10","created":true`) {
		t.Errorf("the first start does not log the link it made:\n%s", log)
	}
	if out := ns.MustRun("ip", "-o", "addr", "show", "dev", "netspec0"); !strings.Contains(out, "inet 169.254.20.10/32") {
		t.Errorf("after netspec stopped, netspec0 should stay with its address:\n%s", out)
	}
	conf, err := os.ReadFile(filepath.Join(state, "resolv", "shop.conf"))
	if err != nil || !strings.Contains(string(conf), "nameserver 169.254.20.10\n") {
		t.Errorf("state dir resolv/shop.conf: %v\n%s", err, conf)
	}

	w = start()
	if r := query("web.shop.svc.cluster.local.", dns.TypeA); r.Rcode != dns.RcodeSuccess {
		t.Errorf("second start: %v", r)
	}
	log = w.stop()
	if !strings.Contains(log, `"msg":"dns link ready","link":"netspec0","addr":"169.254.20.10","created":false,"addr_added":false`) {
		t.Errorf("the second start should find the link as it was:\n%s", log)
	}
}

// TestWatchDNSUpstream runs netspec watch --dns-link netspec0
// --dns-upstream in a network namespace with an upstream resolver on
// 127.0.0.1:53 there, and resolves with glibc (getent hosts) through the
// pod resolv.conf of the state dir, which names netspec alone: a name
// outside the cluster and the ExternalName Service search.shop (a CNAME
// to search.example.com, which glibc does not chase itself) resolve, as
// with CoreDNS. netspec's own address, listed too, is skipped.
func TestWatchDNSUpstream(t *testing.T) {
	testnet.Require(t, "getent", "unshare", "mount")
	if !hasDummy(t) {
		if vmtest.InVM() {
			t.Fatal("the VM's kernel has no dummy links")
		}
		t.Skip("SKIPPED: the kernel has no dummy links; applier/vmsuite runs this test in a VM")
	}
	ns := testnet.New(t, "watchfwd").NS("node")
	upstream(t, ns, "127.0.0.1:53")
	bin, state, tree := watchFiles(t)
	conf := filepath.Join(state, "resolv", "shop.conf")
	names := []string{"search", "search.shop.svc.cluster.local", "www.example.com", "web"}

	// Without --dns-upstream: neither resolves.
	w := startWatch(t, exec.Command("ip", "netns", "exec", ns.Name, bin, "watch", tree, "--node", "node-1",
		"--dataplane", "none", "--state-dir", state, "--dns-link", "netspec0", "--log-format", "json"))
	for i, got := range podGetent(t, ns, conf, names[:3]...) {
		if strings.Contains(got, "192.0.2.") {
			t.Errorf("without --dns-upstream, %s resolved: %q", names[i], got)
		}
	}
	w.stop()

	w = startWatch(t, exec.Command("ip", "netns", "exec", ns.Name, bin, "watch", tree, "--node", "node-1",
		"--dataplane", "none", "--state-dir", state, "--dns-link", "netspec0", "--log-format", "json",
		"--dns-upstream", "169.254.20.10,127.0.0.1"))
	got := podGetent(t, ns, conf, names...)
	want := []string{
		"192.0.2.80 search.example.com search.shop.svc.cluster.local",
		"192.0.2.80 search.example.com search.shop.svc.cluster.local",
		"192.0.2.81 www.example.com",
		"10.96.0.10 web.shop.svc.cluster.local",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("getent hosts through %s:\ngot  %q\nwant %q", conf, got, want)
	}
	log := w.stop()
	if !strings.Contains(log, `"msg":"dns upstream is this server's own address, skipped (it would loop)","upstream":"169.254.20.10:53"`) ||
		!strings.Contains(log, `"msg":"dns forwarding","upstreams":"127.0.0.1:53"`) {
		t.Errorf("the log should warn of the skipped upstream and name the one kept:\n%s", log)
	}

	// Its own address alone: watch does not start.
	out, err := exec.Command("ip", "netns", "exec", ns.Name, bin, "watch", tree, "--node", "node-1",
		"--dataplane", "none", "--state-dir", state, "--dns-link", "netspec0", "--dns-upstream", "169.254.20.10:53").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no upstream left") {
		t.Errorf("watch with its own address as only upstream: %v\n%s", err, out)
	}
}

// upstream serves, inside ns on addr, the host's resolver of the test:
// example.com with search.example.com and www.example.com.
func upstream(t *testing.T, ns *testnet.NS, addr string) {
	t.Helper()
	rs, err := dnsserver.Compile(plan.DNS{Zones: []plan.Zone{{Name: "example.com.", Records: []plan.Record{
		{Name: "example.com.", Type: "SOA", TTL: 5, Data: "ns.example.com. hostmaster.example.com. 1 7200 1800 86400 5"},
		{Name: "search.example.com.", Type: "A", TTL: 5, Data: "192.0.2.80"},
		{Name: "www.example.com.", Type: "A", TTL: 5, Data: "192.0.2.81"},
	}}}}, dnsserver.Cluster{})
	if err != nil {
		t.Fatal(err)
	}
	dnstest.Serve(t, ns.Do, rs, addr)
}

// podGetent resolves names with glibc's resolver (getent hosts) inside
// ns, with resolvConf bind-mounted over /etc/resolv.conf (and "hosts:
// dns" as nsswitch.conf) in a mount namespace of its own: the host's
// files are never touched.
func podGetent(t *testing.T, ns *testnet.NS, resolvConf string, names ...string) []string {
	t.Helper()
	dir := t.TempDir()
	nss := filepath.Join(dir, "nsswitch.conf")
	if err := os.WriteFile(nss, []byte("hosts: dns\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := "set -e\n"
	for src, target := range map[string]string{resolvConf: "/etc/resolv.conf", nss: "/etc/nsswitch.conf"} {
		if vmtest.InVM() { // the VM's initramfs may lack the file to mount over
			if f, err := os.OpenFile(target, os.O_CREATE|os.O_RDONLY, 0o644); err == nil {
				f.Close()
			}
		}
		script += "mount --bind " + src + " " + target + "\n"
	}
	var out []string
	for _, n := range names {
		b, err := exec.Command("ip", "netns", "exec", ns.Name, "unshare", "-m", "--propagation", "private", "sh", "-c", script+"exec getent hosts "+n).CombinedOutput()
		if err != nil {
			out = append(out, n+": "+err.Error()+" "+strings.TrimSpace(string(b)))
			continue
		}
		out = append(out, strings.Join(strings.Fields(string(b)), " "))
	}
	return out
}

// watchProc is a netspec watch process whose JSON log is read as it
// comes.
type watchProc struct {
	t    *testing.T
	cmd  *exec.Cmd
	mu   sync.Mutex
	log  bytes.Buffer
	done chan struct{} // closed when the log ends
}

// startWatch starts cmd (netspec watch --log-format json --dns-listen or
// --dns-link) and returns once its log says that it serves DNS and has
// synced, or fails the test when it exits before.
func startWatch(t *testing.T, cmd *exec.Cmd) *watchProc {
	t.Helper()
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &watchProc{t: t, cmd: cmd, done: make(chan struct{})}
	t.Cleanup(func() { cmd.Process.Kill(); <-w.done; cmd.Wait() })
	ready := make(chan struct{})
	go func() {
		defer close(w.done)
		sc := bufio.NewScanner(pipe)
		serving, synced, closed := false, false, false
		for sc.Scan() {
			line := sc.Text()
			w.mu.Lock()
			w.log.WriteString(line + "\n")
			w.mu.Unlock()
			serving = serving || strings.Contains(line, `"msg":"serving DNS"`)
			synced = synced || strings.Contains(line, `"msg":"synced"`)
			if serving && synced && !closed {
				close(ready)
				closed = true
			}
		}
	}()
	select {
	case <-ready:
	case <-w.done:
		cmd.Wait()
		t.Fatalf("netspec watch ended before it served DNS and synced:\n%s", w.logText())
	}
	return w
}

func (w *watchProc) logText() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.log.String()
}

// stop sends SIGINT, waits for a clean exit and returns the whole log.
func (w *watchProc) stop() string {
	w.t.Helper()
	if err := w.cmd.Process.Signal(syscall.SIGINT); err != nil {
		w.t.Fatal(err)
	}
	<-w.done
	if err := w.cmd.Wait(); err != nil {
		w.t.Fatalf("netspec watch: %v\n%s", err, w.logText())
	}
	return w.logText()
}

// watchFiles gives a watch test this test binary as netspec (TestMain
// makes it netspec when called so), a state dir and the kitchen-sink tree.
func watchFiles(t *testing.T) (bin, state, tree string) {
	t.Helper()
	bin = filepath.Join(t.TempDir(), "netspec")
	if err := os.Symlink(os.Args[0], bin); err != nil {
		t.Fatal(err)
	}
	tree, err := filepath.Abs("../../examples/kitchen-sink")
	if err != nil {
		t.Fatal(err)
	}
	return bin, t.TempDir(), tree
}
