package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestReadmeExplain keeps the output README.md quotes for netspec explain
// true: each "$ netspec explain ..." line of its explain section is run,
// and the lines up to the next "$" or the end of the block must be what it
// prints.
func TestReadmeExplain(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	start := strings.Index(text, "### Explain a packet\n")
	if start < 0 {
		t.Fatal("README.md has no section \"Explain a packet\"")
	}
	sec := text[start:]
	sec = sec[strings.Index(sec, "```\n")+4:]
	sec = sec[:strings.Index(sec, "```")]
	n := 0
	for _, part := range strings.Split(sec, "$ netspec ")[1:] {
		cmd, want, _ := strings.Cut(part, "\n")
		args := strings.Fields(cmd)
		for i, a := range args {
			if strings.HasPrefix(a, "examples/") {
				args[i] = "../../" + a
			}
		}
		var out, errb bytes.Buffer
		if code := run(append(args, "--no-cache"), &env{stdout: &out, stderr: &errb}); code != exitOK {
			t.Fatalf("netspec %s: exit %d: %s", cmd, code, errb.String())
		}
		if out.String() != want {
			t.Errorf("README.md quotes for netspec %s:\n%s\nnetspec prints:\n%s", cmd, want, out.String())
		}
		n++
	}
	if n < 2 {
		t.Errorf("README.md quotes %d runs of netspec explain, want at least 2", n)
	}
}
