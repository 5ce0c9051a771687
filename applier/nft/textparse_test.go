package nft

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// The text parser is the test oracle of the model's encoding: it reads a
// ruleset as render.NFTables prints it and compiles it to the expressions
// nft 1.0.6 sends for that text (TestCompileMatchesKernel proves it
// against the kernel); TestModelEncodesAsParse and
// TestGoldenModelEncodesAsParse compare nftmodel's encoding with it. It is
// test code: nothing on the apply path reads text.

// Parse reads a ruleset rendered by render.NFTables and compiles it: the
// closed set of forms that render writes, not general nft syntax. Errors
// carry the line number ("nftables.nft:123: unknown rule form: …"); no
// input makes it panic.
func Parse(text []byte) (*Ruleset, error) {
	p := &parser{src: string(text), rs: &Ruleset{}}
	if err := p.parse(); err != nil {
		return nil, err
	}
	return p.rs, nil
}

// parseError is an error at a line of the ruleset.
type parseError struct {
	line int
	err  error
}

func (e *parseError) Error() string { return fmt.Sprintf("nftables.nft:%d: %v", e.line, e.err) }
func (e *parseError) Unwrap() error { return e.err }

type parseState uint8

const (
	inFile parseState = iota
	inTable
	inChain
	inSet
)

// parser reads the ruleset a line at a time: statements of the rendered
// grammar never span lines, except the elements of a set.
type parser struct {
	src   string
	off   int
	line  int
	state parseState
	rs    *Ruleset

	t      *Table    // the table being read
	c      *compiler // its compiler
	chains map[string]*Chain
	sets   map[string]*Set
	specs  map[string]*setSpec
	ch     *Chain    // the chain being read
	set    *setState // the set being read
	seen   map[string]bool
	texts  []string  // scratch: rule texts of the chain
	rules  []*Rule   // scratch: rules of the chain
	elems  []Element // scratch: elements of the set

	// The texts of the table's chains are written one after the other in
	// text, and cut out of it at the end of the table (finishTexts).
	text     strings.Builder
	textHint int
	spans    []textSpan

	// sub tells that the parser reads a piece of a table's body (see
	// parallelBody): it starts and must end in the table.
	sub bool
}

func (p *parser) parse() error {
	for p.off < len(p.src) {
		end := strings.IndexByte(p.src[p.off:], '\n')
		var raw string
		if end < 0 {
			raw, p.off = p.src[p.off:], len(p.src)
		} else {
			raw, p.off = p.src[p.off:p.off+end], p.off+end+1
		}
		if err := p.feed(raw); err != nil {
			return err
		}
	}
	if p.sub && p.state == inTable {
		p.finishTexts()
		return nil
	}
	return p.finish()
}

// feed reads the next line, raw, without its end.
func (p *parser) feed(raw string) error {
	p.line++
	t, err := stripComment(raw)
	if err == nil && t != "" {
		err = p.handle(t)
	}
	if err != nil {
		var pe *parseError
		if errors.As(err, &pe) {
			return err
		}
		return &parseError{line: p.line, err: err}
	}
	return nil
}

// finish checks, at the end of the text, that nothing is left open.
func (p *parser) finish() error {
	if p.state != inFile {
		return &parseError{line: p.line, err: fmt.Errorf("unexpected end of file: %s", p.open())}
	}
	return nil
}

// open names what is left open at the end of the file.
func (p *parser) open() string {
	switch p.state {
	case inChain:
		return "chain " + p.ch.Name + " is not closed"
	case inSet:
		return "set " + p.set.s.Name + " is not closed"
	}
	return "table is not closed"
}

// isBlank tells whether c is a space, tab or carriage return.
func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\r' }

