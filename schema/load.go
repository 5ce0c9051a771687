package schema

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"netspec.dev/netspec/internal/diag"
)

// DefaultMaxFileSize is the largest spec file netspec reads unless told otherwise.
const DefaultMaxFileSize = 8 << 20

// unit is one thing the loader validates as a whole: a YAML/JSON file, or
// the .cue files of one directory (one CUE package). A StatCache keeps
// the units of a tree from one Load to the next, so a unit holds no more
// than it needs then: its contents are read (read) for one Load only.
type unit struct {
	files []string   // slash paths relative to the root; a CUE unit's are in one directory
	real  []string   // the files' paths on disk, symlinks resolved
	meta  []fileMeta // the files' lengths, hashes and identities
	isCUE bool

	// Kept from one Load to the next with a StatCache (walkState):
	key Key  // the key of the unit's result, when ok
	ok  bool // the latest Load keyed the unit's result (no read error, a Cache)
	// known: the Cache held the unit's result under key, and the StatCache
	// trusts the memo of every file. A Load told what changed
	// (Options.Changed) takes such a unit's result by key, without a stat.
	known bool
}

// fileMeta is what the loader knows of a file besides its content.
type fileMeta struct {
	size int64    // length in bytes
	sum  [32]byte // sha256 of the content
	st   fileStat // identity when read or recalled, for a StatCache
}

// cueDir is the slash path of a CUE unit's directory, "." for the root.
func (u *unit) cueDir() string { return path.Dir(u.files[0]) }

// read reads and hashes the unit's files, each at most max bytes, and takes
// each file's identity as it was when opened, for a StatCache. It returns
// the files' contents, and false when one could not be read. Reading
// happens in the workers, so that a large tree is read in parallel.
func (u *unit) read(max int64, dl *diag.List) ([][]byte, bool) {
	ok := true
	contents := make([][]byte, len(u.real))
	u.meta = make([]fileMeta, len(u.real))
	for i, name := range u.real {
		data, st, err := readLimited(name, max)
		if err != nil {
			dl.Errorf(diag.Pos{File: u.files[i]}, nil, "%v", err)
			ok = false
		}
		contents[i], u.meta[i] = data, fileMeta{size: int64(len(data)), sum: sha256.Sum256(data), st: st}
	}
	return contents, ok
}

// walk lists the units of the tree below root. Dot-directories and dotfiles
// are skipped, and so are the paths that .netspecignore files leave out and
// kustomize and Helm files (listed as skipped); symlinks are followed only
// when they stay inside the tree.
func walk(root string, dl *diag.List) ([]*unit, error) {
	w, err := walkTree(root, dl)
	if err != nil {
		return nil, err
	}
	return w.units, nil
}

// walkTree is walk, returning the walker: its units (sorted by first file)
// and what else it saw, for a walkState.
func walkTree(root string, dl *diag.List) (*walker, error) {
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, fmt.Errorf("tree %s: %w", root, err)
	}
	st, err := os.Stat(realRoot)
	if err != nil {
		return nil, fmt.Errorf("tree %s: %w", root, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("tree %s: not a directory", root)
	}
	w := &walker{root: root, realRoot: realRoot, dl: dl, cue: map[string]*unit{}, visited: map[string]bool{}, files: map[string]bool{}, dirs: map[string]bool{},
		rules: map[string]*ignoreRules{}, left: map[string]bool{}}
	n := len(*dl)
	w.dir(realRoot, ".")
	w.complained = len(*dl) > n
	for _, u := range w.cue {
		w.units = append(w.units, u)
	}
	sort.Slice(w.units, func(i, j int) bool { return w.units[i].files[0] < w.units[j].files[0] })
	return w, nil
}

type walker struct {
	root, realRoot string
	dl             *diag.List
	units          []*unit
	cue            map[string]*unit
	visited        map[string]bool         // real directory paths already walked (symlink loops)
	files          map[string]bool         // real file paths already listed: a file linked twice is read once
	dirs           map[string]bool         // slash paths of the directories walked, "." for the root
	links          bool                    // a symlink was met
	complained     bool                    // the walk added diagnostics
	skipped        []Skipped               // files not read for their names (kustomize, Helm)
	rules          map[string]*ignoreRules // the ignore files read, by directory
	scope          []*ignoreRules          // the ignore files in effect, root first
	left           map[string]bool         // slash paths of the directories an ignore file leaves out
}

