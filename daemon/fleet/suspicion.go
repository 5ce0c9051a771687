package fleet

import (
	"bytes"
	"compress/lzw"
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/memberlist"
)

// memberlist (v0.7.0) tells its delegates nothing about suspicion: a
// suspect member's Node.State is never set (hashicorp/memberlist#266).
// Its failure detector's suspect, alive and dead messages pass through
// our transport, though, every packet in and out: the reader here
// decodes them from the packets as memberlist's ingestPacket does, and
// state keeps the suspicions they tell, as memberlist's suspectNode,
// aliveNode and deadNode would. A node's own failed probe makes it
// broadcast a suspect message, which leaves through the transport: a
// node cut off from the others sees its own suspicions there.

// The message types of memberlist's packets that matter here (net.go:
// messageType; their numbers are part of its protocol).
const (
	mlSuspect  = 3
	mlAlive    = 4
	mlDead     = 5
	mlCompound = 7
	mlCompress = 9
	mlCRC      = 12
	mlLabel    = 244
)

// Bounds of the work the reader does for one packet: a packet is at most
// 64 KB (UDP), and what memberlist sends in one is at most its
// UDPBufferSize, compressed or not.
const (
	maxPacket       = 64 << 10
	maxDecompressed = 64 << 10 // per packet, all compressed parts together
	maxDepth        = 4        // compound and compressed messages nested
	maxMessages     = 1024     // membership messages per packet
)

// mlMsg is a membership message of memberlist's failure detector: a
// member suspected, alive or dead at an incarnation.
type mlMsg struct {
	kind byte // mlSuspect, mlAlive or mlDead
	node string
	inc  uint32
}

// memberlist's messages (net.go: suspect, alive, dead), msgpack-encoded
// by field name: the names must stay memberlist's.
type (
	mlSuspectBody struct {
		Incarnation uint32
		Node        string
		From        string
	}
	mlAliveBody struct {
		Incarnation uint32
		Node        string
		Addr        []byte
		Port        uint16
		Meta        []byte
		Vsn         []uint8
	}
	mlDeadBody struct {
		Incarnation uint32
		Node        string
		From        string
	}
	mlCompressBody struct {
		Algo uint8
		Buf  []byte
	}
)

// The layers the reader went through in a packet (tests tell by them
// that real memberlist packets of every form were read).
const (
	layerLabel = 1 << iota
	layerEncrypted
	layerCRC
	layerCompound
	layerCompressed
)

// packetReader reads the membership messages of memberlist's packets as
// a member with this configuration would (ingestPacket): label header,
// decryption, checksum, compound and compressed messages.
type packetReader struct {
	label     string
	skipLabel bool                // memberlist's SkipInboundLabelCheck
	keyring   *memberlist.Keyring // nil: gossip in the clear
	verify    bool                // GossipVerifyIncoming: a packet that does not decrypt is dropped
	// ciphers are the keyring's keys ready to decrypt, made again when
	// its keys change: making them costs as much as a packet's
	// decryption.
	ciphers atomic.Pointer[keyCiphers]
}

// keyCiphers are AES-GCM ciphers of keys, in their order.
type keyCiphers struct {
	keys  [][]byte
	aeads []cipher.AEAD
}

// aeads are the ciphers of the keyring's keys now.
func (r *packetReader) aeads() []cipher.AEAD {
	keys := r.keyring.GetKeys()
	if c := r.ciphers.Load(); c != nil && slices.EqualFunc(c.keys, keys, bytes.Equal) {
		return c.aeads
	}
	c := &keyCiphers{keys: keys}
	for _, k := range keys {
		block, err := aes.NewCipher(k)
		if err != nil {
			continue // memberlist's keyring takes none such
		}
		gcm, err := cipher.NewGCM(block)
		if err != nil {
			continue
		}
		c.aeads = append(c.aeads, gcm)
	}
	r.ciphers.Store(c)
	return c.aeads
}

