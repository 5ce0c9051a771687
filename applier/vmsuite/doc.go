// Package vmsuite runs the tests of package applier that need IPVS, which
// the host kernel lacks, in the VM of internal/vmtest: the IPVS replay of
// kube-proxy's packet flows (TestKubeProxyFlows/ipvs, in shards) and the
// IPVS rows of the traffic tests. It has no code of its own: it is a
// package apart so that go test runs these minutes of emulated kernel
// beside package applier's host tests instead of after them, and its
// shards run in VMs side by side.
package vmsuite
