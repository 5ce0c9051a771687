package nft

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/google/nftables"
	"netspec.dev/netspec/applier/nft/encoding"
	"netspec.dev/netspec/render/nftmodel"
)

// A table that is replaced whole (a first install, or a change only a
// replace can make) is queued straight from its model: each chain's rules
// and each set's elements are encoded when they are queued and dropped
// once queued, and the check after the batch encodes each set again for
// its digest (modelSums, sent.go). At 50,000 services the whole encoding
// was 165 MB held across the batch; a piece is at most one set.

// modelReplaced is the plan that replaces the table of family fam whole
// with mt, because of why. Nothing is encoded yet: queueModel encodes as
// it queues. Its Bytes are counted then (or by countModel, for a plan that
// is not sent).
func modelReplaced(mt *nftmodel.Table, fam nftables.TableFamily, why string) *tablePlan {
	tp := newTablePlan(nil, fam)
	tp.model = mt
	tp.changes.Replace, tp.changes.Reason = true, why
	tp.changes.Ops = 3
	for _, it := range mt.Items {
		switch {
		case it.Set != nil:
			tp.changes.SetsAdded = append(tp.changes.SetsAdded, it.Set.Name)
			tp.changes.Ops++
		case it.Chain != nil:
			tp.changes.ChainsAdded = append(tp.changes.ChainsAdded, it.Chain.Name)
			tp.changes.Ops += 1 + len(it.Chain.Rules)
		}
	}
	return tp
}

// queueModel queues the replace of tp's table from its model, as
// Ruleset.Replace queues an encoded table (the same messages, in the same
// order), and sets the plan's Bytes as replace counts them.
func (tp *tablePlan) queueModel(c Batch, fam nftables.TableFamily) error {
	mt := tp.model
	f := mt.Family
	tbl := &nftables.Table{Family: fam, Name: mt.Name}
	c.AddTable(tbl)
	c.DelTable(tbl)
	c.AddTable(tbl)
	for _, it := range mt.Items {
		if ch := it.Chain; ch != nil {
			nc := &nftables.Chain{Name: ch.Name, Table: tbl}
			if b := baseChain(ch.Hook); b != nil {
				pol := b.Policy
				nc.Type, nc.Hooknum, nc.Priority, nc.Policy = b.Type, b.Hooknum, b.Priority, &pol
			}
			c.AddChain(nc)
		}
	}
	var shells []*Set
	for _, it := range mt.Items {
		if it.Set != nil {
			s := setShell(f, it.Set)
			shells = append(shells, s)
			if err := s.AddTo(c, tbl); err != nil {
				return fmt.Errorf("table %s: %w", mt.Name, err)
			}
		}
	}
	workers := 1
	sp, split := c.(splitter)
	if w := modelWeight(mt); split && w >= parallelEncodeMin {
		workers = min(encoders(), w/parallelEncodeMin)
	}
	pieces := modelPieces(mt, shells, workers > 1)
	if workers <= 1 {
		n, err := queuePieces(c, tbl, fam, f, pieces)
		tp.changes.Bytes = n
		if err != nil {
			return fmt.Errorf("table %s: %w", mt.Name, err)
		}
		return nil
	}
	// The pieces in parts of about equal weight, each encoded into a
	// Batch of its own by one of workers goroutines, which take the parts
	// in turn (a part's cost is only estimated); join puts their messages
	// after those queued so far, in order.
	parts := workers * partsPerWorker
	batches, join, err := sp.split(parts)
	if err != nil {
		return fmt.Errorf("table %s: %w", mt.Name, err)
	}
	segs := segments(pieces, parts)
	bytes := make([]int, parts)
	errs := make([]error, parts)
	var next atomic.Int32
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < parts; i = int(next.Add(1) - 1) {
				bytes[i], errs[i] = queuePieces(batches[i], tbl, fam, f, segs[i])
			}
		})
	}
	wg.Wait()
	jerr := join()
	tp.changes.Bytes = 0
	for _, b := range bytes {
		tp.changes.Bytes += b
	}
	if err := errors.Join(append(errs, jerr)...); err != nil {
		return fmt.Errorf("table %s: %w", mt.Name, err)
	}
	return nil
}

// A replace's rules and elements, queued once its chains and sets exist,
// are encoded on every core when there are at least parallelEncodeMin of them
// (at 50,000 Services, about 600,000: encoding them took a second on one
// core). A set's elements come in pieces of at most pieceElems, so that
// the big maps spread over the cores.
var (
	parallelEncodeMin = 20000
	pieceElems        = 4096
	encoders          = func() int { return runtime.GOMAXPROCS(0) }
)

// partsPerWorker is how many parts each encoding goroutine gets, on
// average: more parts than goroutines even out the error of the weights.
const partsPerWorker = 4

// ruleWeight is what encoding a rule costs, counted in set elements: at
// 50,000 Services, about 3 µs against 1 µs.
const ruleWeight = 3

// splitter is a Batch whose operations can be queued from several
// goroutines (stagingBatch): split returns n Batches, each used by one
// goroutine, and join puts what they queued after what the Batch holds,
// in the order of the n.
type splitter interface {
	split(n int) (parts []Batch, join func() error, err error)
}

// modelPiece is a piece of a replace queued after the table's chains and
// sets: a chain's rules, or the elements lo to hi of a set (all of an
// interval set's, whose elements are sent in the order of their keys).
type modelPiece struct {
	chain  *nftmodel.Chain
	set    *nftmodel.Set
	shell  *Set
	lo, hi int
}

func (p modelPiece) weight() int {
	if p.chain != nil {
		return ruleWeight * len(p.chain.Rules)
	}
	return p.hi - p.lo
}

