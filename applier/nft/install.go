package nft

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
	"netspec.dev/netspec/applier/nft/encoding"
)

// maxElemBytes bounds the encoded elements of one netlink message: they
// form one attribute, whose 16-bit length google/nftables v0.3.0
// truncates silently past 64 KiB, and the kernel then drops the rest.
const maxElemBytes = 48 << 10

// elemBytes over-estimates the encoded size of an element.
func elemBytes(e *nftables.SetElement) int {
	n := 4 + 8 + 8 + align4(len(e.Key)) // list entry, flags, key
	if len(e.KeyEnd) > 0 {
		n += 8 + align4(len(e.KeyEnd))
	}
	if v := e.VerdictData; v != nil {
		n += 24 + align4(len(v.Chain)+1)
	} else if len(e.Val) > 0 {
		n += 8 + align4(len(e.Val))
	}
	if e.Comment != "" {
		n += 8 + align4(len(e.Comment)+1)
	}
	if e.Timeout != 0 {
		n += 12
	}
	return n
}

func align4(n int) int { return (n + 3) &^ 3 }

// chunks splits elems into runs small enough for one message each.
func chunks(elems []nftables.SetElement) [][]nftables.SetElement {
	var out [][]nftables.SetElement
	start, size := 0, 0
	for i := range elems {
		n := elemBytes(&elems[i])
		if size+n > maxElemBytes && i > start {
			out = append(out, elems[start:i])
			start, size = i, 0
		}
		size += n
	}
	if start < len(elems) {
		out = append(out, elems[start:])
	}
	return out
}

// kernelElems are the netlink elements of elems, in the order nft sends
// them: an interval set's sorted by key, an interval's end before the
// start of the next one at the same address.
func (s *Set) kernelElems(elems []Element) []nftables.SetElement {
	n := 0
	for i := range elems {
		n += len(elems[i].Elems)
	}
	out := make([]nftables.SetElement, 0, n)
	for i := range elems {
		out = append(out, elems[i].Elems...)
	}
	return s.kernelOrder(out)
}

// kernelOrder puts the netlink elements of s in the order nft sends them
// (see kernelElems), in place.
func (s *Set) kernelOrder(elems []nftables.SetElement) []nftables.SetElement {
	if s.Template.Interval {
		slices.SortStableFunc(elems, encoding.CompareIntervalElems)
	}
	return elems
}

// set returns a copy of the template for table t, to be queued.
func (s *Set) set(t *nftables.Table) *nftables.Set {
	ns := s.Template
	ns.Table, ns.Name, ns.ID = t, s.Name, 0
	if s.udata != nil {
		ns.Comment = typeofMark + hex.EncodeToString(s.udata)
	}
	return &ns
}

// AddTo queues the creation of s in table t, empty: its elements follow
// with AddElements, best after the rules that use s. The kernel walks a
// map's elements for every chain that binds it, so binding the endpoint
// maps of thousands of chains while they are full makes a load
// super-linear (BenchmarkFullSync/20k took 5.5 s so, 2.9 s without).
func (s *Set) AddTo(c Batch, t *nftables.Table) error {
	if err := c.AddSet(s.set(t), nil); err != nil {
		return fmt.Errorf("set %s: %w", s.Name, err)
	}
	return nil
}

// AddElements queues the addition of elems to s, which exists in table t,
// chunked as AddTo.
func (s *Set) AddElements(c Batch, t *nftables.Table, elems []Element) error {
	return s.addKernelElems(c, t, s.kernelElems(elems))
}

// addKernelElems is AddElements of netlink elements in the order they are
// sent (kernelElems).
func (s *Set) addKernelElems(c Batch, t *nftables.Table, elems []nftables.SetElement) error {
	ns := s.set(t)
	for _, p := range chunks(elems) {
		if err := c.SetAddElements(ns, p); err != nil {
			return fmt.Errorf("set %s: %w", s.Name, err)
		}
	}
	return nil
}

// DeleteElements queues the removal of elems from s, which exists in
// table t, chunked as AddTo. Elements are found by key, so elements read
// back from the kernel may be passed as they are.
func (s *Set) DeleteElements(c Batch, t *nftables.Table, elems []Element) error {
	ns := s.set(t)
	all := s.kernelElems(elems)
	for i, e := range all {
		all[i] = nftables.SetElement{Key: e.Key, KeyEnd: e.KeyEnd, IntervalEnd: e.IntervalEnd}
	}
	for _, p := range chunks(all) {
		if err := c.SetDeleteElements(ns, p); err != nil {
			return fmt.Errorf("set %s: %w", s.Name, err)
		}
	}
	return nil
}

// AddTo queues the rule (and its anonymous set, if any) at the end of
// chain ch of table t.
func (r *Rule) AddTo(c Batch, t *nftables.Table, ch *nftables.Chain) error {
	if err := addRule(c, t, ch, r.Exprs, r.Anon); err != nil {
		return fmt.Errorf("rule %q: %w", r.Text, err)
	}
	return nil
}

