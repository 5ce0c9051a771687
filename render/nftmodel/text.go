package nftmodel

import (
	"strconv"
	"strings"
)

// AppendText appends the ruleset as nftables.nft: its comment, then each
// table after a blank line. Every table is replaced as a whole: added,
// deleted and declared anew, so that `nft -f` of the file works whether
// the table exists or not, and touches no other table.
func (rs *Ruleset) AppendText(b []byte) []byte {
	for _, c := range rs.Comment {
		b = appendComment(b, "", c)
	}
	for _, t := range rs.Tables {
		b = append(b, '\n')
		b = t.AppendText(b)
	}
	return b
}

// AppendText appends the table as the file writes it.
func (t *Table) AppendText(b []byte) []byte {
	b = t.AppendHead(b)
	for _, it := range t.Items {
		b = it.AppendText(b, t.Family)
	}
	return append(b, "}\n"...)
}

// AppendHead appends the start of the table, up to its first item: the
// lines that replace it and its comment.
func (t *Table) AppendHead(b []byte) []byte {
	name := t.Family.Keyword() + " " + t.Name
	b = append(b, "table "...)
	b = append(b, name...)
	b = append(b, " {}\ndelete table "...)
	b = append(b, name...)
	b = append(b, "\ntable "...)
	b = append(b, name...)
	b = append(b, " {\n"...)
	if t.Comment != "" {
		b = appendComment(b, "\t", t.Comment)
	}
	return b
}

// AppendText appends the item, after its heading.
func (it Item) AppendText(b []byte, f Family) []byte {
	if it.Heading != "" {
		b = appendComment(b, "\n\t", it.Heading)
	}
	switch {
	case it.Chain != nil:
		return it.Chain.AppendText(b, f)
	case it.Set != nil:
		return it.Set.AppendText(b, f)
	}
	return b
}

// AppendText appends the chain as the file writes it, with its comment.
func (c *Chain) AppendText(b []byte, f Family) []byte {
	if c.Comment != "" {
		b = appendComment(b, "\t", c.Comment)
	}
	b = append(b, "\tchain "...)
	b = append(b, c.Name...)
	b = append(b, " {\n"...)
	if h := c.Hook; h != nil {
		b = append(b, "\t\t"...)
		b = h.AppendText(b)
		b = append(b, "; policy accept;\n"...)
	}
	for _, r := range c.Rules {
		b = append(b, "\t\t"...)
		b = r.AppendText(b, f)
		b = append(b, '\n')
	}
	return append(b, "\t}\n"...)
}

// AppendText appends the hook's statement: "type nat hook prerouting
// priority dstnat". nft names the priority dstnat (-100) on the
// prerouting hook and srcnat (100) on the postrouting hook; other
// priorities are numbers.
func (h *Hook) AppendText(b []byte) []byte {
	b = append(b, "type "...)
	b = append(b, h.Type.String()...)
	b = append(b, " hook "...)
	b = append(b, h.Hook.String()...)
	b = append(b, " priority "...)
	name, base := "", int32(0)
	switch h.Hook {
	case Prerouting:
		name, base = "dstnat", PriorityDstNAT
	case Postrouting:
		name, base = "srcnat", PrioritySrcNAT
	}
	if name == "" {
		return strconv.AppendInt(b, int64(h.Priority), 10)
	}
	b = append(b, name...)
	switch d := h.Priority - base; {
	case d > 0:
		b = append(b, " + "...)
		b = strconv.AppendInt(b, int64(d), 10)
	case d < 0:
		b = append(b, " - "...)
		b = strconv.AppendInt(b, int64(-d), 10)
	}
	return b
}

// appendComment appends a comment line of the file: before (its indent,
// after a blank line for a heading), "# ", then s (CommentText).
func appendComment(b []byte, before, s string) []byte {
	b = append(b, before...)
	b = append(b, "# "...)
	b = append(b, CommentText(s)...)
	return append(b, '\n')
}

// CommentText is s kept on one line and inside quotes, as the file writes
// a comment: control characters, quotes and backslashes become "_", and
// each byte of invalid UTF-8 becomes U+FFFD (as strings.Map does).
func CommentText(s string) string {
	if isCleanText(s) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f || r == '"' || r == '\\' {
			return '_'
		}
		return r
	}, s)
}

// isCleanText tells whether s is printable ASCII without quotes or
// backslashes: text that CommentText leaves as it is.
func isCleanText(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c > '~' || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
