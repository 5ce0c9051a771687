package nft

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/userdata"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
	"netspec.dev/netspec/applier/nft/encoding"
)

// Endpoint maps (render/picks.go): interval maps from numgen keys to an
// endpoint's address and port, declared
//
//	map endpoints-3f {
//		typeof numgen random mod 2520 : ip daddr . th dport
//		flags interval
//		elements = { 1234560000-1234560839 : 10.244.1.10 . 8080, … }
//	}
//
// and used by one rule per picking chain:
//
//	meta l4proto tcp dnat ip to numgen random mod 2520 offset 1234560000 map @endpoints-3f
//
// nft keeps the typeof of a set in the set's user data, and prints the set
// from it: `nft list` shows what `nft -f` declared only if netspec sends
// the same bytes. google/nftables v0.3.0 cannot send them, so AddTo marks
// the set with a comment holding the bytes, and the batch sender (batch.go)
// swaps the user data of every set so marked for those bytes.

// typeofUserdata is the user data nft 1.0.6 gives an endpoint map, read
// with `nft --debug=mnl`: key byte order host; data byte order unset; the
// typeof of the key, numgen (23) random with the modulus and offset 0;
// the typeof of the data, a concatenation (13) of two payload expressions
// (7): the destination address of IPv4 (12, 12) or IPv6 (13, 9), then th
// (11) dport (2); and a data-interval flag of 0. TestModelEqualsKernel
// proves the bytes: with others, `nft list` prints the map differently.
func typeofUserdata(fam nftables.TableFamily, mod uint32) []byte {
	addr := "0c000000" + "0104" + "0c000000" // IPv4 daddr
	if fam == nftables.TableFamilyIPv6 {
		addr = "0d000000" + "0104" + "09000000"
	}
	h := "0004" + "01000000" + "0104" + "00000000" +
		"031a" + "0004" + "17000000" + "0112" + "0004" + "01000000" + "0104" + hex.EncodeToString(binary.LittleEndian.AppendUint32(nil, mod)) + "0204" + "00000000" +
		"0434" + "0004" + "0d000000" + "012c" +
		"0014" + "0004" + "07000000" + "010c" + "0004" + addr +
		"0114" + "0004" + "07000000" + "010c" + "0004" + "0b000000" + "0104" + "02000000" +
		"0604" + "00000000"
	b, err := hex.DecodeString(h)
	if err != nil {
		panic(err) // a constant
	}
	return b
}

// typeofMark starts the comment by which AddTo marks a set whose user
// data the batch sender must replace: the rest is the data, in hex.
const typeofMark = "netspec-userdata:"

// setUserdata replaces, in a NEWSET message of google/nftables, user data
// holding a comment marked typeofMark by the bytes the comment holds.
// Other messages are returned as they are. The attributes are walked as
// bytes, so that everything else (flags of nested attributes included)
// stays exactly as the library wrote it.
func setUserdata(m netlink.Message) (netlink.Message, error) {
	if m.Header.Type != netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_NEWSET) || len(m.Data) < 4 {
		return m, nil
	}
	const hdr = 4 // nlattr: length, type
	b := m.Data
	for off := 4; off+hdr <= len(b); {
		n := int(binary.NativeEndian.Uint16(b[off:]))
		typ := binary.NativeEndian.Uint16(b[off+2:]) &^ (unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
		if n < hdr || off+n > len(b) {
			return m, fmt.Errorf("set message: bad attribute at %d", off)
		}
		if typ == unix.NFTA_SET_USERDATA {
			comment, ok := userdata.GetString(b[off+hdr:off+n], userdata.NFTNL_UDATA_SET_COMMENT)
			if !ok || !strings.HasPrefix(comment, typeofMark) {
				return m, nil
			}
			ud, err := hex.DecodeString(comment[len(typeofMark):])
			if err != nil {
				return m, fmt.Errorf("set user data: %w", err)
			}
			attr := binary.NativeEndian.AppendUint16(nil, uint16(hdr+len(ud)))
			attr = binary.NativeEndian.AppendUint16(attr, unix.NFTA_SET_USERDATA)
			attr = append(attr, ud...)
			for len(attr)%4 != 0 {
				attr = append(attr, 0)
			}
			end := off + (n+3)&^3
			out := make([]byte, 0, len(b)-end+off+len(attr))
			out = append(append(append(out, b[:off]...), attr...), b[min(end, len(b)):]...)
			m.Data = out
			m.Header.Length = 0 // the sender computes it again
			return m, nil
		}
		off += (n + 3) &^ 3
	}
	return m, nil
}

// diffEndpointElems plans the changes of an endpoint map's elements an
// interval at a time: the intervals (start, data and end) that old lacks
// are added, and those it has beyond s are deleted. Unlike other
// interval sets, an endpoint map is not flushed and filled again, which
// would send every pick of its bucket: a change of one pick's endpoints
// sends only that pick's intervals that changed. An interval is never
// edited in place (the kernel refuses a bound inside a live interval):
// it is deleted whole and added anew, in one batch. The report names an
// interval by the element of old it belongs to.
func (tp *tablePlan) diffEndpointElems(s, old *Set) {
	left := map[string][]nftables.SetElement{}
	textOf := map[string]ElementChange{}
	for i := range old.Elements {
		e := &old.Elements[i]
		for _, u := range intervalUnits(e.Elems) {
			k := unitKey(u)
			left[k], textOf[k] = u, e.change(s.Name)
		}
	}
	var add []nftables.SetElement
	for _, e := range s.Elements {
		missing := false
		for _, u := range intervalUnits(e.Elems) {
			k := unitKey(u)
			if _, ok := left[k]; ok {
				delete(left, k)
				continue
			}
			add = append(add, u...)
			missing = true
		}
		if missing {
			tp.changes.ElementsAdded = append(tp.changes.ElementsAdded, e.change(s.Name))
		}
	}
	if len(add)+len(left) == 0 {
		return
	}
	tp.changes.Ops++
	tp.changes.Bytes += elementBytes(add)
	if len(add) > 0 {
		tp.addElems[s.Name] = elementsOf(add)
	}
	for _, k := range slices.Sorted(maps.Keys(left)) {
		u := left[k]
		tp.delElems[s.Name] = append(tp.delElems[s.Name], u...)
		tp.changes.Bytes += elementBytes(u)
		tp.changes.ElementsRemoved = append(tp.changes.ElementsRemoved, textOf[k])
	}
}

// intervalUnits groups the netlink elements of an interval set into
// units: each interval's start with its end (the end element at the next
// key, absent when the interval reaches the last key), and alone the end
// element that precedes the lowest interval.
func intervalUnits(elems []nftables.SetElement) [][]nftables.SetElement {
	sorted := slices.Clone(elems)
	slices.SortStableFunc(sorted, encoding.CompareIntervalElems)
	var units [][]nftables.SetElement
	open := -1 // the unit of the interval whose end comes next
	for _, e := range sorted {
		if e.IntervalEnd {
			if open >= 0 {
				units[open] = append(units[open], e)
				open = -1
			} else {
				units = append(units, []nftables.SetElement{e})
			}
			continue
		}
		units = append(units, []nftables.SetElement{e})
		open = len(units) - 1
	}
	return units
}

// unitKey identifies a unit of intervalUnits.
func unitKey(u []nftables.SetElement) string {
	var b strings.Builder
	for i, e := range u {
		if i > 0 {
			b.WriteString(" | ")
		}
		b.WriteString(ElementKey(e))
	}
	return b.String()
}
