package treecheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"netspec.dev/netspec/schema"
)

func TestReadLock(t *testing.T) {
	for _, tc := range []struct {
		name, lock string // "" : no lock file
		wantLock   bool
		wantDiag   string
	}{
		{name: "no lock file"},
		{name: "the example's lock", lock: "copy", wantLock: true},
		{name: "broken lock", lock: "{not: [json", wantDiag: "netspec.lock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			switch tc.lock {
			case "":
			case "copy":
				data, err := os.ReadFile("../../examples/basic/netspec.lock")
				if err != nil {
					t.Fatal(err)
				}
				os.WriteFile(filepath.Join(dir, LockFile), data, 0o644)
			default:
				os.WriteFile(filepath.Join(dir, LockFile), []byte(tc.lock), 0o644)
			}
			lock, dl := ReadLock(dir)
			if (lock != nil) != tc.wantLock {
				t.Errorf("lock = %v, want a lock: %t", lock, tc.wantLock)
			}
			switch {
			case tc.wantDiag == "" && len(dl) > 0:
				t.Errorf("diagnostics: %v", dl)
			case tc.wantDiag != "" && (dl.Errors() != 1 || !strings.Contains(dl[0].String(), tc.wantDiag) || !strings.Contains(dl[0].String(), "netspec lock")):
				t.Errorf("diagnostics %v, want one error naming %s and saying how to fix it", dl, tc.wantDiag)
			}
		})
	}
}

// TestCheck: the tree's, the lock's and the cross-object diagnostics come
// back together, sorted; the example is clean.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		root   string
		errors bool
	}{
		{"../../examples/basic", false},
		{"../../examples/broken", true},
	} {
		tr, err := schema.Load(tc.root, schema.Options{})
		if err != nil {
			t.Fatal(err)
		}
		r := Check(tc.root, tr)
		if got := r.Diags.Errors() > 0; got != tc.errors {
			t.Errorf("%s: errors %t, want %t: %v", tc.root, got, tc.errors, r.Diags)
		}
		if r.Checked == nil {
			t.Errorf("%s: no checked result", tc.root)
		}
		if !tc.errors && r.Lock == nil {
			t.Errorf("%s: its netspec.lock was not read", tc.root)
		}
	}
}
