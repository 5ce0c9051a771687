package nft

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"netspec.dev/netspec/internal/gen/genplan"
	"netspec.dev/netspec/render"
)

// memoTexts are the rulesets the memo is tested on: every rendered one
// (parseFiles), a synthetic one of 2,000 services and the ruleset of a
// generated tree of 300 services.
func memoTexts(t *testing.T) map[string]string {
	texts := map[string]string{}
	for _, path := range parseFiles(t) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		texts[nftcName(path)] = string(b)
	}
	texts["synth-2000"] = synthRuleset(2000, 10)
	texts["generated-300"] = string(render.NFTables(genplan.Plan(t, 300, "node-1")))
	for name, text := range texts {
		if len(text) > 256<<10 {
			t.Logf("%s: %d bytes", name, len(text))
		}
	}
	return texts
}

// sameAsParse fails unless got and gotErr are what Parse returns for
// text.
func sameAsParse(t testing.TB, what string, text []byte, got *Ruleset, gotErr error) {
	t.Helper()
	want, wantErr := Parse(text)
	switch {
	case (gotErr == nil) != (wantErr == nil):
		t.Fatalf("%s: memo error %v, Parse error %v", what, gotErr, wantErr)
	case gotErr != nil && gotErr.Error() != wantErr.Error():
		t.Fatalf("%s: memo error\n\t%v\nParse error\n\t%v", what, gotErr, wantErr)
	case !reflect.DeepEqual(got, want):
		t.Fatalf("%s: the memo's ruleset differs from Parse's: %s", what, rulesetDiff(want, got))
	}
}

// rulesetDiff names the first difference of two rulesets.
func rulesetDiff(want, got *Ruleset) string {
	if len(want.Tables) != len(got.Tables) {
		return fmt.Sprintf("%d tables, want %d", len(got.Tables), len(want.Tables))
	}
	for i, w := range want.Tables {
		g := got.Tables[i]
		if w.Family != g.Family || w.Name != g.Name || len(w.Chains) != len(g.Chains) || len(w.Sets) != len(g.Sets) {
			return fmt.Sprintf("table %d: %s with %d chains, %d sets; want %s, %d, %d", i, g.Name, len(g.Chains), len(g.Sets), w.Name, len(w.Chains), len(w.Sets))
		}
		for j := range w.Chains {
			if !reflect.DeepEqual(w.Chains[j], g.Chains[j]) {
				return fmt.Sprintf("table %s: chain %d: %+v, want %+v", w.Name, j, g.Chains[j], w.Chains[j])
			}
		}
		for j := range w.Sets {
			if !reflect.DeepEqual(w.Sets[j], g.Sets[j]) {
				return fmt.Sprintf("table %s: set %s differs", w.Name, w.Sets[j].Name)
			}
		}
		if w.chainSum != g.chainSum {
			return fmt.Sprintf("table %s: chainSum %x, want %x", w.Name, g.chainSum, w.chainSum)
		}
	}
	return "in a field of Ruleset"
}

// textBlock is a block of a text in render's layout: "\tchain NAME {" to
// "\t}".
type textBlock struct {
	kind, name string
	start, end int // end: after the closing line
	hasRules   bool
}

var blockHeader = regexp.MustCompile(`(?m)^\t(chain|set|map) (\S+) \{\n`)

// textBlocks finds the blocks of a text written as render writes them.
func textBlocks(text string) []textBlock {
	var out []textBlock
	for _, m := range blockHeader.FindAllStringSubmatchIndex(text, -1) {
		end := strings.Index(text[m[1]:], "\n\t}\n")
		if end < 0 {
			continue
		}
		b := textBlock{kind: text[m[2]:m[3]], name: text[m[4]:m[5]], start: m[0], end: m[1] + end + 4}
		body := text[m[1] : m[1]+end]
		b.hasRules = b.kind == "chain" && body != "" && !strings.Contains(body, "\t\ttype ")
		out = append(out, b)
	}
	return out
}

// memoEdit is a change of a text: the text after it, and false when the
// text has nothing to change so.
type memoEdit struct {
	name string
	edit func(text string) (string, bool)
}

// middle returns the block of bs in the middle of those ok accepts.
func middle(bs []textBlock, ok func(textBlock) bool) (textBlock, bool) {
	var in []textBlock
	for _, b := range bs {
		if ok(b) {
			in = append(in, b)
		}
	}
	if len(in) == 0 {
		return textBlock{}, false
	}
	return in[len(in)/2], true
}

