package daemon

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/fsnotify/fsnotify"
)

// watchSet is the directories a tree's changes show up in, and which
// names in each matter: nil means every name (a directory of the tree),
// otherwise only the names listed (the parent of the root, or of a
// symlink on the way to it, where only that link matters).
type watchSet map[string]map[string]bool

// everything marks a directory whose every entry matters.
func (s watchSet) everything(dir string) { s[dir] = nil }

// only adds name to the names that matter in dir, unless every name
// already does.
func (s watchSet) only(dir, name string) {
	names, ok := s[dir]
	if ok && names == nil {
		return
	}
	if names == nil {
		names = map[string]bool{}
		s[dir] = names
	}
	names[name] = true
}

// matters tells whether an event on path concerns the tree.
func (s watchSet) matters(path string) bool {
	if names, ok := s[path]; ok && names == nil {
		return true // an event on a watched directory of the tree itself
	}
	names, ok := s[filepath.Dir(path)]
	if !ok {
		return false
	}
	return names == nil || names[filepath.Base(path)]
}

// scan lists the directories to watch for the tree at root:
//
//   - the parent of root, for root itself (a tree replaced whole, a
//     git-sync style symlink swapped to a new checkout), and the parent of
//     every symlink on the way from root to the real directory;
//   - every directory of the tree, as the loader walks it (symlinks to
//     directories inside the tree followed, hidden entries skipped);
//   - the directory of the target of every file symlink (ConfigMap style
//     trees: web.yaml -> ..data/web.yaml, ..data -> ..2024_05_01...).
//
// Paths are absolute and cleaned.
func scan(root string) watchSet {
	s := watchSet{}
	abs, err := filepath.Abs(root)
	if err != nil {
		abs = root
	}
	// Follow symlinks one hop at a time, watching each link's parent.
	p := filepath.Clean(abs)
	for range 40 {
		s.only(filepath.Dir(p), filepath.Base(p))
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			break
		}
		target, err := os.Readlink(p)
		if err != nil {
			break
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(p), target)
		}
		p = filepath.Clean(target)
	}
	realRoot, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return s // the root is gone: its parents are enough to see it return
	}
	visited := map[string]bool{}
	var walk func(dir string)
	walk = func(dir string) {
		if visited[dir] {
			return
		}
		visited[dir] = true
		s.everything(dir)
		entries, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		for _, e := range entries {
			name := e.Name()
			if strings.HasPrefix(name, ".") {
				continue
			}
			child := filepath.Join(dir, name)
			switch {
			case e.Type()&os.ModeSymlink != 0:
				target, err := filepath.EvalSymlinks(child)
				if err != nil || !within(realRoot, target) {
					continue
				}
				fi, err := os.Stat(target)
				if err != nil {
					continue
				}
				if fi.IsDir() {
					walk(target)
				} else {
					s.everything(filepath.Dir(target))
				}
			case e.IsDir():
				walk(child)
			}
		}
	}
	walk(realRoot)
	return s
}

// within tells whether path is root or below it.
func within(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// sync makes w watch exactly the directories of s, from the directories
// of old. Every directory is added again, also one watched before: a
// directory deleted and made again under the same name has lost its
// watch. Directories that cannot be watched (gone already) are dropped
// from s: the next scan sees what became of them.
func (s watchSet) sync(w *fsnotify.Watcher, old watchSet) (added, removed int) {
	for dir := range old {
		if _, keep := s[dir]; !keep {
			w.Remove(dir) // an error means the directory is gone, and its watch with it
			removed++
		}
	}
	for dir := range s {
		if err := w.Add(dir); err != nil {
			delete(s, dir)
			continue
		}
		if _, had := old[dir]; !had {
			added++
		}
	}
	return added, removed
}

// maxChanges is the most paths a reload takes as changed; a larger burst
// (a checkout, a copy of a directory) reloads as a resync does.
const maxChanges = 256

// changes collects the paths of the file events since the last reload, so
// that a reload for them (schema.Options.Changed) reads only them and
// keeps the directories watched. It trusts the paths only as long as
// nothing happened that they do not describe: events lost (an error, an
// overflow of the kernel's queue), a directory or a symlink created, an
// event on a watched directory itself (removed, renamed, its mode
// changed), an event in a directory watched for the root only (a tree
// swapped whole). Then full is set, and the reload rescans the
// directories and reads the tree as after SIGHUP. A change of a symlink
// that is not a directory of its own (a ConfigMap's ..data swapped) is a
// create of a symlink; the loader itself walks a tree that holds symlinks.
type changes struct {
	paths map[string]bool
	full  bool
}

// add notes an event on path (cleaned) that matters to the tree watched.
func (c *changes) add(path string, op fsnotify.Op, watched watchSet) {
	if c.full {
		return
	}
	if names, ok := watched[filepath.Dir(path)]; !ok || names != nil {
		c.full = true // the root or a symlink on the way to it
		return
	}
	if _, ok := watched[path]; ok {
		c.full = true // a watched directory removed, renamed or changed
		return
	}
	if op.Has(fsnotify.Create) {
		// A directory needs a watch; a symlink may lead anywhere.
		if fi, err := os.Lstat(path); err == nil && (fi.IsDir() || fi.Mode()&os.ModeSymlink != 0) {
			c.full = true
			return
		}
	}
	if c.paths == nil {
		c.paths = map[string]bool{}
	}
	c.paths[path] = true
	if len(c.paths) > maxChanges {
		c.full = true
	}
}

// lost notes that events were lost.
func (c *changes) lost() { c.full = true }

// take returns the paths changed and whether they tell all that changed
// (ok false: rescan and read the whole tree), and starts collecting anew.
func (c *changes) take() (paths []string, ok bool) {
	if !c.full {
		paths = make([]string, 0, len(c.paths))
		for p := range c.paths {
			paths = append(paths, p)
		}
	}
	ok = !c.full
	*c = changes{}
	return paths, ok
}
