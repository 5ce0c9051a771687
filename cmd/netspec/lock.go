package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/internal/atomicfile"
)

type lockFlags struct {
	loadFlags
}

var lockCommand = &command{
	name:    "lock",
	args:    "TREE",
	summary: "record cluster IP and node port allocations in TREE/netspec.lock",
	help: `Lock validates TREE and writes TREE/netspec.lock, which records the cluster
IPs and node ports of every Service: explicit ones from the specs, and those
netspec derived (a hash of namespace/name into the service CIDR or node port
range). Once recorded, an allocation never moves when other Services are
added or removed, and every node agrees on it without talking to the others.
Entries of deleted Services are removed. Commit the file.

Lock writes nothing when the tree is invalid.

Exit status: 0 written or up to date; 1 any error (an invalid tree, a usage
error such as an unknown flag).

Examples:
  netspec lock examples/basic
  git diff examples/basic/netspec.lock`,
	nargs: 1, want: "one TREE",
	opts: func() options { return &lockFlags{} },
}

func (f *lockFlags) run(e *env, args []string) int {
	root := args[0]
	if st, err := os.Stat(root); root == "-" || err == nil && !st.IsDir() {
		return e.fail("lock", "TREE must be a directory: the lock is written into it as %s", LockFile)
	}
	l := loadValid(e, "lock", root, &f.loadFlags, LockFile+" not written")
	if l == nil {
		return exitError
	}
	want := l.Checked.Alloc.Lock()
	data := want.Marshal()
	name := filepath.Join(root, LockFile)
	if old, err := os.ReadFile(name); err == nil && bytes.Equal(old, data) {
		fmt.Fprintf(e.stdout, "%s is up to date\n", LockFile)
		return exitOK
	}
	changes := compiler.LockDiff(l.Lock, want)
	if err := atomicfile.WriteFile(name, data, 0o644); err != nil {
		return e.fail("lock", "%v", err)
	}
	fmt.Fprintf(e.stdout, "wrote %s\n", name)
	for _, c := range changes {
		fmt.Fprintf(e.stdout, "  %s\n", lockChange(c))
	}
	return exitOK
}

// lockChange words a LockDiff line as a change made to the lock.
func lockChange(line string) string {
	for _, r := range []struct{ from, to string }{{"missing: ", "+ "}, {"stale: ", "- "}, {"differs: ", "~ "}} {
		if rest, ok := strings.CutPrefix(line, r.from); ok {
			return r.to + rest
		}
	}
	return line
}
