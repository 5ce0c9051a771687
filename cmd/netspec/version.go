package main

import (
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"netspec.dev/netspec/schema"
)

type versionFlags struct {
	json bool
}

var versionCommand = &command{
	name:    "version",
	args:    "[--json]",
	summary: "print netspec's version and git revision, its schema version and the Go version",
	help: `Version prints what the binary was built from, as the Go toolchain
recorded it: the module version (v1.2.0 when built from a checkout of that
tag, a pseudo-version between tags, "+dirty" with uncommitted changes), the
git revision ("-dirty" likewise), and the revision's commit time (Go records
no build time; the commit time keeps builds reproducible); then the version
of netspec's embedded schema (which keys the validation cache) and the Go
toolchain. A binary whose build recorded none of that (go run, go test, go
build -buildvcs=false, a build outside a git checkout) says "devel".

--json prints the same as one JSON object: "version", "revision", "dirty",
"time" (RFC 3339), "schema", "go"; a field that is unknown is left out.

Examples:
  netspec version
  netspec version --json | jq -r .revision`,
	want: "no arguments",
	opts: func() options { return &versionFlags{} },
}

func (f *versionFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.json, "json", false, "print the version as JSON")
}

func (f *versionFlags) run(e *env, _ []string) int {
	bi, _ := debug.ReadBuildInfo()
	v := buildVersion(bi)
	if f.json {
		return e.printJSON("version", v)
	}
	fmt.Fprintln(e.stdout, v.String())
	return exitOK
}

// versionInfo is what `netspec version` reports.
type versionInfo struct {
	// Version is the main module's version ("v1.2.0", or a pseudo-version
	// Go derived from the checkout), "devel" when the build recorded none.
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"` // the VCS revision, in full
	Dirty    bool   `json:"dirty,omitempty"`    // the checkout had uncommitted changes
	Time     string `json:"time,omitempty"`     // the revision's commit time, RFC 3339
	Schema   string `json:"schema"`
	Go       string `json:"go"`
}

// buildVersion reads the version out of build info (nil: none recorded).
// It is a function of its argument so that tests can feed it the build
// info of a tagged, a dirty and a bare build.
func buildVersion(bi *debug.BuildInfo) versionInfo {
	v := versionInfo{Version: "devel", Schema: schema.Version, Go: runtime.Version()}
	if bi == nil {
		return v
	}
	if bi.GoVersion != "" {
		v.Go = bi.GoVersion
	}
	if mv := bi.Main.Version; mv != "" && mv != "(devel)" {
		v.Version = mv
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.modified":
			v.Dirty = s.Value == "true"
		case "vcs.time":
			v.Time = s.Value
		}
	}
	return v
}

// String is the one-line form: "netspec v1.2.0 (revision 0123456789ab,
// committed 2026-11-26T04:00:00Z; schema ..., go1.26)". Without a module
// version the short revision stands for it; "devel" only when the build
// recorded neither.
func (v versionInfo) String() string {
	rev := v.Revision
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" && v.Dirty {
		rev += "-dirty"
	}
	name := v.Version
	var build []string
	switch {
	case name == "devel" && rev != "":
		name = rev
	case rev != "":
		build = append(build, "revision "+rev)
	}
	if v.Time != "" {
		build = append(build, "committed "+v.Time)
	}
	tail := fmt.Sprintf("schema %s, %s", v.Schema, v.Go)
	if len(build) > 0 {
		tail = strings.Join(build, ", ") + "; " + tail
	}
	return fmt.Sprintf("netspec %s (%s)", name, tail)
}
