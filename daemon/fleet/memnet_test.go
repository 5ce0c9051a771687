package fleet

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// memNetwork is an in-memory network of memberlist transports, like
// memberlist's MockNetwork but with UDP's manners: a packet to a stopped
// or unknown address, or to a full queue, is lost (MockNetwork blocks the
// sender forever), and a share of all packets can be lost on purpose. It
// is safe for concurrent use.
type memNetwork struct {
	mu     sync.Mutex
	byAddr map[string]*memTransport
	next   int
	// loss is the share of packets lost, in millionths.
	loss atomic.Int64
	lost atomic.Uint64 // on purpose (loss)
	// overflow counts packets lost to a full queue: a receiver that
	// cannot keep up.
	overflow atomic.Uint64
	// cut are the addresses cut off: what they send or are sent is lost,
	// dials to or from them refused (a link down).
	cut map[string]bool
	// tap, when set, gets every packet sent (a copy), before its fate.
	tap func(from string, b []byte)
	// drop, when set, loses the packets it returns true for.
	drop func(from, to string, b []byte) bool
}

func newMemNetwork() *memNetwork {
	return &memNetwork{byAddr: map[string]*memTransport{}, cut: map[string]bool{}}
}

// setCut cuts the address off the network, or back on.
func (n *memNetwork) setCut(addr string, cut bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut[addr] = cut
}

// setTap sets the function that gets every packet sent.
func (n *memNetwork) setTap(tap func(from string, b []byte)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.tap = tap
}

// setDrop sets the rule that loses packets: drop(from, to, packet).
func (n *memNetwork) setDrop(drop func(from, to string, b []byte) bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.drop = drop
}

// route is the transport at addr for a packet or dial from from, nil when
// there is none or either end is cut off.
func (n *memNetwork) route(from, addr string) *memTransport {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cut[from] || n.cut[addr] {
		return nil
	}
	return n.byAddr[addr]
}

// transport returns a transport at a new address.
func (n *memNetwork) transport() *memTransport {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.next++
	t := &memTransport{net: n, addr: fmt.Sprintf("10.%d.%d.%d:7946", n.next>>16&255, n.next>>8&255, n.next&255),
		packets: make(chan *memberlist.Packet, 4096), streams: make(chan net.Conn), stop: make(chan struct{})}
	n.byAddr[t.addr] = t
	return t
}

// setLoss makes a share of packets (0 to 1) lost.
func (n *memNetwork) setLoss(share float64) { n.loss.Store(int64(share * 1e6)) }

// memTransport is a member's end of a memNetwork. Streams are net.Pipes,
// handed over unbuffered: a pipe's write blocks until the other end
// reads, and memberlist writes before it sets a deadline, so a stream
// must never wait in a queue nobody reads.
type memTransport struct {
	net     *memNetwork
	addr    string
	packets chan *memberlist.Packet
	streams chan net.Conn
	stop    chan struct{}
	once    sync.Once
}

var _ memberlist.NodeAwareTransport = (*memTransport)(nil)

type memAddr string

func (a memAddr) Network() string { return "mem" }
func (a memAddr) String() string  { return string(a) }

func (t *memTransport) FinalAdvertiseAddr(string, int) (net.IP, int, error) {
	host, port, _ := net.SplitHostPort(t.addr)
	var p int
	fmt.Sscan(port, &p)
	return net.ParseIP(host), p, nil
}

func (t *memTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	return t.WriteToAddress(b, memberlist.Address{Addr: addr})
}

func (t *memTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	now := time.Now()
	t.net.mu.Lock()
	tap, drop := t.net.tap, t.net.drop
	t.net.mu.Unlock()
	if tap != nil {
		tap(t.addr, append([]byte(nil), b...))
	}
	if drop != nil && drop(t.addr, a.Addr, b) {
		t.net.lost.Add(1)
		return now, nil
	}
	dest := t.net.route(t.addr, a.Addr)
	if dest == nil || dest.stopped() {
		return now, nil // into the void, as UDP
	}
	if l := t.net.loss.Load(); l > 0 && rand.Int64N(1e6) < l {
		t.net.lost.Add(1)
		return now, nil
	}
	select {
	case dest.packets <- &memberlist.Packet{Buf: append([]byte(nil), b...), From: memAddr(t.addr), Timestamp: now}:
	default:
		t.net.overflow.Add(1)
	}
	return now, nil
}

func (t *memTransport) PacketCh() <-chan *memberlist.Packet { return t.packets }
func (t *memTransport) StreamCh() <-chan net.Conn           { return t.streams }

func (t *memTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

var errRefused = errors.New("connection refused")

func (t *memTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	dest := t.net.route(t.addr, a.Addr)
	if dest == nil || dest.stopped() {
		return nil, errRefused
	}
	p1, p2 := net.Pipe()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case dest.streams <- p1:
		return p2, nil
	case <-dest.stop:
	case <-timer.C:
	}
	p1.Close()
	p2.Close()
	return nil, errRefused
}

func (t *memTransport) stopped() bool {
	select {
	case <-t.stop:
		return true
	default:
		return false
	}
}

// Shutdown stops the transport: what is sent to it is lost from now on.
func (t *memTransport) Shutdown() error {
	t.once.Do(func() { close(t.stop) })
	return nil
}
