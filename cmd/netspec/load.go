package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"netspec.dev/netspec/internal/cache"
	"netspec.dev/netspec/internal/diag"
	"netspec.dev/netspec/internal/treecheck"
	"netspec.dev/netspec/schema"
	"netspec.dev/netspec/treediff"
)

// LockFile is the name of the allocation lock at the root of a tree.
const LockFile = treecheck.LockFile

// loadFlags are the flags of every command that reads a tree.
type loadFlags struct {
	maxFileSize byteSize
	cacheDir    string
	noCache     bool
}

func (l *loadFlags) register(fs *flag.FlagSet) {
	l.maxFileSize.register(fs)
	fs.StringVar(&l.cacheDir, "cache-dir", cache.DefaultDir(), fmt.Sprintf("remember validation results by file content in `DIR`, so unchanged files are not validated again (a pack per tree; packs unused for %d days, and the oldest beyond %d MiB in all, are removed; rm -r DIR clears it)", int(cache.MaxAge.Hours()/24), cache.MaxSize>>20))
	fs.BoolVar(&l.noCache, "no-cache", false, "validate every file, without reading or writing the cache")
}

// loaded is a tree read, validated and checked across objects: its lock,
// the objects checked and all diagnostics, sorted.
type loaded struct {
	tree *schema.Tree
	*treecheck.Result
}

// treeArgHelp is what --help says of TREE for the commands that read one.
const treeArgHelp = `
TREE may also be a single YAML or JSON file, or - for a stream of YAML or
JSON documents on standard input (--- separated, as helm template writes
them; a kind: List, as kubectl get -o yaml writes, contributes its items).
Positions then name the file, or <stdin>. The Cluster object is one of the
documents; so may be the lock, as netspec.lock is written (version: 1,
services: ...). Without a lock document, cluster IPs and node ports are
allocated as for a directory without netspec.lock: each derived from a hash
of the Service's namespace and name (the next free one when that is taken).
`

// loadTree reads and validates a tree and its lock: a directory, a single
// YAML/JSON file, or "-" for a stream on standard input. It prints nothing;
// the error is for a tree that cannot be read at all.
func loadTree(e *env, root string, lf *loadFlags) (*loaded, error) {
	opts := schema.Options{MaxFileSize: int64(lf.maxFileSize)}
	var t *schema.Tree
	var err error
	if root == "-" {
		in := e.stdin
		if in == nil {
			in = strings.NewReader("")
		}
		t, err = schema.LoadStream(schema.StdinName, in, opts)
	} else if st, serr := os.Stat(root); serr == nil && !st.IsDir() {
		t, err = schema.LoadFile(root, opts)
	} else {
		t, err = loadDir(e, root, lf, opts)
	}
	if err != nil {
		return nil, err
	}
	return &loaded{tree: t, Result: treecheck.Check(root, t)}, nil
}

// loadValid is loadTree for a command that needs a valid tree: it prints
// the diagnostics, and when there are errors counts them and says what
// the command left undone (notDone: "nothing written"); nil means the
// command failed (already reported).
func loadValid(e *env, cmd, root string, lf *loadFlags, notDone string) *loaded {
	l, err := loadTree(e, root, lf)
	if err != nil {
		e.fail(cmd, "%v", err)
		return nil
	}
	printDiags(e, l.Diags)
	if n := l.Diags.Errors(); n > 0 {
		fmt.Fprintf(e.stderr, "%s, %s; %s\n", treediff.Plural(l.Diags.Files(), "file"), treediff.Plural(n, "error"), notDone)
		return nil
	}
	return l
}

// loadDir is loadTree for a directory, with the validation cache.
func loadDir(e *env, root string, lf *loadFlags, opts schema.Options) (*schema.Tree, error) {
	var dc *cache.Disk
	if !lf.noCache && lf.cacheDir != "" {
		var err error
		dc, err = cache.OpenDisk(lf.cacheDir, root)
		if err != nil {
			fmt.Fprintf(e.stderr, "netspec: warning: cache disabled: %v\n", err)
		} else {
			// The pack's stat index spares reading the files not
			// changed since the run that wrote it.
			opts.Cache, opts.Stats = dc, dc.Stats()
		}
	}
	t, err := schema.Load(root, opts)
	if err != nil {
		return nil, err
	}
	if dc != nil {
		if err := dc.Save(); err != nil {
			fmt.Fprintf(e.stderr, "netspec: warning: cache not saved: %v\n", err)
		}
		if _, err := dc.Prune(); err != nil {
			fmt.Fprintf(e.stderr, "netspec: warning: cache not pruned: %v\n", err)
		}
	}
	return t, nil
}

// lockFile names the tree's lock in messages: netspec.lock, or the file or
// stream whose document it is.
func (l *loaded) lockFile() string {
	if l.tree.Stream() {
		return l.tree.Root
	}
	return LockFile
}

// printDiags writes diagnostics to stderr, errors and warnings alike.
func printDiags(e *env, dl diag.List) {
	for _, d := range dl {
		fmt.Fprintln(e.stderr, d.String())
	}
}

// byteSize is a flag value of bytes, accepting KiB, MiB and GiB suffixes.
type byteSize int64

// register defines --max-file-size on fs, into b.
func (b *byteSize) register(fs *flag.FlagSet) {
	*b = schema.DefaultMaxFileSize
	fs.Var(b, "max-file-size", "refuse spec files larger than `SIZE` (bytes, or with KiB/MiB)")
}

// byteUnits are the suffixes of a byteSize, largest first.
var byteUnits = []struct {
	suffix string
	mult   int64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

func (b *byteSize) String() string {
	n := int64(*b)
	for _, u := range byteUnits[:3] { // not B: a count of bytes has no suffix
		if n >= u.mult && n%u.mult == 0 {
			return fmt.Sprintf("%d%s", n/u.mult, u.suffix)
		}
	}
	return strconv.FormatInt(n, 10)
}

func (b *byteSize) Set(s string) error {
	mult := int64(1)
	for _, u := range byteUnits {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = rest, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n <= 0 {
		return fmt.Errorf("want a positive size such as 8MiB")
	}
	*b = byteSize(n * mult)
	return nil
}
