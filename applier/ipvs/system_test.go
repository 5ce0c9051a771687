package ipvs

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/moby/ipvs"
	"golang.org/x/sys/unix"

	"netspec.dev/netspec/internal/testnet"
	"netspec.dev/netspec/render/ipvsmodel"
)

// TestIPVSConversion: what System sends to moby/ipvs and reads from it.
// The kernel adds its "hashed" flag to every service: it is no setting.
func TestIPVSConversion(t *testing.T) {
	a := netip.MustParseAddr
	tests := []struct {
		name string
		ks   KernelService
		svc  ipvs.Service
	}{
		{
			name: "IPv4 persistent",
			ks:   KernelService{Key: ipvsmodel.Key{Protocol: ipvsmodel.UDP, Addr: a("10.96.0.2"), Port: 53}, Scheduler: "sh", Flags: FlagPersistent, Timeout: 300, Netmask: 0xffffffff},
			svc:  ipvs.Service{AddressFamily: unix.AF_INET, Address: net.IP{10, 96, 0, 2}, Protocol: unix.IPPROTO_UDP, Port: 53, SchedName: "sh", Flags: 1, Timeout: 300, Netmask: 0xffffffff},
		},
		{
			name: "IPv6",
			ks:   KernelService{Key: ipvsmodel.Key{Protocol: ipvsmodel.SCTP, Addr: a("fd00::10"), Port: 80}, Scheduler: "rr", Netmask: 128},
			svc:  ipvs.Service{AddressFamily: unix.AF_INET6, Address: net.ParseIP("fd00::10"), Protocol: unix.IPPROTO_SCTP, Port: 80, SchedName: "rr", Netmask: 128},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := toIPVSService(tt.ks); !reflect.DeepEqual(*got, tt.svc) {
				t.Errorf("toIPVSService = %+v, want %+v", *got, tt.svc)
			}
			from := tt.svc
			from.Flags |= flagHashed
			if got := fromIPVSService(&from); got != tt.ks {
				t.Errorf("fromIPVSService = %+v, want %+v", got, tt.ks)
			}
		})
	}
	if tt := toIPVSService(kernelService(&ipvsmodel.VirtualServer{Key: ipvsmodel.Key{Protocol: ipvsmodel.TCP, Addr: a("fd00::1"), Port: 1}, Scheduler: "rr"})); tt.Netmask != 128 {
		t.Errorf("an IPv6 virtual server's netmask is %d: the kernel refuses any but 1 to 128", tt.Netmask)
	}
	fw := fromIPVSService(&ipvs.Service{FWMark: 7, AddressFamily: unix.AF_INET, SchedName: "rr"})
	if fw.Addr.IsValid() {
		t.Errorf("a firewall-mark service has address %s, want none", fw.Addr)
	}

	// Real servers: moby/ipvs may return IPv4 in 16 bytes.
	kr := ipvsmodel.RealServer{Addr: a("10.244.1.5"), Port: 8080, Weight: 3}
	d := toIPVSDest(kr)
	if want := (ipvs.Destination{AddressFamily: unix.AF_INET, Address: net.IP{10, 244, 1, 5}, Port: 8080, Weight: 3}); !reflect.DeepEqual(*d, want) {
		t.Errorf("toIPVSDest = %+v, want %+v", *d, want)
	}
	d16 := &ipvs.Destination{AddressFamily: unix.AF_INET, Address: net.ParseIP("10.244.1.5"), Port: 8080, Weight: 3, ConnectionFlags: 0x100}
	if got := fromIPVSDest(d16); got != kr {
		t.Errorf("fromIPVSDest = %+v, want %+v", got, kr)
	}
	d6 := &ipvs.Destination{AddressFamily: unix.AF_INET6, Address: net.ParseIP("fd00::5"), Port: 1, Weight: 1, ConnectionFlags: 3}
	if got, want := fromIPVSDest(d6), (ipvsmodel.RealServer{Addr: a("fd00::5"), Port: 1, Weight: 1, Forward: 3}); got != want {
		t.Errorf("fromIPVSDest = %+v, want %+v", got, want)
	}
}

