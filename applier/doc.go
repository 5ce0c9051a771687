// Package applier holds every side effect of netspec on a node: nftables and
// IPVS over netlink, conntrack cleanup, atomically written files and the DNS
// server. Pure packages (schema, compiler, render) never import it.
//
// Not implemented yet: the nftables, IPVS and watch issues fill it in.
package applier