// modelWeight is the number of rules and set elements of mt.
func modelWeight(mt *nftmodel.Table) int {
	w := 0
	for _, it := range mt.Items {
		switch {
		case it.Chain != nil:
			w += len(it.Chain.Rules)
		case it.Set != nil:
			w += it.Set.Len()
		}
	}
	return w
}

// modelPieces lists the pieces of mt in the order they are queued: the
// chains' rules, then the sets' elements (shells are the sets' shells, in
// order), a set's in pieces of pieceElems when cut, else whole.
func modelPieces(mt *nftmodel.Table, shells []*Set, cut bool) []modelPiece {
	var out []modelPiece
	for _, it := range mt.Items {
		if it.Chain != nil {
			out = append(out, modelPiece{chain: it.Chain})
		}
	}
	i := 0
	for _, it := range mt.Items {
		ms := it.Set
		if ms == nil {
			continue
		}
		shell := shells[i]
		i++
		n := ms.Len()
		size := n
		if cut && !shell.Template.Interval {
			size = pieceElems
		}
		for lo := 0; lo < n; lo += size {
			out = append(out, modelPiece{set: ms, shell: shell, lo: lo, hi: min(lo+size, n)})
		}
	}
	return out
}

// segments cuts pieces into n runs of about equal weight, in order.
func segments(pieces []modelPiece, n int) [][]modelPiece {
	out := make([][]modelPiece, 0, n)
	total, w, start := 0, 0, 0
	for _, p := range pieces {
		total += p.weight()
	}
	for i, p := range pieces {
		w += p.weight()
		if len(out) < n-1 && w*n >= total*(len(out)+1) {
			out = append(out, pieces[start:i+1])
			start = i + 1
		}
	}
	out = append(out, pieces[start:])
	for len(out) < n {
		out = append(out, nil)
	}
	return out
}

// queuePieces queues pieces of the replace of table tbl into c and
// returns their bytes as a replace counts them.
func queuePieces(c Batch, tbl *nftables.Table, fam nftables.TableFamily, f nftmodel.Family, pieces []modelPiece) (int, error) {
	n := 0
	enc := encoding.NewEncoder(f)
	for _, p := range pieces {
		if ch := p.chain; ch != nil {
			ref := &nftables.Chain{Name: ch.Name, Table: tbl}
			for _, mr := range ch.Rules {
				exprs, anon := enc.Encode(mr)
				n += len(ruleKey(fam, exprs))
				if anon != nil {
					n += len(anonMark) + len(anonKey(anon.Elements))
				}
				if err := addRule(c, tbl, ref, exprs, anon); err != nil {
					return n, fmt.Errorf("chain %s: rule %q: %w", ch.Name, mr.Text(f), err)
				}
			}
			continue
		}
		var elems []nftables.SetElement
		if p.lo == 0 && p.hi == p.set.Len() {
			elems = p.shell.kernelOrder(slices.Concat(encoding.SetElements(f, p.set)...))
		} else {
			for i := p.lo; i < p.hi; i++ {
				elems = append(elems, encoding.SetElement(f, p.set, i)...)
			}
		}
		n += elementBytes(elems)
		if err := p.shell.addKernelElems(c, tbl, elems); err != nil {
			return n, err
		}
	}
	return n, nil
}

// countModel sets the Bytes of a plan that replaces its table from the
// model (modelReplaced) without sending it: Plan's count.
func (tp *tablePlan) countModel(fam nftables.TableFamily) error {
	return tp.queueModel(discardBatch{}, fam)
}

// anonMark separates a rule's key from its anonymous set's elements, as
// a rule's bytes are counted (ruleKeyOf).
const anonMark = "|anon:"

// discardBatch is a Batch that queues nothing.
type discardBatch struct{}

func (discardBatch) AddTable(t *nftables.Table) *nftables.Table                   { return t }
func (discardBatch) DelTable(*nftables.Table)                                     {}
func (discardBatch) AddChain(c *nftables.Chain) *nftables.Chain                   { return c }
func (discardBatch) FlushChain(*nftables.Chain)                                   {}
func (discardBatch) DelChain(*nftables.Chain)                                     {}
func (discardBatch) AddRule(r *nftables.Rule) *nftables.Rule                      { return r }
func (discardBatch) AddSet(*nftables.Set, []nftables.SetElement) error            { return nil }
func (discardBatch) SetAddElements(*nftables.Set, []nftables.SetElement) error    { return nil }
func (discardBatch) SetDeleteElements(*nftables.Set, []nftables.SetElement) error { return nil }
func (discardBatch) FlushSet(*nftables.Set)                                       {}
func (discardBatch) DelSet(*nftables.Set)                                         {}

// modelChecks is what the read-back check compares the kernel's table
// with, from the model of the table: its sets (declarations) and chains
// (names and hooks), and each static set's element keys, encoded only
// when that set is compared.
func modelChecks(mt *nftmodel.Table) *tableChecks {
	f := mt.Family
	tc := &tableChecks{name: mt.Name}
	var models []*nftmodel.Set
	for _, it := range mt.Items {
		switch {
		case it.Set != nil:
			tc.sets = append(tc.sets, setShell(f, it.Set))
			models = append(models, it.Set)
		case it.Chain != nil:
			tc.chains = append(tc.chains, &Chain{Name: it.Chain.Name, Base: baseChain(it.Chain.Hook)})
		}
	}
	tc.keys = func(i int) []string { return sortedElementKeys(slices.Concat(encoding.SetElements(f, models[i])...)) }
	return tc
}
