package deploy

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestPullRequestScript runs ci/netspec-pr.sh, the steps of the CI jobs in
// ci/, on a git repository of specs (examples/basic under specs/, each
// node's goldens under golden/) with two commits: the base, whose goldens
// are fresh, and a head that edits it as a pull request would.
func TestPullRequestScript(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped with -short: builds netspec and runs git")
	}
	for _, tool := range []string{"git", "sh", "tar"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIPPED: %s not found: the pull-request script is not run", tool)
		}
	}
	bin := filepath.Join(t.TempDir(), "netspec")
	run(t, "go", "build", "-o", bin, "../cmd/netspec")
	script, err := filepath.Abs("ci/netspec-pr.sh")
	if err != nil {
		t.Fatal(err)
	}

	cacheAffinity := func(t *testing.T, repo string) {
		edit(t, filepath.Join(repo, "specs/cache/service.yaml"), "timeoutSeconds: 3600", "timeoutSeconds: 600")
	}
	tests := []struct {
		name string
		// edit changes the base's files into the head's.
		edit func(t *testing.T, repo string)
		// render renders the goldens again before the head is committed.
		render      bool
		wantExit    int
		wantStderr  []string
		wantComment []string // nil: no comment written
	}{
		{
			name:        "unchanged tree",
			edit:        func(t *testing.T, repo string) { writeFile(t, filepath.Join(repo, "README"), "specs of the shop\n") },
			wantExit:    0,
			wantComment: []string{"## netspec diff", "No differences on 2 nodes (`node-1`, `node-2`)."},
		},
		{
			name:        "changed Service, goldens rendered again",
			edit:        cacheAffinity,
			render:      true,
			wantExit:    0,
			wantComment: []string{"#### `data/cache` changed", "sessionAffinity ClientIP 3600s -> ClientIP 600s"},
		},
		{
			name:     "changed Service, goldens stale",
			edit:     cacheAffinity,
			wantExit: 1,
			wantStderr: []string{
				"netspec-pr: golden files are stale: they are not what the tree renders:",
				" M golden/node-1/plan.json",
				" M golden/node-2/plan.json",
				"Render every node again ('netspec render specs --node NODE --out golden/NODE') and commit golden/.",
			},
			wantComment: []string{"#### `data/cache` changed", "sessionAffinity ClientIP 3600s -> ClientIP 600s"},
		},
		{
			name: "new node without goldens",
			edit: func(t *testing.T, repo string) {
				name := filepath.Join(repo, "specs/nodes.yaml")
				writeFile(t, name, readFile(t, name)+"---\napiVersion: v1\nkind: Node\nmetadata:\n  name: node-3\n")
			},
			wantExit: 1,
			wantStderr: []string{
				"netspec-pr: the tree has 3 Node objects, golden/ has 2 node directories (node-1 node-2):",
				"render the new nodes with 'netspec render specs --node NODE --out golden/NODE' and commit golden/",
			},
			wantComment: []string{"`node-3`"},
		},
		{
			name: "node removed, its goldens left",
			edit: func(t *testing.T, repo string) {
				name := filepath.Join(repo, "specs/nodes.yaml")
				nodes := readFile(t, name)
				writeFile(t, name, nodes[:strings.Index(nodes, "---")])
				// Its pods go too: a pod on a node the tree lacks is an error.
				for _, f := range []string{"cache", "cart", "postgres", "web"} {
					pods := filepath.Join(repo, "specs", f, "pods.yaml")
					var keep []string
					for _, doc := range strings.Split(readFile(t, pods), "---\n") {
						if !strings.Contains(doc, "nodeName: node-2") {
							keep = append(keep, doc)
						}
					}
					writeFile(t, pods, strings.Join(keep, "---\n"))
				}
			},
			wantExit: 1,
			wantStderr: []string{
				"node node-2 is not in the tree",
				"netspec-pr: cannot render golden/node-2: if node node-2 left the tree, remove golden/node-2",
			},
			wantComment: []string{"`node-2`"},
		},
		{
			name: "new Service, lock not updated",
			edit: func(t *testing.T, repo string) {
				writeFile(t, filepath.Join(repo, "specs/cache/admin.yaml"),
					"apiVersion: v1\nkind: Service\nmetadata:\n  name: cache-admin\n  namespace: data\nspec:\n  selector:\n    app: cache\n  ports:\n  - port: 8080\n")
			},
			wantExit:   1,
			wantStderr: []string{"netspec.lock is not up to date: run 'netspec lock specs' and commit it"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			repo := t.TempDir()
			git := func(args ...string) string {
				return run(t, "git", append([]string{"-C", repo}, args...)...)
			}
			renderGoldens := func() {
				for _, n := range []string{"node-1", "node-2"} {
					run(t, bin, "render", filepath.Join(repo, "specs"), "--node", n, "--out", filepath.Join(repo, "golden", n), "--no-cache")
				}
			}
			git("init", "--quiet", "--initial-branch=main")
			git("config", "user.email", "ci@example.com")
			git("config", "user.name", "ci")
			run(t, "cp", "-R", "../examples/basic", filepath.Join(repo, "specs"))
			renderGoldens()
			git("add", "-A")
			git("commit", "--quiet", "-m", "base")
			base := strings.TrimSpace(git("rev-parse", "HEAD"))

			tc.edit(t, repo)
			if tc.render {
				renderGoldens()
			}
			git("add", "-A")
			git("commit", "--quiet", "-m", "head")

			cmd := exec.Command("sh", script, base)
			cmd.Dir = filepath.Join(repo, "specs") // the script finds the top itself
			cmd.Env = append(os.Environ(),
				"NETSPEC="+bin, "NETSPEC_TREE=specs", "XDG_CACHE_HOME="+t.TempDir())
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			exit := 0
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
				exit = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if exit != tc.wantExit {
				t.Errorf("exit status %d, want %d", exit, tc.wantExit)
			}
			for _, s := range tc.wantStderr {
				if !strings.Contains(stderr.String(), s) {
					t.Errorf("stderr does not say %q", s)
				}
			}
			comment, err := os.ReadFile(filepath.Join(repo, "netspec-diff.md"))
			switch {
			case tc.wantComment == nil && err == nil:
				t.Errorf("a comment was written for an invalid head:\n%s", comment)
			case tc.wantComment != nil && err != nil:
				t.Errorf("no comment: %v", err)
			}
			for _, s := range tc.wantComment {
				if !strings.Contains(string(comment), s) {
					t.Errorf("the comment does not say %q:\n%s", s, comment)
				}
			}
			if t.Failed() {
				t.Logf("stdout:\n%s\nstderr:\n%s", stdout.Bytes(), stderr.Bytes())
			}
		})
	}
}

