package probe

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"netspec.dev/netspec/plan"
)

// reactor runs the tcpSocket and plain-http httpGet probes of a Prober in
// one goroutine with its own epoll instance, as HAProxy's and Envoy's
// health checkers do: the probes due together are started together
// (socket, connect, and for httpGet the request), one epoll_wait returns
// every connection that became ready in the meantime, and the loop moves
// each on (connect done, response read and parsed) without waking a
// goroutine or a thread per probe. On a node that probes thousands of
// endpoints a wake-up costs more than the connect itself
// (docs/performance.md, "The prober's own cost").
//
// The Prober hands it runs (submit) and their cancellations (cancel: the
// probe's timeout, Set removing the check, Close); it reports each result
// through Prober.finish, in its own goroutine. Everything of an op but its
// place in the submission and cancellation lists belongs to that goroutine.
// An https redirect leaves the loop: the rest of that probe runs in a
// goroutine of its own over the worker path (netChecker.httpFollow).
type reactor struct {
	p    *Prober
	net  *netChecker
	epfd int
	evfd int // an eventfd in epfd: submit and cancel wake the loop with it

	mu       sync.Mutex
	subs     []*rop // submitted, not started
	cancels  []cancelOp
	results  []handedResult // of the goroutines of https redirects
	sleeping bool           // the loop waits in epoll_wait for events
	closed   bool

	// Of the loop only.
	fds     map[int32]*rop    // ops by socket
	active  map[*rop]struct{} // started, not finished
	later   []*rop            // redirects to connect after the batch
	handoff sync.WaitGroup    // the goroutines of https redirects
	buf     []byte            // read buffer
	done    chan struct{}     // closed when the loop has returned
}

// rop is one probe run in the reactor.
type rop struct {
	c     *check
	start time.Time
	timer Timer

	req       *http.Request // nil for tcpSocket
	reqBytes  []byte        // req on the wire
	redirects int
	wrote     int // bytes of reqBytes written

	fd         int32 // -1 when no socket is open
	addr       netip.AddrPort
	connecting bool
	resp       []byte // what was read of the response so far
	readErr    error  // io.EOF or the read's error, once the stream ended
	startErr   error  // why the request cannot be sent (a bad port)

	handed context.CancelCauseFunc // the https redirect's goroutine runs, nil else
	done   bool
}

type cancelOp struct {
	op    *rop
	cause error
}

type handedResult struct {
	op      *rop
	warning string
	err     error
	cause   error
}

// reactorCheck reports whether the reactor runs t's probes: tcpSocket,
// and httpGet over http (https needs crypto/tls's connection).
func reactorCheck(t *Target) bool {
	if t.Probe.PortName != "" {
		return false // fails without a connection: a worker's run
	}
	switch t.Probe.Action {
	case plan.ProbeTCPSocket:
		return true
	case plan.ProbeHTTPGet:
		return t.Probe.Scheme == "" || equalFold(t.Probe.Scheme, "http")
	}
	return false
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		x, y := a[i]|0x20, b[i]|0x20
		if x != y {
			return false
		}
	}
	return true
}

func newReactor(p *Prober, nc *netChecker) (*reactor, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	evfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, os.NewSyscallError("eventfd", err)
	}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, evfd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(evfd)}); err != nil {
		unix.Close(epfd)
		unix.Close(evfd)
		return nil, os.NewSyscallError("epoll_ctl", err)
	}
	r := &reactor{
		p: p, net: nc, epfd: epfd, evfd: evfd,
		fds:    map[int32]*rop{},
		active: map[*rop]struct{}{},
		buf:    make([]byte, 4096),
		done:   make(chan struct{}),
	}
	go r.loop()
	return r, nil
}

// wake makes the loop return from epoll_wait. The caller holds r.mu.
func (r *reactor) wake() {
	if r.sleeping {
		r.sleeping = false
		var one = [8]byte{1}
		unix.Write(r.evfd, one[:])
	}
}

