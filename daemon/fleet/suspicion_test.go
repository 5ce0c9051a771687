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
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"
)

// captured are the packets a memNetwork's members sent, by sender.
type captured struct {
	mu   sync.Mutex
	pkts map[string][][]byte
}

func (c *captured) tap(from string, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pkts[from] = append(c.pkts[from], b)
}

func (c *captured) of(addr string) [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.pkts[addr])
}

// packetsSeen is what a reader made of a member's packets.
type packetsSeen struct {
	msgs   []mlMsg
	layers map[int]int // packets with membership messages, by their layers
	errs   []error
}

func readAll(r *packetReader, pkts [][]byte) packetsSeen {
	s := packetsSeen{layers: map[int]int{}}
	for _, p := range pkts {
		msgs, layers, err := r.read(p)
		if err != nil {
			s.errs = append(s.errs, err)
			continue
		}
		if len(msgs) > 0 {
			s.layers[layers]++
		}
		s.msgs = append(s.msgs, msgs...)
	}
	return s
}

// has tells whether a message of kind about node was seen.
func (s packetsSeen) has(kind byte, node string) bool {
	return slices.ContainsFunc(s.msgs, func(m mlMsg) bool { return m.kind == kind && m.node == node })
}

// any tells whether a packet with membership messages went through all
// of the layers want and none of the layers not.
func (s packetsSeen) any(want, not int) bool {
	for l := range s.layers {
		if l&want == want && l&not == 0 {
			return true
		}
	}
	return false
}

// TestReadRealPackets: the reader reads every packet real memberlist
// members send, in the clear or encrypted with a key and a label,
// compressed or not, and finds in them the suspect, alive and dead
// messages of a member that stopped answering; a reader with another key
// or label reads none of them.
func TestReadRealPackets(t *testing.T) {
	for _, tc := range []struct {
		name     string
		keys     bool
		label    string
		compress bool
	}{
		{name: "clear", keys: false, label: "", compress: false},
		{name: "clear compressed", keys: false, label: "", compress: true},
		{name: "encrypted with a label", keys: true, label: "fleet-1", compress: false},
		{name: "encrypted with a label, compressed", keys: true, label: "fleet-1", compress: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, treeNodes, treeChecks)
			cap := &captured{pkts: map[string][][]byte{}}
			c.net.setTap(cap.tap)
			change := func(cfg *Config) {
				if !tc.keys {
					cfg.Keys, cfg.Insecure = nil, true
				}
				cfg.Tune = func(mc *memberlist.Config) {
					fastTimers(mc)
					mc.Label = tc.label
					mc.EnableCompression = tc.compress
				}
			}
			a := c.start("a", nil, change)
			b := c.start("b", []*Fleet{a}, change)
			cc := c.start("c", []*Fleet{a}, change)
			converged(t, []*Fleet{a, b, cc})
			c.net.setCut(b.Addr(), true)
			waitFor(t, "a and c to see b dead", func() bool { return sees(a, StateDead, "b") && sees(cc, StateDead, "b") })

			var layers, notLayers int
			if tc.label != "" {
				layers |= layerLabel
			} else {
				notLayers |= layerLabel
			}
			if tc.keys {
				layers |= layerEncrypted
			} else {
				notLayers |= layerEncrypted
			}
			forms := []struct{ want, not int }{{want: layerCompound}, {not: layerCompound}, {want: layerCRC}}
			if tc.compress {
				forms = append(forms, struct{ want, not int }{want: layerCompressed})
			} else {
				forms = append(forms, struct{ want, not int }{not: layerCompressed})
			}
			// problems are what a's and c's packets lack so far: memberlist
			// sends the dead message, or a message in a form, a gossip
			// round or more after the state it tells.
			problems := func() []string {
				var out []string
				for _, f := range []*Fleet{a, cc} {
					s := readAll(f.rd, cap.of(f.Addr()))
					if len(s.errs) > 0 {
						out = append(out, fmt.Sprintf("%s's packets: %d of them do not read, the first: %v", f.cfg.Name, len(s.errs), s.errs[0]))
					}
					for _, m := range []mlMsg{{kind: mlAlive, node: "a"}, {kind: mlSuspect, node: "b"}, {kind: mlDead, node: "b"}} {
						if !s.has(m.kind, m.node) {
							out = append(out, fmt.Sprintf("%s's packets: no %s message about %s", f.cfg.Name, kindName(m.kind), m.node))
						}
					}
					for l, n := range s.layers {
						if l&layers != layers || l&notLayers != 0 {
							out = append(out, fmt.Sprintf("%s's packets: %d with membership messages through layers %s; want %s and not %s",
								f.cfg.Name, n, layerNames(l), layerNames(layers), layerNames(notLayers)))
						}
					}
					for _, fm := range forms {
						if !s.any(fm.want, fm.not) {
							out = append(out, fmt.Sprintf("%s's packets: none with membership messages through %s and not %s (seen: %v)",
								f.cfg.Name, layerNames(fm.want), layerNames(fm.not), s.layers))
						}
					}
				}
				return out
			}
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				p := problems()
				if len(p) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after 30s:\n%s", strings.Join(p, "\n"))
				}
			}

			// Another fleet's reader: another label, or another key.
			others := map[string]*packetReader{"another label": {label: "fleet-2", keyring: a.rd.keyring, verify: true}}
			if tc.keys {
				kr, err := keyring([][]byte{bytes.Repeat([]byte{2}, 32)})
				if err != nil {
					t.Fatal(err)
				}
				others["another key"] = &packetReader{label: tc.label, keyring: kr, verify: true}
			}
			for name, r := range others {
				if s := readAll(r, cap.of(a.Addr())); len(s.msgs) > 0 {
					t.Errorf("a reader with %s read %d membership messages of a's packets", name, len(s.msgs))
				}
			}
		})
	}
}