// trimBlank is s without leading and trailing blanks.
func trimBlank(s string) string {
	for len(s) > 0 && isBlank(s[0]) {
		s = s[1:]
	}
	for len(s) > 0 && isBlank(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

// trimLeftBlank is s without leading blanks.
func trimLeftBlank(s string) string {
	for len(s) > 0 && isBlank(s[0]) {
		s = s[1:]
	}
	return s
}

// stripComment returns the line without its comment ("#" outside quotes)
// and surrounding blanks.
func stripComment(s string) (string, error) {
	if i := strings.IndexByte(s, '#'); i >= 0 {
		if strings.IndexByte(s[:i], '"') < 0 {
			s = s[:i]
		} else {
			inQuote := false
			for j := 0; j < len(s); j++ {
				if s[j] == '"' {
					inQuote = !inQuote
				} else if s[j] == '#' && !inQuote {
					s = s[:j]
					break
				}
			}
		}
	}
	if strings.IndexByte(s, '"') >= 0 && strings.Count(s, `"`)%2 != 0 {
		return "", fmt.Errorf("unterminated string")
	}
	return trimBlank(s), nil
}

func (p *parser) handle(t string) error {
	switch p.state {
	case inFile:
		return p.fileLine(t)
	case inTable:
		return p.tableLine(t)
	case inChain:
		return p.chainLine(t)
	case inSet:
		return p.setText(t)
	}
	return nil
}

// fileLine reads a line outside tables: the replace idiom (`table F N {}`,
// `delete table F N`) or the start of a table.
func (p *parser) fileLine(t string) error {
	f := strings.Fields(t)
	switch {
	case len(f) == 4 && f[0] == "delete" && f[1] == "table":
		_, err := tableID(f[2], f[3])
		return err
	case len(f) == 4 && f[0] == "table" && f[3] == "{}", len(f) == 5 && f[0] == "table" && f[3] == "{" && f[4] == "}":
		_, err := tableID(f[1], f[2])
		return err
	case len(f) == 4 && f[0] == "table" && f[3] == "{":
		fam, err := tableID(f[1], f[2])
		if err != nil {
			return err
		}
		id := f[1] + " " + f[2]
		if p.seen[id] {
			return fmt.Errorf("table %s declared twice", id)
		}
		if p.seen == nil {
			p.seen = map[string]bool{}
		}
		p.seen[id] = true
		p.startTable(fam, f[2], len(p.src)-p.off)
		if len(p.src)-p.off >= parallelMin {
			p.parallelBody()
		}
		return nil
	}
	return fmt.Errorf("unknown statement: %q", t)
}

// startTable starts reading a table of about size bytes.
func (p *parser) startTable(fam nftables.TableFamily, name string, size int) {
	// Room for the chains of a rendered table of this size, so that the
	// map rarely grows.
	hint := size / 512
	p.t = &Table{Family: fam, Name: name, Chains: make([]*Chain, 0, hint)}
	p.c = &compiler{fam: fam}
	p.chains = make(map[string]*Chain, hint)
	p.sets, p.specs = map[string]*Set{}, map[string]*setSpec{}
	p.textHint = size / 2 // rule lines are less than half a rendered table
	p.state = inTable
}

// parallelMin is the size of text after a table's start from which the
// table's body is read in pieces, one a CPU.
var parallelMin = 1 << 20

// parallelBody reads the body of the table just started in pieces on
// several CPUs, when the text is laid out as render writes it: the table
// ends with a line "}" and the body can be cut before lines "\tchain ".
// Each piece is read like the body, then the pieces are joined and their
// references checked against all of them. Whenever something is amiss the
// body is left for the sequential reader, which then reports the first
// error as it would without pieces; the result does not depend on how the
// body was read.
func (p *parser) parallelBody() {
	k := min(runtime.GOMAXPROCS(0), 8)
	if k < 2 {
		return
	}
	end := strings.Index(p.src[p.off:], "\n}\n")
	if end < 0 {
		return
	}
	end += p.off + 1
	body := p.src[p.off:end]
	cuts := []int{0}
	for i := 1; i < k; i++ {
		from := max(i*len(body)/k, cuts[len(cuts)-1])
		j := strings.Index(body[from:], "\n\tchain ")
		if j < 0 {
			break
		}
		if c := from + j + 1; c > cuts[len(cuts)-1] {
			cuts = append(cuts, c)
		}
	}
	if len(cuts) < 2 {
		return
	}
	cuts = append(cuts, len(body))
	subs := make([]*parser, len(cuts)-1)
	errs := make([]error, len(subs))
	var wg sync.WaitGroup
	for i := range subs {
		sp := &parser{src: body[cuts[i]:cuts[i+1]], sub: true}
		sp.startTable(p.t.Family, p.t.Name, len(sp.src))
		subs[i] = sp
		wg.Go(func() { errs[i] = sp.parse() })
	}
	wg.Wait()
	var sc scope
	for i, sp := range subs {
		if errs[i] != nil {
			return
		}
		for _, prev := range subs[:i] {
			for name := range sp.chains {
				if prev.chains[name] != nil {
					return
				}
			}
			for name := range sp.sets {
				if prev.sets[name] != nil {
					return
				}
			}
		}
		sc.chains = append(sc.chains, sp.chains)
		sc.specs = append(sc.specs, sp.specs)
	}
	for i, sp := range subs {
		wg.Go(func() { errs[i] = sp.checkRefs(sp.c.refs, sc) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return
		}
	}
	for _, sp := range subs {
		p.t.Chains = append(p.t.Chains, sp.t.Chains...)
		p.t.Sets = append(p.t.Sets, sp.t.Sets...)
		p.line += sp.line
	}
	p.off = end
}

// tableID checks a table's family and name.
func tableID(fam, name string) (nftables.TableFamily, error) {
	if !isName(name) {
		return 0, fmt.Errorf("bad table name %q", name)
	}
	switch fam {
	case "ip":
		return nftables.TableFamilyIPv4, nil
	case "ip6":
		return nftables.TableFamilyIPv6, nil
	}
	return 0, fmt.Errorf("unsupported table family %q", fam)
}

// tableLine reads a line of a table: the start of a chain, set or map, or
// its end.
func (p *parser) tableLine(t string) error {
	if t == "}" {
		if p.sub {
			return fmt.Errorf("unexpected end of table")
		}
		refs := p.c.refs
		if err := p.checkRefs(refs, scope{chains: []map[string]*Chain{p.chains}, specs: []map[string]*setSpec{p.specs}}); err != nil {
			return err
		}
		p.finishTexts()
		p.rs.Tables = append(p.rs.Tables, p.t)
		p.t, p.c, p.state = nil, nil, inFile
		return nil
	}
	kw, rest, _ := strings.Cut(t, " ")
	name, rest, _ := strings.Cut(trimLeftBlank(rest), " ")
	rest = trimLeftBlank(rest)
	if !isName(name) || !strings.HasPrefix(rest, "{") {
		return fmt.Errorf("unknown statement: %q", t)
	}
	rest = rest[1:]
	switch kw {
	case "chain":
		p.ch = alloc(&p.c.a.chains)
		p.ch.Name = name
		n := len(p.chains)
		if p.chains[name] = p.ch; len(p.chains) == n {
			return fmt.Errorf("chain %s declared twice", name)
		}
		p.t.Chains = append(p.t.Chains, p.ch)
		p.texts, p.rules = p.texts[:0], p.rules[:0]
		p.state = inChain
		if rest = trimBlank(rest); rest != "" {
			if rest != "}" {
				return fmt.Errorf("unknown statement: %q (a chain's rules go on lines of their own)", t)
			}
			p.closeChain()
		}
		return nil
	case "set", "map":
		if p.sets[name] != nil {
			return fmt.Errorf("set %s declared twice", name)
		}
		p.set = &setState{s: &Set{Name: name}, isMap: kw == "map", line: p.line}
		p.sets[name] = p.set.s
		p.t.Sets = append(p.t.Sets, p.set.s)
		p.state = inSet
		return p.setText(rest)
	}
	return fmt.Errorf("unknown statement: %q", t)
}

// chainLine reads a line of a chain: its hook, a rule or its end.
func (p *parser) chainLine(t string) error {
	if t == "}" {
		p.closeChain()
		return nil
	}
	if strings.IndexByte(t, ';') < 0 {
		return p.chainStmt(t)
	}
	for _, s := range strings.Split(t, ";") {
		if s = trimBlank(s); s != "" {
			if err := p.chainStmt(s); err != nil {
				return err
			}
		}
	}
	return nil
}

// closeChain ends the chain being read.
func (p *parser) closeChain() {
	if p.text.Cap() == 0 {
		p.text.Grow(p.textHint)
	}
	start := p.text.Len()
	for i, s := range p.texts {
		if i > 0 {
			p.text.WriteByte('\n')
		}
		p.text.WriteString(s)
	}
	p.spans = append(p.spans, textSpan{p.ch, start, p.text.Len()})
	if len(p.rules) > 0 {
		p.ch.Rules = p.c.a.rulePtrs(p.rules)
	}
	p.ch, p.state = nil, inTable
}

// textSpan is where the text of a chain is in parser.text.
type textSpan struct {
	ch         *Chain
	start, end int
}

// finishTexts sets the texts of the chains read.
func (p *parser) finishTexts() {
	all := p.text.String()
	for _, sp := range p.spans {
		sp.ch.Text = all[sp.start:sp.end]
	}
	p.text, p.spans = strings.Builder{}, p.spans[:0]
}

// chainStmt reads a statement of a chain: `type … hook … priority …`,
// `policy …` or a rule.
func (p *parser) chainStmt(s string) error {
	switch {
	case strings.HasPrefix(s, "type "):
		if p.ch.Base != nil || len(p.rules) > 0 {
			return fmt.Errorf("the hook of chain %s must come first, once", p.ch.Name)
		}
		base, err := parseHook(strings.Fields(s))
		if err != nil {
			return err
		}
		p.ch.Base = base
		return nil
	case strings.HasPrefix(s, "policy "):
		if p.ch.Base == nil || len(p.rules) > 0 {
			return fmt.Errorf("policy of chain %s must follow its hook", p.ch.Name)
		}
		switch strings.TrimSpace(s[len("policy "):]) {
		case "accept":
			p.ch.Base.Policy = nftables.ChainPolicyAccept
		case "drop":
			p.ch.Base.Policy = nftables.ChainPolicyDrop
		default:
			return fmt.Errorf("unknown policy in %q", s)
		}
		return nil
	}
	p.c.line = p.line
	r, err := p.c.rule(s)
	if err != nil {
		return err
	}
	p.rules = append(p.rules, r)
	p.texts = append(p.texts, s)
	return nil
}

// parseHook reads `type T hook H priority P [+|- N]`. The policy is accept
// unless a policy statement says otherwise.
func parseHook(f []string) (*BaseChain, error) {
	bad := fmt.Errorf("unknown chain hook %q", strings.Join(f, " "))
	if len(f) < 6 || f[2] != "hook" || f[4] != "priority" {
		return nil, bad
	}
	b := &BaseChain{Policy: nftables.ChainPolicyAccept}
	switch f[1] {
	case "filter":
		b.Type = nftables.ChainTypeFilter
	case "nat":
		b.Type = nftables.ChainTypeNAT
	case "route":
		b.Type = nftables.ChainTypeRoute
	default:
		return nil, bad
	}
	switch f[3] {
	case "prerouting":
		b.Hooknum = nftables.ChainHookRef(*nftables.ChainHookPrerouting)
	case "input":
		b.Hooknum = nftables.ChainHookRef(*nftables.ChainHookInput)
	case "forward":
		b.Hooknum = nftables.ChainHookRef(*nftables.ChainHookForward)
	case "output":
		b.Hooknum = nftables.ChainHookRef(*nftables.ChainHookOutput)
	case "postrouting":
		b.Hooknum = nftables.ChainHookRef(*nftables.ChainHookPostrouting)
	default:
		return nil, bad
	}
	prio, ok := priorities[f[5]]
	if !ok {
		n, err := parseInt32(f[5])
		if err != nil {
			return nil, bad
		}
		prio = n
	}
	switch {
	case len(f) == 6:
	case len(f) == 8 && (f[6] == "+" || f[6] == "-"):
		n, err := parseInt32(f[7])
		if err != nil || n < 0 {
			return nil, bad
		}
		if f[6] == "-" {
			n = -n
		}
		prio += n
	default:
		return nil, bad
	}
	b.Priority = nftables.ChainPriorityRef(nftables.ChainPriority(prio))
	return b, nil
}

// priorities are nft's standard priority names of the ip and ip6
// families.
var priorities = map[string]int32{
	"raw": -300, "mangle": -150, "dstnat": -100, "filter": 0, "security": 50, "srcnat": 100,
}

func parseInt32(s string) (int32, error) {
	neg := strings.HasPrefix(s, "-")
	n, err := parseUint(strings.TrimPrefix(s, "-"), 31)
	if err != nil {
		return 0, err
	}
	if neg {
		return -int32(n), nil
	}
	return int32(n), nil
}

// setState is a set or map being read.
type setState struct {
	s       *Set
	isMap   bool // declared with map
	line    int
	decl    []string
	spec    setSpec
	typed   bool
	flags   map[string]bool
	timeout time.Duration
	size    uint32
	inElems bool
	nelems  int // elements read (in parser.elems)
}

// setSpec is what elements and lookups need to know of a set.
type setSpec struct {
	fields   []vtype
	isMap    bool // data type verdict
	interval bool
	keyLen   uint32
	// endpoints tells an endpoint map (typeof numgen … : ADDR . th
	// dport): integer keys, an address and a port as data.
	endpoints bool
}

// setText reads the text of a set or map after its opening brace, up to
// the end of the line: declarations separated by newlines or semicolons,
// elements, and the closing brace.
func (p *parser) setText(t string) error {
	st := p.set
	for {
		t = strings.TrimLeft(t, " \t;")
		if t == "" {
			return nil
		}
		if st.inElems {
			rest, err := p.scanElements(t)
			if err != nil {
				return err
			}
			t = rest
			continue
		}
		if t[0] == '}' {
			if rest := strings.Trim(t[1:], " \t;"); rest != "" {
				return fmt.Errorf("unexpected %q after the end of set %s", rest, st.s.Name)
			}
			return p.closeSet()
		}
		if rest, ok := strings.CutPrefix(t, "elements"); ok {
			rest = strings.TrimLeft(rest, " \t")
			if rest, ok = strings.CutPrefix(rest, "="); ok {
				if rest, ok = strings.CutPrefix(strings.TrimLeft(rest, " \t"), "{"); ok {
					st.inElems = true
					t = rest
					continue
				}
			}
			return fmt.Errorf("expected \"elements = {\" in %q", t)
		}
		stmt := t
		if j := strings.IndexAny(t, ";}"); j >= 0 {
			stmt, t = t[:j], t[j:]
		} else {
			t = ""
		}
		if err := p.setDecl(strings.Fields(stmt)); err != nil {
			return err
		}
	}
}

// scanElements reads elements up to the end of the line or the closing
// brace of the elements, and returns the text after it.
func (p *parser) scanElements(t string) (string, error) {
	st := p.set
	start, inQuote := 0, false
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !elemDelim[c] {
			continue
		}
		switch c {
		case '"':
			inQuote = !inQuote
		case ',':
			if !inQuote {
				if err := p.addElem(t[start:i]); err != nil {
					return "", err
				}
				start = i + 1
			}
		case '}':
			if !inQuote {
				if err := p.addElem(t[start:i]); err != nil {
					return "", err
				}
				st.inElems = false
				return t[i+1:], nil
			}
		}
	}
	return "", p.addElem(t[start:])
}

// elemDelim marks the bytes scanElements looks at.
var elemDelim = [256]bool{'"': true, ',': true, '}': true}

// addElem compiles an element of the set being read.
func (p *parser) addElem(text string) error {
	st := p.set
	if text = trimBlank(text); text == "" {
		return nil
	}
	if !st.typed {
		return fmt.Errorf("set %s: elements before the type", st.s.Name)
	}
	st.nelems++
	p.elems = append(p.elems, Element{})
	p.c.line = p.line
	if err := p.c.element(&p.elems[len(p.elems)-1], text, &st.spec); err != nil {
		return fmt.Errorf("set %s: element %q: %v", st.s.Name, text, err)
	}
	return nil
}

// setDecl reads a declaration of a set: type, flags, timeout or size.
func (p *parser) setDecl(f []string) error {
	st := p.set
	if len(f) < 2 {
		return fmt.Errorf("unknown set statement %q", strings.Join(f, " "))
	}
	switch f[0] {
	case "typeof":
		if st.typed {
			return fmt.Errorf("set %s has two types", st.s.Name)
		}
		if err := st.parseTypeof(f[1:], p.t.Family); err != nil {
			return err
		}
		st.typed = true
	case "type":
		if st.typed {
			return fmt.Errorf("set %s has two types", st.s.Name)
		}
		if err := st.parseType(f[1:]); err != nil {
			return err
		}
		st.typed = true
	case "flags":
		if st.nelems > 0 {
			return fmt.Errorf("set %s: flags after elements", st.s.Name)
		}
		st.flags = map[string]bool{}
		for _, fl := range strings.Split(strings.Join(f[1:], ""), ",") {
			switch fl {
			case "interval", "dynamic", "timeout":
				st.flags[fl] = true
			default:
				return fmt.Errorf("unsupported set flag %q", fl)
			}
		}
		st.spec.interval = st.flags["interval"]
	case "timeout":
		d, err := parseDuration(strings.Join(f[1:], ""))
		if err != nil {
			return err
		}
		st.timeout = d
	case "size":
		n, err := parseUint(f[1], 32)
		if err != nil || len(f) != 2 || n == 0 {
			return fmt.Errorf("bad set size %q", strings.Join(f[1:], " "))
		}
		st.size = uint32(n)
	default:
		return fmt.Errorf("unknown set statement %q", strings.Join(f, " "))
	}
	st.decl = append(st.decl, strings.Join(f, " "))
	return nil
}

// keyTypes are the datatypes a set key may have.
var keyTypes = map[string]struct {
	v  vtype
	dt nftables.SetDatatype
}{
	"ipv4_addr":    {vAddr4, nftables.TypeIPAddr},
	"ipv6_addr":    {vAddr6, nftables.TypeIP6Addr},
	"inet_proto":   {vProto, nftables.TypeInetProto},
	"inet_service": {vPort, nftables.TypeInetService},
	"mark":         {vMark, nftables.TypeMark},
}

// parseType reads `T [. T]... [: verdict]`.
func (st *setState) parseType(f []string) error {
	bad := fmt.Errorf("unsupported set type %q", strings.Join(f, " "))
	key := f
	if n := len(f); n >= 2 && f[n-2] == ":" {
		if f[n-1] != "verdict" {
			return bad
		}
		st.spec.isMap, key = true, f[:n-2]
	}
	var dts []nftables.SetDatatype
	for i, t := range key {
		if i%2 == 1 {
			if t != "." {
				return bad
			}
			continue
		}
		kt, ok := keyTypes[t]
		if !ok {
			return bad
		}
		st.spec.fields = append(st.spec.fields, kt.v)
		dts = append(dts, kt.dt)
	}
	if len(key)%2 == 0 || len(dts) > 5 {
		return bad
	}
	if st.spec.isMap != st.isMap {
		return fmt.Errorf("a set has no data and a map maps to verdicts: %q", strings.Join(f, " "))
	}
	tmpl := &st.s.Template
	if len(dts) == 1 {
		tmpl.KeyType = dts[0]
		st.spec.keyLen = dts[0].Bytes
		tmpl.KeyByteOrder = binaryutil.BigEndian
		if dts[0].Name == nftables.TypeMark.Name {
			tmpl.KeyByteOrder = binaryutil.NativeEndian
		}
	} else {
		kt, err := nftables.ConcatSetType(dts...)
		if err != nil {
			return bad
		}
		tmpl.KeyType = kt
		st.spec.keyLen = kt.Bytes
	}
	if st.spec.isMap {
		tmpl.IsMap, tmpl.DataType = true, nftables.TypeVerdict
	}
	return nil
}

// parseDuration reads an nft time such as 600s, 10m or 1h30m: numbers
// with units d, h, m, s or ms.
func parseDuration(s string) (time.Duration, error) {
	bad := fmt.Errorf("bad timeout %q", s)
	var d time.Duration
	for s != "" {
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		n, err := parseUint(s[:i], 32)
		if err != nil {
			return 0, bad
		}
		s = s[i:]
		unit := time.Duration(0)
		for _, u := range []struct {
			name string
			d    time.Duration
		}{{"ms", time.Millisecond}, {"d", 24 * time.Hour}, {"h", time.Hour}, {"m", time.Minute}, {"s", time.Second}} {
			if strings.HasPrefix(s, u.name) {
				unit, s = u.d, s[len(u.name):]
				break
			}
		}
		if unit == 0 {
			return 0, bad
		}
		d += time.Duration(n) * unit
	}
	if d <= 0 {
		return 0, bad
	}
	return d, nil
}

// closeSet completes the set: its template and compiled elements.
func (p *parser) closeSet() error {
	st := p.set
	s := st.s
	if !st.typed {
		return fmt.Errorf("set %s has no type", s.Name)
	}
	tmpl := &s.Template
	tmpl.Name = s.Name
	st.spec.interval = st.flags["interval"]
	tmpl.Interval = st.spec.interval
	tmpl.Dynamic = st.flags["dynamic"]
	tmpl.HasTimeout = st.flags["timeout"] || st.timeout > 0
	tmpl.Timeout = st.timeout
	tmpl.Size = st.size
	switch {
	case st.spec.endpoints:
		if !st.spec.interval || tmpl.Dynamic || tmpl.HasTimeout {
			return fmt.Errorf("set %s: an endpoint map needs flags interval, and nothing else", s.Name)
		}
	case st.spec.interval:
		if st.spec.isMap || len(st.spec.fields) != 1 || st.spec.fields[0] != vAddr4 && st.spec.fields[0] != vAddr6 {
			return fmt.Errorf("set %s: only address sets may have flag interval", s.Name)
		}
		tmpl.KeyByteOrder = binaryutil.BigEndian
	}
	s.Decl = strings.Join(st.decl, "\n")
	s.Elements = make([]Element, len(p.elems))
	copy(s.Elements, p.elems)
	clear(p.elems)
	p.elems = p.elems[:0]
	if st.spec.interval && len(s.Elements) > 0 {
		leadingEnd(s.Elements)
	}
	p.specs[s.Name] = &st.spec
	p.set, p.state = nil, inTable
	return nil
}

// leadingEnd adds to the element of an interval set with the lowest start
// the end element at zero that nft sends when creating the set, unless
// that interval starts at zero. The kernel keeps it like any element.
func leadingEnd(elems []Element) {
	low := &elems[0]
	for i := range elems {
		if bytes.Compare(elems[i].Elems[0].Key, low.Elems[0].Key) < 0 {
			low = &elems[i]
		}
	}
	start := low.Elems[0].Key
	if !bytes.Equal(start, make([]byte, len(start))) {
		low.Elems = append([]nftables.SetElement{{Key: make([]byte, len(start)), IntervalEnd: true}}, low.Elems...)
	}
}

// element compiles an element of a set with spec sp.
func (c *compiler) element(el *Element, text string, sp *setSpec) error {
	toks, err := tokenize(c.toks[:0], text)
	c.toks = toks
	if err != nil {
		return err
	}
	el.Text = text
	if c.sig == nil {
		c.sig = make([]byte, 0, 64)
	}
	key := c.key[:0]
	var end []byte // of an interval
	n := 0
	for i, typ := range sp.fields {
		if i > 0 {
			if n >= len(toks) || toks[n] != "." {
				return fmt.Errorf("expected a key of %d parts", len(sp.fields))
			}
			n++
		}
		if n >= len(toks) {
			return fmt.Errorf("expected a key of %d parts", len(sp.fields))
		}
		v := toks[n]
		n++
		switch typ {
		case vInt:
			lo, hi, err := parseIntRange(v)
			if err != nil {
				return err
			}
			key = binary.BigEndian.AppendUint32(key, lo)
			if hi < 1<<32-1 {
				end = binary.BigEndian.AppendUint32(c.v2[:0], hi+1)
			}
			continue
		case vAddr4, vAddr6:
			if sp.interval {
				rg, _, err := parseRange(v, typ)
				if err != nil {
					return err
				}
				key = appendAddr(key, rg.start)
				if next := rg.end.Next(); next.IsValid() {
					end = appendAddr(c.v2[:0], next)
				}
				continue
			}
			pfx, err := parseAddrOrPrefix(v, typ)
			if err != nil || !pfx.IsSingleIP() {
				return fmt.Errorf("bad address %q", v)
			}
			key = appendAddr(key, pfx.Addr())
		default:
			key, err = c.intValue(prim{typ: typ}, v, key)
			if err != nil {
				return err
			}
		}
		if len(sp.fields) > 1 {
			for len(key)%4 != 0 {
				key = append(key, 0)
			}
		}
	}
	var comment string
	if n+1 < len(toks) && toks[n] == "comment" && strings.HasPrefix(toks[n+1], `"`) {
		comment = toks[n+1][1 : len(toks[n+1])-1]
		n += 2
	}
	var verdict *expr.Verdict
	var data []byte
	if sp.endpoints {
		if n+1 >= len(toks) || toks[n] != ":" {
			return fmt.Errorf("expected \": ADDR . PORT\"")
		}
		if data, err = c.endpointData(toks[n+1:]); err != nil {
			return err
		}
		n = len(toks)
	}
	if sp.isMap {
		if n+1 >= len(toks) || toks[n] != ":" {
			return fmt.Errorf("expected \": VERDICT\"")
		}
		verdict = alloc(&c.a.verdicts)
		switch v := toks[n+1]; v {
		case "accept", "drop", "return", "continue":
			c.ex = c.ex[:0]
			c.verdict(v, "")
			*verdict = *c.ex[0].(*expr.Verdict)
			n += 2
		case "jump", "goto":
			if n+2 >= len(toks) || !isName(toks[n+2]) {
				return fmt.Errorf("%s needs a chain name", v)
			}
			c.ex = c.ex[:0]
			c.verdict(v, toks[n+2])
			*verdict = *c.ex[0].(*expr.Verdict)
			c.refs = append(c.refs, ref{kind: refChain, name: toks[n+2], line: c.line})
			n += 3
		default:
			return fmt.Errorf("unknown verdict %q", v)
		}
	}
	if n != len(toks) {
		return fmt.Errorf("unexpected %q", strings.Join(toks[n:], " "))
	}
	c.key = key
	cnt := 1
	if end != nil {
		cnt = 2
	}
	el.Elems = c.a.setElems(cnt)
	el.Elems[0] = nftables.SetElement{Key: c.a.bytes(key), VerdictData: verdict, Comment: comment}
	if data != nil {
		el.Elems[0].Val = c.a.bytes(data)
	}
	if end != nil {
		el.Elems[1] = nftables.SetElement{Key: c.a.bytes(end), IntervalEnd: true}
	}
	return nil
}

// scope is where references of a table are looked up: the chains and
// sets of the table, read in one piece or several.
type scope struct {
	chains []map[string]*Chain
	specs  []map[string]*setSpec
}

func (sc *scope) chain(name string) *Chain {
	for _, m := range sc.chains {
		if ch := m[name]; ch != nil {
			return ch
		}
	}
	return nil
}

func (sc *scope) spec(name string) *setSpec {
	for _, m := range sc.specs {
		if sp := m[name]; sp != nil {
			return sp
		}
	}
	return nil
}

// checkRefs checks, once a table is read, that the chains and sets that
// its rules and elements refer to exist and fit. What it checks of a
// chain or set, sameName (parsememo.go) compares.
func (p *parser) checkRefs(refs []ref, sc scope) error {
	for _, r := range refs {
		var err error
		switch r.kind {
		case refChain:
			switch ch := sc.chain(r.name); {
			case ch == nil:
				err = fmt.Errorf("no chain %s in table %s", r.name, p.t.Name)
			case ch.Base != nil:
				err = fmt.Errorf("chain %s is a base chain: it cannot be jumped to", r.name)
			}
		default:
			sp := sc.spec(r.name)
			switch {
			case sp == nil:
				err = fmt.Errorf("no set %s in table %s", r.name, p.t.Name)
			case (r.kind == refMap) != sp.endpoints:
				err = fmt.Errorf("@%s: a dnat map needs an endpoint map (typeof numgen … : ADDR . th dport), and only it", r.name)
			case (r.kind == refVmap) != sp.isMap:
				err = fmt.Errorf("@%s: a vmap needs a map, a lookup or update a set", r.name)
			case sp.interval && r.kind == refDynset:
				err = fmt.Errorf("@%s: cannot update an interval set", r.name)
			case sp.keyLen != r.keyLen:
				err = fmt.Errorf("@%s: the key has %d bytes, the set's %d", r.name, r.keyLen, sp.keyLen)
			}
		}
		if err != nil {
			return &parseError{line: r.line, err: err}
		}
	}
	return nil
}

// parseTypeof reads the declaration of an endpoint map: `numgen random mod
// N : ip daddr . th dport` (ip6 daddr in the IPv6 table).
func (st *setState) parseTypeof(f []string, fam nftables.TableFamily) error {
	bad := fmt.Errorf("unsupported typeof %q: netspec declares only endpoint maps, typeof numgen random mod N : %s daddr . th dport", strings.Join(f, " "), familyName(fam))
	want := []string{"numgen", "random", "mod", "", ":", familyName(fam), "daddr", ".", "th", "dport"}
	if len(f) != len(want) || !st.isMap {
		return bad
	}
	for i := range want {
		if want[i] != "" && f[i] != want[i] {
			return bad
		}
	}
	mod, err := strconv.ParseUint(f[3], 10, 32)
	if err != nil || mod == 0 {
		return bad
	}
	addr := nftables.TypeIPAddr
	if fam == nftables.TableFamilyIPv6 {
		addr = nftables.TypeIP6Addr
	}
	data, err := nftables.ConcatSetType(addr, nftables.TypeInetService)
	if err != nil {
		return err
	}
	st.spec.fields = []vtype{vInt}
	st.spec.keyLen = 4
	st.spec.endpoints = true
	tmpl := &st.s.Template
	tmpl.KeyType = nftables.TypeInteger
	tmpl.KeyByteOrder = binaryutil.NativeEndian
	tmpl.IsMap = true
	tmpl.DataType = data
	st.s.udata = typeofUserdata(fam, uint32(mod))
	return nil
}

// parseIntRange reads an integer key of an endpoint map: N or N-M.
func parseIntRange(s string) (lo, hi uint32, err error) {
	a, b, isRange := strings.Cut(s, "-")
	x, err := parseUint(a, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("bad key %q", s)
	}
	y := x
	if isRange {
		if y, err = parseUint(b, 32); err != nil || y < x {
			return 0, 0, fmt.Errorf("bad key range %q", s)
		}
	}
	return uint32(x), uint32(y), nil
}

// endpointData compiles the data of an endpoint map's element, toks
// being `ADDR . PORT`: the address, then the port in a 32-bit word.
func (c *compiler) endpointData(toks []string) ([]byte, error) {
	if len(toks) != 3 || toks[1] != "." {
		return nil, fmt.Errorf("expected \": ADDR . PORT\"")
	}
	typ := vAddr4
	if c.fam == nftables.TableFamilyIPv6 {
		typ = vAddr6
	}
	pfx, err := parseAddrOrPrefix(toks[0], typ)
	if err != nil || !pfx.IsSingleIP() {
		return nil, fmt.Errorf("bad address %q", toks[0])
	}
	port, err := parseUint(toks[2], 16)
	if err != nil {
		return nil, fmt.Errorf("bad port %q", toks[2])
	}
	b := appendAddr(c.v1[:0], pfx.Addr())
	b = binary.BigEndian.AppendUint16(b, uint16(port))
	return append(b, 0, 0), nil
}

// natMap compiles `dnat ip to numgen random mod N [offset O] map @MAP`
// (toks from dnat on): numgen into register 1, turned to network byte
// order for the interval map, looked up in MAP into registers 1 (the
// address) and the next 32-bit word after it (the port), and DNAT to
// both.
func (c *compiler) natMap(toks []string) (int, bool, error) {
	fam := familyName(c.fam)
	bad := ruleError("dnat: expected \"dnat %s to numgen random mod N [offset O] map @MAP\"", fam)
	if len(toks) < 9 || toks[1] != fam || toks[2] != "to" {
		return 0, false, bad
	}
	p, err := c.prim(toks[3:])
	if err != nil || p.kind != pNumgen {
		return 0, false, bad
	}
	n := 3 + p.tokens
	if n+1 >= len(toks) || toks[n] != "map" || !strings.HasPrefix(toks[n+1], "@") || !isName(toks[n+1][1:]) {
		return 0, false, bad
	}
	if c.l4 < 0 {
		return 0, false, ruleError("dnat to a port needs a transport protocol match before it")
	}
	c.load(p, reg1, 4)
	c.ex = append(c.ex, c.intern(append(c.sig[:0], 'o'), func() expr.Any {
		return &expr.Byteorder{SourceRegister: reg1, DestRegister: reg1, Op: expr.ByteorderHton, Len: 4, Size: 4}
	}))
	e := alloc(&c.a.lookups)
	e.SourceRegister, e.IsDestRegSet, e.DestRegister, e.SetName = reg1, true, reg1, toks[n+1][1:]
	c.ex = append(c.ex, e)
	c.refs = append(c.refs, ref{kind: refMap, name: e.SetName, line: c.line, keyLen: 4})
	family, portReg := uint32(unix.NFPROTO_IPV4), uint32(reg32Base+1)
	if c.fam == nftables.TableFamilyIPv6 {
		family, portReg = unix.NFPROTO_IPV6, reg2
	}
	c.ex = append(c.ex, c.intern(append(c.sig[:0], 'N', byte(family)), func() expr.Any {
		return &expr.NAT{Type: expr.NATTypeDestNAT, Family: family, RegAddrMin: reg1, RegProtoMin: portReg, Specified: true}
	}))
	return n + 2, false, nil
}
