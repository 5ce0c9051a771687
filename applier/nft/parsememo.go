package nft

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"unsafe"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// Parser parses rulesets like Parse, remembering from one Parse to the
// next the compiled form of every chain, set and map by the exact text of
// its block, from its header line ("\tchain NAME {") to its closing line.
// The node daemon parses the whole rendered ruleset on every change,
// several MB at 10,000 services, although between two reloads a chain or
// two and a few sets change: a block whose text is byte for byte one of
// the last Parse, in a table of the same family and name, is taken over
// instead of compiled again (BenchmarkParseMemo: 6 ms instead of 80).
// What Parse returns is always what the package's Parse returns for the
// same text, to deep equality (hashes, sums and order included), and so
// are its errors.
//
// A block's compiled form depends only on its text and its table's
// family: a rule compiles to the same expressions whatever the sets it
// looks up, and records its references (jumps, gotos, @set lookups) with
// their lines, checked once the table is read. The references of the
// blocks read anew are checked as Parse checks them; so are those of the
// blocks taken over, at their lines in the new text, unless the table
// declares the same chains, sets and maps as in the last Parse, with the
// same hooks and keys (sameNames): then they hold as they did.
//
// The memo holds the blocks of the last Parse that succeeded, nothing
// older. Sets and maps are shared between the Rulesets of two Parses: the
// applier never changes a parsed Set, its Elements or their netlink
// elements (install.go copies what it sends, and the rest of the package
// only reads them). Rules are not shared: the applier caches a rule's key
// in it (ruleKeyOf), so each Parse returns chains and rules of its own,
// copied field by field from the memo, the cache neither read (the
// applier may be writing it) nor copied. Their expressions, anonymous sets
// and texts, which nothing writes, are shared, as they are between the
// rules of one Ruleset. The applier diffs two Rulesets of a Parser as two
// of Parse: by names, texts and sums (known.go), never by pointer.
//
// A Parser is not safe for concurrent use. The zero Parser is ready to
// use.
type Parser struct {
	tables map[tableKey]*tableMemo
	stamp  uint64 // counts the Parses: block.stamp

	// retained estimates the bytes that the blocks of warm Parses keep
	// alive (blockCost), with the last slabs of those Parses (gens),
	// which stay as long as the memo holds one of their blocks. Past a
	// budget (retainBudget) the next Parse is cold, and the memo starts
	// afresh from one text.
	retained int
	gens     map[uint64]*warmGen // by Parser.stamp
	// What the last Parse returned, to size the next one's copies.
	chains, rules int

	stats parseStats
}

// parseStats tells how the last Parse went, for tests and benchmarks.
type parseStats struct {
	cold           bool // no memo used: Parse from the text alone
	hits, misses   int  // blocks reused and read anew
	missBytes      int  // bytes of the text read anew
	abandoned      bool // a warm parse gave way to a cold one
	overBudget     bool // cold, as warm parses kept too much alive
	retainedBudget int
}

// warmGen is a warm parse whose blocks the memo holds: the last slabs of
// its arenas, which any of its blocks keeps alive, and how many of its
// blocks the memo holds.
type warmGen struct {
	slabs, blocks int
}

// NewParser returns a Parser with an empty memo.
func NewParser() *Parser { return &Parser{} }

// Parse reads a ruleset rendered by render.NFTables and compiles it, as
// the package's Parse does, reusing the blocks that are as they were in
// the last successful Parse. After an error the memo is left as it was.
func (m *Parser) Parse(text []byte) (*Ruleset, error) {
	m.stamp++
	m.stats = parseStats{retainedBudget: retainBudget(len(text))}
	m.stats.overBudget = m.retained > m.stats.retainedBudget
	if len(m.tables) > 0 && !m.stats.overBudget {
		p, err := m.warm(text)
		if err != errMostlyNew {
			if err != nil {
				return nil, err
			}
			m.remember(p, false)
			return p.rs, nil
		}
		m.stats = parseStats{abandoned: true, retainedBudget: m.stats.retainedBudget}
	}
	m.stats.cold = true
	p := &parser{src: string(text), rs: &Ruleset{}, rec: true}
	if err := p.parse(); err != nil {
		return nil, err
	}
	m.remember(p, true)
	return p.rs, nil
}

