package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGoldenRulesetsLoadInKernel checks every golden nftables.nft with
// `nft -c -f` in a network namespace of its own (`unshare -n`, gone when
// the command exits), so the host's rules are never touched.
func TestGoldenRulesetsLoadInKernel(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: checking rulesets against the kernel needs root")
	}
	nft, err := exec.LookPath("nft")
	if err != nil {
		t.Skip("SKIPPED: nft not found (Debian package nftables)")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("SKIPPED: unshare not found (Debian package util-linux)")
	}
	files, err := filepath.Glob("../../golden/*/*/nftables.nft")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no golden rulesets found")
	}
	for _, f := range files {
		// Check, then load for real: both in the same throwaway namespace.
		cmd := exec.Command(unshare, "-n", "sh", "-c", `"$0" -c -f "$1" && "$0" -f "$1" && "$0" list table ip netspec >/dev/null`, nft, f)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s is not accepted by the kernel: %v\n%s", f, err, out)
		}
	}
}
