// Package applier holds every side effect of netspec on a node. Node
// applies a Plan: the kernel's nftables tables (package nft), conntrack
// cleanup for UDP endpoints that left (package conntrack) and the state
// dir's zone, env and plan files (package state). Pure packages (schema,
// compiler, render) never import it.
//
// Not implemented yet: the IPVS data plane and the watch daemon with its
// DNS server.
package applier
