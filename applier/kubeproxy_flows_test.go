package applier_test

import (
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/internal/testnet"
	"netspec.dev/netspec/internal/vmtest"
	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/schema"
)

// TestKubeProxyFlows replays the packet-flow tables of kube-proxy's own
// nftables tests (kubernetes v1.35, pkg/proxy/nftables/proxier_test.go:
// the runPacketFlowTests calls of TestNoEndpointsReject,
// TestClusterIPGeneral, TestLoadBalancer, TestNodePorts,
// TestExternalTrafficPolicyLocal/Cluster, TestInternalTrafficPolicy,
// TestTerminatingEndpointsTrafficPolicyLocal/Cluster and
// TestInternalExternalMasquerade) against netspec, with real packets.
//
// Each kube-proxy test (or sub-test, when its sub-tests have Services of
// their own) is a tree in testdata/kubeproxy: its Services and
// EndpointSlices, translated, plus common/ (kube-proxy's test cluster and
// the Node under test, "test-node"). The tree is compiled for test-node
// and installed by each of the installers (the applier, nft -f of the
// rendered file; the applier with IPVS only in the VM, see package
// applier/vmsuite), in a topology of its own:
//
//	external client ── router ── test-node ── upstream
//	203.0.113.2, .130             │    │
//	2600:5200::1     pods of test-node  remote ── endpoints of other nodes
//
// test-node has kube-proxy's node IPs on its link to the router:
// 192.168.0.2 and 2001:db8::1 (the Node's addresses), and the other local
// addresses of kube-proxy's fake node: 192.168.1.2, 192.168.99.11 (also
// the tests' external IP) and 2001:db8:1::2. The router sends it
// everything (cluster IPs, LoadBalancer IPs, external IPs). Each endpoint
// address of the tree gets a namespace, linked to test-node when the
// endpoint's nodeName is test-node and to the remote router otherwise,
// with a server on every port of its EndpointSlice that answers
// "IP:PORT CLIENT-IP"; so does each pod address a flow sends from.
// test-node's default route leads to upstream, which owns every address
// of the service CIDRs and of the LoadBalancer IPs and answers on them:
// a packet that leaves the node un-DNATed is answered by "upstream"
// rather than lost, so DROP and REJECT are told apart from a leak.
//
// A flow's source is made real: a pod address dials from its namespace,
// a node address from test-node, an external address from the client; the
// flows of a case run one after the other (their REJECTs share the
// kernel's ICMP rate limit towards a source). A flow checks kube-proxy's
// expected output:
//   - endpoints: over 20 connections per endpoint, every endpoint listed
//     answers and no other server does;
//   - "REJECT": the first attempt is refused (TCP: RST or ICMP
//     unreachable; UDP: ICMP unreachable) within refusedWait;
//   - "DROP": one attempt gets no answer within dropWait (the event that
//     must not come is waited for that long);
//   - "": no rule of the proxy applies, so the node's own socket on the
//     destination answers ("test-node").
//
// and masquerade: with masq the endpoint sees an address of test-node,
// without it the flow's own source address. From test-node itself both
// look the same (a node address), so there masquerade is not observable.
//
// Flows that depend on what netspec or the test does not have
// (kube-proxy flags, SCTP in Go, a load balancer that SNATs) carry skip:
// they are reported with t.Skip and their reason, never left out. When
// the tree itself is what a case needs from netspec (a Cluster field),
// the case fails at compiling it.
//
// With NETSPEC_KPFLOWS_SHARD=I/N set, only every N-th case from the I-th
// on (counted from 0 over all tables) runs: applier/vmsuite runs the IPVS
// replay as N such shards, each in a VM of its own, side by side.
func TestKubeProxyFlows(t *testing.T) {
	testnet.Require(t, "nft")
	shard, shards, err := parseShard(os.Getenv(kpShardEnv))
	if err != nil {
		t.Fatalf("%s: %v", kpShardEnv, err)
	}
	for _, in := range installers {
		t.Run(in.name, func(t *testing.T) {
			if in.name == "ipvs" && !vmtest.InVM() {
				t.Skip("SKIPPED: the IPVS data plane is replayed in the VM of internal/vmtest (package applier/vmsuite); the host kernel has no IPVS")
			}
			index, picked := 0, 0 // cases over all tables, and those of the shard
			for _, table := range kubeProxyTables {
				t.Run(table.test, func(t *testing.T) {
					for _, c := range table.cases {
						index++
						if (index-1)%shards != shard {
							continue
						}
						picked++
						run := func(t *testing.T) {
							if c.skip != "" {
								t.Skipf("SKIPPED: %s", c.skip)
							}
							t.Parallel()
							runKubeProxyCase(t, c, in.name, in.install)
						}
						if c.name == "" {
							run(t) // one case: its flows are the table's
						} else {
							t.Run(c.name, run)
						}
					}
				})
			}
			if shards > 1 {
				// applier/vmsuite adds these up over the shards.
				t.Logf("%s=%d/%d: %d of the %d cases", kpShardEnv, shard, shards, picked, index)
			}
		})
	}
}

// kpShardEnv names the environment variable that picks a shard of
// TestKubeProxyFlows' cases, "I/N".
const kpShardEnv = "NETSPEC_KPFLOWS_SHARD"

// parseShard reads "I/N" (0 <= I < N); "" is the one shard 0/1.
func parseShard(s string) (shard, shards int, err error) {
	if s == "" {
		return 0, 1, nil
	}
	is, ns, ok := strings.Cut(s, "/")
	shard, err1 := strconv.Atoi(is)
	shards, err2 := strconv.Atoi(ns)
	if !ok || err1 != nil || err2 != nil || shards < 1 || shard < 0 || shard >= shards {
		return 0, 0, fmt.Errorf("shard %q: want I/N with 0 <= I < N", s)
	}
	return shard, shards, nil
}

