package main

import (
	"bytes"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docFiles are the user documents whose commands TestDocsCommands runs,
// relative to the repository's root.
var docFiles = []string{"README.md", "docs/*.md", "deploy/README.md"}

// docCommand is one "$ netspec …" line of a document's code block with the
// output the document quotes under it.
type docCommand struct {
	where string   // file:line
	args  []string // after "netspec"
	quote []string // the quoted output lines; "..." elides any lines
	// mustSucceed: a command shown without its output, which must exit 0.
	mustSucceed bool
}

// TestDocsCommands keeps the documents' examples true: a "go run
// ./cmd/netspec …" line of a code block must succeed (an --out directory
// is replaced by a temporary one), and every command a document shows
// with a user's prompt ("$ netspec …", in a code block) is
// run from the repository's root, and the lines quoted under it, up to the
// next prompt or the end of the block, must be what it prints (stdout and
// stderr), in order; a "..." line stands for any number of lines, and
// without one the output must be exactly the quote. Commands shown with
// root's prompt ("#", "$ sudo") need root and a node, and are left to the
// kernel tests.
func TestDocsCommands(t *testing.T) {
	docs := docMarkdown(t)
	t.Chdir("../..")
	var cmds []docCommand
	for _, name := range slices.Sorted(maps.Keys(docs)) {
		cmds = append(cmds, docCommands(name, docs[name])...)
	}
	// The examples the documents must keep showing with their output, so
	// that a document that loses its examples fails rather than passes with
	// nothing to check: README's tutorial and fresh-machine check, and the
	// reference pages' examples.
	for _, want := range []struct{ file, command string }{
		{file: "README.md", command: "validate examples/basic"},
		{file: "README.md", command: "validate examples/tutorial"},
		{file: "README.md", command: "explain examples/tutorial --node node-1 demo/hello"},
		{file: "docs/input.md", command: "validate examples/broken"},
		{file: "docs/explain.md", command: "explain examples/kitchen-sink --node node-1"},
		{file: "docs/explain.md", command: "explain examples/kitchen-sink --node node-3"},
	} {
		found := false
		for _, c := range cmds {
			found = found || strings.HasPrefix(c.where, want.file+":") && !c.mustSucceed && strings.HasPrefix(strings.Join(c.args, " "), want.command)
		}
		if !found {
			t.Errorf("%s no longer shows netspec %s with its output", want.file, want.command)
		}
	}
	for _, c := range cmds {
		var out bytes.Buffer
		args := append([]string{}, c.args...)
		if len(args) > 0 && (args[0] == "validate" || args[0] == "explain" || args[0] == "render" || args[0] == "diff") {
			args = append(args, "--no-cache")
		}
		for i := range args {
			if args[i] == "--out" && i+1 < len(args) {
				args[i+1] = t.TempDir() // never write into the repository
			}
		}
		code := run(args, &env{stdout: &out, stderr: &out})
		if c.mustSucceed {
			if code != exitOK {
				t.Errorf("%s: netspec %s: exit %d:\n%s", c.where, strings.Join(c.args, " "), code, out.String())
			}
			continue
		}
		got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if !quoteMatches(c.quote, got) {
			t.Errorf("%s: netspec %s prints:\n%s\nbut the document quotes:\n%s", c.where, strings.Join(c.args, " "), out.String(), strings.Join(c.quote, "\n"))
		}
	}
}

// docCommands finds the "$ netspec" lines of text's fenced code blocks.
func docCommands(file, text string) []docCommand {
	var cmds []docCommand
	var cur *docCommand
	inBlock := false
	flush := func() {
		if cur != nil && len(cur.quote) > 0 {
			cmds = append(cmds, *cur)
		}
		cur = nil
	}
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			if inBlock {
				flush()
			}
			inBlock = !inBlock
			continue
		}
		if !inBlock {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "go run ./cmd/netspec "); ok && cur == nil {
			// A command to type without a prompt, such as README's first
			// one for a fresh machine: it must succeed (its output is
			// not quoted).
			cmds = append(cmds, docCommand{where: file + ":" + itoa(i+1), args: strings.Fields(rest), quote: nil, mustSucceed: true})
			continue
		}
		if strings.HasPrefix(line, "$ ") {
			flush()
			rest, ok := strings.CutPrefix(line, "$ netspec ")
			if !ok {
				rest, ok = strings.CutPrefix(line, "$ go run ./cmd/netspec ")
			}
			if ok && !strings.ContainsAny(rest, "|<>;&") {
				cur = &docCommand{where: file + ":" + itoa(i+1), args: strings.Fields(rest)}
			}
			continue
		}
		if cur != nil {
			cur.quote = append(cur.quote, line)
		}
	}
	return cmds
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		if n /= 10; n == 0 {
			return string(b[i:])
		}
	}
}