func kindName(k byte) string {
	switch k {
	case mlSuspect:
		return "suspect"
	case mlAlive:
		return "alive"
	case mlDead:
		return "dead"
	}
	return fmt.Sprint(k)
}

func layerNames(l int) string {
	var out []string
	for i, n := range []string{"label", "encrypted", "crc", "compound", "compressed"} {
		if l&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	return fmt.Sprint(out)
}

// mlEncode encodes a memberlist message as its encode does: the type, then
// msgpack.
func mlEncode(t testing.TB, kind byte, body any) []byte {
	t.Helper()
	var buf bytes.Buffer
	buf.WriteByte(kind)
	if err := codec.NewEncoder(&buf, &codec.MsgpackHandle{}).Encode(body); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// compound packs messages as makeCompoundMessage does.
func compound(msgs ...[]byte) []byte {
	b := []byte{mlCompound, byte(len(msgs))}
	for _, m := range msgs {
		b = binary.BigEndian.AppendUint16(b, uint16(len(m)))
	}
	for _, m := range msgs {
		b = append(b, m...)
	}
	return b
}

// compressed compresses a message as compressPayload does.
func compressed(t testing.TB, msg []byte) []byte {
	t.Helper()
	var z bytes.Buffer
	w := lzw.NewWriter(&z, lzw.LSB, 8)
	w.Write(msg)
	w.Close()
	return mlEncode(t, mlCompress, mlCompressBody{Algo: 0, Buf: z.Bytes()})
}

// encrypted encrypts a packet as encryptPayload does, version 0 (padded)
// or 1.
func encrypted(t testing.TB, vsn byte, key, msg, label []byte) []byte {
	t.Helper()
	block, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	nonce := bytes.Repeat([]byte{7}, 12)
	if vsn == 0 {
		pad := aes.BlockSize - len(msg)%aes.BlockSize
		msg = append(slices.Clone(msg), bytes.Repeat([]byte{byte(pad)}, pad)...)
	}
	return append(append([]byte{vsn}, nonce...), gcm.Seal(nil, nonce, msg, label)...)
}

func withCRC(msg []byte) []byte {
	return append(binary.BigEndian.AppendUint32([]byte{mlCRC}, crc32.ChecksumIEEE(msg)), msg...)
}

func withLabel(label string, msg []byte) []byte {
	return append(append([]byte{mlLabel, byte(len(label))}, label...), msg...)
}

// TestReadPackets: the reader's layers one by one, and the packets it
// leaves (memberlist drops them, or they are not memberlist's), bounded.
func TestReadPackets(t *testing.T) {
	key := bytes.Repeat([]byte{3}, 16)
	kr, err := keyring([][]byte{bytes.Repeat([]byte{4}, 32), key})
	if err != nil {
		t.Fatal(err)
	}
	suspect := mlEncode(t, mlSuspect, mlSuspectBody{Incarnation: 7, Node: "b", From: "a"})
	alive := mlEncode(t, mlAlive, mlAliveBody{Incarnation: 8, Node: "b", Addr: []byte{192, 0, 2, 2}, Port: 7946, Vsn: []uint8{1, 5, 2, 0, 0, 0}})
	dead := mlEncode(t, mlDead, mlDeadBody{Incarnation: 9, Node: "c", From: "a"})
	ping := mlEncode(t, 0, struct {
		SeqNo uint32
		Node  string
	}{SeqNo: 1, Node: "b"})
	user := append([]byte{8}, "a table"...)
	deep := suspect
	for range maxDepth + 1 {
		deep = compound(deep)
	}
	bomb := compressed(t, make([]byte, maxDecompressed+1))
	clear := &packetReader{}
	secure := &packetReader{label: "fleet", keyring: kr, verify: true}
	lax := &packetReader{label: "fleet", keyring: kr, verify: false}
	sb := mlMsg{kind: mlSuspect, node: "b", inc: 7}
	ab := mlMsg{kind: mlAlive, node: "b", inc: 8}
	dc := mlMsg{kind: mlDead, node: "c", inc: 9}
	for _, tc := range []struct {
		name   string
		r      *packetReader
		pkt    []byte
		want   []mlMsg
		layers int
		err    bool
	}{
		{name: "suspect", r: clear, pkt: suspect, want: []mlMsg{sb}},
		{name: "alive", r: clear, pkt: alive, want: []mlMsg{ab}},
		{name: "dead", r: clear, pkt: dead, want: []mlMsg{dc}},
		{name: "ping and user message skipped", r: clear, pkt: compound(ping, user), layers: layerCompound},
		{name: "compound", r: clear, pkt: compound(ping, suspect, user, alive, dead), want: []mlMsg{sb, ab, dc}, layers: layerCompound},
		{name: "compound truncated: the whole messages", r: clear, pkt: compound(suspect, alive)[:4+len(suspect)+3], want: []mlMsg{sb}, layers: layerCompound},
		{name: "compressed compound", r: clear, pkt: compressed(t, compound(suspect, dead)), want: []mlMsg{sb, dc}, layers: layerCompressed | layerCompound},
		{name: "checksum", r: clear, pkt: withCRC(suspect), want: []mlMsg{sb}, layers: layerCRC},
		{name: "label, encrypted v1 with the second key, checksum", r: secure,
			pkt: withLabel("fleet", encrypted(t, 1, key, withCRC(compound(suspect, alive)), []byte("fleet"))), want: []mlMsg{sb, ab},
			layers: layerLabel | layerEncrypted | layerCRC | layerCompound},
		{name: "encrypted v0 (padded)", r: secure, pkt: withLabel("fleet", encrypted(t, 0, key, dead, []byte("fleet"))),
			want: []mlMsg{dc}, layers: layerLabel | layerEncrypted},
		{name: "in the clear, not verified: read", r: lax, pkt: withLabel("fleet", suspect), want: []mlMsg{sb}, layers: layerLabel},
		{name: "in the clear, verified: dropped", r: secure, pkt: withLabel("fleet", suspect), layers: layerLabel, err: true},
		{name: "label as data: another label does not decrypt", r: secure,
			pkt: withLabel("fleet", encrypted(t, 1, key, suspect, []byte("other"))), layers: layerLabel, err: true},
		{name: "another label", r: clear, pkt: withLabel("other", suspect), layers: layerLabel, err: true},
		{name: "no label where one is expected", r: secure, pkt: encrypted(t, 1, key, suspect, []byte("fleet")), err: true},
		{name: "label header truncated", r: secure, pkt: []byte{mlLabel, 9, 'f'}, err: true},
		{name: "empty label header", r: clear, pkt: []byte{mlLabel, 0}, err: true},
		{name: "encryption version 2", r: secure, pkt: withLabel("fleet", append([]byte{2}, encrypted(t, 1, key, suspect, []byte("fleet"))[1:]...)), layers: layerLabel, err: true},
		{name: "too short to decrypt", r: secure, pkt: withLabel("fleet", []byte{1, 2, 3}), layers: layerLabel, err: true},
		{name: "bad checksum", r: clear, pkt: append(withCRC(suspect)[:len(suspect)+4], suspect[len(suspect)-1]^1), err: true},
		{name: "empty", r: clear, pkt: nil, err: true},
		{name: "compound without lengths", r: clear, pkt: []byte{mlCompound, 3, 0}, err: true},
		{name: "nested too deep", r: clear, pkt: deep, layers: layerCompound, err: true},
		{name: "decompressed too large", r: clear, pkt: bomb, err: true},
		{name: "unknown compression", r: clear, pkt: mlEncode(t, mlCompress, mlCompressBody{Algo: 1, Buf: []byte{1}}), err: true},
		{name: "not msgpack", r: clear, pkt: []byte{mlSuspect, 0xc1}, err: true},
		{name: "no node", r: clear, pkt: mlEncode(t, mlSuspect, mlSuspectBody{Incarnation: 1}), err: true},
		{name: "larger than a packet", r: clear, pkt: make([]byte, maxPacket+1), err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig := slices.Clone(tc.pkt)
			msgs, layers, err := tc.r.read(tc.pkt)
			if (err != nil) != tc.err {
				t.Fatalf("read: error %v, want one: %v", err, tc.err)
			}
			if err != nil && !errors.Is(err, errPacket) {
				t.Errorf("read: error %v is not errPacket", err)
			}
			if tc.err {
				msgs = nil
			}
			if !slices.Equal(msgs, tc.want) {
				t.Errorf("read: %+v, want %+v", msgs, tc.want)
			}
			if layers != tc.layers {
				t.Errorf("read: layers %s, want %s", layerNames(layers), layerNames(tc.layers))
			}
			if !bytes.Equal(tc.pkt, orig) {
				t.Errorf("read changed the packet")
			}
		})
	}
}

// TestReaderFollowsKeyring: a key added to memberlist's keyring, or
// removed, decrypts or no longer does (the ciphers are made again).
func TestReaderFollowsKeyring(t *testing.T) {
	k1, k2 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	kr, err := keyring([][]byte{k1})
	if err != nil {
		t.Fatal(err)
	}
	r := &packetReader{label: "fleet", keyring: kr, verify: true}
	suspect := mlEncode(t, mlSuspect, mlSuspectBody{Incarnation: 7, Node: "b", From: "a"})
	pkt := withLabel("fleet", encrypted(t, 1, k2, suspect, []byte("fleet")))
	reads := func() bool { msgs, _, err := r.read(pkt); return err == nil && len(msgs) == 1 }
	if reads() {
		t.Fatal("a packet of a key not in the keyring read")
	}
	if err := kr.AddKey(k2); err != nil {
		t.Fatal(err)
	}
	if !reads() {
		t.Fatal("a packet of a key added to the keyring does not read")
	}
	if err := kr.RemoveKey(k2); err != nil {
		t.Fatal(err)
	}
	if reads() {
		t.Fatal("a packet of a key removed from the keyring still reads")
	}
}

// FuzzReadPacket: no packet makes the reader panic or read more than a
// packet's bound of messages.
func FuzzReadPacket(f *testing.F) {
	s := mlEncode(f, mlSuspect, mlSuspectBody{Incarnation: 7, Node: "b", From: "a"})
	for _, seed := range [][]byte{s, compound(s, s), compressed(f, compound(s)), withCRC(s), withLabel("x", s), {mlCompound, 255}} {
		f.Add(seed)
	}
	r := &packetReader{}
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, _, err := r.read(b)
		if err == nil && len(msgs) > maxMessages {
			t.Errorf("%d messages", len(msgs))
		}
	})
}

