package ipvs

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"netspec.dev/netspec/render/ipvsmodel"
)

// Applier installs IPVS tables into the kernel of one network namespace
// and keeps them there. It is not safe for concurrent use.
type Applier struct {
	k     Kernel
	close func()
	last  *ipvsmodel.Table // what the last Apply or Update installed; nil when unknown
}

// Open connects to the kernel of the network namespace nsFd (an open
// /var/run/netns/NAME or /proc/PID/ns/net; 0 for the current one). It fails
// with an error wrapping ErrNoIPVS when the kernel has no IPVS.
func Open(nsFd int) (*Applier, error) {
	s, err := OpenSystem(nsFd)
	if err != nil {
		return nil, err
	}
	return &Applier{k: s, close: s.Close}, nil
}

// Close releases the kernel connections. The virtual servers stay.
func (a *Applier) Close() {
	if a.close != nil {
		a.close()
	}
}

// Plan compares want with the kernel and returns what Apply and Prune
// would change, changing nothing.
func (a *Applier) Plan(want *ipvsmodel.Table) (*Changes, error) {
	p, err := a.diffOnly(want, nil, false)
	if err != nil {
		return nil, err
	}
	return p.changes(), nil
}

// Apply changes the kernel into want: it reads the kernel back, changes
// only what differs (which repairs drift), in the order of the package
// documentation, and reads the kernel back again to verify; but the
// virtual servers (and their addresses) that want no longer has stay until
// Prune. A caller that must withdraw a frontend from DNS before its
// virtual server goes (the applier.Node) applies, publishes DNS, then
// prunes. Apply stops at the first operation the kernel refuses and
// returns what it changed until then; the next Apply goes on from there.
// want must pass ipvsmodel.Table.Check (render's tables do), and is kept
// for Update: the caller does not change it afterwards.
func (a *Applier) Apply(want *ipvsmodel.Table) (*Changes, error) {
	return a.apply(want, nil, true)
}

// Update is Apply for a daemon that is the only writer of netspec's
// virtual servers: it compares want with what it installed last
// (ipvsmodel.Diff, one walk of both tables), and reads
// back and changes only the virtual servers that differ (besides one dump
// of the kernel's virtual servers, and the interface), so that its work
// follows the size of the change. Without a last table it is Apply; a
// periodic Apply repairs drift.
func (a *Applier) Update(want *ipvsmodel.Table) (*Changes, error) {
	if a.last == nil {
		return a.Apply(want)
	}
	if err := want.Check(); err != nil {
		return nil, fmt.Errorf("desired table: %w", err)
	}
	delta := ipvsmodel.Diff(a.last, want)
	if delta.Empty() {
		return &Changes{}, nil
	}
	only := map[ipvsmodel.Key]bool{}
	for _, k := range delta.Keys() {
		only[k] = true
	}
	return a.apply(want, only, true)
}

// Prune deletes the virtual servers netspec owns that want does not have,
// then the addresses no longer used; it reads the kernel's virtual servers
// (one dump) but no real servers.
func (a *Applier) Prune(want *ipvsmodel.Table) (*Changes, error) {
	return a.apply(want, map[ipvsmodel.Key]bool{}, false)
}

func (a *Applier) apply(want *ipvsmodel.Table, only map[ipvsmodel.Key]bool, keep bool) (*Changes, error) {
	a.last = nil
	p, err := a.diffOnly(want, only, keep)
	if err != nil {
		return nil, err
	}
	done := &Changes{Unowned: p.unowned}
	for _, o := range p.ops {
		if err := o.do(a.k); err != nil {
			return done, fmt.Errorf("%s: %w", o, err)
		}
		done.record(o)
	}
	if len(p.ops) > 0 {
		check, err := a.diffOnly(want, only, keep)
		if err != nil {
			return done, fmt.Errorf("verify: %w", err)
		}
		if len(check.ops) > 0 {
			return done, fmt.Errorf("verify: the kernel does not hold what was sent, still to do: %s", check.changes().Summary())
		}
	}
	a.last = want
	return done, nil
}

// Cleanup deletes the virtual servers netspec owns (those whose address
// is on the interface LinkName), then the interface. Other virtual servers
// stay.
func (a *Applier) Cleanup() error {
	a.last = nil
	if err := a.k.CheckIPVS(); err != nil {
		return err
	}
	link, err := a.k.Link()
	if err != nil {
		return err
	}
	if !link.Exists {
		return nil
	}
	if link.Kind != "dummy" {
		return wrongKind(link.Kind)
	}
	svcs, err := ownedServices(a.k, link)
	if err != nil {
		return err
	}
	slices.SortFunc(svcs, func(a, b KernelService) int { return a.Compare(b.Key) })
	for _, s := range svcs {
		if err := a.k.DeleteService(s.Key); err != nil {
			return fmt.Errorf("delete virtual server %s: %w", s.Key, err)
		}
	}
	if err := a.k.DeleteLink(); err != nil {
		return fmt.Errorf("delete interface %s: %w", LinkName, err)
	}
	return nil
}