// quoteMatches tells whether got is what quote shows: its lines in order,
// "..." standing for any number of lines.
func quoteMatches(quote, got []string) bool {
	if len(quote) == 0 {
		return len(got) == 0
	}
	if quote[0] == "..." {
		for k := 0; k <= len(got); k++ {
			if quoteMatches(quote[1:], got[k:]) {
				return true
			}
		}
		return false
	}
	return len(got) > 0 && got[0] == quote[0] && quoteMatches(quote[1:], got[1:])
}

func TestQuoteMatches(t *testing.T) {
	for _, tc := range []struct {
		name        string
		quote, got  []string
		wantMatches bool
	}{
		{name: "exact", quote: []string{"a", "b"}, got: []string{"a", "b"}, wantMatches: true},
		{name: "extra line", quote: []string{"a"}, got: []string{"a", "b"}, wantMatches: false},
		{name: "elided tail", quote: []string{"a", "..."}, got: []string{"a", "b", "c"}, wantMatches: true},
		{name: "elided middle", quote: []string{"a", "...", "d"}, got: []string{"a", "b", "c", "d"}, wantMatches: true},
		{name: "wrong order", quote: []string{"b", "...", "a"}, got: []string{"a", "b"}, wantMatches: false},
		{name: "changed line", quote: []string{"a", "x"}, got: []string{"a", "b"}, wantMatches: false},
	} {
		if got := quoteMatches(tc.quote, tc.got); got != tc.wantMatches {
			t.Errorf("%s: quoteMatches(%q, %q) = %v, want %v", tc.name, tc.quote, tc.got, got, tc.wantMatches)
		}
	}
}

// docMarkdown reads the user documents of docFiles, by path.
func docMarkdown(t *testing.T) map[string]string {
	t.Helper()
	docs := map[string]string{}
	for _, pattern := range docFiles {
		files, err := filepath.Glob(filepath.Join("../..", pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			text, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			docs[filepath.ToSlash(strings.TrimPrefix(f, "../../"))] = string(text)
		}
	}
	if len(docs) < 3 {
		t.Fatalf("found %d documents of %q, want README.md, docs/*.md and deploy/README.md", len(docs), docFiles)
	}
	return docs
}

// proseLines gives the lines of a Markdown text outside its fenced code
// blocks, with their line numbers.
func proseLines(text string) (lines []string, numbers []int) {
	inBlock := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inBlock = !inBlock
			continue
		}
		if !inBlock {
			lines = append(lines, line)
			numbers = append(numbers, i+1)
		}
	}
	return lines, numbers
}

var (
	headingRE  = regexp.MustCompile(`^#{1,6} +(.+?) *$`)
	mdLinkRE   = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	slugDropRE = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// slug is the anchor GitHub gives a heading: lower case, punctuation
// dropped, spaces turned into hyphens.
func slug(heading string) string {
	return strings.ReplaceAll(slugDropRE.ReplaceAllString(strings.ToLower(heading), ""), " ", "-")
}

// anchors lists the anchors of a Markdown text's headings.
func anchors(text string) map[string]bool {
	a := map[string]bool{}
	lines, _ := proseLines(text)
	for _, line := range lines {
		if m := headingRE.FindStringSubmatch(line); m != nil {
			a[slug(m[1])] = true
		}
	}
	return a
}

func TestSlug(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{heading: "Allocation and `netspec.lock`", want: "allocation-and-netspeclock"},
		{heading: "On the node: `--live`", want: "on-the-node---live"},
		{heading: "DNS: sending cluster.local to netspec", want: "dns-sending-clusterlocal-to-netspec"},
		{heading: "Tutorial: one Service, two Pods, one node", want: "tutorial-one-service-two-pods-one-node"},
	} {
		if got := slug(tc.heading); got != tc.want {
			t.Errorf("slug(%q) = %q, want %q", tc.heading, got, tc.want)
		}
	}
}

