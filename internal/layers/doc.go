// Package layers holds the test that keeps the pure packages pure:
// schema, compiler, plan, render, treediff and explain (and the project
// packages they import) never import the applier, the daemon, the CLI or
// a library that reaches the kernel or the file system's events
// (netlink, nftables, IPVS, network namespaces, fsnotify). docs/design.md
// states the rule; this package has no code of its own.
package layers
