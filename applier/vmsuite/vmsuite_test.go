package vmsuite

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"netspec.dev/netspec/internal/testnet"
	"netspec.dev/netspec/internal/vmtest"
)

// kubeProxyShards is how many VMs share TestKubeProxyFlows' IPVS replay,
// the longest suite (some 160 s of a CPU under emulation). With the
// traffic VM (some 65 s) and two VMs at a time, as on the 2-core machines
// the test command must fit, three shards end close together.
const kubeProxyShards = 3

// TestIPVS builds package applier's tests once and runs its IPVS suites in
// VMs side by side (as many at a time as go test's -parallel allows, the
// number of CPUs by default): TestKubeProxyFlows/ipvs in kubeProxyShards
// shards, each case in exactly one of them, and the IPVS rows of
// TestTraffic with the data plane switch tests. Under qemu without KVM
// each takes one to a few minutes.
func TestIPVS(t *testing.T) {
	if vmtest.InVM() {
		t.Skip("in the VM already")
	}
	testnet.Require(t, "nft") // ip and nft go into the VMs
	env := vmtest.Require(t)
	bin := vmtest.BuildTestBinary(t, "netspec.dev/netspec/applier")
	inVM := func(t *testing.T, pattern string, vars ...string) string {
		return env.Run(t, vmtest.Options{
			Binary:       bin,
			Args:         []string{"-test.run", pattern, "-test.v"},
			Env:          vars,
			HostBinaries: []string{"/usr/sbin/ip", "/usr/sbin/nft"},
			Files:        map[string]string{"/vmtest/testdata": "../testdata"},
			Dir:          "/vmtest",
			Timeout:      10 * time.Minute,
		})
	}

	t.Run("kubeproxy-flows", func(t *testing.T) {
		t.Parallel()
		var mu sync.Mutex
		var consoles []string
		t.Cleanup(func() { // after the shards
			if t.Failed() {
				return
			}
			if err := shardsCover(consoles, kubeProxyShards); err != nil {
				t.Error(err)
			}
		})
		for i := range kubeProxyShards {
			t.Run(fmt.Sprintf("shard-%d-of-%d", i+1, kubeProxyShards), func(t *testing.T) {
				t.Parallel()
				c := inVM(t, "^TestKubeProxyFlows$/^ipvs$", fmt.Sprintf("NETSPEC_KPFLOWS_SHARD=%d/%d", i, kubeProxyShards))
				mu.Lock()
				consoles = append(consoles, c)
				mu.Unlock()
			})
		}
	})
	t.Run("traffic", func(t *testing.T) {
		t.Parallel()
		c := inVM(t, "^(TestTraffic|TestInVMSwitchDataplane|TestInVMRemovalAfterPublish)$/^ipvs/")
		// The pattern must have matched: a binary that ran no test passes too.
		for _, pass := range []string{"TestTraffic/ipvs/", "TestInVMSwitchDataplane (", "TestInVMRemovalAfterPublish ("} {
			if !strings.Contains(c, "--- PASS: "+pass) {
				t.Errorf("the VM's console shows no %q", "--- PASS: "+pass)
			}
		}
	})
}

// shardLine is what TestKubeProxyFlows logs in a shard.
var shardLine = regexp.MustCompile(`NETSPEC_KPFLOWS_SHARD=(\d+)/(\d+): (\d+) of the (\d+) cases`)

// shardsCover checks that the consoles of the shards together ran every
// case of TestKubeProxyFlows/ipvs: each shard passed and picked some
// cases, and the counts add up to the total, so that no case is lost
// between shards.
func shardsCover(consoles []string, shards int) error {
	if len(consoles) != shards {
		return fmt.Errorf("%d consoles of %d shards", len(consoles), shards)
	}
	seen := map[int]bool{}
	sum, total := 0, -1
	for _, c := range consoles {
		m := shardLine.FindStringSubmatch(c)
		if m == nil || !strings.Contains(c, "--- PASS: TestKubeProxyFlows/ipvs (") {
			return fmt.Errorf("a shard's console lacks %q or a passed TestKubeProxyFlows/ipvs:\n%s", shardLine, c)
		}
		shard, _ := strconv.Atoi(m[1])
		n, _ := strconv.Atoi(m[2])
		picked, _ := strconv.Atoi(m[3])
		all, _ := strconv.Atoi(m[4])
		if n != shards || seen[shard] || picked == 0 || (total >= 0 && all != total) {
			return fmt.Errorf("shard line %q: want a shard of %d, each once, picking some of the same total", m[0], shards)
		}
		seen[shard], sum, total = true, sum+picked, all
	}
	if sum != total {
		return fmt.Errorf("the shards ran %d cases together, TestKubeProxyFlows has %d", sum, total)
	}
	return nil
}

// TestShardsCover: the check of the shards' consoles fails when a shard
// is missing, repeated, empty or failed, or the counts do not add up.
func TestShardsCover(t *testing.T) {
	const pass = "    --- PASS: TestKubeProxyFlows/ipvs (1.00s)\n"
	line := func(i, n, picked, all int) string {
		return fmt.Sprintf("    kubeproxy_flows_test.go:1: NETSPEC_KPFLOWS_SHARD=%d/%d: %d of the %d cases\n", i, n, picked, all) + pass
	}
	for _, tc := range []struct {
		name     string
		consoles []string
		wantErr  bool
	}{
		{name: "all cases", consoles: []string{line(0, 2, 13, 25), line(1, 2, 12, 25)}},
		{name: "a case lost", consoles: []string{line(0, 2, 13, 25), line(1, 2, 11, 25)}, wantErr: true},
		{name: "a shard twice", consoles: []string{line(0, 2, 13, 25), line(0, 2, 12, 25)}, wantErr: true},
		{name: "a shard missing", consoles: []string{line(0, 2, 25, 25)}, wantErr: true},
		{name: "an empty shard", consoles: []string{line(0, 2, 25, 25), line(1, 2, 0, 25)}, wantErr: true},
		{name: "other totals", consoles: []string{line(0, 2, 13, 25), line(1, 2, 13, 26)}, wantErr: true},
		{name: "no shard line", consoles: []string{pass, line(1, 2, 12, 25)}, wantErr: true},
		{name: "not passed", consoles: []string{strings.TrimSuffix(line(0, 2, 13, 25), pass), line(1, 2, 12, 25)}, wantErr: true},
	} {
		if err := shardsCover(tc.consoles, 2); (err != nil) != tc.wantErr {
			t.Errorf("%s: shardsCover = %v, want error %v", tc.name, err, tc.wantErr)
		}
	}
}
