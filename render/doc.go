// Package render turns a compiled Plan into the artifacts that are
// committed and reviewed: the nftables ruleset, which it builds as a model
// (package nftmodel, NFTablesModel and NFTablesIPVSModel) that the applier
// installs and prints as nftables.nft; DNS zone files, service
// environment files, the pods' resolv.conf per namespace (and, with the
// Cluster's dnsAddress, the systemd-resolved recipes) and plan.json; with the IPVS data plane, the IPVS
// table, which it builds as a model (package ipvsmodel, IPVSTable) that the
// applier installs and prints as ipvs.txt; and a plan.Delta as the line a
// node appends to its record of the applied plan (PlanDeltaJSON). It is
// pure: the same Plan always gives the same bytes.
package render
