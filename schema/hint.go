package schema

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// maxChanged is the most paths a Load takes from Options.Changed; with
// more, it walks the tree (a stat per path costs about what a walk costs
// per file).
const maxChanged = 1024

// walkState is the walk of the previous Load with a StatCache, kept so that
// a Load told which paths changed (Options.Changed) updates it instead of
// listing every directory again. It is kept only for trees whose walk met
// no symlink and reported nothing: there, a path's meaning does not depend
// on other paths, so a change shows at the changed path alone.
type walkState struct {
	root     string                  // as given to Load
	realRoot string                  // root with symlinks resolved, as the walk used it
	absRoot  string                  // realRoot made absolute, to compare changed paths with
	max      int64                   // the Load's MaxFileSize: the units' known flags hold for it
	units    []*unit                 // in the walk's order, by first file (unitOf)
	cue      map[string]*unit        // CUE units by directory
	dirs     map[string]bool         // the directories walked, "." for the root
	skipped  []Skipped               // the files not read for their names
	rules    map[string]*ignoreRules // the ignore files, by directory
	left     map[string]bool         // the directories that ignore files leave out
}

// newWalkState keeps the walk w of root for later Loads; nil when w met a
// symlink or reported a problem, or when the root has no absolute path.
func newWalkState(root string, w *walker, max int64) *walkState {
	if !haveStat || w.links || w.complained {
		return nil
	}
	abs, err := filepath.Abs(w.realRoot)
	if err != nil {
		return nil
	}
	return &walkState{root: root, realRoot: w.realRoot, absRoot: abs, max: max, units: w.units,
		cue: w.cue, dirs: w.dirs, skipped: w.skipped, rules: w.rules, left: w.left}
}

// unitOf returns the unit of the file rel (a slash path relative to the
// root), nil when s lists no such file: a .cue file is in its directory's
// unit, any other in the unit whose first and only file it is.
func (s *walkState) unitOf(rel string) *unit {
	if specExt(rel) == ".cue" {
		if u := s.cue[path.Dir(rel)]; u != nil {
			if _, ok := slices.BinarySearch(u.files, rel); ok {
				return u
			}
		}
		return nil
	}
	i := sort.Search(len(s.units), func(i int) bool { return s.units[i].files[0] >= rel })
	if i < len(s.units) && s.units[i].files[0] == rel && !s.units[i].isCUE {
		return s.units[i]
	}
	return nil
}

// update brings s up to date with the tree, given that only the paths
// changed may differ from what s holds. Units of changed files lose their
// known flag; new files get units; the files gone leave theirs (their real
// paths are returned, to forget). It reports false when the changes are
// not of that kind (a directory made or removed, a symlink, a path outside
// the tree or in a directory not walked, the root now elsewhere), and s
// must then be dropped: it may be changed in part.
func (s *walkState) update(changed []string) (gone []string, ok bool) {
	if len(changed) > maxChanged {
		return nil, false
	}
	if real, err := filepath.EvalSymlinks(s.root); err != nil || real != s.realRoot {
		return nil, false
	}
	for _, p := range changed {
		if base := filepath.Base(p); base == IgnoreFile || skipName(base) != "" {
			// A changed ignore file changes what the walk leaves out; a
			// file the walk skips by name is listed in Tree.Skipped.
			return nil, false
		}
		rel, ok := s.rel(p)
		if !ok {
			return nil, false
		}
		if rel == "" || s.leftOut(rel) {
			continue // hidden or left out: the walk never reads it
		}
		real := filepath.Join(s.realRoot, filepath.FromSlash(rel))
		fi, err := os.Lstat(real)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if s.dirs[rel] {
				return nil, false
			}
			if u := s.unitOf(rel); u != nil {
				s.drop(u, rel)
				gone = append(gone, real)
			}
			// Otherwise not a spec file (a temporary file): nothing to do.
		case err != nil:
			return nil, false
		case fi.Mode().IsRegular():
			if u := s.unitOf(rel); u != nil {
				u.known = false
				continue
			}
			if !s.dirs[path.Dir(rel)] {
				return nil, false
			}
			if ext := specExt(rel); ext != "" && !ignored(s.scope(rel), rel, false) {
				if s.clash(rel) {
					return nil, false
				}
				s.add(rel, real, ext == ".cue")
			}
		default: // a directory, a symlink, a device…
			return nil, false
		}
	}
	return gone, true
}

