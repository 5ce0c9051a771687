package nft

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"netspec.dev/netspec/applier/nft/encoding"
	"netspec.dev/netspec/render/nftmodel"
)

// TestDecodeEncoded: for every model render builds from a golden plan and
// every rule form (goldenModels), each rule and each set's elements,
// encoded and decoded again, are the model's: decode(encode(m)) = m, in
// the model's one comparison (rules print alike, elements are equal by
// value), up to what the kernel does not keep (nftmodel.Rule.Canonical).
func TestDecodeEncoded(t *testing.T) {
	models := goldenModels(t)
	for _, name := range slices.Sorted(maps.Keys(models)) {
		t.Run(name, func(t *testing.T) {
			for _, mt := range models[name].Tables {
				checkDecodeTable(t, mt, encodedReadBack(mt))
			}
		})
	}
}

// readBack is a table as the kernel gives it back: each chain's rules as
// expressions with their anonymous set's elements, each named set's
// netlink elements.
type readBack struct {
	rules map[string][]readRule
	elems map[string][]nftables.SetElement
}

type readRule struct {
	exprs []expr.Any
	anon  []nftables.SetElement
}

// encodedReadBack is the read-back of mt's encoding itself.
func encodedReadBack(mt *nftmodel.Table) readBack {
	f := mt.Family
	rb := readBack{rules: map[string][]readRule{}, elems: map[string][]nftables.SetElement{}}
	enc := encoding.NewEncoder(f)
	for _, c := range mt.Chains() {
		for _, r := range c.Rules {
			ex, anon := enc.Encode(r)
			rr := readRule{exprs: ex}
			if anon != nil {
				rr.anon = anon.Elements
			}
			rb.rules[c.Name] = append(rb.rules[c.Name], rr)
		}
	}
	for _, s := range mt.Sets() {
		rb.elems[s.Name] = slices.Concat(encoding.SetElements(f, s)...)
	}
	return rb
}

// checkDecodeTable decodes rb with the declarations of mt and compares
// the result with mt.
func checkDecodeTable(t *testing.T, mt *nftmodel.Table, rb readBack) {
	t.Helper()
	f := mt.Family
	for _, c := range mt.Chains() {
		got := rb.rules[c.Name]
		if len(got) != len(c.Rules) {
			t.Errorf("%s chain %s: %d rules read back, want %d", f.Keyword(), c.Name, len(got), len(c.Rules))
			continue
		}
		for i, r := range c.Rules {
			dr, err := encoding.DecodeRule(f, got[i].exprs, got[i].anon)
			if err != nil {
				t.Errorf("%s chain %s rule %d %q: %v", f.Keyword(), c.Name, i+1, r.Text(f), err)
				continue
			}
			if want, got := r.Canonical().Text(f), dr.Text(f); got != want {
				t.Errorf("%s chain %s rule %d decodes to\n\t%s\nwant\n\t%s", f.Keyword(), c.Name, i+1, got, want)
			}
		}
	}
	for _, s := range mt.Sets() {
		shell := *s
		if err := encoding.DecodeElements(f, &shell, rb.elems[s.Name], decodeVerdict); err != nil {
			t.Errorf("%s set %s: %v", f.Keyword(), s.Name, err)
			continue
		}
		added, removed := nftmodel.DiffElements(s, &shell)
		eAdded, eRemoved := nftmodel.DiffEndpoints(s, &shell)
		if n := len(added) + len(removed) + len(eAdded) + len(eRemoved); n > 0 {
			t.Errorf("%s set %s: decoded elements differ: %d added, %d removed; endpoints: %d added, %d removed",
				f.Keyword(), s.Name, len(added), len(removed), len(eAdded), len(eRemoved))
		}
	}
}

// kernelReadBack reads mt's table back from k: every chain's rules with
// the elements of their anonymous sets, every named set's elements.
func kernelReadBack(t *testing.T, k Kernel, mt *nftmodel.Table) readBack {
	t.Helper()
	fam := encoding.TableFamily(mt.Family)
	rules, err := k.Rules(fam, mt.Name, "")
	if err != nil {
		t.Fatalf("read rules: %v", err)
	}
	rb := readBack{rules: map[string][]readRule{}, elems: map[string][]nftables.SetElement{}}
	for chain, rs := range rules {
		for _, r := range rs {
			rr := readRule{exprs: r.Exprs}
			for _, x := range r.Exprs {
				if l, ok := x.(*expr.Lookup); ok && len(l.SetName) > 5 && l.SetName[:5] == "__set" {
					if rr.anon, err = k.Elements(fam, mt.Name, l.SetName); err != nil {
						t.Fatalf("read anonymous set %s of chain %s: %v", l.SetName, chain, err)
					}
				}
			}
			rb.rules[chain] = append(rb.rules[chain], rr)
		}
	}
	for _, s := range mt.Sets() {
		if rb.elems[s.Name], err = k.Elements(fam, mt.Name, s.Name); err != nil {
			t.Fatalf("read set %s: %v", s.Name, err)
		}
	}
	return rb
}

