package schema

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"netspec.dev/netspec/internal/gen/gentree"
)

// slowYAML is what splitDocs makes of a file without fastYAML: yaml.v3's
// documents converted to plain values. ok is false when yaml.v3 or the
// converter finds an error.
func slowYAML(data []byte) (docs []any, ok bool) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		n := new(yaml.Node)
		err := decodeNode(dec, n)
		if err == io.EOF {
			return docs, true
		}
		if err != nil {
			return nil, false
		}
		conv := newConverter("f.yaml", n)
		v := conv.value(n, 0)
		if conv.err != nil {
			return nil, false
		}
		docs = append(docs, v)
	}
}

// checkFast fails when fastYAML reads data and yaml.v3 with the converter
// does not, or reads other documents or values (of other Go types too).
// It reports whether fastYAML read data.
func checkFast(t *testing.T, name string, data []byte) bool {
	t.Helper()
	fast, ok := fastYAML(data)
	if !ok {
		return false
	}
	slow, slowOK := slowYAML(data)
	if !slowOK {
		t.Errorf("%s: fastYAML reads what yaml.v3 refuses:\n%s", name, data)
		return true
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Errorf("%s: fastYAML reads\n%s\nyaml.v3 reads\n%s\nfrom:\n%s", name, dump(fast), dump(slow), data)
	}
	return true
}

// dump prints values with their Go types, so that int64(1) and "1" differ.
func dump(v any) string {
	switch x := v.(type) {
	case map[string]any:
		var b strings.Builder
		b.WriteString("{")
		for _, k := range sortedKeys(x) {
			fmt.Fprintf(&b, "%q: %s, ", k, dump(x[k]))
		}
		return b.String() + "}"
	case []any:
		var parts []string
		for _, e := range x {
			parts = append(parts, dump(e))
		}
		return fmt.Sprintf("[%s] (nil %v)", strings.Join(parts, ", "), x == nil)
	}
	return fmt.Sprintf("%T(%#v)", v, v)
}

func sortedKeys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	for i := range ks {
		for j := i + 1; j < len(ks); j++ {
			if ks[j] < ks[i] {
				ks[i], ks[j] = ks[j], ks[i]
			}
		}
	}
	return ks
}

// fastCases are inputs at the edges of what fastYAML reads.
var fastCases = []string{
	"", "# only a comment\n", "\n\n", "---\n", "---\n---\n", "a: 1\n---\n", "---\na: 1\n---\n# c\n",
	"a: 1\n...\n", "%YAML 1.2\n---\na: 1\n", "--- a: 1\n", "---   \na: 1\n", "----\n",
	"a:\n", "a: \n", "a: # c\n", "a: b # c\n", "a: b#c\n", "a: 'b' # c\n", "a: 'b'# c\n", "a: \"b\"#c\n",
	"a: ~\nb: null\nc: Null\nd: NULL\ne: true\nf: True\ng: TRUE\nh: false\ni: False\nj: FALSE\n",
	"a: yes\nb: no\nc: on\nd: off\ne: y\nf: n\n",
	"a: 0\nb: 1\nc: -1\nd: 007\ne: 08\nf: 0x1F\ng: 0o17\nh: 0b101\ni: 1_000\nj: 1e3\nk: 1.5\nl: .5\nm: +1\nn: -0\n",
	"a: 999999999999999999\nb: 9999999999999999999\nc: 99999999999999999999\nd: -999999999999999999\n",
	"a: .inf\nb: -.inf\nc: .nan\nd: +.inf\n",
	"a: 10.244.31.189\nb: 1.2.5\nc: 1.2\nd: 1.\ne: 8080/TCP\nf: 10:30\ng: 3m\nh: 1.2.5-rc1\ni: 12e\n",
	"a: 2024-01-01\nb: 2024-1-2\nc: 2024-01-01T10:00:00Z\nd: 1234-x\ne: 123-4\n",
	"a: 'it''s'\nb: \"q\"\nc: ''\nd: \"\"\ne: 'x\ny'\n", "a: \"x\\ny\"\n", "a: 'unterminated\n",
	"'a': 1\n\"b\": 2\n'c' : 3\n'd':4\n", "a b: c\n", "a  : c\n", "a:b: c\n", "a: b: c\n", "a: b:\n", "a:b\n",
	"a: {}\nb: []\nc: { }\nd: {a: 1}\ne: [1]\nf: {}x\ng: [] # c\n",
	"a: &x 1\nb: *x\n", "a: !!str 1\n", "<<: {a: 1}\n", "a: <<\n", "? a\n: b\n",
	"a: |\n  x\n", "a: >\n  x\n", "a: x\n  y\n", "a: x\n\n  y\n", "a: x\n  # c\n  y\n",
	"a:\n  b: 1\n  c: 2\nd: 3\n", "a:\n    b: 1\n  c: 2\n", "a:\n  b: 1\n    c: 2\n", "  a: 1\n  b: 2\n", "  a: 1\nb: 2\n",
	"a:\n- 1\n- 2\nb: 3\n", "a:\n  - 1\n  - 2\n", "a:\n  - 1\n - 2\n", "a:\n- b: 1\n  c: 2\n- d: 3\n",
	"a:\n-   b: 1\n    c: 2\n", "a:\n- b: 1\n c: 2\n", "a:\n- b: 1\n   c: 2\n", "a:\n-\n  b: 1\n-\n- x\n",
	"a:\n- - 1\n", "a:\n-1\n", "a:\n- -1\n", "a:\n- -x\n", "a:\n- 'x': 1\n", "a:\n- 'x'\n", "a:\n- x # c\n",
	"a:\n- b:\n  - c\n  d: 1\n", "a:\n- b:\n    c: 1\n", "a: 1\na: 2\n", "a:\n  b: 1\n  b: 2\n",
	"- a\n- b\n", "plain\n", "a: 1\n- b\n", "a: 1\n b: 2\n",
	"a: x\r\n", "a:\tx\n", "a: é\n", "\ufeffa: 1\n", "a: \x01\n",
	"a: -\n", "a: - x\n", "a: ?x\n", "a: x?\n", "a: [x\n", "a: x]\n", "a: x, y\n", "a: @x\n", "a: %x\n", "a: `x\n",
	"a: x #\n", "a: x  \n", "a:   x\n", "a: x y  z\n",
	strings.Repeat("k", 1001) + ": 1\n", strings.Repeat("k", 1000) + ": 1\n",
	strings.Repeat("a:\n ", 60) + "b: 1\n",
}

