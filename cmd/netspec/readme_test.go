package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestReadme keeps README.md's examples true: the output it quotes for
// examples/broken is what netspec prints, and the first command's output is
// what validate prints for examples/basic.
func TestReadme(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	golden, err := os.ReadFile("../../golden/broken/validate.txt")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	start := strings.Index(text, "$ netspec validate examples/broken\n")
	if start < 0 {
		t.Fatal("README.md no longer shows the output of netspec validate examples/broken")
	}
	block := text[start:]
	block = block[strings.Index(block, "\n")+1 : strings.Index(block, "```")]
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		if line == "..." {
			continue
		}
		n++
		if !bytes.Contains(golden, []byte(line+"\n")) {
			t.Errorf("README.md quotes a line that netspec does not print for examples/broken:\n%s", line)
		}
	}
	if n < 3 {
		t.Errorf("README.md quotes only %d lines of examples/broken's output", n)
	}

	var out, errb bytes.Buffer
	if code := run([]string{"validate", "--no-cache", "../../examples/basic"}, &env{stdout: &out, stderr: &errb}); code != exitOK {
		t.Fatalf("validate examples/basic: exit %d: %s", code, errb.String())
	}
	if !strings.Contains(text, "\n"+out.String()+"```") {
		t.Errorf("README.md does not quote the output of validate examples/basic:\n%s", out.String())
	}
}
