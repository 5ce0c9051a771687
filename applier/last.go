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
