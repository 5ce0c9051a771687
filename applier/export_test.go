package applier

// SetPrepared has f called when the state dir's write that n prepares
// beside the kernel's batch is ready, with its error.
func SetPrepared(n *Node, f func(error)) { n.prepared = f }

// PreparingBeside tells whether n is preparing the state dir's write
// beside the kernel's batch (called while the batch is sent).
func PreparingBeside(n *Node) bool { return n.beside != nil && n.beside.started }
