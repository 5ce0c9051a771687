// Package nft installs the nftables ruleset that render builds as a model
// (package render/nftmodel), over netlink with github.com/google/nftables.
//
// No text is read on the way: the model is encoded into the expressions
// and set elements nft 1.0.6 itself sends for the model's text
// (package encoding), so that what reviewers read in a golden file is
// exactly what is installed, and `nft list table ip netspec` after Replace
// equals what `nft -f` of the printed file gives (TestModelEqualsKernel).
//
// The kernel is behind one interface, Kernel: the applier reads tables,
// sets, chains, rule and element dumps through it, and sends each change
// as one transaction with Kernel.Run, which fills a Batch (the methods of
// google/nftables' Conn that netspec queues). Encoding, the diff (of
// models: against the kernel's tables read back and decoded into the
// model, kernelmodel.go, or against the model installed last; encoding
// only what it sends), the order of a batch (tablePlan.queue) and the
// read-back check are the same for every Kernel. A table replaced whole (a first install)
// is queued straight from the model, a piece encoded at a time, and
// checked against what was sent of it, decoded from the bytes the kernel
// acknowledged, rather than read back (stream.go, sent.go). System is the real one over netlink
// (sockets with big buffers, dumps with big reads, a batch sender without
// an acknowledgement per message, which stages a transaction's messages
// as they are queued and sends them in one sendmsg); Fake stages a batch as System does and
// keeps what its messages make (tables, chains, rules, sets and elements) in memory, all or
// nothing, refusing what the kernel refuses, so that the sync logic, plan and the CLI's
// scripts are tested without root. Tests against the real kernel, as root
// in namespaces of their own, prove the rest: what is installed equals
// `nft -f`, and the Fake refuses and reads back as the kernel does
// (TestFakeRefusesAsKernel, TestFakeReadsAsKernel), and what the kernel
// holds after `nft -f` of the printed text, and after Apply, decodes back
// into the model (package encoding; TestModelEqualsKernel). No text is
// parsed, in the applier or its tests: the tests build their rulesets as
// models (the golden plans' through render, forms_test.go by hand). They
// keep the applier's path before the model as the oracle of its diff: a
// ruleset encoded whole and diffed against the last one installed
// (encoded_test.go).
package nft

import (
	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"netspec.dev/netspec/applier/nft/encoding"
	"netspec.dev/netspec/render/nftmodel"
)

// Table is what a plan by difference (diffModel) sends of a table: its
// sets whose elements it adds or removes, encoded.
type Table struct {
	Name string // "netspec"
	Sets []*Set // named sets and maps, in file order
}

// Set is a named set or map with its elements.
type Set struct {
	Name string
	// Template is the set as google/nftables creates it; Table is nil and
	// is set on a copy by AddTo.
	Template nftables.Set
	Elements []Element

	// udata is the set's user data when google/nftables cannot write it
	// (an endpoint map's typeof, endpoints.go).
	udata []byte
}

// Element is one element of a named set or map.
type Element struct {
	// Text is the element as the file prints it, for example
	// "10.96.0.50 . tcp . 6379 : goto service-…".
	Text string
	// Elems are the netlink elements nft sends for it: one for a plain
	// key, two for an interval (its start, and its end flagged
	// IntervalEnd) or just the start when the interval reaches the end of
	// the address space. The interval with the lowest start also carries
	// the end element at zero that nft adds to an interval set (unless
	// that interval starts at zero): the kernel keeps it like any other.
	Elems []nftables.SetElement

	// el or ep is the element in the model (nil for an element decoded
	// from nothing but text).
	el *nftmodel.Element
	ep *nftmodel.EndpointElement
}

// change reports the element as added to or removed from set.
func (e *Element) change(set string) ElementChange {
	return ElementChange{Set: set, Text: e.Text, Element: e.el, Endpoint: e.ep}
}

// modelElement is the element at i of the model's set s, as an Element
// without its encoding.
func modelElement(s *nftmodel.Set, i int) Element {
	if s.EndpointMod > 0 {
		return Element{ep: &s.Endpoints[i]}
	}
	return Element{el: &s.Elements[i]}
}

// Chain is a chain with its rules.
type Chain struct {
	Name  string
	Base  *BaseChain // nil for a regular chain
	Rules []*Rule

	model *nftmodel.Chain // the chain encoded
}

// BaseChain is the hook of a base chain.
type BaseChain struct {
	Type     nftables.ChainType
	Hooknum  *nftables.ChainHook
	Priority *nftables.ChainPriority
	Policy   nftables.ChainPolicy
}

// Rule is one rule encoded to netlink expressions.
type Rule struct {
	Text string // the rule line, trimmed
	// Exprs are the rule's expressions, named sets referenced by name
	// (SetID 0). Expressions that many rules have (a payload load, a
	// verdict) are shared between the rules of a table: read-only.
	Exprs []expr.Any
	// Anon is the rule's anonymous set ({ … }), when it has one. The
	// Lookup in Exprs that uses it (Exprs[Anon.At]) is completed by AddTo
	// with the set's name and batch ID.
	Anon *encoding.AnonSet

	key []byte // ruleKeyOf, once computed
}
