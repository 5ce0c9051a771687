// Package dnstest runs a dnsserver.Server for tests, its sockets made in
// a network namespace the test created, until the test ends.
package dnstest

import (
	"context"
	"testing"

	"netspec.dev/netspec/daemon/dnsserver"
)

// Serve answers from rs on addr until the test ends. in runs a function
// with its thread in the test's network namespace (testnet.NS.Do) and
// keeps it there while the server runs, so that its sockets are made
// there.
func Serve(t testing.TB, in func(func() error) error, rs *dnsserver.Records, addr string) {
	t.Helper()
	s := dnsserver.New(dnsserver.Options{})
	s.Swap(rs)
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	errc := make(chan error, 1)
	go func() { errc <- in(func() error { return s.ListenAndServe(ctx, addr, func() { close(ready) }) }) }()
	select {
	case <-ready:
	case err := <-errc:
		cancel()
		t.Fatalf("DNS server on %s: %v", addr, err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("DNS server on %s: %v", addr, err)
		}
	})
}
