package nft

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"

	"netspec.dev/netspec/internal/gen/genplan"
	"netspec.dev/netspec/render"
)

// parseFiles are every rendered ruleset of the repository and the forms
// of testdata.
func parseFiles(t testing.TB) []string {
	t.Helper()
	var files []string
	for _, pattern := range []string{"../../golden/*/*/nftables.nft", "../../golden/*/*/ipvs-nftables.nft", "../../render/testdata/nftables/*.nft", "testdata/*.nft"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 8 {
		t.Fatalf("found only %d rulesets", len(files))
	}
	return files
}

// TestParseRendered parses every rendered ruleset and checks what it
// holds against the text: tables ip then ip6, each rule line of a chain a
// Rule (and Chain.Text their lines), each element line an Element.
func TestParseRendered(t *testing.T) {
	for _, path := range parseFiles(t) {
		t.Run(nftcName(path), func(t *testing.T) {
			text, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			rs, err := Parse(text)
			if err != nil {
				t.Fatal(err)
			}
			if len(rs.Tables) != 2 || rs.Tables[0].Family != nftables.TableFamilyIPv4 || rs.Tables[1].Family != nftables.TableFamilyIPv6 {
				t.Fatalf("want tables ip and ip6, got %d", len(rs.Tables))
			}
			rules, elems := countLines(string(text))
			gotRules, gotElems := 0, 0
			for _, tb := range rs.Tables {
				if tb.Name != "netspec" {
					t.Errorf("table %q", tb.Name)
				}
				for _, ch := range tb.Chains {
					var lines []string
					for _, r := range ch.Rules {
						if len(r.Exprs) == 0 {
							t.Errorf("chain %s: rule %q has no expressions", ch.Name, r.Text)
						}
						if !bytes.Contains(text, []byte(r.Text)) {
							t.Errorf("chain %s: rule %q is not in the file", ch.Name, r.Text)
						}
						lines = append(lines, r.Text)
					}
					if want := strings.Join(lines, "\n"); ch.Text != want {
						t.Errorf("chain %s: Text %q, want %q", ch.Name, ch.Text, want)
					}
					gotRules += len(ch.Rules)
				}
				for _, s := range tb.Sets {
					if s.Decl == "" || s.Template.Name != s.Name || s.Template.Table != nil {
						t.Errorf("set %s: Decl %q, template %+v", s.Name, s.Decl, s.Template)
					}
					for _, e := range s.Elements {
						if len(e.Elems) == 0 || len(e.Elems) > 3 || !strings.Contains(string(text), e.Text) {
							t.Errorf("set %s: element %q with %d netlink elements", s.Name, e.Text, len(e.Elems))
						}
					}
					gotElems += len(s.Elements)
				}
			}
			if rules >= 0 && gotRules != rules {
				t.Errorf("parsed %d rules, the file has %d rule lines", gotRules, rules)
			}
			if elems >= 0 && gotElems != elems {
				t.Errorf("parsed %d elements, the file has %d element lines", gotElems, elems)
			}
		})
	}
}

// countLines counts the rule lines and element lines of a ruleset written
// one statement a line, as render does; -1 when the file has lines with
// several (testdata).
func countLines(text string) (rules, elems int) {
	depth, inElems := 0, false
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
		case strings.Contains(l, ";") && !strings.HasPrefix(l, "type "), strings.HasSuffix(l, "}") && strings.Contains(l, "{ "):
			if strings.HasPrefix(l, "map ") || strings.HasPrefix(l, "set ") || strings.HasPrefix(l, "elements") {
				return -1, -1
			}
			rules++ // a rule with an anonymous set
		case strings.HasSuffix(l, "{"):
			depth++
			inElems = strings.HasPrefix(l, "elements")
		case l == "}":
			depth--
			inElems = false
		case inElems:
			elems++
		case depth == 2 && !strings.HasPrefix(l, "type ") && !strings.HasPrefix(l, "typeof ") && !strings.HasPrefix(l, "flags ") && !strings.HasPrefix(l, "timeout ") && !strings.HasPrefix(l, "size "):
			rules++
		}
	}
	return rules, elems
}

