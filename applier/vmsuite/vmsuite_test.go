package vmsuite

import (
	"cmp"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"netspec.dev/netspec/internal/testnet"
	"netspec.dev/netspec/internal/vmtest"
)

// vms is how many VMs share the suites: two at a time, one per core of
// the 2-core machines the test command must fit. A boot costs some 3-5 s
// of host CPU, and the first run of a test binary in a VM some 2 s more:
// two VMs that run several suites each cost less than one VM per suite.
const vms = 2

// kubeProxyShards is how many suites share TestKubeProxyFlows' IPVS
// replay, the longest (some 90 s of a CPU under emulation): with the
// traffic rows (some 35 s) beside them, three shards let the two VMs end
// close together.
const kubeProxyShards = 3

// vmRoot is where the repository's files go in the VMs: the suites run
// in their package's directory under it, as go test runs them.
const vmRoot = "/vmtest/repo"

// suite is one test binary run in a VM: the tests of a package that need
// a kernel the host lacks.
type suite struct {
	name string
	pkg  string // import path below netspec.dev/netspec/
	run  string // -test.run
	env  []string
	// files are the repository's files or directories, relative to its
	// root, that the suite reads; they go to the same place under vmRoot.
	files []string
	// tools are the host programs the suite needs in the VM besides ip
	// and nft.
	tools []string
	// dummy is set for the suites that run in the VM only when the host
	// kernel has no dummy links (with them, they ran on the host).
	dummy bool
	// cpu is about the host CPU the suite used in a VM (seconds, as
	// vmtest logs it; see docs/performance.md), to share the suites
	// between the VMs.
	cpu float64
	// passed are lines the console must show: a binary whose -test.run
	// pattern matches nothing passes too.
	passed []string
	// shard marks a shard of TestKubeProxyFlows: shardsCover checks what
	// the shards ran together.
	shard bool
}

// suites are every suite that runs in the VMs.
func suites() []suite {
	const applierDir = "applier/testdata"
	// The first shard has the most cases (9 of 25) and the costliest.
	shardCPU := [kubeProxyShards]float64{43, 24, 25}
	var ss []suite
	for i := range kubeProxyShards {
		ss = append(ss, suite{
			name:  fmt.Sprintf("kubeproxy-flows-%d-of-%d", i+1, kubeProxyShards),
			pkg:   "applier",
			run:   "^TestKubeProxyFlows$/^ipvs$",
			env:   []string{fmt.Sprintf("NETSPEC_KPFLOWS_SHARD=%d/%d", i, kubeProxyShards)},
			files: []string{applierDir},
			cpu:   shardCPU[i],
			shard: true,
		})
	}
	return append(ss,
		suite{
			name:   "traffic",
			pkg:    "applier",
			run:    "^(TestTraffic|TestInVMSwitchDataplane|TestInVMRemovalAfterPublish)$/^ipvs/",
			files:  []string{applierDir},
			passed: []string{"TestTraffic/ipvs/", "TestInVMSwitchDataplane (", "TestInVMRemovalAfterPublish ("},
			cpu:    35,
		},
		suite{
			name:   "ipvs",
			pkg:    "applier/ipvs",
			run:    "^(TestInVMApply|TestInVMSchedulers|TestInVMRenderEqualsKernel|TestSystemDummy)$",
			files:  []string{"applier/ipvs/testdata/golden=golden"},
			cpu:    1.3,
			passed: []string{"TestInVMApply (", "TestInVMSchedulers (", "TestInVMRenderEqualsKernel (", "TestSystemDummy ("},
		},
		suite{
			name:   "dnslink",
			pkg:    "applier/dnslink",
			run:    "^(TestEnsure|TestServe|TestResolvConf)",
			tools:  []string{"dig", "getent", "unshare", "mount"},
			dummy:  true,
			cpu:    2.5,
			passed: []string{"TestEnsure", "TestServe", "TestResolvConf"},
		},
		suite{
			name:   "scripts-ipvs",
			pkg:    "cmd/netspec",
			run:    "^TestScripts$/^ipvs$",
			files:  []string{"cmd/netspec/testdata", "examples"},
			cpu:    6,
			passed: []string{"TestScripts/ipvs ("},
		},
		suite{
			name:   "watch-dns-link",
			pkg:    "cmd/netspec",
			run:    "^(TestWatchDNSLink|TestWatchDNSUpstream)$",
			files:  []string{"examples"},
			tools:  []string{"getent", "unshare", "mount"},
			dummy:  true,
			cpu:    6.5,
			passed: []string{"TestWatchDNSLink (", "TestWatchDNSUpstream ("},
		},
	)
}

