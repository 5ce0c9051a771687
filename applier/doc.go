// Package applier holds every side effect of netspec on a node, below the
// compiler: it takes a compiled Plan and never loads, validates or compiles
// a tree. Node applies a Plan: the kernel's nftables tables (package nft)
// or IPVS virtual servers (package ipvs), conntrack cleanup for UDP
// endpoints that left (package conntrack) and the state dir's zone, env and
// plan files (package state), and package dnslink makes the dummy link
// that holds the DNS server's address. The long-running servers of a
// plan's zones and health check node ports are the daemon's (packages
// daemon/dnsserver and daemon/healthcheck). A Node programs the
// kernel first: the state dir's files change, and its record names the
// plan, only once the kernel holds it. Apply and Update of a complete plan
// prepare the files (render, write to temporary files, sync) while the
// kernel takes their nftables batch, and only rename them into place
// after. Node.Plan, Node.Drift and CheckKernel read the kernel and change
// nothing: what apply would change, what was changed behind netspec's
// back, and, for explain --live, the difference kept to each frontend
// (explain.Frontend). Pure packages (schema, compiler, render, explain)
// never import it; the CLI and the node daemon (package daemon) drive it.
package applier