// TestParseErrors checks that malformed input is refused with the number
// of the line at fault.
func TestParseErrors(t *testing.T) {
	table := func(body string) string {
		return "table ip netspec {}\ndelete table ip netspec\ntable ip netspec {\n" + body + "}\n"
	}
	chain := func(rules string) string { return table("\tchain c {\n" + rules + "\t}\n\tchain d {\n\t}\n") }
	tests := []struct {
		name, text string
		line       int
		want       string
	}{
		{"unknown rule", chain("\t\tdrop\n\t\tfoo bar\n"), 6, "unknown rule form"},
		{"unknown statement", "flush ruleset\n", 1, "unknown statement"},
		{"inet table", "table inet netspec {\n}\n", 1, "unsupported table family"},
		{"table twice", table("") + table(""), 7, "declared twice"},
		{"not closed", "table ip netspec {\n\tchain c {\n\t\tdrop\n", 3, "unexpected end of file"},
		{"other family", chain("\t\tip6 saddr ::1 drop\n"), 5, "other family"},
		{"missing chain", chain("\t\tgoto nowhere\n"), 5, "no chain nowhere"},
		{"jump to a base chain", table("\tchain b {\n\t\ttype filter hook input priority 0; policy accept;\n\t}\n\tchain c {\n\t\tjump b\n\t}\n"), 8, "base chain"},
		{"missing set", chain("\t\tip saddr @nope drop\n"), 5, "no set nope"},
		{"vmap of a set", table("\tset s {\n\t\ttype ipv4_addr\n\t}\n\tchain c {\n\t\tip saddr vmap @s\n\t}\n"), 8, "vmap needs a map"},
		{"key length", table("\tset s {\n\t\ttype ipv4_addr . ipv4_addr\n\t}\n\tchain c {\n\t\tip saddr @s drop\n\t}\n"), 8, "the key has 4 bytes"},
		{"set type", table("\tset s {\n\t\ttype ether_addr\n\t}\n"), 5, "unsupported set type"},
		{"map without verdict", table("\tmap m {\n\t\ttype ipv4_addr\n\t}\n"), 5, "maps to verdicts"},
		{"set flag", table("\tset s {\n\t\ttype ipv4_addr\n\t\tflags constant\n\t}\n"), 6, "unsupported set flag"},
		{"element arity", table("\tmap m {\n\t\ttype inet_proto . inet_service : verdict\n\t\telements = {\n\t\t\ttcp : drop,\n\t\t}\n\t}\n"), 7, "key of 2 parts"},
		{"element verdict", table("\tmap m {\n\t\ttype inet_proto . inet_service : verdict\n\t\telements = {\n\t\t\ttcp . 80 : goto,\n\t\t}\n\t}\n"), 7, "needs a chain name"},
		{"element to missing chain", table("\tmap m {\n\t\ttype inet_proto . inet_service : verdict\n\t\telements = {\n\t\t\ttcp . 80 : goto x,\n\t\t}\n\t}\n"), 7, "no chain x"},
		{"bad port", chain("\t\ttcp dport 70000 drop\n"), 5, "bad port"},
		{"prefix with host bits", chain("\t\tip saddr 10.0.0.1/8 drop\n"), 5, "bits set past"},
		{"dnat port without protocol", chain("\t\tdnat to 10.0.0.1:80\n"), 5, "transport protocol match"},
		{"merged ports", chain("\t\ttcp dport 80 tcp sport 1024 drop\n"), 5, "adjacent header fields"},
		{"after the verdict", chain("\t\tdrop accept\n"), 5, "after the verdict"},
		{"unterminated string", chain("\t\tdrop \"x\n"), 5, "unterminated string"},
		{"hook", table("\tchain c {\n\t\ttype filter hook ingress priority 0;\n\t}\n"), 5, "unknown chain hook"},
		{"hook after rules", table("\tchain c {\n\t\tdrop\n\t\ttype filter hook input priority 0;\n\t}\n"), 6, "must come first"},
		{"two anonymous sets", chain("\t\tip saddr { 1.2.3.4, 1.2.3.5 } ip daddr { 1.2.3.4, 1.2.3.6 } drop\n"), 5, "one anonymous set"},
		{"empty anonymous element", chain("\t\tip saddr { 1.2.3.4, , 1.2.3.5 } drop\n"), 5, "empty element"},
		{"concatenation compared", chain("\t\tip saddr . ip daddr 1.2.3.4 drop\n"), 5, "concatenation"},
		{"numgen modulus", chain("\t\tnumgen random mod 0 == 0 drop\n"), 5, "modulus"},
		{"mark operator", chain("\t\tmeta mark set meta mark + 0x1\n"), 5, "unknown operator"},
		{"chain twice", table("\tchain c {\n\t}\n\tchain c {\n\t}\n"), 6, "declared twice"},
		{"set statement", table("\tset s {\n\t\ttype ipv4_addr\n\t\tpolicy memory\n\t}\n"), 6, "unknown set statement"},
		{"timeout", table("\tset s {\n\t\ttype ipv4_addr\n\t\tflags timeout\n\t\ttimeout 10x\n\t}\n"), 7, "bad timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.text))
			if err == nil {
				t.Fatalf("no error for\n%s", tt.text)
			}
			prefix := fmt.Sprintf("nftables.nft:%d: ", tt.line)
			if msg := err.Error(); !strings.HasPrefix(msg, prefix) || !strings.Contains(msg, tt.want) {
				t.Errorf("error %q, want %q…%q", msg, prefix, tt.want)
			}
		})
	}
}