// TestSuspicion: the suspicion table follows memberlist's rules on the
// membership messages it sees and on memberlist's word on the members.
func TestSuspicion(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const timeout = 10 * time.Second
	type step struct {
		at     time.Duration // after t0
		msg    mlMsg         // or, when kind is 0:
		member MemberState   // memberlist says b is in this state
	}
	sus := func(inc uint32) mlMsg { return mlMsg{kind: mlSuspect, node: "b", inc: inc} }
	alv := func(inc uint32) mlMsg { return mlMsg{kind: mlAlive, node: "b", inc: inc} }
	ded := func(inc uint32) mlMsg { return mlMsg{kind: mlDead, node: "b", inc: inc} }
	for _, tc := range []struct {
		name    string
		steps   []step
		at      time.Duration // when b's state is looked at
		suspect bool
		since   time.Duration // of the suspicion
	}{
		{name: "suspect", steps: []step{{msg: sus(1)}}, at: time.Second, suspect: true},
		{name: "suspect at a newer incarnation", steps: []step{{msg: alv(3)}, {msg: sus(5)}}, at: time.Second, suspect: true},
		{name: "suspect at an older incarnation: ignored", steps: []step{{msg: alv(3)}, {msg: sus(2)}}, at: time.Second, suspect: false},
		{name: "confirmations do not extend it", steps: []step{{msg: sus(1)}, {at: 9 * time.Second, msg: sus(1)}}, at: 11 * time.Second, suspect: false},
		{name: "a confirmation keeps its start", steps: []step{{msg: sus(1)}, {at: 2 * time.Second, msg: sus(2)}}, at: 5 * time.Second, suspect: true, since: 0},
		{name: "refuted", steps: []step{{msg: sus(1)}, {at: time.Second, msg: alv(2)}}, at: 2 * time.Second, suspect: false},
		{name: "alive at the suspected incarnation: no refutation", steps: []step{{msg: sus(1)}, {msg: alv(1)}}, at: time.Second, suspect: true},
		{name: "a refuted incarnation suspected again: ignored", steps: []step{{msg: sus(1)}, {msg: alv(2)}, {msg: sus(1)}}, at: time.Second, suspect: false},
		{name: "suspected again after a refutation", steps: []step{{msg: sus(1)}, {msg: alv(2)}, {at: time.Second, msg: sus(2)}}, at: 2 * time.Second, suspect: true, since: time.Second},
		{name: "expires", steps: []step{{msg: sus(1)}}, at: timeout, suspect: false},
		{name: "a dead message alone does not clear it", steps: []step{{msg: sus(1)}, {msg: ded(1)}}, at: time.Second, suspect: true},
		{name: "dead by memberlist: dead, not suspect", steps: []step{{msg: sus(1)}, {member: StateDead}}, at: time.Second, suspect: false},
		{name: "left", steps: []step{{msg: sus(1)}, {member: StateLeft}}, at: time.Second, suspect: false},
		{name: "a dead member suspected: not suspect", steps: []step{{member: StateDead}, {msg: sus(4)}}, at: time.Second, suspect: false},
		{name: "back from the dead: the old suspicion is gone", steps: []step{{member: StateDead}, {msg: sus(4)}, {member: StateAlive}}, at: time.Second, suspect: false},
		{name: "a dead message's incarnation counts", steps: []step{{msg: ded(6)}, {member: StateAlive}, {msg: sus(5)}}, at: time.Second, suspect: false},
		{name: "suspected before memberlist knows it", steps: []step{{msg: sus(1)}, {member: StateAlive}}, at: time.Second, suspect: true},
		{name: "about this node: ignored", steps: []step{{msg: mlMsg{kind: mlSuspect, node: "a", inc: 9}}}, at: time.Second, suspect: false},
		{name: "about no node of the tree: ignored", steps: []step{{msg: mlMsg{kind: mlSuspect, node: "x", inc: 9}}}, at: time.Second, suspect: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newState("a", 1)
			s.setTree(NewTree(treeNodes, nil))
			s.setMember("a", "a:7946", StateAlive, t0, Meta{})
			alive := true
			for _, st := range tc.steps {
				if st.member != "" {
					s.setMember("b", "b:7946", st.member, t0.Add(st.at), Meta{})
					alive = false // set by the steps
					continue
				}
				s.gossiped(st.msg, t0.Add(st.at), timeout)
			}
			if alive && s.members["b"] == nil {
				s.setMember("b", "b:7946", StateAlive, t0, Meta{})
			}
			s.expire(t0.Add(tc.at))
			name := "b"
			if len(tc.steps) > 0 && tc.steps[0].msg.node != "" {
				name = tc.steps[0].msg.node
			}
			if name == "x" { // a member memberlist would refuse, had it not
				s.setMember("x", "x:7946", StateAlive, t0, Meta{})
			}
			since, ok := s.suspect(name)
			if ok != tc.suspect {
				t.Fatalf("%s suspect: %v, want %v", name, ok, tc.suspect)
			}
			if ok && !since.Equal(t0.Add(tc.since)) {
				t.Errorf("suspect since %v, want %v", since.Sub(t0), tc.since)
			}
		})
	}
}