// rel is the slash path of p relative to the root: "" when a part of it is
// hidden (the walk skips it), false when p is the root itself or outside.
// The watcher names paths in real directories; any other path is tried
// with its directory's symlinks resolved.
func (s *walkState) rel(p string) (string, bool) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", false
	}
	r, err := filepath.Rel(s.absRoot, abs)
	if err != nil || !local(r) {
		dir, err := filepath.EvalSymlinks(filepath.Dir(abs))
		if err != nil {
			return "", false
		}
		if r, err = filepath.Rel(s.absRoot, filepath.Join(dir, filepath.Base(abs))); err != nil || !local(r) {
			return "", false
		}
	}
	if r == "." {
		return "", false
	}
	r = filepath.ToSlash(r)
	for part := range strings.SplitSeq(r, "/") {
		if strings.HasPrefix(part, ".") {
			return "", true
		}
	}
	return r, true
}

// leftOut tells whether rel is inside a directory that an ignore file
// leaves out: the walk never looks there.
func (s *walkState) leftOut(rel string) bool {
	for d := path.Dir(rel); d != "."; d = path.Dir(d) {
		if s.left[d] {
			return true
		}
	}
	return false
}

// scope returns the ignore files in effect for rel, root first.
func (s *walkState) scope(rel string) []*ignoreRules {
	var out []*ignoreRules
	for d := path.Dir(rel); ; d = path.Dir(d) {
		if r := s.rules[d]; r != nil {
			out = append(out, r)
		}
		if d == "." {
			break
		}
	}
	slices.Reverse(out)
	return out
}

// local tells whether the cleaned relative path r stays below its base.
func local(r string) bool {
	return r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator)) && !filepath.IsAbs(r)
}

// clash tells whether a file of s has the name rel but for case: on a
// case-insensitive directory both would be one file, which only a walk
// names right.
func (s *walkState) clash(rel string) bool {
	for _, u := range s.units {
		for _, f := range u.files {
			if strings.EqualFold(f, rel) {
				return true
			}
		}
	}
	return false
}

// add lists a new spec file: a unit of its own, or a file of its
// directory's CUE unit.
func (s *walkState) add(rel, real string, isCUE bool) {
	rel = withinPath(real, rel)
	if !isCUE {
		u := &unit{files: []string{rel}, real: []string{real}}
		s.insert(u)
		return
	}
	dir := path.Dir(rel)
	u := s.cue[dir]
	if u == nil {
		u = &unit{isCUE: true}
		s.cue[dir] = u
	} else {
		s.remove(u)
	}
	// The walk lists a directory's files by name.
	i := sort.SearchStrings(u.files, rel)
	u.files = append(u.files[:i], append([]string{rel}, u.files[i:]...)...)
	u.real = append(u.real[:i], append([]string{real}, u.real[i:]...)...)
	u.meta, u.known = nil, false
	s.insert(u)
}

// drop forgets the file rel of unit u, and u when it has no file left.
func (s *walkState) drop(u *unit, rel string) {
	s.remove(u)
	i := sort.SearchStrings(u.files, rel)
	if i == len(u.files) || u.files[i] != rel {
		return // cannot happen: u lists rel
	}
	u.files = append(u.files[:i], u.files[i+1:]...)
	u.real = append(u.real[:i], u.real[i+1:]...)
	u.meta, u.known = nil, false
	if len(u.files) == 0 {
		if u.isCUE {
			delete(s.cue, path.Dir(rel))
		}
		return
	}
	s.insert(u)
}

// insert puts u into s.units in the walk's order (by first file).
func (s *walkState) insert(u *unit) {
	i := sort.Search(len(s.units), func(i int) bool { return s.units[i].files[0] >= u.files[0] })
	s.units = append(s.units, nil)
	copy(s.units[i+1:], s.units[i:])
	s.units[i] = u
}

// remove takes u out of s.units.
func (s *walkState) remove(u *unit) {
	i := sort.Search(len(s.units), func(i int) bool { return s.units[i].files[0] >= u.files[0] })
	if i < len(s.units) && s.units[i] == u {
		s.units = append(s.units[:i], s.units[i+1:]...)
	}
}
