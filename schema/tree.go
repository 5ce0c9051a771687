package schema

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"cuelang.org/go/cue"
	"go.yaml.in/yaml/v3"

	"netspec.dev/netspec/internal/diag"
)

// Options tune Load.
type Options struct {
	// MaxFileSize is the largest file read; larger files are errors.
	// 0 means DefaultMaxFileSize.
	MaxFileSize int64
	// Cache, when set, remembers the result of each file by content, so
	// that an unchanged file is not validated again.
	Cache Cache
	// Workers is how many files are validated at once; 0 means GOMAXPROCS.
	Workers int
	// Stats, when set with Cache, remembers each file's identity and hash,
	// so that a file whose stat did not change since the previous Load with
	// the same StatCache is not read again: a warm reload costs a stat per
	// unchanged file.
	Stats *StatCache
	// Changed, when not nil (even empty), promises that since the previous
	// Load with the same Stats (and Cache) nothing below root changed but
	// at these paths (absolute, or relative to the working directory; as a
	// file watcher names them: files created, written, removed or renamed
	// from or to). Load then neither lists the directories nor stats the
	// other files: it takes the previous Load's walk and results, and
	// reads only what is listed. It walks the tree as without Changed when
	// it cannot trust the promise to cover everything: a listed path is a
	// directory or a symlink, is outside the tree or in a directory the
	// previous walk did not see, when the root now resolves elsewhere, when
	// the tree holds symlinks or problems the walk reported (broken links,
	// unreadable directories), or without Stats and Cache. A file that the
	// StatCache does not trust yet (racyMargin) is read as without Changed.
	// The result is the same as without Changed, if the promise holds.
	Changed []string
}

// Cache stores validation results by content key. Implementations must be
// safe for concurrent use and must never return a result stored under
// another key.
type Cache interface {
	Get(key Key) (*UnitResult, bool)
	Put(key Key, r *UnitResult)
}

// Key identifies a file's (or a CUE package's) content, paths and the
// schema version.
type Key [32]byte

// UnitResult is what validating one file (or one CUE package) yields.
type UnitResult struct {
	Objects []*Object
	Ignored []Ignored
	Diags   diag.List
}

// Tree is a loaded and validated tree of spec files.
type Tree struct {
	Root    string
	Objects []*Object // in file order, then document order
	Ignored []Ignored
	// Skipped lists the files not read for their names: kustomize and Helm
	// files, which hold no Kubernetes objects. (Paths that an ignore file
	// leaves out are not listed.)
	Skipped []Skipped
	Files   int       // spec files read
	Diags   diag.List // sorted
	// Cached counts the files (or CUE packages) whose result came from the cache.
	Cached int
	// Unread counts the files not read, because Options.Stats knew them.
	Unread int
	// StreamLock is the lock document of a tree read by LoadFile or
	// LoadStream (compiler.ParseLockNode reads it); nil when it has none,
	// and for Load, whose lock is the file netspec.lock at the root.
	StreamLock *yaml.Node

	mem map[string][]byte // the contents of a LoadStream tree, by file name

	sums       []fileSum // content hash per file, to locate positions later
	hashesOnce sync.Once
	hashes     map[string][32]byte // sums by file, made when Locate needs it
	mu         sync.Mutex
	docs       map[string][]*yaml.Node // parsed documents, by file, for Locate
}