// submit hands the loop a run of c, started at start; it returns the
// run's cancellation (its cause: errStopped or c.timeoutErr). The caller
// holds p.mu.
func (r *reactor) submit(c *check, start time.Time) func(error) {
	op := &rop{c: c, start: start, fd: -1, addr: netip.AddrPortFrom(c.target.Addr, c.target.Probe.Port)}
	if c.target.Probe.Action == plan.ProbeHTTPGet {
		if c.httpReq == nil {
			c.httpReq = httpRequest(c.target)
			c.httpReqBytes = requestBytes(c.httpReq)
		}
		op.req, op.reqBytes = c.httpReq, c.httpReqBytes
		if err := op.setAddr(); err != nil {
			op.startErr = err // reported by start
		}
	}
	cancel := func(cause error) {
		r.mu.Lock()
		r.cancels = append(r.cancels, cancelOp{op, cause})
		r.wake()
		r.mu.Unlock()
	}
	op.timer = r.p.clock.AfterFunc(c.timeout, func() { cancel(c.timeoutErr) })
	r.mu.Lock()
	r.subs = append(r.subs, op)
	r.wake()
	r.mu.Unlock()
	return cancel
}

// setAddr sets the op's address to the request's port (80 without one).
func (op *rop) setAddr() error {
	port := op.req.URL.Port()
	if port == "" {
		port = "80"
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return errBadPort(port)
	}
	op.addr = netip.AddrPortFrom(op.c.target.Addr, uint16(n))
	return nil
}

type errBadPort string

func (e errBadPort) Error() string { return "bad port " + strconv.Quote(string(e)) }

// requestBytes is req as written on the wire.
func requestBytes(req *http.Request) []byte {
	var b bytesWriter
	req.Write(&b) // writes to memory do not fail
	return b
}

type bytesWriter []byte

func (b *bytesWriter) Write(p []byte) (int, error) {
	*b = append(*b, p...)
	return len(p), nil
}

// close ends the loop: every run in it ends as stopped (Close has
// cancelled them), then the loop returns. It waits for that.
func (r *reactor) close() {
	r.mu.Lock()
	r.closed = true
	r.wake()
	r.mu.Unlock()
	<-r.done
}

func (r *reactor) loop() {
	defer close(r.done)
	events := make([]unix.EpollEvent, 256)
	var subs []*rop
	var cancels []cancelOp
	var results []handedResult
	for {
		r.mu.Lock()
		subs, r.subs = r.subs, subs[:0]
		cancels, r.cancels = r.cancels, cancels[:0]
		results, r.results = r.results, results[:0]
		closed := r.closed
		r.mu.Unlock()

		for _, x := range cancels {
			r.abort(x.op, x.cause)
		}
		for _, x := range results {
			r.handedDone(x)
		}
		if closed {
			r.shutdown(subs)
			return
		}
		for _, op := range subs {
			if !op.done {
				r.active[op] = struct{}{}
				r.start(op)
			}
		}
		for _, op := range r.later {
			if !op.done {
				r.start(op)
			}
		}
		clear(r.later)
		r.later = r.later[:0]
		clear(subs)
		clear(cancels)
		clear(results)

		timeout := 0
		r.mu.Lock()
		if len(r.subs) == 0 && len(r.cancels) == 0 && len(r.results) == 0 && !r.closed {
			r.sleeping = true
			timeout = -1
		}
		r.mu.Unlock()
		n, err := unix.EpollWait(r.epfd, events, timeout)
		if timeout < 0 {
			r.mu.Lock()
			r.sleeping = false
			r.mu.Unlock()
		}
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			panic(os.NewSyscallError("epoll_wait", err)) // EBADF, EFAULT, EINVAL: a bug
		}
		for _, ev := range events[:n] {
			if ev.Fd == int32(r.evfd) {
				var b [8]byte
				unix.Read(r.evfd, b[:])
				continue
			}
			if op := r.fds[ev.Fd]; op != nil {
				r.event(op, ev.Events)
			}
		}
	}
}

