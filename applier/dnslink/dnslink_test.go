package dnslink

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"netspec.dev/netspec/daemon/dnsserver"
	"netspec.dev/netspec/daemon/dnsserver/dnstest"
	"netspec.dev/netspec/internal/testnet"
	"netspec.dev/netspec/internal/vmtest"
	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/render"
)

// requireDummy makes a namespace and skips the test, loudly, when its
// kernel has no dummy links (the host kernel of CI has none; then
// applier/vmsuite runs the test in the VM of internal/vmtest, whose kernel
// has them).
func requireDummy(t *testing.T, tools ...string) *testnet.NS {
	t.Helper()
	testnet.Require(t, tools...)
	ns := testnet.New(t, "dnslink").NS("node")
	if out, err := ns.Run("ip", "link", "add", "probe0", "type", "dummy"); err != nil {
		if vmtest.InVM() {
			t.Fatalf("the VM's kernel has no dummy links: %v %s", err, out)
		}
		t.Skipf("SKIPPED: the kernel has no dummy links (%v); applier/vmsuite runs this test in a VM", err)
	}
	ns.IP("link del probe0")
	return ns
}

func do(t *testing.T, ns *testnet.NS, fn func() error) {
	t.Helper()
	if err := ns.Do(fn); err != nil {
		t.Fatal(err)
	}
}

