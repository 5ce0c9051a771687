package schema

import (
	"crypto/sha256"
	"fmt"
	"io"
	"path/filepath"

	"go.yaml.in/yaml/v3"

	"netspec.dev/netspec/internal/diag"
)

// StdinName is the file name that positions in a tree read from standard
// input carry.
const StdinName = "<stdin>"

// LoadFile reads a tree that is one YAML or JSON file: its documents
// (--- separated; a kind: List contributes its items) are the tree's
// objects. Positions name the file as given (slash-separated). See
// LoadStream for the lock document. The error is for a file that cannot be
// read at all; a file larger than MaxFileSize is a diagnostic, as in Load.
func LoadFile(name string, opt Options) (*Tree, error) {
	if opt.MaxFileSize <= 0 {
		opt.MaxFileSize = DefaultMaxFileSize
	}
	file := filepath.ToSlash(filepath.Clean(name))
	if specExt(name) == ".cue" {
		return nil, fmt.Errorf("tree %s: a single file must be YAML or JSON; CUE files are read from a directory (one CUE package per directory)", name)
	}
	data, _, err := readLimited(name, opt.MaxFileSize)
	if err != nil {
		if _, statErr := filepath.EvalSymlinks(name); statErr != nil {
			return nil, fmt.Errorf("tree %s: %w", name, unwrapPath(statErr))
		}
		t := &Tree{Root: file, Files: 1, mem: map[string][]byte{}}
		t.Diags.Errorf(diag.Pos{File: file}, nil, "%v", err)
		return t, nil
	}
	return loadStream(file, data), nil
}

// LoadStream reads a tree from a stream of YAML or JSON documents, such as
// standard input (name StdinName) or the output of kubectl get -o yaml.
// Besides objects, the stream may hold the tree's lock: one document with
// neither apiVersion nor kind but a version key, as netspec.lock is
// written (Tree.StreamLock). The stream is read up to MaxFileSize; more is
// a diagnostic. The error is for a stream that cannot be read.
func LoadStream(name string, r io.Reader, opt Options) (*Tree, error) {
	if opt.MaxFileSize <= 0 {
		opt.MaxFileSize = DefaultMaxFileSize
	}
	data, err := io.ReadAll(io.LimitReader(r, opt.MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("tree %s: %w", name, err)
	}
	if int64(len(data)) > opt.MaxFileSize {
		t := &Tree{Root: name, Files: 1, mem: map[string][]byte{}}
		t.Diags.Errorf(diag.Pos{File: name}, nil, "input is larger than the %s limit (--max-file-size)", humanBytes(opt.MaxFileSize))
		return t, nil
	}
	return loadStream(name, data), nil
}

// Stream says whether t was read from one file or stream (LoadFile,
// LoadStream) rather than a directory: its lock is StreamLock, not a file.
func (t *Tree) Stream() bool { return t.mem != nil }

// loadStream validates the documents of one file or stream, as Load does
// a YAML file of a tree, and keeps the contents for Locate. It uses no
// Cache: the cache keys files of a tree on disk.
func loadStream(name string, data []byte) *Tree {
	t := &Tree{Root: name, Files: 1, mem: map[string][]byte{name: data}}
	t.sums = []fileSum{{name, &fileMeta{size: int64(len(data)), sum: sha256.Sum256(data)}}}
	var second bool
	raws, ignored := splitDocs(name, data, &t.Diags, func(root *yaml.Node, m map[string]any) bool {
		if _, ok := m["version"]; !ok {
			return false
		}
		if t.StreamLock != nil {
			if !second {
				t.Diags.Errorf(locateYAML(name, root, nil), nil, "a second lock document (a version, and neither apiVersion nor kind): a stream holds one lock, and the first is at line %d", docRoot(t.StreamLock).Line)
				second = true
			}
			return true
		}
		t.StreamLock = root
		return true
	}, nil)
	t.Ignored = ignored
	v := newValidator()
	for _, raw := range raws {
		if o := v.check(raw, &t.Diags); o != nil {
			t.Objects = append(t.Objects, o)
		}
	}
	t.Diags.Sort()
	return t
}