// TestSuspicionForgottenWithTheNode: a node the tree no longer names
// leaves no suspicion nor incarnation behind.
func TestSuspicionForgottenWithTheNode(t *testing.T) {
	s := newTestState("a", "b", "c")
	s.gossiped(mlMsg{kind: mlSuspect, node: "b", inc: 3}, time.Unix(1000, 0), time.Minute)
	s.gossiped(mlMsg{kind: mlAlive, node: "c", inc: 2}, time.Unix(1000, 0), time.Minute)
	s.setTree(NewTree([]string{"a", "c"}, nil))
	if _, ok := s.suspects["b"]; ok || len(s.incs) != 1 || s.incs["c"] != 2 {
		t.Errorf("after b left the tree: suspects %v, incarnations %v; want none, c's only", s.suspects, s.incs)
	}
}

// TestFailStaticSuspicion: fail static counts dead and suspect members of
// the tree's nodes seen: suspicion alone crosses half; a suspect member's
// endpoints stay (only its own probe takes them out).
func TestFailStaticSuspicion(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		name          string
		dead, suspect []string
		static        bool
	}{
		{name: "none", static: false},
		{name: "two suspect of five", suspect: []string{"b", "c"}, static: false},
		{name: "three suspect of five", suspect: []string{"b", "c", "d"}, static: true},
		{name: "one dead, two suspect", dead: []string{"b"}, suspect: []string{"c", "d"}, static: true},
		{name: "two dead", dead: []string{"b", "c"}, static: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestState("a", "b", "c", "d", "e")
			for _, n := range tc.dead {
				s.setMember(n, n+":7946", StateDead, t0, Meta{})
			}
			for _, n := range tc.suspect {
				s.gossiped(mlMsg{kind: mlSuspect, node: n, inc: 1}, t0, time.Minute)
			}
			v := s.view(s.aliveList(), 0)
			if v.FailStatic != tc.static || v.Dead != len(tc.dead) || v.Suspect != len(tc.suspect) || v.Ever != 5 {
				t.Errorf("fail static %v, %d dead, %d suspect of %d; want %v, %d, %d of 5",
					v.FailStatic, v.Dead, v.Suspect, v.Ever, tc.static, len(tc.dead), len(tc.suspect))
			}
			keyOf := map[string]string{"b": keyB, "c": keyC, "d": keyD}
			for _, n := range tc.suspect {
				if _, out := v.Out[keyOf[n]]; out {
					t.Errorf("suspect %s's endpoint out: %v", n, v.Out)
				}
				if s.home(n) != StateAlive {
					t.Errorf("suspect %s's endpoints follow %q, want alive's", n, s.home(n))
				}
			}
		})
	}
}

