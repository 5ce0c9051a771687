// Package testnet builds throwaway network namespaces for tests that send
// real packets: namespaces joined by veth links, with addresses, routes and
// forwarding, small TCP and UDP servers that say who they are and whom they
// heard from, and clients that dial from inside a namespace.
//
// Kernel state is only ever changed inside namespaces the package created;
// the host's links, routes, sysctls and nftables are never touched. Every
// namespace is deleted when the test ends, also when it fails, after the
// servers, sockets and file descriptors that keep it alive are closed.
//
// A test starts with Require, which skips it loudly unless it runs as root
// with ip(8):
//
//	testnet.Require(t)
//	n := testnet.New(t, "mypkg")
//	client, server := n.NS("client"), n.NS("server")
//	testnet.Link(client, []string{"192.0.2.1/24"}, server, []string{"192.0.2.2/24"})
//	server.Serve(t, "backend", "192.0.2.2:8080")
//	got := client.DialTCP("192.0.2.2:8080", time.Second) // "backend 192.0.2.1"
//
// Methods that set things up (NS, Link, Route, AddAddr, IP, Forwarding,
// Sysctl, MustRun) fail the test given to New when they fail; call them from that
// test's goroutine. The dial methods and Do are safe for concurrent use.
package testnet

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// maxNameLen is the length namespace names are kept within when the
// readable form netspec-PREFIX-ROLE-PID-RANDOM is longer.
const maxNameLen = 30

// Require skips the test, loudly, unless it runs as root and ip(8) and
// every tool in extra (for example "nft") are installed.
func Require(t testing.TB, extra ...string) {
	t.Helper()
	what := "root and ip"
	for _, tool := range extra {
		what += "/" + tool
	}
	if os.Geteuid() != 0 {
		t.Skipf("SKIPPED: real-packet test needs %s: not root (run the tests as root, e.g. sudo go test)", what)
	}
	for _, tool := range append([]string{"ip"}, extra...) {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIPPED: real-packet test needs %s: %v (apt-get install iproute2 nftables)", what, err)
		}
	}
}

// Net is a set of network namespaces that belong to one test. Make it with
// New; its namespaces are deleted when the test ends.
type Net struct {
	t      testing.TB
	prefix string

	mu      sync.Mutex
	nss     []*NS
	closers []*closer // servers still open, closed before the namespaces go
}

// New returns an empty Net for test t. prefix names the package or test in
// the namespaces' names. The Net's cleanup (closing servers and deleting
// every namespace) is registered with t now, so it runs after any cleanup
// registered later, and also when the test fails.
func New(t testing.TB, prefix string) *Net {
	t.Helper()
	SweepOrphans(t)
	n := &Net{t: t, prefix: prefix}
	t.Cleanup(n.cleanup)
	return n
}

// NS is one network namespace of a Net.
type NS struct {
	// Name is the namespace's name, as `ip netns list` shows it.
	Name string
	// Role is the role the test gave it, for messages.
	Role string

	net  *Net
	fd   int
	mu   sync.Mutex
	devs int // veth devices made here so far, for names
}

// String returns the role and name, for messages.
func (ns *NS) String() string { return ns.Role + " (netns " + ns.Name + ")" }

// nsName returns a name netspec-PREFIX-ROLE-PID-RANDOM; when that is longer
// than maxNameLen, PREFIX-ROLE is replaced by a short hash of it. The pid
// and the random part make names unique across the test processes of
// several packages running at once.
func nsName(prefix, role string) string {
	pid, rnd := os.Getpid(), rand.Uint32()
	name := fmt.Sprintf("netspec-%s-%s-%d-%08x", clean(prefix), clean(role), pid, rnd)
	if len(name) <= maxNameLen {
		return name
	}
	h := fnv.New32a()
	h.Write([]byte(prefix + "/" + role))
	return fmt.Sprintf("netspec-%04x-%d-%08x", h.Sum32()&0xffff, pid, rnd)
}

// orphanName is a test namespace's name: netspec-…-PID-RANDOM, as nsName
// and the script tests make them.
var orphanName = regexp.MustCompile(`^netspec-.+-([0-9]+)-[0-9a-f]{8}$`)

