// Package treediff is the tree diff: what changing one tree into another
// changes on the nodes, compared as compiled Plans rather than as files
// (Services, their ports and endpoints, the endpoints each node forwards
// to, DNS records, env variables, node and cluster settings, and per node
// the nftables chains and set elements that change, counted by diffing the
// two nftables models render builds). Diff computes it;
// WriteText, WriteMarkdown and WriteJSON print it. `netspec diff` shows it
// for review, `netspec plan` and `apply` for one node.
//
// The package is pure: it takes Plans (package plan), renders them with the
// pure package render, and does no I/O beyond the writers it is given.
package treediff
