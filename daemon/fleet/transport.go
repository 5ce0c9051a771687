package fleet

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// traffic counts what a transport carries, all of memberlist's traffic
// (membership, probes, our tables, push/pull), after encryption.
type traffic struct {
	bytesIn, bytesOut   atomic.Uint64
	msgsIn, msgsOut     atomic.Uint64
	streamIn, streamOut atomic.Uint64 // of the bytes, those of streams
}

// countingTransport is a memberlist transport that counts the traffic of
// the one it wraps: packets and stream bytes. watch, when set, sees every
// packet in (before memberlist) and out (before the wrapped transport);
// it must not change it.
type countingTransport struct {
	memberlist.NodeAwareTransport
	t       *traffic
	watch   atomic.Pointer[func([]byte)]
	packets chan *memberlist.Packet
	streams chan net.Conn
	stop    chan struct{}
	once    sync.Once
}

var _ memberlist.NodeAwareTransport = (*countingTransport)(nil)

func newCountingTransport(inner memberlist.NodeAwareTransport, t *traffic) *countingTransport {
	c := &countingTransport{NodeAwareTransport: inner, t: t, packets: make(chan *memberlist.Packet),
		streams: make(chan net.Conn), stop: make(chan struct{})}
	go c.relay()
	return c
}

// relay hands the inner transport's packets and streams on, counted.
func (c *countingTransport) relay() {
	in, streams := c.NodeAwareTransport.PacketCh(), c.NodeAwareTransport.StreamCh()
	for {
		select {
		case p := <-in:
			c.t.msgsIn.Add(1)
			c.t.bytesIn.Add(uint64(len(p.Buf)))
			c.watched(p.Buf)
			select {
			case c.packets <- p:
			case <-c.stop:
				return
			}
		case conn := <-streams:
			c.t.msgsIn.Add(1)
			select {
			case c.streams <- &countingConn{Conn: conn, t: c.t}:
			case <-c.stop:
				conn.Close()
				return
			}
		case <-c.stop:
			return
		}
	}
}

// watched hands a packet to watch, if set.
func (c *countingTransport) watched(b []byte) {
	if w := c.watch.Load(); w != nil {
		(*w)(b)
	}
}

func (c *countingTransport) PacketCh() <-chan *memberlist.Packet { return c.packets }
func (c *countingTransport) StreamCh() <-chan net.Conn           { return c.streams }

func (c *countingTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	return c.WriteToAddress(b, memberlist.Address{Addr: addr})
}

func (c *countingTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	c.t.msgsOut.Add(1)
	c.t.bytesOut.Add(uint64(len(b)))
	c.watched(b)
	return c.NodeAwareTransport.WriteToAddress(b, a)
}

func (c *countingTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return c.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

func (c *countingTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	conn, err := c.NodeAwareTransport.DialAddressTimeout(a, timeout)
	if err != nil {
		return nil, err
	}
	c.t.msgsOut.Add(1)
	return &countingConn{Conn: conn, t: c.t}, nil
}

// Shutdown shuts the inner transport down first, while relay still hands
// its packets and streams on (memberlist reads them until the transport's
// Shutdown returns): a listener of the inner transport blocked handing one
// over would otherwise never end, nor would its Shutdown.
func (c *countingTransport) Shutdown() error {
	err := c.NodeAwareTransport.Shutdown()
	c.once.Do(func() { close(c.stop) })
	return err
}

// countingConn counts a stream's bytes.
type countingConn struct {
	net.Conn
	t *traffic
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.t.bytesIn.Add(uint64(n))
	c.t.streamIn.Add(uint64(n))
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.t.bytesOut.Add(uint64(n))
	c.t.streamOut.Add(uint64(n))
	return n, err
}
