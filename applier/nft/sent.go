package nft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"
	"netspec.dev/netspec/applier/nft/encoding"
)

// A table replaced whole is checked against what was sent, not read back.
//
// The kernel applies a transaction whole or not at all and acknowledged
// this one; what it holds of a table the transaction created is exactly
// what the transaction's messages say. What can go wrong is the encoding:
// google/nftables v0.3.0 was seen to drop set elements silently. So the
// messages, as the bytes handed to sendmsg, are decoded again while the
// kernel takes them (System; the Fake decodes what it staged) and
// compared with the model: every chain with its hook, and every named
// set's elements, as a count and an order-independent sum of their keys'
// hashes (setSum). At 50,000 Services, reading the table back instead
// took 1.0–1.5 s after the batch, most of it the kernel walking its sets
// and chain list again for every 32 KB reply. Incremental changes still
// read back the chains they wrote (verifyChanged), and `netspec watch`'s
// periodic Apply reads the whole table back, so drift made afterwards is
// still found and repaired.

// tableKey names a table.
type tableKey struct {
	fam  nftables.TableFamily
	name string
}

// sentTables is what one transaction added to each table, counted from
// the table's last delete in it: for a replaced table, all it holds.
type sentTables map[tableKey]*sentTable

// sentTable is what a transaction added to one table: its chains by name
// (hooks included) and a digest of each named set's elements.
type sentTable struct {
	chains map[string]*nftables.Chain
	sets   map[string]*setSum
}

// setSum digests a set's elements: their number, and the sum of the
// hashes of their keys (spelled as ElementKey spells them; seeded by
// sumSeed, as digests are only compared within a process), which does not
// depend on their order.
// Two digests of different elements are equal by a 2^-64 chance.
type setSum struct {
	n   int
	sum uint64
}

// add adds elems, as google/nftables is given them, to the digest.
func (s *setSum) add(elems []nftables.SetElement) {
	var h maphash.Hash
	h.SetSeed(sumSeed)
	for _, e := range elems {
		v := e.VerdictData
		if v == nil && len(e.Val) > 0 {
			v = decodeVerdict(e.Val)
		}
		h.Reset()
		writeElement(&h, e.Key, e.KeyEnd, e.IntervalEnd, v != nil)
		if v != nil {
			writeUint32(&h, uint32(v.Kind))
			writeString(&h, v.Chain)
		} else {
			writeField(&h, e.Val)
		}
		s.n++
		s.sum += h.Sum64()
	}
}

// writeElement, writeUint32, writeField and writeString spell an
// element for its hash as ElementKey does: two elements hash alike when
// their keys are equal. A field is its length and its bytes, whether it
// is held as bytes (decoded from a message) or as a string (a verdict's
// chain in google/nftables' elements).
func writeElement(h *maphash.Hash, key, keyEnd []byte, end, verdict bool) {
	writeField(h, key)
	writeField(h, keyEnd)
	var flags byte
	if end {
		flags |= 1
	}
	if verdict {
		flags |= 2
	}
	h.WriteByte(flags)
}

func writeUint32(h *maphash.Hash, v uint32) {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	h.Write(b[:])
}

func writeField(h *maphash.Hash, b []byte) {
	writeUint32(h, uint32(len(b)))
	h.Write(b)
}

func writeString(h *maphash.Hash, s string) {
	writeUint32(h, uint32(len(s)))
	h.WriteString(s)
}

// addList adds the elements of an NFTA_SET_ELEM_LIST_ELEMENTS attribute's
// payload, as the kernel reads them, without allocating.
func (s *setSum) addList(list []byte) error {
	var h maphash.Hash
	h.SetSeed(sumSeed)
	return eachElement(list, func(e rawElement) error {
		h.Reset()
		writeElement(&h, e.key, e.keyEnd, e.flags&unix.NFT_SET_ELEM_INTERVAL_END != 0, e.verdict != nil)
		if e.verdict != nil {
			kind, chain, _ := verdictOf(e.verdict)
			writeUint32(&h, uint32(kind))
			writeField(&h, chain)
		} else {
			writeField(&h, e.val)
		}
		s.n++
		s.sum += h.Sum64()
		return nil
	})
}

// eachAttr calls fn with the type (flags cleared) and payload of each
// netlink attribute of b.
func eachAttr(b []byte, fn func(typ uint16, payload []byte) error) error {
	for len(b) > 0 {
		n := 0
		if len(b) >= 4 {
			n = int(binary.NativeEndian.Uint16(b))
		}
		if n < 4 || n > len(b) {
			return errBadAttr
		}
		if err := fn(binary.NativeEndian.Uint16(b[2:])&^(unix.NLA_F_NESTED|unix.NLA_F_NET_BYTEORDER), b[4:n]); err != nil {
			return err
		}
		b = b[min(nlmsgAlign(n), len(b)):]
	}
	return nil
}

// errBadAttr is the error of attributes whose lengths do not add up: not
// attributes, as decodeVerdict finds often (an endpoint map's data).
var errBadAttr = errors.New("truncated or overlong netlink attribute")

// table returns what was added to a table so far.
func (st sentTables) table(fam nftables.TableFamily, name string) *sentTable {
	t := st[tableKey{fam, name}]
	if t == nil {
		t = &sentTable{chains: map[string]*nftables.Chain{}, sets: map[string]*setSum{}}
		st[tableKey{fam, name}] = t
	}
	return t
}

// set returns the digest of a set's elements added so far.
func (st sentTables) set(fam nftables.TableFamily, table, set string) *setSum {
	t := st.table(fam, table)
	s := t.sets[set]
	if s == nil {
		s = &setSum{}
		t.sets[set] = s
	}
	return s
}

