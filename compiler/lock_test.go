package compiler

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func ips(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, ip := range s {
		out[i] = netip.MustParseAddr(ip)
	}
	return out
}

func lockOf(m map[string]lockEntry) *Lock {
	l := &Lock{services: map[string]lockEntry{}}
	for k, e := range m {
		l.set(k, e)
	}
	return l
}

const header = "# netspec.lock — cluster IPs and node ports allocated by netspec. Written by `netspec lock`; commit it.\n"

func TestLockMarshal(t *testing.T) {
	tests := []struct {
		name string
		lock *Lock
		want string
	}{
		{name: "nil", lock: nil, want: header + "version: 1\nservices: {}\n"},
		{name: "empty", lock: lockOf(nil), want: header + "version: 1\nservices: {}\n"},
		{
			name: "sorted, IPv4 first, awkward IPv6 quoted",
			lock: lockOf(map[string]lockEntry{
				"shop/web": {clusterIPs: ips("fd00:10:96::e03", "10.96.14.3"), nodePorts: map[string]int{"http/TCP": 30080, "dns/UDP": 30053}},
				"blog/api": {nodePorts: map[string]int{"443/TCP": 31000}, healthCheckNodePort: 31001},
				"blog/hc":  {healthCheckNodePort: 31002},
				"a/v6":     {clusterIPs: ips("::5")},
				"a/empty":  {},
			}),
			want: header + `version: 1
services:
  a/v6:
    clusterIPs: ["::5"]
  blog/api:
    nodePorts:
      443/TCP: 31000
    healthCheckNodePort: 31001
  blog/hc:
    healthCheckNodePort: 31002
  shop/web:
    clusterIPs: [10.96.14.3, fd00:10:96::e03]
    nodePorts:
      dns/UDP: 30053
      http/TCP: 30080
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(tt.lock.Marshal()); got != tt.want {
				t.Errorf("Marshal:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

func TestLockRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		lock *Lock
	}{
		{name: "empty", lock: lockOf(nil)},
		{name: "values", lock: lockOf(map[string]lockEntry{
			"shop/web":  {clusterIPs: ips("10.96.14.3", "fd00:10:96::e03"), nodePorts: map[string]int{"http/TCP": 30080, "dns/UDP": 30053, "sctp/SCTP": 1}},
			"shop/v6":   {clusterIPs: ips("fd00:1::")},
			"shop/low":  {clusterIPs: ips("::5")},
			"x-1/y-2-z": {nodePorts: map[string]int{"8080/TCP": 65535}, healthCheckNodePort: 1},
			"x-1/hc":    {healthCheckNodePort: 32000},
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := tt.lock.Marshal()
			got, err := ParseLock(data)
			if err != nil {
				t.Fatalf("ParseLock(Marshal()): %v\n%s", err, data)
			}
			if !reflect.DeepEqual(got, tt.lock) {
				t.Errorf("round trip = %#v, want %#v", got, tt.lock)
			}
			if d := LockDiff(got, tt.lock); len(d) != 0 {
				t.Errorf("LockDiff after round trip = %q", d)
			}
			if again := got.Marshal(); string(again) != string(data) {
				t.Errorf("Marshal after round trip:\n%s\nwant:\n%s", again, data)
			}
		})
	}
}

func TestParseLock(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want *Lock
	}{
		{name: "null services", in: "version: 1\nservices:\n", want: lockOf(nil)},
		{name: "no services", in: "# hand-written\nversion: 1\n", want: lockOf(nil)},
		{
			name: "hand-written styles",
			in: `version: "1"
services:
  shop/web:   # the shop
    clusterIPs:
      - "fd00::7"
      - 10.96.0.7
    nodePorts: {http/TCP: 30080}
    healthCheckNodePort: "30081"
  shop/none: {}
  shop/nil:
`,
			want: lockOf(map[string]lockEntry{
				"shop/web": {clusterIPs: ips("10.96.0.7", "fd00::7"), nodePorts: map[string]int{"http/TCP": 30080}, healthCheckNodePort: 30081},
			}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseLock([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseLock = %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestParseLockErrors(t *testing.T) {
	const svc = "version: 1\nservices:\n  shop/web:\n"
	tests := []struct {
		name string
		in   string
		want string
	}{
		{name: "empty", in: "", want: `netspec.lock: is empty; it needs at least "version: 1"`},
		{name: "only a comment", in: "# nothing\n", want: `netspec.lock: is empty; it needs at least "version: 1"`},
		{name: "not a mapping", in: "- 1\n", want: `netspec.lock:1: must be a mapping with version and services`},
		{name: "syntax", in: "version: 1\nservices: [\n", want: `netspec.lock:2: did not find expected node content`},
		{name: "missing version", in: "services: {}\n", want: `netspec.lock:1: version is missing; write "version: 1"`},
		{name: "unknown version", in: "version: 2\nservices: {}\n", want: `netspec.lock:1: version 2 is not supported; this netspec reads version 1`},
		{name: "version not a number", in: "version: one\n", want: `netspec.lock:1: version one is not supported; this netspec reads version 1`},
		{name: "unknown field", in: "version: 1\nservice: {}\n", want: `netspec.lock:2: unknown field "service" (known: version, services)`},
		{name: "duplicate field", in: "version: 1\nversion: 1\n", want: `netspec.lock:2: "version" is defined twice (also at line 1)`},
		{name: "services a list", in: "version: 1\nservices: []\n", want: `netspec.lock:2: services: must be a mapping`},
		{name: "bad service key", in: "version: 1\nservices:\n  web: {}\n", want: `netspec.lock:3: services: "web" is not NAMESPACE/NAME`},
		{name: "duplicate service", in: svc + "    clusterIPs: [10.96.0.1]\n  shop/web: {}\n", want: `netspec.lock:5: services: "shop/web" is defined twice (also at line 3)`},
		{name: "unknown service field", in: svc + "    clusterIP: [10.96.0.1]\n", want: `netspec.lock:4: services: shop/web: unknown field "clusterIP" (known: clusterIPs, nodePorts, healthCheckNodePort)`},
		{name: "bad IP", in: svc + "    clusterIPs: [10.96.0.300]\n", want: `netspec.lock:4: services: shop/web: clusterIPs: "10.96.0.300" is not an IP address`},
		{name: "IP with zone", in: svc + "    clusterIPs: [\"fe80::1%eth0\"]\n", want: `netspec.lock:4: services: shop/web: clusterIPs: "fe80::1%eth0" is not an IP address`},
		{name: "two IPv4", in: svc + "    clusterIPs:\n    - 10.96.0.1\n    - 10.96.0.2\n", want: `netspec.lock:6: services: shop/web: clusterIPs: 10.96.0.2 is a second IPv4 address; there is at most one per family`},
		{name: "clusterIPs a string", in: svc + "    clusterIPs: 10.96.0.1\n", want: `netspec.lock:4: services: shop/web: clusterIPs: must be a list of addresses`},
		{name: "port too high", in: svc + "    nodePorts:\n      http/TCP: 70000\n", want: `netspec.lock:5: services: shop/web: nodePorts: http/TCP: "70000" is not a port (1-65535)`},
		{name: "port zero", in: svc + "    nodePorts:\n      http/TCP: 0\n", want: `netspec.lock:5: services: shop/web: nodePorts: http/TCP: "0" is not a port (1-65535)`},
		{name: "port not a number", in: svc + "    nodePorts:\n      http/TCP: http\n", want: `netspec.lock:5: services: shop/web: nodePorts: http/TCP: "http" is not a port (1-65535)`},
		{name: "health check port zero", in: svc + "    healthCheckNodePort: 0\n", want: `netspec.lock:4: services: shop/web: healthCheckNodePort: "0" is not a port (1-65535)`},
		{name: "health check port a list", in: svc + "    healthCheckNodePort: [30080]\n", want: `netspec.lock:4: services: shop/web: healthCheckNodePort: "" is not a port (1-65535)`},
		{name: "bad port key", in: svc + "    nodePorts:\n      http: 30080\n", want: `netspec.lock:5: services: shop/web: nodePorts: "http" is not PORT/PROTOCOL (such as http/TCP)`},
		{name: "bad protocol", in: svc + "    nodePorts:\n      http/ICMP: 30080\n", want: `netspec.lock:5: services: shop/web: nodePorts: "http/ICMP" is not PORT/PROTOCOL (such as http/TCP)`},
		{
			name: "all errors, in order",
			in:   "version: 3\nservices:\n  shop/web:\n    clusterIPs: [x]\n    extra: 1\n",
			want: "netspec.lock:1: version 3 is not supported; this netspec reads version 1\n" +
				"netspec.lock:4: services: shop/web: clusterIPs: \"x\" is not an IP address\n" +
				"netspec.lock:5: services: shop/web: unknown field \"extra\" (known: clusterIPs, nodePorts, healthCheckNodePort)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := ParseLock([]byte(tt.in))
			if err == nil {
				t.Fatalf("ParseLock = %v, want error %q", l, tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("error:\n got %s\nwant %s", err, tt.want)
			}
		})
	}
}

func TestLockDiff(t *testing.T) {
	web := lockEntry{clusterIPs: ips("10.96.3.7", "fd00::e03"), nodePorts: map[string]int{"http/TCP": 30080}}
	lb := lockEntry{nodePorts: map[string]int{"http/TCP": 30080}, healthCheckNodePort: 30081}
	tests := []struct {
		name       string
		have, want *Lock
		diff       []string
	}{
		{name: "both nil", diff: nil},
		{name: "equal", have: lockOf(map[string]lockEntry{"shop/web": web}), want: lockOf(map[string]lockEntry{"shop/web": web}), diff: nil},
		{name: "nil and empty", have: nil, want: lockOf(nil), diff: nil},
		{
			name: "no lock file",
			have: nil,
			want: lockOf(map[string]lockEntry{"shop/web": web}),
			diff: []string{
				"missing: shop/web clusterIP IPv4 10.96.3.7",
				"missing: shop/web clusterIP IPv6 fd00::e03",
				"missing: shop/web nodePort http/TCP 30080",
			},
		},
		{
			name: "stale service",
			have: lockOf(map[string]lockEntry{"shop/old": {clusterIPs: ips("10.96.0.5")}, "shop/web": web}),
			want: lockOf(map[string]lockEntry{"shop/web": web}),
			diff: []string{"stale: shop/old clusterIP IPv4 10.96.0.5"},
		},
		{
			name: "health check node port missing, differing, stale",
			have: lockOf(map[string]lockEntry{"shop/a": {nodePorts: lb.nodePorts}, "shop/b": {nodePorts: lb.nodePorts, healthCheckNodePort: 30082}, "shop/c": lb}),
			want: lockOf(map[string]lockEntry{"shop/a": lb, "shop/b": lb, "shop/c": {nodePorts: lb.nodePorts}}),
			diff: []string{
				"missing: shop/a healthCheckNodePort 30081",
				"differs: shop/b healthCheckNodePort is 30082 in netspec.lock, want 30081",
				"stale: shop/c healthCheckNodePort 30081",
			},
		},
		{
			name: "differs, missing and stale values of one Service",
			have: lockOf(map[string]lockEntry{"shop/web": {clusterIPs: ips("10.96.3.8"), nodePorts: map[string]int{"http/TCP": 30081, "old/UDP": 30000}}}),
			want: lockOf(map[string]lockEntry{"shop/web": web}),
			diff: []string{
				"differs: shop/web clusterIP IPv4 is 10.96.3.8 in netspec.lock, want 10.96.3.7",
				"missing: shop/web clusterIP IPv6 fd00::e03",
				"differs: shop/web nodePort http/TCP is 30081 in netspec.lock, want 30080",
				"stale: shop/web nodePort old/UDP 30000",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := LockDiff(tt.have, tt.want); !reflect.DeepEqual(got, tt.diff) {
				t.Errorf("LockDiff:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(tt.diff, "\n     "))
			}
		})
	}
}