func (w *walker) dir(real, rel string) {
	if w.visited[real] {
		return
	}
	w.visited[real] = true
	w.dirs[rel] = true
	entries, err := readDir(real)
	if err != nil {
		w.dl.Errorf(diag.Pos{File: rel}, nil, "cannot read directory: %v", unwrapPath(err))
		return
	}
	for _, e := range entries {
		if e.Name() == IgnoreFile {
			w.readIgnore(real, rel, e)
			defer func(n int) { w.scope = w.scope[:n] }(len(w.scope) - 1)
			break
		}
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		childReal := filepath.Join(real, name)
		childRel := path.Join(rel, name)
		mode := e.Type()
		// As git, a symlink is not a directory for patterns that end in
		// "/"; one left out is not followed, so it is no error either.
		if ignored(w.scope, childRel, mode.IsDir()) {
			if mode.IsDir() {
				w.left[childRel] = true
			}
			continue
		}
		if mode&fs.ModeSymlink != 0 {
			w.links = true
			target, err := filepath.EvalSymlinks(childReal)
			if err != nil {
				w.dl.Errorf(diag.Pos{File: childRel}, nil, "broken symlink: %v", unwrapPath(err))
				continue
			}
			if !within(w.realRoot, target) {
				w.dl.Errorf(diag.Pos{File: childRel}, nil, "symlink points outside the tree (to %s); not followed", target)
				continue
			}
			st, err := os.Stat(target)
			if err != nil {
				w.dl.Errorf(diag.Pos{File: childRel}, nil, "%v", unwrapPath(err))
				continue
			}
			childReal = target
			mode = st.Mode().Type()
		}
		switch {
		case mode.IsDir():
			w.dir(childReal, childRel)
		case mode.IsRegular():
			w.file(childReal, childRel, name)
		}
	}
}

// readIgnore reads the ignore file of the directory real (slash path rel)
// and puts it in effect for the rest of the walk below rel; the caller
// takes it out again when the directory is done.
func (w *walker) readIgnore(real, rel string, e fs.DirEntry) {
	file := path.Join(rel, IgnoreFile)
	if e.Type()&fs.ModeSymlink != 0 {
		w.links = true // its meaning depends on another path
	}
	data, _, err := readLimited(filepath.Join(real, IgnoreFile), DefaultMaxFileSize)
	if err != nil {
		w.dl.Errorf(diag.Pos{File: file}, nil, "%v", err)
	}
	r := parseIgnore(rel, data)
	w.rules[rel] = r
	w.scope = append(w.scope, r)
}

// SpecFile tells whether the loader reads a file of this name (its
// extension is one of a spec file's), ignore rules aside.
func SpecFile(name string) bool { return specExt(name) != "" && skipName(path.Base(name)) == "" }

// specExt is the lower-case extension of a spec file's name; "" for
// names the loader does not read.
func specExt(name string) string {
	switch ext := strings.ToLower(path.Ext(name)); ext {
	case ".yaml", ".yml", ".json", ".cue":
		return ext
	}
	return ""
}

// Skipped is a file of the tree that the loader does not read, because its
// name says that it holds no Kubernetes objects: a kustomize or Helm file.
type Skipped struct {
	File string // slash path relative to the root
	What string // what the file is, such as "Helm values"
}

func (s Skipped) String() string { return fmt.Sprintf("%s (%s)", s.File, s.What) }

