package ipvs

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"netspec.dev/netspec/render/ipvsmodel"
)

// Fake is an in-memory Kernel for tests: it keeps virtual servers, real
// servers and the interface LinkName, and refuses what the kernel refuses
// with the kernel's errors (a virtual server added twice, a real server of
// a missing virtual server, an address on a missing interface, an IPv6
// netmask out of range, an unknown scheduler…). Every change it makes is
// appended to Calls. Make it with NewFake.
//
// It is all-or-nothing where the kernel is: each Kernel call is one
// netlink request, which the kernel makes whole or refuses whole, and a
// refused call (or one FailAfter interrupts) changes nothing. IPVS has no
// transaction across requests, and neither has the Fake: an Apply that
// fails half-way leaves the calls before the failure made, as the kernel
// would, for the next Apply to complete.
type Fake struct {
	// NoIPVS makes CheckIPVS fail as on a kernel without IPVS.
	NoIPVS bool
	// Calls are the changes made, in order; failed ones are not in it.
	Calls []Call

	services map[ipvsmodel.Key]*fakeService
	link     *fakeLink // nil: no interface
	failIn   int       // changes left before one fails; -1: none fails
}

var _ Kernel = (*Fake)(nil)

type fakeService struct {
	svc   KernelService
	reals map[netip.AddrPort]ipvsmodel.RealServer
}

type fakeLink struct {
	kind  string
	up    bool
	addrs map[netip.Prefix]bool
}

// Call is one change made to a Fake.
type Call struct {
	Op     string        // one of the Call* constants
	Key    ipvsmodel.Key // the virtual server, for service and real server calls
	Real   netip.AddrPort
	Prefix netip.Prefix
}

// The operations of Call.Op, named after the Kernel methods.
const (
	CallAddService    = "AddService"
	CallUpdateService = "UpdateService"
	CallDeleteService = "DeleteService"
	CallAddReal       = "AddReal"
	CallUpdateReal    = "UpdateReal"
	CallDeleteReal    = "DeleteReal"
	CallAddLink       = "AddLink"
	CallSetLinkUp     = "SetLinkUp"
	CallDeleteLink    = "DeleteLink"
	CallAddAddr       = "AddAddr"
	CallDeleteAddr    = "DeleteAddr"
)

// String returns the call as "AddReal tcp 10.96.0.10:80 10.244.1.5:8080".
func (c Call) String() string {
	switch {
	case c.Prefix.IsValid():
		return c.Op + " " + c.Prefix.String()
	case c.Real.IsValid():
		return c.Op + " " + c.Key.String() + " " + c.Real.String()
	case c.Key.Addr.IsValid():
		return c.Op + " " + c.Key.String()
	}
	return c.Op
}

// ErrFakeFailure is the error of the change a Fake was told to fail
// (FailAfter).
var ErrFakeFailure = errors.New("fake: injected failure")

// NewFake returns a Fake with IPVS, no virtual servers and no interface.
func NewFake() *Fake {
	return &Fake{services: map[ipvsmodel.Key]*fakeService{}, failIn: -1}
}

// FailAfter makes the change after the next n ones fail with
// ErrFakeFailure, once, as an interruption would; n < 0 turns it off.
func (f *Fake) FailAfter(n int) { f.failIn = n }

// change counts a change about to be made and fails the one FailAfter
// named.
func (f *Fake) change() error {
	switch {
	case f.failIn < 0:
		return nil
	case f.failIn == 0:
		f.failIn = -1
		return ErrFakeFailure
	}
	f.failIn--
	return nil
}

func (f *Fake) log(c Call) { f.Calls = append(f.Calls, c) }

// CheckIPVS implements Kernel.
func (f *Fake) CheckIPVS() error {
	if f.NoIPVS {
		return noIPVS(fmt.Errorf("stat /proc/net/ip_vs: %w", unix.ENOENT))
	}
	return nil
}

// Services implements Kernel.
func (f *Fake) Services() ([]KernelService, error) {
	var out []KernelService
	for _, k := range f.keys() {
		out = append(out, f.services[k].svc)
	}
	return out, nil
}

func (f *Fake) keys() []ipvsmodel.Key {
	return slices.SortedFunc(maps.Keys(f.services), ipvsmodel.Key.Compare)
}

// Reals implements Kernel.
func (f *Fake) Reals(k ipvsmodel.Key) ([]ipvsmodel.RealServer, error) {
	s, ok := f.services[k]
	if !ok {
		return nil, unix.ESRCH
	}
	var out []ipvsmodel.RealServer
	for _, ap := range slices.SortedFunc(maps.Keys(s.reals), netip.AddrPort.Compare) {
		out = append(out, s.reals[ap])
	}
	return out, nil
}