var sweepOnce sync.Once

// SweepOrphans deletes, once per process, the test namespaces whose
// process is gone: a test process killed (a -timeout panic, a signal) runs
// no cleanup, and its namespaces would stay until reboot. A namespace is
// an orphan when its name is one the tests make and holds the pid of no
// live process; a live process's are left alone, whoever it is.
func SweepOrphans(t testing.TB) { sweepOnce.Do(func() { sweepOrphans(t) }) }

func sweepOrphans(t testing.TB) {
	names, err := os.ReadDir("/var/run/netns")
	if err != nil {
		return // none made yet
	}
	for _, e := range names {
		m := orphanName.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		pid, err := strconv.Atoi(m[1])
		if err != nil || pid <= 0 || unix.Kill(pid, 0) != unix.ESRCH {
			continue
		}
		if out, err := exec.Command("ip", "netns", "delete", e.Name()).CombinedOutput(); err != nil {
			t.Logf("testnet: deleting orphaned namespace %s: %v\n%s", e.Name(), err, out)
			continue
		}
		t.Logf("testnet: deleted namespace %s, left by process %d, which is gone", e.Name(), pid)
	}
}

// clean keeps letters, digits, '-' and '_' of s (names are file names).
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return -1
	}, s)
}

// NS makes a new namespace for role: loopback up, IPv6 duplicate address
// detection off (so that addresses are usable at once), nothing else.
func (n *Net) NS(role string) *NS {
	n.t.Helper()
	ns := &NS{Name: nsName(n.prefix, role), Role: role, net: n, fd: -1}
	if out, err := exec.Command("ip", "netns", "add", ns.Name).CombinedOutput(); err != nil {
		n.t.Fatalf("testnet: ip netns add %s: %v\n%s", ns.Name, err, out)
	}
	n.mu.Lock()
	n.nss = append(n.nss, ns) // deleted at cleanup from here on
	n.mu.Unlock()
	fd, err := unix.Open(filepath.Join("/var/run/netns", ns.Name), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		n.t.Fatalf("testnet: open namespace %s: %v", ns, err)
	}
	ns.fd = fd
	ns.Sysctl("net.ipv6.conf.all.accept_dad", "0")
	ns.Sysctl("net.ipv6.conf.default.accept_dad", "0")
	ns.ipBatch("link set lo up")
	return ns
}

// cleanup closes the servers, then the namespaces' descriptors, then
// deletes the namespaces.
func (n *Net) cleanup() {
	n.mu.Lock()
	closers, nss := n.closers, n.nss
	n.closers, n.nss = nil, nil
	n.mu.Unlock()
	for _, c := range closers {
		c.close()
	}
	for i := len(nss) - 1; i >= 0; i-- {
		ns := nss[i]
		ns.mu.Lock()
		if ns.fd >= 0 {
			unix.Close(ns.fd)
			ns.fd = -1
		}
		ns.mu.Unlock()
		if out, err := exec.Command("ip", "netns", "delete", ns.Name).CombinedOutput(); err != nil {
			n.t.Errorf("testnet: ip netns delete %s: %v\n%s", ns.Name, err, out)
		}
	}
}

// Fd returns an open descriptor of the namespace (of
// /var/run/netns/NAME), for nftables.WithNetNSFd, netlink handles and
// setns. It stays open until the test ends; do not close it.
func (ns *NS) Fd() int { return ns.fd }