// FuzzParse checks that no input makes Parse, or what uses its result,
// panic.
func FuzzParse(f *testing.F) {
	for _, path := range parseFiles(f) {
		text, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(text)
	}
	for _, s := range []string{
		"table ip netspec {\n\tchain c {\n\t\tip saddr != { 10.0.0.0/8, 255.255.255.255 } drop\n\t}\n}\n",
		"table ip6 netspec {\n\tset s { type ipv6_addr; flags interval; elements = { ::/1, 8000::/1 } }\n}\n",
		"table ip t {\n\tmap m { type ipv4_addr . inet_proto . inet_service : verdict; elements = { 1.2.3.4 . tcp . 80 comment \"}\" : drop } }\n}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		rs, err := Parse(text)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "nftables.nft:") {
				t.Errorf("error without a line number: %v", err)
			}
			return
		}
		// Queue everything on a connection that is never flushed.
		c, err := nftables.New()
		if err != nil {
			t.Fatal(err)
		}
		if err := rs.Replace(c); err != nil {
			t.Logf("Replace: %v", err)
		}
		for _, tb := range rs.Tables {
			for _, ch := range tb.Chains {
				for _, r := range ch.Rules {
					r.Key(tb.Family)
				}
			}
			for _, s := range tb.Sets {
				for _, e := range s.Elements {
					for _, x := range e.Elems {
						ElementKey(x)
					}
				}
			}
		}
	})
}

// bigRuleset renders the ruleset of node-1 of a generated tree of n
// services with two pods each, as render's benchmarks do.
func bigRuleset(b *testing.B, n int) []byte {
	b.Helper()
	return render.NFTables(genplan.Plan(b, n, "node-1"))
}

// BenchmarkParse parses (and compiles) the ruleset of a 10,000-service
// plan: about 9 MB, 50,000 rules and 55,000 elements. Target: 60 ms.
func BenchmarkParse(b *testing.B) {
	text := bigRuleset(b, 10000)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	b.ResetTimer()
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(0, &ru0)
	var rs *Ruleset
	for b.Loop() {
		var err error
		if rs, err = Parse(text); err != nil {
			b.Fatal(err)
		}
	}
	rules, elems := 0, 0
	for _, tb := range rs.Tables {
		for _, ch := range tb.Chains {
			rules += len(ch.Rules)
		}
		for _, s := range tb.Sets {
			elems += len(s.Elements)
		}
	}
	syscall.Getrusage(0, &ru1)
	cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) / time.Duration(b.N)
	b.ReportMetric(float64(cpu.Milliseconds()), "cpu-ms/op")
	b.ReportMetric(float64(rules), "rules")
	b.ReportMetric(float64(elems), "elements")
}