func checkKernelService(ks KernelService) error {
	switch {
	case !ks.Addr.IsValid():
		return unix.EINVAL
	case !ks.Protocol.Valid():
		return unix.EPROTONOSUPPORT
	case !slices.Contains(ipvsmodel.Schedulers, ks.Scheduler):
		return unix.ENOENT // the kernel's answer for a scheduler it has no module for
	case ks.Addr.Is6() && (ks.Netmask < 1 || ks.Netmask > 128):
		return unix.EINVAL
	}
	return nil
}

// AddService implements Kernel.
func (f *Fake) AddService(ks KernelService) error {
	if err := checkKernelService(ks); err != nil {
		return err
	}
	if _, ok := f.services[ks.Key]; ok {
		return unix.EEXIST
	}
	if err := f.change(); err != nil {
		return err
	}
	f.services[ks.Key] = &fakeService{svc: ks, reals: map[netip.AddrPort]ipvsmodel.RealServer{}}
	f.log(Call{Op: CallAddService, Key: ks.Key})
	return nil
}

// UpdateService implements Kernel.
func (f *Fake) UpdateService(ks KernelService) error {
	if err := checkKernelService(ks); err != nil {
		return err
	}
	s, ok := f.services[ks.Key]
	if !ok {
		return unix.ESRCH
	}
	if err := f.change(); err != nil {
		return err
	}
	s.svc = ks
	f.log(Call{Op: CallUpdateService, Key: ks.Key})
	return nil
}

// DeleteService implements Kernel.
func (f *Fake) DeleteService(k ipvsmodel.Key) error {
	if _, ok := f.services[k]; !ok {
		return unix.ESRCH
	}
	if err := f.change(); err != nil {
		return err
	}
	delete(f.services, k)
	f.log(Call{Op: CallDeleteService, Key: k})
	return nil
}

func (f *Fake) realOf(k ipvsmodel.Key, ap netip.AddrPort) (*fakeService, bool, error) {
	s, ok := f.services[k]
	if !ok {
		return nil, false, unix.ESRCH
	}
	_, ok = s.reals[ap]
	return s, ok, nil
}

func checkKernelReal(k ipvsmodel.Key, r ipvsmodel.RealServer) error {
	if !r.Addr.IsValid() || r.Addr.Is4() != k.Addr.Is4() || r.Weight < 0 {
		return unix.EINVAL
	}
	return nil
}

// AddReal implements Kernel.
func (f *Fake) AddReal(k ipvsmodel.Key, r ipvsmodel.RealServer) error {
	s, exists, err := f.realOf(k, r.AddrPort())
	switch {
	case err != nil:
		return err
	case exists:
		return unix.EEXIST
	}
	if err := checkKernelReal(k, r); err != nil {
		return err
	}
	if err := f.change(); err != nil {
		return err
	}
	s.reals[r.AddrPort()] = r
	f.log(Call{Op: CallAddReal, Key: k, Real: r.AddrPort()})
	return nil
}

// UpdateReal implements Kernel.
func (f *Fake) UpdateReal(k ipvsmodel.Key, r ipvsmodel.RealServer) error {
	s, exists, err := f.realOf(k, r.AddrPort())
	switch {
	case err != nil:
		return err
	case !exists:
		return unix.ENOENT
	}
	if err := checkKernelReal(k, r); err != nil {
		return err
	}
	if err := f.change(); err != nil {
		return err
	}
	s.reals[r.AddrPort()] = r
	f.log(Call{Op: CallUpdateReal, Key: k, Real: r.AddrPort()})
	return nil
}

// DeleteReal implements Kernel.
func (f *Fake) DeleteReal(k ipvsmodel.Key, ap netip.AddrPort) error {
	s, exists, err := f.realOf(k, ap)
	switch {
	case err != nil:
		return err
	case !exists:
		return unix.ENOENT
	}
	if err := f.change(); err != nil {
		return err
	}
	delete(s.reals, ap)
	f.log(Call{Op: CallDeleteReal, Key: k, Real: ap})
	return nil
}

// Link implements Kernel.
func (f *Fake) Link() (LinkState, error) {
	if f.link == nil {
		return LinkState{}, nil
	}
	return LinkState{
		Exists: true,
		Kind:   f.link.kind,
		Up:     f.link.up,
		Addrs:  slices.SortedFunc(maps.Keys(f.link.addrs), comparePrefixes),
	}, nil
}

