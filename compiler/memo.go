package compiler

import "netspec.dev/netspec/schema"

// Memo lets a daemon that validates and compiles one tree again and again
// reuse the work of the previous time for what did not change since: a
// one-file change of a 10,000-service tree then costs about what the
// change touches, not the whole tree. The objects of an unchanged file
// are the same pointers from load to load (schema's cache), which is what
// the memo recognizes. Results equal those of Validate and CompileStaged
// without a Memo. A Memo serves one tree and one goroutine at a time; a
// nil Memo reuses nothing. The Checked that m.Validate returns shares the
// memo's indexes: compile it before the next m.Validate.
type Memo struct {
	check   checkMemo   // Validate's (check_memo.go)
	compile compileMemo // CompileStaged's (compile_memo.go)
	finish  finishMemo  // Staged.Finish's (finish_memo.go)
}

// NewMemo returns an empty Memo.
func NewMemo() *Memo { return &Memo{} }

// Validate is the package's Validate, reusing m.
func (m *Memo) Validate(objs []*schema.Object, lock *Lock, loc Locator) *Checked {
	return validate(m, objs, lock, loc)
}

// CompileStaged is the package's CompileStaged, reusing m.
func (m *Memo) CompileStaged(objs []*schema.Object, checked *Checked, node string) (*Staged, error) {
	return compileStaged(m, objs, checked, node, Options{})
}

// CompileStagedWith is the package's CompileStagedWith, reusing m.
func (m *Memo) CompileStagedWith(objs []*schema.Object, checked *Checked, node string, o Options) (*Staged, error) {
	return compileStaged(m, objs, checked, node, o)
}
