// Package render turns a compiled Plan into the text artifacts that are
// committed and reviewed: the nftables ruleset, the IPVS table, DNS zone
// files, service environment files and plan.json. It is pure: the same Plan
// always gives the same bytes.
//
// Not implemented yet: the compiler and renderer are the next issue.
package render
