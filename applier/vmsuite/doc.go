// Package vmsuite runs, in the VMs of internal/vmtest, the tests that need
// a kernel the host lacks: package applier's IPVS suites (the IPVS replay
// of kube-proxy's packet flows, TestKubeProxyFlows/ipvs, in shards, and
// the IPVS rows of the traffic tests), applier/ipvs's kernel tests,
// cmd/netspec's IPVS scripts and, when the host kernel has no dummy
// links, the DNS link tests of applier/dnslink and cmd/netspec. It has no
// code of its own: it is a package apart so that go test runs these
// minutes of emulated kernel beside the host tests, and so that one test
// binary deals all of them out to two VMs side by side, each booted once
// for several suites.
package vmsuite
