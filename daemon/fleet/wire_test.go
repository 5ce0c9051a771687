package fleet

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPartsRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, maxPartIDs, maxPartIDs + 1, 3*maxPartIDs + 7} {
		var want []ID
		for i := range n {
			want = append(want, ID(i*7919+1))
		}
		v := Version{Gen: 1 << 62, Seq: 300}
		msgs := encodeParts("node-1", v, want)
		var got []ID
		for i, m := range msgs {
			if len(m) > maxPartSize {
				t.Errorf("%d ids: part %d has %d bytes, more than %d", n, i, len(m), maxPartSize)
			}
			p, err := decodePart(m)
			if err != nil {
				t.Fatalf("%d ids: part %d: %v", n, i, err)
			}
			if p.owner != "node-1" || p.v != v || p.index != i || p.parts != len(msgs) {
				t.Errorf("%d ids: part %d reads %+v", n, i, p)
			}
			got = append(got, p.ids...)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%d ids (-want +got):\n%s", n, diff)
		}
	}
}

func TestStateRoundTrip(t *testing.T) {
	want := []storedTable{{owner: "a", v: Version{Gen: 1, Seq: 2}, ids: []ID{3, 4}}, {owner: "b", v: Version{Gen: 5}, ids: []ID{}}}
	got, err := decodeState(encodeState(want))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(storedTable{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestDecodeMalformed(t *testing.T) {
	good := encodeParts("b", Version{Gen: 1, Seq: 1}, []ID{1, 2})[0]
	tests := []struct {
		name string
		msg  []byte
	}{
		{name: "empty", msg: nil},
		{name: "other magic", msg: []byte{0, msgPart}},
		{name: "a state as a part", msg: encodeState(nil)},
		{name: "truncated", msg: good[:len(good)-1]},
		{name: "trailing", msg: append(bytes.Clone(good), 0)},
		{name: "empty owner", msg: []byte{wireMagic, msgPart, 0}},
		{name: "owner too long", msg: append([]byte{wireMagic, msgPart, 0xff, 0x0f}, make([]byte, 300)...)},
		{name: "part beyond parts", msg: []byte{wireMagic, msgPart, 1, 'b', 0, 0, 0, 0, 0, 0, 0, 1, 1, 2, 2, 0}},
		{name: "no parts", msg: []byte{wireMagic, msgPart, 1, 'b', 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0}},
		{name: "too many ids", msg: []byte{wireMagic, msgPart, 1, 'b', 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 1, 0xff, 0x01}},
		{name: "ids beyond the end", msg: []byte{wireMagic, msgPart, 1, 'b', 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 1, 5, 1, 2}},
		{name: "bad varint", msg: []byte{wireMagic, msgPart, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := decodePart(tt.msg); !IsMalformed(err) {
				t.Errorf("decodePart: %v, want malformed", err)
			}
		})
	}
	if _, err := decodeState([]byte{wireMagic, msgState, 0xff, 0xff, 0xff, 0xff, 0x0f}); !IsMalformed(err) {
		t.Errorf("decodeState of too many tables: %v, want malformed", err)
	}
}

// FuzzNotifyMsg: whatever arrives, the delegate neither panics nor
// applies what does not read.
func FuzzNotifyMsg(f *testing.F) {
	f.Add(encodeParts("b", Version{Gen: 1, Seq: 1}, []ID{1, 2})[0])
	f.Add(encodeState([]storedTable{{owner: "b", v: Version{Gen: 1}, ids: []ID{1}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		fl := &Fleet{cfg: Config{Name: "a"}, st: newState("a", 1), log: discard(), changed: make(chan struct{}, 1)}
		fl.st.setNodes(treeNodes)
		fl.queue = newTestQueue()
		d := &delegate{f: fl}
		d.NotifyMsg(b)
		d.MergeRemoteState(b, false)
		_, errPart := decodePart(b)
		_, errState := decodeState(b)
		if errPart != nil && errState != nil && fl.Stats().Applied > 0 {
			t.Errorf("applied a table from a malformed message")
		}
	})
}

func TestMetaFits(t *testing.T) {
	m := Meta{Revision: strings.Repeat("r", 1000), Checks: 1 << 40, Failing: 1 << 40, Leaving: true}
	if b := m.encode(); len(b) > 512 {
		t.Errorf("meta of %d bytes, more than memberlist's 512", len(b))
	}
	got, err := decodeMeta(m.encode())
	if err != nil || len(got.Revision) != maxRevision || !got.Leaving {
		t.Errorf("meta reads back %+v, %v", got, err)
	}
	if _, err := decodeMeta([]byte("{")); !IsMalformed(err) {
		t.Errorf("a broken meta: %v, want malformed", err)
	}
}

func TestParseKeys(t *testing.T) {
	k16, k32 := base64.StdEncoding.EncodeToString(make([]byte, 16)), base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32))
	tests := []struct {
		name string
		file string
		keys int
		err  string
	}{
		{name: "primary and secondary", file: "# rotation\n" + k32 + "\n\n" + k16 + "\n", keys: 2},
		{name: "one", file: k16, keys: 1},
		{name: "none", file: "# nothing\n", err: ": no key"},
		{name: "not base64", file: k16 + "\nnot-a-key!\n", err: ":2: not a base64 key"},
		{name: "wrong size", file: base64.StdEncoding.EncodeToString(make([]byte, 20)), err: ":1: a key is 16, 24 or 32 bytes, not 20"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys, err := ParseKeys([]byte(tt.file))
			if tt.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || len(keys) != tt.keys {
				t.Fatalf("%d keys, %v; want %d", len(keys), err, tt.keys)
			}
			if _, err := keyring(keys); err != nil {
				t.Errorf("keyring: %v", err)
			}
		})
	}
}