// skipIPVSLocal is why the flows of ipvsLocalOnly are not replayed for the
// IPVS data plane: the tables are kube-proxy's nftables mode, whose pods
// and node reach every endpoint of a Service with externalTrafficPolicy
// Local through its external IPs, LoadBalancer IPs and node ports (the
// short-circuit). kube-proxy's IPVS mode has none: the virtual servers of
// those frontends hold the node's local endpoints only, whoever sends
// (pkg/proxy/ipvs, syncEndpoint with ExternalPolicyLocal), and so do
// netspec's.
const skipIPVSLocal = "kube-proxy's IPVS mode, as netspec's, gives the external frontends of a Local Service only this node's endpoints, also for pods and the node (no short-circuit)"

// ipvsLocalOnly are the flows, by test path under the installer, that
// skipIPVSLocal is about.
var ipvsLocalOnly = map[string]bool{
	"TestExternalTrafficPolicyLocal/pod_to_external_IP_hits_both_endpoints,_unmasqueraded":            true,
	"TestExternalTrafficPolicyLocal/pod_to_LB_IP_hits_only_both_endpoints,_unmasqueraded":             true,
	"TestExternalTrafficPolicyLocal/pod_to_NodePort_hits_both_endpoints,_unmasqueraded":               true,
	"TestInternalExternalMasquerade/base/pod_to_NodePort_with_eTP:Local":                              true,
	"TestInternalExternalMasquerade/base/pod_to_LB_with_eTP:Local":                                    true,
	"TestInternalExternalMasquerade/base/node_to_LB_with_eTP:Local":                                   true,
	"TestInternalExternalMasquerade/masqueradeAll,_no_LocalTrafficDetector/node_to_LB_with_eTP:Local": true,
}

// kpFlow is one packet flow of a kube-proxy table: kube-proxy's
// packetFlowTest, with a reason when it cannot be replayed.
type kpFlow struct {
	name     string
	sourceIP string
	protocol string // "" (TCP), "udp" or "sctp"
	destIP   string
	destPort int
	// output is kube-proxy's: endpoints ("10.180.0.1:80, 10.180.2.1:80"),
	// "REJECT", "DROP", or "" when no rule of the proxy applies.
	output string
	masq   bool
	skip   string
}

// kpCase is one tree and the flows kube-proxy traces through it.
type kpCase struct {
	name  string   // kube-proxy's sub-test, "" when there is none
	trees []string // directories under testdata/kubeproxy, copied in order over common
	flows []kpFlow
	// after are the flows kube-proxy traces once the EndpointSlices are
	// deleted (the tree's endpointslices.yaml).
	after []kpFlow
	skip  string
}

// kpTable is one kube-proxy test function.
type kpTable struct {
	test  string
	cases []kpCase
}

// kube-proxy's test addresses (proxier_test.go).
const (
	kpNodeName              = "test-node"
	kpNodeIP                = "192.168.0.2"
	kpNodeIPAlt             = "192.168.1.2"
	kpExternalIP            = "192.168.99.11"
	kpNodeIPv6              = "2001:db8::1"
	kpNodeIPv6Alt           = "2001:db8:1::2"
	kpExternalClient        = "203.0.113.2"
	kpExternalClientBlocked = "203.0.113.130"
	kpExternalClientIPv6    = "2600:5200::1" // TestNodePorts' IPv6 external client
)

// kpUpstreamCIDRs are the addresses upstream owns: the service CIDRs and
// the LoadBalancer IPs of the trees.
var kpUpstreamCIDRs = []string{"172.30.0.0/16", "1.2.3.4/32", "5.6.7.8/32", "9.10.11.12/32", "fd00:172:30::/112"}

const (
	skipSCTP = "SCTP: the test's clients and servers are Go's net package, which has no SCTP (the SCTP port is in the tree and compiled)"
	skipSNAT = "the source is the LoadBalancer IP itself, as if an external load balancer had SNATted the node's connection to its own address: " +
		"the test has no such load balancer, and the node cannot send from an address it routes to the client side"
)

// kpEndpoints formats endpoints as kube-proxy's output does.
func kpEndpoints(port int, ips ...string) string {
	var out []string
	for _, ip := range ips {
		out = append(out, net.JoinHostPort(ip, strconv.Itoa(port)))
	}
	return strings.Join(out, ", ")
}

