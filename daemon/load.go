package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"time"

	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/internal/cache"
	"netspec.dev/netspec/internal/diag"
	"netspec.dev/netspec/internal/treecheck"
	"netspec.dev/netspec/schema"
)

// loader reads and validates a tree again and again; its in-memory cache
// makes a reload validate only the files whose content changed.
type loader struct {
	root        string
	node        string
	maxFileSize int64
	cache       *cache.Memory
	// stats lets a reload skip reading the files whose stat has not
	// changed since the last one (schema.StatCache).
	stats schema.StatCache
	// memo lets a reload check and compile only what changed
	// (compiler.Memo).
	memo *compiler.Memo
	// changed, when not nil, are the only paths changed since the last
	// load (schema.Options.Changed): the next load reads just them,
	// without a walk of the tree. load takes it; the watcher sets it for a
	// reload of file events it trusts, never for the first sync, SIGHUP
	// or the periodic resync.
	changed []string
	// view is the readiness probes' view for the next compilation
	// (NotReady, nil: the tree's; and Failing, the addresses it fails).
	view compiler.Options
	// good is the last reading that compiled, and goodMemo the memo that
	// compiled it, for restage: they stay while the tree is invalid (a
	// resync's new memo compiles nothing then), so that a probe flip
	// still reaches the last good plan.
	good     *loadResult
	goodMemo *compiler.Memo
	// removals holds the objects that left the tree for their grace;
	// now is its clock (time.Now; a fake in tests), and readAt its time
	// at the last load.
	removals *removals
	now      func() time.Time
	readAt   time.Time
}

// loadResult is one reading of the tree: a plan, or the diagnostics that
// keep it from being one.
type loadResult struct {
	plan   *compiler.Staged // Services only until Finish
	diags  diag.List        // all diagnostics, sorted
	errors int              // error diagnostics in diags
	files  int              // spec files read
	cached int              // files whose result came from the cache
	tree   *schema.Tree     // what was read, for the revision
	// held are the objects of the last plan applied that left the tree
	// and wait for their removal grace (removals), compiled with the
	// tree's. back are the objects missing before and in the tree again;
	// unheld those that could not be held (with them the tree was
	// invalid, without them it is not): removed now.
	held   []*schema.Object
	back   []objectKey
	unheld []*schema.Object
}

// load reads, validates and compiles the tree's Services (the DNS records
// and env files follow after the kernel: compiler.Staged). The error is
// for a tree that cannot be read at all or a plan that cannot be
// compiled; diagnostics (res.errors > 0) leave res.plan nil.
func (l *loader) load() (*loadResult, error) {
	changed := l.changed
	l.changed = nil
	// Also when the tree cannot be read: a removal due now waits for a
	// reading that can apply it (pendingRemoval).
	l.readAt = l.now()
	t, err := schema.Load(l.root, schema.Options{MaxFileSize: l.maxFileSize, Cache: l.cache, Stats: &l.stats, Changed: changed})
	if err != nil {
		return nil, err
	}
	// Keep only the current tree's results: files removed or changed
	// since the previous load are forgotten.
	l.cache.Sweep()
	res := &loadResult{files: t.Files, cached: t.Cached, tree: t}
	res.held, res.back = l.removals.hold(t.Objects, l.readAt)
	objs, c := l.check(t, res.held)
	if c.Diags.Errors() > 0 && len(res.held) > 0 {
		// Held objects must not make a valid tree invalid (a cluster
		// IP that a new Service took over): then they go now.
		if o, alone := l.check(t, nil); alone.Diags.Errors() == 0 {
			objs, c, res.unheld, res.held = o, alone, res.held, nil
		}
	}
	res.diags = c.Diags
	res.errors = res.diags.Errors()
	if res.errors > 0 {
		return res, nil
	}
	p, err := l.memo.CompileStagedWith(objs, c.Checked, l.node, l.view)
	if err != nil {
		return res, err
	}
	res.plan = p
	l.good, l.goodMemo = res, l.memo
	return res, nil
}

// check validates the objects of t with held added. t.Objects is the
// tree read (its files, for the revision): held objects are in it only
// while it is checked.
func (l *loader) check(t *schema.Tree, held []*schema.Object) ([]*schema.Object, *treecheck.Result) {
	objs := t.Objects
	if len(held) > 0 {
		read := t.Objects
		objs = append(slices.Clip(read), held...)
		t.Objects = objs
		defer func() { t.Objects = read }()
	}
	return objs, treecheck.CheckWith(l.root, t, l.memo)
}

// restage is load for a readiness probe flip: the last reading that
// compiled (the last good one, when the tree is invalid now), its
// Services compiled again with the current view (compiler.Memo.Restage);
// no file is read or checked. ok is false when there is no such reading.
func (l *loader) restage() (*loadResult, bool) {
	if l.good == nil {
		return nil, false
	}
	st, ok := l.goodMemo.Restage(l.view)
	if !ok {
		return nil, false
	}
	r := *l.good
	r.plan, r.cached = st, r.files // nothing validated
	return &r, true
}

// firstError is the first error diagnostic, as file:line:col: message.
func (r *loadResult) firstError() string {
	for _, d := range r.diags {
		if d.Severity == diag.Error {
			return d.String()
		}
	}
	return ""
}

// revision names the tree read: its git commit (read after its files, as
// git moves HEAD once the files are written) when the tree's files are
// as the commit has them (gitClean), else the commit and a prefix of its
// content hash ("<commit>+sha256:<12 hex>", Dirty); not in a git
// checkout, its content hash.
func (l *loader) revision(res *loadResult) (Revision, error) {
	commit, ok, gitErr := GitHead(l.root)
	if ok && gitErr == nil {
		if len(commit) == 40 {
			clean, err := gitClean(l.root, treeFiles(l.root, res.tree))
			if err == nil && clean {
				return Revision{ID: commit, Source: RevisionGit}, nil
			}
		}
		rev, err := ContentRevision(l.root, res.tree)
		if err != nil {
			return Revision{}, err
		}
		return Revision{ID: commit + "+" + rev.ID[:len("sha256:")+12], Source: RevisionGit, Dirty: true}, nil
	}
	rev, err := ContentRevision(l.root, res.tree)
	if err != nil {
		return Revision{}, err
	}
	return rev, gitErr
}

// treeFiles are the files of t that hold its objects, and netspec.lock
// when the tree has one: slash paths relative to its root.
func treeFiles(root string, t *schema.Tree) []string {
	seen := map[string]bool{}
	var out []string
	for _, o := range t.Objects {
		if f := o.Src.File; f != "" && !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	if _, err := os.Stat(filepath.Join(root, treecheck.LockFile)); err == nil {
		out = append(out, treecheck.LockFile)
	}
	return out
}
