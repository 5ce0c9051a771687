package conntrack

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// The test network, in namespaces of its own (never the host's):
//
//	client 192.168.100.2 fd00:100::2
//	  │ veth
//	node   192.168.100.1 fd00:100::1 — forwards; nftables DNATs the frontends
//	  ├ veth 10.244.1.1 fd00:244:1::1 ── backend a 10.244.1.10 fd00:244:1::10
//	  └ veth 10.244.2.1 fd00:244:2::1 ── backend b 10.244.2.10 fd00:244:2::10
//
// The backends answer every UDP datagram (and TCP line) with their name.
type testNet struct {
	t                    *testing.T
	client, node, a, b   string // namespace names
	clientV4, clientV6   *net.UDPConn
	backendA, backendB   netip.Addr
	backendA6, backendB6 netip.Addr
}

const clientPort = 40053

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: the conntrack test with real UDP traffic needs root (network namespaces, veth, nftables); run it as root")
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIPPED: the conntrack test with real UDP traffic needs root and the %s tool: %v", tool, err)
		}
	}
}

func randHex(t *testing.T) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func run(t *testing.T, stdin string, args ...string) {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// addNS creates a namespace named netspec-ct-<role>-<pid>-<random>, with lo
// up, and deletes it when the test ends, failed or not.
func addNS(t *testing.T, role string) string {
	t.Helper()
	name := fmt.Sprintf("netspec-ct-%s-%d-%s", role, os.Getpid(), randHex(t))
	run(t, "", "ip", "netns", "add", name)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v\n%s", name, err, out)
		}
	})
	run(t, "", "ip", "-n", name, "link", "set", "lo", "up")
	// No duplicate address detection on the links to come: their
	// link-local addresses are usable at once.
	err := inNS(name, func() error {
		for _, p := range []string{"/proc/sys/net/ipv6/conf/all/accept_dad", "/proc/sys/net/ipv6/conf/default/accept_dad"} {
			if err := os.WriteFile(p, []byte("0\n"), 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("accept_dad in %s: %v", name, err)
	}
	return name
}

// inNS runs f on an OS thread inside namespace name. The thread goes back
// to its namespace afterwards, or dies with its goroutine if it cannot.
// Sockets f makes stay in name.
func inNS(name string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return // the locked thread is dropped with the goroutine
		}
		defer orig.Close()
		target, err := netns.GetFromName(name)
		if err != nil {
			errc <- err
			return
		}
		defer target.Close()
		if err := netns.Set(target); err != nil {
			errc <- err
			return
		}
		ferr := f()
		if err := netns.Set(orig); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("back to the original namespace: %w", err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

func newTestNet(t *testing.T) *testNet {
	needRoot(t)
	n := &testNet{
		t:         t,
		backendA:  netip.MustParseAddr("10.244.1.10"),
		backendB:  netip.MustParseAddr("10.244.2.10"),
		backendA6: netip.MustParseAddr("fd00:244:1::10"),
		backendB6: netip.MustParseAddr("fd00:244:2::10"),
	}
	n.client = addNS(t, "client")
	n.node = addNS(t, "node")
	n.a = addNS(t, "a")
	n.b = addNS(t, "b")
	link := func(nodeIf, peer string, nodeAddrs, peerAddrs []string, gw4, gw6 string) {
		run(t, "", "ip", "-n", n.node, "link", "add", nodeIf, "type", "veth", "peer", "name", "eth0", "netns", peer)
		for _, a := range nodeAddrs {
			run(t, "", "ip", "-n", n.node, "addr", "add", a, "dev", nodeIf, "nodad")
		}
		for _, a := range peerAddrs {
			run(t, "", "ip", "-n", peer, "addr", "add", a, "dev", "eth0", "nodad")
		}
		run(t, "", "ip", "-n", n.node, "link", "set", nodeIf, "up")
		run(t, "", "ip", "-n", peer, "link", "set", "eth0", "up")
		run(t, "", "ip", "-n", peer, "route", "add", "default", "via", gw4)
		run(t, "", "ip", "-n", peer, "-6", "route", "add", "default", "via", gw6)
	}
	link("to-client", n.client, []string{"192.168.100.1/24", "fd00:100::1/64"}, []string{"192.168.100.2/24", "fd00:100::2/64"}, "192.168.100.1", "fd00:100::1")
	link("to-a", n.a, []string{"10.244.1.1/24", "fd00:244:1::1/64"}, []string{"10.244.1.10/24", "fd00:244:1::10/64"}, "10.244.1.1", "fd00:244:1::1")
	link("to-b", n.b, []string{"10.244.2.1/24", "fd00:244:2::1/64"}, []string{"10.244.2.10/24", "fd00:244:2::10/64"}, "10.244.2.1", "fd00:244:2::1")
	// Forwarding in the node namespace only: /proc/sys/net is the
	// namespace of the thread that opens it.
	err := inNS(n.node, func() error {
		for _, p := range []string{"/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/ipv6/conf/all/forwarding"} {
			if err := os.WriteFile(p, []byte("1\n"), 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("forwarding in %s: %v", n.node, err)
	}
	n.serveUDP(n.a, "a", n.backendA, 53)
	n.serveUDP(n.a, "a", n.backendA6, 53)
	n.serveUDP(n.a, "a:5353", n.backendA, 5353)
	n.serveUDP(n.b, "b", n.backendB, 53)
	n.serveUDP(n.b, "b", n.backendB6, 53)
	n.serveTCP(n.a, "a", n.backendA, 53)
	n.clientV4 = n.clientSocket("192.168.100.2", clientPort)
	n.clientV6 = n.clientSocket("fd00:100::2", clientPort)
	return n
}

// nft loads a ruleset into the node namespace.
func (n *testNet) nft(ruleset string) {
	n.t.Helper()
	run(n.t, ruleset, "ip", "netns", "exec", n.node, "nft", "-f", "-")
}

// serveUDP answers every datagram to addr:port, in namespace ns, with
// "<name> <datagram>".
func (n *testNet) serveUDP(ns, name string, addr netip.Addr, port uint16) {
	n.t.Helper()
	var c *net.UDPConn
	err := inNS(ns, func() (err error) {
		c, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, port)))
		return err
	})
	if err != nil {
		n.t.Fatalf("UDP server %s in %s: %v", name, ns, err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		buf := make([]byte, 1500)
		for {
			k, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			c.WriteToUDPAddrPort([]byte(name+" "+string(buf[:k])), from)
		}
	})
	n.t.Cleanup(func() { c.Close(); wg.Wait() })
}

// serveTCP answers every line on a connection to addr:port with
// "<name> <line>".
func (n *testNet) serveTCP(ns, name string, addr netip.Addr, port uint16) {
	n.t.Helper()
	var l net.Listener
	err := inNS(ns, func() (err error) {
		l, err = net.Listen("tcp", netip.AddrPortFrom(addr, port).String())
		return err
	})
	if err != nil {
		n.t.Fatalf("TCP server %s in %s: %v", name, ns, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					c.Write([]byte(name + " " + line))
				}
			})
		}
	})
	n.t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
}

