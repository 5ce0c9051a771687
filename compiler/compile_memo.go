package compiler

// compileMemo is what CompileStaged keeps from one call to the next in a
// Memo.
type compileMemo struct{}
