package nft

import (
	"fmt"
	"hash/maphash"

	"github.com/google/nftables"
	"netspec.dev/netspec/render/nftmodel"
)

// Encode returns the ruleset of the model m with every rule, set and
// element encoded for netlink (nftmodel's encoding: what nft sends for the
// model's text). Tables, chains and sets keep the model's order.
func Encode(m *nftmodel.Ruleset) *Ruleset {
	var c encodeCache
	return c.encode(m)
}

// encodeCache remembers the encoding of the last model: chains and sets
// of the next model that are the same pointers (render.Memo reuses the
// pieces of Services that did not change) are not encoded again, nor are
// the elements a set shares with its last version, at its head and tail.
// The work of encoding then follows the size of the change.
type encodeCache struct {
	enc    [3]*nftmodel.Encoder // by family; expressions shared across calls
	chains map[*nftmodel.Chain]*Chain
	sets   map[*nftmodel.Set]*Set
	named  map[setID]lastSet // by table and name
}

// setID names a set of a table.
type setID struct {
	fam  nftmodel.Family
	name string
}

// lastSet is the last version of a set, with its encoding.
type lastSet struct {
	m *nftmodel.Set
	s *Set
}

// encode encodes m, reusing the last call's work, and keeps m's pieces
// for the next call.
func (c *encodeCache) encode(m *nftmodel.Ruleset) *Ruleset {
	chains := make(map[*nftmodel.Chain]*Chain, len(c.chains))
	sets := make(map[*nftmodel.Set]*Set, len(c.sets))
	named := make(map[setID]lastSet, len(c.named))
	rs := &Ruleset{}
	var text []byte
	for _, mt := range m.Tables {
		f := mt.Family
		if c.enc[f] == nil {
			c.enc[f] = nftmodel.NewEncoder(f)
		}
		t := &Table{Family: f.TableFamily(), Name: mt.Name}
		for _, it := range mt.Items {
			switch {
			case it.Chain != nil:
				ch := c.chains[it.Chain]
				if ch == nil {
					ch = encodeChain(c.enc[f], f, it.Chain, &text)
				}
				chains[it.Chain] = ch
				t.chainSum += ch.hash
				t.Chains = append(t.Chains, ch)
			case it.Set != nil:
				id := setID{f, it.Set.Name}
				s := c.sets[it.Set]
				if s == nil {
					s = encodeSet(f, it.Set, c.named[id], &text)
				}
				sets[it.Set] = s
				named[id] = lastSet{it.Set, s}
				t.Sets = append(t.Sets, s)
			}
		}
		rs.Tables = append(rs.Tables, t)
	}
	c.chains, c.sets, c.named = chains, sets, named
	return rs
}

// encodeChain encodes a chain; text is scratch space.
func encodeChain(enc *nftmodel.Encoder, f nftmodel.Family, mc *nftmodel.Chain, text *[]byte) *Chain {
	ch := &Chain{Name: mc.Name}
	if h := mc.Hook; h != nil {
		ch.Base = &BaseChain{Type: nftables.ChainTypeFilter, Policy: nftables.ChainPolicyAccept}
		if h.Type == nftmodel.NAT {
			ch.Base.Type = nftables.ChainTypeNAT
		}
		switch h.Hook {
		case nftmodel.Prerouting:
			ch.Base.Hooknum = nftables.ChainHookRef(*nftables.ChainHookPrerouting)
		case nftmodel.Output:
			ch.Base.Hooknum = nftables.ChainHookRef(*nftables.ChainHookOutput)
		case nftmodel.Postrouting:
			ch.Base.Hooknum = nftables.ChainHookRef(*nftables.ChainHookPostrouting)
		}
		ch.Base.Priority = nftables.ChainPriorityRef(nftables.ChainPriority(h.Priority))
	}
	*text = (*text)[:0]
	if len(mc.Rules) > 0 {
		ch.Rules = make([]*Rule, len(mc.Rules))
		rules := make([]Rule, len(mc.Rules))
		for i, mr := range mc.Rules {
			r := &rules[i]
			start := len(*text)
			if i > 0 {
				*text = append(*text, '\n')
				start++
			}
			*text = mr.AppendText(*text, f)
			r.Text = string((*text)[start:])
			var anon *nftmodel.AnonSet
			r.Exprs, anon = enc.Encode(mr)
			r.anonAt = -1
			if anon != nil {
				r.Anon = &AnonSet{Template: anon.Template, Elements: anon.Elements}
				r.anonAt = anon.At
			}
			ch.Rules[i] = r
		}
	}
	ch.Text = string(*text)
	ch.hash = chainHash(ch, ch.Text)
	return ch
}