// newPacketReader reads packets as the member of c does.
func newPacketReader(c *memberlist.Config) *packetReader {
	r := &packetReader{label: c.Label, skipLabel: c.SkipInboundLabelCheck, verify: c.GossipVerifyIncoming}
	if c.EncryptionEnabled() {
		r.keyring = c.Keyring
	}
	return r
}

var errPacket = errors.New("not a memberlist packet of this fleet")

// read returns the membership messages of a packet and the layers it
// went through. A packet memberlist would drop, or one that does not
// read, is an error: its messages do not count. buf is never changed.
func (r *packetReader) read(buf []byte) (msgs []mlMsg, layers int, err error) {
	if len(buf) > maxPacket {
		return nil, 0, fmt.Errorf("%w: %d bytes", errPacket, len(buf))
	}
	label := ""
	if len(buf) > 0 && buf[0] == mlLabel {
		if len(buf) < 2 || buf[1] == 0 || len(buf) < 2+int(buf[1]) {
			return nil, 0, fmt.Errorf("%w: bad label header", errPacket)
		}
		label, buf = string(buf[2:2+int(buf[1])]), buf[2+int(buf[1]):]
		layers |= layerLabel
	}
	if r.skipLabel {
		if label != "" {
			return nil, layers, fmt.Errorf("%w: a label where none is expected", errPacket)
		}
		label = r.label
	}
	if label != r.label {
		return nil, layers, fmt.Errorf("%w: label %q", errPacket, label)
	}
	if r.keyring != nil {
		plain, err := decrypt(r.aeads(), buf, []byte(label))
		switch {
		case err == nil:
			buf = plain
			layers |= layerEncrypted
		case r.verify:
			return nil, layers, err
		}
	}
	if len(buf) >= 5 && buf[0] == mlCRC {
		if crc32.ChecksumIEEE(buf[5:]) != binary.BigEndian.Uint32(buf[1:5]) {
			return nil, layers, fmt.Errorf("%w: bad checksum", errPacket)
		}
		buf = buf[5:]
		layers |= layerCRC
	}
	d := decoding{layers: layers}
	err = d.command(buf, 0)
	return d.msgs, d.layers, err
}

// decoding is the state of one packet's messages being read.
type decoding struct {
	msgs         []mlMsg
	layers       int
	decompressed int // bytes so far, bounded by maxDecompressed
}

// command reads one message (handleCommand): membership messages are
// kept, compound and compressed ones opened, the others skipped.
func (d *decoding) command(buf []byte, depth int) error {
	if len(buf) == 0 {
		return fmt.Errorf("%w: empty message", errPacket)
	}
	kind, body := buf[0], buf[1:]
	switch kind {
	case mlCompound, mlCompress:
		if depth >= maxDepth {
			return fmt.Errorf("%w: messages nested deeper than %d", errPacket, maxDepth)
		}
		if kind == mlCompress {
			plain, err := d.decompress(body)
			if err != nil {
				return err
			}
			d.layers |= layerCompressed
			return d.command(plain, depth+1)
		}
		parts, err := splitCompound(body)
		if err != nil {
			return err
		}
		d.layers |= layerCompound
		for _, p := range parts {
			if err := d.command(p, depth+1); err != nil {
				return err
			}
		}
		return nil
	case mlSuspect, mlAlive, mlDead:
		if len(d.msgs) >= maxMessages {
			return fmt.Errorf("%w: more than %d membership messages", errPacket, maxMessages)
		}
		m, err := decodeMember(kind, body)
		if err != nil {
			return err
		}
		d.msgs = append(d.msgs, m)
	}
	return nil
}

