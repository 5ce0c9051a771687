package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"netspec.dev/netspec/render"
)

// TestDeployReadmeDNS keeps deploy/README.md's DNS recipes true: every
// file of /tmp/netspec-dns it installs is one netspec render writes (run
// here on examples/kitchen-sink, whose Cluster has the dnsAddress the
// README shows), and deploy/netspec-resolved.service runs the script
// where the README installs it, once the link the recipes name exists.
func TestDeployReadmeDNS(t *testing.T) {
	readme, err := os.ReadFile("../../deploy/README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"render", "--no-cache", "../../examples/kitchen-sink", "--node", "node-1", "--out", out}, &env{stdout: &stdout, stderr: &stderr}); code != exitOK {
		t.Fatalf("render kitchen-sink: exit %d: %s", code, stderr.String())
	}
	paths := regexp.MustCompile(`/tmp/netspec-dns/([A-Za-z0-9_./-]*[A-Za-z0-9_])`).FindAllStringSubmatch(text, -1)
	if len(paths) < 4 {
		t.Fatalf("deploy/README.md names %d files of /tmp/netspec-dns, want the recipes'", len(paths))
	}
	for _, m := range paths {
		if _, err := os.Stat(filepath.Join(out, m[1])); err != nil {
			t.Errorf("deploy/README.md uses /tmp/netspec-dns/%s, which netspec render does not write: %v", m[1], err)
		}
	}

	cluster, err := os.ReadFile("../../examples/kitchen-sink/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const addr = "dnsAddress: 169.254.20.10"
	if !strings.Contains(text, "  "+addr+"\n") || !strings.Contains(string(cluster), "  "+addr+"\n") {
		t.Errorf("deploy/README.md and examples/kitchen-sink/cluster.yaml should both set %q", addr)
	}
	conf, err := os.ReadFile(filepath.Join(out, "resolv", "shop.conf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"search shop.svc.cluster.local svc.cluster.local cluster.local", "nameserver 169.254.20.10", "options ndots:5"} {
		if !strings.Contains(string(conf), line+"\n") {
			t.Errorf("resolv/shop.conf lacks %q:\n%s", line, conf)
		}
		if i := strings.Index(line, " "); !strings.Contains(text, "`"+line[:i]) {
			t.Errorf("deploy/README.md does not show the %s line of a pod's resolv.conf", line[:i])
		}
	}

	unit, err := os.ReadFile("../../deploy/netspec-resolved.service")
	if err != nil {
		t.Fatal(err)
	}
	const script = "/etc/netspec/resolvectl.sh"
	for _, want := range []string{"/sys/class/net/" + render.DNSLink + " ]", "exec /bin/sh " + script, "ConditionPathExists=" + script, "PartOf=netspec.service", "WantedBy=netspec.service"} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("deploy/netspec-resolved.service lacks %q", want)
		}
	}
	if !strings.Contains(text, "resolved/resolvectl.sh "+script+"\n") {
		t.Errorf("deploy/README.md does not install resolvectl.sh as %s", script)
	}
	for _, flag := range []string{"--dns-link " + render.DNSLink} {
		if !strings.Contains(text, flag) {
			t.Errorf("deploy/README.md does not use %s", flag)
		}
	}
	if strings.Contains(text, "127.0.0.53:53") {
		t.Error("deploy/README.md suggests listening on 127.0.0.53:53, systemd-resolved's own stub")
	}
}