var kubeProxyTables = []kpTable{
	{test: "TestNoEndpointsReject", cases: []kpCase{{
		trees: []string{"TestNoEndpointsReject"},
		flows: []kpFlow{
			{name: "pod to cluster IP with no endpoints", sourceIP: "10.0.0.2", destIP: "172.30.0.41", destPort: 80, output: "REJECT"},
			{name: "external to external IP with no endpoints", sourceIP: kpExternalClient, destIP: kpExternalIP, destPort: 80, output: "REJECT"},
			{name: "pod to NodePort with no endpoints", sourceIP: "10.0.0.2", destIP: kpNodeIP, destPort: 3001, output: "REJECT"},
			{name: "external to NodePort with no endpoints", sourceIP: kpExternalClient, destIP: kpNodeIP, destPort: 3001, output: "REJECT"},
			{name: "pod to LoadBalancer IP with no endpoints", sourceIP: "10.0.0.2", destIP: "1.2.3.4", destPort: 80, output: "REJECT"},
			{name: "external to LoadBalancer IP with no endpoints", sourceIP: kpExternalClient, destIP: "1.2.3.4", destPort: 80, output: "REJECT"},
		},
	}}},
	{test: "TestClusterIPGeneral", cases: []kpCase{{
		trees: []string{"TestClusterIPGeneral"},
		flows: []kpFlow{
			{name: "simple clusterIP", sourceIP: "10.180.0.2", destIP: "172.30.0.41", destPort: 80, output: "10.180.0.1:80", masq: false},
			{name: "hairpin to cluster IP", sourceIP: "10.180.0.1", destIP: "172.30.0.41", destPort: 80, output: "10.180.0.1:80", masq: true},
			{name: "clusterIP with multiple endpoints", sourceIP: "10.180.0.2", destIP: "172.30.0.42", destPort: 80, output: "10.180.0.1:80, 10.180.2.1:80", masq: false},
			{name: "clusterIP with TargetPort", sourceIP: "10.180.0.2", destIP: "172.30.0.42", destPort: 443, output: "10.180.0.1:8443, 10.180.2.1:8443", masq: false},
			{name: "clusterIP with TCP, UDP, and SCTP on same port (TCP)", sourceIP: "10.180.0.2", protocol: "tcp", destIP: "172.30.0.42", destPort: 53, output: "10.180.0.1:5353, 10.180.2.1:5353", masq: false},
			// kube-proxy's table names this UDP flow "(TCP)" as well.
			{name: "clusterIP with TCP, UDP, and SCTP on same port (UDP)", sourceIP: "10.180.0.2", protocol: "udp", destIP: "172.30.0.42", destPort: 53, output: "10.180.0.1:53, 10.180.2.1:53", masq: false},
			{name: "clusterIP with TCP, UDP, and SCTP on same port (SCTP)", sourceIP: "10.180.0.2", protocol: "sctp", destIP: "172.30.0.42", destPort: 53, output: "10.180.0.1:53, 10.180.2.1:53", masq: false, skip: skipSCTP},
			{name: "TCP-only port does not match UDP traffic", sourceIP: "10.180.0.2", protocol: "udp", destIP: "172.30.0.42", destPort: 80, output: "REJECT"},
			{name: "svc1 does not accept svc2's ports", sourceIP: "10.180.0.2", destIP: "172.30.0.41", destPort: 443, output: "REJECT"},
			{name: "packet to unallocated cluster ip", sourceIP: "10.180.0.2", destIP: "172.30.0.50", destPort: 80, output: "DROP"},
		},
	}}},
	{test: "TestLoadBalancer", cases: []kpCase{{
		trees: []string{"TestLoadBalancer"},
		flows: []kpFlow{
			{name: "pod to cluster IP", sourceIP: "10.0.0.2", destIP: "172.30.0.41", destPort: 80, output: "10.180.0.1:80", masq: false},
			{name: "external to nodePort", sourceIP: kpExternalClient, destIP: kpNodeIP, destPort: 3001, output: "10.180.0.1:80", masq: true},
			{name: "nodePort bypasses LoadBalancerSourceRanges", sourceIP: kpExternalClientBlocked, destIP: kpNodeIP, destPort: 3001, output: "10.180.0.1:80", masq: true},
			{name: "accepted external to LB1", sourceIP: kpExternalClient, destIP: "1.2.3.4", destPort: 80, output: "10.180.0.1:80", masq: true},
			{name: "accepted external to LB2", sourceIP: kpExternalClient, destIP: "5.6.7.8", destPort: 80, output: "10.180.0.1:80", masq: true},
			{name: "blocked external to LB1", sourceIP: kpExternalClientBlocked, destIP: "1.2.3.4", destPort: 80, output: "DROP"},
			{name: "blocked external to LB2", sourceIP: kpExternalClientBlocked, destIP: "5.6.7.8", destPort: 80, output: "DROP"},
			{name: "pod to LB1 (blocked by LoadBalancerSourceRanges)", sourceIP: "10.0.0.2", destIP: "1.2.3.4", destPort: 80, output: "DROP"},
			{name: "pod to LB2 (blocked by LoadBalancerSourceRanges)", sourceIP: "10.0.0.2", destIP: "5.6.7.8", destPort: 80, output: "DROP"},
			{name: "node to LB1 (allowed by LoadBalancerSourceRanges)", sourceIP: kpNodeIP, destIP: "1.2.3.4", destPort: 80, output: "10.180.0.1:80", masq: true},
			{name: "node to LB2 (allowed by LoadBalancerSourceRanges)", sourceIP: kpNodeIP, destIP: "5.6.7.8", destPort: 80, output: "10.180.0.1:80", masq: true},
			{name: "same node to LB1, SNATted to LB1 (implicitly allowed)", sourceIP: "1.2.3.4", destIP: "1.2.3.4", destPort: 80, output: "10.180.0.1:80", masq: true, skip: skipSNAT},
			{name: "same node to LB2, SNATted to LB2 (implicitly allowed)", sourceIP: "5.6.7.8", destIP: "5.6.7.8", destPort: 80, output: "10.180.0.1:80", masq: true, skip: skipSNAT},
		},
	}}},
	{test: "TestNodePorts", cases: []kpCase{
		nodePortsCase("ipv4", "TestNodePorts/ipv4", false, false),
		nodePortsCase("ipv4, multiple nodeport-addresses", "TestNodePorts/ipv4-multiple-nodeport-addresses", false, true),
		nodePortsCase("ipv6", "TestNodePorts/ipv6", true, false),
		nodePortsCase("ipv6, multiple nodeport-addresses", "TestNodePorts/ipv6-multiple-nodeport-addresses", true, true),
	}},
	{test: "TestExternalTrafficPolicyLocal", cases: []kpCase{{
		trees: []string{"TestExternalTrafficPolicyLocal"},
		flows: []kpFlow{
			{name: "pod to cluster IP hits both endpoints, unmasqueraded", sourceIP: "10.0.0.2", destIP: "172.30.0.41", destPort: 80, output: "10.180.0.1:80, 10.180.2.1:80", masq: false},
			{name: "pod to external IP hits both endpoints, unmasqueraded", sourceIP: "10.0.0.2", destIP: kpExternalIP, destPort: 80, output: "10.180.0.1:80, 10.180.2.1:80", masq: false},
			{name: "external to external IP hits only local endpoint, unmasqueraded", sourceIP: kpExternalClient, destIP: kpExternalIP, destPort: 80, output: "10.180.2.1:80", masq: false},
			{name: "pod to LB IP hits only both endpoints, unmasqueraded", sourceIP: "10.0.0.2", destIP: "1.2.3.4", destPort: 80, output: "10.180.0.1:80, 10.180.2.1:80", masq: false},
			{name: "external to LB IP hits only local endpoint, unmasqueraded", sourceIP: kpExternalClient, destIP: "1.2.3.4", destPort: 80, output: "10.180.2.1:80", masq: false},
			{name: "pod to NodePort hits both endpoints, unmasqueraded", sourceIP: "10.0.0.2", destIP: kpNodeIP, destPort: 3001, output: "10.180.0.1:80, 10.180.2.1:80", masq: false},
			{name: "external to NodePort hits only local endpoint, unmasqueraded", sourceIP: kpExternalClient, destIP: kpNodeIP, destPort: 3001, output: "10.180.2.1:80", masq: false},
		},
	}}},
	{test: "TestExternalTrafficPolicyCluster", cases: []kpCase{{
		trees: []string{"TestExternalTrafficPolicyCluster"},
		flows: []kpFlow{
			{name: "pod to cluster IP hits both endpoints, unmasqueraded", sourceIP: "10.0.0.2", destIP: "172.30.0.41", destPort: 80, output: "10.180.0.1:80, 10.180.2.1:80", masq: false},
			{name: "pod to external IP hits both endpoints, masqueraded", sourceIP: "10.0.0.2", destIP: kpExternalIP, destPort: 80, output: "10.180.0.1:80, 10.180.2.1:80", masq: true},
			{name: "external to external IP hits both endpoints, masqueraded", sourceIP: kpExternalClient, destIP: kpExternalIP, destPort: 80, output: "10.180.0.1:80, 10.180.2.1:80", masq: true},
			{name: "pod to LB IP hits both endpoints, masqueraded", sourceIP: "10.0.0.2", destIP: "1.2.3.4", destPort: 80, output: "10.180.0.1:80, 10.180.2.1:80", masq: true},
			{name: "external to LB IP hits both endpoints, masqueraded", sourceIP: kpExternalClient, destIP: "1.2.3.4", destPort: 80, output: "10.180.0.1:80, 10.180.2.1:80", masq: true},
			{name: "pod to NodePort hits both endpoints, masqueraded", sourceIP: "10.0.0.2", destIP: kpNodeIP, destPort: 3001, output: "10.180.0.1:80, 10.180.2.1:80", masq: true},
			{name: "external to NodePort hits both endpoints, masqueraded", sourceIP: kpExternalClient, destIP: kpNodeIP, destPort: 3001, output: "10.180.0.1:80, 10.180.2.1:80", masq: true},
		},
	}}},
	{test: "TestInternalTrafficPolicy", cases: []kpCase{
		internalTrafficPolicyCase("internalTrafficPolicy is cluster", "cluster",
			kpFlow{name: "pod to ClusterIP hits all endpoints", output: "10.0.1.1:80, 10.0.1.2:80, 10.0.1.3:80", masq: false}),
		internalTrafficPolicyCase("internalTrafficPolicy is local and there is one local endpoint", "local-one",
			kpFlow{name: "pod to ClusterIP hits only local endpoint", output: "10.0.1.1:80", masq: false}),
		internalTrafficPolicyCase("internalTrafficPolicy is local and there are multiple local endpoints", "local-multiple",
			kpFlow{name: "pod to ClusterIP hits all local endpoints", output: "10.0.1.1:80, 10.0.1.2:80", masq: false}),
		internalTrafficPolicyCase("internalTrafficPolicy is local and there are no local endpoints", "local-none",
			kpFlow{name: "no endpoints", output: "DROP"}),
	}},
	{test: "TestTerminatingEndpointsTrafficPolicyLocal", cases: []kpCase{
		terminatingCase("Local", "ready endpoints exist", "ready",
			kpFlow{name: "pod to clusterIP", output: "10.0.1.1:80, 10.0.1.2:80, 10.0.1.5:80", masq: false},
			kpFlow{name: "external to LB", output: "10.0.1.1:80, 10.0.1.2:80", masq: false}),
		terminatingCase("Local", "only terminating endpoints exist", "only-terminating",
			kpFlow{name: "pod to clusterIP", output: "10.0.1.5:80", masq: false},
			kpFlow{name: "external to LB", output: "10.0.1.2:80, 10.0.1.3:80", masq: false}),
		terminatingCase("Local", "terminating endpoints on remote node", "remote-terminating",
			kpFlow{name: "pod to clusterIP", output: "10.0.1.5:80", masq: false},
			kpFlow{name: "external to LB, no locally-usable endpoints", output: "DROP"}),
		terminatingCase("Local", "no usable endpoints on any node", "none-usable",
			kpFlow{name: "pod to clusterIP, no usable endpoints", output: "REJECT"},
			kpFlow{name: "external to LB, no usable endpoints", output: "REJECT"}),
	}},
	{test: "TestTerminatingEndpointsTrafficPolicyCluster", cases: []kpCase{
		terminatingCase("Cluster", "ready endpoints exist", "ready",
			kpFlow{name: "pod to clusterIP", output: "10.0.1.1:80, 10.0.1.2:80, 10.0.1.5:80", masq: false},
			kpFlow{name: "external to LB", output: "10.0.1.1:80, 10.0.1.2:80, 10.0.1.5:80", masq: true}),
		terminatingCase("Cluster", "only terminating endpoints exist", "only-terminating",
			kpFlow{name: "pod to clusterIP", output: "10.0.1.2:80, 10.0.1.3:80, 10.0.1.5:80", masq: false},
			kpFlow{name: "external to LB", output: "10.0.1.2:80, 10.0.1.3:80, 10.0.1.5:80", masq: true}),
		terminatingCase("Cluster", "terminating endpoints on remote node", "remote-terminating",
			kpFlow{name: "pod to clusterIP", output: "10.0.1.5:80", masq: false},
			kpFlow{name: "external to LB", output: "10.0.1.5:80", masq: true}),
		terminatingCase("Cluster", "no usable endpoints on any node", "none-usable",
			kpFlow{name: "pod to clusterIP", output: "REJECT"},
			kpFlow{name: "external to LB", output: "REJECT"}),
	}},
	{test: "TestInternalExternalMasquerade", cases: []kpCase{
		{
			name:  "base",
			trees: []string{"TestInternalExternalMasquerade"},
			flows: masqueradeFlows(nil),
		},
		{
			name: "no LocalTrafficDetector",
			skip: "kube-proxy without a local traffic detector (--detect-local-mode with no pod CIDR) and without --masquerade-all: " +
				"netspec has no such mode; without Cluster.podCIDRs it masquerades all cluster IP traffic (the \"masqueradeAll, no LocalTrafficDetector\" case)",
		},
		{
			name: "masqueradeAll",
			skip: "kube-proxy's --masquerade-all with a local traffic detector: netspec has no masquerade-all option " +
				"(it masquerades all cluster IP traffic only when Cluster.podCIDRs is empty, which also drops the detector)",
		},
		{
			name:  "masqueradeAll, no LocalTrafficDetector",
			trees: []string{"TestInternalExternalMasquerade", "TestInternalExternalMasquerade/masqueradeAll-no-LocalTrafficDetector"},
			flows: masqueradeFlows(map[string]kpFlow{
				"pod to ClusterIP":                {masq: true, output: "10.180.0.1:80, 10.180.1.1:80"},
				"pod to ClusterIP with eTP:Local": {masq: true, output: "10.180.0.2:80, 10.180.1.2:80"},
				"pod to ClusterIP with iTP:Local": {masq: true, output: "10.180.0.3:80"},
				"pod to NodePort with eTP:Local":  {masq: false, output: "10.180.0.2:80"},
				"pod to LB with eTP:Local":        {masq: false, output: "10.180.0.2:80"},
			}),
		},
	}},
}

