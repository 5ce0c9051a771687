package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"testing"

	"netspec.dev/netspec/internal/testnet"
)

// TestFleetTopology checks the test bed itself, without netspec: every
// node reaches every pod directly, unNATed (a pod sees its own node by
// the pod link's address, the others by their lan address); a pod's
// health server can fail for one node only; a stopped pod refuses; a node
// whose bridge port is down is cut off, and back when it is up.
func TestFleetTopology(t *testing.T) {
	f := newFleet(t, fleetSize)
	for _, n := range f.nodes {
		for _, o := range f.nodes {
			for _, p := range o.pods {
				from := n.addr
				if n == o {
					from = fmt.Sprintf("10.244.%d.%d", n.n, p.app.host+1)
				}
				target := net.JoinHostPort(p.ip, fmt.Sprint(dataPort))
				if got, want := n.ns.DialTCP(target, dialTimeout), p.name+" "+from; got != want {
					t.Errorf("from %s to %s: %q, want %q", n.name, target, got, want)
				}
			}
		}
	}

	web2, node2, node3 := f.node(2).pods["web"], f.node(2), f.node(3)
	url := fmt.Sprintf("http://%s:%d/healthz", web2.ip, healthPort)
	for _, n := range []*node{node2, node3} {
		if got := httpStatus(t, n.ns, url); got != http.StatusOK {
			t.Errorf("GET %s from %s: %d, want 200", url, n.name, got)
		}
	}
	web2.srv.SickFor(netip.MustParsePrefix(nodePodCIDR(2)))
	if got := httpStatus(t, node2.ns, url); got != http.StatusServiceUnavailable {
		t.Errorf("GET %s from node-2, sick for it: %d, want 503", url, got)
	}
	if got := httpStatus(t, node3.ns, url); got != http.StatusOK {
		t.Errorf("GET %s from node-3, sick for node-2 only: %d, want 200", url, got)
	}

	echo5 := f.node(5).pods["echo"]
	echo5.srv.Stop()
	if got := dial(f.node(1).ns, net.JoinHostPort(echo5.ip, fmt.Sprint(dataPort))); got != "refused" {
		t.Errorf("from node-1 to echo-5, stopped: %q, want refused", got)
	}

	web4 := net.JoinHostPort(f.node(4).pods["web"].ip, fmt.Sprint(dataPort))
	f.setLink(f.node(4), false)
	if got := dial(f.node(1).ns, web4); got == "web-4" {
		t.Errorf("from node-1 to web-4, node-4 cut off: answered")
	}
	f.setLink(f.node(4), true)
	waitFor(t, "node-1 reaches web-4 with node-4's link up again", deadline, func() (bool, string) {
		got := dial(f.node(1).ns, web4)
		return got == "web-4", got
	})
}

// httpStatus GETs url from inside ns and returns the status code; it
// fails the test when there is no answer.
func httpStatus(t *testing.T, ns *testnet.NS, url string) int {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := ns.Do(func() error {
			var err error
			c, err = (&net.Dialer{Timeout: dialTimeout}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: deadline}).Get(url)
	if err != nil {
		t.Fatalf("GET %s from %s: %v", url, ns, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
