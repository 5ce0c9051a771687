package ipvs

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moby/ipvs"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"netspec.dev/netspec/internal/testnet"
	"netspec.dev/netspec/internal/vmtest"
	"netspec.dev/netspec/render/ipvsmodel"
)

// inVM tells that the test runs in the qemu VM of internal/vmtest, whose
// kernel has IPVS.
func inVM() bool { return vmtest.InVM() }

// requireVM skips unless the test runs in the VM of internal/vmtest, and
// there fails unless it is root with ip(8) and IPVS; it returns a new
// network namespace.
func requireVM(t *testing.T) *testnet.NS {
	t.Helper()
	if !inVM() {
		t.Skip("SKIPPED: real-kernel IPVS test: it runs in the qemu VM of internal/vmtest (applier/vmsuite's TestIPVS); the host kernel has no IPVS")
	}
	if os.Geteuid() != 0 {
		t.Fatal("in the VM but not root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatalf("in the VM but no ip(8): %v", err)
	}
	if _, err := os.Stat("/proc/net/ip_vs"); err != nil {
		t.Fatalf("in the VM but the kernel has no IPVS (%v): load ip_vs, its schedulers and dummy before the test", err)
	}
	return testnet.New(t, "ipvs").NS("node")
}

// TestInVMSchedulers: the kernel takes every scheduler netspec renders,
// and holds it as asked.
func TestInVMSchedulers(t *testing.T) {
	ns := requireVM(t)
	a, err := Open(ns.Fd())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	s, err := OpenSystem(ns.Fd())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, sched := range []string{"rr", "wrr", "lc", "wlc", "sh", "dh", "sed", "nq", "mh"} {
		want := fixture(t, "-A -t 10.96.0.10:80 -s "+sched+"\n-a -t 10.96.0.10:80 -r 10.244.1.5:8080 -m -w 1\n")
		if _, err := applyAll(a, want); err != nil {
			t.Errorf("scheduler %s: %v", sched, err)
			continue
		}
		svcs, err := s.Services()
		if err != nil {
			t.Fatal(err)
		}
		if len(svcs) != 1 || svcs[0].Scheduler != sched {
			t.Errorf("scheduler %s: the kernel holds %+v", sched, svcs)
		}
	}
}

// TestInVMRenderEqualsKernel: for every golden ipvs.txt, the table that
// render builds from the golden plan.json beside it is applied; the
// kernel's virtual and real servers, read back with moby/ipvs and printed
// in ipvsadm -S -n form, are then the golden file, byte for byte.
func TestInVMRenderEqualsKernel(t *testing.T) {
	ns := requireVM(t)
	files, err := filepath.Glob("testdata/golden/*/*/ipvs.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden ipvs.txt in the VM (%v): applier/vmsuite copies golden/ to testdata/golden", err)
	}
	a, err := Open(ns.Fd())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	h, err := ipvs.New(fmt.Sprintf("/proc/self/fd/%d", ns.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for _, f := range files {
		golden, want := goldenTable(t, f)
		if _, err := applyAll(a, want); err != nil {
			t.Fatalf("%s: Apply: %v", f, err)
		}
		if got := vmKernelTable(t, h, netip.Addr{}); got != golden {
			t.Errorf("%s: the kernel holds\n%s\nthe file says\n%s", f, got, golden)
		}
	}
}

const vmFirst = `-A -t 10.96.0.10:80 -s rr
-a -t 10.96.0.10:80 -r 10.244.1.5:8080 -m -w 1
-a -t 10.96.0.10:80 -r 10.244.2.7:8080 -m -w 1
-A -u 10.96.0.2:53 -s rr -p 60
-a -u 10.96.0.2:53 -r 10.244.1.9:53 -m -w 1
-A -t [fd00::10]:80 -s rr
-a -t [fd00::10]:80 -r [fd00:244::5]:8080 -m -w 1
`

// vmSecond changes a scheduler, a weight and persistence, replaces real
// servers, drops a virtual server with its address and adds one on a new
// address.
const vmSecond = `-A -t 10.96.0.10:80 -s wrr
-a -t 10.96.0.10:80 -r 10.244.2.7:8080 -m -w 3
-a -t 10.96.0.10:80 -r 10.244.3.1:8080 -m -w 1
-A -t [fd00::10]:80 -s rr -p 300
-a -t [fd00::10]:80 -r [fd00:244::6]:8080 -m -w 1
-A -t 10.96.0.11:443 -s rr
-a -t 10.96.0.11:443 -r 10.244.1.5:8443 -m -w 1
`

// TestInVMApply installs tables into a real kernel's IPVS, in a new
// network namespace, and reads them back with moby/ipvs directly (and
// with ipvsadm when it is installed): a first table, a changed one, drift
// repaired, then Cleanup. Each step must report the changes the Fake
// reports for it. Someone else's virtual server stays throughout.
//
// It runs only in the VM of internal/vmtest (applier/vmsuite).
func TestInVMApply(t *testing.T) {
	ns := requireVM(t)
	h, err := ipvs.New(fmt.Sprintf("/proc/self/fd/%d", ns.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	nl, err := netlink.NewHandleAt(netns.NsHandle(ns.Fd()), unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()

	// Someone else's virtual server, at an address netspec does not use.
	other := &ipvs.Service{AddressFamily: unix.AF_INET, Protocol: unix.IPPROTO_TCP, Address: net.IP{192, 0, 2, 1}, Port: 80, SchedName: "rr", Netmask: 0xffffffff}
	if err := h.NewService(other); err != nil {
		t.Fatalf("add someone else's virtual server: %v", err)
	}
	otherAddr := netip.MustParseAddr("192.0.2.1")
	if got := vmKernelTable(t, h, netip.Addr{}); got != "-A -t 192.0.2.1:80 -s rr\n" {
		t.Fatalf("the kernel's table after adding one virtual server by hand:\n%s", got)
	}

	a, err := Open(ns.Fd())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	fake := NewFake()
	fake.AddService(KernelService{Key: ipvsmodel.Key{Protocol: ipvsmodel.TCP, Addr: otherAddr, Port: 80}, Scheduler: "rr", Netmask: 0xffffffff})

	step := func(name string, want *ipvsmodel.Table) {
		t.Helper()
		ch, err := applyAll(a, want)
		if err != nil {
			t.Fatalf("%s: Apply: %v", name, err)
		}
		fch, err := applyAll(&Applier{k: fake}, want)
		if err != nil {
			t.Fatalf("%s: Apply to the fake: %v", name, err)
		}
		if got, fwant := ch.Lines(), fch.Lines(); !slices.Equal(got, fwant) {
			t.Errorf("%s: the kernel reports\n%s\nthe fake\n%s", name, strings.Join(got, "\n"), strings.Join(fwant, "\n"))
		}
		if ch.Empty() || ch.Unowned != 1 {
			t.Errorf("%s: changes %q, %d unowned; want changes and 1 unowned", name, ch.Summary(), ch.Unowned)
		}
		vmCheck(t, name, h, nl, ns, otherAddr, want)
		if ch, err := applyAll(a, want); err != nil || !ch.Empty() {
			t.Errorf("%s: Apply again: %v, %v; want no changes", name, ch.Lines(), err)
		}
		if ch, err := a.Plan(want); err != nil || !ch.Empty() {
			t.Errorf("%s: Plan after Apply: %v, %v; want no changes", name, ch.Lines(), err)
		}
	}

	first, second := fixture(t, vmFirst), fixture(t, vmSecond)
	step("first", first)
	step("second", second)

	// Drift: a real server deleted and a scheduler changed by hand.
	svc := &ipvs.Service{AddressFamily: unix.AF_INET, Protocol: unix.IPPROTO_TCP, Address: net.IP{10, 96, 0, 10}, Port: 80, SchedName: "rr", Netmask: 0xffffffff}
	if err := h.DelDestination(svc, &ipvs.Destination{AddressFamily: unix.AF_INET, Address: net.IP{10, 244, 3, 1}, Port: 8080}); err != nil {
		t.Fatal(err)
	}
	if err := h.UpdateService(svc); err != nil {
		t.Fatal(err)
	}
	ch, err := applyAll(a, second)
	if err != nil {
		t.Fatalf("Apply after drift: %v", err)
	}
	if got, want := ch.Lines(), []string{
		"~ virtual server tcp 10.96.0.10:80: scheduler rr -> wrr",
		"+ real server tcp 10.96.0.10:80 -> 10.244.3.1:8080",
	}; !slices.Equal(got, want) {
		t.Errorf("Apply after drift:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	vmCheck(t, "drift repaired", h, nl, ns, otherAddr, second)

	if err := a.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if got := vmKernelTable(t, h, netip.Addr{}); got != "-A -t 192.0.2.1:80 -s rr\n" {
		t.Errorf("after Cleanup the kernel holds:\n%s\nwant someone else's virtual server only", got)
	}
	if _, err := nl.LinkByName(LinkName); err == nil {
		t.Errorf("after Cleanup %s still exists", LinkName)
	}
}

// vmCheck asserts that the kernel holds want, besides the virtual server
// at other, and that the dummy interface holds want's frontends.
func vmCheck(t *testing.T, name string, h *ipvs.Handle, nl *netlink.Handle, ns *testnet.NS, other netip.Addr, want *ipvsmodel.Table) {
	t.Helper()
	text := string(want.AppendText(nil))
	if got := vmKernelTable(t, h, other); got != text {
		t.Errorf("%s: the kernel holds\n%s\nwant\n%s", name, got, text)
	}
	if _, err := exec.LookPath("ipvsadm"); err == nil {
		out := ns.MustRun("ipvsadm", "-S", "-n")
		var lines []string
		for _, l := range strings.Split(out, "\n") {
			if !strings.Contains(l, other.String()+":") {
				lines = append(lines, l)
			}
		}
		if got, want := sortedLines(strings.Join(lines, "\n")), sortedLines(text); !slices.Equal(got, want) {
			t.Errorf("%s: ipvsadm -S -n says\n%s\nwant (order aside)\n%s", name, out, strings.Join(want, "\n"))
		}
	}
	l, err := nl.LinkByName(LinkName)
	if err != nil {
		t.Fatalf("%s: %s: %v", name, LinkName, err)
	}
	if l.Type() != "dummy" || l.Attrs().Flags&net.FlagUp == 0 {
		t.Errorf("%s: %s is a %s, flags %v; want a dummy, up", name, LinkName, l.Type(), l.Attrs().Flags)
	}
	addrs, err := nl.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		t.Fatal(err)
	}
	var got, wantAddrs []string
	for _, a := range addrs {
		if !a.IP.IsLinkLocalUnicast() {
			got = append(got, a.IPNet.String())
		}
	}
	for _, f := range want.Frontends() {
		wantAddrs = append(wantAddrs, hostPrefix(f).String())
	}
	slices.Sort(got)
	slices.Sort(wantAddrs)
	if !slices.Equal(got, wantAddrs) {
		t.Errorf("%s: %s holds %v, want %v", name, LinkName, got, wantAddrs)
	}
}

// vmKernelTable reads the kernel's IPVS table with moby/ipvs, apart from
// System's conversions, into a model and prints it (ipvs.txt's form and
// order); virtual servers at skip are left out. A setting the model
// cannot say fails the test.
func vmKernelTable(t *testing.T, h *ipvs.Handle, skip netip.Addr) string {
	t.Helper()
	svcs, err := h.GetServices()
	if err != nil {
		t.Fatal(err)
	}
	addr := func(ip net.IP, fam uint16) netip.Addr {
		a, _ := netip.AddrFromSlice(ip)
		if fam == unix.AF_INET {
			a = a.Unmap()
		}
		return a
	}
	tb := &ipvsmodel.Table{}
	for _, s := range svcs {
		va := addr(s.Address, s.AddressFamily)
		if va == skip {
			continue
		}
		vs := ipvsmodel.VirtualServer{Key: ipvsmodel.Key{Protocol: ipvsmodel.Protocol(s.Protocol), Addr: va, Port: s.Port}, Scheduler: s.SchedName}
		if s.Flags&FlagPersistent != 0 {
			vs.Persistence = s.Timeout
		}
		if extra := s.Flags &^ (FlagPersistent | flagHashed); extra != 0 || s.Netmask != defaultNetmask(va) {
			t.Errorf("virtual server %s: flags %#x, netmask %#x", vs.Key, s.Flags, s.Netmask)
		}
		dsts, err := h.GetDestinations(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range dsts {
			if d.ConnectionFlags&ipvs.ConnectionFlagFwdMask != ipvs.ConnectionFlagMasq {
				t.Errorf("real server %s of %s: forwarding %d, want masquerading", d.Address, vs.Key, d.ConnectionFlags)
			}
			ra := addr(d.Address, d.AddressFamily)
			vs.Reals = append(vs.Reals, ipvsmodel.RealServer{Addr: ra, Port: d.Port, Forward: ipvsmodel.Masquerade, Weight: d.Weight})
		}
		tb.Services = append(tb.Services, vs)
	}
	tb.Sort()
	text := string(tb.AppendText(nil))
	if err := tb.Check(); err != nil {
		t.Errorf("the kernel's table: %v\n%s", err, text)
	}
	return text
}