// decodeMember decodes a suspect, alive or dead message's body.
func decodeMember(kind byte, body []byte) (mlMsg, error) {
	m := mlMsg{kind: kind}
	var err error
	switch kind {
	case mlSuspect:
		var s mlSuspectBody
		err = decodeMsgpack(body, &s)
		m.node, m.inc = s.Node, s.Incarnation
	case mlAlive:
		var a mlAliveBody
		err = decodeMsgpack(body, &a)
		m.node, m.inc = a.Node, a.Incarnation
	case mlDead:
		var x mlDeadBody
		err = decodeMsgpack(body, &x)
		m.node, m.inc = x.Node, x.Incarnation
	}
	if err == nil && m.node == "" {
		err = fmt.Errorf("%w: a membership message without a node", errPacket)
	}
	return m, err
}

// msgpack is memberlist's encoding (its decode makes a MsgpackHandle of
// the defaults each time); a handle is safe for concurrent use, and
// decoders are reused: making them is most of a message's cost.
var (
	msgpack  = &codec.MsgpackHandle{}
	decoders = sync.Pool{New: func() any { return codec.NewDecoderBytes(nil, msgpack) }}
)

// decodeMsgpack decodes as memberlist's decode does.
func decodeMsgpack(b []byte, out any) error {
	dec := decoders.Get().(*codec.Decoder)
	dec.ResetBytes(b)
	err := dec.Decode(out)
	dec.ResetBytes(nil)
	decoders.Put(dec)
	if err != nil {
		return fmt.Errorf("%w: %v", errPacket, err)
	}
	return nil
}

// splitCompound splits a compound message's body (decodeCompoundMessage):
// a count, the lengths, the messages. Truncated messages are left out,
// as memberlist does.
func splitCompound(b []byte) ([][]byte, error) {
	if len(b) < 1 {
		return nil, fmt.Errorf("%w: compound without a count", errPacket)
	}
	n := int(b[0])
	b = b[1:]
	if len(b) < 2*n {
		return nil, fmt.Errorf("%w: compound lengths truncated", errPacket)
	}
	lens, b := b[:2*n], b[2*n:]
	parts := make([][]byte, 0, n)
	for i := range n {
		l := int(binary.BigEndian.Uint16(lens[2*i:]))
		if len(b) < l {
			break
		}
		parts = append(parts, b[:l])
		b = b[l:]
	}
	return parts, nil
}

// decompress opens a compressed message's body (decompressPayload): LZW,
// LSB first, literal width 8.
func (d *decoding) decompress(body []byte) ([]byte, error) {
	var c mlCompressBody
	if err := decodeMsgpack(body, &c); err != nil {
		return nil, err
	}
	if c.Algo != 0 {
		return nil, fmt.Errorf("%w: compression algorithm %d", errPacket, c.Algo)
	}
	zr := lzw.NewReader(bytes.NewReader(c.Buf), lzw.LSB, 8)
	defer zr.Close()
	left := maxDecompressed - d.decompressed
	var out bytes.Buffer
	n, err := io.CopyN(&out, zr, int64(left)+1)
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("%w: %v", errPacket, err)
	}
	if n > int64(left) {
		return nil, fmt.Errorf("%w: more than %d bytes decompressed", errPacket, maxDecompressed)
	}
	d.decompressed += int(n)
	return out.Bytes(), nil
}

// decrypt opens an encrypted packet (decryptPayload): a version byte (0:
// padded, 1: not), a nonce, AES-GCM with the label as additional data,
// tried with every key's cipher.
func decrypt(aeads []cipher.AEAD, msg, label []byte) ([]byte, error) {
	const nonceSize, tagSize = 12, 16
	if len(msg) == 0 || msg[0] > 1 {
		return nil, fmt.Errorf("%w: not encrypted", errPacket)
	}
	vsn := msg[0]
	least := 1 + nonceSize + tagSize
	if vsn == 0 {
		least += aes.BlockSize
	}
	if len(msg) < least {
		return nil, fmt.Errorf("%w: too short to decrypt", errPacket)
	}
	nonce, sealed := msg[1:1+nonceSize], msg[1+nonceSize:]
	for _, gcm := range aeads {
		plain, err := gcm.Open(nil, nonce, sealed, label)
		if err != nil {
			continue
		}
		if vsn == 0 { // PKCS7 padding
			if len(plain) == 0 || int(plain[len(plain)-1]) > len(plain) {
				return nil, fmt.Errorf("%w: bad padding", errPacket)
			}
			plain = plain[:len(plain)-int(plain[len(plain)-1])]
		}
		return plain, nil
	}
	return nil, fmt.Errorf("%w: no key decrypts it", errPacket)
}

