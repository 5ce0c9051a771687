package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"netspec.dev/netspec/schema"
)

func init() {
	register(&command{
		name:    "version",
		summary: "print netspec's version, its schema version and the Go version",
		help: `Version prints the netspec version (the module version, or the git
revision it was built from), the version of its embedded schema (which keys
the validation cache) and the Go toolchain.

Example:
  netspec version`,
		run: func(e *env, _ any, args []string) int {
			if !needArgs(e, "version", args, 0, "no arguments") {
				return exitError
			}
			fmt.Fprintf(e.stdout, "netspec %s (schema %s, %s)\n", version(), schema.Version, runtime.Version())
			return exitOK
		},
	})
}

// version is the module version, or the VCS revision for a development build.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	v := bi.Main.Version
	if v != "" && v != "(devel)" {
		return v
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return "devel-" + rev
}
