// Package nftmodel is the typed model of what a node's nftables must hold:
// tables, chains with their rules, and sets and maps with typed elements
// keyed by value. render builds a Ruleset from a Plan and prints
// nftables.nft from it (Ruleset.AppendText); the nftables applier
// encodes the same Ruleset for netlink (applier/nft/encoding), so that no
// text is parsed between render and the kernel. It is pure: no I/O, and
// no netlink library.
//
// A Rule is a list of statements from a small closed set (Stmt): the
// forms render writes, each of which prints itself as nft reads it and
// has one encoding, the expressions nft 1.0.6 sends for that text
// (checked against `nft --debug=netlink` and the kernel's read-back by
// the applier's tests). Elements are keyed by value (a comparable Key,
// or an endpoint map's range of keys), so that two versions of a set are
// diffed by map lookups. A daemon keeps a model of every Service it
// serves, so elements are lean: a set or verdict map holds Elements, an
// endpoint map EndpointElements, each with only the fields of its kind,
// and what few elements have (dropped duplicates) is kept in the set
// beside them.
//
// Besides what the kernel holds, the model keeps what the printed file
// shows around it (comments, section headings, dropped duplicates), so
// that the text is printed from the model alone.
package nftmodel

// Family is the address family of a table.
type Family uint8

// The families netspec writes a table for.
const (
	IPv4 Family = iota + 1
	IPv6
)

// Keyword is nft's family keyword, which also names the address
// expressions: "ip" or "ip6".
func (f Family) Keyword() string {
	if f == IPv6 {
		return "ip6"
	}
	return "ip"
}

// AddrType is the datatype of the family's addresses: "ipv4_addr" or
// "ipv6_addr".
func (f Family) AddrType() string {
	if f == IPv6 {
		return "ipv6_addr"
	}
	return "ipv4_addr"
}

// Ruleset is the tables a node holds, in the order they are written.
type Ruleset struct {
	// Comment is the file's leading comment, one entry a line.
	Comment []string
	Tables  []*Table
}

// Table is one table with its chains and sets. Items keeps them in the
// order the file shows them (a set may sit between chains); the kernel
// does not care about that order.
type Table struct {
	Family Family
	Name   string
	// Comment is the comment line that opens the table's body.
	Comment string
	Items   []Item
}

// Item is a chain or a set of a table (at most one is set), with the
// heading of the file section it opens, if any. An item with neither is
// a heading alone: a section of the file with nothing in it.
type Item struct {
	Heading string
	Chain   *Chain
	Set     *Set
}

// Chains lists the table's chains, in file order.
func (t *Table) Chains() []*Chain { return itemsOf(t, func(it Item) *Chain { return it.Chain }) }

// Sets lists the table's sets and maps, in file order.
func (t *Table) Sets() []*Set { return itemsOf(t, func(it Item) *Set { return it.Set }) }

// itemsOf lists what of gives of each item of t, but nil.
func itemsOf[T any](t *Table, of func(Item) *T) []*T {
	var out []*T
	for _, it := range t.Items {
		if x := of(it); x != nil {
			out = append(out, x)
		}
	}
	return out
}

// AddChain appends a chain under heading ("" for none).
func (t *Table) AddChain(heading string, c *Chain) {
	t.Items = append(t.Items, Item{Heading: heading, Chain: c})
}

// AddSet appends a set under heading ("" for none).
func (t *Table) AddSet(heading string, s *Set) {
	t.Items = append(t.Items, Item{Heading: heading, Set: s})
}

// Chain is a chain with its rules; Hook is nil for a regular chain.
type Chain struct {
	Name    string
	Comment string // the comment line above the chain, "" for none
	Hook    *Hook
	Rules   []Rule
}

// ChainType is the type of a base chain.
type ChainType uint8

// The chain types netspec uses.
const (
	Filter ChainType = iota + 1
	NAT
)

// String is nft's name of the type.
func (t ChainType) String() string {
	if t == NAT {
		return "nat"
	}
	return "filter"
}

// HookPoint is the netfilter hook of a base chain.
type HookPoint uint8

// The hooks netspec uses.
const (
	Prerouting HookPoint = iota + 1
	Output
	Postrouting
)

// String is nft's name of the hook.
func (h HookPoint) String() string {
	switch h {
	case Prerouting:
		return "prerouting"
	case Output:
		return "output"
	}
	return "postrouting"
}

// Hook is where a base chain is attached. Its policy is accept.
type Hook struct {
	Type     ChainType
	Hook     HookPoint
	Priority int32
}

// Standard priorities nft names.
const (
	PriorityDstNAT int32 = -100
	PrioritySrcNAT int32 = 100
)
