package render

import (
	"netspec.dev/netspec/render/nftmodel"
)

// Readable forms of the renderer's appenders, for tests.

// pickRules is pickRulesOf as a list of rule lines.
func pickRules(fam nftFamily, eps []nftEndpoint, affinity bool) []string {
	var rules []string
	for _, r := range pickRulesOf(nftmodel.TCP, eps, affinity) {
		rules = append(rules, r.Text(fam.model))
	}
	return rules
}

// appendPickMaps appends the text of the table's endpoint maps.
func (t *nftTable) appendPickMaps(b []byte) []byte {
	t.eachPickBucket(func(picks []*nftPick) { b = appendPickMap(b, t.fam, picks) })
	return b
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

// appendPickMap appends the endpoint map of one bucket's picks, sorted by
// slot (pickMapSet).
func appendPickMap(b []byte, fam nftFamily, picks []*nftPick) []byte {
	return pickMapSet(fam, picks).AppendText(b, fam.model)
}
