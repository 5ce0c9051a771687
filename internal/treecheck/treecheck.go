// Package treecheck holds the steps between schema.Load and
// compiler.Compile that the CLI and the watch daemon share: reading the
// tree's allocation lock and checking the objects across files.
package treecheck

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/internal/diag"
	"netspec.dev/netspec/schema"
)

// LockFile is the name of the allocation lock at the root of a tree.
const LockFile = "netspec.lock"

// Result is a loaded tree checked across objects.
type Result struct {
	Lock    *compiler.Lock // nil when the tree has no lock file
	Checked *compiler.Checked
	Diags   diag.List // the tree's, the lock's and the checks' diagnostics, sorted
}

// Check reads root's lock and checks the objects of t, which was loaded
// from root. A tree read from one file or stream (schema.LoadStream) takes
// its lock from its lock document instead, if it has one.
func Check(root string, t *schema.Tree) *Result {
	return CheckWith(root, t, nil)
}

// CheckWith is Check reusing m, for a daemon that checks the same tree
// again and again (compiler.Memo; nil reuses nothing).
func CheckWith(root string, t *schema.Tree, m *compiler.Memo) *Result {
	r := &Result{}
	r.Diags = append(r.Diags, t.Diags...)
	var lock *compiler.Lock
	var ld diag.List
	if t.Stream() {
		lock, ld = StreamLock(t)
	} else {
		lock, ld = ReadLock(root)
	}
	r.Lock = lock
	r.Diags = append(r.Diags, ld...)
	r.Checked = m.Validate(t.Objects, lock, t)
	r.Diags = append(r.Diags, r.Checked.Diags...)
	r.Diags.Sort()
	return r
}

// ReadLock reads root/netspec.lock; a missing lock is not an error. A
// broken one is a diagnostic at its line.
func ReadLock(root string) (*compiler.Lock, diag.List) {
	var dl diag.List
	data, err := os.ReadFile(filepath.Join(root, LockFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		dl.Errorf(diag.Pos{File: LockFile}, nil, "cannot read: %v", err)
		return nil, dl
	}
	lock, err := compiler.ParseLock(data)
	if err != nil {
		msg := err.Error()
		pos := diag.Pos{File: LockFile}
		if rest, ok := strings.CutPrefix(msg, LockFile+":"); ok {
			if i := strings.Index(rest, ":"); i > 0 {
				if n, err := strconv.Atoi(rest[:i]); err == nil {
					pos.Line = n
					msg = strings.TrimSpace(rest[i+1:])
				}
			}
		}
		dl.Errorf(pos, nil, "%s (run 'netspec lock' to rewrite it)", msg)
		return nil, dl
	}
	return lock, nil
}

// StreamLock reads the lock document of a tree read from one file or
// stream; none is not an error, as a tree without netspec.lock. Each
// problem is a diagnostic at its line of the stream.
func StreamLock(t *schema.Tree) (*compiler.Lock, diag.List) {
	if t.StreamLock == nil {
		return nil, nil
	}
	lock, err := compiler.ParseLockNode(t.StreamLock)
	if err == nil {
		return lock, nil
	}
	var dl diag.List
	for _, msg := range strings.Split(err.Error(), "\n") {
		pos := diag.Pos{File: t.Root}
		if rest, ok := strings.CutPrefix(msg, LockFile+":"); ok {
			msg = strings.TrimSpace(rest)
			if i := strings.Index(rest, ":"); i > 0 {
				if n, err := strconv.Atoi(rest[:i]); err == nil {
					pos.Line = n
					msg = strings.TrimSpace(rest[i+1:])
				}
			}
		}
		dl.Errorf(pos, nil, "lock document: %s (run 'netspec lock' on the tree to rewrite it)", msg)
	}
	return nil, dl
}
