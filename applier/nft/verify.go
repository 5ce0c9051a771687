package nft

import (
	"fmt"
	"slices"
	"sync"

	"github.com/google/nftables"
)

// The check after a write (verifyWritten) reads every set's elements back
// for a table changed in place (a table replaced whole from its model is
// checked against what was sent instead, sent.go), because
// google/nftables v0.3.0 can drop elements silently. At 10,000 services
// that is about 80,000 elements, and working out what differs took as
// long as reading them. So the check is done in two steps: tableMatches
// answers only "exactly what was sent?", reading the sets on one socket
// while it compares on another goroutine, against the element keys that
// modelChecks encodes from the model a set at a time; only when it says
// no does diffKernelTable work out what differs, for the error message.

// sortedElementKeys are the ElementKeys of elems, sorted: two sets hold the
// same elements when these are equal.
func sortedElementKeys(elems []nftables.SetElement) []string {
	keys := make([]string, len(elems))
	for i := range elems {
		keys[i] = ElementKey(elems[i])
	}
	slices.Sort(keys)
	return keys
}

// tableChecks is what tableMatches compares the kernel's table with: its
// name, sets (name and Template suffice) and chains (name and Base), and
// keys(i), the sorted element keys of sets[i] when it is static.
type tableChecks struct {
	name   string
	sets   []*Set
	chains []*Chain
	keys   func(i int) []string
}

// tableMatches reports whether the kernel's table of family fam has
// exactly want's sets (declarations and, for static sets, elements) and
// chains (names and hooks). Rules are not compared. false says nothing of
// what differs: diffKernelTable does. The sets are read one ahead of the
// comparison, so that at most two sets' elements are held at a time.
func (a *Applier) tableMatches(want *tableChecks, fam nftables.TableFamily) (bool, error) {
	ok, err := a.setsMatch(want, fam)
	if err != nil || !ok {
		return false, err
	}
	var static []int // indexes in want.sets
	for i, s := range want.sets {
		if !s.Template.Dynamic {
			static = append(static, i)
		}
	}

	// Read the elements (System: on the dump socket) while the chains are
	// listed and the elements compared here.
	type read struct {
		elems []nftables.SetElement
		err   error
	}
	reads := make(chan read)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for _, i := range static {
			elems, err := a.k.Elements(fam, want.name, want.sets[i].Name)
			select {
			case reads <- read{elems, err}:
			case <-stop:
				return
			}
			if err != nil {
				return
			}
		}
	})
	defer wg.Wait()
	defer close(stop)

	chainsOK, err := a.chainsMatch(want, fam)
	if err != nil || !chainsOK {
		return false, err
	}
	for _, i := range static {
		keys := want.keys(i)
		r := <-reads
		if r.err != nil {
			return false, fmt.Errorf("list elements of %s: %w", want.sets[i].Name, explain(r.err))
		}
		if !slices.Equal(sortedElementKeys(r.elems), keys) {
			return false, nil
		}
	}
	return true, nil
}

// setsMatch reports whether the kernel has want's table with exactly
// want's named sets, as declared (not their elements).
func (a *Applier) setsMatch(want *tableChecks, fam nftables.TableFamily) (bool, error) {
	t, err := findTable(a.k, fam, want.name)
	if t == nil || err != nil {
		return false, err
	}
	sets, err := a.k.Sets(t)
	if err != nil {
		return false, fmt.Errorf("list sets: %w", explain(err))
	}
	have := make(map[string]*nftables.Set, len(sets))
	for _, s := range sets {
		if !s.Anonymous {
			have[s.Name] = s
		}
	}
	if len(have) != len(want.sets) {
		return false, nil
	}
	for _, s := range want.sets {
		h := have[s.Name]
		if h == nil || declDiffers(&s.Template, h) != "" || h.Dynamic != s.Template.Dynamic {
			return false, nil
		}
	}
	return true, nil
}

// chainsMatch reports whether the kernel's table has exactly want's
// chains, with their hooks.
func (a *Applier) chainsMatch(want *tableChecks, fam nftables.TableFamily) (bool, error) {
	chains, err := a.k.Chains(fam)
	if err != nil {
		return false, fmt.Errorf("list chains: %w", explain(err))
	}
	have := make(map[string]*nftables.Chain, len(want.chains))
	for _, ch := range chains {
		if ch.Table != nil && ch.Table.Name == want.name {
			have[ch.Name] = ch
		}
	}
	return sameChains(have, want.chains), nil
}

// sameChains tells whether have, by name, are exactly the chains want,
// with their hooks.
func sameChains(have map[string]*nftables.Chain, want []*Chain) bool {
	if len(have) != len(want) {
		return false
	}
	for _, ch := range want {
		if h := have[ch.Name]; h == nil || hookDiffers(ch.Base, h) != "" {
			return false
		}
	}
	return true
}