// skipName says what a file of this name is when the loader does not read
// it (kustomize's kustomization.yaml, Helm's Chart.yaml, values*.yaml and
// values.schema.json), "" for the other names.
func skipName(name string) string {
	switch {
	case name == "kustomization.yaml" || name == "kustomization.yml":
		return "kustomize"
	case name == "Chart.yaml":
		return "Helm chart"
	case name == "values.schema.json":
		return "Helm values schema"
	case strings.HasPrefix(name, "values") && (strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")):
		return "Helm values"
	}
	return ""
}

func (w *walker) file(real, rel, name string) {
	ext := specExt(name)
	if ext == "" {
		return
	}
	if what := skipName(name); what != "" {
		w.skipped = append(w.skipped, Skipped{File: rel, What: what})
		return
	}
	if w.files[real] {
		return
	}
	w.files[real] = true
	rel = withinPath(real, rel)
	if ext != ".cue" {
		w.units = append(w.units, &unit{files: []string{rel}, real: []string{real}})
		return
	}
	dir := path.Dir(rel)
	u := w.cue[dir]
	if u == nil {
		u = &unit{isCUE: true}
		w.cue[dir] = u
	}
	u.files = append(u.files, rel)
	u.real = append(u.real, real)
}

// withinPath returns rel, sharing the bytes of real when real ends with it
// (as it does unless the directory was reached through a symlink): the
// units and their objects keep both paths of every file for as long as a
// StatCache keeps them.
func withinPath(real, rel string) string {
	if strings.HasSuffix(real, rel) {
		return real[len(real)-len(rel):]
	}
	return rel
}

func within(root, p string) bool {
	if p == root {
		return true
	}
	r, err := filepath.Rel(root, p)
	return err == nil && r != ".." && !strings.HasPrefix(r, "../")
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// readHook, when set, is told the name of every file readLimited reads;
// tests set it to count the files read.
var readHook func(name string)

// readDir lists a directory of the tree; tests replace it to tell a walk
// from a Load that took Options.Changed.
var readDir = os.ReadDir

// readLimited reads a file of at most max bytes. It also returns the
// identity of the file opened, taken before reading, so that a write during
// the read changes the identity the next Load sees.
func readLimited(name string, max int64) ([]byte, fileStat, error) {
	if readHook != nil {
		readHook(name)
	}
	data, st, err := readFile(name, max)
	if err != nil {
		return nil, fileStat{}, err
	}
	if int64(len(data)) > max {
		return nil, fileStat{}, fmt.Errorf("file is larger than the %s limit (--max-file-size)", humanBytes(max))
	}
	return data, st, nil
}

// readFileOS is readFile through package os, for the systems that have no
// faster one.
func readFileOS(name string, max int64) ([]byte, fileStat, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fileStat{}, unwrapPath(err)
	}
	defer f.Close()
	var st fileStat
	var size int64 // as stat tells, 0 when it cannot
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		st, size = statOf(fi), fi.Size()
	}
	data, err := readUpTo(f, size, max)
	if err != nil {
		return nil, fileStat{}, unwrapPath(err)
	}
	return data, st, nil
}

// readUpTo reads r to its end, or to max+1 bytes if it holds more. The
// buffer is sized from size (stat's, as os.ReadFile does), one byte more
// so that the read that finds the end needs no larger buffer; a file that
// grows while read, or whose stat tells no size, grows it as it must.
//
// It is generic so that a reader that is no pointer (fdReader) is not
// moved to the heap to be called.
func readUpTo[R io.Reader](r R, size, max int64) ([]byte, error) {
	limit := max + 1
	n := min(size+1, limit)
	if n < 512 {
		n = min(512, limit)
	}
	data := make([]byte, 0, n)
	for int64(len(data)) < limit {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)] // grow, as append does
		}
		end := int(min(int64(cap(data)), limit))
		m, err := r.Read(data[len(data):end])
		data = data[:len(data)+m]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	return data, nil
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// rawObject is one object as written, before validation.
type rawObject struct {
	src  Source
	raw  map[string]any
	kind string
	// locate gives the position of a field's value, locateKey of the field's
	// name, while the parsed document is at hand.
	locate, locateKey func(diag.Path) diag.Pos
}

// Ignored is an object of a kind that netspec does not use; it is listed,
// never dropped silently.
type Ignored struct {
	APIVersion, Kind, Name string
	Pos                    diag.Pos
}

func (ig Ignored) String() string {
	var b strings.Builder
	for _, s := range []string{ig.APIVersion, ig.Kind, ig.Name} {
		if s != "" {
			b.WriteString(s)
			b.WriteByte(' ')
		}
	}
	return b.String() + "in " + ig.Pos.File
}

// splitYAML parses a YAML or JSON file into objects. Documents that are
// empty are skipped; a kind: List contributes its items.
//
// A document that is not an object (no apiVersion and no kind) is an
// error; when no document of the file is an object, the error says that
// the file is not Kubernetes objects and how to leave it out.
func splitYAML(file string, data []byte, dl *diag.List) (objs []rawObject, ignored []Ignored) {
	return splitDocs(file, data, dl, nil, nil)
}

