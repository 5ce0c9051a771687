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

// TestReadLimited reads files on disk around the limit, and an empty one.
func TestReadLimited(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		size    int
		max     int64
		wantErr string
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
		got, st, err := readLimited(name, tc.max)
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("%s: err = %v, want %q", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !bytes.Equal(got, content) {
			t.Errorf("%s: got %d bytes, want %d", tc.name, len(got), len(content))
		}
		if haveStat && (!st.ok || st.size != int64(tc.size)) {
			t.Errorf("%s: stat = %+v, want the file's identity, size %d", tc.name, st, tc.size)
		}
	}
	if _, _, err := readLimited(filepath.Join(dir, "missing"), 10); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: err = %v, want not exist", err)
	}
}
