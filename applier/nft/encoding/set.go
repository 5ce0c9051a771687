package encoding

import (
	"bytes"
	"encoding/binary"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"netspec.dev/netspec/render/nftmodel"
)

// TableFamily is the family as google/nftables numbers it.
func TableFamily(f nftmodel.Family) nftables.TableFamily {
	if f == nftmodel.IPv6 {
		return nftables.TableFamilyIPv6
	}
	return nftables.TableFamilyIPv4
}

// addrLen is the length of an address of the family, in bytes.
func addrLen(f nftmodel.Family) uint32 {
	if f == nftmodel.IPv6 {
		return 16
	}
	return 4
}

// addrType is the datatype of an address of the family.
func addrType(f nftmodel.Family) nftables.SetDatatype {
	if f == nftmodel.IPv6 {
		return nftables.TypeIP6Addr
	}
	return nftables.TypeIPAddr
}

// keyTypes are the google/nftables datatypes of the key parts.
func keyTypes(f nftmodel.Family, s *nftmodel.Set) []nftables.SetDatatype {
	dts := make([]nftables.SetDatatype, len(s.Key))
	for i, p := range s.Key {
		switch p {
		case nftmodel.AddrPart:
			dts[i] = addrType(f)
		case nftmodel.ProtoPart:
			dts[i] = nftables.TypeInetProto
		case nftmodel.ServicePart:
			dts[i] = nftables.TypeInetService
		}
	}
	return dts
}

// SetTemplate is the set as google/nftables creates it, without its table.
func SetTemplate(f nftmodel.Family, s *nftmodel.Set) nftables.Set {
	t := nftables.Set{
		Name:       s.Name,
		Interval:   s.Interval,
		Dynamic:    s.Dynamic,
		HasTimeout: s.Dynamic || s.Timeout > 0,
		Timeout:    s.Timeout,
	}
	if s.EndpointMod > 0 {
		data, _ := nftables.ConcatSetType(addrType(f), nftables.TypeInetService) // two types: cannot fail
		t.KeyType, t.KeyByteOrder = nftables.TypeInteger, binaryutil.NativeEndian
		t.IsMap, t.DataType = true, data
		return t
	}
	dts := keyTypes(f, s)
	if len(dts) == 1 {
		t.KeyType, t.KeyByteOrder = dts[0], binaryutil.BigEndian
	} else {
		t.KeyType, _ = nftables.ConcatSetType(dts...) // at most five types: cannot fail
	}
	if s.Verdicts {
		t.IsMap, t.DataType = true, nftables.TypeVerdict
	}
	return t
}

// SetElement returns the netlink elements nft sends for the element at i
// of s, in a table of family f: one for a plain key, two for an interval
// (its start, and its end flagged IntervalEnd) or just the start when the
// interval reaches the end of its key space. The leading end element of
// an interval set is not included (see SetElements).
func SetElement(f nftmodel.Family, s *nftmodel.Set, i int) []nftables.SetElement {
	if s.EndpointMod > 0 {
		e := &s.Endpoints[i]
		el := nftables.SetElement{Key: binary.BigEndian.AppendUint32(nil, e.Lo)}
		val := appendAddr(nil, e.To.Addr())
		val = binary.BigEndian.AppendUint16(val, e.To.Port())
		el.Val = append(val, 0, 0)
		if e.Hi == 1<<32-1 {
			return []nftables.SetElement{el}
		}
		return []nftables.SetElement{el, {Key: binary.BigEndian.AppendUint32(nil, e.Hi+1), IntervalEnd: true}}
	}
	e := &s.Elements[i]
	var key, end []byte
	for _, p := range s.Key {
		switch p {
		case nftmodel.AddrPart:
			key = appendAddr(key, e.Key.Addr)
			if s.Interval {
				if next := nftmodel.LastAddr(netip.PrefixFrom(e.Key.Addr, int(e.Key.Bits))).Next(); next.IsValid() {
					end = appendAddr(nil, next)
				}
			}
		case nftmodel.ProtoPart:
			key = append(key, byte(e.Key.Proto))
		case nftmodel.ServicePart:
			key = binary.BigEndian.AppendUint16(key, e.Key.Port)
		}
		if len(s.Key) > 1 {
			for len(key)%4 != 0 {
				key = append(key, 0)
			}
		}
	}
	el := nftables.SetElement{Key: key, Comment: nftmodel.CommentText(e.Comment)}
	if s.Verdicts {
		el.VerdictData = Verdict(e.Verdict)
	}
	if end == nil {
		return []nftables.SetElement{el}
	}
	return []nftables.SetElement{el, {Key: end, IntervalEnd: true}}
}

// SetElements returns SetElement of every element, in order, the element of an
// interval set with the lowest start carrying first the end element at
// zero that nft sends when creating the set, unless that interval starts
// at zero: the kernel keeps it like any element.
func SetElements(f nftmodel.Family, s *nftmodel.Set) [][]nftables.SetElement {
	out := make([][]nftables.SetElement, s.Len())
	low := -1
	for i := range out {
		out[i] = SetElement(f, s, i)
		if low < 0 || bytes.Compare(out[i][0].Key, out[low][0].Key) < 0 {
			low = i
		}
	}
	if s.Interval && low >= 0 {
		start := out[low][0].Key
		if zero := make([]byte, len(start)); !bytes.Equal(start, zero) {
			out[low] = append([]nftables.SetElement{{Key: zero, IntervalEnd: true}}, out[low]...)
		}
	}
	return out
}

// CompareIntervalElems orders the netlink elements of an interval set by
// key, at one key the end of an interval before the start of the next:
// the order nft sends them in.
func CompareIntervalElems(a, b nftables.SetElement) int {
	if c := bytes.Compare(a.Key, b.Key); c != 0 {
		return c
	}
	switch {
	case a.IntervalEnd == b.IntervalEnd:
		return 0
	case a.IntervalEnd:
		return -1
	}
	return 1
}