// addRule queues a rule of expressions exprs, with its anonymous set anon
// (nil for none) looked up by exprs[anon.At], at the end of chain ch of
// table t.
func addRule(c Batch, t *nftables.Table, ch *nftables.Chain, exprs []expr.Any, anon *encoding.AnonSet) error {
	if anon != nil {
		as := anon.Template
		as.Table, as.ID, as.Name = t, 1<<30+anonSetID.Add(1), "__set%d"
		if as.IsMap {
			as.Name = "__map%d"
		}
		parts := chunks(anon.Elements)
		if len(parts) == 0 {
			return errors.New("empty anonymous set")
		}
		if err := c.AddSet(&as, parts[0]); err != nil {
			return err
		}
		// An anonymous set is filled in the batch that creates it, before
		// a rule binds it; google/nftables refuses to add elements to
		// one, so further chunks go through a copy not marked anonymous
		// (the kernel finds the set by its batch ID).
		more := as
		more.Anonymous = false
		for _, p := range parts[1:] {
			if err := c.SetAddElements(&more, p); err != nil {
				return err
			}
		}
		if anon.At < 0 || anon.At >= len(exprs) {
			return errors.New("no lookup of its anonymous set")
		}
		lk, ok := exprs[anon.At].(*expr.Lookup)
		if !ok {
			return errors.New("no lookup of its anonymous set")
		}
		l := *lk
		l.SetName, l.SetID = as.Name, as.ID
		exprs = slices.Clone(exprs)
		exprs[anon.At] = &l
	}
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: exprs})
	return nil
}

// anonSetID numbers the anonymous sets of batches (the kernel finds a set
// created in a batch by this ID), from 2^30 up: google/nftables numbers
// the others from 1 with a counter that is not safe to use from the
// goroutines that encode a batch's parts (queueModel).
var anonSetID atomic.Uint32

// Key returns bytes identifying what the rule does: equal for a compiled
// Rule and for the same rule read back from the kernel with c.GetRules
// (ruleKey). Handles, counter values, set IDs and other fields the
// kernel assigns are left out. An anonymous set is identified by its
// lookup only: compare its elements separately.
func (r *Rule) Key(fam nftables.TableFamily) []byte { return ruleKey(fam, r.Exprs) }

func ruleKey(fam nftables.TableFamily, exprs []expr.Any) []byte {
	var b []byte
	for _, e := range exprs {
		data, err := expr.Marshal(byte(fam), normalize(e))
		if err != nil {
			data = fmt.Appendf(nil, "%T: %v", e, err)
		}
		b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
		b = append(b, data...)
	}
	return b
}

// normalize returns e without what the kernel assigns or adds on its own.
func normalize(e expr.Any) expr.Any {
	switch e := e.(type) {
	case *expr.Lookup:
		c := *e
		c.SetID = 0
		if strings.HasPrefix(c.SetName, "__set") {
			c.SetName = "__set"
		}
		return &c
	case *expr.Dynset:
		c := *e
		c.SetID = 0
		return &c
	case *expr.NAT:
		c := *e
		if c.RegAddrMax == 0 {
			c.RegAddrMax = c.RegAddrMin
		}
		if c.RegProtoMax == 0 {
			c.RegProtoMax = c.RegProtoMin
		}
		return &c
	case *expr.Counter:
		return &expr.Counter{}
	}
	return e
}

// ElementKey identifies an element (key, key end, interval end flag,
// verdict and comment) the same way for Element.Elems and for elements
// read back with c.GetSetElements, which returns a verdict as its netlink
// attributes in Val.
func ElementKey(e nftables.SetElement) string {
	var b strings.Builder
	b.WriteString(hex.EncodeToString(e.Key))
	if len(e.KeyEnd) > 0 {
		b.WriteByte('-')
		b.WriteString(hex.EncodeToString(e.KeyEnd))
	}
	if e.IntervalEnd {
		b.WriteString(" end")
	}
	v := e.VerdictData
	if v == nil && len(e.Val) > 0 {
		v = decodeVerdict(e.Val)
		if v == nil {
			b.WriteString(" = ")
			b.WriteString(hex.EncodeToString(e.Val))
		}
	}
	if v != nil {
		b.WriteString(" : ")
		b.WriteString(strconv.FormatInt(int64(v.Kind), 10))
		if v.Chain != "" {
			b.WriteByte(' ')
			b.WriteString(v.Chain)
		}
	}
	if e.Comment != "" {
		b.WriteString(" comment ")
		b.WriteString(strconv.Quote(e.Comment))
	}
	return b.String()
}

// decodeVerdict reads a verdict as GetSetElements leaves it in Val: the
// attributes NFTA_VERDICT_CODE and NFTA_VERDICT_CHAIN. It returns nil when
// Val is something else.
func decodeVerdict(b []byte) *expr.Verdict {
	kind, chain, ok := verdictOf(b)
	if !ok {
		return nil
	}
	return &expr.Verdict{Kind: expr.VerdictKind(kind), Chain: string(chain)}
}

// verdictOf reads the attributes of a verdict, without allocating: its
// code and chain; ok is false when b holds something else.
func verdictOf(b []byte) (kind int32, chain []byte, ok bool) {
	err := eachAttr(b, func(typ uint16, v []byte) error {
		switch {
		case typ == unix.NFTA_VERDICT_CODE && len(v) == 4:
			kind, ok = int32(binary.BigEndian.Uint32(v)), true
		case typ == unix.NFTA_VERDICT_CHAIN:
			chain, _, _ = bytes.Cut(v, []byte{0})
		default:
			return errBadAttr // not a verdict's
		}
		return nil
	})
	return kind, chain, ok && err == nil
}