// shutdown ends every run as stopped and releases the loop's descriptors.
func (r *reactor) shutdown(subs []*rop) {
	for op := range r.active {
		r.abort(op, errStopped)
	}
	r.handoff.Wait()
	r.mu.Lock()
	results := r.results
	r.results = nil
	subs = append(subs, r.subs...)
	r.subs = nil
	r.mu.Unlock()
	for _, x := range results {
		r.handedDone(x)
	}
	for _, op := range subs {
		if !op.done {
			r.finish(op, "", nil, errStopped)
		}
	}
	unix.Close(r.epfd)
	unix.Close(r.evfd)
}

// abort ends op for cause (errStopped or its check's timeoutErr).
func (r *reactor) abort(op *rop, cause error) {
	if op.done {
		return
	}
	if op.handed != nil {
		op.handed(cause) // its goroutine reports
		return
	}
	r.finish(op, "", nil, cause)
}

// start opens op's connection: socket, SO_LINGER for tcpSocket, connect.
func (r *reactor) start(op *rop) {
	if op.startErr != nil { // a request that cannot be sent
		r.finish(op, "", op.startErr, nil)
		return
	}
	family, sa, err := sockaddr(op.addr)
	if err != nil {
		r.finish(op, "", dialError(op.addr, err), nil)
		return
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		r.finish(op, "", dialError(op.addr, os.NewSyscallError("socket", err)), nil)
		return
	}
	op.fd = int32(fd)
	if op.req == nil {
		// tcpSocket resets its connection (see tcpSocketLinger). httpGet
		// sets no SO_LINGER here where the worker path sets the
		// kubelet's 1 s (httpLinger): on Linux a positive linger changes
		// nothing on the wire (close sends its FIN and the connection
		// closes gracefully either way, with the same TIME-WAIT), it
		// only makes close(2) block until the FIN is acknowledged, for
		// up to a second. The loop must not block: one slow peer would
		// hold every probe behind it. Once the whole response is read,
		// httpGet resets too (see read).
		if err := unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: tcpSocketLinger}); err != nil {
			r.finish(op, "", dialError(op.addr, os.NewSyscallError("setsockopt", err)), nil)
			return
		}
	}
	err = connect(fd, sa)
	if err == unix.EINPROGRESS && op.req == nil {
		// Ask again at once. The first connect sent the SYN, and when
		// the peer is on this node (loopback, a pod behind a veth pair)
		// the kernel has usually run the whole handshake before the
		// call returned: on Linux a second connect then returns 0 once
		// the connection is up, the connect's error once it failed
		// (ECONNREFUSED), and EALREADY while it is still in progress
		// (__inet_stream_connect). Only then does the loop wait for it,
		// which spares the epoll registration, the event and
		// getsockopt(SO_ERROR) of every other probe.
		err = connect(fd, sa)
	}
	switch err {
	case nil:
		r.connected(op)
	case unix.EINPROGRESS, unix.EALREADY:
		op.connecting = true
		if op.req != nil {
			// Send the request at once: on a connection still being
			// made the write fails with EAGAIN (and write then waits
			// for it as below), on one that failed with the connect's
			// error, and on one that is up it goes out, so that the
			// loop waits only for the answer.
			r.write(op)
			return
		}
		r.watch(op, unix.EPOLLOUT|unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLET)
	default:
		r.finish(op, "", connectError(op.addr, err), nil)
	}
}

// connectError is the error of a connect to addr that failed with errno,
// as net.Dialer words it ("dial tcp 10.0.0.1:80: connect: connection
// refused").
func connectError(addr netip.AddrPort, errno error) error {
	return dialError(addr, os.NewSyscallError("connect", errno))
}

// connect starts connecting the non-blocking socket fd to sa, again when
// a signal interrupted it: nil, EINPROGRESS or the error.
func connect(fd int, sa unix.Sockaddr) error {
	for {
		if err := unix.Connect(fd, sa); err != unix.EINTR {
			return err
		}
	}
}