// splitDocs is splitYAML offering the mappings that have neither apiVersion
// nor kind to other first (a stream's lock document, LoadStream): those it
// takes are not objects and no error. other nil takes none. in, when not
// nil, shares the strings read with those read before (interner).
func splitDocs(file string, data []byte, dl *diag.List, other func(root *yaml.Node, m map[string]any) bool, in *interner) (objs []rawObject, ignored []Ignored) {
	// The documents that are not objects, reported when the file is read.
	var strays []struct {
		pos diag.Pos
		msg string
	}
	anyObject, failed, tookOther := false, false, false
	defer func() {
		if !anyObject && !failed && len(strays) == 0 && len(ignored) == 0 && !tookOther {
			noObject(file, data, other != nil, dl)
		}
		for i, s := range strays {
			if anyObject {
				dl.Errorf(s.pos, nil, "%s", s.msg)
			} else if i == 0 && other != nil {
				dl.Errorf(s.pos, nil, "this input holds no Kubernetes object (%s)", s.msg)
			} else if i == 0 {
				dl.Errorf(s.pos, nil, "this file holds no Kubernetes object (%s); if netspec should not read it, list it in a %s file", s.msg, IgnoreFile)
			}
		}
	}()
	// Plain files are read by fastYAML; their nodes, for positions, are
	// parsed only when a finding needs one (lazy).
	var docs []any
	fast := false
	if other == nil {
		docs, fast = readFast(data, in)
	}
	lazy := &lazyDocs{data: data}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for doc := 0; ; doc++ {
		var v any
		var rootOf func() *yaml.Node
		if fast {
			if doc == len(docs) {
				return
			}
			v = docs[doc]
			rootOf = func() *yaml.Node { return lazy.doc(doc) }
		} else {
			n := new(yaml.Node)
			err := decodeNode(dec, n)
			if err == io.EOF {
				return
			}
			if err != nil {
				failed = true
				pos, msg := yamlErrAt(file, data, err)
				dl.Errorf(pos, nil, "%s", msg)
				return
			}
			conv := newConverter(file, n)
			v = conv.value(n, 0)
			if conv.err != nil {
				failed = true
				dl.Errorf(conv.errPos, nil, "%v", conv.err)
				continue
			}
			rootOf = func() *yaml.Node { return n }
		}
		if v == nil {
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			strays = append(strays, struct {
				pos diag.Pos
				msg string
			}{locateYAML(file, rootOf(), nil), fmt.Sprintf("a document must be a mapping with apiVersion and kind, not %s", typeName(v))})
			continue
		}
		apiVersion, _ := m["apiVersion"].(string)
		kind, _ := m["kind"].(string)
		if apiVersion == "" && kind == "" {
			if other != nil && other(rootOf(), m) {
				tookOther = true
				continue
			}
			strays = append(strays, struct {
				pos diag.Pos
				msg string
			}{locateYAML(file, rootOf(), nil), "object has no apiVersion or kind (string)"})
			continue
		}
		anyObject = true
		src := Source{File: file, Doc: doc, Item: -1}
		if kind == "List" || strings.HasSuffix(kind, "List") && isList(m) {
			items, ok := m["items"].([]any)
			if !ok && m["items"] != nil {
				dl.Errorf(locateYAML(file, rootOf(), diag.Path{"items"}), diag.Path{"items"}, "a List needs a list of items")
				continue
			}
			// Items of a typed list (ServiceList, as kubectl get --raw
			// writes it) may leave out their apiVersion and kind: they are
			// the list's, as the API server means them.
			itemKind := strings.TrimSuffix(kind, "List")
			for i, it := range items {
				im, ok := it.(map[string]any)
				p := diag.Path{"items", i}
				if !ok {
					dl.Errorf(locateYAML(file, rootOf(), p), p, "a List item must be a mapping with apiVersion and kind")
					continue
				}
				if itemKind != "" {
					if _, ok := im["apiVersion"]; !ok && apiVersion != "" {
						im["apiVersion"] = apiVersion
					}
					if _, ok := im["kind"]; !ok {
						im["kind"] = itemKind
					}
				}
				s := src
				s.Item = i
				itemOf := func() *yaml.Node {
					root := docRoot(rootOf())
					if root == nil {
						return nil
					}
					if itemsNode := childNode(root, "items"); itemsNode != nil && i < len(itemsNode.Content) {
						return itemsNode.Content[i]
					}
					return nil
				}
				o, ig, ok := classify(s, im, yamlLocator(file, itemOf), dl)
				o.locateKey = yamlKeyLocator(file, itemOf)
				if ok {
					objs = append(objs, o)
				} else if ig != nil {
					ignored = append(ignored, *ig)
				}
			}
			continue
		}
		o, ig, ok := classify(src, m, yamlLocator(file, rootOf), dl)
		o.locateKey = yamlKeyLocator(file, rootOf)
		if ok {
			objs = append(objs, o)
		} else if ig != nil {
			ignored = append(ignored, *ig)
		}
	}
}

