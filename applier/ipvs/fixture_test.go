package ipvs

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"netspec.dev/netspec/render"
	"netspec.dev/netspec/render/ipvsmodel"
)

// fixture builds the table a test writes in the form of ipvs.txt, which
// reads best: -A and -a lines exactly as ipvsmodel.Table.AppendText prints
// them, in any order. It is for the tests' own tables only (the applier
// takes models, and reads no text): a line it does not know fails the
// test, and the table must print back the fixture's lines.
func fixture(t testing.TB, text string) *ipvsmodel.Table {
	t.Helper()
	protos := map[string]ipvsmodel.Protocol{"-t": ipvsmodel.TCP, "-u": ipvsmodel.UDP, "--sctp-service": ipvsmodel.SCTP}
	forwards := map[string]ipvsmodel.Forward{"-m": ipvsmodel.Masquerade, "-i": ipvsmodel.Tunnel, "-g": ipvsmodel.DirectRoute}
	number := func(s string) int {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("fixture: %q is no number", s)
		}
		return n
	}
	tb := &ipvsmodel.Table{}
	index := map[ipvsmodel.Key]int{}
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		proto, ok := protos[f[1]]
		if len(f) < 5 || !ok {
			t.Fatalf("fixture: line %q", line)
		}
		ap := netip.MustParseAddrPort(f[2])
		key := ipvsmodel.Key{Protocol: proto, Addr: ap.Addr(), Port: ap.Port()}
		switch {
		case f[0] == "-A" && f[3] == "-s" && (len(f) == 5 || len(f) == 7 && f[5] == "-p"):
			vs := ipvsmodel.VirtualServer{Key: key, Scheduler: f[4]}
			if len(f) == 7 {
				vs.Persistence = uint32(number(f[6]))
			}
			index[key] = len(tb.Services)
			tb.Services = append(tb.Services, vs)
		case f[0] == "-a" && len(f) == 8 && f[3] == "-r" && f[6] == "-w":
			i, ok := index[key]
			fwd, fok := forwards[f[5]]
			if !ok || !fok {
				t.Fatalf("fixture: line %q: no virtual server above, or an unknown forwarding method", line)
			}
			r := netip.MustParseAddrPort(f[4])
			tb.Services[i].Reals = append(tb.Services[i].Reals, ipvsmodel.RealServer{Addr: r.Addr(), Port: r.Port(), Forward: fwd, Weight: number(f[7])})
		default:
			t.Fatalf("fixture: line %q", line)
		}
	}
	tb.Sort()
	if got, want := sortedLines(string(tb.AppendText(nil))), sortedLines(text); !slices.Equal(got, want) {
		t.Fatalf("fixture: the table prints\n%s\nnot the fixture's lines\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	return tb
}

// goldenTable returns a golden ipvs.txt and the table render builds from
// the golden plan.json beside it, with the default scheduler, as the
// golden test renders it.
func goldenTable(t testing.TB, path string) (string, *ipvsmodel.Table) {
	t.Helper()
	golden, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(filepath.Dir(path), "plan.json"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := render.ParsePlanJSON(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return string(golden), render.IPVSTable(p, "")
}

// sortedLines returns the lines of text but empty ones, sorted.
func sortedLines(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out
}

// applyAll makes the kernel hold want as the applier.Node does: Apply,
// then Prune, their changes merged (Apply's alone when it fails).
func applyAll(a *Applier, want *ipvsmodel.Table) (*Changes, error) {
	ch, err := a.Apply(want)
	if err != nil {
		return ch, err
	}
	pruned, err := a.Prune(want)
	ch.Merge(pruned)
	return ch, err
}
