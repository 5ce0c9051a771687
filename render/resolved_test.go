package render

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestResolvedGolden(t *testing.T) {
	p := textFixturePlan()
	if got := Resolved(p); got != nil {
		t.Fatalf("a plan without dnsAddress: %d files, want none", len(got))
	}
	p.Cluster.DNSAddress = netip.MustParseAddr("169.254.20.10")
	files := Resolved(p)
	for _, name := range []string{"netspec0.netdev", "netspec0.network", "resolvectl.sh"} {
		b, ok := files["resolved/"+name]
		if !ok {
			t.Fatalf("no resolved/%s in %d files", name, len(files))
		}
		compareTextGolden(t, "resolved/"+name, b)
	}
	if len(files) != 3 {
		t.Errorf("%d files, want 3", len(files))
	}
	p.Cluster.DNSAddress = netip.MustParseAddr("fd00::53")
	if got := string(Resolved(p)["resolved/netspec0.network"]); !strings.Contains(got, "\nAddress=fd00::53/128\nDNS=fd00::53\n") {
		t.Errorf("IPv6 address: netspec0.network is\n%s", got)
	}
}

// TestResolvectlScript runs resolvectl.sh with a resolvectl that records
// its arguments, one line per call and a tab between arguments: the shell
// quoting gives resolvectl exactly the link, address and routing domains.
func TestResolvectlScript(t *testing.T) {
	p := textFixturePlan()
	p.Cluster.DNSAddress = netip.MustParseAddr("169.254.20.10")
	dir := t.TempDir()
	script := filepath.Join(dir, "resolvectl.sh")
	if err := os.WriteFile(script, Resolved(p)["resolved/resolvectl.sh"], 0o644); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "calls")
	fake := "#!/bin/sh\nprintf '%s' \"$1\" >>\"$LOG\"; shift\nfor a in \"$@\"; do printf '\\t%s' \"$a\" >>\"$LOG\"; done\necho >>\"$LOG\"\n"
	if err := os.WriteFile(filepath.Join(dir, "resolvectl"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", script)
	cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"), "LOG="+log)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sh resolvectl.sh: %v\n%s", err, out)
	}
	got, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var routes []string
	for _, z := range p.DNS.Zones {
		routes = append(routes, "~"+strings.TrimSuffix(z.Name, "."))
	}
	want := "dns\tnetspec0\t169.254.20.10\n" +
		"domain\tnetspec0\t" + strings.Join(routes, "\t") + "\n" +
		"default-route\tnetspec0\tfalse\n"
	if string(got) != want {
		t.Errorf("resolvectl calls:\n%s\nwant\n%s", got, want)
	}
	if !slices.Contains(routes, "~cluster.local") {
		t.Errorf("the fixture's zones %q lack cluster.local", routes)
	}
}
