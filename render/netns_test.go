package render

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"netspec.dev/netspec/plan"
)

// These tests load the rendered rules into the real kernel, inside
// throwaway network namespaces: the host's own nftables and network are
// never touched. They need root, `ip` and `nft`, and say so loudly when
// they skip (CI runs as root with nftables installed).

// nftRequireKernel skips unless the test runs as root with ip and nft.
func nftRequireKernel(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: loading rules into the kernel needs root and nft: not root")
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIPPED: loading rules into the kernel needs root and nft: %v (apt-get install nftables iproute2)", err)
		}
	}
}

// nftNetns makes a network namespace with a unique name, deleted when
// the test ends, also on failure.
func nftNetns(t *testing.T, role string) string {
	t.Helper()
	name := fmt.Sprintf("netspec-render-%s-%d-%08x", role, os.Getpid(), rand.Uint32())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v\n%s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "delete", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns delete %s: %v\n%s", name, err, out)
		}
	})
	return name
}

// nsRun runs a command inside namespace ns and returns its stdout.
func nsRun(ns string, args ...string) (string, error) {
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

func nsMust(t *testing.T, ns string, args ...string) string {
	t.Helper()
	out, err := nsRun(ns, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// hostNetspecTables lists the host's netspec tables, read only.
func hostNetspecTables(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("nft", "list", "tables").CombinedOutput()
	if err != nil {
		t.Fatalf("nft list tables: %v\n%s", err, out)
	}
	var ours []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasSuffix(l, " netspec") {
			ours = append(ours, l)
		}
	}
	return strings.Join(ours, "\n")
}

// TestNFTablesKernel loads every golden plan's ruleset: `nft -c -f`, then
// `nft -f` over the tables of the case before, twice in a row, and into a
// namespace without our tables; the kernel then lists every chain, set and
// map the file declares, and a table of someone else is left alone.
func TestNFTablesKernel(t *testing.T) {
	nftRequireKernel(t)
	before := hostNetspecTables(t)
	ns := nftNetns(t, "load")

	const bystander = "table inet bystander {\n\tset keep {\n\t\ttype ipv4_addr\n\t\telements = { 192.0.2.1 }\n\t}\n\n\tchain input {\n\t\ttype filter hook input priority filter; policy accept;\n\t\tip saddr @keep counter packets 0 bytes 0 accept\n\t}\n}\n"
	dir := t.TempDir()
	bfile := filepath.Join(dir, "bystander.nft")
	if err := os.WriteFile(bfile, []byte(bystander), 0o644); err != nil {
		t.Fatal(err)
	}
	nsMust(t, ns, "nft", "-f", bfile)
	wantBystander := nsMust(t, ns, "nft", "list", "table", "inet", "bystander")

	for _, tc := range nftCases() {
		t.Run(tc.name, func(t *testing.T) {
			text := NFTables(tc.plan)
			file := filepath.Join(dir, tc.name+".nft")
			if err := os.WriteFile(file, text, 0o644); err != nil {
				t.Fatal(err)
			}
			nsMust(t, ns, "nft", "-c", "-f", file)
			nsMust(t, ns, "nft", "-f", file) // over the previous case's tables
			nsMust(t, ns, "nft", "-f", file) // over its own
			for fam, body := range nftTables(t, text) {
				listing := nsMust(t, ns, "nft", "list", "table", fam, "netspec")
				for _, m := range nftDeclRE.FindAllStringSubmatch(body, -1) {
					if !strings.Contains(listing, "\t"+m[1]+" "+m[2]+" {\n") {
						t.Errorf("table %s netspec: the kernel has no %s %s:\n%s", fam, m[1], m[2], listing)
					}
				}
				if n, want := strings.Count(listing, "\n\tchain "), strings.Count(body, "\n\tchain "); n != want {
					t.Errorf("table %s netspec: the kernel has %d chains, the file declares %d", fam, n, want)
				}
			}
			if got := nsMust(t, ns, "nft", "list", "table", "inet", "bystander"); got != wantBystander {
				t.Errorf("loading changed another table:\n%s\n--- want\n%s", got, wantBystander)
			}
			// And from scratch: neither table exists.
			nsMust(t, ns, "nft", "delete table ip netspec; delete table ip6 netspec")
			nsMust(t, ns, "nft", "-f", file)
		})
	}
	if after := hostNetspecTables(t); after != before {
		t.Errorf("the host's netspec tables changed: before %q, after %q", before, after)
	}
}

// TestNFTablesTraffic sends real connections through the rules. Three
// namespaces: a client (192.168.1.2, fd00:1::2), the node (192.168.1.10,
// fd00:1::10) holding the rules and routing, and the pods (10.244.x.y,
// fd00:244:...) where a helper process answers each connection with the
// address it was reached on and the address it came from.
//
//	client vc ─── vn node vp ─── pv pods
func TestNFTablesTraffic(t *testing.T) {
	nftRequireKernel(t)
	client, node, pods := nftNetns(t, "client"), nftNetns(t, "node"), nftNetns(t, "pods")
	run := func(ns string, cmds ...string) {
		t.Helper()
		for _, c := range cmds {
			nsMust(t, ns, strings.Fields(c)...)
		}
	}
	if out, err := exec.Command("ip", "link", "add", "vc", "netns", client, "type", "veth", "peer", "name", "vn", "netns", node).CombinedOutput(); err != nil {
		t.Skipf("SKIPPED: the traffic test needs veth links: %v\n%s", err, out)
	}
	if out, err := exec.Command("ip", "link", "add", "vp", "netns", node, "type", "veth", "peer", "name", "pv", "netns", pods).CombinedOutput(); err != nil {
		t.Fatalf("veth: %v\n%s", err, out)
	}
	// No duplicate address detection: addresses are usable at once.
	run(client, "sysctl -qw net.ipv6.conf.all.accept_dad=0", "sysctl -qw net.ipv6.conf.vc.accept_dad=0")
	run(node, "sysctl -qw net.ipv6.conf.all.accept_dad=0", "sysctl -qw net.ipv6.conf.vn.accept_dad=0", "sysctl -qw net.ipv6.conf.vp.accept_dad=0")
	run(pods, "sysctl -qw net.ipv6.conf.all.accept_dad=0", "sysctl -qw net.ipv6.conf.pv.accept_dad=0")
	run(client,
		"ip addr add 192.168.1.2/24 dev vc", "ip addr add fd00:1::2/64 dev vc nodad",
		"ip link set lo up", "ip link set vc up",
		"ip route add default via 192.168.1.10", "ip -6 route add default via fd00:1::10")
	run(node,
		"ip addr add 192.168.1.10/24 dev vn", "ip addr add fd00:1::10/64 dev vn nodad",
		"ip addr add 10.250.0.1/24 dev vp", "ip addr add fd00:250::1/64 dev vp nodad",
		"ip link set lo up", "ip link set vn up", "ip link set vp up",
		"ip route add 10.244.0.0/16 via 10.250.0.2", "ip -6 route add fd00:244::/56 via fd00:250::2",
		// Frontends without endpoints are routed on, to meet the reject.
		"ip route add 10.96.0.0/12 via 10.250.0.2", "ip -6 route add fd00:96::/108 via fd00:250::2",
		"sysctl -qw net.ipv4.ip_forward=1", "sysctl -qw net.ipv6.conf.all.forwarding=1")
	run(pods,
		"ip addr add 10.250.0.2/24 dev pv", "ip addr add fd00:250::2/64 dev pv nodad",
		"ip addr add 10.244.1.5/32 dev pv", "ip addr add 10.244.2.7/32 dev pv",
		"ip addr add fd00:244:0:1::5/128 dev pv nodad",
		"ip link set lo up", "ip link set pv up",
		"ip route add default via 10.250.0.1", "ip -6 route add default via fd00:250::1")

	ep := func(ip string, port uint16, node string) plan.Endpoint {
		return plan.Endpoint{IP: netip.MustParseAddr(ip), Port: port, Ready: true, Serving: true, NodeName: node}
	}
	svc := func(name string, clusterIPs []string, port plan.Port) plan.Service {
		s := plan.Service{Namespace: "t", Name: name, Type: "ClusterIP", ClusterIPs: nftAddrs(clusterIPs...), Ports: []plan.Port{port}}
		if port.NodePort != 0 {
			s.Type = "NodePort"
		}
		return s
	}
	web := svc("web", []string{"10.96.0.10", "fd00:96::10"}, plan.Port{Name: "http", Protocol: "TCP", Port: 80, NodePort: 30080,
		Endpoints: []plan.Endpoint{ep("10.244.1.5", 8080, "node-a"), ep("10.244.2.7", 8080, "node-b"), ep("fd00:244:0:1::5", 8080, "node-a")},
		Cluster:   []int{0, 1, 2}, External: []int{0, 1, 2}})
	local := svc("local", []string{"10.96.0.13"}, plan.Port{Protocol: "TCP", Port: 80, NodePort: 30081,
		Endpoints: []plan.Endpoint{ep("10.244.1.5", 8081, "node-a"), ep("10.244.2.7", 8081, "node-b")},
		Cluster:   []int{0, 1}, External: []int{0}})
	local.ExternalLocal = true
	noLocal := svc("nolocal", []string{"10.96.0.14"}, plan.Port{Protocol: "TCP", Port: 80, NodePort: 30082,
		Endpoints: []plan.Endpoint{ep("10.244.2.7", 8081, "node-b")},
		Cluster:   []int{0}})
	noLocal.ExternalLocal = true
	empty := svc("empty", []string{"10.96.0.11", "fd00:96::11"}, plan.Port{Protocol: "TCP", Port: 80})
	sticky := svc("sticky", []string{"10.96.0.12"}, plan.Port{Protocol: "TCP", Port: 80,
		Endpoints: []plan.Endpoint{ep("10.244.1.5", 8080, "node-a"), ep("10.244.2.7", 8080, "node-b")},
		Cluster:   []int{0, 1}, External: []int{0, 1}})
	sticky.AffinitySeconds = 60
	lbOther := svc("lb-other", []string{"10.96.0.15"}, plan.Port{Protocol: "TCP", Port: 80,
		Endpoints: []plan.Endpoint{ep("10.244.1.5", 8080, "node-a")}, Cluster: []int{0}, External: []int{0}})
	lbOther.Type, lbOther.LoadBalancerIPs = "LoadBalancer", nftAddrs("203.0.113.10")
	lbOther.SourceRanges = nftPrefixes("198.51.100.0/24")
	lbUs := lbOther
	lbUs.Name, lbUs.ClusterIPs, lbUs.LoadBalancerIPs = "lb-us", nftAddrs("10.96.0.16"), nftAddrs("203.0.113.11")
	lbUs.SourceRanges = nftPrefixes("192.168.1.0/24")

	p := nftPlan(empty, lbOther, lbUs, local, noLocal, sticky, web)
	file := filepath.Join(t.TempDir(), "nftables.nft")
	if err := os.WriteFile(file, NFTables(p), 0o644); err != nil {
		t.Fatal(err)
	}
	nsMust(t, node, "nft", "-f", file)

	nftServe(t, pods, "10.244.1.5:8080", "10.244.2.7:8080", "10.244.1.5:8081", "10.244.2.7:8081", "[fd00:244:0:1::5]:8080")
	// Warm up neighbour discovery on both links, so that no first SYN
	// waits for it.
	for _, pod := range []string{"10.244.1.5:8080", "[fd00:244:0:1::5]:8080"} {
		nftDial(t, client, pod, 1, 3*time.Second)
	}

	for _, tc := range []struct {
		name   string
		target string
		dials  int
		want   map[string]bool // answers wanted ("local peer"), or "refused"/"timeout"
		all    bool            // every wanted answer must be seen
		same   bool            // every dial must get the same answer
	}{
		{name: "cluster IP spreads over both endpoints, masqueraded", target: "10.96.0.10:80", dials: 40, all: true,
			want: map[string]bool{"10.244.1.5:8080 10.250.0.1": true, "10.244.2.7:8080 10.250.0.1": true}},
		{name: "IPv6 cluster IP", target: "[fd00:96::10]:80", dials: 3, all: true,
			want: map[string]bool{"[fd00:244:0:1::5]:8080 fd00:250::1": true}},
		{name: "node port, policy Cluster, masqueraded", target: "192.168.1.10:30080", dials: 40, all: true,
			want: map[string]bool{"10.244.1.5:8080 10.250.0.1": true, "10.244.2.7:8080 10.250.0.1": true}},
		{name: "IPv6 node port", target: "[fd00:1::10]:30080", dials: 3, all: true,
			want: map[string]bool{"[fd00:244:0:1::5]:8080 fd00:250::1": true}},
		{name: "node port, policy Local: local endpoint only, client address kept", target: "192.168.1.10:30081", dials: 10, all: true,
			want: map[string]bool{"10.244.1.5:8081 192.168.1.2": true}},
		{name: "node port, policy Local, no local endpoint: dropped", target: "192.168.1.10:30082", dials: 1, all: true,
			want: map[string]bool{"timeout": true}},
		{name: "no endpoints: rejected", target: "10.96.0.11:80", dials: 2, all: true,
			want: map[string]bool{"refused": true}},
		{name: "IPv6 no endpoints: rejected", target: "[fd00:96::11]:80", dials: 2, all: true,
			want: map[string]bool{"refused": true}},
		{name: "affinity: one endpoint", target: "10.96.0.12:80", dials: 20, same: true,
			want: map[string]bool{"10.244.1.5:8080 10.250.0.1": true, "10.244.2.7:8080 10.250.0.1": true}},
		{name: "load balancer, client outside the source ranges: dropped", target: "203.0.113.10:80", dials: 1, all: true,
			want: map[string]bool{"timeout": true}},
		{name: "load balancer, client inside the source ranges", target: "203.0.113.11:80", dials: 3, all: true,
			want: map[string]bool{"10.244.1.5:8080 10.250.0.1": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A dropped SYN is waited for 1.5 s. An answer may take
			// a SYN retransmission (1 s): an ICMP error that comes back
			// while connect still holds the socket is dropped
			// (TcpExtLockDroppedIcmps), as it does here for IPv6 over
			// veth.
			timeout := 3 * time.Second
			if tc.want["timeout"] {
				timeout = 1500 * time.Millisecond
			}
			got := nftDial(t, client, tc.target, tc.dials, timeout)
			seen := map[string]bool{}
			for _, a := range got {
				if !tc.want[a] {
					t.Errorf("dial %s: got %q, want one of %v", tc.target, a, tc.want)
				}
				seen[a] = true
			}
			if tc.all && len(seen) != len(tc.want) {
				t.Errorf("dial %s ×%d: saw %v, want all of %v", tc.target, tc.dials, seen, tc.want)
			}
			if tc.same && len(seen) != 1 {
				t.Errorf("dial %s ×%d: saw %v, want always the same endpoint", tc.target, tc.dials, seen)
			}
		})
	}
}

// nftHelperEnv tells the test binary, run again inside a namespace, to act
// as TestNFTablesHelper's server or client instead of running tests.
const nftHelperEnv = "NETSPEC_NFT_HELPER"

// nftHelper starts this test binary inside namespace ns as helper role.
func nftHelper(ns, role string, args ...string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns, exe, "-test.run=^TestNFTablesHelper$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), nftHelperEnv+"="+role)
	return cmd
}

// nftServe runs a server on each address inside namespace ns until the
// test ends.
func nftServe(t *testing.T, ns string, addrs ...string) {
	t.Helper()
	cmd := nftHelper(ns, "serve", addrs...)
	stdin, err := cmd.StdinPipe() // the server exits when it closes
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill() // the process this test started, by its id
			<-done
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		t.Fatalf("server in %s did not start: %q %v\n%s", ns, line, err, stderr.String())
	}
	go io.Copy(io.Discard, stdout)
}

// nftDial connects n times to target from namespace ns, each waiting up
// to timeout, and returns the answers: the server's "local peer" line,
// "refused" or "timeout".
func nftDial(t *testing.T, ns, target string, n int, timeout time.Duration) []string {
	t.Helper()
	out, err := nftHelper(ns, "dial", target, strconv.Itoa(n), timeout.String()).Output()
	if err != nil {
		var stderr []byte
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("dial %s: %v\n%s", target, err, stderr)
	}
	var answers []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if a, ok := strings.CutPrefix(l, "answer "); ok {
			answers = append(answers, a)
		}
	}
	if len(answers) != n {
		t.Fatalf("dial %s: %d answers, want %d:\n%s", target, len(answers), n, out)
	}
	return answers
}