// nodePortsCase is one case of TestNodePorts: the basic flows, then the
// one to the node's secondary IP, served only when the node-port
// addresses include it.
func nodePortsCase(name, tree string, ipv6, allowAltNodeIP bool) kpCase {
	svcIP, ep1, ep2, nodeIP := "172.30.0.41", "10.180.0.1", "10.180.2.1", kpNodeIP
	podIP, external, alt := "10.0.0.2", kpExternalClient, kpNodeIPAlt
	if ipv6 {
		svcIP, ep1, ep2, nodeIP = "fd00:172:30::41", "fd00:10:180::1", "fd00:10:180::2:1", kpNodeIPv6
		podIP, external, alt = "fd00:10::2", kpExternalClientIPv6, kpNodeIPv6Alt
	}
	output := kpEndpoints(80, ep1, ep2)
	flows := []kpFlow{
		{name: "pod to cluster IP", sourceIP: podIP, destIP: svcIP, destPort: 80, output: output, masq: false},
		{name: "external to nodePort", sourceIP: external, destIP: nodeIP, destPort: 3001, output: output, masq: true},
		{name: "node to nodePort", sourceIP: nodeIP, destIP: nodeIP, destPort: 3001, output: output, masq: true},
	}
	if allowAltNodeIP {
		flows = append(flows, kpFlow{name: "external to nodePort on secondary IP", sourceIP: external, destIP: alt, destPort: 3001, output: output, masq: true})
	} else {
		flows = append(flows, kpFlow{name: "secondary nodeIP ignores NodePorts", sourceIP: external, destIP: alt, destPort: 3001, output: ""})
	}
	return kpCase{name: name, trees: []string{tree}, flows: flows}
}