var memoEdits = []memoEdit{
	{"same", func(text string) (string, bool) { return text, true }},
	{"rule changed", func(text string) (string, bool) {
		b, ok := middle(textBlocks(text), func(b textBlock) bool { return b.hasRules })
		if !ok {
			return "", false
		}
		i := strings.Index(text[b.start:], "{\n\t\t") + b.start + 4
		return text[:i] + "counter " + text[i:], true
	}},
	{"rule added", func(text string) (string, bool) {
		b, ok := middle(textBlocks(text), func(b textBlock) bool { return b.hasRules })
		if !ok {
			return "", false
		}
		i := b.end - len("\t}\n")
		return text[:i] + "\t\tmeta mark 0x10 drop\n" + text[i:], true
	}},
	{"chain added", func(text string) (string, bool) {
		b, ok := middle(textBlocks(text), func(textBlock) bool { return true })
		if !ok {
			return "", false
		}
		return text[:b.start] + "\t# added\n\tchain memo-added {\n\t\tdrop\n\t}\n" + text[b.start:], true
	}},
	{"unreferenced chain removed", func(text string) (string, bool) {
		b, ok := middle(textBlocks(text), func(b textBlock) bool {
			return b.kind == "chain" && strings.Count(text, b.name) == 1
		})
		if !ok {
			return "", false
		}
		return text[:b.start] + text[b.end:], true
	}},
	{"referenced chain removed", func(text string) (string, bool) {
		b, ok := middle(textBlocks(text), func(b textBlock) bool {
			return b.kind == "chain" && (strings.Contains(text, "jump "+b.name) || strings.Contains(text, "goto "+b.name))
		})
		if !ok {
			return "", false
		}
		return text[:b.start] + text[b.end:], true
	}},
	{"set removed", func(text string) (string, bool) {
		b, ok := middle(textBlocks(text), func(b textBlock) bool { return b.kind != "chain" })
		if !ok {
			return "", false
		}
		return text[:b.start] + text[b.end:], true
	}},
	{"element removed", func(text string) (string, bool) {
		b, ok := middle(textBlocks(text), func(b textBlock) bool {
			return b.kind != "chain" && strings.Count(text[b.start:b.end], ",\n") >= 2
		})
		if !ok {
			return "", false
		}
		i := strings.Index(text[b.start:], "elements = {\n") + b.start + len("elements = {\n")
		j := strings.IndexByte(text[i:], '\n') + i + 1
		return text[:i] + text[j:], true
	}},
	{"set declaration changed", func(text string) (string, bool) {
		b, ok := middle(textBlocks(text), func(b textBlock) bool { return b.kind != "chain" })
		if !ok {
			return "", false
		}
		i := strings.IndexByte(text[b.start:], '\n') + b.start + 1
		return text[:i] + "\t\tsize 65535\n" + text[i:], true
	}},
	{"set flags changed", func(text string) (string, bool) {
		b, ok := middle(textBlocks(text), func(b textBlock) bool { return b.kind == "set" })
		if !ok {
			return "", false
		}
		i := strings.IndexByte(text[b.start:], '\n') + b.start + 1
		i += strings.IndexByte(text[i:], '\n') + 1 // after the type
		return text[:i] + "\t\tflags interval\n" + text[i:], true
	}},
	{"set type changed", func(text string) (string, bool) {
		b, ok := middle(textBlocks(text), func(b textBlock) bool {
			return b.kind == "set" && strings.Contains(text[b.start:b.end], "type ipv4_addr . ipv4_addr\n")
		})
		if !ok {
			return "", false
		}
		blk := strings.Replace(text[b.start:b.end], "type ipv4_addr . ipv4_addr\n", "type ipv4_addr\n", 1)
		return text[:b.start] + blk + text[b.end:], true
	}},
	{"lines shifted", func(text string) (string, bool) {
		i := strings.Index(text, "{\n\t")
		if i < 0 {
			return "", false
		}
		return text[:i+2] + "\t# one\n\n\t# two\n" + text[i+2:], true
	}},
	{"blocks swapped", func(text string) (string, bool) {
		bs := textBlocks(text)
		for i := len(bs) - 1; i > 0; i-- {
			a, b := bs[i-1], bs[i]
			if a.end == b.start {
				return text[:a.start] + text[b.start:b.end] + text[a.start:a.end] + text[b.end:], true
			}
		}
		return "", false
	}},
	{"table removed", func(text string) (string, bool) {
		i := strings.Index(text, "\ntable ip6 netspec {\n")
		if i < 0 {
			return "", false
		}
		j := strings.Index(text[i:], "\n}\n")
		return text[:i+1] + text[i+j+3:], true
	}},
	{"table renamed", func(text string) (string, bool) {
		if !strings.Contains(text, "table ip netspec {\n") {
			return "", false
		}
		return strings.Replace(text, "table ip netspec {\n", "table ip other {\n", 1), true
	}},
}

