package nft

import (
	"encoding/binary"
	"fmt"
	"io"
	"syscall"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// batchSender sends google/nftables' batches without an acknowledgement
// per message.
//
// google/nftables v0.3.0 asks the kernel to acknowledge every message of
// a batch and reads the acknowledgements one recvmsg at a time: for a
// 10,000-service replace that is 68,000 reads, most of a second. The
// kernel reports an error of a batch message whether or not it was asked
// to acknowledge it, and it handles the whole batch inside sendmsg. So
// the batch goes out with the acknowledgement flags cleared, the replies
// queued by the time sendmsg returns are errors only, and google/nftables
// is handed (through its test-dial hook, its only way to swap the
// transport) one acknowledgement per message, or the kernel's error.
type batchSender struct {
	conn    *netlink.Conn // the real socket
	pending []netlink.Message
}

func newBatchSender(nsFd int) (*batchSender, error) {
	c, err := dialNetfilter(nsFd)
	if err != nil {
		return nil, err
	}
	if err := bigBuffers(c); err != nil {
		c.Close()
		return nil, fmt.Errorf("netlink buffers: %w", explain(err))
	}
	return &batchSender{conn: c}, nil
}

// conn is a google/nftables connection that queues batches for b.
func (b *batchSender) nftConn() (*nftables.Conn, error) {
	return nftables.New(nftables.AsLasting(), nftables.WithTestDial(b.roundTrip))
}

func (b *batchSender) Close() error { return b.conn.Close() }

// roundTrip is the nltest.Func: google/nftables' Flush sends the batch
// (reqs), then receives once per message (reqs nil).
func (b *batchSender) roundTrip(reqs []netlink.Message) ([]netlink.Message, error) {
	if reqs == nil {
		if len(b.pending) == 0 {
			return nil, io.EOF
		}
		m := b.pending[0]
		b.pending = b.pending[1:]
		return []netlink.Message{m}, nil
	}
	acked := make([]bool, len(reqs))
	for i := range reqs {
		acked[i] = reqs[i].Header.Flags&netlink.Acknowledge != 0
		// Nor an echo: google/nftables asks the kernel to send every new
		// rule back.
		reqs[i].Header.Flags &^= netlink.Acknowledge | netlink.Echo
		m, err := setUserdata(reqs[i])
		if err != nil {
			return nil, err
		}
		reqs[i] = m
	}
	sent, err := b.conn.SendMessages(reqs)
	if err != nil {
		return nil, err
	}
	if err := b.collectErrors(); err != nil {
		b.pending = nil
		return nil, err
	}
	b.pending = b.pending[:0]
	for i, m := range sent {
		if !acked[i] {
			continue
		}
		ack := netlink.Message{
			Header: netlink.Header{Type: netlink.Error, Sequence: m.Header.Sequence, PID: m.Header.PID},
			Data:   make([]byte, 4), // errno 0
		}
		b.pending = append(b.pending, ack)
	}
	if len(b.pending) == 0 {
		return nil, nil
	}
	first := b.pending[0]
	b.pending = b.pending[1:]
	return []netlink.Message{first}, nil
}

// collectErrors reads what the kernel queued while it handled the batch,
// without waiting: errors only, as nothing asked for acknowledgements.
// The first error is returned.
func (b *batchSender) collectErrors() error {
	raw, err := b.conn.SyscallConn()
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<16)
	var first error
	for {
		var n int
		var rerr error
		if err := raw.Control(func(fd uintptr) {
			n, _, rerr = unix.Recvfrom(int(fd), buf, unix.MSG_DONTWAIT)
		}); err != nil {
			return err
		}
		if rerr == unix.EAGAIN || rerr == unix.EWOULDBLOCK {
			return first
		}
		if rerr != nil {
			return rerr
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if m.Header.Type == unix.NLMSG_ERROR && len(m.Data) >= 4 {
				if code := int32(binary.NativeEndian.Uint32(m.Data[:4])); code != 0 && first == nil {
					first = syscall.Errno(-code)
				}
			}
		}
	}
}
