package daemon

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
)

// TestDNSUpstreamSelf checks that the DNS server's own address is never
// an upstream (a host resolv.conf naming netspec first would loop): it is
// skipped with a warning, and New fails when no upstream remains.
func TestDNSUpstreamSelf(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	var logs bytes.Buffer
	opts := Options{Tree: t.TempDir(), Node: "node-1", StateDir: state, Dataplane: DataplaneNone,
		DNSListen: "127.0.0.1:5353", DNSUpstreams: []string{"127.0.0.1:5353"},
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	if _, err := New(opts); err == nil || !strings.Contains(err.Error(), "no upstream left") {
		t.Errorf("New with only its own address as upstream: %v, want an error", err)
	}
	opts.DNSUpstreams = []string{"127.0.0.1:5353", "192.0.2.53:53"}
	logs.Reset()
	if _, err := New(opts); err != nil {
		t.Fatalf("New: %v", err)
	}
	if l := logs.String(); !strings.Contains(l, "own address, skipped") || !strings.Contains(l, "upstreams=192.0.2.53:53") {
		t.Errorf("log:\n%s\nwant the skipped upstream warned and 192.0.2.53:53 kept", l)
	}
	opts.DNSListen = ""
	if _, err := New(opts); err == nil {
		t.Errorf("New with upstreams and no DNS server: no error")
	}
}