// edit replaces old by new in a file, which must hold old.
func edit(t *testing.T, name, old, new string) {
	t.Helper()
	b := readFile(t, name)
	if !strings.Contains(b, old) {
		t.Fatalf("%s does not hold %q", name, old)
	}
	writeFile(t, name, strings.Replace(b, old, new, 1))
}

func writeFile(t *testing.T, name, data string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCIFilesRunTheScript checks that the GitHub Actions workflow and the
// GitLab CI job are YAML and that each runs netspec-pr.sh and posts its
// comment: the steps are the script's, so that the two cannot drift apart.
func TestCIFilesRunTheScript(t *testing.T) {
	for _, tc := range []struct {
		file string
		want []string
	}{
		{file: "ci/github-actions.yml", want: []string{
			`sh .github/netspec-pr.sh "${{ github.event.pull_request.base.sha }}"`,
			"gh pr comment", "--body-file netspec-diff.md",
			"fetch-depth: 0",
		}},
		{file: "ci/gitlab-ci.yml", want: []string{
			`sh ci/netspec-pr.sh "$CI_MERGE_REQUEST_DIFF_BASE_SHA"`,
			`--data-urlencode "body@netspec-diff.md"`,
			`GIT_DEPTH: "0"`,
		}},
	} {
		b := readFile(t, tc.file)
		var doc map[string]any
		if err := yaml.Unmarshal([]byte(b), &doc); err != nil {
			t.Errorf("%s: %v", tc.file, err)
		}
		for _, s := range tc.want {
			if !strings.Contains(b, s) {
				t.Errorf("%s does not hold %q", tc.file, s)
			}
		}
	}
}
