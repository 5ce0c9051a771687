package compiler

// checkMemo is what Validate keeps from one call to the next in a Memo.
type checkMemo struct{}
