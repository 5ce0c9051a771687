package main

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"netspec.dev/netspec/internal/vmtest"
)

// update rewrites golden files (expected output in txtar scripts and
// golden/) instead of comparing with them: go test ./... -update
var update = flag.Bool("update", false, "rewrite golden files and the expected output of scripts")

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"netspec": func() { os.Exit(Main()) },
	})
}

// TestScriptsIPVS runs the scripts that need a kernel with IPVS
// (ipvs.txtar) in the VM of internal/vmtest.
func TestScriptsIPVS(t *testing.T) {
	if vmtest.InVM() {
		t.Skip("in the VM already")
	}
	vmtest.RunPackage(t, "netspec.dev/netspec/cmd/netspec", vmtest.Options{
		Args:         []string{"-test.run", "^TestScripts$/^ipvs$", "-test.v"},
		HostBinaries: []string{"/usr/sbin/ip", "/usr/sbin/nft"},
		Files: map[string]string{
			"/vmtest/cmd/netspec/testdata": "testdata",
			"/vmtest/examples":             "../../examples",
		},
		Dir: "/vmtest/cmd/netspec",
	})
}

// TestScripts runs the CLI sessions in testdata/script/*.txtar: each is a
// user's session with the commands typed and the output expected.
func TestScripts(t *testing.T) {
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
			"netns":  cmdNetns,
			"status": cmdStatus,
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
// the status given, which `! exec` cannot tell (1 an error, 2 differences):
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
	if err := ts.Exec(args[1], args[2:]...); err != nil {
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