// internalTrafficPolicyCase is one case of TestInternalTrafficPolicy: a
// flow from a pod to the cluster IP, and again once the endpoints are
// deleted.
func internalTrafficPolicyCase(name, tree string, flow kpFlow) kpCase {
	flow.sourceIP, flow.destIP, flow.destPort = "10.0.0.2", "172.30.1.1", 80
	return kpCase{
		name:  name,
		trees: []string{"TestInternalTrafficPolicy/" + tree},
		flows: []kpFlow{flow},
		after: []kpFlow{{name: "endpoints deleted", sourceIP: "10.0.0.2", destIP: "172.30.1.1", destPort: 80, output: "REJECT"}},
	}
}

// terminatingCase is one case of TestTerminatingEndpointsTrafficPolicy*:
// a pod to the cluster IP and an external client to the LoadBalancer IP,
// with the endpoints and again once they are deleted.
func terminatingCase(policy, name, tree string, pod, external kpFlow) kpCase {
	pod.sourceIP, pod.destIP, pod.destPort = "10.0.0.2", "172.30.1.1", 80
	external.sourceIP, external.destIP, external.destPort = kpExternalClient, "1.2.3.4", 80
	return kpCase{
		name:  name,
		trees: []string{"TestTerminatingEndpointsTrafficPolicy" + policy + "/" + tree},
		flows: []kpFlow{pod, external},
		after: []kpFlow{
			{name: "pod to clusterIP after endpoints deleted", sourceIP: "10.0.0.2", destIP: "172.30.1.1", destPort: 80, output: "REJECT"},
			{name: "external to LB after endpoints deleted", sourceIP: kpExternalClient, destIP: "1.2.3.4", destPort: 80, output: "REJECT"},
		},
	}
}