// clientSocket is a UDP socket of the client namespace bound to a fixed
// port, so that every datagram it sends to one frontend is one flow.
func (n *testNet) clientSocket(addr string, port uint16) *net.UDPConn {
	n.t.Helper()
	var c *net.UDPConn
	err := inNS(n.client, func() (err error) {
		c, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(addr), port)))
		return err
	})
	if err != nil {
		n.t.Fatalf("client socket %s:%d: %v", addr, port, err)
	}
	n.t.Cleanup(func() { c.Close() })
	return c
}

var nonce int

// ask sends one datagram from c to to and returns the name of the backend
// that answered. Lost datagrams are sent again, from the same port; stale
// answers to earlier datagrams are skipped.
func (n *testNet) ask(c *net.UDPConn, to string) string {
	n.t.Helper()
	dst := netip.MustParseAddrPort(to)
	for range 5 {
		nonce++
		q := fmt.Sprintf("q%d", nonce)
		if _, err := c.WriteToUDPAddrPort([]byte(q), dst); err != nil {
			n.t.Fatalf("send to %s: %v", to, err)
		}
		buf := make([]byte, 1500)
		deadline := time.Now().Add(time.Second)
		for {
			c.SetReadDeadline(deadline)
			k, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				n.t.Logf("no answer from %s within 1s: sending again", to)
				break // timed out: send again
			}
			name, got, _ := strings.Cut(string(buf[:k]), " ")
			if got != q {
				continue
			}
			if unmap(from) != unmap(dst) {
				n.t.Fatalf("answer from %s, want from the frontend %s (no un-DNAT?)", from, to)
			}
			return name
		}
	}
	n.t.Fatalf("no answer from %s from %s", to, c.LocalAddr())
	return ""
}

