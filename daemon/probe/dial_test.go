package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// listenFull returns the address of a listener on 127.0.0.1 whose accept
// queue is full (backlog 0, one connection never accepted): the kernel
// drops further SYNs, so a connect to it waits until it is given up.
func listenFull(t *testing.T) netip.AddrPort {
	t.Helper()
	_, ap := fullListener(t)
	return ap
}

// fullListener is listenFull's listener, for a test that later frees its
// queue (Accept: a connect's SYN, sent again a second after the first, is
// then answered) or closes it (the SYN sent again is then refused). It is
// closed when the test ends.
func fullListener(t *testing.T) (net.Listener, netip.AddrPort) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "listener")
	defer f.Close() // the listener holds a duplicate
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	lis, err := net.FileListener(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	ap := netip.MustParseAddrPort(lis.Addr().String())
	filler, err := net.Dial("tcp", ap.String()) // the one connection the queue holds
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { filler.Close() })
	return lis, ap
}

// waitSynSent waits until a socket of this process's network namespace
// is in SYN-SENT towards port, as /proc/net/tcp shows (bounded).
func waitSynSent(t *testing.T, port uint16) {
	t.Helper()
	want := fmt.Sprintf(":%04X 02 ", port) // remote port, state SYN_SENT
	for range 3000 {
		b, err := os.ReadFile("/proc/net/tcp")
		if err != nil {
			t.Skipf("cannot see the socket's state: %v", err)
		}
		if strings.Contains(string(b), want) {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("no socket in SYN-SENT to port %d", port)
}

// refusedPort returns a loopback address of the family of host on which
// nothing listens.
func refusedPort(t *testing.T, host string) netip.AddrPort {
	t.Helper()
	lis, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Skipf("no %s loopback here: %v", host, err)
	}
	ap := netip.MustParseAddrPort(lis.Addr().String())
	lis.Close()
	return ap
}

func TestDialProbe(t *testing.T) {
	for _, host := range []string{"127.0.0.1", "::1"} {
		t.Run(host, func(t *testing.T) {
			lis, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
			if err != nil {
				t.Skipf("no %s loopback here: %v", host, err)
			}
			defer lis.Close()
			got := make(chan string, 1)
			go func() {
				conn, err := lis.Accept()
				if err != nil {
					return
				}
				defer conn.Close()
				b, _ := io.ReadAll(conn) // until the probe closes
				got <- string(b)
			}()
			ap := netip.MustParseAddrPort(lis.Addr().String())
			c, err := dialProbe(testCtx(t), ap, httpLinger)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Write([]byte("ping")); err != nil {
				t.Fatal(err)
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if s := <-got; s != "ping" {
				t.Errorf("the server read %q, want \"ping\"", s)
			}

			refused := refusedPort(t, host)
			_, err = dialProbe(testCtx(t), refused, tcpSocketLinger)
			want := "dial tcp " + refused.String() + ": connect: connection refused"
			if err == nil || err.Error() != want {
				t.Errorf("dial to a closed port: %v, want %q", err, want)
			}
		})
	}
}

// TestDialProbeIPv4Mapped dials an IPv4-mapped IPv6 address over IPv4, as
// net.Dialer does.
func TestDialProbeIPv4Mapped(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	ap := netip.MustParseAddrPort(lis.Addr().String())
	mapped := netip.AddrPortFrom(netip.AddrFrom16(ap.Addr().As16()), ap.Port())
	c, err := dialProbe(testCtx(t), mapped, 0)
	if err != nil {
		t.Fatalf("dial %v: %v", mapped, err)
	}
	c.Close()
}

// TestDialProbeCancel ends a connect that the peer does not answer and a
// read it does not answer, by cancelling the context and by its
// deadline.
func TestDialProbeCancel(t *testing.T) {
	t.Run("connect, cancelled", func(t *testing.T) {
		ap := listenFull(t)
		ctx, cancel := context.WithCancel(testCtx(t))
		errc := make(chan error, 1)
		go func() {
			c, err := dialProbe(ctx, ap, 0)
			if err == nil {
				c.Close()
			}
			errc <- err
		}()
		waitSynSent(t, ap.Port())
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "dial tcp "+ap.String()+": ") {
			t.Errorf("cancelled connect: %v, want a dial error wrapping context.Canceled", err)
		}
	})
	t.Run("connect, deadline", func(t *testing.T) {
		ap := listenFull(t)
		ctx, cancel := context.WithTimeout(testCtx(t), 50*time.Millisecond)
		defer cancel()
		if _, err := dialProbe(ctx, ap, 0); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("connect past its deadline: %v, want context.DeadlineExceeded", err)
		}
	})
	t.Run("read, cancelled", func(t *testing.T) {
		lis, accepted := silentListener(t)
		ctx, cancel := context.WithCancel(testCtx(t))
		c, err := dialProbe(ctx, netip.MustParseAddrPort(lis.Addr().String()), httpLinger)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		peer := <-accepted
		defer peer.Close()
		errc := make(chan error, 1)
		go func() {
			_, err := c.Read(make([]byte, 10))
			errc <- err
		}()
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled read: %v, want context.Canceled", err)
		}
	})
}

// silentListener listens on 127.0.0.1 and hands over the first connection
// it accepts, which the test holds open without a word; the listener is
// closed when the test ends.
func silentListener(t *testing.T) (net.Listener, <-chan net.Conn) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	accepted := make(chan net.Conn, 1)
	go func() {
		if conn, err := lis.Accept(); err == nil {
			accepted <- conn
		}
	}()
	return lis, accepted
}