// suspicion is a member suspected by memberlist's failure detector.
type suspicion struct {
	inc   uint32    // the incarnation suspected
	since time.Time // when this node learned it
	until time.Time // forgotten then, unless refuted or dead before
}

// suspicionTimeout is how long a suspicion is kept at most: memberlist's
// longest suspicion timeout for a fleet of n members (suspectNode:
// SuspicionMaxTimeoutMult × SuspicionMult × max(1, log10(n)) ×
// ProbeInterval), after which it declared the member dead unless the
// member refuted, plus a probe interval for its timer to fire and tell
// us: a suspicion is not forgotten before the death it ends in is known.
// A refutation missed (it may come by push/pull only) cannot stick.
func suspicionTimeout(c *memberlist.Config, n int) time.Duration {
	scale := math.Max(1, math.Log10(math.Max(1, float64(n))))
	shortest := time.Duration(c.SuspicionMult) * time.Duration(scale*1000) * c.ProbeInterval / 1000
	return time.Duration(c.SuspicionMaxTimeoutMult)*shortest + c.ProbeInterval
}

// gossiped takes a membership message that passed this node, as
// memberlist takes it: a suspect message at the incarnation known or a
// newer one marks the member suspect (once: more are confirmations); an
// alive message at a newer incarnation clears it (a refutation); a dead
// message only moves the incarnation on (the death itself comes from
// memberlist, which clears the suspicion: setMember). Messages about this
// node are ignored (memberlist refutes them), and so are those about no
// node of the tree (memberlist refuses it as a member). It tells whether
// the suspects changed; timeout is how long a new suspicion is kept.
func (s *state) gossiped(m mlMsg, now time.Time, timeout time.Duration) bool {
	if m.node == s.self || !s.isNode(m.node) {
		return false
	}
	known := s.incs[m.node]
	switch m.kind {
	case mlSuspect:
		if _, ok := s.suspects[m.node]; ok || m.inc < known {
			return false
		}
		s.incs[m.node] = m.inc
		s.suspects[m.node] = suspicion{inc: m.inc, since: now, until: now.Add(timeout)}
		return true
	case mlAlive:
		if m.inc <= known {
			return false
		}
		s.incs[m.node] = m.inc
		if _, ok := s.suspects[m.node]; !ok {
			return false
		}
		delete(s.suspects, m.node)
		if mb := s.members[m.node]; mb != nil && mb.state == StateAlive {
			mb.since = now // alive again since its refutation
		}
		return true
	case mlDead:
		if m.inc >= known {
			s.incs[m.node] = m.inc
		}
	}
	return false
}

// expire forgets the suspicions that ran out; it tells whether one did.
func (s *state) expire(now time.Time) bool {
	gone := false
	for n, sp := range s.suspects {
		if !now.Before(sp.until) {
			delete(s.suspects, n)
			gone = true
		}
	}
	return gone
}

// nextExpiry is when the first suspicion runs out (zero: none).
func (s *state) nextExpiry() time.Time {
	var first time.Time
	for _, sp := range s.suspects {
		if first.IsZero() || sp.until.Before(first) {
			first = sp.until
		}
	}
	return first
}

// suspect tells whether name is a member memberlist lists alive that is
// suspected, and since when.
func (s *state) suspect(name string) (since time.Time, ok bool) {
	sp, ok := s.suspects[name]
	if !ok || name == s.self {
		return time.Time{}, false
	}
	if m := s.members[name]; m == nil || m.state != StateAlive {
		return time.Time{}, false
	}
	return sp.since, true
}