// AddLink implements Kernel.
func (f *Fake) AddLink() error {
	if f.link != nil {
		return unix.EEXIST
	}
	if err := f.change(); err != nil {
		return err
	}
	f.link = &fakeLink{kind: "dummy", up: true, addrs: map[netip.Prefix]bool{}}
	f.log(Call{Op: CallAddLink})
	return nil
}

// AddOtherLink makes an interface LinkName of another kind than dummy,
// down, as someone else could (for tests of that conflict).
func (f *Fake) AddOtherLink(kind string) {
	f.link = &fakeLink{kind: kind, addrs: map[netip.Prefix]bool{}}
}

// SetLinkUp implements Kernel.
func (f *Fake) SetLinkUp() error {
	if f.link == nil {
		return unix.ENODEV
	}
	if err := f.change(); err != nil {
		return err
	}
	f.link.up = true
	f.log(Call{Op: CallSetLinkUp})
	return nil
}

// SetLinkDown sets the interface down, as by hand (for drift tests).
func (f *Fake) SetLinkDown() {
	if f.link != nil {
		f.link.up = false
	}
}

// DeleteLink implements Kernel. The interface's addresses go with it.
func (f *Fake) DeleteLink() error {
	if f.link == nil {
		return unix.ENODEV
	}
	if err := f.change(); err != nil {
		return err
	}
	f.link = nil
	f.log(Call{Op: CallDeleteLink})
	return nil
}

// AddAddr implements Kernel. As the kernel, it refuses an IPv6 address
// the interface has with any prefix length, an IPv4 one only with the
// same.
func (f *Fake) AddAddr(p netip.Prefix) error {
	if f.link == nil {
		return unix.ENODEV
	}
	if !p.IsValid() {
		return unix.EINVAL
	}
	for q := range f.link.addrs {
		if q == p || (p.Addr().Is6() && q.Addr() == p.Addr()) {
			return unix.EEXIST
		}
	}
	if err := f.change(); err != nil {
		return err
	}
	f.link.addrs[p] = true
	f.log(Call{Op: CallAddAddr, Prefix: p})
	return nil
}

// DeleteAddr implements Kernel.
func (f *Fake) DeleteAddr(p netip.Prefix) error {
	if f.link == nil {
		return unix.ENODEV
	}
	if !f.link.addrs[p] {
		return unix.EADDRNOTAVAIL
	}
	if err := f.change(); err != nil {
		return err
	}
	delete(f.link.addrs, p)
	f.log(Call{Op: CallDeleteAddr, Prefix: p})
	return nil
}

// Dump returns the Fake's state as sorted text: the interface and its
// addresses as "#" lines, then the virtual servers as ipvs.txt prints them
// (ipvsmodel.Table.AppendText). A setting ipvs.txt does not say is added
// in ipvsadm's terms (-M netmask, -g or -i forwarding) or as "--flags",
// "--timeout".
func (f *Fake) Dump() string {
	var b strings.Builder
	if f.link != nil {
		state := "down"
		if f.link.up {
			state = "up"
		}
		fmt.Fprintf(&b, "# link %s %s %s\n", LinkName, f.link.kind, state)
		for _, p := range slices.SortedFunc(maps.Keys(f.link.addrs), comparePrefixes) {
			fmt.Fprintf(&b, "# addr %s\n", p)
		}
	}
	for _, k := range f.keys() {
		s := f.services[k]
		ap := netip.AddrPortFrom(k.Addr, k.Port)
		fmt.Fprintf(&b, "-A %s %s -s %s", k.Protocol.Option(), ap, s.svc.Scheduler)
		if s.svc.Flags&FlagPersistent != 0 {
			fmt.Fprintf(&b, " -p %d", s.svc.Timeout)
		} else if s.svc.Timeout != 0 {
			fmt.Fprintf(&b, " --timeout %d", s.svc.Timeout)
		}
		if s.svc.Netmask != defaultNetmask(k.Addr) {
			fmt.Fprintf(&b, " -M %#x", s.svc.Netmask)
		}
		if fl := s.svc.Flags &^ FlagPersistent; fl != 0 {
			fmt.Fprintf(&b, " --flags %#x", fl)
		}
		b.WriteByte('\n')
		reals, _ := f.Reals(k)
		for _, r := range reals {
			fmt.Fprintf(&b, "-a %s %s -r %s %s -w %d\n", k.Protocol.Option(), ap, r.AddrPort(), r.Forward.Option(), r.Weight)
		}
	}
	return b.String()
}