// Do runs fn on an OS thread switched into the namespace, and switches the
// thread back afterwards. Sockets fn creates belong to the namespace for
// their whole life, whichever thread uses them later. fn runs on a
// goroutine of its own: it must not call t.FailNow (t.Fatal); a panic in
// fn is returned as an error.
func (ns *NS) Do(fn func() error) error {
	ns.mu.Lock()
	fd := ns.fd
	ns.mu.Unlock()
	if fd < 0 {
		return fmt.Errorf("testnet: namespace %s is closed", ns)
	}
	errc := make(chan error, 1)
	go func() {
		var result error
		defer func() { errc <- result }()
		runtime.LockOSThread()
		// A thread that may be in the wrong namespace stays locked: Go
		// ends it with the goroutine, so no other code runs on it.
		orig, err := netns.Get()
		if err != nil {
			result = fmt.Errorf("testnet: current namespace: %v", err)
			return
		}
		defer orig.Close()
		if err := netns.Set(netns.NsHandle(fd)); err != nil {
			result = fmt.Errorf("testnet: enter namespace %s: %v", ns, err)
			return
		}
		returned := false
		defer func() {
			r := recover()
			if err := netns.Set(orig); err != nil {
				result = fmt.Errorf("testnet: leave namespace %s: %v", ns, err)
				return
			}
			runtime.UnlockOSThread()
			switch {
			case r != nil:
				result = fmt.Errorf("testnet: panic in namespace %s: %v\n%s", ns, r, debug.Stack())
			case !returned:
				result = fmt.Errorf("testnet: the function run in namespace %s called runtime.Goexit (t.FailNow?)", ns)
			}
		}()
		result = fn()
		returned = true
	}()
	return <-errc
}