// cutOneOfFour starts members a, b, c and d, with fastTimers but
// memberlist's suspicion lasting mult probe intervals (k is 0 in a fleet
// this small: the shortest timeout applies), waits until they see each
// other alive, and cuts d off the network. It returns the cluster, d and
// the others.
func cutOneOfFour(t *testing.T, mult int) (c *cluster, d *Fleet, others []*Fleet) {
	c = newCluster(t, treeNodes, treeChecks)
	slow := func(cfg *Config) {
		cfg.Tune = func(mc *memberlist.Config) {
			fastTimers(mc)
			mc.SuspicionMult = mult
		}
	}
	var fs []*Fleet
	for _, n := range []string{"a", "b", "c", "d"} {
		fs = append(fs, c.start(n, fs[:min(len(fs), 1)], slow))
	}
	converged(t, fs)
	c.net.setCut(fs[3].Addr(), true)
	return c, fs[3], fs[:3]
}

// allViews tells whether the view of each of fs is as ok says.
func allViews(fs []*Fleet, ok func(*View) bool) bool {
	for _, f := range fs {
		if !ok(f.View()) {
			return false
		}
	}
	return true
}

// allSee tells whether each of fs sees name in state st.
func allSee(fs []*Fleet, st MemberState, name string) bool {
	for _, f := range fs {
		if !sees(f, st, name) {
			return false
		}
	}
	return true
}

