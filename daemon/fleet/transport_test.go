package fleet

import (
	"log/slog"
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
	// memberlist's side: reads packets until the transport is shut down
	// (a packet taken while it shuts down may be dropped: nobody needs it).
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-c.PacketCh():
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
}

// TestMemberStateChangeSignals: a member that dies, leaves or comes back
// makes a new view (the dead node's checks go out) and moves the
// rendezvous assignment; a member's update in the same state does not.
// The state was compared after setMember changed it in place, so that
// only a member's first appearance did.
func TestMemberStateChangeSignals(t *testing.T) {
	f := &Fleet{log: slog.New(slog.DiscardHandler), changed: make(chan struct{}, 1)}
	f.st = newState("node-1", 1)
	f.st.setTree(NewTree([]string{"node-1", "node-2"}, nil))
	d := &delegate{f: f}
	node := func(meta Meta) *memberlist.Node {
		return &memberlist.Node{Name: "node-2", Addr: net.ParseIP("192.0.2.2"), Port: 7946, Meta: meta.encode()}
	}
	signalled := func() bool {
		select {
		case <-f.changed:
			return true
		default:
			return false
		}
	}
	for _, step := range []struct {
		what   string
		notify func()
		want   MemberState
		signal bool
	}{
		{what: "joins", notify: func() { d.NotifyJoin(node(Meta{})) }, want: StateAlive, signal: true},
		{what: "updates its metadata", notify: func() { d.NotifyUpdate(node(Meta{Revision: "abc"})) }, want: StateAlive, signal: false},
		{what: "dies", notify: func() { d.NotifyLeave(node(Meta{Revision: "abc"})) }, want: StateDead, signal: true},
		{what: "comes back", notify: func() { d.NotifyJoin(node(Meta{Revision: "abc"})) }, want: StateAlive, signal: true},
		{what: "leaves", notify: func() { d.NotifyLeave(node(Meta{Revision: "abc", Leaving: true})) }, want: StateLeft, signal: true},
	} {
		f.needProbe = false
		step.notify()
		if got := f.st.members["node-2"].state; got != step.want {
			t.Errorf("node-2 %s: state %s, want %s", step.what, got, step.want)
		}
		if got := signalled(); got != step.signal || f.needProbe != step.signal {
			t.Errorf("node-2 %s: a new view asked %v, assignment again %v; want %v", step.what, got, f.needProbe, step.signal)
		}
	}
}
