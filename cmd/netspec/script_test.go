package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/nftables"
	"github.com/rogpeppe/go-internal/testscript"

	"netspec.dev/netspec/applier"
	"netspec.dev/netspec/applier/nft"
	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/internal/testnet"
	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/schema"
)

// update rewrites golden files (expected output in txtar scripts and
// golden/) instead of comparing with them: go test ./... -update
var update = flag.Bool("update", false, "rewrite golden files and the expected output of scripts")

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"netspec": func() { os.Exit(Main()) },
	})
}

// TestScripts runs the CLI sessions in testdata/script/*.txtar: each is a
// user's session with the commands typed and the output expected.
func TestScripts(t *testing.T) {
	testnet.SweepOrphans(t) // the netns command's names are testnet's
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		UpdateScripts:       *update,
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			env.Setenv("REPO", repo)
			// Each script gets its own cache, so that scripts are independent.
			env.Setenv("XDG_CACHE_HOME", filepath.Join(env.WorkDir, ".cache"))
			env.Setenv("HOME", env.WorkDir)
			// The nftables of netspec-fake, for the whole script.
			env.Values[fakeKernelKey{}] = nft.NewFake()
			return nil
		},
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "root":
				return os.Geteuid() == 0, nil
			case "ipvs": // the kernel has IPVS loaded
				_, err := os.Stat("/proc/net/ip_vs")
				return err == nil, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"netns":        cmdNetns,
			"status":       cmdStatus,
			"netspec-fake": cmdNetspecFake,
			"nftfake":      cmdNFTFake,
			"daemon-fake":  cmdDaemonFake,
			"daemon-apply": cmdDaemonApply,
		},
	})
}

// cmdNetns creates a network namespace with a unique name for the script,
// sets $NS to it and deletes it when the script ends, also on failure.
// Scripts that change a kernel do so only inside it:
//
//	netns
//	exec ip netns exec $NS netspec apply ...
func cmdNetns(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: netns")
	}
	name := fmt.Sprintf("netspec-script-%d-%08x", os.Getpid(), rand.Uint32())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		ts.Fatalf("ip netns add %s: %v\n%s", name, err, out)
	}
	ts.Defer(func() {
		if out, err := exec.Command("ip", "netns", "delete", name).CombinedOutput(); err != nil {
			ts.Logf("ip netns delete %s: %v\n%s", name, err, out)
		}
	})
	ts.Setenv("NS", name)
}

// cmdStatus runs a program as exec does and fails unless it exits with
// the status given, which `! exec` cannot tell (1 an error, 2 differences);
// it runs netspec-fake as that command does:
//
//	status 2 netspec diff --detailed-exitcode a b
//	stdout '^\+ service'
func cmdStatus(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: status CODE PROGRAM [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("status: bad CODE %q", args[0])
	}
	got := 0
	if args[1] == "netspec-fake" {
		got = runFake(ts, args[2:])
	} else if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("status: %s: %v", args[1], err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d", args[1], got, want)
	}
}

// fakeKernelKey is the key of the script's nft.Fake in its Values.
type fakeKernelKey struct{}

func fakeKernel(ts *testscript.TestScript) *nft.Fake {
	return ts.Value(fakeKernelKey{}).(*nft.Fake)
}

// cmdNetspecFake runs netspec inside the test, as exec runs it, but with
// the script's nft.Fake for the kernel's nftables: plan, apply and cleanup
// without root, and with a kernel that keeps its state from one command to
// the next. It runs in the test's working directory, not $WORK: give it
// absolute paths.
//
//	netspec-fake apply $REPO/examples/basic --node node-1 --state-dir $WORK/state
func cmdNetspecFake(ts *testscript.TestScript, neg bool, args []string) {
	code := runFake(ts, args)
	switch {
	case code != 0 && !neg:
		ts.Fatalf("netspec exited %d", code)
	case code == 0 && neg:
		ts.Fatalf("netspec succeeded unexpectedly")
	}
}

func runFake(ts *testscript.TestScript, args []string) int {
	return run(args, &env{stdout: ts.Stdout(), stderr: ts.Stderr(), nftables: fakeKernel(ts)})
}

