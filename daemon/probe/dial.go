package probe

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// probeConn is the TCP connection of one probe, driven with plain system
// calls in the probing goroutine: a non-blocking socket, connect, and
// poll(2) when the kernel has to wait. net.Dialer costs ten system calls
// and a netpoller hand-off per connection (socket, two epoll_ctl,
// getsockopt, getsockname, getpeername, TCP_NODELAY, close); this costs
// four when the peer answers at once (socket, SO_LINGER, connect, close),
// plus a poll for each wait. A goroutine blocked in poll holds its OS
// thread; the workers are bounded, so are the threads.
//
// The context ends the connection: when it is done, the socket is shut
// down, which wakes a poll in progress, and the call returns the
// context's error. A probeConn is used by one goroutine; only that
// cancellation comes from another.
type probeConn struct {
	fd   int
	addr netip.AddrPort
	ctx  context.Context
	stop func() bool // unregisters the cancellation

	mu     sync.Mutex // orders the cancellation's shutdown and Close
	closed bool       // fd is closed: the cancellation must not touch it
}

// dialProbe connects to addr over TCP with SO_LINGER set to linger
// seconds (0: close resets the connection). Errors read as net.Dialer's
// ("dial tcp 10.0.0.1:80: connect: connection refused").
func dialProbe(ctx context.Context, addr netip.AddrPort, linger int) (*probeConn, error) {
	if err := ctx.Err(); err != nil {
		return nil, dialError(addr, err)
	}
	family, sa, err := sockaddr(addr)
	if err != nil {
		return nil, dialError(addr, err)
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, dialError(addr, os.NewSyscallError("socket", err))
	}
	if err := unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: int32(linger)}); err != nil {
		unix.Close(fd)
		return nil, dialError(addr, os.NewSyscallError("setsockopt", err))
	}
	c := &probeConn{fd: fd, addr: addr, ctx: ctx}
	c.stop = context.AfterFunc(ctx, c.abort)
	err = connect(fd, sa)
	switch err {
	case nil:
		return c, nil
	case unix.EINPROGRESS, unix.EALREADY:
	default:
		c.Close()
		return nil, dialError(addr, os.NewSyscallError("connect", err))
	}
	if err := c.wait(unix.POLLOUT); err != nil {
		c.Close()
		return nil, dialError(addr, err)
	}
	soerr, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
	if err == nil && soerr != 0 {
		err = os.NewSyscallError("connect", unix.Errno(soerr))
	} else if err != nil {
		err = os.NewSyscallError("getsockopt", err)
	}
	if err != nil {
		c.Close()
		return nil, dialError(addr, err)
	}
	return c, nil
}

func dialError(addr netip.AddrPort, err error) error {
	return &net.OpError{Op: "dial", Net: "tcp", Addr: net.TCPAddrFromAddrPort(addr), Err: err}
}

// zoneIndex is the interface index of an IPv6 zone: a number or a name.
func zoneIndex(zone string) (uint32, error) {
	if n, err := strconv.ParseUint(zone, 10, 32); err == nil {
		return uint32(n), nil
	}
	ifi, err := net.InterfaceByName(zone)
	if err != nil {
		return 0, err
	}
	return uint32(ifi.Index), nil
}

// abort is the cancellation: it shuts the socket down (a poll in progress
// wakes up) unless Close came first.
func (c *probeConn) abort() {
	c.mu.Lock()
	if !c.closed {
		unix.Shutdown(c.fd, unix.SHUT_RDWR)
	}
	c.mu.Unlock()
}

// wait polls the socket for events until one comes or the context ends
// (its error then). POLLERR and POLLHUP end the wait too: the caller's
// next call reports them.
func (c *probeConn) wait(events int16) error {
	fds := []unix.PollFd{{Fd: int32(c.fd), Events: events}}
	for {
		if err := c.ctx.Err(); err != nil {
			return err
		}
		timeout := -1
		if d, ok := c.ctx.Deadline(); ok {
			ms := time.Until(d).Milliseconds() + 1 // poll rounds down
			if ms <= 0 {
				return context.DeadlineExceeded
			}
			timeout = int(min(ms, 1<<30))
		}
		n, err := unix.Poll(fds, timeout)
		switch {
		case err == unix.EINTR || err == nil && n == 0:
			continue // a signal, or the deadline (checked above)
		case err != nil:
			return os.NewSyscallError("poll", err)
		}
		if err := c.ctx.Err(); err != nil {
			return err // woken by the cancellation's shutdown
		}
		return nil
	}
}

// Read reads into b, waiting for data; 0 bytes at the end of the stream
// is io.EOF.
func (c *probeConn) Read(b []byte) (int, error) {
	for {
		n, err := unix.Read(c.fd, b)
		switch err {
		case nil:
			if n == 0 && len(b) > 0 {
				if err := c.ctx.Err(); err != nil {
					return 0, err // the cancellation's shutdown
				}
				return 0, io.EOF
			}
			return n, nil
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			if err := c.wait(unix.POLLIN); err != nil {
				return 0, err
			}
		default:
			return 0, os.NewSyscallError("read", err)
		}
	}
}

// Write writes all of b, waiting for room in the socket's buffer.
func (c *probeConn) Write(b []byte) (int, error) {
	done := 0
	for done < len(b) {
		n, err := unix.Write(c.fd, b[done:])
		switch err {
		case nil:
			done += n
		case unix.EINTR:
		case unix.EAGAIN:
			if err := c.wait(unix.POLLOUT); err != nil {
				return done, err
			}
		default:
			if cerr := c.ctx.Err(); cerr != nil {
				return done, cerr // EPIPE after the cancellation's shutdown
			}
			return done, os.NewSyscallError("write", err)
		}
	}
	return done, nil
}

// Close closes the socket (with the linger given to dialProbe) and stops
// the cancellation.
func (c *probeConn) Close() error {
	if c.stop() {
		c.closed = true // the cancellation will not run
		return closeFD(c.fd)
	}
	c.mu.Lock() // the cancellation runs or ran: wait for it
	defer c.mu.Unlock()
	if c.closed {
		return errors.New("close of a closed probe connection")
	}
	c.closed = true
	return closeFD(c.fd)
}

func closeFD(fd int) error {
	if err := unix.Close(fd); err != nil {
		return os.NewSyscallError("close", err)
	}
	return nil
}