// TestSuspectBeforeDead: a member cut off the network is suspect on the
// others before it is dead, with the state and its start in Members and
// the metric; then dead, suspect no more.
func TestSuspectBeforeDead(t *testing.T) {
	cut := time.Now()
	_, _, others := cutOneOfFour(t, 40) // suspect for 4 s
	// A view follows the members within viewEvery: wait for both.
	waitFor(t, "a, b and c to see d suspect, in their views too", func() bool {
		return allSee(others, StateSuspect, "d") && allViews(others, func(v *View) bool { return v.Suspect == 1 })
	})
	for _, f := range others {
		for _, m := range f.Members() {
			if m.Name == "d" && (m.Since.Before(cut) || m.Since.After(time.Now())) {
				t.Errorf("%s: d suspect since %v, before it was cut off (%v)", f.cfg.Name, m.Since, cut)
			}
		}
		if v := f.View(); v.Suspect != 1 || v.FailStatic {
			t.Errorf("%s: %d suspect, fail static %v; want d suspect, no fail static", f.cfg.Name, v.Suspect, v.FailStatic)
		}
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(f)
		if got := gathered(t, reg)[`netspec_fleet_members{state="suspect"}`]; got != 1 {
			t.Errorf("%s: netspec_fleet_members{state=suspect} %v, want 1", f.cfg.Name, got)
		}
		if outOn(f, keyD, "") {
			t.Errorf("%s: suspect d's endpoint out: %v", f.cfg.Name, f.View().Out)
		}
	}
	waitFor(t, "a, b and c to see d dead, in their views too", func() bool {
		return allSee(others, StateDead, "d") && allViews(others, func(v *View) bool { return v.Dead == 1 })
	})
	for _, f := range others {
		if v := f.View(); v.Suspect != 0 || v.Dead != 1 {
			t.Errorf("%s: %d dead, %d suspect; want d dead only", f.cfg.Name, v.Dead, v.Suspect)
		}
		if !outOn(f, keyD, ReasonDead) {
			t.Errorf("%s: dead d's endpoint not out: %v", f.cfg.Name, f.View().Out)
		}
	}
}

