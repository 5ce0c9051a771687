package compiler

import (
	"net/netip"
	"strings"

	"netspec.dev/netspec/internal/diag"
	"netspec.dev/netspec/schema"
)

// cluster is the tree's Cluster settings with the CIDRs and the node port
// range parsed. Values that do not parse are left out: the schema has
// reported them already, and reporting them again would only add noise.
type cluster struct {
	spec schema.ClusterSpec

	serviceCIDRs    []netip.Prefix // in spec order, at most one per family
	nodePortFrom    int            // 0 when the range does not parse
	nodePortTo      int
	externalIPCIDRs []netip.Prefix
	lbIPCIDRs       []netip.Prefix // loadBalancerIPCIDRs
	podCIDRs        []netip.Prefix
}

// findCluster returns the settings of the tree's Cluster object, or the
// defaults when there is none. Every Cluster object after the first is an
// error.
func findCluster(objs []*schema.Object, r *reporter) *cluster {
	var first *schema.Object
	for _, o := range objs {
		if o.Cluster == nil {
			continue
		}
		if first == nil {
			first = o
			continue
		}
		r.errorf(o, pName, "is a second Cluster object; a tree has at most one (the first, %q, is at %s)",
			first.Cluster.Metadata.Name, r.where(first, pName))
	}
	if first == nil {
		return parseCluster(schema.DefaultClusterSpec())
	}
	return parseCluster(first.Cluster.Spec)
}

// parseCluster parses the CIDRs and the node port range of spec.
func parseCluster(spec schema.ClusterSpec) *cluster {
	c := &cluster{spec: spec}
	seen := map[string]bool{}
	for _, s := range spec.ServiceCIDRs {
		p, ok := parsePrefix(s)
		if !ok || p.Addr().BitLen()-p.Bits() < 2 {
			continue
		}
		f := schema.Family(p.Addr())
		if seen[f] {
			continue
		}
		seen[f] = true
		c.serviceCIDRs = append(c.serviceCIDRs, p)
	}
	if from, to, err := schema.ParsePortRange(spec.NodePortRange); err == nil {
		c.nodePortFrom, c.nodePortTo = from, to
	}
	for _, s := range spec.ExternalIPCIDRs {
		if p, ok := parsePrefix(s); ok {
			c.externalIPCIDRs = append(c.externalIPCIDRs, p)
		}
	}
	for _, s := range spec.LoadBalancerIPCIDRs {
		if p, ok := parsePrefix(s); ok {
			c.lbIPCIDRs = append(c.lbIPCIDRs, p)
		}
	}
	for _, s := range spec.PodCIDRs {
		if p, ok := parsePrefix(s); ok {
			c.podCIDRs = append(c.podCIDRs, p)
		}
	}
	return c
}

func parsePrefix(s string) (netip.Prefix, bool) {
	p, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil {
		return netip.Prefix{}, false
	}
	if a := p.Addr(); a.Is4In6() {
		// ::ffff:10.0.0.0/104 is 10.0.0.0/8 written as IPv6.
		if p.Bits() < 96 {
			return netip.Prefix{}, false
		}
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Masked(), true
}

// cidr returns the service CIDR of a family.
func (c *cluster) cidr(family string) (netip.Prefix, bool) {
	for _, p := range c.serviceCIDRs {
		if schema.Family(p.Addr()) == family {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

// families lists the families the cluster has a service CIDR for, the
// primary one first.
func (c *cluster) families() []string {
	out := make([]string, len(c.serviceCIDRs))
	for i, p := range c.serviceCIDRs {
		out[i] = schema.Family(p.Addr())
	}
	return out
}

// hasNodePorts reports whether the node port range parsed.
func (c *cluster) hasNodePorts() bool { return c.nodePortFrom > 0 }

// cidrList formats the service CIDRs for messages.
func (c *cluster) cidrList() string {
	s := make([]string, len(c.serviceCIDRs))
	for i, p := range c.serviceCIDRs {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

var pName = diag.Path{"metadata", "name"}