// encodeSet encodes a set with its elements, reusing those at the head
// and tail that equal its last version's (an interval set, whose lowest
// element carries the leading end, is encoded whole); text is scratch
// space.
func (s *Set) encodeElements(f nftmodel.Family, ms *nftmodel.Set, last lastSet, text *[]byte) {
	s.Elements = make([]Element, len(ms.Elements))
	head, tail := 0, 0
	if last.m != nil && !ms.Interval && last.m.Decl(f) == s.Decl {
		old := last.m.Elements
		for head < len(old) && head < len(ms.Elements) && sameElement(&old[head], &ms.Elements[head]) {
			s.Elements[head] = last.s.Elements[head]
			head++
		}
		for tail < len(old)-head && tail < len(ms.Elements)-head &&
			sameElement(&old[len(old)-1-tail], &ms.Elements[len(ms.Elements)-1-tail]) {
			s.Elements[len(ms.Elements)-1-tail] = last.s.Elements[len(old)-1-tail]
			tail++
		}
	}
	var all [][]nftables.SetElement
	if ms.Interval {
		all = ms.EncodeAll(f)
	}
	for i := head; i < len(ms.Elements)-tail; i++ {
		e := &ms.Elements[i]
		*text = ms.AppendElementText((*text)[:0], e)
		var elems []nftables.SetElement
		if all != nil {
			elems = all[i]
		} else {
			elems = ms.Encode(f, e)
		}
		s.Elements[i] = Element{Text: string(*text), Elems: elems}
	}
	var h maphash.Hash
	h.SetSeed(sumSeed)
	for i := range s.Elements {
		h.WriteString(s.Elements[i].Text)
		h.WriteByte(0)
	}
	s.sum = h.Sum64()
}

// sameElement tells whether two elements of a set encode alike (their
// notes and dropped duplicates are the file's only).
func sameElement(a, b *nftmodel.Element) bool {
	return a.Key == b.Key && a.Verdict == b.Verdict && a.To == b.To && a.Comment == b.Comment
}

// encodeSet encodes a set, reusing what it shares with its last version.
func encodeSet(f nftmodel.Family, ms *nftmodel.Set, last lastSet, text *[]byte) *Set {
	s := &Set{Name: ms.Name, Decl: ms.Decl(f), Template: ms.Template(f)}
	if ms.EndpointMod > 0 {
		s.udata = typeofUserdata(f.TableFamily(), ms.EndpointMod)
	}
	s.encodeElements(f, ms, last, text)
	return s
}

// sumSeed seeds the hashes of Table.chainSum and Set.sum, which are only
// compared within a process.
var sumSeed = maphash.MakeSeed()

// chainHash hashes a chain: its name, hook and rule lines (text).
func chainHash(ch *Chain, text string) uint64 {
	var h maphash.Hash
	h.SetSeed(sumSeed)
	h.WriteString(ch.Name)
	h.WriteByte(0)
	if b := ch.Base; b != nil {
		h.WriteString(string(b.Type))
		fmt.Fprintf(&h, " %d", b.Policy)
		if b.Hooknum != nil {
			fmt.Fprintf(&h, " hook %d", *b.Hooknum)
		}
		if b.Priority != nil {
			fmt.Fprintf(&h, " priority %d", *b.Priority)
		}
		h.WriteByte(0)
	}
	h.WriteString(text)
	return h.Sum64()
}
