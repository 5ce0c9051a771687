package fleet

import (
	"net"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// handingTransport is an inner transport whose listener is handing a
// packet over when Shutdown is called, as memberlist's NetTransport's
// may be: its Shutdown returns once the packet was taken.
type handingTransport struct {
	memberlist.NodeAwareTransport // not called
	packets                       chan *memberlist.Packet
	streams                       chan net.Conn
}

func (h *handingTransport) PacketCh() <-chan *memberlist.Packet { return h.packets }
func (h *handingTransport) StreamCh() <-chan net.Conn           { return h.streams }

func (h *handingTransport) Shutdown() error {
	h.packets <- &memberlist.Packet{Buf: []byte("late")} // the listener's last hand-over
	return nil
}

// TestCountingTransportShutdown: the counting transport's Shutdown
// returns although the inner transport hands a packet over while it
// shuts down (memberlist reads packets until Shutdown returns); it hung
// when the relay stopped first.
func TestCountingTransportShutdown(t *testing.T) {
	inner := &handingTransport{packets: make(chan *memberlist.Packet), streams: make(chan net.Conn)}
	var tr traffic
	c := newCountingTransport(inner, &tr)
	// memberlist's side: reads packets until the transport is shut down.
	read := make(chan string, 1)
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case p := <-c.PacketCh():
				read <- string(p.Buf)
			case <-stop:
				return
			}
		}
	}()
	done := make(chan error, 1)
	go func() { done <- c.Shutdown() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown did not return within 10s: the inner transport's last packet was never taken")
	}
	close(stop)
	if got := <-read; got != "late" {
		t.Errorf("memberlist read %q, want the late packet", got)
	}
	if n := tr.msgsIn.Load(); n != 1 {
		t.Errorf("%d packets counted in, want 1", n)
	}
}