func wrongKind(kind string) error {
	return fmt.Errorf("interface %s exists but is of kind %q, not a dummy interface: netspec owns this name; delete it (ip link del %s)", LinkName, kind, LinkName)
}

// plan is a diff: the operations that make the kernel hold the desired
// table, in the order they must run.
type plan struct {
	ops     []op
	unowned int
}

// changes is what the operations of p change.
func (p *plan) changes() *Changes {
	ch := &Changes{Unowned: p.unowned}
	for _, o := range p.ops {
		ch.record(o)
	}
	return ch
}

type opKind uint8

const (
	opAddLink opKind = iota
	opSetLinkUp
	opAddAddr
	opDeleteAddr
	opAddService
	opUpdateService
	opDeleteService
	opAddReal
	opUpdateReal
	opDeleteReal
)

// op is one kernel operation of a plan.
type op struct {
	kind   opKind
	svc    KernelService // the virtual server (its ipvsmodel.Key alone for real server operations)
	real   ipvsmodel.RealServer
	prefix netip.Prefix
	// what tells what changes, for Changes (a service's or real server's
	// old and new settings).
	what string
}

func (o op) do(k Kernel) error {
	switch o.kind {
	case opAddLink:
		return k.AddLink()
	case opSetLinkUp:
		return k.SetLinkUp()
	case opAddAddr:
		return k.AddAddr(o.prefix)
	case opDeleteAddr:
		return k.DeleteAddr(o.prefix)
	case opAddService:
		return k.AddService(o.svc)
	case opUpdateService:
		return k.UpdateService(o.svc)
	case opDeleteService:
		return k.DeleteService(o.svc.Key)
	case opAddReal:
		return k.AddReal(o.svc.Key, o.real)
	case opUpdateReal:
		return k.UpdateReal(o.svc.Key, o.real)
	case opDeleteReal:
		return k.DeleteReal(o.svc.Key, o.real.AddrPort())
	}
	return fmt.Errorf("unknown operation %d", o.kind)
}

// String names the operation, for errors.
func (o op) String() string {
	switch o.kind {
	case opAddLink:
		return "add interface " + LinkName
	case opSetLinkUp:
		return "set interface " + LinkName + " up"
	case opAddAddr:
		return fmt.Sprintf("add address %s to %s", o.prefix, LinkName)
	case opDeleteAddr:
		return fmt.Sprintf("delete address %s from %s", o.prefix, LinkName)
	case opAddService:
		return "add virtual server " + o.svc.Key.String()
	case opUpdateService:
		return "update virtual server " + o.svc.Key.String()
	case opDeleteService:
		return "delete virtual server " + o.svc.Key.String()
	case opAddReal:
		return fmt.Sprintf("add real server %s to %s", o.real.AddrPort(), o.svc.Key)
	case opUpdateReal:
		return fmt.Sprintf("update real server %s of %s", o.real.AddrPort(), o.svc.Key)
	case opDeleteReal:
		return fmt.Sprintf("delete real server %s of %s", o.real.AddrPort(), o.svc.Key)
	}
	return fmt.Sprintf("operation %d", o.kind)
}