// TestDecodeForeign: rules netspec does not write do not decode.
func TestDecodeForeign(t *testing.T) {
	tests := []struct {
		name  string
		exprs []expr.Any
	}{
		{name: "counter", exprs: []expr.Any{&expr.Counter{}}},
		{name: "log", exprs: []expr.Any{&expr.Log{}, &expr.Verdict{Kind: expr.VerdictAccept}}},
		{name: "iifname", exprs: []expr.Any{&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte("eth0\x00")}}},
		{name: "mask not a prefix", exprs: []expr.Any{
			&expr.Payload{Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4, DestRegister: 1},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: []byte{0xff, 0, 0xff, 0}, Xor: []byte{0, 0, 0, 0}},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{10, 0, 1, 0}},
		}},
	}
	for _, tt := range tests {
		if r, err := encoding.DecodeRule(nftmodel.IPv4, tt.exprs, nil); !errors.Is(err, encoding.ErrForeign) {
			t.Errorf("%s: DecodeRule = %q, %v; want ErrForeign", tt.name, r.Text(nftmodel.IPv4), err)
		}
	}
}

// TestFormsHaveEveryStatement: modelForms, which the encoding and the
// decoding are proven on, has every statement of the model: a statement
// added to render/nftmodel (a type with an appendText method) fails this
// test until a form uses it.
func TestFormsHaveEveryStatement(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join("..", "..", "render", "nftmodel", "rule.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var stmts []string
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Name.Name != "appendText" || fd.Recv == nil {
			continue
		}
		recv := fd.Recv.List[0].Type
		if st, ok := recv.(*ast.StarExpr); ok {
			recv = st.X
		}
		if id, ok := recv.(*ast.Ident); ok && id.Name != "Concat" {
			stmts = append(stmts, id.Name)
		}
	}
	if len(stmts) < 15 {
		t.Fatalf("found only %d statement types in rule.go: %v", len(stmts), stmts)
	}
	seen := map[string]bool{}
	for _, tb := range modelForms().Tables {
		for _, c := range tb.Chains() {
			for _, r := range c.Rules {
				for _, s := range r {
					seen[reflect.TypeOf(s).Name()] = true
				}
			}
		}
	}
	for _, name := range stmts {
		if !seen[name] {
			t.Errorf("no rule of modelForms has a %s statement", name)
		}
	}
}

// TestDecodeCanonical: address matches of the shapes the golden rulesets
// lack, encoded and decoded, read back as nftmodel's Canonical says the
// kernel keeps them, which is what the sync compares them by.
func TestDecodeCanonical(t *testing.T) {
	match := func(braces bool, ps ...string) nftmodel.Rule {
		return nftmodel.Rule{nftmodel.AddrMatch{Field: nftmodel.SAddr, Neq: true, Prefixes: prefixes(ps...), Braces: braces}, nftmodel.Verdict{Kind: nftmodel.Drop}}
	}
	for _, r := range []nftmodel.Rule{
		match(true, "10.0.0.0/8"),
		match(true, "10.0.0.3/32", "10.0.0.1/32"),
		match(false, "10.0.1.0/24", "10.0.0.0/24", "10.0.0.7/32", "192.168.0.0/16"),
		match(false, "10.0.0.128/25", "10.0.0.0/25"),
		match(false, "10.0.0.1/32", "10.0.0.2/31"),
	} {
		ex, anon := encoding.NewEncoder(nftmodel.IPv4).Encode(r)
		var elems []nftables.SetElement
		if anon != nil {
			elems = anon.Elements
		}
		got, err := encoding.DecodeRule(nftmodel.IPv4, ex, elems)
		if err != nil {
			t.Errorf("%s: %v", r.Text(nftmodel.IPv4), err)
			continue
		}
		if want := r.Canonical().Text(nftmodel.IPv4); got.Text(nftmodel.IPv4) != want {
			t.Errorf("%s decodes to %s, want %s", r.Text(nftmodel.IPv4), got.Text(nftmodel.IPv4), want)
		}
	}
}