// noObject reports a file (or stream, when stream) that holds no
// document at all: empty, only comments, or only document separators. As
// kubectl apply refuses such input ("no objects passed to apply"), it is
// an error, at the file's first line.
func noObject(file string, data []byte, stream bool, dl *diag.List) {
	what := "it is empty"
	switch {
	case len(bytes.TrimSpace(data)) == 0:
	case onlyComments(data):
		what = "it holds only comments"
	default:
		what = "only empty documents: --- separators, comments, null"
	}
	pos := diag.Pos{File: file, Line: 1, Col: 1}
	if stream {
		dl.Errorf(pos, nil, "the input holds no Kubernetes object (%s), as kubectl apply would refuse it: no objects passed to apply", what)
		return
	}
	dl.Errorf(pos, nil, "this file holds no Kubernetes object (%s), as kubectl apply would refuse it; delete it, or list it in a %s file", what, IgnoreFile)
}

// onlyComments tells whether every line of data that is not blank is a
// YAML comment.
func onlyComments(data []byte) bool {
	for line := range bytes.Lines(data) {
		if l := bytes.TrimSpace(line); len(l) > 0 && l[0] != '#' {
			return false
		}
	}
	return true
}

// lazyDocs parses a file's documents with yaml.v3 when a position in it is
// first needed: a file fastYAML read has no nodes until then.
type lazyDocs struct {
	data []byte
	docs []*yaml.Node
	done bool
}

// doc returns the node of document i, nil if there is none.
func (l *lazyDocs) doc(i int) *yaml.Node {
	if !l.done {
		l.done = true
		dec := yaml.NewDecoder(bytes.NewReader(l.data))
		for {
			n := new(yaml.Node)
			if err := decodeNode(dec, n); err != nil {
				break
			}
			l.docs = append(l.docs, n)
		}
	}
	if i < len(l.docs) {
		return l.docs[i]
	}
	return nil
}

// decodeNode wraps Decode so that a panic in the YAML library on hostile
// input becomes an error.
func decodeNode(dec *yaml.Decoder, n *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: cannot parse: %v", r)
		}
	}()
	return dec.Decode(n)
}

func isList(m map[string]any) bool { _, ok := m["items"]; return ok }

func docRoot(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	return n
}

func yamlLocator(file string, rootOf func() *yaml.Node) func(diag.Path) diag.Pos {
	return func(p diag.Path) diag.Pos {
		root := rootOf()
		if root == nil {
			return diag.Pos{File: file}
		}
		return locateYAML(file, root, p)
	}
}

func yamlKeyLocator(file string, rootOf func() *yaml.Node) func(diag.Path) diag.Pos {
	return func(p diag.Path) diag.Pos {
		root := rootOf()
		if root == nil {
			return diag.Pos{File: file}
		}
		return locateYAMLKey(file, root, p)
	}
}