// retainBudget is how many bytes warm parses may keep alive (Parser.retained)
// before a cold parse starts the memo afresh: half the text's size, and no
// less than 4 MiB, so that a small ruleset is parsed cold only once in
// many changes. A larger budget let the watch daemon's heap grow by 22 %
// over 100 reloads at 10k services (scripts/bench-watch); with this one it
// stays flat.
func retainBudget(textLen int) int { return max(4<<20, textLen/2) }

// blockCost estimates what a block read by a warm parse keeps alive: its
// compiled form, about what a cold parse allocates per byte of text, and
// its text, copied once or twice (readCopy).
func blockCost(b *block) int { return 8 * len(b.text) }

// tableMemo is the memo of a table: its blocks in text order, and by
// header line.
type tableMemo struct {
	order    []*block
	byHeader map[string]*block
}

// tableKey names a table.
type tableKey struct {
	fam  nftables.TableFamily
	name string
}

// tableBlocks are the blocks of a table as a parse read them, in text
// order: reused (hits) or read anew.
type tableBlocks struct {
	key    tableKey
	blocks []*block
	hits   int
}

// block is a chain, set or map as a parse read it: its text, from the
// start of its header line to the end of its closing line (with its line
// end, but at the end of the text), and its compiled form.
type block struct {
	text   string
	line0  int    // the number of its header line in the parse that read it
	nlines int    // lines of text
	refs   []ref  // its references, their lines numbered as line0
	stamp  uint64 // Parser.stamp of the last parse that had it
	index  int    // in tableMemo.order
	line   int    // the number of its header line in the last parse that had it
	born   uint64 // Parser.stamp of the parse that read it
	cost   int    // blockCost if a warm parse read it, part of Parser.retained

	chain *Chain // a chain: as that parse returned it (never handed out again)
	hash  uint64 // chainHash
	set   *Set   // or a set or map, and its spec
	spec  *setSpec
}

// header is the block's first line, its key in Parser.tables.
func (b *block) header() string {
	if i := strings.IndexByte(b.text, '\n'); i >= 0 {
		return b.text[:i]
	}
	return b.text
}

// blockStart is where the block being read starts.
type blockStart struct {
	line, off, refs int
}

// openBlock notes the start of a block at the current line.
func (p *parser) openBlock() {
	p.blk = blockStart{line: p.line, off: p.lineOff, refs: len(p.c.refs)}
}

// newBlock returns a new block: from a slab when the parse reads them all,
// on its own when it reads few (warm), as the slab would live as long as
// any block of it.
func (p *parser) newBlock() *block {
	if p.warm {
		return &block{}
	}
	return alloc(&p.blockSlab)
}

// closeBlock completes b, a block closed at the current line, but for its
// text, which the reader of the lines fills in (parse, readCopy).
func (p *parser) closeBlock(b *block) {
	b.line0, b.nlines = p.blk.line, p.line-p.blk.line+1
	b.line = b.line0
	b.refs = p.c.refs[p.blk.refs:len(p.c.refs):len(p.c.refs)]
	if p.warm {
		// Not a window on the parse's refs, which it would keep alive.
		b.refs = slices.Clone(b.refs)
	}
	p.closed = b
}

// remember makes the blocks of a successful parse the memo.
func (m *Parser) remember(p *parser, cold bool) {
	var gen *warmGen
	if cold || m.tables == nil {
		m.tables = make(map[tableKey]*tableMemo, len(p.tables))
		m.retained, m.gens = 0, nil
	} else {
		gen = &warmGen{slabs: p.retain}
	}
	m.chains, m.rules = 0, 0
	for _, t := range p.rs.Tables {
		m.chains += len(t.Chains)
		for _, ch := range t.Chains {
			m.rules += len(ch.Rules)
		}
	}
	for _, tb := range p.tables {
		tm := m.tables[tb.key]
		if tm == nil {
			tm = &tableMemo{byHeader: make(map[string]*block, len(tb.blocks))}
			m.tables[tb.key] = tm
		}
		for i, b := range tb.blocks {
			b.index = i
			if b.stamp == m.stamp {
				continue // taken from the memo
			}
			b.stamp, b.born = m.stamp, m.stamp
			h := b.header()
			if old := tm.byHeader[h]; old != nil {
				m.drop(old)
			}
			tm.byHeader[h] = b
			if gen != nil {
				gen.blocks++
				b.cost = blockCost(b)
				m.retained += b.cost
			}
		}
		if len(tm.byHeader) != len(tb.blocks) {
			// Blocks of the last parse that this one did not have.
			for h, b := range tm.byHeader {
				if b.stamp != m.stamp {
					m.drop(b)
					delete(tm.byHeader, h)
				}
			}
		}
		tm.order = tb.blocks
	}
	if len(m.tables) != len(p.tables) {
		for k, tm := range m.tables {
			if !slices.ContainsFunc(p.tables, func(tb tableBlocks) bool { return tb.key == k }) {
				for _, b := range tm.order {
					m.drop(b)
				}
				delete(m.tables, k)
			}
		}
	}
	if gen != nil && gen.blocks > 0 {
		if m.gens == nil {
			m.gens = map[uint64]*warmGen{}
		}
		m.gens[m.stamp] = gen
		m.retained += gen.slabs
	}
}