// entries lists the node namespace's conntrack entries of the test
// traffic: "proto origdst>replysrc".
func (n *testNet) entries() map[string]bool {
	n.t.Helper()
	ns, err := netns.GetFromName(n.node)
	if err != nil {
		n.t.Fatal(err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		n.t.Fatal(err)
	}
	defer h.Close()
	m := map[string]bool{}
	for _, fam := range []netlink.InetFamily{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		flows, err := h.ConntrackTableList(netlink.ConntrackTable, fam)
		if err != nil {
			n.t.Fatal(err)
		}
		for _, f := range flows {
			if f.Forward.Protocol != ProtoUDP && f.Forward.Protocol != ProtoTCP {
				continue
			}
			proto := map[uint8]string{ProtoUDP: "udp", ProtoTCP: "tcp"}[f.Forward.Protocol]
			od := netip.AddrPortFrom(mustAddr(f.Forward.DstIP), f.Forward.DstPort)
			rs := netip.AddrPortFrom(mustAddr(f.Reverse.SrcIP), f.Reverse.SrcPort)
			m[fmt.Sprintf("%s %s>%s", proto, od, rs)] = true
		}
	}
	return m
}

func unmap(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

func mustAddr(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

// deleteAt is Delete in the node namespace, by an fd of it.
func (n *testNet) deleteAt(flows []Flow) (int, error) {
	n.t.Helper()
	ns, err := netns.GetFromName(n.node)
	if err != nil {
		n.t.Fatal(err)
	}
	defer ns.Close()
	return Delete(int(ns), flows)
}

const rulesetA = `
table ip t {
	chain pre {
		type nat hook prerouting priority dstnat; policy accept;
		ip daddr 10.96.0.10 udp dport 53 dnat to 10.244.1.10:53
	}
}
table ip6 t6 {
	chain pre {
		type nat hook prerouting priority dstnat; policy accept;
		ip6 daddr fd00:96::10 udp dport 53 dnat to [fd00:244:1::10]:53
	}
}
`

const swapToB = `
flush chain ip t pre
add rule ip t pre ip daddr 10.96.0.10 udp dport 53 dnat to 10.244.2.10:53
flush chain ip6 t6 pre
add rule ip6 t6 pre ip6 daddr fd00:96::10 udp dport 53 dnat to [fd00:244:2::10]:53
`

// TestStaleUDPEntry shows the stale entry and its cleanup with real
// traffic: a client keeps its source port, the service's endpoint moves
// from backend a to b; the old entry keeps sending it to a until Delete.
func TestStaleUDPEntry(t *testing.T) {
	n := newTestNet(t)
	n.nft(rulesetA)
	const fe4, fe6 = "10.96.0.10:53", "[fd00:96::10]:53"

	for _, c := range []struct {
		conn *net.UDPConn
		fe   string
	}{{n.clientV4, fe4}, {n.clientV6, fe6}} {
		if got := n.ask(c.conn, c.fe); got != "a" {
			t.Fatalf("%s: answered by %q, want a", c.fe, got)
		}
	}

	n.nft(swapToB)
	for _, c := range []struct {
		conn *net.UDPConn
		fe   string
	}{{n.clientV4, fe4}, {n.clientV6, fe6}} {
		got := n.ask(c.conn, c.fe)
		t.Logf("%s after the rule moved to b, without cleanup: answered by %s", c.fe, got)
		if got != "a" {
			t.Fatalf("%s: answered by %q, want the stale a (the conntrack entry outlives the rule)", c.fe, got)
		}
	}
	before := n.entries()
	for _, e := range []string{"udp 10.96.0.10:53>10.244.1.10:53", "udp [fd00:96::10]:53>[fd00:244:1::10]:53"} {
		if !before[e] {
			t.Fatalf("no entry %s in %v", e, before)
		}
	}

	deleted, err := n.deleteAt([]Flow{
		{Endpoint: netip.MustParseAddrPort("10.244.1.10:53"), Frontend: netip.MustParseAddrPort(fe4), Protocol: ProtoUDP},
		{Endpoint: netip.MustParseAddrPort("[fd00:244:1::10]:53"), Frontend: netip.MustParseAddrPort(fe6), Protocol: ProtoUDP},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Delete: %d entries deleted", deleted)
	if deleted != 2 {
		t.Errorf("deleted %d entries, want 2 (one IPv4, one IPv6)", deleted)
	}

	for _, c := range []struct {
		conn *net.UDPConn
		fe   string
	}{{n.clientV4, fe4}, {n.clientV6, fe6}} {
		got := n.ask(c.conn, c.fe)
		t.Logf("%s after Delete: answered by %s", c.fe, got)
		if got != "b" {
			t.Fatalf("%s: answered by %q after Delete, want b", c.fe, got)
		}
	}
	after := n.entries()
	for _, e := range []string{"udp 10.96.0.10:53>10.244.2.10:53", "udp [fd00:96::10]:53>[fd00:244:2::10]:53"} {
		if !after[e] {
			t.Errorf("no entry %s after Delete in %v", e, after)
		}
	}

	// Nothing more to delete.
	if deleted, err := n.deleteAt([]Flow{{Endpoint: netip.MustParseAddrPort("10.244.1.10:53"), Frontend: netip.MustParseAddrPort(fe4)}}); err != nil || deleted != 0 {
		t.Errorf("second Delete = %d, %v; want 0", deleted, err)
	}
}

// TestDeleteOnlyMatching: entries of TCP, of another endpoint, of another
// port of the endpoint and of another frontend stay.
func TestDeleteOnlyMatching(t *testing.T) {
	n := newTestNet(t)
	n.nft(`
table ip t {
	chain pre {
		type nat hook prerouting priority dstnat; policy accept;
		ip daddr 10.96.0.10 udp dport 53 dnat to 10.244.1.10:53
		ip daddr 10.96.0.10 tcp dport 53 dnat to 10.244.1.10:53
		ip daddr 10.96.0.11 udp dport 53 dnat to 10.244.2.10:53
		ip daddr 10.96.0.12 udp dport 53 dnat to 10.244.1.10:53
		ip daddr 10.96.0.13 udp dport 53 dnat to 10.244.1.10:5353
	}
}
`)
	for fe, want := range map[string]string{"10.96.0.10:53": "a", "10.96.0.11:53": "b", "10.96.0.12:53": "a", "10.96.0.13:53": "a:5353"} {
		if got := n.ask(n.clientV4, fe); got != want {
			t.Fatalf("%s: answered by %q, want %q", fe, got, want)
		}
	}
	// A TCP connection to the same frontend and endpoint, kept open.
	var tc net.Conn
	if err := inNS(n.client, func() (err error) {
		tc, err = net.DialTimeout("tcp", "10.96.0.10:53", 5*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	tcpAsk := func() string {
		t.Helper()
		tc.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := tc.Write([]byte("hello\n")); err != nil {
			t.Fatalf("TCP write: %v", err)
		}
		line, err := bufio.NewReader(tc).ReadString('\n')
		if err != nil {
			t.Fatalf("TCP read: %v", err)
		}
		return line
	}
	if got := tcpAsk(); got != "a hello\n" {
		t.Fatalf("TCP answer %q", got)
	}

	all := []string{
		"udp 10.96.0.10:53>10.244.1.10:53",
		"tcp 10.96.0.10:53>10.244.1.10:53",
		"udp 10.96.0.11:53>10.244.2.10:53",
		"udp 10.96.0.12:53>10.244.1.10:53",
		"udp 10.96.0.13:53>10.244.1.10:5353",
	}
	check := func(step string, gone ...string) {
		t.Helper()
		have := n.entries()
		for _, e := range all {
			want := !contains(gone, e)
			if have[e] != want {
				t.Errorf("%s: entry %s present = %v, want %v", step, e, have[e], want)
			}
		}
	}
	check("before")

	a53 := netip.MustParseAddrPort("10.244.1.10:53")
	steps := []struct {
		name  string
		flows []Flow
		want  int
		gone  []string
	}{
		{name: "udp via 10.96.0.10", flows: []Flow{{Endpoint: a53, Frontend: netip.MustParseAddrPort("10.96.0.10:53"), Protocol: ProtoUDP}}, want: 1, gone: all[:1]},
		{name: "again", flows: []Flow{{Endpoint: a53, Frontend: netip.MustParseAddrPort("10.96.0.10:53"), Protocol: ProtoUDP}}, want: 0, gone: all[:1]},
		{name: "another endpoint's frontend", flows: []Flow{{Endpoint: a53, Frontend: netip.MustParseAddrPort("10.96.0.11:53")}}, want: 0, gone: all[:1]},
		{name: "udp, any frontend", flows: []Flow{{Endpoint: a53}}, want: 1, gone: []string{all[0], all[3]}},
		{name: "tcp", flows: []Flow{{Endpoint: a53, Frontend: netip.MustParseAddrPort("10.96.0.10:53"), Protocol: ProtoTCP}}, want: 1, gone: []string{all[0], all[3], all[1]}},
	}
	for _, s := range steps {
		// Delete in the current namespace (nsFd 0), on a thread inside
		// the node namespace.
		var deleted int
		err := inNS(n.node, func() (err error) {
			deleted, err = Delete(0, s.flows)
			return err
		})
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		t.Logf("Delete %s: %d deleted", s.name, deleted)
		if deleted != s.want {
			t.Errorf("%s: deleted %d, want %d", s.name, deleted, s.want)
		}
		check(s.name, s.gone...)
		if s.name == "udp, any frontend" {
			// The TCP entry survived every UDP delete: the connection works.
			if got := tcpAsk(); got != "a hello\n" {
				t.Fatalf("TCP answer after the UDP deletes: %q", got)
			}
		}
	}
	// The untouched flows still reach their backends.
	for fe, want := range map[string]string{"10.96.0.11:53": "b", "10.96.0.13:53": "a:5353"} {
		if got := n.ask(n.clientV4, fe); got != want {
			t.Errorf("%s: answered by %q, want %q", fe, got, want)
		}
	}
}

func contains(s []string, x string) bool {
	for _, e := range s {
		if e == x {
			return true
		}
	}
	return false
}