// TestDocsLinks keeps the documents' relative links valid: every link of
// README.md, docs/*.md and deploy/README.md outside code blocks that is not
// a URL names a file or directory of the repository, and its #anchor, if
// any, a heading of the Markdown file it points at.
func TestDocsLinks(t *testing.T) {
	docs := docMarkdown(t)
	checked := 0
	for name, text := range docs {
		lines, numbers := proseLines(text)
		for i, line := range lines {
			for _, m := range mdLinkRE.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				where := name + ":" + itoa(numbers[i])
				file, anchor, _ := strings.Cut(target, "#")
				path := name // a bare #anchor is in the document itself
				if file != "" {
					path = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(name), file)))
				}
				if _, err := os.Stat(filepath.Join("../..", path)); err != nil {
					t.Errorf("%s: link %s: %v", where, target, err)
					continue
				}
				if anchor == "" {
					continue
				}
				if !strings.HasSuffix(path, ".md") {
					t.Errorf("%s: link %s has an anchor into a file that is not Markdown", where, target)
					continue
				}
				to, ok := docs[path]
				if !ok {
					b, err := os.ReadFile(filepath.Join("../..", path))
					if err != nil {
						t.Fatal(err)
					}
					to = string(b)
				}
				if !anchors(to)[anchor] {
					t.Errorf("%s: link %s: %s has no heading with the anchor #%s", where, target, path, anchor)
				}
			}
		}
	}
	if checked < 20 {
		t.Errorf("checked %d links, want the documents' links (at least 20)", checked)
	}
}

// pkgRE finds the package directories a text diagram names: a lower-case
// path ending in "/", such as "compiler/" or "cmd/netspec/".
var pkgRE = regexp.MustCompile(`(?:^|[^A-Za-z0-9_./-])([a-z][a-z0-9]*(?:/[a-z0-9]+)*/)`)

// TestArchitectureDiagram keeps docs/architecture.txt true: every package
// it names is a directory of Go code, found from the repository's root or,
// for a sub-package such as "nft/", under the last top-level package named
// before it; and README.md shows the diagram as it is.
func TestArchitectureDiagram(t *testing.T) {
	b, err := os.ReadFile("../../docs/architecture.txt")
	if err != nil {
		t.Fatal(err)
	}
	diagram := string(b)
	parent, named := "", 0
	for _, m := range pkgRE.FindAllStringSubmatch(diagram, -1) {
		dir := strings.TrimSuffix(m[1], "/")
		switch {
		case hasGo(dir):
			if !strings.Contains(dir, "/") {
				parent = dir
			}
		case parent != "" && hasGo(parent+"/"+dir):
		default:
			t.Errorf("docs/architecture.txt names %s/, which is no package of the repository (nor of %s/)", dir, parent)
		}
		named++
	}
	if named < 10 {
		t.Errorf("docs/architecture.txt names %d packages, want the pipeline's (at least 10)", named)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```\n"+diagram+"```\n") {
		t.Error("README.md does not show docs/architecture.txt as it is, in a code block of its own")
	}
}

// hasGo tells whether the directory dir, relative to the repository's root,
// holds Go code other than tests.
func hasGo(dir string) bool {
	files, _ := filepath.Glob(filepath.Join("../..", dir, "*.go"))
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") {
			return true
		}
	}
	return false
}

// TestTutorialFiles keeps README's tutorial true to examples/tutorial: a
// YAML block of README.md whose first line is "# NAME.yaml" shows, after
// that line, a part of examples/tutorial/NAME.yaml as it is.
func TestTutorialFiles(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	shown := 0
	for _, block := range strings.Split(string(readme), "```yaml\n")[1:] {
		body, _, _ := strings.Cut(block, "```")
		first, rest, _ := strings.Cut(body, "\n")
		name, ok := strings.CutPrefix(first, "# ")
		if !ok {
			continue
		}
		name, _, _ = strings.Cut(name, ":")
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		file, err := os.ReadFile(filepath.Join("../../examples/tutorial", name))
		if err != nil {
			t.Errorf("README.md shows %s: %v", name, err)
			continue
		}
		if !strings.Contains(string(file), rest) {
			t.Errorf("README.md shows %s as\n%s\nwhich examples/tutorial/%s does not hold as it is", name, rest, name)
		}
		shown++
	}
	if shown < 3 {
		t.Errorf("README.md shows %d files of examples/tutorial, want its Service, Pods and Node", shown)
	}
}

