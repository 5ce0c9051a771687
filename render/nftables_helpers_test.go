package render

import (
	"strings"
)

// Readable forms of the renderer's appenders, for tests.

// pickRules is appendPickRules as a list of rules.
func pickRules(fam nftFamily, eps []nftEndpoint, affinity bool) []string {
	var rules []string
	for line := range strings.Lines(string(appendPickRules(nil, fam, "tcp", eps, affinity))) {
		rules = append(rules, strings.TrimSuffix(strings.TrimPrefix(line, "\t\t"), "\n"))
	}
	return rules
}

// nftHash is HASH8 of a name: the start of the base32 SHA-256 of its
// readable part, as kube-proxy's. It keeps names unique when the readable
// part is truncated or sanitized, and tells similar names apart at a glance.
func nftHash(readable string) string {
	h := hash8([]byte(readable))
	return string(h[:])
}

// nftName is prefix + hash + "-" + readable, with the characters nft does
// not take in a bare name replaced (":" of IPv6 addresses by ".", others by
// "_") and cut to nftNameMax bytes.
func nftName(prefix, hash, readable string) string {
	return string(appendNFTName(nil, prefix, []byte(hash), []byte(readable)))
}