// synthRuleset writes a ruleset in render's layout with n service chains,
// a map and a set of n elements each, and an anonymous set of ranges
// elements: big enough to be read in pieces and to need several netlink
// messages per set.
func synthRuleset(n, ranges int) string {
	var b strings.Builder
	b.WriteString("table ip netspec {}\ndelete table ip netspec\ntable ip netspec {\n")
	b.WriteString("\tchain nat-prerouting {\n\t\ttype nat hook prerouting priority dstnat; policy accept;\n\t\tjump services\n\t}\n")
	b.WriteString("\tchain services {\n\t\tip daddr . meta l4proto . th dport vmap @service-ips\n\t}\n")
	b.WriteString("\tchain firewall {\n\t\tip saddr != {")
	for i := 0; i < ranges; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " 10.%d.%d.0/25", i/256, i%256)
	}
	b.WriteString(" } drop\n\t}\n")
	b.WriteString("\tmap service-ips {\n\t\ttype ipv4_addr . inet_proto . inet_service : verdict\n\t\telements = {\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "\t\t\t10.96.%d.%d . tcp . 80 : goto service-%d,\n", i/256, i%256, i)
	}
	b.WriteString("\t\t}\n\t}\n\tset hairpin {\n\t\ttype ipv4_addr . ipv4_addr\n\t\telements = {\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "\t\t\t10.244.%d.%d . 10.244.%d.%d,\n", i/256, i%256, i/256, i%256)
	}
	b.WriteString("\t\t}\n\t}\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "\t# service %d\n\tchain service-%d {\n", i, i)
		fmt.Fprintf(&b, "\t\tip daddr 10.96.%d.%d tcp dport 80 ip saddr != 10.244.0.0/16 meta mark set meta mark | 0x4000\n", i/256, i%256)
		fmt.Fprintf(&b, "\t\tnumgen random mod 2 == 0 meta l4proto tcp dnat to 10.244.%d.%d:8080\n", i/256, i%256)
		fmt.Fprintf(&b, "\t\tmeta l4proto tcp dnat to 10.245.%d.%d:8080\n\t}\n", i/256, i%256)
	}
	b.WriteString("}\n\ntable ip6 netspec {}\ndelete table ip6 netspec\ntable ip6 netspec {\n\tchain c {\n\t\tdrop\n\t}\n}\n")
	return b.String()
}

// TestParseInPieces checks that reading a big table in pieces on several
// CPUs gives what reading it in one piece gives, errors included.
func TestParseInPieces(t *testing.T) {
	text := synthRuleset(3000, 10)
	parse := func(min int) (*Ruleset, error) {
		defer func(old int) { parallelMin = old }(parallelMin)
		parallelMin = min
		return Parse([]byte(text))
	}
	whole, err := parse(len(text) + 1)
	if err != nil {
		t.Fatal(err)
	}
	pieces, err := parse(1)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(whole, pieces) {
		t.Error("reading in pieces gives another ruleset")
	}
	if n := len(pieces.Tables[0].Chains); n != 3003 {
		t.Errorf("%d chains", n)
	}
	// Errors in the second half: a bad rule, a reference to a chain of
	// the first half that does not exist, a chain declared in both.
	for _, tt := range []struct{ old, new, want string }{
		{"meta l4proto tcp dnat to 10.245.11.183:8080", "meta l4proto tcp dnat to nowhere", "bad address"},
		{"tcp dport 80 ip saddr != 10.244.0.0/16 meta mark set meta mark | 0x4000\n\t\tnumgen random mod 2 == 0 meta l4proto tcp dnat to 10.244.11.183", "tcp dport 80 ip saddr != 10.244.0.0/16 meta mark set meta mark | 0x4000\n\t\tgoto service-99999\n\t\tnumgen random mod 2 == 0 meta l4proto tcp dnat to 10.244.11.183", "no chain service-99999"},
		{"chain service-2999 {", "chain service-5 {", "declared twice"},
	} {
		if !strings.Contains(text, tt.old) {
			t.Fatalf("no %q", tt.old)
		}
		bad := strings.Replace(text, tt.old, tt.new, 1)
		defer func(old string) { text = old }(text)
		text = bad
		_, err1 := parse(len(text) + 1)
		_, err2 := parse(1)
		if err1 == nil || err2 == nil || err1.Error() != err2.Error() || !strings.Contains(err1.Error(), tt.want) {
			t.Errorf("in one piece: %v; in pieces: %v; want %q", err1, err2, tt.want)
		}
		text = strings.Replace(text, tt.new, tt.old, 1)
	}
}