// Run runs a command inside the namespace (ip netns exec) and returns its
// standard output; the error holds the standard error.
func (ns *NS) Run(args ...string) (string, error) {
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns.Name}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("in %s: %s: %v\n%s", ns, strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// MustRun is Run that fails the test on error.
func (ns *NS) MustRun(args ...string) string {
	ns.net.t.Helper()
	out, err := ns.Run(args...)
	if err != nil {
		ns.net.t.Fatal(err)
	}
	return out
}

// ipBatch runs ip(8) commands (without the leading "ip") inside the
// namespace, in one process.
func (ns *NS) ipBatch(cmds ...string) {
	ns.net.t.Helper()
	ns.ip([]string{"-batch", "-"}, strings.Join(cmds, "\n")+"\n")
}

// ip runs ip(8) inside the namespace with arguments args and standard input
// stdin.
func (ns *NS) ip(args []string, stdin string) {
	ns.net.t.Helper()
	cmd := exec.Command("ip", append([]string{"-n", ns.Name}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	if out, err := cmd.CombinedOutput(); err != nil {
		what := strings.Join(args, " ")
		if stdin != "" {
			what = strings.ReplaceAll(strings.TrimSpace(stdin), "\n", "; ")
		}
		ns.net.t.Fatalf("testnet: in %s: ip %s: %v\n%s", ns, what, err, out)
	}
}

// Sysctl sets a sysctl of the namespace, such as
// "net.ipv4.conf.all.rp_filter" (dots, not slashes).
func (ns *NS) Sysctl(key, value string) {
	ns.net.t.Helper()
	file := filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/"))
	err := ns.Do(func() error { return os.WriteFile(file, []byte(value+"\n"), 0o644) })
	if err != nil {
		ns.net.t.Fatalf("testnet: in %s: sysctl %s=%s: %v", ns, key, value, err)
	}
}

// Forwarding turns on IPv4 and IPv6 forwarding in the namespace.
func (ns *NS) Forwarding() {
	ns.net.t.Helper()
	ns.Sysctl("net.ipv4.ip_forward", "1")
	ns.Sysctl("net.ipv6.conf.all.forwarding", "1")
}

// AddAddr adds the address cidr ("10.0.0.1/24", "fd00::1/64") to device
// dev of the namespace; IPv6 addresses skip duplicate address detection.
func (ns *NS) AddAddr(dev, cidr string) {
	ns.net.t.Helper()
	ns.ipBatch(addrCmd(ns, dev, cidr))
	if hasIPv6([]string{cidr}) && ns.isLinkDev(dev) {
		ns.waitIPv6(dev)
	}
}

func addrCmd(ns *NS, dev, cidr string) string {
	ns.net.t.Helper()
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		ns.net.t.Fatalf("testnet: in %s: address %q: want an address with its prefix length, like 10.0.0.1/24", ns, cidr)
	}
	cmd := "addr add " + p.String() + " dev " + dev
	if p.Addr().Is6() {
		cmd += " nodad"
	}
	return cmd
}

// Route adds (or replaces) the route to dst ("10.244.2.0/24", "default")
// through gateway via. The family is via's.
func (ns *NS) Route(dst, via string) {
	ns.net.t.Helper()
	gw, err := netip.ParseAddr(via)
	if err != nil {
		ns.net.t.Fatalf("testnet: in %s: route %s via %q: %v", ns, dst, via, err)
	}
	fam := "-4"
	if gw.Is6() {
		fam = "-6"
	}
	ns.ip([]string{fam, "route", "replace", dst, "via", gw.String()}, "")
}

// IP runs ip(8) commands inside the namespace, each without the leading
// "ip" ("addr add 169.254.1.1/32 dev eth1 scope link", "route add
// 10.0.1.5/32 dev eth1"), in one process: for what AddAddr, Route and Link
// do not express.
func (ns *NS) IP(cmds ...string) {
	ns.net.t.Helper()
	ns.ipBatch(cmds...)
}

// nextDev returns a new device name for the namespace: eth0, eth1, …
func (ns *NS) nextDev() string {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	name := fmt.Sprintf("eth%d", ns.devs)
	ns.devs++
	return name
}

// isLinkDev reports whether dev is a device Link made in the namespace.
func (ns *NS) isLinkDev(dev string) bool {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	for i := range ns.devs {
		if dev == fmt.Sprintf("eth%d", i) {
			return true
		}
	}
	return false
}

// Link joins namespaces a and b with a veth pair, gives each end its
// addresses (CIDRs, IPv4 or IPv6; IPv6 without duplicate address
// detection) and sets both ends up. It returns the devices' names: ethN
// in a and ethM in b, numbered in the order of links.
func Link(a *NS, aAddrs []string, b *NS, bAddrs []string) (aDev, bDev string) {
	a.net.t.Helper()
	if a == b {
		a.net.t.Fatalf("testnet: Link of %s with itself", a)
	}
	aDev, bDev = a.nextDev(), b.nextDev()
	a.ipBatch("link add " + aDev + " type veth peer name " + bDev + " netns " + b.Name)
	for _, side := range []struct {
		ns    *NS
		dev   string
		addrs []string
	}{{a, aDev, aAddrs}, {b, bDev, bAddrs}} {
		var cmds []string
		for _, c := range side.addrs {
			cmds = append(cmds, addrCmd(side.ns, side.dev, c))
		}
		cmds = append(cmds, "link set "+side.dev+" up")
		side.ns.ipBatch(cmds...)
	}
	if hasIPv6(aAddrs) || hasIPv6(bAddrs) {
		a.waitIPv6(aDev)
		b.waitIPv6(bDev)
	}
	return aDev, bDev
}

func hasIPv6(cidrs []string) bool {
	for _, c := range cidrs {
		if strings.Contains(c, ":") {
			return true
		}
	}
	return false
}

// waitIPv6 waits until IPv6 runs on device dev: the kernel sets it up a
// moment after the link is up (when the link's operational state reaches
// IPv6), and until then it drops neighbour solicitations, so that a first
// connection would wait a second for the next one.
func (ns *NS) waitIPv6(dev string) {
	ns.net.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		out, err := exec.Command("ip", "-n", ns.Name, "-6", "route", "show", "table", "local", "dev", dev).CombinedOutput()
		if err == nil && strings.Contains(string(out), "ff00::/8") {
			return
		}
		if time.Now().After(deadline) {
			ns.net.t.Fatalf("testnet: in %s: IPv6 did not come up on %s within 5s: %v\n%s", ns, dev, err, out)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// closer closes a server once and waits for its goroutines.
type closer struct {
	once sync.Once
	fn   func()
}

func (c *closer) close() { c.once.Do(c.fn) }

// track registers c to be closed at the Net's cleanup at the latest.
func (n *Net) track(c *closer) {
	n.mu.Lock()
	n.closers = append(n.closers, c)
	n.mu.Unlock()
}
