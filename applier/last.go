package applier

import "netspec.dev/netspec/plan"

// Last is the state dir's record of the last applied plan, as Open read
// it (plan.json with plan.log's deltas applied) and applies since kept
// it; nil when there is none.
func (n *Node) Last() *plan.Plan { return n.last }