// TestParserEqualsParse checks that a Parser that parsed a text A gives,
// for a text B made of A by a change, what Parse gives for B, ruleset or
// error, and so on back to A and to B again.
func TestParserEqualsParse(t *testing.T) {
	// The big texts are read in pieces when cold, and left to a cold parse
	// when mostly new.
	defer func(old int) { parallelMin = old }(parallelMin)
	parallelMin = 256 << 10
	for name, a := range memoTexts(t) {
		for _, e := range memoEdits {
			b, ok := e.edit(a)
			if !ok {
				continue
			}
			t.Run(name+"/"+e.name, func(t *testing.T) {
				m := NewParser()
				for i, text := range []string{a, b, a, b, b} {
					rs, err := m.Parse([]byte(text))
					sameAsParse(t, fmt.Sprintf("parse %d", i), []byte(text), rs, err)
					if st := m.stats; i > 0 && st.cold && !st.abandoned && !st.overBudget {
						t.Errorf("parse %d did not use the memo", i)
					}
				}
				if e.name == "same" && m.stats.misses != 0 {
					t.Errorf("the same text again: %d blocks read anew", m.stats.misses)
				}
			})
		}
	}
}

// TestParserErrors checks that an error is reported as Parse reports it,
// at its line, also when the block at fault was taken from the memo: it
// refers to a chain or set that is no more.
func TestParserErrors(t *testing.T) {
	text := synthRuleset(50, 3)
	tests := []struct {
		name, old, new string
		want           string
	}{
		{"bad rule", "meta l4proto tcp dnat to 10.245.0.7:8080", "foo bar", "unknown rule form"},
		{"dangling jump", "meta l4proto tcp dnat to 10.245.0.7:8080\n", "meta l4proto tcp dnat to 10.245.0.7:8080\n\t\tjump nowhere\n", "no chain nowhere"},
		{"jump to a base chain", "meta l4proto tcp dnat to 10.245.0.7:8080\n", "meta l4proto tcp dnat to 10.245.0.7:8080\n\t\tjump nat-prerouting\n", "base chain"},
		// The chain services, unchanged, looks up the map removed.
		{"set removed", "\tmap service-ips {\n\t\ttype ipv4_addr . inet_proto . inet_service : verdict\n\t\telements = {\n", "\tmap service-ips-x {\n\t\ttype ipv4_addr . inet_proto . inet_service : verdict\n\t\telements = {\n", "no set service-ips in table netspec"},
		// The map service-ips, unchanged, goes to the chain removed.
		{"chain removed", "\tchain service-7 {\n", "\tchain service-7-x {\n", "no chain service-7 in table netspec"},
		// Lines above the chain at fault, unchanged, are added.
		{"set removed below added lines", "\tchain nat-prerouting {\n", "\t# a\n\t# b\n\tchain nat-prerouting {\n", ""},
		{"map changed to a set", "\tmap service-ips {\n\t\ttype ipv4_addr . inet_proto . inet_service : verdict\n\t\telements = {\n", "\tset service-ips {\n\t\ttype ipv4_addr . inet_proto . inet_service\n\t}\n\tmap service-ips-x {\n\t\ttype ipv4_addr . inet_proto . inet_service : verdict\n\t\telements = {\n", "@service-ips: a vmap needs a map"},
		{"map's key changed", "\tmap service-ips {\n\t\ttype ipv4_addr . inet_proto . inet_service : verdict\n\t\telements = {\n", "\tmap service-ips {\n\t\ttype ipv4_addr . inet_proto : verdict\n\t}\n\tmap service-ips-x {\n\t\ttype ipv4_addr . inet_proto . inet_service : verdict\n\t\telements = {\n", "@service-ips: the key has 12 bytes, the set's 8"},
		{"chain declared twice", "\tchain service-9 {\n", "\tchain service-8 {\n", "chain service-8 declared twice"},
		{"set declared twice", "\tset hairpin {\n", "\tmap service-ips {\n", "set service-ips declared twice"},
		{"not closed", "\tchain service-49 {\n", "\tchain service-49 {\n\tchain service-50 {\n", "unknown rule form"},
		{"end of file", "}\n\ntable ip6", "", "unexpected end of file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(text, tt.old) {
				t.Fatalf("no %q", tt.old)
			}
			bad := strings.Replace(text, tt.old, tt.new, 1)
			if tt.name == "end of file" {
				bad = text[:strings.Index(text, tt.old)]
			}
			if tt.name == "set removed below added lines" {
				// Then the map is removed: the chain services, unchanged
				// but further down, is at fault.
				bad = strings.Replace(bad, "\tmap service-ips {\n", "\tmap service-ips-x {\n", 1)
				tt.want = "no set service-ips"
			}
			m := NewParser()
			if _, err := m.Parse([]byte(text)); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 2; i++ {
				rs, err := m.Parse([]byte(bad))
				sameAsParse(t, "bad text", []byte(bad), rs, err)
				if m.stats.cold {
					t.Error("the bad text was parsed without the memo")
				}
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("error %v, want %q", err, tt.want)
				}
			}
			// The memo is still the good text's.
			rs, err := m.Parse([]byte(text))
			sameAsParse(t, "good text after", []byte(text), rs, err)
			if m.stats.misses != 0 {
				t.Errorf("the good text again: %d blocks read anew", m.stats.misses)
			}
		})
	}
}