// TestExplain: the errors of a missing privilege, scheduler module or
// dummy interface say what to do.
func TestExplain(t *testing.T) {
	ks := KernelService{Key: ipvsmodel.Key{Protocol: ipvsmodel.SCTP}, Scheduler: "mh"}
	for _, tt := range []struct {
		err  error
		want string
	}{
		{err: explain(unix.EPERM), want: "needs root, or CAP_NET_ADMIN"},
		{err: explainService(unix.ENOENT, ks), want: `load it with "modprobe ip_vs_mh"`},
		{err: explainService(unix.EPROTONOSUPPORT, ks), want: "does not support sctp"},
		{err: noIPVS(os.ErrNotExist), want: `IPVS is not available in this kernel (no /proc/net/ip_vs): load it with "modprobe ip_vs", or use --dataplane nftables`},
	} {
		if tt.err == nil || !strings.Contains(tt.err.Error(), tt.want) {
			t.Errorf("%v: want %q", tt.err, tt.want)
		}
	}
	if !errors.Is(noIPVS(os.ErrNotExist), ErrNoIPVS) || noIPVS(nil) != nil || errors.Is(noIPVS(os.ErrPermission), ErrNoIPVS) {
		t.Error("noIPVS: want ErrNoIPVS for a missing file only")
	}
}

// TestOpenNoIPVS: on a kernel without IPVS, Open fails in a new network
// namespace (and in the test's own) with ErrNoIPVS and says what to do,
// before it changes anything.
func TestOpenNoIPVS(t *testing.T) {
	if _, err := os.Stat("/proc/net/ip_vs"); err == nil {
		t.Skip("SKIPPED: the host kernel has IPVS (/proc/net/ip_vs exists): the error of a kernel without it cannot be seen here")
	}
	testnet.Require(t)
	ns := testnet.New(t, "ipvs").NS("node")
	for _, fd := range []int{ns.Fd(), 0} {
		a, err := Open(fd)
		if err == nil {
			a.Close()
			t.Fatalf("Open(%d) succeeded on a kernel without IPVS", fd)
		}
		if !errors.Is(err, ErrNoIPVS) {
			t.Errorf("Open(%d): %v, want ErrNoIPVS", fd, err)
		}
		for _, want := range []string{"IPVS is not available in this kernel", `"modprobe ip_vs"`, "--dataplane nftables"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Open(%d): %q does not say %s", fd, err, want)
			}
		}
	}
	if out, err := ns.Run("ip", "-brief", "link", "show", LinkName); err == nil {
		t.Errorf("Open made %s although it failed: %s", LinkName, out)
	}
}

// TestSystemLink reads and changes the interface LinkName in a new network
// namespace. It is a veth there, which every kernel here has: the kind is
// AddLink's business alone (TestSystemDummy).
func TestSystemLink(t *testing.T) {
	ns, s := linksInNewNS(t)
	if st, err := s.Link(); err != nil || st.Exists {
		t.Fatalf("Link() in a new namespace = %+v, %v", st, err)
	}

	ns.MustRun("ip", "link", "add", LinkName, "type", "veth", "peer", "name", "peer0")
	st, err := s.Link()
	if err != nil || !st.Exists || st.Kind != "veth" || st.Up {
		t.Fatalf("Link() of a new veth = %+v, %v; want a veth, down", st, err)
	}
	// CheckIPVS's way to see the namespace's /proc/net: the veth shows
	// there, and not in the test's own.
	var inside []byte
	if err := inNamespace(ns.Fd(), func() (err error) { inside, err = os.ReadFile("/proc/thread-self/net/dev"); return err }); err != nil {
		t.Fatal(err)
	}
	outside, err := os.ReadFile("/proc/thread-self/net/dev")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(inside), LinkName+":") || strings.Contains(string(outside), LinkName+":") {
		t.Errorf("/proc/thread-self/net/dev in the namespace:\n%s\noutside:\n%s\nwant %s inside only", inside, outside, LinkName)
	}

	if err := s.SetLinkUp(); err != nil {
		t.Fatal(err)
	}
	v4, v6 := netip.MustParsePrefix("10.96.0.10/32"), netip.MustParsePrefix("fd00::10/128")
	for _, p := range []netip.Prefix{v6, v4} {
		if err := s.AddAddr(p); err != nil {
			t.Fatalf("AddAddr(%s): %v", p, err)
		}
	}
	if err := s.AddAddr(v4); !errors.Is(err, unix.EEXIST) {
		t.Errorf("AddAddr of an address again: %v, want EEXIST", err)
	}
	if st, err = s.Link(); err != nil {
		t.Fatal(err)
	}
	var addrs []netip.Prefix
	for _, p := range st.Addrs {
		if !p.Addr().IsLinkLocalUnicast() {
			addrs = append(addrs, p)
		}
	}
	if !st.Up || !slices.Equal(addrs, []netip.Prefix{v4, v6}) {
		t.Errorf("Link() = %+v, want it up with %s and %s", st, v4, v6)
	}
	out := ns.MustRun("ip", "-brief", "addr", "show", "dev", LinkName)
	if !strings.Contains(out, "10.96.0.10/32") || !strings.Contains(out, "fd00::10/128") {
		t.Errorf("ip addr show: %q, want both addresses", out)
	}
	if err := s.DeleteAddr(v4); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.Link(); slices.Contains(st.Addrs, v4) || !slices.Contains(st.Addrs, v6) {
		t.Errorf("after DeleteAddr(%s): %v", v4, st.Addrs)
	}
	if err := s.DeleteAddr(v4); err == nil {
		t.Errorf("DeleteAddr of a missing address succeeded")
	}
	if err := s.DeleteLink(); err != nil {
		t.Fatal(err)
	}
	if st, err := s.Link(); err != nil || st.Exists {
		t.Errorf("Link() after DeleteLink = %+v, %v", st, err)
	}
	if err := s.AddAddr(v4); err == nil || !strings.Contains(err.Error(), "find interface "+LinkName) {
		t.Errorf("AddAddr without the interface: %v", err)
	}
	if out, err := exec.Command("ip", "link", "show", LinkName).CombinedOutput(); err == nil {
		t.Errorf("%s exists outside the test's namespace: %s", LinkName, out)
	}
}

