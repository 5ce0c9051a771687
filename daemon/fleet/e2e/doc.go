// Package e2e holds the end-to-end tests of a netspec fleet on one
// machine; it has no code of its own outside its tests.
//
// Each test builds a throwaway fleet with internal/testnet: eight node
// network namespaces joined through a Linux bridge in a "lan" namespace
// (192.0.2.0/24), each node with its pods in namespaces of their own behind
// it (10.244.N.0/24, routed by every other node through the node's lan
// address), and in every pod a server that says who it is and answers
// readiness probes. A generated tree names the nodes, pods and Services;
// every node runs its own `netspec watch` process (the netspec binary is
// built once per test run) inside its namespace, with its own state dir.
// The tests stop servers, stop and kill agents, cut links, start intruders, and
// prove with real connections through every node's kernel which pods
// still receive traffic.
//
// The scenarios run one by one, except the cut-off node's, which mostly
// waits for memberlist and runs beside them, its fleet in namespaces of
// its own (scenario_test.go, oneByOne).
//
// The tests need root, ip(8) and nft; without them they skip, saying so.
// Most scenarios run the agents with gossip (watch --gossip-listen); a pod
// server that stops is tested with and without.
package e2e
