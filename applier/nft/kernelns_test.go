package nft

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
	"netspec.dev/netspec/applier/nft/encoding"
	"netspec.dev/netspec/internal/testnet"
	"netspec.dev/netspec/render/nftmodel"
)

// Kernel tests change nftables only in network namespaces they create
// (netspec-nftc-ROLE-PID-HEX) and delete when they end, also on failure.

// nftcNeedKernel skips the test, loudly, unless it runs as root with the
// nft and ip commands.
func nftcNeedKernel(t *testing.T) {
	t.Helper()
	testnet.Require(t, "nft")
}

// nftcNS is a network namespace of a test (internal/testnet: a unique
// name, deleted when the test ends, also on failure).
type nftcNS struct{ *testnet.NS }

// nftcNewNS makes a namespace for role.
func nftcNewNS(t *testing.T, role string) *nftcNS {
	t.Helper()
	return &nftcNS{testnet.New(t, "nftc").NS(role)}
}

// nft runs nft in the namespace, with stdin as its input.
func (ns *nftcNS) nft(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns.Name, "nft"}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("nft %s in %s: %v\n%s", strings.Join(args, " "), ns.Name, err, out)
	}
	return string(out)
}

// conn opens a google/nftables connection to the namespace, for reading.
func (ns *nftcNS) conn(t *testing.T) *nftables.Conn {
	t.Helper()
	c, err := nftables.New(nftables.WithNetNSFd(ns.Fd()), nftables.WithSockOptions(nftcBuffers))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// batchConn opens a google/nftables connection to the namespace that
// sends its batches as the Applier does (batch.go), for writing.
func (ns *nftcNS) batchConn(t *testing.T) *nftables.Conn {
	t.Helper()
	s, err := newBatchSender(ns.Fd())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c, err := s.nftConn()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// dumper opens a rule dumper of the namespace.
func (ns *nftcNS) dumper(t *testing.T) *ruleDumper {
	t.Helper()
	d, err := newRuleDumper(ns.Fd())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// nftcBuffers gives the netlink socket 64 MiB buffers. A batch is sent
// in one sendmsg, which fails with EMSGSIZE beyond the send buffer, and
// google/nftables asks the kernel to echo every rule it adds (NLM_F_ECHO):
// some 600 bytes a rule, queued until Flush reads them, so a batch of
// 20,000 rules overflows an 8 MiB receive buffer (ENOBUFS). SO_SNDBUF and
// SO_RCVBUF are capped by net.core.wmem_max and rmem_max (usually
// 208 KiB): as root the FORCE variants pass the cap; the plain ones are
// the fallback.
func nftcBuffers(c *netlink.Conn) error {
	const size = 64 << 20
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = raw.Control(func(fd uintptr) {
		for _, o := range [][2]int{{unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}, {unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}} {
			if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, o[0], size) != nil {
				if e := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, o[1], size); e != nil {
					serr = e
				}
			}
		}
	})
	if err != nil {
		return err
	}
	return serr
}

// nftcName names a ruleset file in subtests: golden/kitchen-sink/node-1.
func nftcName(path string) string {
	path = strings.TrimPrefix(filepath.ToSlash(path), "../../")
	return strings.TrimSuffix(strings.TrimSuffix(path, "/nftables.nft"), ".nft")
}

func nftcCheckTable(t *testing.T, c *nftables.Conn, d *ruleDumper, tb *encodedTable) {
	t.Helper()
	fam := tb.Family
	kt := &nftables.Table{Family: fam, Name: tb.Name}
	id := familyLabel(fam) + " " + tb.Name

	// Sets and maps.
	ksets, err := c.GetSets(kt)
	if err != nil {
		t.Fatalf("%s: GetSets: %v", id, err)
	}
	byName := map[string]*nftables.Set{}
	for _, s := range ksets {
		byName[s.Name] = s
	}
	named := 0
	for _, s := range tb.Sets {
		ks := byName[s.Name]
		if ks == nil {
			t.Errorf("%s: set %s is not in the kernel", id, s.Name)
			continue
		}
		named++
		if why := nftcDeclDiff(&s.Template, ks); why != "" {
			t.Errorf("%s: set %s: %s", id, s.Name, why)
		}
		var want []nftables.SetElement
		for _, e := range s.Elements {
			want = append(want, e.Elems...)
		}
		nftcCheckElems(t, c, d, ks, want, id+": set "+s.Name)
	}
	anon := 0
	for _, s := range ksets {
		if s.Anonymous {
			anon++
		}
	}
	if len(ksets)-anon != named {
		t.Errorf("%s: the kernel has %d named sets, the encoding %d", id, len(ksets)-anon, named)
	}

	// Chains and rules.
	kchains, err := c.ListChainsOfTableFamily(fam)
	if err != nil {
		t.Fatal(err)
	}
	kc := map[string]*nftables.Chain{}
	for _, ch := range kchains {
		if ch.Table != nil && ch.Table.Name == tb.Name {
			kc[ch.Name] = ch
		}
	}
	if len(kc) != len(tb.Chains) {
		t.Errorf("%s: the kernel has %d chains, the encoding %d", id, len(kc), len(tb.Chains))
	}
	krulesOf, err := d.rules(fam, tb.Name, "")
	if err != nil {
		t.Fatalf("%s: dump rules: %v", id, err)
	}
	wantAnon := 0
	for _, ch := range tb.Chains {
		k := kc[ch.Name]
		if k == nil {
			t.Errorf("%s: chain %s is not in the kernel", id, ch.Name)
			continue
		}
		if why := nftcHookDiff(ch.Base, k); why != "" {
			t.Errorf("%s: chain %s: %s", id, ch.Name, why)
		}
		krules := krulesOf[ch.Name]
		if len(krules) != len(ch.Rules) {
			t.Errorf("%s: chain %s: the kernel has %d rules, the encoding %d", id, ch.Name, len(krules), len(ch.Rules))
			continue
		}
		for i, r := range ch.Rules {
			kr := krules[i]
			if kr.Opaque != "" || !bytes.Equal(r.Key(fam), ruleKey(fam, kr.Exprs)) {
				t.Errorf("%s: chain %s: rule %q compiles to\n%s\nbut nft made\n%s", id, ch.Name, r.Text, nftcDump(r.Exprs), nftcDump(kr.Exprs)+kr.Opaque)
				continue
			}
			if r.Anon == nil {
				continue
			}
			wantAnon++
			lk, ok := kr.Exprs[r.Anon.At].(*expr.Lookup)
			if !ok {
				t.Errorf("%s: rule %q: no lookup at %d", id, r.Text, r.Anon.At)
				continue
			}
			ks := byName[lk.SetName]
			if ks == nil || !ks.Anonymous {
				t.Errorf("%s: rule %q: no anonymous set %s", id, r.Text, lk.SetName)
				continue
			}
			if why := nftcDeclDiff(&r.Anon.Template, ks); why != "" {
				t.Errorf("%s: rule %q: anonymous set: %s", id, r.Text, why)
			}
			nftcCheckElems(t, c, d, ks, r.Anon.Elements, fmt.Sprintf("%s: rule %q: anonymous set", id, r.Text))
		}
	}
	if anon != wantAnon {
		t.Errorf("%s: the kernel has %d anonymous sets, the encoding %d", id, anon, wantAnon)
	}
}

// nftcCheckElems compares the elements of a kernel set with want, by
// ElementKey.
// Both ways of reading them must agree: google/nftables' GetSetElements
// and the applier's own dump (ruleDumper.setElements).
func nftcCheckElems(t *testing.T, c *nftables.Conn, d *ruleDumper, ks *nftables.Set, want []nftables.SetElement, what string) {
	t.Helper()
	if ks.Dynamic {
		return
	}
	have, err := c.GetSetElements(ks)
	if err != nil {
		t.Fatalf("%s: GetSetElements: %v", what, err)
	}
	own, err := d.setElements(ks.Table.Family, ks.Table.Name, ks.Name)
	if err != nil {
		t.Fatalf("%s: setElements: %v", what, err)
	}
	keys := func(elems []nftables.SetElement) []string {
		out := make([]string, len(elems))
		for i, e := range elems {
			out[i] = ElementKey(e)
		}
		slices.Sort(out)
		return out
	}
	if w, h := keys(want), keys(have); !slices.Equal(w, h) {
		t.Errorf("%s: elements differ:\nencoding: %q\nkernel: %q", what, w, h)
	}
	if h, o := keys(have), keys(own); !slices.Equal(h, o) {
		t.Errorf("%s: the own dump differs from GetSetElements:\nGetSetElements: %q\nsetElements:    %q", what, h, o)
	}
}

// nftcDeclDiff tells how a kernel set differs from a template.
func nftcDeclDiff(want, have *nftables.Set) string {
	switch {
	case want.IsMap != have.IsMap, want.Interval != have.Interval, want.Dynamic != have.Dynamic,
		want.HasTimeout != have.HasTimeout, want.Timeout != have.Timeout, want.Anonymous != have.Anonymous,
		want.Constant != have.Constant, want.Concatenation != have.Concatenation:
		return fmt.Sprintf("declared %+v, the kernel has %+v", *want, *have)
	case want.Size != 0 && want.Size != have.Size:
		return fmt.Sprintf("size %d, the kernel has %d", want.Size, have.Size)
	case !want.IsMap && (want.KeyType.Bytes != have.KeyType.Bytes || want.KeyType.GetNFTMagic() != have.KeyType.GetNFTMagic()):
		// (For a map, google/nftables v0.3.0 reads the data type over
		// the key type.)
		return fmt.Sprintf("key type %+v, the kernel has %+v", want.KeyType, have.KeyType)
	}
	return ""
}

// nftcHookDiff tells how a kernel chain's hook differs from base.
func nftcHookDiff(base *BaseChain, k *nftables.Chain) string {
	if base == nil {
		if k.Hooknum != nil {
			return "a base chain in the kernel"
		}
		return ""
	}
	if k.Hooknum == nil || k.Priority == nil || k.Policy == nil ||
		*k.Hooknum != *base.Hooknum || *k.Priority != *base.Priority || k.Type != base.Type || *k.Policy != base.Policy {
		return fmt.Sprintf("hook %s %d priority %d policy %d, the kernel has %+v", base.Type, *base.Hooknum, *base.Priority, base.Policy, *k)
	}
	return ""
}

// nftcDump prints expressions one a line.
func nftcDump(exprs []expr.Any) string {
	var b strings.Builder
	for _, e := range exprs {
		v := reflect.ValueOf(e)
		if v.Kind() == reflect.Pointer && !v.IsNil() {
			v = v.Elem()
		}
		fmt.Fprintf(&b, "\t%T %+v\n", e, v.Interface())
	}
	return b.String()
}

func familyLabel(f nftables.TableFamily) string {
	if f == nftables.TableFamilyIPv6 {
		return "ip6"
	}
	return "ip"
}

// TestEncodeForms checks the expressions of a few rules byte for byte,
// without a kernel: the layouts nft 1.0.6 prints with --debug=netlink for
// the rules' text.
func TestEncodeForms(t *testing.T) {
	le := func(v uint32) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }
	if !nftcLittleEndian() {
		t.Skip("SKIPPED: the expected host-order values are written for a little-endian host")
	}
	v4, v6 := nftmodel.IPv4, nftmodel.IPv6
	tests := []struct {
		fam  nftmodel.Family
		rule nftmodel.Rule
		want []expr.Any
	}{
		{fam: v4, rule: nftmodel.Rule{
			nftmodel.AddrMatch{Field: nftmodel.DAddr, Prefixes: []netip.Prefix{netip.MustParsePrefix("10.96.0.50/32")}},
			nftmodel.ProtoMatch{Proto: nftmodel.TCP},
			nftmodel.AddrMatch{Field: nftmodel.SAddr, Neq: true, Prefixes: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}},
			nftmodel.MarkSet{Op: nftmodel.MarkOr, Value: 0x4000},
		}, want: []expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{10, 96, 0, 50}},
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{6}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 2},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{10, 244}},
			&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: le(0xffffbfff), Xor: le(0x4000)},
			&expr.Meta{Key: expr.MetaKeyMARK, Register: 1, SourceRegister: true},
		}},
		{fam: v6, rule: nftmodel.Rule{nftmodel.VMap{Key: nftmodel.KeyDAddrProtoPort, Map: "service-ips"}}, want: []expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 24, Len: 16},
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 2},
			&expr.Payload{DestRegister: 13, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Lookup{SourceRegister: 1, IsDestRegSet: true, SetName: "service-ips"},
		}},
		{fam: v4, rule: nftmodel.Rule{
			nftmodel.NumgenMatch{Mod: 2, Value: 0},
			nftmodel.Update{Set: "a", Key: nftmodel.KeySAddr},
			nftmodel.ProtoMatch{Proto: nftmodel.UDP},
			nftmodel.DNAT{To: netip.MustParseAddrPort("10.244.2.40:53")},
		}, want: []expr.Any{
			&expr.Numgen{Register: 1, Modulus: 2, Type: unix.NFT_NG_RANDOM},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: le(0)},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
			&expr.Dynset{SrcRegKey: 1, SetName: "a", Operation: unix.NFT_DYNSET_OP_UPDATE},
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{17}},
			&expr.Immediate{Register: 1, Data: []byte{10, 244, 2, 40}},
			&expr.Immediate{Register: 2, Data: []byte{0, 53}},
			&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegProtoMin: 2, Specified: true},
		}},
		{fam: v4, rule: nftmodel.Rule{
			nftmodel.CtMatch{Key: nftmodel.CtStatus, Bits: nftmodel.StatusDNAT},
			nftmodel.Lookup{Key: nftmodel.KeySAddrDAddr, Set: "hairpin"},
			nftmodel.Masquerade{FullyRandom: true},
		}, want: []expr.Any{
			&expr.Ct{Register: 1, Key: expr.CtKeySTATUS},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: le(0x20), Xor: le(0)},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: le(0)},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
			&expr.Payload{DestRegister: 9, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
			&expr.Lookup{SourceRegister: 1, SetName: "hairpin"},
			&expr.Masq{FullyRandom: true},
		}},
		{fam: v6, rule: nftmodel.Rule{
			nftmodel.AddrMatch{Field: nftmodel.SAddr, Prefixes: []netip.Prefix{netip.MustParsePrefix("fd00::/20")}},
			nftmodel.Reject{},
		}, want: []expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 8, Len: 16},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 16, Mask: append([]byte{0xff, 0xff, 0xf0}, make([]byte, 13)...), Xor: make([]byte, 16)},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: append([]byte{0xfd}, make([]byte, 15)...)},
			&expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: 4},
		}},
		{fam: v4, rule: nftmodel.Rule{nftmodel.MarkMatch{Mask: 0x4000, Value: 0}, nftmodel.Verdict{Kind: nftmodel.Return}}, want: []expr.Any{
			&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: le(0x4000), Xor: le(0)},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: le(0)},
			&expr.Verdict{Kind: expr.VerdictReturn},
		}},
	}
	for _, tt := range tests {
		got, _ := encoding.NewEncoder(tt.fam).Encode(tt.rule)
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q encodes to\n%s\nwant\n%s", tt.rule.Text(tt.fam), nftcDump(got), nftcDump(tt.want))
		}
	}
}

func nftcLittleEndian() bool { return binary.NativeEndian.Uint16([]byte{1, 0}) == 1 }
