package daemon

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"netspec.dev/netspec/internal/testnet"
)

// edgeService is a LoadBalancer with policy Local over examples/basic's
// web pods (two on node-1), health check node port 31000.
func edgeService(selector string) string {
	return `apiVersion: v1
kind: Service
metadata:
  name: edge
  namespace: shop
spec:
  type: LoadBalancer
  externalTrafficPolicy: Local
  healthCheckNodePort: 31000
  selector:
    app: ` + selector + `
  ports:
  - name: http
    port: 80
    targetPort: http
`
}

// healthGet asks http://addr/ from inside ns: the status code and body,
// or "refused".
func healthGet(ns *testnet.NS, addr string) string {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, address string) (net.Conn, error) {
			var c net.Conn
			err := ns.Do(func() error {
				var err error
				c, err = (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, network, address)
				return err
			})
			return c, err
		},
	}}
	resp, err := client.Get("http://" + addr + "/")
	if err != nil {
		if strings.Contains(err.Error(), "connection refused") {
			return "refused"
		}
		return "error: " + err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return fmt.Sprintf("%d %s", resp.StatusCode, strings.Join(strings.Fields(string(body)), " "))
}

// TestHealthCheckNodePort: watch serves the health check node port of the
// plan it applied on the node's address, follows the tree's changes, and
// logs and exports a listener that cannot bind, binding it at a later
// sync.
func TestHealthCheckNodePort(t *testing.T) {
	tree := basicTree(t)
	lb := filepath.Join(tree, "web", "edge.yaml")
	writeFile(t, lb, edgeService("web"))
	r := start(t, tree, Options{})

	// node-1's address, 192.168.10.11, is not in the namespace yet.
	r.metricIs(t, "netspec_health_check_listen_failures", 1)
	r.metricIs(t, "netspec_health_check_listeners", 0)

	r.ns.AddAddr("lo", "192.168.10.11/32")
	r.Reload()
	r.metricIs(t, "netspec_health_check_listeners", 1)
	r.metricIs(t, "netspec_health_check_listen_failures", 0)
	const addr = "192.168.10.11:31000"
	want := `200 { "service": { "namespace": "shop", "name": "edge" }, "localEndpoints": 2 }`
	waitFor(t, "answering 200", func() (bool, string) { got := healthGet(r.ns, addr); return got == want, got })

	// No pod selected: no local endpoints.
	atomicWrite(t, lb, edgeService("none"))
	want = `503 { "service": { "namespace": "shop", "name": "edge" }, "localEndpoints": 0 }`
	waitFor(t, "answering 503", func() (bool, string) { got := healthGet(r.ns, addr); return got == want, got })

	// The Service gone, so is its port.
	if err := os.Remove(lb); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the port closed", func() (bool, string) { got := healthGet(r.ns, addr); return got == "refused", got })
	r.metricIs(t, "netspec_health_check_listeners", 0)
}
