package nft

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables"
	"netspec.dev/netspec/render"
	"netspec.dev/netspec/render/nftmodel"
)

var (
	nftcHandle  = regexp.MustCompile(` # handle \d+`)
	nftcCounter = regexp.MustCompile(`counter packets \d+ bytes \d+`)
)

// nftcNormalize drops from a listing what differs between equal rulesets:
// handles, counter values and the order of elements, which are put one a
// line and sorted.
func nftcNormalize(s string) string {
	lines := strings.Split(s, "\n")
	var out []string
	for i := 0; i < len(lines); i++ {
		l := nftcCounter.ReplaceAllString(nftcHandle.ReplaceAllString(lines[i], ""), "counter packets 0 bytes 0")
		head, block, ok := strings.Cut(l, "elements = {")
		if !ok {
			out = append(out, l)
			continue
		}
		for !nftcClosed(block) && i+1 < len(lines) {
			i++
			block += " " + strings.TrimSpace(lines[i])
		}
		items := nftcSplitElements(block)
		slices.Sort(items)
		out = append(out, head+"elements = {")
		for _, it := range items {
			out = append(out, "\t\t\t"+it+",")
		}
		out = append(out, "\t\t}")
	}
	return strings.Join(out, "\n")
}

// nftcClosed tells whether an element block has its closing brace (outside
// quotes).
func nftcClosed(s string) bool {
	inQuote := false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			inQuote = !inQuote
		case '}':
			if !inQuote {
				return true
			}
		}
	}
	return false
}

// nftcSplitElements splits "a, b, c }" into its elements.
func nftcSplitElements(s string) []string {
	var items []string
	start, inQuote := 0, false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			inQuote = !inQuote
		case ',', '}':
			if inQuote {
				continue
			}
			if it := strings.TrimSpace(s[start:i]); it != "" {
				items = append(items, it)
			}
			start = i + 1
			if s[i] == '}' {
				return items
			}
		}
	}
	return items
}

