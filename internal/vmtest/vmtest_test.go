package vmtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// hostTools are the host programs the smoke test ships into the VM.
var hostTools = []string{"/usr/sbin/ip", "/usr/sbin/nft"}

// TestVMSmoke boots the VM once and runs two suites in it: TestInVMSmoke
// of this package's own test binary, which must pass, and busybox false,
// which must fail, with a verdict and a console of its own, and without
// failing the first.
func TestVMSmoke(t *testing.T) {
	if InVM() {
		t.Skip("host side of the smoke test")
	}
	env := Require(t)
	for _, p := range hostTools {
		if _, err := os.Stat(p); err != nil {
			unavailable(t, p+" is missing (apt-get install iproute2 nftables)")
		}
	}
	start := time.Now()
	bin := BuildTestBinary(t, "netspec.dev/netspec/internal/vmtest")
	built := time.Since(start)
	start = time.Now()
	res := env.RunSuites(t, Options{
		Suites: []Suite{
			{Name: "smoke", Binary: bin, Args: []string{"-test.run", "^TestInVMSmoke$", "-test.v"}, Env: []string{"VMTEST_SMOKE=it's on"}},
			// busybox false, run as a test binary, exits 1.
			{Name: "false", Binary: env.busybox, Args: []string{"false"}, Dir: "/root"},
		},
		HostBinaries: hostTools,
	})
	t.Logf("test binary built in %v, VM boot and in-VM tests took %v", built.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	if len(res) != 2 {
		t.Fatalf("RunSuites returned %d results for 2 suites", len(res))
	}
	smoke, fails := res[0], res[1]
	smoke.Check(t)
	if !strings.Contains(smoke.Console, "--- PASS: TestInVMSmoke") || strings.Contains(smoke.Console, "'false'") {
		t.Errorf("the smoke suite's console does not show TestInVMSmoke passing, or shows the next suite:\n%s", smoke.Console)
	}
	if fails.Passed || fails.Verdict != "FAIL exit=1" || !strings.Contains(fails.Console, "NETSPEC-VMTEST: running '/vmtest/busybox' 'false'") {
		t.Errorf("the failing suite: passed %v, verdict %q, console:\n%s", fails.Passed, fails.Verdict, fails.Console)
	}
	if smoke.CPU <= 0 || smoke.Wall <= 0 {
		t.Errorf("the smoke suite's CPU %v and wall time %v were not measured", smoke.CPU, smoke.Wall)
	}
	msg := failure(t, func(tb testing.TB) { fails.Check(tb) })
	for _, want := range []string{"suite false", "FAIL exit=1", "----- its console", "NETSPEC-VMTEST: running"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Check of the failed suite: message lacks %q:\n%s", want, msg)
		}
	}
}

