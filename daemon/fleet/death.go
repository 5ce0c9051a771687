package fleet

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"fmt"
	"math"
	mrand "math/rand/v2"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/memberlist"
)

// A death's tail (docs/fleet.md "The tail"): the members declare a
// crashed node dead at about the same moment, each on its own timer, and
// none relays a dead message it already agrees with; a member that
// receives none of their transmissions waits for its own suspicion,
// which nobody confirms any more. memberlist's push/pull does not repair
// that: it merges a dead member as one suspected by the receiver itself
// (mergeState), which neither confirms the receiver's own suspicion nor
// ends it. So each member that declares a death sends memberlist's own
// dead message, as its deadNode broadcast it, straight to a few alive
// members, once: a member that had not heard it takes it as from gossip
// (and gossips it on), one that had ignores it.

// deathTarget is the number of transmissions of a dead message each
// member should get, on average, from gossip and the direct sends
// together: a member misses all of them with a probability of about
// e^-deathTarget (8·10⁻⁷).
const deathTarget = 14

// maxDeaths bounds the deaths waiting to be told: more at once are left
// to gossip.
const maxDeaths = 64

// death is a member this node's memberlist declared dead, at the
// incarnation it knew.
type death struct {
	node string
	inc  uint32
}

// deathSends is how many alive members a member that declares a death
// sends the dead message to, in a fleet of n members (the dead one
// included) with memberlist's RetransmitMult mult. Gossip transmits it
// mult·ceil(log10(n+1)) times from each of the n-1 members that declare
// it, to random members: each gets about that many; the direct sends
// make up the difference to deathTarget, to every other alive member at
// most. 14 − 4 at fewer than 10 members (so all of them), 14 − 8 = 6
// below 100, 2 below 1,000, none from 1,000 on (LAN's mult of 4).
func deathSends(n, mult int) int {
	retransmits := mult * int(math.Ceil(math.Log10(float64(n+1))))
	return max(0, min(deathTarget-retransmits, n-2))
}

// noteDeath queues a death to be told, outside memberlist's callback.
func (f *Fleet) noteDeath(d death) {
	select {
	case f.deaths <- d:
	default:
	}
}

// tellDeath sends the dead message of d to deathSends alive members
// picked at random, this node and the dead one excepted.
func (f *Fleet) tellDeath(d death) {
	self := f.ml.LocalNode().Name
	alive := f.ml.Members() // this node included, the dead one not
	var to []*memberlist.Node
	for _, n := range alive {
		if n.Name != self && n.Name != d.node {
			to = append(to, n)
		}
	}
	mrand.Shuffle(len(to), func(i, j int) { to[i], to[j] = to[j], to[i] })
	to = to[:min(len(to), deathSends(len(alive)+1, f.mc.RetransmitMult))]
	if len(to) == 0 {
		return
	}
	pkt, err := deadPacket(f.mc, d, self)
	if err != nil {
		f.log.Warn("gossip: cannot tell a death", "node", d.node, "err", err)
		return
	}
	for _, n := range to {
		f.tr.WriteToAddress(pkt, memberlist.Address{Addr: n.Address(), Name: n.Name}) // a lost one is gossip's
	}
}

// deadPacket is the packet memberlist sends for a dead message from
// from (encode, rawSendMsgPacket, AddLabelHeaderToPacket): the message
// type and its msgpack body, encrypted with the primary key as
// encryptPayload's version 1 does when c encrypts, after a label header
// when c has a label. The reader (suspicion.go) reads it back.
func deadPacket(c *memberlist.Config, d death, from string) ([]byte, error) {
	var msg bytes.Buffer
	msg.WriteByte(mlDead)
	if err := codec.NewEncoder(&msg, &codec.MsgpackHandle{}).Encode(mlDeadBody{Incarnation: d.inc, Node: d.node, From: from}); err != nil {
		return nil, fmt.Errorf("encode a dead message: %w", err)
	}
	out := msg.Bytes()
	if c.EncryptionEnabled() && c.GossipVerifyOutgoing {
		block, err := aes.NewCipher(c.Keyring.GetPrimaryKey())
		if err != nil {
			return nil, fmt.Errorf("encrypt a dead message: %w", err)
		}
		gcm, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("encrypt a dead message: %w", err)
		}
		nonce := make([]byte, gcm.NonceSize())
		rand.Read(nonce)
		out = gcm.Seal(append([]byte{1}, nonce...), nonce, out, []byte(c.Label))
	}
	if c.Label != "" {
		out = append(append([]byte{mlLabel, byte(len(c.Label))}, c.Label...), out...)
	}
	return out, nil
}
