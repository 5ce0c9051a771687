package daemon

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"netspec.dev/netspec/internal/treecheck"
	"netspec.dev/netspec/schema"
)

// indexEntry is what gitClean needs of an entry of git's index.
type indexEntry struct {
	mtime time.Time
	size  uint32
	hash  []byte
}

// readGitIndex reads the entries of git's index file (versions 2 and 3,
// SHA-1; a version 4 index or a SHA-256 repository is an error: not
// read), by path, and whether its cache tree (extension TREE) says the
// index has changes not written as a tree (staged since the last commit
// or checkout): invalid is true then; a missing extension tells nothing.
func readGitIndex(path string) (entries map[string]indexEntry, invalid bool, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, false, err
	}
	bad := func(what string) error { return fmt.Errorf("git: %s: %s", path, what) }
	if len(b) < 12+20 || string(b[:4]) != "DIRC" {
		return nil, false, bad("not an index")
	}
	version := binary.BigEndian.Uint32(b[4:8])
	if version != 2 && version != 3 {
		return nil, false, bad("index version " + strconv.Itoa(int(version)) + " is not read")
	}
	n := int(binary.BigEndian.Uint32(b[8:12]))
	end := len(b) - 20 // the trailing checksum
	entries = make(map[string]indexEntry, n)
	off := 12
	for range n {
		const fixed = 62 // stat fields, hash, flags
		if off+fixed > end {
			return nil, false, bad("truncated")
		}
		e := b[off:]
		ent := indexEntry{
			mtime: time.Unix(int64(binary.BigEndian.Uint32(e[8:12])), int64(binary.BigEndian.Uint32(e[12:16]))),
			size:  binary.BigEndian.Uint32(e[36:40]),
			hash:  e[40:60],
		}
		flags := binary.BigEndian.Uint16(e[60:62])
		p := off + fixed
		if flags&0x4000 != 0 { // extended flags (version 3)
			p += 2
		}
		i := bytes.IndexByte(b[p:end], 0)
		if i < 0 {
			return nil, false, bad("truncated")
		}
		name := string(b[p : p+i])
		// Entries are padded with NULs to a multiple of 8 bytes.
		entLen := p + i + 1 - off
		off += (entLen + 7) &^ 7
		if flags>>12&3 != 0 { // a merge stage: a conflict is a change
			invalid = true
		}
		entries[name] = ent
	}
	for off+8 <= end {
		sig, size := string(b[off:off+4]), int(binary.BigEndian.Uint32(b[off+4:off+8]))
		data := b[off+8:]
		if size > len(data)-20 {
			break
		}
		data = data[:size]
		off += 8 + size
		if sig != "TREE" {
			continue
		}
		// The root first: "" NUL, its entry count (-1: invalid), ...
		if i := bytes.IndexByte(data, 0); i == 0 {
			rest := data[1:]
			if j := bytes.IndexByte(rest, ' '); j > 0 && string(rest[:j]) == "-1" {
				invalid = true
			}
		}
	}
	return entries, invalid, nil
}

// gitClean tells whether files (slash paths relative to the tree's root
// dir) are as the commit checked out has them, as far as git's index
// tells without a git binary: each is in the index, with the index's
// size and mtime (a file no older than the index is hashed and compared
// with its blob, as git does for "racily clean" entries), no spec file
// the index holds under the tree is deleted, and the index's cache tree
// has no staged change. A SHA-256 repository or an index
// version 4 is an error: not read.
func gitClean(root string, files []string) (bool, error) {
	abs, err := realDir(root)
	if err != nil {
		return false, err
	}
	gitDir, work, found, err := findGitDir(abs)
	if err != nil || !found {
		return false, err
	}
	indexPath := filepath.Join(gitDir, "index")
	ifi, err := os.Stat(indexPath)
	if err != nil {
		return false, fmt.Errorf("git: %w", err)
	}
	entries, invalid, err := readGitIndex(indexPath)
	if err != nil || invalid {
		return false, err
	}
	rel, err := filepath.Rel(work, abs)
	if err != nil {
		return false, err
	}
	if deletedSpec(entries, filepath.ToSlash(rel), abs, files) {
		return false, nil
	}
	for _, f := range files {
		name := filepath.ToSlash(filepath.Join(rel, filepath.FromSlash(f)))
		e, ok := entries[name]
		if !ok {
			return false, nil // untracked
		}
		full := filepath.Join(abs, filepath.FromSlash(f))
		fi, err := os.Stat(full)
		if err != nil {
			return false, err
		}
		if uint32(fi.Size()) != e.size {
			return false, nil
		}
		if fi.ModTime().Equal(e.mtime) && fi.ModTime().Before(ifi.ModTime()) {
			continue
		}
		// Racy, or touched: compare the content with the blob.
		b, err := os.ReadFile(full)
		if err != nil {
			return false, err
		}
		h := sha1.New()
		fmt.Fprintf(h, "blob %d\x00", len(b))
		h.Write(b)
		if !bytes.Equal(h.Sum(nil), e.hash) {
			return false, nil
		}
	}
	return true, nil
}

// deletedSpec tells whether the index holds, under the tree's root (rel,
// a slash path from the work tree's root), a file of a name the loader
// reads that is gone from the disk: a deletion not committed. files are
// the tree's files that hold objects, known to exist.
func deletedSpec(entries map[string]indexEntry, rel, root string, files []string) bool {
	prefix := rel + "/"
	if rel == "." {
		prefix = ""
	}
	have := make(map[string]bool, len(files))
	for _, f := range files {
		have[f] = true
	}
	for name := range entries {
		f, ok := strings.CutPrefix(name, prefix)
		if !ok || have[f] || f != treecheck.LockFile && !schema.SpecFile(f) {
			continue
		}
		if _, err := os.Lstat(filepath.Join(root, filepath.FromSlash(f))); errors.Is(err, os.ErrNotExist) {
			return true
		}
	}
	return false
}