// TestParserEachBlockRemoved removes each block of the rendered rulesets
// in turn (some of them in the big ones), after a parse of the whole: a
// removed chain or set that others refer to is reported as Parse reports
// it. The memo holds the blocks as a cold parse read them, in pieces.
func TestParserEachBlockRemoved(t *testing.T) {
	defer func(old int) { parallelMin = old }(parallelMin)
	parallelMin = 4 << 10
	for name, a := range memoTexts(t) {
		bs := textBlocks(a)
		t.Run(name, func(t *testing.T) {
			m := NewParser()
			for i, b := range bs {
				if len(bs) > 200 && i%(len(bs)/100) != 0 {
					continue
				}
				if _, err := m.Parse([]byte(a)); err != nil {
					t.Fatal(err)
				}
				text := []byte(a[:b.start] + a[b.end:])
				rs, err := m.Parse(text)
				sameAsParse(t, b.kind+" "+b.name+" removed", text, rs, err)
			}
		})
	}
}

// TestParserShares checks what two rulesets of a Parser share: sets and
// maps, not chains and rules, whose key the applier caches. A key cached
// in the last ruleset is not in the next.
func TestParserShares(t *testing.T) {
	a := synthRuleset(200, 3)
	b := strings.Replace(a, "\tchain service-7 {\n\t\t", "\tchain service-7 {\n\t\tcounter ", 1)
	m := NewParser()
	rsA, err := m.Parse([]byte(a))
	if err != nil {
		t.Fatal(err)
	}
	// As the applier does (ruleKeyOf), while the next Parse runs.
	var wg sync.WaitGroup
	wg.Go(func() {
		for _, tb := range rsA.Tables {
			for _, ch := range tb.Chains {
				for _, r := range ch.Rules {
					ruleKeyOf(r, tb.Family)
				}
			}
		}
	})
	rsB, err := m.Parse([]byte(b))
	wg.Wait()
	sameAsParse(t, "b", []byte(b), rsB, err)
	rsA2, err := m.Parse([]byte(a))
	sameAsParse(t, "a again", []byte(a), rsA2, err)
	for i, ta := range rsA.Tables {
		tb := rsB.Tables[i]
		for j := range ta.Sets {
			if ta.Sets[j] != tb.Sets[j] {
				t.Errorf("set %s was not reused", ta.Sets[j].Name)
			}
		}
		for j := range ta.Chains {
			if ta.Chains[j] == tb.Chains[j] || len(ta.Chains[j].Rules) > 0 && ta.Chains[j].Rules[0] == tb.Chains[j].Rules[0] {
				t.Errorf("chain %s is shared", ta.Chains[j].Name)
			}
		}
	}
}