// TestSystemDummy makes the dummy interface with AddLink in a new network
// namespace. On a kernel without dummy interfaces it checks that the error
// says how to get them, and skips loudly.
func TestSystemDummy(t *testing.T) {
	_, s := linksInNewNS(t)
	if err := s.AddLink(); err != nil {
		if strings.Contains(err.Error(), `load them with "modprobe dummy"`) {
			t.Skipf("SKIPPED: the kernel has no dummy interfaces, AddLink is not tested beyond its error: %v", err)
		}
		t.Fatalf("AddLink: %v", err)
	}
	if st, err := s.Link(); err != nil || !st.Exists || st.Kind != "dummy" || !st.Up {
		t.Errorf("Link() after AddLink = %+v, %v; want a dummy, up", st, err)
	}
	if err := s.AddAddr(netip.MustParsePrefix("10.96.0.10/32")); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteLink(); err != nil {
		t.Fatal(err)
	}
}

// linksInNewNS opens the interface code on a new network namespace, closed
// when the test ends.
func linksInNewNS(t *testing.T) (*testnet.NS, *System) {
	t.Helper()
	testnet.Require(t)
	ns := testnet.New(t, "ipvs").NS("node")
	s, err := openLinks(ns.Fd())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return ns, s
}

// TestLocalAddrs: the namespace's addresses but loopback's, LinkName's and
// IPv6 link-local ones (a veth named LinkName stands in for the dummy).
func TestLocalAddrs(t *testing.T) {
	ns, _ := linksInNewNS(t)
	ns.MustRun("ip", "link", "add", "eth0", "type", "veth", "peer", "name", "eth0-peer")
	ns.MustRun("ip", "link", "add", LinkName, "type", "veth", "peer", "name", "peer0")
	for _, c := range [][]string{
		{"addr", "add", "192.168.10.11/24", "dev", "eth0"},
		{"addr", "add", "192.168.11.1/24", "dev", "eth0"},
		{"addr", "add", "169.254.1.1/16", "dev", "eth0"},
		{"addr", "add", "fd00::11/64", "dev", "eth0"},
		{"addr", "add", "fe80::11/64", "dev", "eth0"},
		{"addr", "add", "10.96.0.10/32", "dev", LinkName},
		{"addr", "add", "192.168.10.11/32", "dev", LinkName}, // also on eth0
		{"addr", "add", "10.0.0.1/8", "dev", "lo"},
	} {
		ns.MustRun(append([]string{"ip"}, c...)...)
	}
	got, err := LocalAddrs(ns.Fd())
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Addr{
		netip.MustParseAddr("169.254.1.1"), netip.MustParseAddr("192.168.10.11"),
		netip.MustParseAddr("192.168.11.1"), netip.MustParseAddr("fd00::11"),
	}
	if !slices.Equal(got, want) {
		t.Errorf("LocalAddrs = %v, want %v", got, want)
	}
}