func TestEnsure(t *testing.T) {
	ns := requireDummy(t)
	addr := DefaultAddr

	var res Result
	do(t, ns, func() (err error) { res, err = Ensure("netspec0", addr); return err })
	if want := (Result{CreatedLink: true, AddedAddr: true, SetUp: true}); res != want {
		t.Errorf("first Ensure: %+v, want %+v", res, want)
	}
	out := ns.MustRun("ip", "-o", "addr", "show", "dev", "netspec0")
	if !strings.Contains(out, "inet 169.254.20.10/32") {
		t.Errorf("ip addr show dev netspec0:\n%s\nwant inet 169.254.20.10/32", out)
	}
	if out := ns.MustRun("ip", "-d", "link", "show", "netspec0"); !strings.Contains(out, "dummy") || !strings.Contains(out, ",UP") {
		t.Errorf("ip -d link show netspec0:\n%s\nwant an up dummy link", out)
	}

	do(t, ns, func() (err error) { res, err = Ensure("netspec0", addr); return err })
	if res != (Result{}) {
		t.Errorf("second Ensure changed %+v, want nothing", res)
	}

	// A link set down and stripped of its address is repaired; other
	// addresses stay.
	ns.IP("link set netspec0 down", "addr flush dev netspec0", "addr add 192.0.2.7/32 dev netspec0")
	do(t, ns, func() (err error) { res, err = Ensure("netspec0", addr); return err })
	if want := (Result{AddedAddr: true, SetUp: true}); res != want {
		t.Errorf("Ensure after a flush: %+v, want %+v", res, want)
	}
	out = ns.MustRun("ip", "-o", "addr", "show", "dev", "netspec0")
	for _, want := range []string{"inet 169.254.20.10/32", "inet 192.0.2.7/32"} {
		if !strings.Contains(out, want) {
			t.Errorf("after repair: ip addr show dev netspec0:\n%s\nwant %s", out, want)
		}
	}

	// IPv6: a second address on the same link.
	do(t, ns, func() (err error) { res, err = Ensure("netspec0", netip.MustParseAddr("fd00:53::10")); return err })
	if want := (Result{AddedAddr: true}); res != want {
		t.Errorf("Ensure IPv6: %+v, want %+v", res, want)
	}
	if out := ns.MustRun("ip", "-o", "-6", "addr", "show", "dev", "netspec0"); !strings.Contains(out, "inet6 fd00:53::10/128") {
		t.Errorf("ip -6 addr show dev netspec0:\n%s\nwant inet6 fd00:53::10/128", out)
	}

	ns.IP("link add other0 type dummy", "addr add 169.254.20.11/32 dev other0", "link add veth0 type veth peer name veth1")
	for _, tc := range []struct {
		name, link, addr, want string
	}{
		{name: "address taken", link: "netspec0", addr: "169.254.20.11",
			want: `dns link netspec0: address 169.254.20.11 is taken: it is on link other0`},
		{name: "address taken, new link", link: "netspec1", addr: "169.254.20.10",
			want: `dns link netspec1: address 169.254.20.10 is taken: it is on link netspec0`},
		{name: "not a dummy link", link: "veth0", addr: "169.254.20.12",
			want: `dns link veth0: a veth link of that name exists; want a dummy link`},
		{name: "name too long", link: "netspec-dns-link0", addr: "169.254.20.12",
			want: `dns link "netspec-dns-link0": not a valid interface name`},
		{name: "name with a slash", link: "a/b", addr: "169.254.20.12",
			want: `dns link "a/b": not a valid interface name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := ns.MustRun("ip", "-o", "addr")
			var err error
			do(t, ns, func() error { _, err = Ensure(tc.link, netip.MustParseAddr(tc.addr)); return nil })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Ensure(%s, %s) = %v, want an error with %q", tc.link, tc.addr, err, tc.want)
			}
			if after := ns.MustRun("ip", "-o", "addr"); after != before {
				t.Errorf("a failed Ensure changed the addresses:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

// testRecords are a cluster domain with one Service and its reverse zone.
func testRecords(t *testing.T) *dnsserver.Records {
	t.Helper()
	zone := func(name string, rrs ...plan.Record) plan.Zone {
		return plan.Zone{Name: name, Records: append([]plan.Record{
			{Name: name, Type: "SOA", TTL: 5, Data: "ns.dns." + name + " hostmaster." + name + " 1 7200 1800 86400 5"},
			{Name: name, Type: "NS", TTL: 5, Data: "ns.dns." + name},
		}, rrs...)}
	}
	rs, err := dnsserver.Compile(plan.DNS{Zones: []plan.Zone{
		zone("cluster.local.", plan.Record{Name: "web.shop.svc.cluster.local.", Type: "A", TTL: 5, Data: "10.96.0.10"}),
		zone("96.10.in-addr.arpa.", plan.Record{Name: "10.0.96.10.in-addr.arpa.", Type: "PTR", TTL: 5, Data: "web.shop.svc.cluster.local."}),
	}}, dnsserver.Cluster{})
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// TestServe creates the link with Ensure, serves the zones on its address
// and resolves through it with dig.
func TestServe(t *testing.T) {
	ns := requireDummy(t, "dig")
	do(t, ns, func() error { _, err := Ensure("netspec0", DefaultAddr); return err })
	dnstest.Serve(t, ns.Do, testRecords(t), "169.254.20.10:53")
	for _, tc := range []struct{ args, want string }{
		{"web.shop.svc.cluster.local A", "10.96.0.10"},
		{"-x 10.96.0.10", "web.shop.svc.cluster.local."},
		{"+tcp web.shop.svc.cluster.local A", "10.96.0.10"},
	} {
		args := append([]string{"dig", "@169.254.20.10", "+short", "+time=2", "+tries=2"}, strings.Fields(tc.args)...)
		if got := strings.TrimSpace(ns.MustRun(args...)); got != tc.want {
			t.Errorf("%s: %q, want %q", strings.Join(args, " "), got, tc.want)
		}
	}
	// Other names are refused: the server is authoritative for its zones
	// only (a resolver then asks its next server).
	if got := ns.MustRun("dig", "@169.254.20.10", "+time=2", "+tries=2", "www.example.org", "A"); !strings.Contains(got, "status: REFUSED") {
		t.Errorf("dig www.example.org: want status REFUSED, got\n%s", got)
	}
}

// getent resolves names with glibc's resolver (getent hosts) inside ns, in
// a mount namespace of its own where the files of etc (resolv.conf,
// nsswitch.conf) are bind-mounted over /etc's: the host's files are never
// touched.
func getent(t *testing.T, ns *testnet.NS, etc map[string]string, names ...string) []string {
	t.Helper()
	dir := t.TempDir()
	script := "set -e\n"
	for name, content := range etc {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		target := "/etc/" + name
		if vmtest.InVM() { // the VM's initramfs may lack the file to mount over
			if f, err := os.OpenFile(target, os.O_CREATE|os.O_RDONLY, 0o644); err == nil {
				f.Close()
			}
		}
		script += fmt.Sprintf("mount --bind %s %s\n", p, target)
	}
	var out []string
	for _, n := range names {
		cmd := exec.Command("ip", "netns", "exec", ns.Name, "unshare", "-m", "--propagation", "private", "sh", "-c", script+"exec getent hosts "+n)
		b, err := cmd.CombinedOutput()
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v %s", n, err, strings.TrimSpace(string(b))))
			continue
		}
		out = append(out, strings.Join(strings.Fields(string(b)), " "))
	}
	return out
}

// TestResolvConf proves the resolv.conf recipes with glibc's resolver:
// a host's resolv.conf with netspec first and an upstream server after
// it (netspec refuses other names, and glibc then asks the next server),
// and a pod's resolv.conf as render.ResolvConf writes it (short names
// through the search path).
func TestResolvConf(t *testing.T) {
	ns := requireDummy(t, "getent", "unshare", "mount")
	do(t, ns, func() error { _, err := Ensure("netspec0", DefaultAddr); return err })
	dnstest.Serve(t, ns.Do, testRecords(t), "169.254.20.10:53")
	// The upstream resolver of the host: another server, on loopback,
	// that knows example.test.
	up, err := dnsserver.Compile(plan.DNS{Zones: []plan.Zone{{Name: "example.test.", Records: []plan.Record{
		{Name: "example.test.", Type: "SOA", TTL: 5, Data: "ns.example.test. hostmaster.example.test. 1 7200 1800 86400 5"},
		{Name: "www.example.test.", Type: "A", TTL: 5, Data: "192.0.2.80"},
	}}}}, dnsserver.Cluster{})
	if err != nil {
		t.Fatal(err)
	}
	dnstest.Serve(t, ns.Do, up, "127.0.0.1:53")
	nss := "hosts: files dns\n"

	t.Run("host", func(t *testing.T) {
		resolv := "nameserver 169.254.20.10\nnameserver 127.0.0.1\noptions timeout:2 attempts:2\n"
		got := getent(t, ns, map[string]string{"resolv.conf": resolv, "nsswitch.conf": nss},
			"web.shop.svc.cluster.local", "www.example.test")
		want := []string{"10.96.0.10 web.shop.svc.cluster.local", "192.0.2.80 www.example.test"}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("getent hosts with resolv.conf\n%s\ngot  %q\nwant %q", resolv, got, want)
		}
	})
	t.Run("host, netspec not running", func(t *testing.T) {
		// 169.254.20.12 is on the link, with no server: the query is
		// refused (ICMP port unreachable) and glibc asks the next server.
		ns.IP("addr add 169.254.20.12/32 dev netspec0")
		resolv := "nameserver 169.254.20.12\nnameserver 127.0.0.1\noptions timeout:2 attempts:2\n"
		got := getent(t, ns, map[string]string{"resolv.conf": resolv, "nsswitch.conf": nss}, "www.example.test")
		if want := []string{"192.0.2.80 www.example.test"}; strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("getent hosts with resolv.conf\n%s\ngot  %q\nwant %q", resolv, got, want)
		}
	})
	t.Run("pod", func(t *testing.T) {
		resolv := string(render.ResolvConf("shop", "cluster.local", DefaultAddr))
		got := getent(t, ns, map[string]string{"resolv.conf": resolv, "nsswitch.conf": nss},
			"web", "web.shop", "web.shop.svc")
		want := []string{"10.96.0.10 web.shop.svc.cluster.local", "10.96.0.10 web.shop.svc.cluster.local", "10.96.0.10 web.shop.svc.cluster.local"}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("getent hosts with resolv.conf\n%s\ngot  %q\nwant %q", resolv, got, want)
		}
	})
}
