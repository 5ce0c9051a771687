package main

import (
	"encoding/json"
	"runtime/debug"
	"strings"
	"testing"

	"netspec.dev/netspec/schema"
)

// TestBuildVersion feeds buildVersion the build info of a tagged release,
// a dirty checkout, a checkout without a module version and a bare build.
func TestBuildVersion(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: rev},
			{Key: "vcs.time", Value: "2026-11-26T04:00:00Z"},
			{Key: "vcs.modified", Value: modified},
		}
	}
	tests := []struct {
		name     string
		bi       *debug.BuildInfo
		wantText string
		wantJSON string
	}{{
		name:     "tagged",
		bi:       &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "netspec.dev/netspec", Version: "v1.2.0"}, Settings: vcs("false")},
		wantText: "netspec v1.2.0 (revision 0123456789ab, committed 2026-11-26T04:00:00Z; schema S, go1.26.0)",
		wantJSON: `{"version":"v1.2.0","revision":"` + rev + `","time":"2026-11-26T04:00:00Z","schema":"S","go":"go1.26.0"}`,
	}, {
		name:     "dirty pseudo-version",
		bi:       &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.1-0.20261126040000-0123456789ab+dirty"}, Settings: vcs("true")},
		wantText: "netspec v1.2.1-0.20261126040000-0123456789ab+dirty (revision 0123456789ab-dirty, committed 2026-11-26T04:00:00Z; schema S, go1.26.0)",
		wantJSON: `{"version":"v1.2.1-0.20261126040000-0123456789ab+dirty","revision":"` + rev + `","dirty":true,"time":"2026-11-26T04:00:00Z","schema":"S","go":"go1.26.0"}`,
	}, {
		name:     "checkout without module version",
		bi:       &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: vcs("true")},
		wantText: "netspec 0123456789ab-dirty (committed 2026-11-26T04:00:00Z; schema S, go1.26.0)",
		wantJSON: `{"version":"devel","revision":"` + rev + `","dirty":true,"time":"2026-11-26T04:00:00Z","schema":"S","go":"go1.26.0"}`,
	}, {
		name:     "devel",
		bi:       &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}},
		wantText: "netspec devel (schema S, go1.26.0)",
		wantJSON: `{"version":"devel","schema":"S","go":"go1.26.0"}`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := buildVersion(tt.bi)
			if v.Schema != schema.Version {
				t.Errorf("schema %q, want %q", v.Schema, schema.Version)
			}
			v.Schema = "S"
			if got := v.String(); got != tt.wantText {
				t.Errorf("text:\n got %s\nwant %s", got, tt.wantText)
			}
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.wantJSON {
				t.Errorf("json:\n got %s\nwant %s", b, tt.wantJSON)
			}
		})
	}
	// No build info at all (a binary built without module support).
	if got := buildVersion(nil).String(); !strings.HasPrefix(got, "netspec devel (schema ") {
		t.Errorf("no build info: %s", got)
	}
}
