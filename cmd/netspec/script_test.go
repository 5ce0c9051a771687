package main

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
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
	})
}
