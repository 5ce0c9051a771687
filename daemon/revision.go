package daemon

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/fsnotify/fsnotify"

	"netspec.dev/netspec/internal/treecheck"
	"netspec.dev/netspec/schema"
)

// Revision sources.
const (
	RevisionGit     = "git"     // the commit checked out (HEAD)
	RevisionContent = "content" // a hash of the tree's content
)

// Revision names the tree a sync read: its git commit when the tree is
// in a git checkout, else a hash of its content (ContentRevision).
type Revision struct {
	// ID is a commit's hex name; the commit, "+sha256:" and the first 12
	// hex digits of the content hash when the tree's files are not as
	// the commit has them (Dirty); or, not in a git checkout,
	// "sha256:" and the content hash in hex.
	ID     string
	Source string // RevisionGit or RevisionContent
	Dirty  bool   // git, with changes not committed (or that cannot be told apart from the commit)
}

// maxRefDepth bounds the chain of symbolic refs followed from HEAD.
const maxRefDepth = 10

// GitHead returns the commit checked out in the git checkout that holds
// dir (dir itself or a parent directory has .git), read from the files
// alone, as git would: .git is the git dir, or a file "gitdir: PATH"
// (worktrees, submodules); its HEAD is a commit (detached) or "ref:
// refs/heads/…", resolved through loose refs and packed-refs of the
// worktree's common dir. Symlinks on the way to dir are followed first,
// so that git-sync's TREE -> .worktrees/REV gives REV's commit.
//
// ok is false, with a nil error, when no directory up from dir has .git;
// an error tells that one has, but its HEAD cannot be resolved (an unborn
// branch, a ref storage other than files).
func GitHead(dir string) (commit string, ok bool, err error) {
	commit, _, ok, err = gitHead(dir)
	return commit, ok, err
}

// gitHead is GitHead, which also returns the files it read or looked
// for, whose change may move HEAD: HEAD, each ref on the way from it
// (in the git dir and the common dir), packed-refs.
func gitHead(dir string) (commit string, files []string, ok bool, err error) {
	abs, err := realDir(dir)
	if err != nil {
		return "", nil, false, err
	}
	gitDir, _, found, err := findGitDir(abs)
	if err != nil || !found {
		return "", nil, found, err
	}
	commonDir := gitDir
	if b, err := os.ReadFile(filepath.Join(gitDir, "commondir")); err == nil {
		c := strings.TrimSpace(string(b))
		if !filepath.IsAbs(c) {
			c = filepath.Join(gitDir, c)
		}
		commonDir = filepath.Clean(c)
	}
	files = []string{filepath.Join(gitDir, "HEAD"), filepath.Join(commonDir, "packed-refs")}
	head, err := os.ReadFile(files[0])
	if err != nil {
		return "", files, true, fmt.Errorf("git: %w", err)
	}
	v := strings.TrimSpace(string(head))
	for range maxRefDepth {
		ref, symbolic := strings.CutPrefix(v, "ref:")
		if !symbolic {
			if !isHash(v) {
				return "", files, true, fmt.Errorf("git: %s: not a commit: %q", files[0], v)
			}
			return strings.ToLower(v), files, true, nil
		}
		ref = strings.TrimSpace(ref)
		if ref != "" && !strings.Contains(ref, "..") && !filepath.IsAbs(ref) {
			files = append(files, filepath.Join(gitDir, filepath.FromSlash(ref)))
			if commonDir != gitDir {
				files = append(files, filepath.Join(commonDir, filepath.FromSlash(ref)))
			}
		}
		if v, err = readRef(gitDir, commonDir, ref); err != nil {
			return "", files, true, err
		}
	}
	return "", files, true, fmt.Errorf("git: HEAD: more than %d symbolic refs", maxRefDepth)
}

// realDir is dir absolute, its symlinks resolved when they resolve.
func realDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	return abs, nil
}