// masqueradeFlows are TestInternalExternalMasquerade's flows, with a
// case's overrides (output and masq) by flow name.
func masqueradeFlows(overrides map[string]kpFlow) []kpFlow {
	const pod, node, ext = "10.0.0.2", kpNodeIP, kpExternalClient
	svc1 := "10.180.0.1:80, 10.180.1.1:80"
	svc2 := "10.180.0.2:80, 10.180.1.2:80"
	svc3 := "10.180.0.3:80, 10.180.1.3:80"
	flows := []kpFlow{
		{name: "pod to ClusterIP", sourceIP: pod, destIP: "172.30.0.41", destPort: 80, output: svc1, masq: false},
		{name: "pod to NodePort", sourceIP: pod, destIP: node, destPort: 3001, output: svc1, masq: true},
		{name: "pod to LB", sourceIP: pod, destIP: "1.2.3.4", destPort: 80, output: svc1, masq: true},
		{name: "node to ClusterIP", sourceIP: node, destIP: "172.30.0.41", destPort: 80, output: svc1, masq: true},
		{name: "node to NodePort", sourceIP: node, destIP: node, destPort: 3001, output: svc1, masq: true},
		{name: "node to LB", sourceIP: node, destIP: "1.2.3.4", destPort: 80, output: svc1, masq: true},
		{name: "external to ClusterIP", sourceIP: ext, destIP: "172.30.0.41", destPort: 80, output: svc1, masq: true},
		{name: "external to NodePort", sourceIP: ext, destIP: node, destPort: 3001, output: svc1, masq: true},
		{name: "external to LB", sourceIP: ext, destIP: "1.2.3.4", destPort: 80, output: svc1, masq: true},
		{name: "pod to ClusterIP with eTP:Local", sourceIP: pod, destIP: "172.30.0.42", destPort: 80, output: svc2, masq: false},
		{name: "pod to NodePort with eTP:Local", sourceIP: pod, destIP: node, destPort: 3002, output: svc2, masq: false},
		{name: "pod to LB with eTP:Local", sourceIP: pod, destIP: "5.6.7.8", destPort: 80, output: svc2, masq: false},
		{name: "node to ClusterIP with eTP:Local", sourceIP: node, destIP: "172.30.0.42", destPort: 80, output: svc2, masq: true},
		// kube-proxy's flow goes to port 3001 (svc1's node port), so its
		// output is svc1's endpoints.
		{name: "node to NodePort with eTP:Local", sourceIP: node, destIP: node, destPort: 3001, output: svc1, masq: true},
		{name: "node to LB with eTP:Local", sourceIP: node, destIP: "5.6.7.8", destPort: 80, output: svc2, masq: true},
		{name: "external to ClusterIP with eTP:Local", sourceIP: ext, destIP: "172.30.0.42", destPort: 80, output: svc2, masq: true},
		{name: "external to NodePort with eTP:Local", sourceIP: ext, destIP: node, destPort: 3002, output: "10.180.0.2:80", masq: false},
		{name: "external to LB with eTP:Local", sourceIP: ext, destIP: "5.6.7.8", destPort: 80, output: "10.180.0.2:80", masq: false},
		{name: "pod to ClusterIP with iTP:Local", sourceIP: pod, destIP: "172.30.0.43", destPort: 80, output: "10.180.0.3:80", masq: false},
		{name: "pod to NodePort with iTP:Local", sourceIP: pod, destIP: node, destPort: 3003, output: svc3, masq: true},
		{name: "pod to LB with iTP:Local", sourceIP: pod, destIP: "9.10.11.12", destPort: 80, output: svc3, masq: true},
		{name: "node to ClusterIP with iTP:Local", sourceIP: node, destIP: "172.30.0.43", destPort: 80, output: "10.180.0.3:80", masq: true},
		{name: "node to NodePort with iTP:Local", sourceIP: node, destIP: node, destPort: 3003, output: svc3, masq: true},
		{name: "node to LB with iTP:Local", sourceIP: node, destIP: "9.10.11.12", destPort: 80, output: svc3, masq: true},
		{name: "external to ClusterIP with iTP:Local", sourceIP: ext, destIP: "172.30.0.43", destPort: 80, output: "10.180.0.3:80", masq: true},
		{name: "external to NodePort with iTP:Local", sourceIP: ext, destIP: node, destPort: 3003, output: svc3, masq: true},
		{name: "external to LB with iTP:Local", sourceIP: ext, destIP: "9.10.11.12", destPort: 80, output: svc3, masq: true},
	}
	applied := 0
	for i, f := range flows {
		if o, ok := overrides[f.name]; ok {
			flows[i].output, flows[i].masq = o.output, o.masq
			applied++
		}
	}
	if applied != len(overrides) {
		panic(fmt.Sprintf("masqueradeFlows: %d of %d overrides name no flow", len(overrides)-applied, len(overrides)))
	}
	return flows
}

// kpTopology is the network of one case: see TestKubeProxyFlows.
type kpTopology struct {
	net    *testnet.Net
	node   *testnet.NS
	client *testnet.NS
	pods   map[string]*testnet.NS // by address: local and remote endpoints, pod sources
	// nodeAddrs are test-node's own addresses: what an endpoint sees of a
	// masqueraded connection.
	nodeAddrs map[string]bool
}

// runKubeProxyCase builds c's tree and topology, installs the plan with
// install and replays c's flows; then, when c has flows for after the
// EndpointSlices are deleted, deletes them, installs again and replays
// those.
func runKubeProxyCase(t *testing.T, c kpCase, dataplane string, inst installer) {
	dir := t.TempDir()
	if err := kpCopyFiles(filepath.Join("testdata", "kubeproxy", "common"), dir); err != nil {
		t.Fatal(err)
	}
	for _, tree := range c.trees {
		if err := kpCopyFiles(filepath.Join("testdata", "kubeproxy", tree), dir); err != nil {
			t.Fatal(err)
		}
	}
	tree, p := kpCompile(t, dir)
	topo := newKPTopology(t, tree, append(slices.Clone(c.flows), c.after...))
	install := inst(t, topo.node)
	install(t, p)
	topo.replay(t, dataplane, c.flows)
	if len(c.after) == 0 {
		return
	}
	if err := os.Remove(filepath.Join(dir, "endpointslices.yaml")); err != nil {
		t.Fatal(err)
	}
	_, p = kpCompile(t, dir)
	install(t, p)
	t.Run("EndpointSlices deleted", func(t *testing.T) { topo.replay(t, dataplane, c.after) })
}