// drop notes that the memo no longer holds block b: what b keeps alive
// is no longer retained, nor, when the memo holds no other block of the
// warm parse that read b, the last slabs of that parse.
func (m *Parser) drop(b *block) {
	m.retained -= b.cost
	if g := m.gens[b.born]; g != nil {
		if g.blocks--; g.blocks == 0 {
			m.retained -= g.slabs
			delete(m.gens, b.born)
		}
	}
}

// errMostlyNew abandons a warm parse of a text that is mostly new: a cold
// parse reads a big table on several CPUs.
var errMostlyNew = errors.New("mostly new")

// warm parses text with the memo: a line where a table expects a chain,
// set or map is looked up by its text in the memo, and when the block it
// starts is the memo's to the byte, the block is taken over; other lines
// are read as Parse reads them, from copies of the text (readCopy).
//
// It reads sequentially: with a block or two read anew, the 10,000-service
// ruleset of BenchmarkParseMemo takes 6 ms of one CPU, where Parse takes
// 130 ms of CPU, 80 ms on two (parallelBody); what is left is comparing
// texts, copying chains and filling the maps that references are checked
// with, too little to share out. A text mostly new, big enough to be read
// in pieces, is left to a cold parse (errMostlyNew).
func (m *Parser) warm(text []byte) (*parser, error) {
	p := &parser{rs: &Ruleset{}, rec: true, warm: true, copies: newChainCopies(m.chains, m.rules)}
	var (
		t      *Table     // the table of memo
		memo   *tableMemo // its blocks, nil for a new table
		expect int        // the index in memo.order of the block expected next
		misses int        // blocks read anew
	)
	for pos := 0; pos < len(text); {
		lineEnd, next := len(text), len(text)
		if i := bytes.IndexByte(text[pos:], '\n'); i >= 0 {
			lineEnd, next = pos+i, pos+i+1
		}
		raw := text[pos:lineEnd]
		if isBlankLine(raw) {
			// What stripComment makes "": nothing to read.
			p.line++
			pos = next
			continue
		}
		if p.state == inTable {
			if p.t != t {
				t, memo, expect = p.t, m.tables[tableKey{p.t.Family, p.t.Name}], 0
				p.same = sameNames{}
				if memo != nil {
					p.same.last = len(memo.order)
					p.blocks = make([]*block, 0, len(memo.order)+16)
				}
			}
			if memo != nil {
				// Most blocks follow the one before as they did in the
				// last parse: try that one before the map.
				var b, tried *block
				if expect < len(memo.order) {
					if tried = memo.order[expect]; p.reuse(text[pos:], tried, m.stamp) {
						b = tried
					}
				}
				if b == nil {
					if b = memo.byHeader[string(raw)]; b == tried || b != nil && !p.reuse(text[pos:], b, m.stamp) {
						b = nil
					}
				}
				if b != nil {
					expect = b.index + 1
					pos += len(b.text)
					continue
				}
			}
		}
		before := len(p.blocks)
		n, err := p.readCopy(text, pos)
		if err != nil {
			return nil, err
		}
		m.stats.missBytes += n - pos
		pos = n
		if len(p.blocks) > before {
			// A block read anew: most often the one expected, changed.
			if b := p.blocks[len(p.blocks)-1]; memo != nil && expect < len(memo.order) && memo.order[expect].stamp != m.stamp && sameName(memo.order[expect], b) {
				p.same.replaced++
				expect++
			} else {
				p.same.changed = true
			}
			misses++
			if misses >= 64 && len(text) >= parallelMin && misses > p.allHits() {
				return nil, errMostlyNew
			}
		}
	}
	if err := p.finish(); err != nil {
		return nil, err
	}
	m.stats.misses = misses
	for _, tb := range p.tables {
		m.stats.hits += tb.hits
	}
	return p, nil
}