// findGitDir looks for .git in dir and its parents and returns the git
// dir it names and the work tree's root, the directory that holds .git.
func findGitDir(dir string) (gitDir, work string, found bool, err error) {
	for {
		p := filepath.Join(dir, ".git")
		fi, err := os.Stat(p)
		switch {
		case err == nil && fi.IsDir():
			return p, dir, true, nil
		case err == nil && fi.Mode().IsRegular():
			// A worktree's or submodule's "gitdir: PATH", relative to
			// the directory of the file.
			b, err := os.ReadFile(p)
			if err != nil {
				return "", "", true, fmt.Errorf("git: %w", err)
			}
			rest, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
			if !ok {
				return "", "", true, fmt.Errorf("git: %s: no \"gitdir:\" line", p)
			}
			g := strings.TrimSpace(rest)
			if !filepath.IsAbs(g) {
				g = filepath.Join(dir, g)
			}
			return filepath.Clean(g), dir, true, nil
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return "", "", true, fmt.Errorf("git: %w", err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", "", false, nil
		}
		dir = parent
	}
}

// readRef returns the content of a ref: a hash, or "ref: …" for a
// symbolic one. Loose refs come first: those of the worktree (its git
// dir), then the common dir's; then the common dir's packed-refs.
func readRef(gitDir, commonDir, ref string) (string, error) {
	if ref == "" || strings.Contains(ref, "..") || filepath.IsAbs(ref) {
		return "", fmt.Errorf("git: bad ref %q", ref)
	}
	for _, d := range []string{gitDir, commonDir} {
		b, err := os.ReadFile(filepath.Join(d, filepath.FromSlash(ref)))
		if err == nil {
			return strings.TrimSpace(string(b)), nil
		}
		if !errors.Is(err, fs.ErrNotExist) && !isDirErr(err) {
			return "", fmt.Errorf("git: %w", err)
		}
	}
	f, err := os.Open(filepath.Join(commonDir, "packed-refs"))
	if err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			if len(line) == 0 || line[0] == '#' || line[0] == '^' {
				continue
			}
			hash, name, ok := bytes.Cut(line, []byte{' '})
			if ok && string(name) == ref {
				return string(hash), nil
			}
		}
		if err := sc.Err(); err != nil {
			return "", fmt.Errorf("git: packed-refs: %w", err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("git: %w", err)
	}
	if _, err := os.Stat(filepath.Join(commonDir, "reftable")); err == nil {
		return "", fmt.Errorf("git: %s: refs in reftable format are not read", ref)
	}
	return "", fmt.Errorf("git: %s: no such ref (a branch without commits?)", ref)
}

// isDirErr tells the error of reading a directory as a file (a ref
// that is a prefix of others).
func isDirErr(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "is a directory")
}

// isHash tells a SHA-1 or SHA-256 object name in hex.
func isHash(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// ContentRevision hashes what a tree's plan is made of: the path (relative
// to the root, slash-separated) and content of every spec file the loader
// read (those .netspecignore leaves out, hidden files and the files of
// kustomize and Helm are not read), and the content of netspec.lock. The
// same files give the same revision, whatever their timestamps or the
// order they were read in.
func ContentRevision(root string, t *schema.Tree) (Revision, error) {
	h := sha256.New()
	h.Write([]byte("netspec-tree-content/1\x00"))
	d := t.Digest()
	h.Write(d[:])
	lock, err := os.ReadFile(filepath.Join(root, treecheck.LockFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Revision{}, err
	}
	if err == nil {
		l := sha256.Sum256(lock)
		h.Write([]byte{1})
		h.Write(l[:])
	} else {
		h.Write([]byte{0})
	}
	return Revision{ID: "sha256:" + hex.EncodeToString(h.Sum(nil)), Source: RevisionContent}, nil
}

// gitWatch watches the files that name the tree's git commit (gitHead's
// files), apart from the tree's own watches: git writes HEAD or the ref
// after the files of a checkout or commit, and .git, hidden, is not
// watched with the tree. An event on them reloads the tree by its file
// changes alone (none, usually), which reads the commit again. It
// watches the git dir's index.lock too, which git holds while it
// rewrites the work tree (gitLocked).
type gitWatch struct {
	fw   *fsnotify.Watcher // nil: not watching (inotify refused)
	set  watchSet
	lock string // the git dir's index.lock; "": not in a git work tree, or not watching
}

// update watches the git files of the tree at root as it is now.
func (g *gitWatch) update(root string) {
	if g.fw == nil {
		return
	}
	_, files, _, _ := gitHead(root)
	s := watchSet{}
	for _, f := range files {
		s.only(filepath.Dir(f), filepath.Base(f))
	}
	g.lock = ""
	if len(files) > 0 { // files[0] is the git dir's HEAD
		g.lock = filepath.Join(filepath.Dir(files[0]), gitIndexLock)
		s.only(filepath.Dir(g.lock), gitIndexLock)
	}
	s.sync(g.fw, g.set)
	g.set = s
}

// events is the channel of the git files' events (nil without a watcher).
func (g *gitWatch) events() chan fsnotify.Event {
	if g.fw == nil {
		return nil
	}
	return g.fw.Events
}

// errors is the channel of the git watcher's errors (nil without one).
func (g *gitWatch) errors() chan error {
	if g.fw == nil {
		return nil
	}
	return g.fw.Errors
}
