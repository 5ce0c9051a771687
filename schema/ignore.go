package schema

import (
	"strings"
)

// IgnoreFile is the name of the file that leaves paths of a tree out of a
// Load. It has the syntax and the meaning of git's .gitignore: one in any
// directory applies to that directory and below it, a deeper one overrides
// a higher one, and a later line overrides an earlier one.
const IgnoreFile = ".netspecignore"

// ignorePattern is one line of an ignore file.
type ignorePattern struct {
	// segs is the pattern split at "/". A "**" segment matches any number
	// of directories; a pattern without a slash but a trailing one starts
	// with "**" (it matches a name at any depth).
	segs    []string
	negate  bool // the line starts with "!": a match includes the path again
	dirOnly bool // the line ends with "/": it matches directories only
}

// ignoreRules are the patterns of one ignore file.
type ignoreRules struct {
	base string // slash path of the file's directory, "." for the root
	pats []ignorePattern
}

// parseIgnore reads an ignore file of the directory base, as git reads a
// .gitignore: blank lines and lines starting with "#" are skipped, trailing
// spaces are dropped unless escaped with "\", "!" negates, a trailing "/"
// matches directories only, and a slash at the start or in the middle
// anchors the pattern to base (else it matches a name at any depth).
func parseIgnore(base string, data []byte) *ignoreRules {
	r := &ignoreRules{base: base}
	for line := range strings.SplitSeq(string(data), "\n") {
		line = strings.TrimSuffix(line, "\r")
		line = trimTrailingSpaces(line)
		if line == "" || line[0] == '#' {
			continue
		}
		var p ignorePattern
		switch {
		case line[0] == '!':
			p.negate = true
			line = line[1:]
		case strings.HasPrefix(line, `\!`), strings.HasPrefix(line, `\#`):
			line = line[1:]
		}
		if strings.HasSuffix(line, "/") {
			p.dirOnly = true
			line = strings.TrimRight(line, "/")
		}
		if line == "" {
			continue
		}
		anchored := strings.Contains(line, "/")
		line = strings.TrimPrefix(line, "/")
		p.segs = strings.Split(line, "/")
		if !anchored {
			p.segs = append([]string{"**"}, p.segs...)
		}
		r.pats = append(r.pats, p)
	}
	return r
}

// trimTrailingSpaces drops the spaces at the end of a line that are not
// escaped with a backslash.
func trimTrailingSpaces(s string) string {
	end := len(s)
	for end > 0 && s[end-1] == ' ' {
		// A space preceded by an odd number of backslashes is escaped.
		n := 0
		for i := end - 2; i >= 0 && s[i] == '\\'; i-- {
			n++
		}
		if n%2 == 1 {
			break
		}
		end--
	}
	return s[:end]
}

// ignored tells whether the rules in effect leave out the path rel (a
// slash path relative to the tree root; isDir for a directory). rules are
// the ignore files of rel's ancestors, root first. As git decides: the last
// matching line of the deepest file that has one decides, and a "!" line
// includes the path again. (A path inside a directory that is left out is
// never asked about: the walk does not enter that directory, so, as in
// git, no "!" line can bring it back.)
func ignored(rules []*ignoreRules, rel string, isDir bool) bool {
	for i := len(rules) - 1; i >= 0; i-- {
		r := rules[i]
		sub := rel
		if r.base != "." {
			var ok bool
			if sub, ok = strings.CutPrefix(rel, r.base+"/"); !ok {
				continue
			}
		}
		parts := strings.Split(sub, "/")
		for j := len(r.pats) - 1; j >= 0; j-- {
			p := r.pats[j]
			if p.dirOnly && !isDir {
				continue
			}
			if matchSegs(p.segs, parts) {
				return !p.negate
			}
		}
	}
	return false
}

