package daemon

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"netspec.dev/netspec/schema"
)

// gitBin returns the git binary, skipping the test without it: the
// layouts are made with git, which netspec itself never runs.
func gitBin(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("git")
	if err != nil {
		t.Skip("SKIP: no git binary to make git layouts with (apt-get install git)")
	}
	return p
}

// git runs git in dir and returns its trimmed output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(gitBin(t), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// gitRepo makes a repository at dir with examples/basic under tree/ and
// one commit on branch main; it returns the commit.
func gitRepo(t *testing.T, dir string) string {
	t.Helper()
	copyTree(t, "../examples/basic", filepath.Join(dir, "tree"))
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "add", ".")
	git(t, dir, "commit", "-q", "-m", "first")
	return git(t, dir, "rev-parse", "HEAD")
}

func TestGitHead(t *testing.T) {
	tests := []struct {
		name string
		// make builds a layout under dir and returns the tree to read
		// and the commit git says it has checked out.
		make func(t *testing.T, dir string) (tree, want string)
	}{
		{name: "branch, loose ref", make: func(t *testing.T, dir string) (string, string) {
			c := gitRepo(t, dir)
			return filepath.Join(dir, "tree"), c
		}},
		{name: "repository root is the tree", make: func(t *testing.T, dir string) (string, string) {
			return dir, gitRepo(t, dir)
		}},
		{name: "branch, packed ref", make: func(t *testing.T, dir string) (string, string) {
			c := gitRepo(t, dir)
			git(t, dir, "pack-refs", "--all")
			if _, err := os.Stat(filepath.Join(dir, ".git/refs/heads/main")); err == nil {
				t.Fatal("pack-refs left the loose ref")
			}
			return filepath.Join(dir, "tree"), c
		}},
		{name: "loose ref newer than packed", make: func(t *testing.T, dir string) (string, string) {
			gitRepo(t, dir)
			git(t, dir, "pack-refs", "--all")
			writeFile(t, filepath.Join(dir, "tree/extra.yaml"), "# a comment\n")
			git(t, dir, "add", ".")
			git(t, dir, "commit", "-q", "-m", "second")
			return filepath.Join(dir, "tree"), git(t, dir, "rev-parse", "HEAD")
		}},
		{name: "detached HEAD", make: func(t *testing.T, dir string) (string, string) {
			c := gitRepo(t, dir)
			writeFile(t, filepath.Join(dir, "tree/extra.yaml"), "# a comment\n")
			git(t, dir, "add", ".")
			git(t, dir, "commit", "-q", "-m", "second")
			git(t, dir, "checkout", "-q", "--detach", c)
			return filepath.Join(dir, "tree"), c
		}},
		{name: "worktree (.git file, commondir)", make: func(t *testing.T, dir string) (string, string) {
			main := filepath.Join(dir, "main")
			os.MkdirAll(main, 0o755)
			gitRepo(t, main)
			writeFile(t, filepath.Join(main, "tree/extra.yaml"), "# a comment\n")
			git(t, main, "add", ".")
			git(t, main, "commit", "-q", "-m", "second")
			git(t, main, "branch", "feature", "HEAD~1")
			git(t, main, "pack-refs", "--all") // the worktree's branch is packed in the common dir
			wt := filepath.Join(dir, "wt")
			git(t, main, "worktree", "add", "-q", wt, "feature")
			return filepath.Join(wt, "tree"), git(t, main, "rev-parse", "feature")
		}},
		{name: "separate git dir (.git file, as a submodule)", make: func(t *testing.T, dir string) (string, string) {
			work := filepath.Join(dir, "work")
			copyTree(t, "../examples/basic", filepath.Join(work, "tree"))
			os.MkdirAll(filepath.Join(dir, "modules"), 0o755)
			git(t, dir, "init", "-q", "-b", "main", "--separate-git-dir", filepath.Join(dir, "modules/x"), work)
			git(t, work, "add", ".")
			git(t, work, "commit", "-q", "-m", "first")
			return filepath.Join(work, "tree"), git(t, work, "rev-parse", "HEAD")
		}},
		{name: "git-sync: symlink to a detached worktree", make: func(t *testing.T, dir string) (string, string) {
			root := filepath.Join(dir, "root")
			os.MkdirAll(root, 0o755)
			c := gitRepo(t, root)
			wt := filepath.Join(root, ".worktrees", c)
			git(t, root, "worktree", "add", "-q", "--detach", wt, c)
			writeFile(t, filepath.Join(root, "tree/extra.yaml"), "# moved on\n")
			git(t, root, "add", ".")
			git(t, root, "commit", "-q", "-m", "second")
			if err := os.Symlink(".worktrees/"+c, filepath.Join(root, "current")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(root, "current/tree"), c
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tree, want := tt.make(t, dir)
			got, ok, err := GitHead(tree)
			if err != nil || !ok {
				t.Fatalf("GitHead(%s) = %q, %v, %v; want %s", tree, got, ok, err, want)
			}
			if got != want {
				t.Errorf("GitHead(%s) = %s, want %s (git rev-parse HEAD)", tree, got, want)
			}
		})
	}
}

func TestGitHeadNotGit(t *testing.T) {
	tree := basicTree(t)
	for d := filepath.Dir(tree); d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			t.Skipf("SKIP: the temp dir %s is inside a git checkout (%s)", tree, d)
		}
	}
	_, ok, err := GitHead(tree)
	if ok || err != nil {
		t.Errorf("GitHead of a tree outside git = %v, %v; want not found", ok, err)
	}
}

