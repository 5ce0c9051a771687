// Package ipvs installs the IPVS table that render writes (ipvs.txt, in
// `ipvsadm -S -n` form) into the kernel of one network namespace, over
// netlink with github.com/moby/ipvs, and binds the virtual servers'
// addresses to the dummy interface netspec-ipvs0 (github.com/vishvananda/netlink).
//
// Parse reads the text strictly into a Table. An Applier compares a Table
// with what the kernel holds and changes only the difference, which also
// repairs drift. IPVS has no transactions, so the changes run in an order
// that never leaves a live virtual server without real servers:
//
//  1. the dummy interface exists and is up, and holds every frontend address;
//  2. new virtual servers are added, each with its real servers;
//  3. existing ones get their new real servers, then their changed ones,
//     then lose the real servers that went; then their scheduler and
//     persistence are updated;
//  4. virtual servers no longer wanted are deleted;
//  5. frontend addresses no longer used leave the dummy interface.
//
// Every Apply reads the kernel afresh, so an Apply interrupted at any step
// is completed by the next one.
//
// netspec owns the virtual servers whose address is on netspec-ipvs0 or is
// a frontend of the desired table; every other virtual server is left
// alone.
//
// The kernel-facing side is the Kernel interface: System is the real
// kernel, Fake an in-memory one for tests that need no root and no IPVS.
package ipvs
