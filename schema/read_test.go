package schema

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
)

// TestReadUpTo reads contents whose stat told another size (the file grew
// or shrank since, or stat tells none), in one piece or a byte at a time,
// and checks that it gets the content, cut at max+1 bytes.
func TestReadUpTo(t *testing.T) {
	content := strings.Repeat("0123456789abcdef", 300) // 4800 bytes
	for _, tc := range []struct {
		name      string
		len, size int64 // the content's length and the size stat told
		max       int64
	}{
		{name: "empty", len: 0, size: 0, max: 100},
		{name: "as stat told", len: 4800, size: 4800, max: 8 << 20},
		{name: "stat tells no size", len: 4800, size: 0, max: 8 << 20},
		{name: "grew since stat", len: 4800, size: 100, max: 8 << 20},
		{name: "shrank since stat", len: 100, size: 4800, max: 8 << 20},
		{name: "at the limit", len: 4800, size: 4800, max: 4800},
		{name: "a byte over the limit", len: 4800, size: 4800, max: 4799},
		{name: "over the limit", len: 4800, size: 4800, max: 1000},
		{name: "over the limit, stat told less", len: 4800, size: 10, max: 1000},
		{name: "over a small limit, stat tells no size", len: 4800, size: 0, max: 10},
		{name: "limit below the first buffer", len: 300, size: 0, max: 299},
	} {
		data := content[:tc.len]
		want := data[:min(tc.len, tc.max+1)]
		for _, r := range []struct {
			name string
			r    io.Reader
		}{
			{"whole", strings.NewReader(data)},
			{"byte by byte", iotest.OneByteReader(strings.NewReader(data))},
			{"data with EOF", iotest.DataErrReader(strings.NewReader(data))},
		} {
			got, err := readUpTo(r.r, tc.size, tc.max)
			if err != nil {
				t.Errorf("%s, %s: %v", tc.name, r.name, err)
				continue
			}
			if string(got) != want {
				t.Errorf("%s, %s: got %d bytes, want %d", tc.name, r.name, len(got), len(want))
			}
		}
	}
}

func TestReadUpToError(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(boom))
	if _, err := readUpTo(r, 3, 100); !errors.Is(err, boom) {
		t.Errorf("err = %v, want %v", err, boom)
	}
}

// readers are the ways readLimited may read a file: readFile, and
// readFileOS that it is on the systems without a faster one.
var readers = []struct {
	name string
	read func(name string, max int64) ([]byte, fileStat, error)
}{
	{"readFile", readFile},
	{"readFileOS", readFileOS},
}

// TestReadLimited reads files on disk around the limit, an empty one, a
// directory and a missing one, through readLimited and both readers.
func TestReadLimited(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		size    int
		max     int64
		wantErr string // readLimited's
	}{
		{name: "empty", size: 0, max: 10},
		{name: "small", size: 100, max: 8 << 20},
		{name: "page", size: 4096, max: 8 << 20},
		{name: "at limit", size: 1024, max: 1024},
		{name: "over limit", size: 1025, max: 1024, wantErr: "file is larger than the 1 KiB limit (--max-file-size)"},
		{name: "far over limit", size: 100000, max: 1024, wantErr: "file is larger than the 1 KiB limit (--max-file-size)"},
	} {
		content := bytes.Repeat([]byte("x"), tc.size)
		name := filepath.Join(dir, tc.name)
		if err := os.WriteFile(name, content, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, r := range readers {
			got, st, err := r.read(name, tc.max)
			if err != nil {
				t.Errorf("%s, %s: %v", tc.name, r.name, err)
				continue
			}
			if want := content[:min(int64(len(content)), tc.max+1)]; !bytes.Equal(got, want) {
				t.Errorf("%s, %s: got %d bytes, want %d", tc.name, r.name, len(got), len(want))
			}
			if haveStat && (!st.ok || st.size != int64(tc.size)) {
				t.Errorf("%s, %s: stat = %+v, want the file's identity, size %d", tc.name, r.name, st, tc.size)
			}
		}
		got, _, err := readLimited(name, tc.max)
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("%s: err = %v, want %q", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !bytes.Equal(got, content) {
			t.Errorf("%s: got %d bytes, %v; want %d bytes", tc.name, len(got), err, len(content))
		}
	}
	// The errors are the bare errno, whichever way the file is read.
	for _, r := range readers {
		if _, _, err := r.read(filepath.Join(dir, "missing"), 10); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("missing, %s: err = %v, want not exist", r.name, err)
		}
	}
	_, _, errOS := readFileOS(dir, 10)
	if _, _, err := readFile(dir, 10); err == nil || errOS == nil || err.Error() != errOS.Error() {
		t.Errorf("directory: readFile's error %v, readFileOS's %v; want the same error", err, errOS)
	}
}