// TestCutOffSuspicionFailsStaticAndClears: a member cut off suspects
// every other member (its own probes fail: its suspect messages only
// leave through its transport, nobody gets them) and fails static on
// suspicion alone, before memberlist declares any dead; the others
// suspect it. With the network back, the suspected refute: every
// suspicion clears on both sides and fail static ends, nobody died.
func TestCutOffSuspicionFailsStaticAndClears(t *testing.T) {
	c, d, others := cutOneOfFour(t, 300) // suspect for 30 s
	fs := append(slices.Clone(others), d)
	waitFor(t, "d to see a, b and c suspect and fail static", func() bool {
		return sees(d, StateSuspect, "a", "b", "c") && d.View().FailStatic
	})
	if v := d.View(); v.Dead != 0 || v.Suspect != 3 || v.Ever != 4 {
		t.Errorf("d: %d dead, %d suspect of %d; want 3 suspect of 4", v.Dead, v.Suspect, v.Ever)
	}
	for _, k := range []string{keyA, keyB, keyC} {
		if outOn(d, k, "") {
			t.Errorf("d: %s out: %v", k, d.View().Out)
		}
	}
	waitFor(t, "a, b and c to see d suspect", func() bool { return allSee(others, StateSuspect, "d") })
	for _, f := range others {
		if f.View().FailStatic {
			t.Errorf("%s fails static with d suspect", f.cfg.Name)
		}
	}

	c.net.setCut(d.Addr(), false)
	converged(t, fs) // every suspicion refuted: all alive everywhere
	waitFor(t, "every view without suspects, d's fail static ended", func() bool {
		for _, f := range fs {
			if v := f.View(); v.Suspect != 0 || v.FailStatic {
				return false
			}
		}
		return true
	})
	for _, f := range fs {
		if v := f.View(); v.Dead != 0 {
			t.Errorf("%s: %d dead after the refutations", f.cfg.Name, v.Dead)
		}
	}
}

