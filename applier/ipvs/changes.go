package ipvs

import (
	"fmt"
	"strings"
)

// Changes is what an Apply changed, or what a Plan would change. Each
// entry is a readable line: "tcp 10.96.0.10:80" for a virtual server,
// "tcp 10.96.0.10:80 -> 10.244.1.5:8080" for a real server,
// "10.96.0.10/32" for an address; a change says from what to what.
type Changes struct {
	// Interface is "added" or "set up" when the interface LinkName was
	// created or set up, else "".
	Interface string

	AddressesAdded, AddressesRemoved                []string
	ServicesAdded, ServicesChanged, ServicesRemoved []string
	RealsAdded, RealsChanged, RealsRemoved          []string

	// Unowned counts the virtual servers of the kernel that are not
	// netspec's and were left alone (for debugging; not a change).
	Unowned int
}

// Empty tells whether nothing changes.
func (c *Changes) Empty() bool {
	return c.Interface == "" &&
		len(c.AddressesAdded)+len(c.AddressesRemoved)+
			len(c.ServicesAdded)+len(c.ServicesChanged)+len(c.ServicesRemoved)+
			len(c.RealsAdded)+len(c.RealsChanged)+len(c.RealsRemoved) == 0
}

// Merge adds the changes of o, made after c's, to c.
func (c *Changes) Merge(o *Changes) {
	if o == nil {
		return
	}
	if c.Interface == "" {
		c.Interface = o.Interface
	}
	c.AddressesAdded = append(c.AddressesAdded, o.AddressesAdded...)
	c.AddressesRemoved = append(c.AddressesRemoved, o.AddressesRemoved...)
	c.ServicesAdded = append(c.ServicesAdded, o.ServicesAdded...)
	c.ServicesChanged = append(c.ServicesChanged, o.ServicesChanged...)
	c.ServicesRemoved = append(c.ServicesRemoved, o.ServicesRemoved...)
	c.RealsAdded = append(c.RealsAdded, o.RealsAdded...)
	c.RealsChanged = append(c.RealsChanged, o.RealsChanged...)
	c.RealsRemoved = append(c.RealsRemoved, o.RealsRemoved...)
	c.Unowned = o.Unowned
}

// Summary is a one-line account of the changes.
func (c *Changes) Summary() string {
	if c.Empty() {
		return "no changes"
	}
	var parts []string
	if c.Interface != "" {
		parts = append(parts, "interface "+LinkName+" "+c.Interface)
	}
	if n := len(c.AddressesAdded) + len(c.AddressesRemoved); n > 0 {
		parts = append(parts, fmt.Sprintf("addresses %d added, %d removed", len(c.AddressesAdded), len(c.AddressesRemoved)))
	}
	if n := len(c.ServicesAdded) + len(c.ServicesChanged) + len(c.ServicesRemoved); n > 0 {
		parts = append(parts, fmt.Sprintf("virtual servers %d added, %d changed, %d removed", len(c.ServicesAdded), len(c.ServicesChanged), len(c.ServicesRemoved)))
	}
	if n := len(c.RealsAdded) + len(c.RealsChanged) + len(c.RealsRemoved); n > 0 {
		parts = append(parts, fmt.Sprintf("real servers %d added, %d changed, %d removed", len(c.RealsAdded), len(c.RealsChanged), len(c.RealsRemoved)))
	}
	return strings.Join(parts, "; ")
}

// Lines lists the changes one a line, "+" for an addition, "~" for a
// change and "-" for a removal, for a plan's output.
func (c *Changes) Lines() []string {
	var out []string
	switch c.Interface {
	case "added":
		out = append(out, "+ interface "+LinkName)
	case "":
	default:
		out = append(out, "~ interface "+LinkName+": "+c.Interface)
	}
	add := func(sign, what string, items []string) {
		for _, s := range items {
			out = append(out, sign+" "+what+" "+s)
		}
	}
	add("+", "address", c.AddressesAdded)
	add("-", "address", c.AddressesRemoved)
	add("+", "virtual server", c.ServicesAdded)
	add("~", "virtual server", c.ServicesChanged)
	add("-", "virtual server", c.ServicesRemoved)
	add("+", "real server", c.RealsAdded)
	add("~", "real server", c.RealsChanged)
	add("-", "real server", c.RealsRemoved)
	return out
}

// record adds what an operation changes.
func (c *Changes) record(o op) {
	real := func() string { return o.svc.Key.String() + " -> " + o.real.AddrPort().String() }
	switch o.kind {
	case opAddLink:
		c.Interface = "added"
	case opSetLinkUp:
		c.Interface = "set up"
	case opAddAddr:
		c.AddressesAdded = append(c.AddressesAdded, o.prefix.String())
	case opDeleteAddr:
		c.AddressesRemoved = append(c.AddressesRemoved, o.prefix.String())
	case opAddService:
		c.ServicesAdded = append(c.ServicesAdded, o.svc.Key.String())
	case opUpdateService:
		c.ServicesChanged = append(c.ServicesChanged, o.svc.Key.String()+": "+o.what)
	case opDeleteService:
		c.ServicesRemoved = append(c.ServicesRemoved, o.svc.Key.String())
	case opAddReal:
		c.RealsAdded = append(c.RealsAdded, real())
	case opUpdateReal:
		c.RealsChanged = append(c.RealsChanged, real()+": "+o.what)
	case opDeleteReal:
		c.RealsRemoved = append(c.RealsRemoved, real())
	}
}
