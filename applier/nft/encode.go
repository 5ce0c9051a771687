package nft

import (
	"hash/maphash"

	"github.com/google/nftables"
	"netspec.dev/netspec/applier/nft/encoding"
	"netspec.dev/netspec/render/nftmodel"
)

// encodeChain encodes a chain; text is scratch space.
func encodeChain(enc *encoding.Encoder, f nftmodel.Family, mc *nftmodel.Chain, text *[]byte) *Chain {
	ch := &Chain{Name: mc.Name, Base: baseChain(mc.Hook), model: mc}
	if len(mc.Rules) > 0 {
		ch.Rules = make([]*Rule, len(mc.Rules))
		rules := make([]Rule, len(mc.Rules))
		for i, mr := range mc.Rules {
			r := &rules[i]
			*text = mr.AppendText((*text)[:0], f)
			r.Text = string(*text)
			r.Exprs, r.Anon = enc.Encode(mr)
			ch.Rules[i] = r
		}
	}
	return ch
}

// hookNums and chainTypes are the kernel's hooks and chain types of the
// model's (baseChain), and so the model's of the kernel's (decodeHook).
var (
	hookNums = [...]*nftables.ChainHook{
		nftmodel.Prerouting:  nftables.ChainHookPrerouting,
		nftmodel.Output:      nftables.ChainHookOutput,
		nftmodel.Postrouting: nftables.ChainHookPostrouting,
	}
	chainTypes = [...]nftables.ChainType{nftmodel.Filter: nftables.ChainTypeFilter, nftmodel.NAT: nftables.ChainTypeNAT}
)

// baseChain is the hook of a chain of the model, nil for a regular chain.
func baseChain(h *nftmodel.Hook) *BaseChain {
	if h == nil {
		return nil
	}
	b := &BaseChain{Type: chainTypes[h.Type], Policy: nftables.ChainPolicyAccept}
	if n := hookNums[h.Hook]; n != nil {
		b.Hooknum = nftables.ChainHookRef(*n)
	}
	b.Priority = nftables.ChainPriorityRef(nftables.ChainPriority(h.Priority))
	return b
}

// setShell is a set of the model encoded without its elements: what a
// batch needs to name it and to add or delete some of its elements.
func setShell(f nftmodel.Family, ms *nftmodel.Set) *Set {
	s := &Set{Name: ms.Name, Template: encoding.SetTemplate(f, ms)}
	if ms.EndpointMod > 0 {
		s.udata = typeofUserdata(encoding.TableFamily(f), ms.EndpointMod)
	}
	return s
}

// encodeSet encodes a set with all its elements.
func encodeSet(f nftmodel.Family, ms *nftmodel.Set) *Set {
	s := setShell(f, ms)
	all := encoding.SetElements(f, ms)
	s.Elements = make([]Element, len(all))
	var text []byte
	for i := range all {
		text = ms.AppendElementText(text[:0], i)
		s.Elements[i] = modelElement(ms, i)
		s.Elements[i].Text, s.Elements[i].Elems = string(text), all[i]
	}
	return s
}

// sumSeed seeds the hashes of setSum (and of the tests' chainsSum), which
// are only compared within a process.
var sumSeed = maphash.MakeSeed()
