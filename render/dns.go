package render

import (
	"bytes"
	"strconv"
	"strings"

	"netspec.dev/netspec/plan"
)

// ZoneFile renders one zone as an RFC 1035 master file that any standard
// authoritative server (CoreDNS file, BIND, Knot) loads:
//
//	; zone cluster.local — written by netspec from the tree; do not edit
//	$ORIGIN cluster.local.
//	$TTL 5
//	@	5	IN	SOA	localhost. hostmaster.cluster.local. 1 7200 1800 86400 5
//	@	5	IN	NS	localhost.
//	dns-version	28800	IN	TXT	"1.1.0"
//	web.shop.svc	5	IN	A	10.96.0.10
//
// The SOA comes first, then the NS records of the apex, then every other
// record in the plan's order. Owner names inside the zone are written
// relative to $ORIGIN ("@" for the apex), others fully qualified. Every
// record carries its TTL explicitly; $TTL is the SOA's (else the first
// record's) and only a default for hand edits. Fields are separated by
// tabs, so that a new long name changes no other line.
//
// Record names and data are written as the plan holds them: presentation
// form, with fully qualified (dot-terminated) names in the data.
func ZoneFile(z plan.Zone) []byte {
	origin := z.Name
	if !strings.HasSuffix(origin, ".") {
		origin += "."
	}
	// The records' own bytes bound the file's size: it is built without
	// growing and kept without slack (a daemon keeps its zones' files:
	// FilesMemo).
	size := 3 * len(origin)
	for _, r := range z.Records {
		size += len(r.Name) + len(r.Type) + len(r.Data) + len("\t4294967295\tIN\t\t\n")
	}
	b := make([]byte, 0, size+128)
	b = append(b, "; zone "...)
	b = append(b, strings.TrimSuffix(origin, ".")...)
	b = append(b, " — written by netspec from the tree; do not edit\n$ORIGIN "...)
	b = append(b, origin...)
	b = append(b, "\n$TTL "...)
	b = strconv.AppendUint(b, uint64(defaultTTL(z.Records)), 10)
	b = append(b, '\n')

	// The SOA, the NS records of the apex, then the rest.
	rank := func(r plan.Record) int {
		switch {
		case r.Type == "SOA":
			return 0
		case r.Type == "NS" && strings.EqualFold(r.Name, origin):
			return 1
		}
		return 2
	}
	for pass := range 3 {
		for _, r := range z.Records {
			if rank(r) == pass {
				b = appendRecord(b, origin, r)
			}
		}
	}
	return clip(b)
}

// clip returns b without its spare capacity, copying it when more than an
// eighth would be left unused.
func clip(b []byte) []byte {
	if cap(b)-len(b) > len(b)/8 {
		return bytes.Clone(b)
	}
	return b[:len(b):len(b)]
}

// defaultTTL is the TTL written as $TTL: the SOA's, else the first
// record's, else 0.
func defaultTTL(rs []plan.Record) uint32 {
	for _, r := range rs {
		if r.Type == "SOA" {
			return r.TTL
		}
	}
	if len(rs) > 0 {
		return rs[0].TTL
	}
	return 0
}

// appendRecord appends one record's line.
func appendRecord(b []byte, origin string, r plan.Record) []byte {
	b = append(b, ownerName(r.Name, origin)...)
	b = append(b, '\t')
	b = strconv.AppendUint(b, uint64(r.TTL), 10)
	b = append(b, "\tIN\t"...)
	b = append(b, r.Type...)
	b = append(b, '\t')
	b = append(b, r.Data...)
	return append(b, '\n')
}

// ownerName writes name relative to origin when it is origin itself ("@")
// or below it, and fully qualified otherwise. A relative name that would
// read as a directive or as "@" is written fully qualified too.
func ownerName(name, origin string) string {
	ln, lo := strings.ToLower(name), strings.ToLower(origin)
	if ln == lo {
		return "@"
	}
	if !strings.HasSuffix(ln, "."+lo) || origin == "." {
		return name
	}
	rel := name[:len(name)-len(origin)-1]
	if rel == "" || rel == "@" || strings.HasPrefix(rel, "$") || strings.HasSuffix(rel, `\`) {
		// "\." before the origin is an escaped dot, not a label boundary.
		return name
	}
	return rel
}
