package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The bounds of a cache directory, which Disk.Prune keeps on every use:
// the packs of trees not validated for MaxAge go, then the least recently
// used beyond MaxSize in all. A pack removed is a cold run for its tree,
// never a wrong one.
const (
	MaxAge  = 30 * 24 * time.Hour
	MaxSize = 128 << 20
)

// touchAfter is how old a pack's modification time may get before a run
// that uses the pack without rewriting it sets it to now: the time is
// when the pack was last used, which pruning goes by.
const touchAfter = time.Hour

// tmpMaxAge is how old a temporary file of an interrupted Save must be
// before pruning removes it (a Save under way is younger).
const tmpMaxAge = time.Hour

// Prune removes, from the directory of d's pack, the packs not used for
// MaxAge and then, least recently used first, packs until those left
// take at most MaxSize bytes; d's own pack is never removed. It returns
// the names of the files removed.
func (d *Disk) Prune() ([]string, error) {
	return prune(filepath.Dir(d.path), d.path, time.Now(), MaxAge, MaxSize)
}

// prune is Prune with its bounds given: in dir, packs (32 hex digits and
// ".pack") modified before now-maxAge go, then the oldest until the rest
// take at most maxSize bytes; keep stays. Temporary files of a Save older
// than tmpMaxAge go too. Other files are not touched.
func prune(dir, keep string, now time.Time, maxAge time.Duration, maxSize int64) (removed []string, err error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	type pack struct {
		name string
		mod  time.Time
		size int64
	}
	var packs []pack
	var errs []error
	remove := func(name string) {
		if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			return
		}
		removed = append(removed, name)
	}
	var total int64
	for _, e := range ents {
		name := filepath.Join(dir, e.Name())
		isPack, isTmp := isPackName(e.Name()), isTmpName(e.Name())
		if !e.Type().IsRegular() || !isPack && !isTmp {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		switch {
		case isTmp:
			if now.Sub(fi.ModTime()) > tmpMaxAge {
				remove(name)
			}
		case name == keep:
			total += fi.Size()
		case now.Sub(fi.ModTime()) > maxAge:
			remove(name)
		default:
			packs = append(packs, pack{name: name, mod: fi.ModTime(), size: fi.Size()})
			total += fi.Size()
		}
	}
	// Oldest first; by name among equals, so that the choice is the same
	// whatever order the directory lists.
	slices.SortFunc(packs, func(a, b pack) int {
		if c := a.mod.Compare(b.mod); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	for _, p := range packs {
		if total <= maxSize {
			break
		}
		remove(p.name)
		total -= p.size
	}
	if len(errs) > 0 {
		return removed, fmt.Errorf("cache: %w", errors.Join(errs...))
	}
	return removed, nil
}

// isPackName tells a pack's file name: 32 lower-case hex digits, ".pack".
func isPackName(name string) bool {
	h, ok := strings.CutSuffix(name, ".pack")
	if !ok || len(h) != 32 {
		return false
	}
	for _, c := range h {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// isTmpName tells the name of a temporary file of writeAtomic for a pack:
// ".NAME.pack.tmp-*".
func isTmpName(name string) bool {
	rest, ok := strings.CutPrefix(name, ".")
	if !ok {
		return false
	}
	pack, _, ok := strings.Cut(rest, ".tmp-")
	return ok && isPackName(pack)
}

// touch sets the modification time of the pack to now when it is older
// than touchAfter: it was used now, though not rewritten. A pack that
// cannot be touched is left as it is (it may be pruned earlier).
func (d *Disk) touch(now time.Time) {
	if fi, err := os.Stat(d.path); err == nil && now.Sub(fi.ModTime()) > touchAfter {
		os.Chtimes(d.path, now, now)
	}
}