func TestGitHeadUnborn(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	_, ok, err := GitHead(dir)
	if !ok || err == nil || !strings.Contains(err.Error(), "refs/heads/main") {
		t.Errorf("GitHead of a repository without commits = %v, %v; want found, an error naming refs/heads/main", ok, err)
	}
}

func contentRev(t *testing.T, root string) string {
	t.Helper()
	tr, err := schema.Load(root, schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rev, err := ContentRevision(root, tr)
	if err != nil {
		t.Fatal(err)
	}
	if rev.Source != RevisionContent || !strings.HasPrefix(rev.ID, "sha256:") || len(rev.ID) != len("sha256:")+64 {
		t.Fatalf("ContentRevision = %+v", rev)
	}
	return rev.ID
}

func TestContentRevision(t *testing.T) {
	a, b := basicTree(t), basicTree(t)
	base := contentRev(t, a)
	if got := contentRev(t, b); got != base {
		t.Errorf("two copies of a tree: %s and %s, want the same", base, got)
	}
	// Timestamps do not count.
	now := mustStat(t, filepath.Join(b, "web/service.yaml")).ModTime()
	os.Chtimes(filepath.Join(b, "web/service.yaml"), now.Add(-3600e9), now.Add(-3600e9))
	if got := contentRev(t, b); got != base {
		t.Errorf("a file touched: %s, want %s", got, base)
	}
	steps := []struct {
		name string
		edit func(dir string)
	}{
		{"a comment added", func(dir string) {
			appendFile(t, filepath.Join(dir, "web/service.yaml"), "# note\n")
		}},
		{"a file renamed", func(dir string) {
			os.Rename(filepath.Join(dir, "web/service.yaml"), filepath.Join(dir, "web/svc.yaml"))
		}},
		{"netspec.lock changed", func(dir string) {
			appendFile(t, filepath.Join(dir, "netspec.lock"), "\n")
		}},
	}
	seen := map[string]string{base: "the original"}
	for _, s := range steps {
		s.edit(b)
		got := contentRev(t, b)
		if prev, ok := seen[got]; ok {
			t.Errorf("after %s: revision %s, as %s", s.name, got, prev)
		}
		seen[got] = s.name
	}
}

func mustStat(t *testing.T, p string) os.FileInfo {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi
}

func appendFile(t *testing.T, p, s string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}
