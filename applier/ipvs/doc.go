// Package ipvs installs a node's IPVS table, the model that render builds
// from the Plan (ipvsmodel.Table: virtual servers with their real
// servers), into the kernel of one network namespace, over netlink with
// github.com/moby/ipvs, and binds the virtual servers' addresses to the
// dummy interface netspec-ipvs0 (github.com/vishvananda/netlink). It reads
// no text: ipvs.txt is printed from the same model, for review.
//
// An Applier compares the table it wants with what the kernel holds (read
// back), or with the table it installed last (Update: ipvsmodel.Diff), and
// changes only the difference, which also repairs drift. IPVS has no
// transactions, so the changes run in an order that never leaves a live
// virtual server without real servers:
//
//  1. the dummy interface exists and is up, and holds every frontend address;
//  2. new virtual servers are added, each with its real servers;
//  3. existing ones get their new real servers, then their changed ones,
//     then lose the real servers that went; then their scheduler and
//     persistence are updated;
//  4. virtual servers no longer wanted are deleted;
//  5. frontend addresses no longer used leave the dummy interface.
//
// Apply and Update make steps 1 to 3; Prune, which the applier.Node calls
// once DNS no longer names the frontends that went, steps 4 and 5. Every
// Apply reads the kernel afresh, so an Apply interrupted at any step is
// completed by the next one.
//
// netspec owns the virtual servers whose address is on netspec-ipvs0 or is
// a frontend of the desired table; every other virtual server is left
// alone.
//
// The kernel-facing side is the Kernel interface: System is the real
// kernel, Fake a stateful in-memory one for tests that need no root and no
// IPVS.
package ipvs
