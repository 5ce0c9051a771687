// Package compiler turns validated objects into what the nodes act on.
//
// The schema package has checked every object on its own; this package
// checks what needs the whole tree: the Cluster settings (service CIDRs,
// node port range, allowed external IPs), names defined twice, cluster IPs
// and node ports used by two Services, endpoint IPs that are service IPs,
// and links between Services, Endpoints, EndpointSlices and Pods. It also
// allocates the cluster IPs and node ports that specs leave out: explicit
// in the spec, else recorded in netspec.lock, else derived from a hash of
// the Service's name, so that every node computes the same result without
// talking to the others and a locked allocation never moves.
//
// The package is pure: no file or network I/O, no clock, no randomness,
// and its output does not depend on map iteration order.
package compiler
