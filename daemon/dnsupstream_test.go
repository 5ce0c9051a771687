package daemon

import (
	"bytes"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"netspec.dev/netspec/internal/testnet"
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

// TestDNSForwardMetric checks the wiring of the forwarding metric: a
// query for a name outside the zones, sent to an upstream that does not
// answer, is counted by upstream and result.
func TestDNSForwardMetric(t *testing.T) {
	dead := testnet.FreeLoopbackAddr(t) // nothing listens: refused at once
	dnsAddr := testnet.FreeLoopbackAddr(t)
	r := start(t, basicTree(t), Options{Dataplane: DataplaneNone, DNSListen: dnsAddr, DNSUpstreams: []string{dead}})
	select {
	case <-r.DNSReady():
	case <-time.After(deadline):
		t.Fatal("DNS server not ready")
	}
	if got := lookup(t, dnsAddr, "example.com"); got != "SERVFAIL" {
		t.Errorf("example.com with its only upstream down: %s, want SERVFAIL", got)
	}
	var got []string
	for _, m := range metricSeries(t, r.Watcher, "netspec_dns_forward_requests_total") {
		s := ""
		for _, l := range m.GetLabel() {
			s += l.GetName() + "=" + l.GetValue() + " "
		}
		got = append(got, fmt.Sprintf("%s%g", s, m.GetCounter().GetValue()))
	}
	if want := []string{"result=error upstream=" + dead + " 1"}; !slices.Equal(got, want) {
		t.Errorf("netspec_dns_forward_requests_total: %q, want %q", got, want)
	}
}