// TestParserCold checks when a Parser parses without its memo: first;
// when the text is mostly new and big enough to be read in pieces; when
// what warm parses keep alive passes the budget.
func TestParserCold(t *testing.T) {
	defer func(old int) { parallelMin = old }(parallelMin)
	parallelMin = 64 << 10
	a := synthRuleset(3000, 10)
	b := strings.ReplaceAll(a, "service-", "svc-")
	m := NewParser()
	for i, tt := range []struct {
		text      string
		cold      bool
		abandoned bool
	}{
		{a, true, false},
		{a, false, false},
		{b, true, true}, // mostly new
		{a, true, true},
		{a, false, false},
	} {
		rs, err := m.Parse([]byte(tt.text))
		sameAsParse(t, fmt.Sprint("parse ", i), []byte(tt.text), rs, err)
		if m.stats.cold != tt.cold || m.stats.abandoned != tt.abandoned {
			t.Errorf("parse %d: cold %v, abandoned %v; want %v, %v", i, m.stats.cold, m.stats.abandoned, tt.cold, tt.abandoned)
		}
	}
	m.retained = m.stats.retainedBudget + 1
	rs, err := m.Parse([]byte(a))
	sameAsParse(t, "over budget", []byte(a), rs, err)
	if !m.stats.cold || m.retained != 0 {
		t.Errorf("over budget: cold %v, retained %d", m.stats.cold, m.retained)
	}
	// What warm parses keep alive: a chain changed back and forth keeps
	// one parse's; chains changed one after the other, all of theirs.
	var sizes []int
	for i := range 8 {
		text := a
		if i%2 == 0 {
			text = strings.Replace(a, "\tchain service-7 {\n\t\t", "\tchain service-7 {\n\t\tcounter ", 1)
		}
		if _, err := m.Parse([]byte(text)); err != nil || m.stats.cold || m.stats.misses != 1 {
			t.Fatalf("parse %d: cold %v, %d blocks read anew, err %v", i, m.stats.cold, m.stats.misses, err)
		}
		sizes = append(sizes, m.retained)
	}
	if sizes[0] == 0 || slices.Max(sizes) > 2*sizes[0] || len(m.gens) != 1 {
		t.Errorf("one chain changed back and forth: retained %v, %d parses", sizes, len(m.gens))
	}
	for i := range 8 {
		text := strings.Replace(a, fmt.Sprintf("\tchain service-%d {\n\t\t", 100+i), fmt.Sprintf("\tchain service-%d {\n\t\tcounter ", 100+i), 1)
		if _, err := m.Parse([]byte(text)); err != nil || m.stats.cold {
			t.Fatal(err)
		}
	}
	if len(m.gens) != 8 || m.retained < 8*sizes[0]/2 {
		t.Errorf("chains changed one after the other: retained %d by %d parses", m.retained, len(m.gens))
	}
}

// FuzzParseMemo checks that a Parser gives what Parse gives for two texts
// parsed in turn.
func FuzzParseMemo(f *testing.F) {
	for _, path := range parseFiles(f) {
		text, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		for _, e := range memoEdits[1:] {
			if b, ok := e.edit(string(text)); ok {
				f.Add(text, []byte(b))
			}
		}
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		m := NewParser()
		for i, text := range [][]byte{a, b, a} {
			rs, err := m.Parse(text)
			sameAsParse(t, fmt.Sprint("parse ", i), text, rs, err)
		}
	})
}

// BenchmarkParseMemo parses the ruleset of a 10,000-service plan and the
// same with one chain's rule changed, in turn: with Parse (fresh), with a
// new Parser each time (memo-cold: Parse and recording the blocks), and
// with one Parser (memo), which reads the changed chain anew and takes
// every other block from its memo.
func BenchmarkParseMemo(b *testing.B) {
	a := bigRuleset(b, 10000)
	bs := textBlocks(string(a))
	blk, ok := middle(bs, func(b textBlock) bool { return b.hasRules })
	if !ok {
		b.Fatal("no chain")
	}
	i := strings.Index(string(a[blk.start:]), "{\n\t\t") + blk.start + 4
	c := []byte(string(a[:i]) + "counter " + string(a[i:]))
	texts := [2][]byte{a, c}
	for _, name := range []string{"fresh", "memo-cold", "memo"} {
		b.Run(name, func(b *testing.B) {
			m := NewParser()
			parse := Parse
			switch name {
			case "memo-cold": // the first Parse of a Parser
				parse = func(text []byte) (*Ruleset, error) { return NewParser().Parse(text) }
			case "memo":
				parse = m.Parse
				if _, err := m.Parse(c); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(len(a)))
			b.ReportAllocs()
			var ru0, ru1 syscall.Rusage
			syscall.Getrusage(0, &ru0)
			n := 0
			for b.Loop() {
				if _, err := parse(texts[n%2]); err != nil {
					b.Fatal(err)
				}
				n++
			}
			syscall.Getrusage(0, &ru1)
			cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) / time.Duration(n)
			b.ReportMetric(float64(cpu.Microseconds())/1000, "cpu-ms/op")
			if name == "memo" {
				b.ReportMetric(float64(m.stats.misses), "blocks-read")
				b.ReportMetric(float64(m.stats.hits), "blocks-reused")
			}
		})
	}
}
