package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGoldenZonesLoadInBIND checks every golden zone file with BIND's
// named-checkzone: the zones are meant to be served by any standard
// authoritative server. CI installs bind9-utils.
func TestGoldenZonesLoadInBIND(t *testing.T) {
	bin, err := exec.LookPath("named-checkzone")
	if err != nil {
		t.Skip("SKIPPED: named-checkzone not found (Debian package bind9-utils); the golden zones are not checked against BIND")
	}
	zones, err := filepath.Glob("../../golden/*/*/dns/*.zone")
	if err != nil {
		t.Fatal(err)
	}
	if len(zones) == 0 {
		t.Fatal("no golden zone files found")
	}
	for _, z := range zones {
		name := strings.TrimSuffix(filepath.Base(z), ".zone")
		out, err := exec.Command(bin, "-k", "fail", "-n", "fail", name, z).CombinedOutput()
		if err != nil {
			t.Errorf("%s does not load in BIND: %v\n%s", z, err, out)
		}
	}
}