// TestInVMSmoke runs inside the VM: IPVS and its schedulers are loaded, ip
// netns and veth work and carry a TCP connection, nftables works.
func TestInVMSmoke(t *testing.T) {
	if !InVM() {
		t.Skip("runs only inside the vmtest VM (see TestVMSmoke)")
	}
	if got := os.Getenv("VMTEST_SMOKE"); got != "it's on" {
		t.Errorf("Options.Env did not arrive: VMTEST_SMOKE=%q", got)
	}

	b, err := os.ReadFile("/proc/net/ip_vs")
	if err != nil {
		t.Fatalf("IPVS is not loaded: %v", err)
	}
	t.Logf("/proc/net/ip_vs:\n%s", b)
	mods, err := os.ReadFile("/proc/modules")
	if err != nil {
		t.Fatal(err)
	}
	loaded := map[string]bool{}
	for _, l := range strings.Split(string(mods), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			loaded[f[0]] = true
		}
	}
	builtin, _ := os.ReadFile("/lib/modules/" + unameRelease(t) + "/modules.builtin")
	for _, m := range strings.Fields(DefaultModules) {
		if !loaded[m] && !strings.Contains(string(builtin), "/"+m+".ko") {
			t.Errorf("module %s is not in /proc/modules", m)
		}
	}

	// Two namespaces joined by a veth pair.
	sh(t, "ip netns add a")
	sh(t, "ip netns add b")
	sh(t, "ip link add va netns a type veth peer name vb netns b")
	sh(t, "ip -n a addr add 192.168.100.1/24 dev va")
	sh(t, "ip -n b addr add 192.168.100.2/24 dev vb")
	sh(t, "ip -n a link set va up")
	sh(t, "ip -n b link set vb up")
	sh(t, "ip -n a link set lo up")
	sh(t, "ip -n b link set lo up")

	var ln net.Listener
	inNetns(t, "b", func() (err error) {
		ln, err = net.Listen("tcp", "192.168.100.2:8080")
		return err
	})
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		fmt.Fprintf(c, "hello %s\n", c.RemoteAddr().(*net.TCPAddr).IP)
		c.Close()
	}()
	var conn net.Conn
	inNetns(t, "a", func() (err error) {
		conn, err = net.DialTimeout("tcp", "192.168.100.2:8080", 10*time.Second)
		return err
	})
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 64)
	n, _ := conn.Read(buf)
	conn.Close()
	if got := string(buf[:n]); got != "hello 192.168.100.1\n" {
		t.Errorf("TCP over veth between namespaces: got %q", got)
	}

	// nftables: load a table with NAT, numgen and a counter, read it back.
	cmd := exec.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(`table inet vmtest {
	chain pre {
		type nat hook prerouting priority dstnat; policy accept;
		tcp dport 80 counter dnat ip to numgen inc mod 2 map { 0 : 192.168.100.1, 1 : 192.168.100.2 }
	}
	chain post {
		type nat hook postrouting priority srcnat; policy accept;
		ct status dnat masquerade
	}
}
`)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft -f: %v\n%s", err, out)
	}
	out := sh(t, "nft list table inet vmtest")
	t.Logf("nft list table inet vmtest:\n%s", out)
	if !strings.Contains(out, "numgen inc mod 2") || !strings.Contains(out, "masquerade") {
		t.Errorf("nft list table inet vmtest:\n%s", out)
	}
}

func unameRelease(t *testing.T) string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	return unix.ByteSliceToString(u.Release[:])
}

// sh runs a command line (split on spaces) and returns its output.
func sh(t *testing.T, line string) string {
	t.Helper()
	f := strings.Fields(line)
	out, err := exec.Command(f[0], f[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
	return string(out)
}

// inNetns runs fn on an OS thread that is in the network namespace made
// by ip netns add name; sockets fn opens stay in that namespace.
func inNetns(t *testing.T, name string, fn func() error) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		fd, err := unix.Open("/run/netns/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %v", name, err)
			return
		}
		errc <- fn()
	}()
	if err := <-errc; err != nil {
		t.Fatalf("in netns %s: %v", name, err)
	}
}

// fatalRecorder is a testing.TB whose Fatal records the message and ends
// the goroutine, so that tests can check how Run fails.
type fatalRecorder struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatal(args ...any) {
	r.mu.Lock()
	r.msg = fmt.Sprint(args...)
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *fatalRecorder) Fatalf(format string, args ...any) { r.Fatal(fmt.Sprintf(format, args...)) }

// failure runs fn with a fatalRecorder and returns what it failed with
// ("" if it did not).
func failure(t *testing.T, fn func(tb testing.TB)) string {
	r := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(r)
	}()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.msg
}

// TestRunMissingModule: a module the kernel does not have fails Run before
// booting, naming it.
func TestRunMissingModule(t *testing.T) {
	if InVM() {
		t.Skip("host only")
	}
	env := Require(t)
	msg := failure(t, func(tb testing.TB) {
		env.Run(tb, Options{Binary: "/bin/true", Modules: []string{"ip_vs", "no_such_module_xyz"}})
	})
	if !strings.Contains(msg, "no_such_module_xyz") || strings.Contains(msg, "ip_vs ") {
		t.Fatalf("Run with a missing module failed with %q", msg)
	}
}