// sockaddr is addr as a socket address and its family.
func sockaddr(addr netip.AddrPort) (int, unix.Sockaddr, error) {
	ip := addr.Addr().Unmap()
	if ip.Is4() {
		return unix.AF_INET, &unix.SockaddrInet4{Port: int(addr.Port()), Addr: ip.As4()}, nil
	}
	sa := &unix.SockaddrInet6{Port: int(addr.Port()), Addr: ip.As16()}
	if z := ip.Zone(); z != "" {
		id, err := zoneIndex(z)
		if err != nil {
			return 0, nil, err
		}
		sa.ZoneId = id
	}
	return unix.AF_INET6, sa, nil
}

// watch adds op's socket to the epoll instance.
func (r *reactor) watch(op *rop, events uint32) {
	if err := unix.EpollCtl(r.epfd, unix.EPOLL_CTL_ADD, int(op.fd), &unix.EpollEvent{Events: events, Fd: op.fd}); err != nil {
		r.finish(op, "", dialError(op.addr, os.NewSyscallError("epoll_ctl", err)), nil)
		return
	}
	r.fds[op.fd] = op
}

// event moves op on after epoll reported events on its socket.
func (r *reactor) event(op *rop, events uint32) {
	if op.connecting {
		if events&(unix.EPOLLOUT|unix.EPOLLERR|unix.EPOLLHUP) == 0 {
			return
		}
		if op.req != nil {
			// The write reports the connect's error (it takes the
			// socket's error as getsockopt(SO_ERROR) would), or sends
			// the request on the connection now up.
			r.write(op)
			return
		}
		soerr, err := unix.GetsockoptInt(int(op.fd), unix.SOL_SOCKET, unix.SO_ERROR)
		if err == nil && soerr != 0 {
			err = os.NewSyscallError("connect", unix.Errno(soerr))
		} else if err != nil {
			err = os.NewSyscallError("getsockopt", err)
		}
		if err != nil {
			r.finish(op, "", dialError(op.addr, err), nil)
			return
		}
		op.connecting = false
		r.connected(op)
		return
	}
	if op.wrote < len(op.reqBytes) {
		r.write(op)
		return
	}
	r.read(op)
}

// connected goes on once op's connection is up: tcpSocket is done,
// httpGet sends its request.
func (r *reactor) connected(op *rop) {
	if op.req == nil {
		r.finish(op, "", nil, nil)
		return
	}
	r.write(op)
}

// write sends the rest of op's request; once it is sent, the response is
// awaited. While op is connecting, a write that fails reports the
// connect's error, worded as a failed connect.
func (r *reactor) write(op *rop) {
	for op.wrote < len(op.reqBytes) {
		n, err := unix.Write(int(op.fd), op.reqBytes[op.wrote:])
		switch err {
		case nil:
			op.wrote += n
			op.connecting = false
		case unix.EINTR:
		case unix.EAGAIN:
			if r.fds[op.fd] == nil {
				r.watch(op, unix.EPOLLOUT|unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLET)
			}
			return
		default:
			if op.connecting {
				r.finish(op, "", connectError(op.addr, err), nil)
				return
			}
			r.finish(op, "", os.NewSyscallError("write", err), nil)
			return
		}
	}
	if r.fds[op.fd] == nil {
		r.watch(op, unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLET)
	}
}