// allHits counts the blocks reused so far.
func (p *parser) allHits() int {
	n := p.hits
	for _, tb := range p.tables {
		n += tb.hits
	}
	return n
}

// isBlankLine tells whether a line is blank or a comment.
func isBlankLine(raw []byte) bool {
	for _, c := range raw {
		if !isBlank(c) {
			return c == '#'
		}
	}
	return true
}

// reuse takes over block b of the memo if text starts with it, and tells
// whether it did: what reading the block would do, without reading it.
// A block declared twice is left to be read, which reports it.
func (p *parser) reuse(text []byte, b *block, stamp uint64) bool {
	n := len(b.text)
	if n > len(text) || string(text[:n]) != b.text || b.text[n-1] != '\n' && n != len(text) {
		return false
	}
	if b.chain != nil {
		ch := p.copies.chain(b.chain)
		n := len(p.chains)
		if p.chains[ch.Name] = ch; len(p.chains) == n {
			// Declared twice: reading the block fails, whatever the map
			// holds now.
			return false
		}
		p.t.Chains = append(p.t.Chains, ch)
		p.t.chainSum += b.hash
	} else {
		if p.sets[b.set.Name] != nil {
			return false
		}
		p.sets[b.set.Name] = b.set
		p.specs[b.set.Name] = b.spec
		p.t.Sets = append(p.t.Sets, b.set)
	}
	b.line = p.line + 1 // for its references (warmRefs)
	p.line += b.nlines
	b.stamp = stamp
	p.blocks = append(p.blocks, b)
	p.hits++
	return true
}

// sameNames tells whether a table declares the chains, sets and maps of
// the last parse, and only them, with what the references to them are
// checked against: then the references of the blocks reused, checked in
// the last parse, hold, and only those of the blocks read anew are
// checked.
type sameNames struct {
	last     int  // blocks of the table in the last parse
	replaced int  // blocks read anew in place of one of the same name (sameName)
	changed  bool // a block read anew in place of none
}

// sameName tells whether block b, read anew, declares what old did, as
// references see it: what checkRefs checks of a chain or set.
func sameName(old, b *block) bool {
	switch {
	case old.chain != nil && b.chain != nil:
		return old.chain.Name == b.chain.Name && (old.chain.Base == nil) == (b.chain.Base == nil)
	case old.set != nil && b.set != nil:
		o, s := old.spec, b.spec
		return old.set.Name == b.set.Name && o.isMap == s.isMap && o.endpoints == s.endpoints && o.interval == s.interval && o.keyLen == s.keyLen
	}
	return false
}

// warmRefs returns the references to check at the end of a table read by
// warm: those of all its blocks, in text order and at their lines in the
// text, as Parse checks them; only those of the blocks read anew when the
// table declares what it did in the last parse (sameNames).
func (p *parser) warmRefs() []ref {
	if s := p.same; !s.changed && len(p.blocks) == s.last && p.hits+s.replaced == s.last {
		return p.c.refs // the blocks read anew, in order
	}
	n := 0
	for _, b := range p.blocks {
		n += len(b.refs)
	}
	refs := make([]ref, 0, n)
	for _, b := range p.blocks {
		delta := b.line - b.line0
		for _, r := range b.refs {
			r.line += delta
			refs = append(refs, r)
		}
	}
	return refs
}

// copyMin is the size of the first copy readCopy makes: more than most
// chains take.
const copyMin = 4 << 10

// blockEnd ends the blocks as render writes them.
var blockEnd = []byte("\n\t}\n")

