// Package dnslink gives netspec's DNS server an address of its own: a
// dummy network interface (netspec0 by convention) that holds one
// link-local address, 169.254.20.10 by default, the address NodeLocal
// DNSCache uses for the same purpose.
//
// Such an address collides with nothing on the host: not with
// systemd-resolved's stub (127.0.0.53), not with a resolver listening on
// 0.0.0.0:53 for the LAN (a socket bound to a more specific address wins),
// and not with any routed network (169.254.0.0/16 is never routed). A dummy
// link is always up with carrier, so systemd-resolved accepts it as a link
// to send DNS queries to (a per-link DNS server with routing domains
// ~cluster.local ...; see deploy/README.md).
//
// Ensure creates the link and address when missing and does nothing when
// they are there, so a daemon calls it at every start. The link is left in
// place when the daemon stops (as its rules are): per-link resolver
// settings made on it survive a restart of netspec; ip link del deletes it
// (deploy/README.md).
//
// The package talks rtnetlink (github.com/vishvananda/netlink) in the
// calling thread's network namespace; it never runs ip(8).
package dnslink

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"github.com/vishvananda/netlink"

	"netspec.dev/netspec/render"
)

// DefaultName is the conventional name of the link, the one netspec
// render's systemd-resolved recipes name.
const DefaultName = render.DNSLink

// DefaultAddr is the conventional address of netspec's DNS server on the
// link: link-local, as NodeLocal DNSCache's 169.254.20.10.
var DefaultAddr = netip.MustParseAddr("169.254.20.10")

// Result says what Ensure changed.
type Result struct {
	CreatedLink bool // the link was missing and was created
	AddedAddr   bool // the address was missing on the link and was added
	SetUp       bool // the link was down and was set up
}

// Ensure makes a dummy link called name exist, up, holding addr as a host
// address (/32 or /128). It leaves alone what is already right, and fails,
// changing nothing, when:
//
//   - name is not a valid interface name;
//   - a link called name exists and is not a dummy link;
//   - addr is already on another link (the address is taken: netspec
//     would answer on someone else's address, or bind to it twice).
//
// Other addresses on the link are left alone. Errors say what to do: a
// caller without CAP_NET_ADMIN is told it needs root, a kernel without
// dummy links to load the dummy module.
func Ensure(name string, addr netip.Addr) (Result, error) {
	var res Result
	if err := checkName(name); err != nil {
		return res, err
	}
	if !addr.IsValid() {
		return res, fmt.Errorf("dns link %s: no address given", name)
	}
	addr = addr.Unmap()
	has, owner, err := addrHolders(addr, name)
	if err != nil {
		return res, fmt.Errorf("dns link %s: list addresses: %w", name, explain(err))
	} else if owner != "" {
		return res, fmt.Errorf("dns link %s: address %s is taken: it is on link %s (choose another address, or remove it there)", name, addr, owner)
	}
	link, err := netlink.LinkByName(name)
	var notFound netlink.LinkNotFoundError
	switch {
	case errors.As(err, &notFound):
		la := netlink.NewLinkAttrs()
		la.Name = name
		if err := netlink.LinkAdd(&netlink.Dummy{LinkAttrs: la}); err != nil && !errors.Is(err, syscall.EEXIST) {
			return res, fmt.Errorf("dns link %s: create dummy link: %w", name, explain(err))
		}
		res.CreatedLink = true
		if link, err = netlink.LinkByName(name); err != nil {
			return res, fmt.Errorf("dns link %s: %w", name, explain(err))
		}
	case err != nil:
		return res, fmt.Errorf("dns link %s: %w", name, explain(err))
	}
	if t := link.Type(); t != "dummy" {
		return res, fmt.Errorf("dns link %s: a %s link of that name exists; want a dummy link (choose another name, or delete it)", name, t)
	}
	if !has {
		bits := addr.BitLen()
		a := &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(addr.AsSlice()), Mask: net.CIDRMask(bits, bits)}}
		if addr.Is6() {
			// Usable at once: a dummy link has no neighbours to detect
			// a duplicate with.
			a.Flags = syscall.IFA_F_NODAD
		}
		if err := netlink.AddrAdd(link, a); err != nil && !errors.Is(err, syscall.EEXIST) {
			return res, fmt.Errorf("dns link %s: add address %s: %w", name, addr, explain(err))
		}
		res.AddedAddr = true
	}
	if link.Attrs().Flags&net.FlagUp == 0 {
		if err := netlink.LinkSetUp(link); err != nil {
			return res, fmt.Errorf("dns link %s: set up: %w", name, explain(err))
		}
		res.SetUp = true
	}
	return res, nil
}

// checkName accepts what the kernel accepts as an interface name
// (dev_valid_name): 1 to 15 bytes, not "." or "..", no '/', ':' or white
// space.
func checkName(name string) error {
	bad := name == "" || len(name) > 15 || name == "." || name == ".."
	for _, c := range []byte(name) {
		if c == '/' || c == ':' || c <= ' ' || c == 0x7f {
			bad = true
		}
	}
	if bad {
		return fmt.Errorf("dns link %q: not a valid interface name (1 to 15 characters, no '/', ':' or spaces)", name)
	}
	return nil
}

// addrHolders tells whether the link called name holds addr, and names
// another link that holds it ("" when none).
func addrHolders(addr netip.Addr, name string) (has bool, other string, err error) {
	family := netlink.FAMILY_V4
	if addr.Is6() {
		family = netlink.FAMILY_V6
	}
	addrs, err := netlink.AddrList(nil, family)
	if err != nil {
		return false, "", err
	}
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok || ip.Unmap() != addr {
			continue
		}
		l, err := netlink.LinkByIndex(a.LinkIndex)
		switch {
		case err != nil:
			return false, fmt.Sprintf("index %d", a.LinkIndex), nil
		case l.Attrs().Name != name:
			return false, l.Attrs().Name, nil
		}
		has = true
	}
	return has, "", nil
}

// explain adds what to do to the errors a caller can fix.
func explain(err error) error {
	switch {
	case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EACCES):
		return fmt.Errorf("%w (needs root, or CAP_NET_ADMIN)", err)
	case errors.Is(err, syscall.EOPNOTSUPP):
		return fmt.Errorf("%w (the kernel has no dummy links: load the dummy module, modprobe dummy)", err)
	}
	return err
}
