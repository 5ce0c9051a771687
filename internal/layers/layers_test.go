package layers

import (
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// module is the project's module path.
const module = "netspec.dev/netspec"

// pure are the folders whose packages must stay pure (docs/design.md).
var pure = []string{"schema", "compiler", "plan", "render", "treediff", "explain"}

// sideEffects are the import paths, and their subpackages, that a pure
// package must not reach: the project's packages with side effects
// (relative to the module) and the libraries that reach the kernel's
// network state or watch files. Reading files is allowed: schema loads
// trees (with syscall, for speed).
var sideEffects = []string{
	"applier", "daemon", "cmd", "internal/testnet", "internal/vmtest",
	"github.com/google/nftables", "github.com/mdlayher/netlink",
	"github.com/vishvananda/netlink", "github.com/vishvananda/netns",
	"github.com/moby/ipvs", "github.com/fsnotify/fsnotify",
}

// TestPurePackagesImportNoSideEffects fails when a package under a pure
// folder imports, directly or through the project's packages, one with
// side effects.
func TestPurePackagesImportNoSideEffects(t *testing.T) {
	bad, err := violations(filepath.Join("..", ".."), module, pure)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range bad {
		t.Error(v)
	}
}

// TestViolationsFound proves the check on a small tree: render reaches
// nftables through helper and applier/x, plan imports netns; a test
// file's import and a folder outside the pure ones count for nothing.
func TestViolationsFound(t *testing.T) {
	got, err := violations(filepath.Join("testdata", "tree"), "example.com/m", []string{"render", "plan", "helper/none"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"example.com/m/plan imports github.com/vishvananda/netns",
		"example.com/m/render imports example.com/m/applier/x (via example.com/m/render -> example.com/m/helper -> example.com/m/applier/x)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n got %q\nwant %q", got, want)
	}
}

// violations lists, sorted, the packages under the folders pure of the
// module at root that import a side-effecting package, with the chain of
// project packages through which they reach it.
func violations(root, mod string, pure []string) ([]string, error) {
	imports := map[string][]string{} // by project package, its imports
	var load func(pkg string) error
	load = func(pkg string) error {
		if _, ok := imports[pkg]; ok {
			return nil
		}
		dir := filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(strings.TrimPrefix(pkg, mod), "/")))
		imps, err := packageImports(dir)
		if err != nil {
			return err
		}
		imports[pkg] = imps
		for _, imp := range imps {
			if within(imp, mod) && !forbidden(imp, mod) {
				if err := load(imp); err != nil {
					return err
				}
			}
		}
		return nil
	}
	var starts []string
	for _, p := range pure {
		err := filepath.WalkDir(filepath.Join(root, p), func(path string, d os.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) && path == filepath.Join(root, p) {
					return filepath.SkipDir
				}
				return err
			}
			if !d.IsDir() {
				return nil
			}
			if d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			pkg := mod + "/" + filepath.ToSlash(rel)
			starts = append(starts, pkg)
			return load(pkg)
		})
		if err != nil {
			return nil, err
		}
	}
	var out []string
	for _, start := range starts {
		if v := firstViolation(start, mod, imports); v != "" {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out, nil
}

// firstViolation walks the imports from start, breadth first, and
// describes the first side-effecting package it reaches, or returns "".
func firstViolation(start, mod string, imports map[string][]string) string {
	from := map[string]string{start: ""}
	queue := []string{start}
	for len(queue) > 0 {
		pkg := queue[0]
		queue = queue[1:]
		for _, imp := range imports[pkg] {
			if forbidden(imp, mod) {
				if pkg == start {
					return fmt.Sprintf("%s imports %s", start, imp)
				}
				chain := []string{imp}
				for p := pkg; p != ""; p = from[p] {
					chain = append(chain, p)
				}
				slices.Reverse(chain)
				return fmt.Sprintf("%s imports %s (via %s)", start, imp, strings.Join(chain, " -> "))
			}
			if _, seen := from[imp]; !seen && within(imp, mod) {
				from[imp] = pkg
				queue = append(queue, imp)
			}
		}
	}
	return ""
}

// within tells whether imp is a package of the module mod.
func within(imp, mod string) bool { return imp == mod || strings.HasPrefix(imp, mod+"/") }

// forbidden tells whether imp is a side-effecting package or under one.
func forbidden(imp, mod string) bool {
	for _, s := range sideEffects {
		if !strings.Contains(s, ".") {
			s = mod + "/" + s
		}
		if imp == s || strings.HasPrefix(imp, s+"/") {
			return true
		}
	}
	return false
}

// packageImports lists the imports of the non-test Go files of dir,
// sorted and without repeats; none for a folder without Go files.
func packageImports(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read package: %w", err)
	}
	fset := token.NewFileSet()
	var out []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ImportsOnly)
		if err != nil {
			return nil, err
		}
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", fset.Position(imp.Pos()), err)
			}
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