// Load reads, validates and decodes every spec file below root. Problems in
// the files are reported in Tree.Diags; the error is for a root that cannot
// be read at all.
func Load(root string, opt Options) (*Tree, error) {
	if opt.MaxFileSize <= 0 {
		opt.MaxFileSize = DefaultMaxFileSize
	}
	if opt.Workers <= 0 {
		opt.Workers = runtime.GOMAXPROCS(0)
	}
	start := time.Now()
	var memo map[string]statEntry // read-only while the workers run
	if opt.Stats != nil {
		opt.Stats.mu.Lock()
		defer opt.Stats.mu.Unlock()
		memo = opt.Stats.files
	}
	t := &Tree{Root: root}
	// With Changed, the previous walk brought up to date (hinted), else a
	// new one.
	var units []*unit
	var gone []string // real paths of the files gone, with hinted
	hinted := false
	if opt.Stats != nil {
		if ws := opt.Stats.walk; ws != nil && opt.Changed != nil && opt.Cache != nil && ws.root == root && ws.max == opt.MaxFileSize {
			gone, hinted = ws.update(opt.Changed)
			units, t.Skipped = ws.units, ws.skipped
		}
		prev := opt.Stats.walk
		opt.Stats.walk = nil // kept again once this Load is through
		if hinted {
			defer func() { opt.Stats.walk = prev }()
		}
	}
	if !hinted {
		w, err := walkTree(root, &t.Diags)
		if err != nil {
			return nil, err
		}
		units, t.Skipped = w.units, w.skipped
		if opt.Stats != nil {
			defer func() { opt.Stats.walk = newWalkState(root, w, opt.MaxFileSize) }()
		}
	}
	// Each unit's result: a unit known from the previous Load and not
	// changed since (hinted) takes it from the cache by key; the others
	// (todo) are recalled or read.
	results := make([]*UnitResult, len(units))
	var cached, unread atomic.Int64
	// A validator remembers the values it checked: the StatCache keeps a
	// little-used one from Load to Load (spareLeaves).
	var spare atomic.Pointer[validator]
	if opt.Stats != nil {
		spare.Store(opt.Stats.spare)
		opt.Stats.spare = nil
	}
	var mu sync.Mutex
	var todo []*unit
	var wg sync.WaitGroup
	var next atomic.Int64 // the index of the next unit to take
	// Workers take runs of units: with Changed, most units take but a
	// look-up in the cache, cheaper than contending for next.
	step := 1
	if hinted {
		step = 64
	}
	for range opt.Workers {
		wg.Go(func() {
			var v *validator
			var nCached, nUnread int64
			var mine []*unit
			defer func() {
				cached.Add(nCached)
				unread.Add(nUnread)
				if v != nil && v.used <= spareLeaves {
					v.in.reset() // keeps no value of this Load's objects alive
					spare.CompareAndSwap(nil, v)
				}
				mu.Lock()
				todo = append(todo, mine...)
				mu.Unlock()
			}()
			for i, end := 0, 0; ; i++ {
				if i == end {
					end = int(next.Add(int64(step)))
					if i = end - step; i >= len(units) {
						break
					}
					end = min(end, len(units))
				}
				u := units[i]
				if hinted && u.known {
					if r, ok := opt.Cache.Get(u.key); ok {
						results[i] = r
						nCached++
						nUnread += int64(len(u.files))
						continue
					}
				}
				mine = append(mine, u)
				u.known, u.ok = false, false
				if opt.Cache != nil && memo != nil && u.recall(memo, opt.MaxFileSize) {
					key := unitKey(u)
					if r, ok := opt.Cache.Get(key); ok {
						results[i] = r
						u.key, u.ok = key, true
						nCached++
						nUnread += int64(len(u.files))
						continue
					}
				}
				var readDiags diag.List
				contents, ok := u.read(opt.MaxFileSize, &readDiags)
				if !ok {
					results[i] = &UnitResult{Diags: readDiags}
					continue
				}
				key := unitKey(u)
				u.key, u.ok = key, opt.Cache != nil
				if opt.Cache != nil {
					if r, ok := opt.Cache.Get(key); ok {
						results[i] = r
						nCached++
						continue
					}
				}
				if v == nil {
					if v = spare.Swap(nil); v == nil {
						v = newValidator()
					}
				}
				r := v.unit(u, contents)
				results[i] = r
				if opt.Cache != nil {
					opt.Cache.Put(key, r)
				}
			}
		})
	}
	wg.Wait()
	if opt.Stats != nil {
		opt.Stats.spare = spare.Load()
	}

	// The Tree's lists live as long as it does: each is made once, of the
	// length it needs.
	var nFiles, nObjects, nIgnored int
	for i, u := range units {
		nFiles += len(u.files)
		nObjects += len(results[i].Objects)
		nIgnored += len(results[i].Ignored)
	}
	t.sums = make([]fileSum, 0, nFiles)
	if nObjects > 0 {
		t.Objects = make([]*Object, 0, nObjects)
	}
	if nIgnored > 0 {
		t.Ignored = make([]Ignored, 0, nIgnored)
	}
	for i, u := range units {
		for j, f := range u.files {
			t.sums = append(t.sums, fileSum{f, &u.meta[j]})
		}
		r := results[i]
		t.Objects = append(t.Objects, r.Objects...)
		t.Ignored = append(t.Ignored, r.Ignored...)
		t.Diags.Add(r.Diags...)
	}
	t.Files = len(t.sums)
	if opt.Stats != nil {
		if hinted {
			opt.Stats.update(todo, gone, start)
		} else {
			opt.Stats.remember(units, start, unread.Load() == int64(t.Files))
		}
	}
	t.Cached, t.Unread = int(cached.Load()), int(unread.Load())
	t.Diags.Sort()
	return t, nil
}

// spareLeaves is how many CUE evaluations a validator may have made to be
// kept for the next Load (StatCache): its context and memo grow with them,
// and would stay in memory between Loads. A reload of a few files keeps
// its validator for hundreds of reloads; a validator that checked a whole
// tree is dropped.
const spareLeaves = 2048

