// Package applier holds every side effect of netspec on a node, below the
// compiler: it takes a compiled Plan and never loads, validates or compiles
// a tree. Node applies a Plan: the kernel's nftables tables (package nft)
// or IPVS virtual servers (package ipvs), conntrack cleanup for UDP
// endpoints that left (package conntrack) and the state dir's zone, env and
// plan files (package state); packages dnsserver and healthcheck serve a
// plan's zones and health check node ports, and package dnslink makes the
// dummy link that holds the DNS server's address. Pure packages (schema,
// compiler, render) never import it; the CLI and the node daemon (package
// daemon) drive it.
package applier