// kpCopyFiles copies the files (not the directories) of directory from
// into directory to, replacing those of the same name.
func kpCopyFiles(from, to string) error {
	entries, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// kpCompile loads, validates and compiles the tree at dir for test-node;
// warnings are fine, errors fail the test.
func kpCompile(t *testing.T, dir string) (*schema.Tree, *plan.Plan) {
	t.Helper()
	tree, err := schema.Load(dir, schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	checked := compiler.Validate(tree.Objects, nil, tree)
	diags := append(tree.Diags, checked.Diags...)
	if diags.Errors() > 0 {
		t.Fatalf("the tree is invalid:\n%v", diags)
	}
	p, err := compiler.Compile(tree.Objects, checked, kpNodeName)
	if err != nil {
		t.Fatal(err)
	}
	return tree, p
}

// newKPTopology builds the namespaces of a case: test-node, the router and
// the external client, upstream, the remote router, a namespace with
// servers for each endpoint address of the tree's EndpointSlices, and one
// for each pod address that flows send from.
func newKPTopology(t *testing.T, tree *schema.Tree, flows []kpFlow) *kpTopology {
	t.Helper()
	n := testnet.New(t, "kubeproxy")
	topo := &kpTopology{net: n, pods: map[string]*testnet.NS{}, nodeAddrs: map[string]bool{}}
	topo.node, topo.client = n.NS("test-node"), n.NS("client")
	router, upstream, remote := n.NS("router"), n.NS("upstream"), n.NS("remote")

	nodeCIDRs := []string{kpNodeIP + "/24", kpNodeIPAlt + "/24", kpExternalIP + "/24", kpNodeIPv6 + "/64", kpNodeIPv6Alt + "/64"}
	testnet.Link(topo.node, nodeCIDRs, router, []string{"192.168.0.1/24", "2001:db8::ff/64"})
	testnet.Link(router, []string{"203.0.113.1/24", "2600:5200::ff/64"},
		topo.client, []string{kpExternalClient + "/24", kpExternalClientBlocked + "/24", kpExternalClientIPv6 + "/64"})
	upstreamCIDRs := []string{"198.18.0.1/24", "fd00:198:18::1/64"}
	testnet.Link(topo.node, upstreamCIDRs, upstream, []string{"198.18.0.2/24", "fd00:198:18::2/64"})
	remoteCIDRs := []string{"198.19.0.1/24", "fd00:198:19::1/64"}
	testnet.Link(topo.node, remoteCIDRs, remote, []string{"198.19.0.2/24", "fd00:198:19::2/64"})
	for _, cidr := range slices.Concat(nodeCIDRs, upstreamCIDRs, remoteCIDRs, []string{"169.254.1.1/32"}) {
		topo.nodeAddrs[netip.MustParsePrefix(cidr).Addr().String()] = true
	}

	topo.client.Route("default", "203.0.113.1")
	topo.client.Route("default", "2600:5200::ff")
	router.Forwarding()
	router.Route("default", kpNodeIP)
	router.Route("default", kpNodeIPv6)
	topo.node.Forwarding()
	topo.node.Route("203.0.113.0/24", "192.168.0.1")
	topo.node.Route("2600:5200::/64", "2001:db8::ff")
	topo.node.Route("default", "198.18.0.2")
	topo.node.Route("default", "fd00:198:18::2")
	remote.Forwarding()
	remote.Route("default", "198.19.0.1")
	remote.Route("default", "fd00:198:19::1")
	upstream.Route("default", "198.18.0.1")
	upstream.Route("default", "fd00:198:18::1")
	var locals []string
	for _, cidr := range kpUpstreamCIDRs {
		locals = append(locals, "route add local "+cidr+" dev lo")
	}
	upstream.IP(locals...)
	// Binding to an address of a local route is allowed for IPv4, and
	// for IPv6 only with non-local binding.
	upstream.Sysctl("net.ipv6.ip_nonlocal_bind", "1")

	// Endpoints: every address of every EndpointSlice, local when an
	// endpoint with it names test-node, with a server on each port.
	ports := map[string][]int{} // by address
	local := map[string]bool{}
	var addrs []string
	for _, o := range tree.Objects {
		s := o.EndpointSlice
		if s == nil {
			continue
		}
		for _, ep := range s.Endpoints {
			for _, a := range ep.Addresses {
				if _, ok := ports[a]; !ok {
					addrs = append(addrs, a)
					ports[a] = nil
				}
				local[a] = local[a] || ep.NodeName == kpNodeName
				for _, p := range s.Ports {
					if !slices.Contains(ports[a], int(p.Port)) {
						ports[a] = append(ports[a], int(p.Port))
					}
				}
			}
		}
	}
	for _, a := range addrs {
		host := topo.node
		if !local[a] {
			host = remote
			ip, via := netip.MustParseAddr(a), "198.19.0.2"
			if ip.Is6() {
				via = "fd00:198:19::2"
			}
			topo.node.Route(netip.PrefixFrom(ip, ip.BitLen()).String(), via)
		}
		ns := topo.addPod(t, host, a)
		for _, p := range ports[a] {
			name := net.JoinHostPort(a, strconv.Itoa(p))
			ns.Serve(t, name, name)
		}
	}

	// Sources and the servers that stand for a leak or for the node.
	served := map[string]bool{}
	for _, f := range flows {
		if f.skip != "" {
			continue
		}
		target := net.JoinHostPort(f.destIP, strconv.Itoa(f.destPort))
		switch {
		case topo.nodeAddrs[f.sourceIP], f.sourceIP == kpExternalClient, f.sourceIP == kpExternalClientBlocked, f.sourceIP == kpExternalClientIPv6:
		case topo.pods[f.sourceIP] != nil:
			if !local[f.sourceIP] && slices.Contains(addrs, f.sourceIP) {
				t.Fatalf("flow %q: source %s is an endpoint of another node; only this node's pods can be sources", f.name, f.sourceIP)
			}
		default:
			topo.addPod(t, topo.node, f.sourceIP)
		}
		if served[target] {
			continue
		}
		served[target] = true
		switch {
		case f.output == "":
			topo.node.Serve(t, kpNodeName, target)
		case kpOwnedByUpstream(f.destIP):
			upstream.Serve(t, "upstream", target)
		}
	}
	return topo
}

// kpOwnedByUpstream reports whether ip is one of upstream's addresses.
func kpOwnedByUpstream(ip string) bool {
	a := netip.MustParseAddr(ip)
	for _, cidr := range kpUpstreamCIDRs {
		if netip.MustParsePrefix(cidr).Contains(a) {
			return true
		}
	}
	return false
}

// addPod makes a namespace with address addr (a /32 or /128), linked to
// host: host routes addr to the link, and the pod's default route is
// host's link-local end (169.254.1.1, fe80::1), as CNI plugins such as
// Calico do; no address of the pod's network is spent on the link.
func (topo *kpTopology) addPod(t *testing.T, host *testnet.NS, addr string) *testnet.NS {
	t.Helper()
	ip := netip.MustParseAddr(addr)
	ns := topo.net.NS("pod-" + addr)
	topo.pods[addr] = ns
	hostDev, podDev := testnet.Link(host, nil, ns, nil)
	if ip.Is4() {
		host.IP("addr add 169.254.1.1/32 dev "+hostDev+" scope link", "route add "+addr+"/32 dev "+hostDev)
		ns.IP("addr add "+addr+"/32 dev "+podDev, "route add 169.254.1.1 dev "+podDev+" scope link", "route add default via 169.254.1.1 dev "+podDev)
		return ns
	}
	host.AddAddr(hostDev, "fe80::1/64")
	host.IP("route add " + addr + "/128 dev " + hostDev)
	ns.AddAddr(podDev, addr+"/128")
	ns.IP("route add default via fe80::1 dev " + podDev)
	return ns
}

// source returns the namespace a flow sends from.
func (topo *kpTopology) source(f kpFlow) *testnet.NS {
	switch {
	case topo.nodeAddrs[f.sourceIP]:
		return topo.node
	case topo.pods[f.sourceIP] != nil:
		return topo.pods[f.sourceIP]
	}
	return topo.client
}

// dial makes one new connection (TCP) or exchange (UDP) of flow f and
// returns the answer, "refused", "timeout" or "error: …".
func (topo *kpTopology) dial(f kpFlow, timeout time.Duration) string {
	ns := topo.source(f)
	target := net.JoinHostPort(f.destIP, strconv.Itoa(f.destPort))
	if f.protocol == "udp" {
		return ns.DialUDPFrom(net.JoinHostPort(f.sourceIP, "0"), target, timeout)
	}
	return ns.DialTCPFrom(f.sourceIP, target, timeout)
}

// replay runs each flow as a sub-test and checks kube-proxy's expected
// output and masquerade.
func (topo *kpTopology) replay(t *testing.T, dataplane string, flows []kpFlow) {
	for _, f := range flows {
		t.Run(f.name, func(t *testing.T) {
			if f.skip != "" {
				t.Skipf("SKIPPED: %s", f.skip)
			}
			if dataplane == "ipvs" {
				_, flow, _ := strings.Cut(t.Name(), "/ipvs/")
				if ipvsLocalOnly[flow] {
					t.Skipf("SKIPPED for IPVS: %s", skipIPVSLocal)
				}
			}
			proto := strings.ToUpper(cmp.Or(f.protocol, "tcp"))
			what := fmt.Sprintf("%s from %s to %s", proto, f.sourceIP, net.JoinHostPort(f.destIP, strconv.Itoa(f.destPort)))
			switch f.output {
			case "REJECT":
				if got := topo.dial(f, refusedWait); got != "refused" {
					t.Errorf("%s: got %q, want refused within %v (kube-proxy: REJECT)", what, got, refusedWait)
				}
			case "DROP":
				if got := topo.dial(f, dropWait); got != "timeout" {
					t.Errorf("%s: got %q, want no answer within %v (kube-proxy: DROP)", what, got, dropWait)
				}
			default:
				topo.checkAnswers(t, what, f)
			}
		})
	}
}

// checkAnswers dials f 20 times per expected server, stopping at the
// first connection nobody answers, and checks that each expected server
// and no other answered, and what source address each saw.
func (topo *kpTopology) checkAnswers(t *testing.T, what string, f kpFlow) {
	t.Helper()
	want := []string{kpNodeName} // "": the node's own socket
	if f.output != "" {
		want = strings.Split(f.output, ", ")
	}
	sort.Strings(want)
	n := 20 * len(want)
	seen := map[string]int{}       // answers per server
	clients := map[string]string{} // a client address each server saw
	for i := range n {
		got := topo.dial(f, answerWait)
		name, client, ok := strings.Cut(got, " ")
		if !ok || strings.Contains(client, " ") {
			t.Errorf("%s: connection %d of %d: got %q, want an answer from one of %v (kube-proxy: %q)", what, i+1, n, got, want, f.output)
			return
		}
		seen[name]++
		if prev, ok := clients[name]; !ok || topo.masqWrong(f, prev) == "" {
			clients[name] = client
		}
	}
	var got []string
	for name := range seen {
		got = append(got, name)
	}
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Errorf("%s: answered by %v over %d connections, want each of %v and no other (kube-proxy: %q)", what, seen, n, want, f.output)
		return
	}
	for _, name := range got {
		if msg := topo.masqWrong(f, clients[name]); msg != "" {
			t.Errorf("%s: %s saw the client as %s, want %s", what, name, clients[name], msg)
		}
	}
}

// masqWrong says what the client address an endpoint saw of flow f should
// have been, or "" when it is right.
func (topo *kpTopology) masqWrong(f kpFlow, client string) string {
	switch {
	case f.masq && !topo.nodeAddrs[client]:
		return "an address of test-node (kube-proxy: masqueraded)"
	case !f.masq && client != f.sourceIP:
		return f.sourceIP + " (kube-proxy: not masqueraded)"
	}
	return ""
}

// TestParseShard: NETSPEC_KPFLOWS_SHARD takes I/N with 0 <= I < N, and
// nothing else, so that a mistyped shard fails rather than running no
// case or every case.
func TestParseShard(t *testing.T) {
	for _, tc := range []struct {
		in            string
		shard, shards int
		wantErr       bool
	}{
		{in: "", shard: 0, shards: 1},
		{in: "0/2", shard: 0, shards: 2},
		{in: "1/2", shard: 1, shards: 2},
		{in: "2/2", wantErr: true},
		{in: "-1/2", wantErr: true},
		{in: "0/0", wantErr: true},
		{in: "1", wantErr: true},
		{in: "a/b", wantErr: true},
	} {
		shard, shards, err := parseShard(tc.in)
		if (err != nil) != tc.wantErr || err == nil && (shard != tc.shard || shards != tc.shards) {
			t.Errorf("parseShard(%q) = %d, %d, %v; want %d, %d, error %v", tc.in, shard, shards, err, tc.shard, tc.shards, tc.wantErr)
		}
	}
}