// TestIPVS runs, in vms VMs side by side, the tests that need IPVS or
// dummy links, which the host kernel lacks: package applier's IPVS suites
// (TestKubeProxyFlows/ipvs in kubeProxyShards shards, each case in
// exactly one of them, and the IPVS rows of TestTraffic with the data
// plane switch tests), package applier/ipvs's kernel tests, and the IPVS
// scripts of cmd/netspec; and, when the host kernel has no dummy links,
// the DNS link tests of applier/dnslink and cmd/netspec. Each package's
// test binary is built once; each VM runs its share of the suites one
// after another (vmtest.Options.Suites), and each suite must pass and
// show that its tests ran.
func TestIPVS(t *testing.T) {
	if vmtest.InVM() {
		t.Skip("in the VM already")
	}
	testnet.Require(t, "nft") // ip and nft go into the VMs
	env := vmtest.Require(t)

	var run []suite
	hostDummy := hasDummy(t)
	for _, s := range suites() {
		if why := unrunnable(s, hostDummy); why != "" {
			t.Run(s.name, func(t *testing.T) { t.Skip(why) })
			continue
		}
		run = append(run, s)
	}
	bins := map[string]string{}
	for _, s := range run {
		if bins[s.pkg] == "" {
			bins[s.pkg] = vmtest.BuildTestBinary(t, "netspec.dev/netspec/"+s.pkg)
		}
	}

	var mu sync.Mutex
	var shardConsoles []string
	t.Cleanup(func() { // after the VMs
		if t.Failed() {
			return
		}
		if err := shardsCover(shardConsoles, kubeProxyShards); err != nil {
			t.Error(err)
		}
	})
	for i, share := range shareOut(run, vms) {
		t.Run(fmt.Sprintf("vm-%d", i+1), func(t *testing.T) {
			t.Parallel()
			results := env.RunSuites(t, vmOptions(share, bins))
			for j, r := range results {
				s := share[j]
				t.Run(s.name, func(t *testing.T) {
					r.Check(t)
					for _, pass := range s.passed {
						if !strings.Contains(r.Console, "--- PASS: "+pass) {
							t.Errorf("the suite's console shows no %q:\n%s", "--- PASS: "+pass, r.Console)
						}
					}
					if s.shard {
						mu.Lock()
						shardConsoles = append(shardConsoles, r.Console)
						mu.Unlock()
					}
				})
			}
		})
	}
}

// unrunnable says why suite s does not run in a VM here, or "".
func unrunnable(s suite, hostDummy bool) string {
	if s.dummy && hostDummy {
		return "the host kernel has dummy links: the tests of " + s.pkg + " ran on the host"
	}
	for _, tool := range s.tools {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Sprintf("SKIPPED: suite %s needs %s in the VM: %v (apt-get install bind9-dnsutils util-linux)", s.name, tool, err)
		}
	}
	return ""
}

// hasDummy tells whether the host kernel makes dummy links, trying in a
// namespace of its own.
func hasDummy(t *testing.T) bool {
	t.Helper()
	ns := testnet.New(t, "vmsuite").NS("probe")
	_, err := ns.Run("ip", "link", "add", "probe0", "type", "dummy")
	return err == nil
}

// shareOut deals the suites out to n VMs, the costliest first, each to
// the VM with the least CPU so far (ties to the first), so that the VMs
// end close together; a VM keeps its suites in the order dealt.
func shareOut(ss []suite, n int) [][]suite {
	ss = slices.Clone(ss)
	slices.SortStableFunc(ss, func(a, b suite) int { return cmp.Compare(b.cpu, a.cpu) })
	shares := make([][]suite, n)
	load := make([]float64, n)
	for _, s := range ss {
		i := slices.Index(load, slices.Min(load))
		shares[i] = append(shares[i], s)
		load[i] += s.cpu
	}
	return slices.DeleteFunc(shares, func(s []suite) bool { return len(s) == 0 })
}

// vmOptions are the options of a VM that runs share, with the test
// binaries bins (by package).
func vmOptions(share []suite, bins map[string]string) vmtest.Options {
	o := vmtest.Options{
		HostBinaries: []string{"/usr/sbin/ip", "/usr/sbin/nft"},
		Files:        map[string]string{},
		// Test binaries of some 30 MB each live in the initramfs.
		Memory: 1024,
		// The sum of the suites, on a busy machine, within go test's
		// 10-minute timeout.
		Timeout: 9 * time.Minute,
	}
	for _, s := range share {
		o.Suites = append(o.Suites, vmtest.Suite{
			Name:   s.name,
			Binary: bins[s.pkg],
			Args:   []string{"-test.run", s.run, "-test.v"},
			Env:    s.env,
			Dir:    vmRoot + "/" + s.pkg,
		})
		for _, f := range s.files {
			vm, host, ok := strings.Cut(f, "=")
			if !ok {
				host = vm
			}
			o.Files[vmRoot+"/"+vm] = "../../" + host
		}
		for _, tool := range s.tools {
			if !slices.Contains(o.HostBinaries, tool) {
				o.HostBinaries = append(o.HostBinaries, tool)
			}
		}
	}
	return o
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

// TestShareOut: every suite goes to exactly one VM, the costliest first,
// and the VMs' loads end close together.
func TestShareOut(t *testing.T) {
	ss := []suite{{name: "a", cpu: 70}, {name: "b", cpu: 40}, {name: "c", cpu: 40}, {name: "d", cpu: 40}, {name: "e", cpu: 8}, {name: "f", cpu: 9}, {name: "g", cpu: 4}}
	got := shareOut(ss, 2)
	var names [][]string
	for _, share := range got {
		var n []string
		for _, s := range share {
			n = append(n, s.name)
		}
		names = append(names, n)
	}
	want := [][]string{{"a", "d"}, {"b", "c", "f", "e", "g"}}
	if !slices.EqualFunc(names, want, slices.Equal) {
		t.Errorf("shareOut = %q, want %q", names, want)
	}
	if got := shareOut(ss[:1], 2); len(got) != 1 || len(got[0]) != 1 {
		t.Errorf("shareOut of one suite over 2 VMs = %d VMs, want 1 with it", len(got))
	}
}
