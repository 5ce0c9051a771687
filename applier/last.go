package applier

import (
	"netspec.dev/netspec/applier/nft"
	"netspec.dev/netspec/plan"
)

// Last is the state dir's record of the last applied plan, as Open read
// it (plan.json with plan.log's deltas applied) and applies since kept
// it; nil when there is none.
func (n *Node) Last() *plan.Plan { return n.last }

// Installed is the plan the kernel is believed to hold, as Plan or Apply
// of p found it: the state dir's last plan, unless the kernel has no
// netspec table (then nothing is installed, whatever the state dir says:
// EmptyPlan of p).
func (r *Result) Installed(p *plan.Plan) *plan.Plan {
	for _, t := range r.NFT.Tables {
		if t.Replace && t.Reason == nft.ReasonMissing {
			return EmptyPlan(p)
		}
	}
	if r.Last == nil {
		return EmptyPlan(p)
	}
	return r.Last
}

// EmptyPlan is p without services, DNS or variables: what a node with
// nothing installed is compared as, so that only what an apply adds shows.
func EmptyPlan(p *plan.Plan) *plan.Plan {
	return &plan.Plan{Node: p.Node, Cluster: p.Cluster}
}

// Drift is what the kernel lacks or holds beyond the last applied plan
// (r.Last): changes made behind netspec's back, which Apply repairs. r is
// what Plan found for p. same tells that p differs from r.Last in nothing
// the kernel holds (their tree diff is empty): r's own changes are then
// the drift; otherwise the kernel is read against r.Last again. nil when
// the kernel is believed to hold no plan (r.Installed(p) is not r.Last).
func (n *Node) Drift(r *Result, p *plan.Plan, same bool) (*nft.Changes, error) {
	switch {
	case r.Installed(p) != r.Last:
		return nil, nil
	case same:
		return r.NFT, nil
	}
	rd, err := n.Plan(r.Last)
	if err != nil {
		return nil, err
	}
	return rd.NFT, nil
}