// classify decides whether m is an object netspec reads. Known kinds are
// matched by API group and kind; the schema checks the exact apiVersion.
func classify(src Source, m map[string]any, loc func(diag.Path) diag.Pos, dl *diag.List) (rawObject, *Ignored, bool) {
	apiVersion, _ := m["apiVersion"].(string)
	kind, _ := m["kind"].(string)
	name := ""
	if md, ok := m["metadata"].(map[string]any); ok {
		name, _ = md["name"].(string)
	}
	if kind == "Kustomization" && (apiVersion == "" || strings.HasPrefix(apiVersion, "kustomize.config.k8s.io/")) {
		// kustomize's own file, which may leave out its apiVersion.
		return rawObject{}, &Ignored{APIVersion: apiVersion, Kind: kind, Name: name, Pos: loc(nil)}, false
	}
	if apiVersion == "" || kind == "" {
		var missing []string
		if apiVersion == "" {
			missing = append(missing, "apiVersion")
		}
		if kind == "" {
			missing = append(missing, "kind")
		}
		dl.Errorf(loc(nil), nil, "object has no %s (string)", strings.Join(missing, " or "))
		return rawObject{}, nil, false
	}
	if k := knownKind(apiVersion, kind); k != "" {
		return rawObject{src: src, raw: m, kind: k, locate: loc}, nil, true
	}
	if p, msg := misplacedKind(apiVersion, kind); msg != "" {
		dl.Errorf(loc(p), p, "%s", msg)
		return rawObject{}, nil, false
	}
	return rawObject{}, &Ignored{APIVersion: apiVersion, Kind: kind, Name: name, Pos: loc(nil)}, false
}

// kindVersions are the kinds netspec reads and the apiVersion of each.
var kindVersions = map[string]string{
	KindService: "v1", KindEndpoints: "v1", KindPod: "v1", KindNode: "v1",
	KindEndpointSlice: "discovery.k8s.io/v1", KindCluster: "netspec.dev/v1alpha1",
}

// misplacedKind finds an object that means to be one of netspec's kinds
// but that the API server would refuse ("no matches for kind X in version
// Y"), where netspec would otherwise ignore it: a kind of netspec's in the
// group of another (EndpointSlice in v1, Endpoints in discovery.k8s.io),
// the core group named "core" (core/v1), or a kind spelt in another case
// (kinds are case-sensitive) or in the plural. Only apiVersions of the
// groups of netspec's kinds count: a Service of serving.knative.dev or a Cluster of
// cluster.x-k8s.io is another kind, ignored. It returns the field to
// blame and the message, "" for an object to ignore.
func misplacedKind(apiVersion, kind string) (diag.Path, string) {
	group := groupOf(apiVersion)
	switch group {
	case "", "core", "discovery.k8s.io", "netspec.dev":
	default:
		return nil, ""
	}
	if want, ok := kindVersions[kind]; ok {
		if group == "core" && want == "v1" {
			return diag.Path{"apiVersion"}, fmt.Sprintf("no kind %s in version %q: the core group has no name in an apiVersion; write %q", kind, apiVersion, want)
		}
		return diag.Path{"apiVersion"}, fmt.Sprintf("no kind %s in version %q: the apiVersion of %s is %q", kind, apiVersion, kind, want)
	}
	for k := range kindVersions {
		if strings.EqualFold(k, kind) {
			return diag.Path{"kind"}, fmt.Sprintf("%q is not a kind (kinds are case-sensitive); write %s", kind, k)
		}
		if strings.EqualFold(k+"s", kind) {
			return diag.Path{"kind"}, fmt.Sprintf("%q is not a kind (a kind is singular); write %s", kind, k)
		}
	}
	return nil, ""
}

// knownKind is kind when it is one of netspec's kinds and apiVersion is
// of its group (any version: a wrong one is reported at the field), ""
// else.
func knownKind(apiVersion, kind string) string {
	if want, ok := kindVersions[kind]; ok && groupOf(want) == groupOf(apiVersion) {
		return kind
	}
	return ""
}

// groupOf is the API group of an apiVersion: "" for the core group.
func groupOf(apiVersion string) string {
	if i := strings.LastIndexByte(apiVersion, '/'); i >= 0 {
		return apiVersion[:i]
	}
	return ""
}

func typeName(v any) string {
	switch v.(type) {
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// yamlErrPos extracts "line N" from a yaml.v3 error message.
func yamlErrPos(file string, err error) diag.Pos {
	msg := err.Error()
	if i := strings.Index(msg, "line "); i >= 0 {
		var line int
		if _, e := fmt.Sscanf(msg[i:], "line %d", &line); e == nil {
			return diag.Pos{File: file, Line: line}
		}
	}
	return diag.Pos{File: file}
}

func yamlErrMsg(err error) string {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "yaml: ")
	if i := strings.Index(msg, "line "); i >= 0 {
		if j := strings.Index(msg[i:], ": "); j >= 0 {
			msg = msg[:i] + msg[i+j+2:]
		}
	}
	return "invalid YAML: " + strings.TrimSpace(msg)
}
