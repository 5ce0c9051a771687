package nft

import (
	"fmt"

	"github.com/google/nftables"
)

// TableSummary counts what one of netspec's tables holds in the kernel:
// what `netspec status` shows of a node whose daemon does not answer.
type TableSummary struct {
	Family   string // "ip" or "ip6"
	Present  bool   // the table exists
	Chains   int
	Sets     int // named sets and maps
	Elements int // of the named sets and maps; an interval counts once
}

// Summarize reads netspec's tables (ip, then ip6) from k and counts their
// chains, named sets and elements. It only reads.
func Summarize(k Kernel) ([]TableSummary, error) {
	var out []TableSummary
	for _, f := range families {
		s := TableSummary{Family: familyName(f)}
		tables, err := k.Tables(f)
		if err != nil {
			return nil, fmt.Errorf("nftables: list %s tables: %w", s.Family, err)
		}
		var t *nftables.Table
		for _, x := range tables {
			if x.Name == TableName {
				t = x
			}
		}
		if t == nil {
			out = append(out, s)
			continue
		}
		s.Present = true
		chains, err := k.Chains(f)
		if err != nil {
			return nil, fmt.Errorf("nftables: list %s chains: %w", s.Family, err)
		}
		for _, ch := range chains {
			if ch.Table != nil && ch.Table.Name == TableName {
				s.Chains++
			}
		}
		sets, err := k.Sets(t)
		if err != nil {
			return nil, fmt.Errorf("nftables: list sets of %s %s: %w", s.Family, TableName, err)
		}
		for _, set := range sets {
			if set.Anonymous {
				continue
			}
			s.Sets++
			els, err := k.Elements(f, TableName, set.Name)
			if err != nil {
				return nil, fmt.Errorf("nftables: elements of set %s: %w", set.Name, err)
			}
			for _, e := range els {
				if !e.IntervalEnd {
					s.Elements++
				}
			}
		}
		out = append(out, s)
	}
	return out, nil
}