// docParagraphs splits the user documents into the units a flag's
// mention is looked for in: prose paragraphs (a list joined to the
// paragraph before it when that ends with ":", as "Flags shared by …:"
// leads its list) and each line of a code block on its own, as a code
// block often lists several commands. Each is prefixed with file:line
// and the heading of its section, on a line of its own.
func docParagraphs(t *testing.T) []string {
	t.Helper()
	var out []string
	eachDoc(t, func(f, text string) {
		var cur []string
		start, inBlock, heading := 0, false, ""
		flush := func() {
			if len(cur) > 0 {
				out = append(out, f+":"+itoa(start)+":\n"+heading+"\n"+strings.Join(cur, "\n"))
			}
			cur = nil
		}
		for i, line := range strings.Split(text, "\n") {
			switch {
			case strings.HasPrefix(line, "```"):
				flush()
				inBlock = !inBlock
			case inBlock:
				out = append(out, f+":"+itoa(i+1)+":\n"+heading+"\n"+line)
			case strings.HasPrefix(line, "#"):
				flush()
				heading = line
			case strings.TrimSpace(line) == "":
				if len(cur) > 0 && strings.HasSuffix(cur[len(cur)-1], ":") {
					continue // its list follows
				}
				flush()
			default:
				if len(cur) == 0 {
					start = i + 1
				}
				cur = append(cur, line)
			}
		}
		flush()
	})
	return out
}

// eachDoc calls f with the name and text of each user document
// (docFiles).
func eachDoc(t *testing.T, f func(file, text string)) {
	t.Helper()
	for _, pattern := range docFiles {
		files, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range files {
			text, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			f(name, string(text))
		}
	}
}

// commandFlags returns the flags of c by name, as its --help lists them.
func commandFlags(c *command) []*flag.Flag {
	fs, _ := c.flagSet()
	var out []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) { out = append(out, f) })
	return out
}

// TestDocsFlags keeps the documents and the commands' flags in step:
// every flag of every command is named ("--flag") in a paragraph, or a
// line of a code block, of README.md, docs/*.md or deploy/README.md that
// names the command too ("netspec cmd" or "`cmd", or in the heading of
// its section, "### Explain a packet"); and every flag README's
// command synopsis (its "## Commands" block) shows for a command is one
// that command has.
func TestDocsFlags(t *testing.T) {
	t.Chdir("../..")
	paras := docParagraphs(t)
	for _, name := range sortedCommandNames() {
		c := commands[name]
		mentions := regexp.MustCompile("(?im)(netspec |`)" + regexp.QuoteMeta(name) + `\b|^#+ .*\b` + regexp.QuoteMeta(name) + `\b`)
		for _, f := range commandFlags(c) {
			flagRe := regexp.MustCompile(`--` + regexp.QuoteMeta(f.Name) + `\b[^-]`)
			found := false
			for _, p := range paras {
				if flagRe.MatchString(p+" ") && mentions.MatchString(p) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("netspec %s --%s is documented nowhere: no paragraph of %s names both", name, f.Name, strings.Join(docFiles, ", "))
			}
		}
	}

	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "## Commands\n\n```\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal(`README.md has no "## Commands" synopsis block`)
	}
	synopses := 0
	for _, line := range strings.Split(block, "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 || fields[0] != "netspec" {
			continue
		}
		c, ok := commands[fields[1]]
		if !ok {
			t.Errorf("README.md synopsis of an unknown command: %s", line)
			continue
		}
		synopses++
		have := map[string]bool{}
		for _, f := range commandFlags(c) {
			have[f.Name] = true
		}
		for _, m := range regexp.MustCompile(`--([a-z][a-z0-9-]*)`).FindAllStringSubmatch(line, -1) {
			if !have[m[1]] {
				t.Errorf("README.md synopsis of %s shows --%s, which it does not have", c.name, m[1])
			}
		}
	}
	if synopses != len(commands) {
		t.Errorf("README.md's synopsis block shows %d commands, netspec has %d", synopses, len(commands))
	}
}

// TestHelpPlaceholders keeps --help's flag lines readable: a flag that
// takes a value names it (`--node NODE`, `--dataplane nftables|ipvs`)
// rather than showing the Go type package flag falls back to
// ("--dataplane string"). The placeholder is the usage string's
// backquoted word.
func TestHelpPlaceholders(t *testing.T) {
	goTypes := map[string]bool{"string": true, "int": true, "uint": true, "int64": true, "uint64": true, "float": true, "duration": true, "value": true}
	for _, name := range sortedCommandNames() {
		var help bytes.Buffer
		printCommandHelp(&help, commands[name])
		for _, f := range commandFlags(commands[name]) {
			placeholder, _ := flag.UnquoteUsage(f)
			if goTypes[placeholder] {
				t.Errorf("netspec %s --help: --%s %s: name the value in the usage string, in backquotes", name, f.Name, placeholder)
			}
			if placeholder != "" && !strings.Contains(help.String(), "\n  --"+f.Name+" "+placeholder+"\n") {
				t.Errorf("netspec %s --help does not show --%s %s:\n%s", name, f.Name, placeholder, help.String())
			}
		}
	}
}