// nftcUnifiedDiff is `diff -u` of two texts.
func nftcUnifiedDiff(t *testing.T, a, b string) string {
	t.Helper()
	dir := t.TempDir()
	pa, pb := filepath.Join(dir, "nft-f"), filepath.Join(dir, "replace")
	if err := os.WriteFile(pa, []byte(a+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pb, []byte(b+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command("diff", "-u", pa, pb).CombinedOutput()
	if len(out) == 0 {
		return "(diff printed nothing)\n--- nft -f\n" + a + "\n+++ Replace\n" + b
	}
	return string(out)
}

// TestNormalizeListing checks the normalisation the equality test relies
// on.
func TestNormalizeListing(t *testing.T) {
	in := "\tmap m {\n\t\ttype inet_proto . inet_service : verdict\n" +
		"\t\telements = { tcp . 80 comment \"a, b }\" : drop,\n\t\t\t     tcp . 22 : goto c }\n\t}\n" +
		"\t\tip saddr 1.2.3.4 counter packets 12 bytes 3400 accept # handle 7\n"
	want := "\tmap m {\n\t\ttype inet_proto . inet_service : verdict\n\t\telements = {\n" +
		"\t\t\ttcp . 22 : goto c,\n\t\t\ttcp . 80 comment \"a, b }\" : drop,\n\t\t}\n\t}\n" +
		"\t\tip saddr 1.2.3.4 counter packets 0 bytes 0 accept\n"
	if got := nftcNormalize(in); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestReplaceLargeSets checks sets and an anonymous set too big for one
// netlink message: Replace sends them in chunks, and the kernel ends up
// with every element, as after `nft -f`.
func TestReplaceLargeSets(t *testing.T) {
	nftcNeedKernel(t)
	a := nftcNewNS(t, "nftbig")
	b := nftcNewNS(t, "gobig")
	m := synthModel(3000, 1500)
	path := filepath.Join(t.TempDir(), "big.nft")
	if err := os.WriteFile(path, m.AppendText(nil), 0o644); err != nil {
		t.Fatal(err)
	}
	a.nft(t, "", "-f", path)
	rs := Encode(m)
	for _, s := range rs.Tables[0].Sets {
		var elems []nftables.SetElement
		for _, e := range s.Elements {
			elems = append(elems, e.Elems...)
		}
		if n := len(chunks(elems)); n < 2 {
			t.Errorf("set %s fits in %d message: the test needs more elements", s.Name, n)
		}
	}
	c, rc, d := b.batchConn(t), b.conn(t), b.dumper(t)
	if err := rs.Replace(c); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, tb := range rs.Tables {
		fam := familyLabel(tb.Family)
		want := nftcNormalize(a.nft(t, "", "list", "table", fam, tb.Name))
		got := nftcNormalize(b.nft(t, "", "list", "table", fam, tb.Name))
		if want != got {
			t.Errorf("nft list table %s %s differs (--- nft -f, +++ Replace):\n%s", fam, tb.Name, nftcUnifiedDiff(t, want, got))
		}
		nftcCheckTable(t, rc, d, tb)
	}
}

// goldenModels are the models render builds for every golden plan (both
// data planes) and the model of every rule form (modelForms), by name.
func goldenModels(t *testing.T) map[string]*nftmodel.Ruleset {
	t.Helper()
	plans, err := filepath.Glob("../../golden/*/*/plan.json")
	if err != nil || len(plans) < 4 {
		t.Fatalf("found %d golden plans: %v", len(plans), err)
	}
	out := map[string]*nftmodel.Ruleset{"forms": modelForms()}
	for _, path := range plans {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		p, err := render.ParsePlanJSON(data)
		if err != nil {
			t.Fatal(err)
		}
		name := nftcName(filepath.Dir(path))
		out[name+"/nftables"] = render.NFTablesModel(p)
		out[name+"/ipvs-nftables"] = render.NFTablesIPVSModel(p)
	}
	return out
}

// TestModelEqualsKernel is the test of the design for the apply path: for
// every model render builds from a golden plan, `nft -f` of its text
// (namespace A), Encode + Replace of the model (namespace B) and the
// Applier's first install of the model (namespace C: queued from the
// model a piece at a time, staged and sent as one batch, verified; and
// namespace D: the same, its rules and elements encoded in three parts
// at once, in pieces of two elements) leave
// tables that `nft list` prints the same, and what the kernel holds after
// `nft -f` is, rule by rule and element by element, the model's encoding.
func TestModelEqualsKernel(t *testing.T) {
	nftcNeedKernel(t)
	a := nftcNewNS(t, "mnft")
	b := nftcNewNS(t, "mgo")
	cns := nftcNewNS(t, "mapply")
	ca, err := Open(cns.Fd())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ca.Close() })
	dns := nftcNewNS(t, "mparts")
	da, err := Open(dns.Fd())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { da.Close() })
	c := b.batchConn(t)
	rc, d := a.conn(t), a.dumper(t)
	ka, err := OpenSystem(a.Fd())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ka.Close() })
	models := goldenModels(t)
	for _, name := range slices.Sorted(maps.Keys(models)) {
		m := models[name]
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "nftables.nft")
			if err := os.WriteFile(path, m.AppendText(nil), 0o644); err != nil {
				t.Fatal(err)
			}
			a.nft(t, "", "-f", path)
			rs := Encode(m)
			if err := rs.Replace(c); err != nil {
				t.Fatalf("Replace: %v", err)
			}
			if err := c.Flush(); err != nil {
				t.Fatalf("Flush: %v", err)
			}
			if _, err := ca.Cleanup(); err != nil {
				t.Fatal(err)
			}
			if _, err := ca.Apply(m); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if _, err := da.Cleanup(); err != nil {
				t.Fatal(err)
			}
			if _, err := encodeInParts(func() (*Changes, error) { return da.Apply(m) }); err != nil {
				t.Fatalf("Apply in parts: %v", err)
			}
			for _, tb := range rs.Tables {
				fam := familyLabel(tb.Family)
				want := nftcNormalize(a.nft(t, "", "list", "table", fam, tb.Name))
				got := nftcNormalize(b.nft(t, "", "list", "table", fam, tb.Name))
				if want != got {
					t.Errorf("nft list table %s %s differs (--- nft -f, +++ Encode + Replace):\n%s", fam, tb.Name, nftcUnifiedDiff(t, want, got))
				}
				if got := nftcNormalize(cns.nft(t, "", "list", "table", fam, tb.Name)); want != got {
					t.Errorf("nft list table %s %s differs (--- nft -f, +++ Apply of the model):\n%s", fam, tb.Name, nftcUnifiedDiff(t, want, got))
				}
				if got := nftcNormalize(dns.nft(t, "", "list", "table", fam, tb.Name)); want != got {
					t.Errorf("nft list table %s %s differs (--- nft -f, +++ Apply of the model in parts):\n%s", fam, tb.Name, nftcUnifiedDiff(t, want, got))
				}
				nftcCheckTable(t, rc, d, tb)
			}
			// What the kernel holds after nft -f of the text, and after
			// the Applier's install, read back, is the model.
			for _, mt := range m.Tables {
				checkDecodeTable(t, mt, kernelReadBack(t, ka, mt))
				checkDecodeTable(t, mt, kernelReadBack(t, ca.k, mt))
			}
		})
	}
}
