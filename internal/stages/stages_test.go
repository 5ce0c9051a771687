package stages

import (
	"bytes"
	"io"
	"regexp"
	"testing"
)

func TestStart(t *testing.T) {
	defer func(o io.Writer) { out = o }(out)
	out = nil
	Start("off")() // nothing, and no panic
	var b bytes.Buffer
	out = &b
	end := Start("load")
	if b.Len() != 0 {
		t.Fatalf("Start wrote %q before the step ended", b.String())
	}
	end()
	if !regexp.MustCompile(`^stage load +\d+ ms\n$`).Match(b.Bytes()) {
		t.Errorf("got %q, want one line: stage load N ms", b.String())
	}
}