// decodeSent decodes the messages of a staged transaction into what it
// adds to each table.
func decodeSent(chunks [][]byte) (sentTables, error) {
	st := sentTables{}
	tables := map[string]*nftables.Table{}
	err := eachMessage(chunks, func(typ uint16, fam nftables.TableFamily, attrs []byte) error {
		switch typ {
		case unix.NFT_MSG_DELTABLE:
			name, err := stringAttr(attrs, unix.NFTA_TABLE_NAME)
			if err != nil {
				return fmt.Errorf("delete table: %w", err)
			}
			delete(st, tableKey{fam, name}) // what was added before is gone
		case unix.NFT_MSG_NEWCHAIN:
			ch, err := parseChain(fam, attrs, tables)
			if err != nil {
				return fmt.Errorf("chain: %w", err)
			}
			if ch.Table != nil {
				st.table(fam, ch.Table.Name).chains[ch.Name] = ch
			}
		case unix.NFT_MSG_NEWSETELEM:
			table, err := stringAttr(attrs, unix.NFTA_SET_ELEM_LIST_TABLE)
			if err != nil {
				return fmt.Errorf("elements: %w", err)
			}
			set, _ := stringAttr(attrs, unix.NFTA_SET_ELEM_LIST_SET)
			list, _ := attr(attrs, unix.NFTA_SET_ELEM_LIST_ELEMENTS)
			if err := st.set(fam, table, set).addList(list); err != nil {
				return fmt.Errorf("elements of %s: %w", set, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sent batch: %w", err)
	}
	return st, nil
}

// eachMessage calls fn with the type (NFT_MSG_*), family and attributes
// of each nftables message of a staged transaction (batch.go: netlink
// messages back to back, each padded to 4 bytes), in order.
func eachMessage(chunks [][]byte, fn func(typ uint16, fam nftables.TableFamily, attrs []byte) error) error {
	for _, c := range chunks {
		for off := 0; off < len(c); {
			if len(c)-off < nlmsgHeaderLen {
				return fmt.Errorf("truncated message header at %d", off)
			}
			n := int(binary.NativeEndian.Uint32(c[off:]))
			typ := binary.NativeEndian.Uint16(c[off+4:])
			if n < nlmsgHeaderLen+4 || off+n > len(c) {
				return fmt.Errorf("message of %d bytes at %d", n, off)
			}
			data := c[off+nlmsgHeaderLen : off+n]
			off += nlmsgAlign(n)
			if typ>>8 != unix.NFNL_SUBSYS_NFTABLES {
				continue
			}
			if err := fn(typ&0xff, nftables.TableFamily(data[0]), data[4:]); err != nil {
				return err
			}
		}
	}
	return nil
}

// stringAttr returns the NUL-terminated string attribute typ of attrs
// ("" when there is none).
func stringAttr(attrs []byte, typ uint16) (string, error) {
	b, err := attr(attrs, typ)
	return cString(b), err
}

// attr returns the payload of the attribute typ of attrs (nil when there
// is none; the last when there are several).
func attr(attrs []byte, typ uint16) ([]byte, error) {
	var out []byte
	err := eachAttr(attrs, func(t uint16, b []byte) error {
		if t == typ {
			out = b
		}
		return nil
	})
	return out, err
}

// modelSums computes the digest of every static set of the tables plans
// replace from their model (not of the encoded ones, which the read-back
// check compares with the kernel), once: by family index, then set name.
type modelSums struct {
	sums func() []map[string]setSum
}

// newModelSums returns the digests of the sets plans replace from their
// model, to be computed once start is called: as the kernel takes the
// batch (the encoding has the cores until then).
func newModelSums(plans []*tablePlan) *modelSums {
	return &modelSums{sums: sync.OnceValue(func() []map[string]setSum {
		bySet := make([]map[string]setSum, len(plans))
		for i, tp := range plans {
			if !sentChecked(tp) {
				continue
			}
			f := tp.model.Family
			sums := map[string]setSum{}
			for _, it := range tp.model.Items {
				// A dynamic set's digest is that of no element; the check
				// skips those sets.
				if s := it.Set; s != nil {
					var sum setSum
					for _, elems := range encoding.SetElements(f, s) {
						sum.add(elems)
					}
					sums[s.Name] = sum
				}
			}
			bySet[i] = sums
		}
		return bySet
	})}
}

// start starts computing the digests in the background.
func (m *modelSums) start() { go m.sums() }

// of returns the digests of family index i, computing them if nothing
// has, or waiting for them.
func (m *modelSums) of(i int) map[string]setSum { return m.sums()[i] }

// sentChecked says whether what tp wrote is checked against what was
// sent (sentMatches) rather than read back: a table replaced whole from
// its model.
func sentChecked(tp *tablePlan) bool {
	return tp.model != nil && tp.changes.Replace && !tp.changes.Delete
}

// sentMatches reports whether the kernel's table of family fam holds
// exactly what want describes, from what the transaction sent of it (its
// chains with their hooks, its sets' element digests, sums) and the
// kernel's list of the table's sets (their declarations). false says
// nothing of what differs: diffKernelTable does.
func (a *Applier) sentMatches(want *tableChecks, sums map[string]setSum, fam nftables.TableFamily) (bool, error) {
	sent, err := a.k.Sent(fam, want.name)
	if err != nil {
		return false, err
	}
	if sent == nil {
		return false, nil
	}
	ok, err := a.setsMatch(want, fam)
	if err != nil || !ok {
		return false, err
	}
	if !sameChains(sent.chains, want.chains) {
		return false, nil
	}
	for _, s := range want.sets {
		if s.Template.Dynamic {
			continue
		}
		got := sent.sets[s.Name]
		if got == nil {
			got = &setSum{}
		}
		if *got != sums[s.Name] {
			return false, nil
		}
	}
	return true, nil
}