// read reads what the socket holds and finishes op once the response is
// complete (or the stream ended). The socket is edge-triggered: while the
// response is incomplete it reads until the socket has nothing more
// (EAGAIN) or the stream ends, since no new event would come otherwise.
func (r *reactor) read(op *rop) {
	for {
		drained := false // the last read found nothing
		for op.readErr == nil {
			n, err := unix.Read(int(op.fd), r.buf)
			switch {
			case err == unix.EINTR:
				continue
			case err == unix.EAGAIN:
				drained = true
			case err != nil:
				op.readErr = os.NewSyscallError("read", err)
			case n == 0:
				op.readErr = io.EOF
			default:
				op.resp = append(op.resp, r.buf[:n]...)
				if len(op.resp) >= maxRead { // as the worker path's LimitReader
					op.resp = op.resp[:maxRead]
					op.readErr = io.EOF
				}
				if n == len(r.buf) {
					continue // there may be more
				}
			}
			break
		}
		if len(op.resp) == 0 && op.readErr == nil {
			return // nothing yet: a spurious event
		}
		status, location, ok := quickResponse(op.resp, op.readErr)
		if !ok {
			pr := &partialReader{b: op.resp, end: op.readErr}
			var err error
			status, location, err = readResponse(bufio.NewReaderSize(pr, 4096), op.req)
			if err != nil && pr.short {
				if drained {
					return // the next event brings more
				}
				continue // read on until EAGAIN
			}
			if err != nil {
				r.finish(op, "", err, nil)
				return
			}
		}
		// The whole response is read: the close resets the connection.
		// The server has normally closed its side by then (the request
		// says Connection: close), so the reset ends a connection that
		// it no longer uses and discards nothing; it spares the FIN
		// exchange and the server's TIME-WAIT socket, which for a peer
		// on this node the kernel handles in the prober's close(2)
		// (docs/performance.md, "The prober's own cost"). Should the
		// call fail, the close is graceful, as before.
		unix.SetsockoptLinger(int(op.fd), unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
		next, warning, err := httpNext(op.req, op.redirects, status, location)
		if next == nil {
			r.finish(op, warning, err, nil)
			return
		}
		r.closeFD(op)
		op.req, op.reqBytes, op.redirects = next, requestBytes(next), op.redirects+1
		op.wrote, op.resp, op.readErr = 0, nil, nil
		if next.URL.Scheme == "http" {
			if err := op.setAddr(); err != nil {
				r.finish(op, "", err, nil)
				return
			}
			// Not now: an event of this batch may name the descriptor
			// the new socket gets.
			r.later = append(r.later, op)
			return
		}
		r.handOff(op)
		return
	}
}

// handOff runs the rest of op (a redirect to https) in a goroutine over
// the worker path; its result comes back to the loop.
func (r *reactor) handOff(op *rop) {
	ctx, cancel := context.WithCancelCause(context.Background())
	op.handed = cancel
	r.handoff.Add(1)
	go func() {
		defer r.handoff.Done()
		warning, err := r.net.httpFollow(ctx, op.c.target.Addr, op.req, op.redirects)
		res := handedResult{op: op, warning: warning, err: err, cause: context.Cause(ctx)}
		cancel(nil)
		r.mu.Lock()
		r.results = append(r.results, res)
		r.wake()
		r.mu.Unlock()
	}()
}

func (r *reactor) handedDone(x handedResult) {
	if x.op.done {
		return
	}
	x.op.handed = nil
	r.finish(x.op, x.warning, x.err, x.cause)
}

// closeFD closes op's socket, if open.
func (r *reactor) closeFD(op *rop) {
	if op.fd < 0 {
		return
	}
	delete(r.fds, op.fd) // closing removes it from the epoll instance
	unix.Close(int(op.fd))
	op.fd = -1
}

// finish ends op: closes its socket and reports its result (warning, err)
// or, with a cause, that it was stopped or timed out.
func (r *reactor) finish(op *rop, warning string, err, cause error) {
	r.closeFD(op)
	op.done = true
	delete(r.active, op)
	op.timer.Stop()
	r.p.finish(op.c, op.start, warning, err, cause)
}

// partialReader reads b, then end (io.EOF or the read's error) when the
// stream has ended, else errShort: the response may be incomplete.
type partialReader struct {
	b     []byte
	end   error
	short bool // errShort was returned
}

var errShort = errors.New("the response is not complete yet")

func (pr *partialReader) Read(p []byte) (int, error) {
	if len(pr.b) == 0 {
		if pr.end != nil {
			return 0, pr.end
		}
		pr.short = true
		return 0, errShort
	}
	n := copy(p, pr.b)
	pr.b = pr.b[n:]
	return n, nil
}
