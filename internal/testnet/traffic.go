package testnet

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Serve starts, inside the namespace, a TCP and a UDP server on each
// address ("10.244.1.5:8080", "[fd00::5]:8080"). Both answer every
// connection or datagram with one line, "NAME CLIENT-IP\n": name, then
// the source address the server saw. The servers run on goroutines of the
// test process and stop when t ends (at the Net's cleanup at the latest).
func (ns *NS) Serve(t testing.TB, name string, addrs ...string) {
	t.Helper()
	var (
		tcp []net.Listener
		udp []net.PacketConn
	)
	c := &closer{}
	var wg sync.WaitGroup
	c.fn = func() {
		for _, l := range tcp {
			l.Close()
		}
		for _, p := range udp {
			p.Close()
		}
		wg.Wait()
	}
	ns.net.track(c)
	t.Cleanup(c.close)
	for _, addr := range addrs {
		err := ns.Do(func() error {
			l, err := net.Listen("tcp", addr)
			if err != nil {
				return err
			}
			tcp = append(tcp, l)
			p, err := net.ListenPacket("udp", addr)
			if err != nil {
				return err
			}
			udp = append(udp, p)
			return nil
		})
		if err != nil {
			t.Fatalf("testnet: serve %s in %s: %v", addr, ns, err)
		}
	}
	for _, l := range tcp {
		wg.Go(func() { ServeLines(l, name) })
	}
	for _, p := range udp {
		wg.Go(func() { serveUDP(p, name) })
	}
}

// ServeLines answers each connection on l with "NAME CLIENT-IP\n" and
// returns once l is closed and every answer is written: the TCP server of
// Serve, for a test that closes its listener itself (a pod whose server
// stops).
func ServeLines(l net.Listener, name string) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			if errClosed(err) {
				return
			}
			time.Sleep(10 * time.Millisecond) // EMFILE and the like
			continue
		}
		wg.Go(func() {
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			fmt.Fprintf(c, "%s %s\n", name, hostOf(c.RemoteAddr()))
		})
	}
}

func serveUDP(p net.PacketConn, name string) {
	buf := make([]byte, 2048)
	for {
		_, from, err := p.ReadFrom(buf)
		if err != nil {
			if errClosed(err) {
				return
			}
			time.Sleep(10 * time.Millisecond) // an ICMP error of an earlier answer, say
			continue
		}
		p.WriteTo([]byte(name+" "+hostOf(from)+"\n"), from)
	}
}

// hostOf returns the IP address of a TCP or UDP address, IPv4-mapped
// addresses unmapped.
func hostOf(a net.Addr) string {
	var ap netip.AddrPort
	switch a := a.(type) {
	case *net.TCPAddr:
		ap = a.AddrPort()
	case *net.UDPAddr:
		ap = a.AddrPort()
	default:
		return a.String()
	}
	return ap.Addr().Unmap().WithZone("").String()
}

// DialTCP connects from the namespace to target ("10.96.0.10:80",
// "[fd00::10]:80") with a new socket (a new source port, so a new
// connection for conntrack) and returns the line the server answered,
// without its newline; or "refused" (RST or ICMP port unreachable),
// "timeout" (no answer to the SYN within timeout), or "error: …".
// timeout bounds the connect and then the read of the answer.
func (ns *NS) DialTCP(target string, timeout time.Duration) string {
	return ns.DialTCPFrom("", target, timeout)
}

// DialTCPFrom is DialTCP from source address src (one of the namespace's
// addresses; "" lets the kernel pick).
func (ns *NS) DialTCPFrom(src, target string, timeout time.Duration) string {
	d := net.Dialer{Timeout: timeout, KeepAlive: -1}
	if src != "" {
		ip := net.ParseIP(src)
		if ip == nil {
			return fmt.Sprintf("error: source %q is not an IP address", src)
		}
		d.LocalAddr = &net.TCPAddr{IP: ip}
	}
	var c net.Conn
	err := ns.Do(func() error {
		var err error
		c, err = d.Dial("tcp", target)
		return err
	})
	if err != nil {
		return dialError(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(timeout))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "error: connected, no answer: " + err.Error()
	}
	return strings.TrimSuffix(line, "\n")
}

// DialUDP sends one datagram from the namespace to target with a new
// socket (a new source port) and returns the line that answered it, or
// "refused" (ICMP port unreachable), "timeout" (no answer within
// timeout), or "error: …".
func (ns *NS) DialUDP(target string, timeout time.Duration) string {
	return ns.DialUDPFrom("", target, timeout)
}

// DialUDPFrom is DialUDP from the local address src ("ip:port"; "" for
// any). With a fixed port every datagram belongs to one conntrack entry,
// which is how a client that keeps its socket behaves.
func (ns *NS) DialUDPFrom(src, target string, timeout time.Duration) string {
	var c net.Conn
	err := ns.Do(func() error {
		d := net.Dialer{}
		if src != "" {
			laddr, err := net.ResolveUDPAddr("udp", src)
			if err != nil {
				return err
			}
			d.LocalAddr = laddr
		}
		var err error
		c, err = d.Dial("udp", target)
		return err
	})
	if err != nil {
		return dialError(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("hello\n")); err != nil {
		return dialError(err)
	}
	buf := make([]byte, 2048)
	n, err := c.Read(buf)
	if err != nil {
		return dialError(err)
	}
	return strings.TrimSuffix(string(buf[:n]), "\n")
}

// dialError names the outcome of a failed dial.
func dialError(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "error: " + err.Error()
}

// errClosed reports whether err is the error of a closed socket.
func errClosed(err error) bool { return errors.Is(err, net.ErrClosed) }