// diffOnly reads the kernel and returns the operations that make it hold
// want, in the order of the package documentation. It reads the real
// servers of, and compares, only the virtual servers in only (all when
// only is nil); the others are taken to be as wanted if the kernel has
// them. With keep, virtual servers and
// addresses no longer wanted stay (steps 4 and 5 are left out).
func (a *Applier) diffOnly(want *ipvsmodel.Table, only map[ipvsmodel.Key]bool, keep bool) (*plan, error) {
	if err := want.Check(); err != nil {
		return nil, fmt.Errorf("desired table: %w", err)
	}
	var wantSvcs []ipvsmodel.VirtualServer
	if want != nil {
		wantSvcs = want.Services
	}
	if err := a.k.CheckIPVS(); err != nil {
		return nil, err
	}
	link, err := a.k.Link()
	if err != nil {
		return nil, err
	}
	if link.Exists && link.Kind != "dummy" {
		return nil, wrongKind(link.Kind)
	}
	frontends := want.Frontends()

	// Ownership: the addresses on the dummy interface and the frontends.
	owned := map[netip.Addr]bool{}
	for _, f := range frontends {
		owned[f] = true
	}
	var linkAddrs []netip.Prefix // the link's addresses but IPv6 link-local ones, which the kernel makes
	for _, p := range link.Addrs {
		if p.Addr().IsLinkLocalUnicast() {
			continue
		}
		linkAddrs = append(linkAddrs, p)
		owned[p.Addr()] = true
	}
	slices.SortFunc(linkAddrs, comparePrefixes)

	svcs, err := a.k.Services()
	if err != nil {
		return nil, err
	}
	p := &plan{}
	have := map[ipvsmodel.Key]KernelService{}
	for _, s := range svcs {
		if !s.Addr.IsValid() || !owned[s.Addr] {
			p.unowned++
			continue
		}
		have[s.Key] = s
	}

	// 1. The interface and the frontend addresses.
	switch {
	case !link.Exists:
		p.ops = append(p.ops, op{kind: opAddLink})
	case !link.Up:
		p.ops = append(p.ops, op{kind: opSetLinkUp})
	}
	wantAddrs := map[netip.Prefix]bool{}
	deleted := map[netip.Prefix]bool{}
	for _, f := range frontends {
		hp := hostPrefix(f)
		wantAddrs[hp] = true
		if slices.Contains(linkAddrs, hp) {
			continue
		}
		// The address with another prefix length (set by hand) goes
		// first: IPv6 keeps one prefix length per address.
		for _, lp := range linkAddrs {
			if lp.Addr() == f {
				p.ops = append(p.ops, op{kind: opDeleteAddr, prefix: lp})
				deleted[lp] = true
			}
		}
		p.ops = append(p.ops, op{kind: opAddAddr, prefix: hp})
	}

	// 2. New virtual servers, each with its real servers.
	// 3. Existing ones: real servers added, changed, then removed; then
	// the virtual server's own settings.
	var existing []op
	for i := range wantSvcs {
		vs := &wantSvcs[i]
		ws := kernelService(vs)
		hs, ok := have[vs.Key]
		delete(have, vs.Key) // what is left in have is no longer wanted
		if !ok {
			p.ops = append(p.ops, op{kind: opAddService, svc: ws})
			for _, r := range vs.Reals {
				p.ops = append(p.ops, op{kind: opAddReal, svc: ws, real: r})
			}
			continue
		}
		if only != nil && !only[vs.Key] {
			continue
		}
		reals, err := a.k.Reals(vs.Key)
		if err != nil {
			return nil, err
		}
		existing = append(existing, diffReals(ws, vs.Reals, reals)...)
		if what := serviceDiffers(ws, hs); what != "" {
			existing = append(existing, op{kind: opUpdateService, svc: ws, what: what})
		}
	}
	p.ops = append(p.ops, existing...)

	if keep {
		return p, nil
	}

	// 4. Virtual servers no longer wanted.
	for _, s := range slices.SortedFunc(maps.Values(have), func(a, b KernelService) int { return a.Compare(b.Key) }) {
		p.ops = append(p.ops, op{kind: opDeleteService, svc: s})
	}

	// 5. Addresses no longer used (or of the wrong prefix length).
	for _, lp := range linkAddrs {
		if !wantAddrs[lp] && !deleted[lp] {
			p.ops = append(p.ops, op{kind: opDeleteAddr, prefix: lp})
		}
	}
	return p, nil
}

// diffReals returns the operations that turn the kernel's real servers of
// a virtual server into the wanted ones: additions, changes, removals.
func diffReals(ws KernelService, want, have []ipvsmodel.RealServer) []op {
	byAddr := map[netip.AddrPort]ipvsmodel.RealServer{}
	for _, r := range have {
		byAddr[r.AddrPort()] = r
	}
	var add, change, del []op
	wanted := map[netip.AddrPort]bool{}
	for _, r := range want {
		wanted[r.AddrPort()] = true
		hr, ok := byAddr[r.AddrPort()]
		switch {
		case !ok:
			add = append(add, op{kind: opAddReal, svc: ws, real: r})
		case hr != r:
			change = append(change, op{kind: opUpdateReal, svc: ws, real: r, what: realDiffers(r, hr)})
		}
	}
	slices.SortFunc(have, func(a, b ipvsmodel.RealServer) int { return a.AddrPort().Compare(b.AddrPort()) })
	for _, r := range have {
		if !wanted[r.AddrPort()] {
			del = append(del, op{kind: opDeleteReal, svc: ws, real: r})
		}
	}
	return slices.Concat(add, change, del)
}

// serviceDiffers tells how the kernel's virtual server differs from the
// wanted one, or "".
func serviceDiffers(want, have KernelService) string {
	var what []string
	if want.Scheduler != have.Scheduler {
		what = append(what, fmt.Sprintf("scheduler %s -> %s", have.Scheduler, want.Scheduler))
	}
	if want.Flags != have.Flags {
		what = append(what, fmt.Sprintf("flags %#x -> %#x", have.Flags, want.Flags))
	}
	if want.Timeout != have.Timeout {
		what = append(what, fmt.Sprintf("persistence %ds -> %ds", have.Timeout, want.Timeout))
	}
	if want.Netmask != have.Netmask {
		what = append(what, fmt.Sprintf("netmask %#x -> %#x", have.Netmask, want.Netmask))
	}
	return strings.Join(what, ", ")
}

func realDiffers(want, have ipvsmodel.RealServer) string {
	var what []string
	if want.Weight != have.Weight {
		what = append(what, fmt.Sprintf("weight %d -> %d", have.Weight, want.Weight))
	}
	if want.Forward != have.Forward {
		what = append(what, fmt.Sprintf("forwarding %s -> %s", have.Forward, want.Forward))
	}
	return strings.Join(what, ", ")
}
