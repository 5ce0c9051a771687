package render

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
)

// Endpoint maps: how a chain picks one of its endpoints with one rule that
// never changes while the endpoints do.
//
// A chain that picks among k endpoints (a "pick": the service chain, the
// external chain of policy Cluster when it has endpoints of its own, the
// local chain) draws `numgen random mod 2520`, adds its own offset, and
// looks the sum up in an interval map of its bucket, which holds, from the
// offset on, one key range per endpoint mapping to its address and port:
//
//	meta l4proto tcp dnat ip to numgen random mod 2520 offset 1234560000 map @endpoints-3f
//	map endpoints-3f { … 1234560000-1234560839 : 10.244.1.10 . 8080, … }
//
// When the endpoints change, only elements of that map change, and no
// rule: the kernel re-validates the whole table on any commit that adds a
// rule holding dnat (or a jump, or a lookup), which takes tens of
// milliseconds at 10,000 services, and element changes it does not
// re-validate. 2520 is the least common multiple of 1…10, so up to ten
// endpoints (and 12, 14, 15, 18, 20, …) each get exactly the same share;
// other counts differ by at most one key in 2520.
//
// The picks are spread over pickBuckets maps by a hash of the chain's
// name, and within a map the offset is the hash too (pickStride keys
// apart), so that adding or removing a service changes no other pick's
// offset, except on a rare hash collision. One map for all picks would be
// simpler, but the kernel walks a map's elements for every chain that
// binds it (super-linear load); a map per pick would make it walk the
// table's list of sets for every rule (also super-linear).
//
// ClientIP affinity needs a rule per endpoint (each refreshes its own
// affinity set), and so does a pick of more endpoints than pickStride
// keys: those keep the `numgen random mod k == 0` rules (appendPickRules).
const (
	pickModulus = 2520
	pickStride  = 10000
	pickBuckets = 256
	// pickSlots is how many picks fit in one map's 32-bit key space.
	pickSlots = (1<<32 - 1) / pickStride
)

// nftPick is a chain that picks one of its endpoints through an endpoint
// map.
type nftPick struct {
	chain string
	// eps are the endpoints, n of them. A Memo lets them go once the
	// pick's endpoint map holds them, and reads them back from the map
	// when it builds the map anew (memoBucket.readEndpoints).
	eps  []netip.AddrPort
	home uint32 // the slot the chain's name hashes to
	slot uint32 // offset / pickStride: home, or past it on a collision

	// In a Memo: the Service that has the pick, the slot its text was
	// written with, and whether it left the table.
	owner *memoSvc
	shown uint32

	n      uint16 // at most pickStride
	bucket uint8  // of pickBuckets
	gone   bool
}

// offset is the first key of the pick's ranges.
func (p *nftPick) offset() uint32 { return p.slot * pickStride }

// modulus is what numgen draws from: pickModulus, or one key per endpoint
// when there are more endpoints than that.
func (p *nftPick) modulus() int { return max(pickModulus, int(p.n)) }

// addPick registers the pick of chain among eps, when it uses a map:
// without affinity, of 1 to pickStride endpoints.
func (t *nftTable) addPick(chain string, eps []nftEndpoint, affinity bool) {
	if chain == "" || affinity || len(eps) == 0 || len(eps) > pickStride {
		return
	}
	h := fnv.New64a()
	h.Write([]byte(chain))
	sum := h.Sum64()
	home := uint32((sum / pickBuckets) % pickSlots)
	p := &nftPick{chain: chain, n: uint16(len(eps)), bucket: uint8(sum % pickBuckets), home: home, slot: home}
	p.eps = make([]netip.AddrPort, len(eps))
	for i := range eps {
		p.eps[i] = eps[i].addr
	}
	t.picks = append(t.picks, p)
}

// comparePicks orders picks by bucket, slot and chain, comparing each only
// when the ones before it are equal.
func comparePicks(a, b *nftPick) int {
	if c := cmp.Compare(a.bucket, b.bucket); c != 0 {
		return c
	}
	if c := cmp.Compare(a.slot, b.slot); c != 0 {
		return c
	}
	return cmp.Compare(a.chain, b.chain)
}

// assignPicks gives every pick a free slot of its bucket (assignBucket),
// and orders the buckets for writing.
func (t *nftTable) assignPicks() {
	slices.SortFunc(t.picks, comparePicks)
	t.pickOf = make(map[string]*nftPick, len(t.picks))
	t.eachPickBucket(func(picks []*nftPick) {
		assignBucket(picks)
		for _, p := range picks {
			t.pickOf[p.chain] = p
		}
	})
}

// assignBucket gives each pick of one bucket, sorted by comparePicks, a
// free slot: the one it holds (its hash slot), or on a collision the next
// free one, in order, so that the outcome is deterministic; then sorts
// the bucket by slot.
func assignBucket(bucket []*nftPick) {
	used := make(map[uint32]bool, len(bucket))
	for _, p := range bucket {
		for used[p.slot] {
			p.slot = (p.slot + 1) % pickSlots
		}
		used[p.slot] = true
	}
	slices.SortFunc(bucket, func(a, b *nftPick) int { return cmp.Compare(a.slot, b.slot) })
}

// pickMapNames are the names of the endpoint maps of the buckets, made
// once: every chain that picks has one in its rule.
var pickMapNames = func() (names [pickBuckets]string) {
	for b := range names {
		names[b] = fmt.Sprintf("endpoints-%02x", b)
	}
	return names
}()