// TestFastYAMLAgreesWithYAMLv3 holds fastYAML to yaml.v3 with the
// converter: on edge cases, on every YAML and JSON file of the repository,
// on a generated tree, and on random mutations of all of them, whatever
// fastYAML reads must be read by yaml.v3 into the same documents and
// values. It also checks that fastYAML reads the generated tree and the
// examples, for which it exists.
func TestFastYAMLAgreesWithYAMLv3(t *testing.T) {
	var inputs [][]byte
	for _, c := range fastCases {
		inputs = append(inputs, []byte(c))
	}
	fastRead := 0
	for i, in := range inputs {
		if checkFast(t, fmt.Sprintf("case %d", i), in) {
			fastRead++
		}
	}
	if fastRead < 20 {
		t.Errorf("fastYAML reads only %d of the edge cases", fastRead)
	}

	// Files of the repository, and a generated tree, which fastYAML must read.
	var files []string
	for _, root := range []string{"../examples", "testdata", "../cmd/netspec/testdata"} {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml") || strings.HasSuffix(p, ".json")) {
				files = append(files, p)
			}
			return nil
		})
	}
	gen := t.TempDir()
	if err := gentree.Write(gen, gentree.Config{Services: 50, PodsPerService: 2, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	var genFiles []string
	filepath.WalkDir(gen, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			genFiles = append(genFiles, p)
		}
		return nil
	})
	read := 0
	for _, f := range append(files, genFiles...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, data)
		if checkFast(t, f, data) {
			read++
		} else if strings.HasPrefix(f, gen) && filepath.Base(f) != "cluster.yaml" { // its lists are flow lists
			t.Errorf("%s: fastYAML does not read this generated file", f)
		}
	}
	if read < len(genFiles)+len(files)/2 {
		t.Errorf("fastYAML reads %d of %d files", read, len(files)+len(genFiles))
	}

	// Random mutations: a character inserted, deleted or replaced, a line
	// repeated or indented.
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = " \n:-#'\"{}[],&*!|>?%@0123456789.aeEx+_\\~<"
	mutations, mutatedRead := 4000, 0
	if n, err := strconv.Atoi(os.Getenv("NETSPEC_FASTYAML_MUTATIONS")); err == nil {
		mutations = n
	}
	if testing.Short() {
		mutations = 500
	}
	for i := range mutations {
		in := inputs[rng.IntN(len(inputs))]
		if len(in) == 0 {
			continue
		}
		b := append([]byte{}, in...)
		for range 1 + rng.IntN(3) {
			at := rng.IntN(len(b) + 1)
			c := alphabet[rng.IntN(len(alphabet))]
			switch rng.IntN(5) {
			case 0:
				b = append(b[:at], append([]byte{c}, b[at:]...)...)
			case 1:
				if at < len(b) {
					b = append(b[:at], b[at+1:]...)
				}
			case 2:
				if at < len(b) {
					b[at] = c
				}
			case 3:
				lines := bytes.SplitAfter(b, []byte("\n"))
				j := rng.IntN(len(lines))
				lines = append(lines[:j+1], lines[j:]...)
				b = bytes.Join(lines, nil)
			case 4:
				lines := bytes.SplitAfter(b, []byte("\n"))
				j := rng.IntN(len(lines))
				lines[j] = append([]byte(strings.Repeat(" ", 1+rng.IntN(3))), lines[j]...)
				b = bytes.Join(lines, nil)
			}
		}
		if checkFast(t, fmt.Sprintf("mutation %d", i), b) {
			mutatedRead++
		}
	}
	t.Logf("fastYAML read %d of %d edge cases, %d of %d files, %d of %d mutations", fastRead, len(fastCases), read, len(files)+len(genFiles), mutatedRead, mutations)
}