// readCopy reads the line of text at start, in a table or outside, and
// when it starts a block, the lines up to its end; it returns the offset
// after them. The lines are read from copies of the text, so that what
// the compiled form keeps of them (rule texts, names) keeps alive only the
// copies, not the whole text. A copy ends at the end of a block as render
// writes it ("\t}"), or after copyMin bytes at the end of a line, then
// after twice as much, and so on, until the block ends: for render's
// text, the copies hold the block and nothing more, and for another text
// little more.
func (p *parser) readCopy(text []byte, start int) (int, error) {
	size := copyMin
	for pos := start; pos < len(text); size *= 2 {
		end := min(len(text), pos+size)
		if i := bytes.Index(text[pos:end], blockEnd); i >= 0 {
			end = pos + i + len(blockEnd)
		} else if i := bytes.IndexByte(text[end:], '\n'); i >= 0 {
			end += i + 1
		} else {
			end = len(text)
		}
		chunk := string(text[pos:end])
		for off := 0; off < len(chunk); {
			lineEnd, next := len(chunk), len(chunk)
			if i := strings.IndexByte(chunk[off:], '\n'); i >= 0 {
				lineEnd, next = off+i, off+i+1
			}
			p.restHint = len(text) - pos - next
			if err := p.feed(chunk[off:lineEnd]); err != nil {
				return 0, err
			}
			off = next
			if b := p.closed; b != nil {
				// The block started at start.
				if pos == start {
					b.text = chunk[:off]
				} else {
					b.text = string(text[start : pos+off])
				}
				p.blocks, p.closed = append(p.blocks, b), nil
			}
			if p.state == inFile || p.state == inTable {
				return pos + off, nil
			}
		}
		pos = end
	}
	return len(text), nil
}

// chainCopies is where a warm parse copies the chains it reuses: slabs of
// their own, which only the parse's Ruleset keeps alive.
type chainCopies struct {
	chains []Chain
	rules  []Rule
	ptrs   []*Rule
}

// newChainCopies makes room for about the chains and rules of the last
// parse.
func newChainCopies(chains, rules int) *chainCopies {
	return &chainCopies{
		chains: make([]Chain, 0, chains+16),
		rules:  make([]Rule, 0, rules+64),
		ptrs:   make([]*Rule, 0, rules+64),
	}
}

// chain returns a copy of ch with copies of its rules, without their key
// (ruleKeyOf), which is neither read nor copied: the applier may be
// writing it in the Ruleset that ch came from.
func (cc *chainCopies) chain(ch *Chain) *Chain {
	c := take(&cc.chains, 1)
	c[0] = Chain{Name: ch.Name, Base: ch.Base, Text: ch.Text}
	if n := len(ch.Rules); n > 0 {
		rules, ptrs := take(&cc.rules, n), take(&cc.ptrs, n)
		for i, r := range ch.Rules {
			rules[i] = Rule{Text: r.Text, Exprs: r.Exprs, Anon: r.Anon, anonAt: r.anonAt}
			ptrs[i] = &rules[i]
		}
		c[0].Rules = ptrs
	}
	return &c[0]
}

// take returns n zero Ts carved from the slab s.
func take[T any](s *[]T, n int) []T {
	if n > cap(*s)-len(*s) {
		*s = make([]T, 0, max(slab, n))
	}
	m := len(*s)
	*s = (*s)[:m+n]
	return (*s)[m : m+n : m+n]
}

// arenaBytes is the size of the slabs an arena carves from now.
func arenaBytes(a *arena) int {
	return capBytes(a.cmps) + capBytes(a.verdicts) + capBytes(a.imms) + capBytes(a.lookups) +
		capBytes(a.counters) + capBytes(a.dynsets) + capBytes(a.rules) + capBytes(a.ruleps) +
		capBytes(a.chains) + capBytes(a.elems) + capBytes(a.anys) + capBytes(a.buf)
}

func capBytes[T any](s []T) int {
	var z T
	return cap(s) * int(unsafe.Sizeof(z))
}

// seedArena gives an arena small first slabs, for a parse that reads few
// blocks.
func seedArena(a *arena) {
	const n = 16
	a.cmps = make([]expr.Cmp, 0, n)
	a.verdicts = make([]expr.Verdict, 0, n)
	a.imms = make([]expr.Immediate, 0, n)
	a.lookups = make([]expr.Lookup, 0, n)
	a.counters = make([]expr.Counter, 0, n)
	a.dynsets = make([]expr.Dynset, 0, n)
	a.rules = make([]Rule, 0, n)
	a.ruleps = make([]*Rule, 0, 2*n)
	a.chains = make([]Chain, 0, n)
	a.elems = make([]nftables.SetElement, 0, 4*n)
	a.anys = make([]expr.Any, 0, 8*n)
	a.buf = make([]byte, 0, 1<<10)
}