// matchSegs matches path parts against pattern segments: "**" matches zero
// or more parts, but a trailing "**" one or more ("dir/**" is what is
// inside dir, not dir).
func matchSegs(segs, parts []string) bool {
	if len(segs) == 0 {
		return len(parts) == 0
	}
	if segs[0] == "**" {
		if len(segs) == 1 {
			return len(parts) > 0
		}
		for i := 0; i <= len(parts); i++ {
			if matchSegs(segs[1:], parts[i:]) {
				return true
			}
		}
		return false
	}
	if len(parts) == 0 || !matchGlob(segs[0], parts[0]) {
		return false
	}
	return matchSegs(segs[1:], parts[1:])
}

// matchGlob matches one path segment against a glob of git's wildmatch:
// "*" (any run of characters, "**" too inside a segment), "?" (one
// character), "[...]" (a class, "!" or "^" negates, ranges a-z, POSIX
// classes [:alpha:] and the others) and "\" (the next character literally).
// A class that is not closed matches nothing.
func matchGlob(pat, name string) bool {
	px, nx := 0, 0
	starPx, starNx := -1, -1
	for px < len(pat) || nx < len(name) {
		if px < len(pat) {
			switch c := pat[px]; c {
			case '*':
				starPx, starNx = px, nx
				px++
				continue
			case '?':
				if nx < len(name) {
					px++
					nx++
					continue
				}
			case '[':
				if nx < len(name) {
					ok, width := matchClass(pat[px:], name[nx])
					if width == 0 {
						return false
					}
					if ok {
						px += width
						nx++
						continue
					}
				}
			case '\\':
				if px+1 < len(pat) {
					c = pat[px+1]
				}
				if nx < len(name) && name[nx] == c {
					px += min(2, len(pat)-px)
					nx++
					continue
				}
			default:
				if nx < len(name) && name[nx] == c {
					px++
					nx++
					continue
				}
			}
		}
		if starPx >= 0 && starNx < len(name) {
			starNx++
			px, nx = starPx+1, starNx
			continue
		}
		return false
	}
	return true
}

// posixClasses are the named classes of a bracket expression.
var posixClasses = map[string]func(byte) bool{
	"alnum":  func(c byte) bool { return isAlpha(c) || isDigit(c) },
	"alpha":  isAlpha,
	"blank":  func(c byte) bool { return c == ' ' || c == '\t' },
	"cntrl":  func(c byte) bool { return c < 0x20 || c == 0x7f },
	"digit":  isDigit,
	"graph":  func(c byte) bool { return c > 0x20 && c < 0x7f },
	"lower":  func(c byte) bool { return c >= 'a' && c <= 'z' },
	"print":  func(c byte) bool { return c >= 0x20 && c < 0x7f },
	"punct":  func(c byte) bool { return c > 0x20 && c < 0x7f && !isAlpha(c) && !isDigit(c) },
	"space":  func(c byte) bool { return c == ' ' || c >= '\t' && c <= '\r' },
	"upper":  func(c byte) bool { return c >= 'A' && c <= 'Z' },
	"xdigit": func(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' },
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// matchClass matches c against the bracket expression at the start of pat
// and returns the expression's width, 0 when it is not closed (or names
// an unknown POSIX class).
func matchClass(pat string, c byte) (ok bool, width int) {
	i := 1
	negate := false
	if i < len(pat) && (pat[i] == '!' || pat[i] == '^') {
		negate = true
		i++
	}
	first := true
	for i < len(pat) {
		if pat[i] == ']' && !first {
			return ok != negate, i + 1
		}
		first = false
		if strings.HasPrefix(pat[i:], "[:") {
			end := strings.Index(pat[i+2:], ":]")
			if end < 0 {
				return false, 0
			}
			f := posixClasses[pat[i+2:i+2+end]]
			if f == nil {
				return false, 0
			}
			ok = ok || f(c)
			i += end + 4
			continue
		}
		lo := pat[i]
		if lo == '\\' && i+1 < len(pat) {
			i++
			lo = pat[i]
		}
		i++
		hi := lo
		if i+1 < len(pat) && pat[i] == '-' && pat[i+1] != ']' {
			hi = pat[i+1]
			i += 2
			if hi == '\\' && i < len(pat) {
				hi = pat[i]
				i++
			}
		}
		ok = ok || lo <= c && c <= hi
	}
	return false, 0
}