// cmdNFTFake shows or changes the script's nft.Fake, as someone with nft
// in hand would change the kernel behind netspec's back:
//
//	nftfake dump                            # the tables, chains and sets
//	nftfake flush-chain ip services         # a chain's rules deleted
//	nftfake add-chain ip by-hand            # a chain netspec did not make
//	nftfake delete-element ip service-ips 0 # a set's element (by index, in key order)
//	nftfake fail-next                       # the next batch is refused
func cmdNFTFake(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: nftfake dump|flush-chain|add-chain|delete-element|fail-next [ARGS...]")
	}
	f := fakeKernel(ts)
	if args[0] == "dump" {
		fmt.Fprint(ts.Stdout(), f.Dump())
		return
	}
	if args[0] == "fail-next" {
		f.FailNext()
		return
	}
	if len(args) < 3 {
		ts.Fatalf("usage: nftfake %s FAMILY NAME", args[0])
	}
	fam := nftables.TableFamilyIPv4
	switch args[1] {
	case "ip":
	case "ip6":
		fam = nftables.TableFamilyIPv6
	default:
		ts.Fatalf("nftfake: family %q is not ip or ip6", args[1])
	}
	table := &nftables.Table{Family: fam, Name: nft.TableName}
	var queue func(b nft.Batch) error
	switch args[0] {
	case "flush-chain":
		queue = func(b nft.Batch) error { b.FlushChain(&nftables.Chain{Table: table, Name: args[2]}); return nil }
	case "add-chain":
		queue = func(b nft.Batch) error { b.AddChain(&nftables.Chain{Table: table, Name: args[2]}); return nil }
	case "delete-element":
		if len(args) != 4 {
			ts.Fatalf("usage: nftfake delete-element FAMILY SET INDEX")
		}
		i, err := strconv.Atoi(args[3])
		ts.Check(err)
		elems, err := f.Elements(fam, nft.TableName, args[2])
		ts.Check(err)
		if i < 0 || i >= len(elems) {
			ts.Fatalf("nftfake: set %s has %d elements", args[2], len(elems))
		}
		e := elems[i]
		queue = func(b nft.Batch) error {
			return b.SetDeleteElements(&nftables.Set{Table: table, Name: args[2]}, []nftables.SetElement{{Key: e.Key, KeyEnd: e.KeyEnd, IntervalEnd: e.IntervalEnd}})
		}
	default:
		ts.Fatalf("nftfake: unknown operation %q", args[0])
	}
	ts.Check(f.Run(queue))
}

// cmdDaemonFake stands in for a running netspec watch: it serves the
// status in a JSON file (daemon.Status, as GET /status answers) on a unix
// socket until the script ends, for status and explain --live output that
// does not depend on timing:
//
//	daemon-fake state/netspec.sock status.json
func cmdDaemonFake(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: daemon-fake SOCKET STATUS.json")
	}
	data := []byte(ts.ReadFile(args[1]))
	ts.Check(os.MkdirAll(filepath.Dir(ts.MkAbs(args[0])), 0o700))
	ln, err := net.Listen("unix", ts.MkAbs(args[0]))
	ts.Check(err)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(data)
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	ts.Defer(func() { srv.Close() })
}

// cmdDaemonApply does on the script's fake kernel what netspec watch does
// when the readiness probes of the endpoints at the addresses given fail:
// it compiles TREE for NODE with those endpoints not ready (a Service
// whose every endpoint fails keeps them: fail open) and applies that plan
// to the fake and the state dir DIR. The daemon's record of the probes
// (probes.json) is the script's to write. Paths are absolute, as for
// netspec-fake:
//
//	daemon-apply $WORK/tree node-1 $WORK/state 10.244.1.11
func cmdDaemonApply(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 3 {
		ts.Fatalf("usage: daemon-apply TREE NODE DIR [ADDR...]")
	}
	failing := map[netip.Addr]bool{}
	for _, a := range args[3:] {
		ip, err := netip.ParseAddr(a)
		ts.Check(err)
		failing[ip] = true
	}
	l, err := loadTree(&env{stdout: io.Discard, stderr: io.Discard}, args[0], &loadFlags{maxFileSize: schema.DefaultMaxFileSize, noCache: true})
	ts.Check(err)
	if n := l.Diags.Errors(); n > 0 {
		ts.Fatalf("daemon-apply: the tree has %d errors", n)
	}
	st, err := compiler.CompileStagedWith(l.tree.Objects, l.Checked, args[1], compiler.Options{
		Failing:  failing,
		NotReady: func(ip netip.Addr, probes []plan.Probe) bool { return failing[ip] && len(probes) > 0 },
	})
	ts.Check(err)
	n, err := applier.Open(applier.Options{StateDir: args[2], NFTables: fakeKernel(ts)})
	ts.Check(err)
	defer n.Close()
	_, err = n.ApplyStaged(st.Finish(), nil)
	ts.Check(err)
}