// BenchmarkReadPacket: the reader's cost per packet, on memberlist's
// paths: an encrypted gossip packet of 1,400 bytes with readiness
// messages only (most packets), and one with membership messages too.
func BenchmarkReadPacket(b *testing.B) {
	key := bytes.Repeat([]byte{3}, 32)
	kr, err := keyring([][]byte{key})
	if err != nil {
		b.Fatal(err)
	}
	r := &packetReader{label: "netspec", keyring: kr, verify: true}
	user := append([]byte{8}, bytes.Repeat([]byte{1}, 90)...)
	alive := mlEncode(b, mlAlive, mlAliveBody{Incarnation: 8, Node: "node-17", Addr: []byte{192, 0, 2, 17}, Port: 7946,
		Meta: bytes.Repeat([]byte{2}, 40), Vsn: []uint8{1, 5, 2, 0, 0, 0}})
	suspect := mlEncode(b, mlSuspect, mlSuspectBody{Incarnation: 7, Node: "node-3", From: "node-1"})
	for _, bc := range []struct {
		name string
		msgs [][]byte
	}{
		{name: "readiness only", msgs: slices.Repeat([][]byte{user}, 14)},
		{name: "with membership", msgs: append(slices.Repeat([][]byte{user}, 11), alive, suspect, alive)},
	} {
		pkt := withLabel("netspec", encrypted(b, 1, key, compound(bc.msgs...), []byte("netspec")))
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(pkt)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := r.read(pkt); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
