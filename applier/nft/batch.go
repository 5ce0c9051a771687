package nft

import (
	"encoding/binary"
	"fmt"
	"io"
	"slices"

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
//
// A transaction is staged (stage, sendStaged): google/nftables' Flush then
// serialises the messages queued so far into the staged batch instead of
// sending them, so that System.Run can flush every few hundred operations
// and google/nftables holds only those, and the batch goes out in one
// sendmsg from the staged chunks, without another copy.
type batchSender struct {
	conn    *netlink.Conn // the real socket
	pending []netlink.Message
	staged  *stagedBatch // nil: Flush sends
}

// stagedBatch is a transaction's messages, serialised as the kernel reads
// them, in chunks (a message is never split).
type stagedBatch struct {
	begin, end []byte // the batch's first BATCH_BEGIN and last BATCH_END
	chunks     [][]byte
	msgs       int
}

// Chunks of a staged batch double from firstChunk (a daemon's change is
// a few hundred bytes) to stageChunk (a first install of 50,000 services
// is about 50 MB).
const (
	firstChunk = 16 << 10
	stageChunk = 4 << 20
)

// maxChunks bounds the chunks of one sendmsg (the kernel's UIO_MAXIOV).
const maxChunks = 1024

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
	sent := reqs
	if b.staged != nil {
		b.staged.add(reqs)
	} else {
		var err error
		if sent, err = b.conn.SendMessages(reqs); err != nil {
			return nil, err
		}
		if err := b.collectErrors(); err != nil {
			b.pending = nil
			return nil, err
		}
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
	return b.roundTrip(nil) // the first acknowledgement
}

// stage starts a transaction: what Flush is given is staged, not sent,
// until sendStaged or discard.
func (b *batchSender) stage() { b.staged = &stagedBatch{} }

// discard drops the staged transaction, sending nothing.
func (b *batchSender) discard() { b.staged = nil }

// sendStaged sends the staged transaction in one sendmsg, as one batch
// (nothing when no message was staged), and returns the kernel's first
// error.
func (b *batchSender) sendStaged() error {
	st := b.staged
	b.staged = nil
	if st == nil || st.msgs == 0 {
		return nil
	}
	bufs := slices.Concat([][]byte{st.begin}, st.chunks, [][]byte{st.end})
	if len(bufs) > maxChunks {
		return fmt.Errorf("batch of %d chunks too large for one sendmsg", len(st.chunks))
	}
	raw, err := b.conn.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Write(func(fd uintptr) bool {
		_, serr = unix.SendmsgBuffers(int(fd), bufs, nil, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}, 0)
		return serr != unix.EAGAIN && serr != unix.EWOULDBLOCK
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("sendmsg: %w", serr)
	}
	return b.collectErrors()
}

// add serialises messages of one Flush: google/nftables wraps each in
// BATCH_BEGIN and BATCH_END, of which the batch keeps the first and the
// last.
func (st *stagedBatch) add(msgs []netlink.Message) {
	for _, m := range msgs {
		switch m.Header.Type {
		case netlink.HeaderType(unix.NFNL_MSG_BATCH_BEGIN):
			if st.begin == nil {
				st.begin = appendMessage(nil, m)
			}
			continue
		case netlink.HeaderType(unix.NFNL_MSG_BATCH_END):
			st.end = appendMessage(st.end[:0], m)
			continue
		}
		n := nlmsgAlign(nlmsgHeaderLen + len(m.Data))
		if len(st.chunks) == 0 || cap(st.chunks[len(st.chunks)-1])-len(st.chunks[len(st.chunks)-1]) < n {
			size := firstChunk
			if len(st.chunks) > 0 {
				size = min(2*cap(st.chunks[len(st.chunks)-1]), stageChunk)
			}
			st.chunks = append(st.chunks, make([]byte, 0, max(size, n)))
		}
		last := &st.chunks[len(st.chunks)-1]
		*last = appendMessage(*last, m)
		st.msgs++
	}
}

// append appends the messages o staged to st's.
func (st *stagedBatch) append(o *stagedBatch) {
	st.chunks = append(st.chunks, o.chunks...)
	st.msgs += o.msgs
	if st.begin == nil {
		st.begin = o.begin
	}
	if o.end != nil {
		st.end = o.end
	}
}

const nlmsgHeaderLen = 16

func nlmsgAlign(n int) int { return (n + 3) &^ 3 }

// appendMessage appends m as the kernel reads it: its header (with the
// length of its data), its data, padding to 4 bytes.
func appendMessage(b []byte, m netlink.Message) []byte {
	b = binary.NativeEndian.AppendUint32(b, uint32(nlmsgHeaderLen+len(m.Data)))
	b = binary.NativeEndian.AppendUint16(b, uint16(m.Header.Type))
	b = binary.NativeEndian.AppendUint16(b, uint16(m.Header.Flags))
	b = binary.NativeEndian.AppendUint32(b, m.Header.Sequence)
	b = binary.NativeEndian.AppendUint32(b, m.Header.PID)
	b = append(b, m.Data...)
	for i := nlmsgAlign(len(m.Data)) - len(m.Data); i > 0; i-- {
		b = append(b, 0)
	}
	return b
}

// collectErrors reads what the kernel queued while it handled the batch,
// without waiting: errors only, as nothing asked for acknowledgements.
// The first error is returned.
func (b *batchSender) collectErrors() error {
	buf := make([]byte, 1<<16)
	var first error
	for {
		msgs, err := receive(b.conn, buf, false)
		if err == unix.EAGAIN || err == unix.EWOULDBLOCK {
			return first
		}
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if m.Header.Type == unix.NLMSG_ERROR && first == nil {
				first = errnoOf(m)
			}
		}
	}
}