// unitKey hashes the schema version and the unit's paths, lengths and
// content hashes, so that it needs no content that the StatCache vouched for.
// The "/2" tells these keys from those that hashed the contents themselves.
func unitKey(u *unit) Key {
	var buf [512]byte
	b := append(buf[:0], "netspec-unit/2\x00"+Version+"\x00"...)
	for i, f := range u.files {
		b = append(b, f...)
		b = append(b, 0)
		b = binary.LittleEndian.AppendUint64(b, uint64(u.meta[i].size))
		b = append(b, u.meta[i].sum[:]...)
	}
	return sha256.Sum256(b)
}

// unit validates one file or CUE package, of the contents read.
func (v *validator) unit(u *unit, contents [][]byte) *UnitResult {
	r := &UnitResult{}
	var raws []rawObject
	if u.isCUE {
		raws, r.Ignored = splitCUE(u, contents, &r.Diags)
	} else {
		raws, r.Ignored = splitDocs(u.files[0], contents[0], &r.Diags, nil, v.in)
	}
	if len(raws) > 0 {
		r.Objects = make([]*Object, 0, len(raws)) // kept as long as the tree
	}
	for _, raw := range raws {
		if o := v.check(raw, &r.Diags); o != nil {
			r.Objects = append(r.Objects, o)
		}
	}
	if len(r.Objects) == 0 {
		r.Objects = nil // as before, when none decoded
	}
	return r
}

// Locate finds the position of a field of an object, for diagnostics made
// after loading (cross-object checks). It reads the file again when needed;
// when the file changed since Load, it returns the file alone.
func (t *Tree) Locate(src Source, p diag.Path) diag.Pos {
	if src.CUE != "" {
		return t.locateCUE(src, p)
	}
	docs := t.yamlDocs(src.File)
	if src.Doc >= len(docs) {
		return diag.Pos{File: src.File}
	}
	root := docs[src.Doc]
	if src.Item >= 0 {
		items := childNode(docRoot(root), "items")
		if items == nil || src.Item >= len(items.Content) {
			return diag.Pos{File: src.File}
		}
		root = items.Content[src.Item]
	}
	return locateYAML(src.File, root, p)
}

// fileSum is the content hash of a file of a Tree: its meta, shared with
// the file's unit (a fileMeta is never written once made).
type fileSum struct {
	file string
	meta *fileMeta
}

// fileHashes returns the content hash of each file, by slash path. Load
// only lists them: most Trees never locate anything.
func (t *Tree) fileHashes() map[string][32]byte {
	t.hashesOnce.Do(func() {
		t.hashes = make(map[string][32]byte, len(t.sums))
		for _, s := range t.sums {
			t.hashes[s.file] = s.meta.sum
		}
	})
	return t.hashes
}

func (t *Tree) read(file string) ([]byte, bool) {
	if t.mem != nil {
		data, ok := t.mem[file]
		return data, ok
	}
	data, err := os.ReadFile(filepath.Join(t.Root, filepath.FromSlash(file)))
	if err != nil || sha256.Sum256(data) != t.fileHashes()[file] {
		return nil, false
	}
	return data, true
}

func (t *Tree) yamlDocs(file string) []*yaml.Node {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.docs == nil {
		t.docs = map[string][]*yaml.Node{}
	}
	if d, ok := t.docs[file]; ok {
		return d
	}
	var docs []*yaml.Node
	if data, ok := t.read(file); ok {
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			n := new(yaml.Node)
			if err := decodeNode(dec, n); err != nil {
				break
			}
			docs = append(docs, n)
		}
	}
	t.docs[file] = docs
	return docs
}

func (t *Tree) locateCUE(src Source, p diag.Path) diag.Pos {
	dir := path.Dir(src.File)
	u := &unit{isCUE: true}
	var files []string
	for f := range t.fileHashes() {
		if path.Dir(f) == dir && path.Ext(f) == ".cue" {
			files = append(files, f)
		}
	}
	sort.Strings(files)
	var contents [][]byte
	for _, f := range files {
		data, ok := t.read(f)
		if !ok {
			return diag.Pos{File: src.File}
		}
		u.files = append(u.files, f)
		contents = append(contents, data)
	}
	var dl diag.List
	v, ok := buildCUE(u, contents, &dl)
	if !ok {
		return diag.Pos{File: src.File}
	}
	obj := v.LookupPath(cue.ParsePath(src.CUE))
	if !obj.Exists() {
		return diag.Pos{File: src.File}
	}
	return cueLocator(obj, src.File)(p)
}
