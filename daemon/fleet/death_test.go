package fleet

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// TestDeathReachesAMemberThatMissedIt: the tail of a death. Every
// suspect and dead message about e that memberlist sends to d is lost
// (memberlist checksums a lone message to a member of this protocol
// version, or piggybacks it in a compound one, maybe compressed; the
// repair's direct send is a lone dead message), so gossip never tells
// d of e's death; its own probe of e starts a suspicion nobody
// confirms, which lasts 400 s here. The others declare e dead after
// their confirmed suspicion (0.4 s); d must learn it from them all the
// same, long before its own suspicion ends.
func TestDeathReachesAMemberThatMissedIt(t *testing.T) {
	c := newCluster(t, treeNodes, treeChecks)
	tune := func(cfg *Config) {
		cfg.Tune = func(mc *memberlist.Config) {
			fastTimers(mc)
			// k = 2 confirmations expected; min 0.4 s, max 400 s.
			mc.SuspicionMult = 4
			mc.SuspicionMaxTimeoutMult = 1000
			mc.PushPullInterval = time.Hour // memberlist's periodic repair is not the one under test
		}
	}
	var fs []*Fleet
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		fs = append(fs, c.start(n, fs[:min(len(fs), 1)], tune))
	}
	converged(t, fs)
	d, e, others := fs[3], fs[4], fs[:3]
	rd := newPacketReader(d.mc)
	c.net.setDrop(func(from, to string, b []byte) bool {
		if to != d.Addr() {
			return false
		}
		msgs, layers, _ := rd.read(b)
		if layers&(layerCRC|layerCompound|layerCompressed) == 0 {
			return false // a lone message: the repair's direct send
		}
		for _, m := range msgs {
			if m.node == "e" && m.kind != mlAlive {
				return true
			}
		}
		return false
	})
	e.Shutdown()
	c.net.setCut(e.Addr(), true)
	waitFor(t, "a, b and c to see e dead", func() bool { return allSee(others, StateDead, "e") })
	if lost := c.net.lost.Load(); lost == 0 {
		t.Fatalf("no message about e was lost on its way to d: the test tests nothing")
	}
	waitFor(t, "d to see e dead", func() bool { return sees(d, StateDead, "e") })
}

// TestDeathSends: the direct sends make up gossip's transmissions to
// deathTarget, to every other alive member at most, and none where
// gossip's reach it alone (memberlist's LAN mult of 4).
func TestDeathSends(t *testing.T) {
	for _, tc := range []struct{ n, want int }{
		{n: 2, want: 0}, // the dead one and this one: nobody to tell
		{n: 3, want: 1},
		{n: 8, want: 6},
		{n: 9, want: 7},
		{n: 10, want: 6}, // 14 − 4·2
		{n: 99, want: 6},
		{n: 100, want: 2}, // 14 − 4·3
		{n: 200, want: 2},
		{n: 999, want: 2},
		{n: 1000, want: 0},
		{n: 10000, want: 0},
	} {
		if got := deathSends(tc.n, 4); got != tc.want {
			t.Errorf("deathSends(%d, 4) = %d, want %d", tc.n, got, tc.want)
		}
	}
}

// TestDeadPacket: the dead message sent straight reads back as one dead
// message of the node at its incarnation, through the layers memberlist
// would go through (label, decryption), with and without a key; another
// fleet's reader (another key) does not read it.
func TestDeadPacket(t *testing.T) {
	key := bytes.Repeat([]byte{5}, 32)
	other := bytes.Repeat([]byte{6}, 32)
	for _, tc := range []struct {
		name       string
		keys       [][]byte
		readerKeys [][]byte
		label      string
		wantLayers int
		wantErr    bool
	}{
		{name: "encrypted", keys: [][]byte{key}, readerKeys: [][]byte{other, key}, label: "netspec", wantLayers: layerLabel | layerEncrypted},
		{name: "clear", label: "netspec", wantLayers: layerLabel},
		{name: "clear, no label", wantLayers: 0},
		{name: "another key", keys: [][]byte{key}, readerKeys: [][]byte{other}, label: "netspec", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			config := func(keys [][]byte) *memberlist.Config {
				c := memberlist.DefaultLANConfig()
				c.Label = tc.label
				if len(keys) > 0 {
					kr, err := keyring(keys)
					if err != nil {
						t.Fatal(err)
					}
					c.Keyring, c.GossipVerifyIncoming, c.GossipVerifyOutgoing = kr, true, true
				}
				return c
			}
			pkt, err := deadPacket(config(tc.keys), death{node: "e", inc: 7}, "a")
			if err != nil {
				t.Fatal(err)
			}
			msgs, layers, err := newPacketReader(config(tc.readerKeys)).read(pkt)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("read with another key: %v, want an error", msgs)
				}
				return
			}
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			if want := []mlMsg{{kind: mlDead, node: "e", inc: 7}}; !slices.Equal(msgs, want) || layers != tc.wantLayers {
				t.Errorf("read %v (layers %s), want %v (layers %s)", msgs, layerNames(layers), want, layerNames(tc.wantLayers))
			}
		})
	}
}

// TestDeathToldOnlyForADeath: memberlist's leave notice queues a death
// to be told for a member that died, none for one that left (its meta
// says leaving) nor for one already dead.
func TestDeathToldOnlyForADeath(t *testing.T) {
	f := &Fleet{log: discard(), st: newState("a", 1), changed: make(chan struct{}, 1), deaths: make(chan death, maxDeaths)}
	f.st.setTree(NewTree(treeNodes, treeChecks))
	d := &delegate{f: f}
	alive := func(name string) *memberlist.Node {
		n := &memberlist.Node{Name: name, Addr: []byte{10, 0, 0, 9}, Port: 7946, Meta: Meta{}.encode()}
		d.NotifyJoin(n)
		return n
	}
	f.st.incs["b"] = 3
	b := alive("b")
	d.NotifyLeave(b)
	d.NotifyLeave(b) // again: no second death
	c := alive("c")
	c.Meta = Meta{Leaving: true}.encode()
	d.NotifyLeave(c)
	close(f.deaths)
	var got []death
	for x := range f.deaths {
		got = append(got, x)
	}
	if want := []death{{node: "b", inc: 3}}; !slices.Equal(got, want) {
		t.Errorf("deaths queued %v, want %v", got, want)
	}
}
