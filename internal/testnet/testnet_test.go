package testnet_test

import (
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"netspec.dev/netspec/internal/testnet"
)

// TestNet builds two namespaces joined by a link (IPv4 and IPv6), serves
// in one and dials from the other, over TCP and UDP, and checks that the
// namespaces are gone afterwards.
func TestNet(t *testing.T) {
	testnet.Require(t)
	var names []string
	t.Run("traffic", func(t *testing.T) {
		n := testnet.New(t, "testnet")
		client, server := n.NS("client"), n.NS("server")
		names = []string{client.Name, server.Name}
		for _, name := range names {
			if !strings.HasPrefix(name, "netspec-") || len(name) > 30 {
				t.Errorf("namespace name %q: want netspec-… of at most 30 characters", name)
			}
		}
		if client.Name == server.Name {
			t.Fatalf("two namespaces named %s", client.Name)
		}
		cdev, sdev := testnet.Link(client, []string{"192.0.2.1/24", "2001:db8::1/64"}, server, []string{"192.0.2.2/24", "2001:db8::2/64"})
		if cdev != "eth0" || sdev != "eth0" {
			t.Errorf("Link made %s and %s, want eth0 and eth0", cdev, sdev)
		}
		// A second address and a routed network behind the server.
		client.AddAddr(cdev, "192.0.2.9/24")
		client.AddAddr(cdev, "2001:db8:9::9/64")
		server.Route("2001:db8:9::/64", "2001:db8::1")
		server.AddAddr("lo", "198.51.100.1/32")
		server.AddAddr("lo", "2001:db8:1::1/128")
		client.Route("198.51.100.0/24", "192.0.2.2")
		// IP runs what the other helpers do not express.
		server.IP("addr add 198.51.100.2/32 dev lo scope link")
		if out := server.MustRun("ip", "-4", "addr", "show", "dev", "lo"); !strings.Contains(out, "198.51.100.2/32 scope link") {
			t.Errorf("after IP(addr add … scope link), ip addr in %s says:\n%s", server, out)
		}
		server.Forwarding()
		if out := server.MustRun("sysctl", "-n", "net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding"); strings.Fields(out)[0] != "1" || strings.Fields(out)[1] != "1" {
			t.Errorf("forwarding in %s: sysctl says %q", server, out)
		}
		if client.Fd() < 0 {
			t.Errorf("Fd() = %d", client.Fd())
		}

		server.Serve(t, "backend", "192.0.2.2:8080", "[2001:db8::2]:8080", "198.51.100.1:53")

		const timeout = 2 * time.Second
		for _, tc := range []struct {
			name, got, want string
		}{
			{"TCP", client.DialTCP("192.0.2.2:8080", timeout), "backend 192.0.2.1"},
			{"TCP from a second address", client.DialTCPFrom("192.0.2.9", "192.0.2.2:8080", timeout), "backend 192.0.2.9"},
			{"TCP over IPv6", client.DialTCP("[2001:db8::2]:8080", timeout), "backend 2001:db8::1"},
			{"TCP over IPv6 from a second address", client.DialTCPFrom("2001:db8:9::9", "[2001:db8::2]:8080", timeout), "backend 2001:db8:9::9"},
			{"TCP routed", client.DialTCP("198.51.100.1:53", timeout), "backend 192.0.2.1"},
			{"UDP", client.DialUDP("192.0.2.2:8080", timeout), "backend 192.0.2.1"},
			{"UDP over IPv6", client.DialUDP("[2001:db8::2]:8080", timeout), "backend 2001:db8::1"},
			{"TCP to a closed port", client.DialTCP("192.0.2.2:9999", timeout), "refused"},
			{"UDP to a closed port", client.DialUDP("192.0.2.2:9999", timeout), "refused"},
			{"TCP to nowhere", client.DialTCP("192.0.2.77:80", 300*time.Millisecond), "timeout"},
			{"UDP to nowhere", client.DialUDP("192.0.2.77:80", 300*time.Millisecond), "timeout"},
		} {
			if tc.got != tc.want {
				t.Errorf("%s: got %q, want %q", tc.name, tc.got, tc.want)
			}
		}

		// Each dial is a new connection: a new socket, a new source port.
		var l net.Listener
		if err := server.Do(func() (err error) { l, err = net.Listen("tcp", "192.0.2.2:9000"); return err }); err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports := make(chan string, 10)
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					close(ports)
					return
				}
				_, port, _ := net.SplitHostPort(c.RemoteAddr().String())
				ports <- port
				c.Write([]byte("x\n"))
				c.Close()
			}
		}()
		seen := map[string]bool{}
		for range 5 {
			if got := client.DialTCP("192.0.2.2:9000", timeout); got != "x" {
				t.Fatalf("dial: %q", got)
			}
			seen[<-ports] = true
		}
		if len(seen) != 5 {
			t.Errorf("5 dials came from %d source ports: %v", len(seen), seen)
		}

		// Do runs in the namespace, and returns to where it was.
		var inside string
		if err := client.Do(func() error {
			out, err := exec.Command("ip", "-brief", "addr", "show", "dev", "eth0").Output()
			inside = string(out)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(inside, "192.0.2.1/24") {
			t.Errorf("ip addr inside Do: %q, want the client's eth0", inside)
		}
		if err := client.Do(func() error { panic("boom") }); err == nil || !strings.Contains(err.Error(), "boom") {
			t.Errorf("Do of a panicking function: %v", err)
		}
		if out, err := server.Run("ip", "-brief", "link", "show", "dev", "eth0"); err != nil || !strings.Contains(out, "UP") {
			t.Errorf("Run: %q, %v", out, err)
		}
	})
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns list: %v\n%s", err, out)
	}
	for _, name := range names {
		if strings.Contains(string(out), name) {
			t.Errorf("namespace %s still exists after the test:\n%s", name, out)
		}
	}
}