// TestNFTablesHelper is not a test: it is the server or client process of
// TestNFTablesTraffic, run inside a namespace.
func TestNFTablesHelper(t *testing.T) {
	role := os.Getenv(nftHelperEnv)
	if role == "" {
		return
	}
	args := flagArgs()
	switch role {
	case "serve":
		for _, a := range args {
			l, err := net.Listen("tcp", a)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			go func() {
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
					fmt.Fprintf(c, "%s %s\n", c.LocalAddr(), host)
					c.Close()
				}
			}()
		}
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	case "dial":
		n, _ := strconv.Atoi(args[1])
		timeout, _ := time.ParseDuration(args[2])
		for range n {
			fmt.Println("answer " + dialOnce(args[0], timeout))
		}
		os.Exit(0)
	}
	fmt.Fprintf(os.Stderr, "unknown helper role %q\n", role)
	os.Exit(2)
}

// flagArgs returns the arguments after "--".
func flagArgs() []string {
	for i, a := range os.Args {
		if a == "--" {
			return os.Args[i+1:]
		}
	}
	return nil
}

func dialOnce(target string, timeout time.Duration) string {
	c, err := net.DialTimeout("tcp", target, timeout)
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case err != nil && os.IsTimeout(err):
		return "timeout"
	case err != nil:
		return "error " + err.Error()
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "error " + err.Error()
	}
	return strings.TrimSpace(line)
}
