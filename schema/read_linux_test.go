package schema

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestReadLimitedNoSize reads a file whose stat tells size 0 although it
// has content (as the files of /proc do), and a FIFO, which is no regular
// file and has no identity.
func TestReadLimitedNoSize(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, r := range readers {
		data, _, err := r.read("/proc/self/status", 8<<20)
		if err != nil {
			t.Fatalf("/proc/self/status, %s: %v", r.name, err)
		}
		// It is longer than the first buffer, and ends with the last field.
		if !strings.HasPrefix(string(data), "Name:") || len(data) < 512 || !strings.HasSuffix(string(data), "\n") {
			t.Errorf("/proc/self/status, %s: got %q, want all of it", r.name, data)
		}
	}

	fifo := filepath.Join(t.TempDir(), "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("cannot make a FIFO: %v", err)
	}
	want := strings.Repeat("kind: Service\n", 1000)
	done := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err == nil {
			_, err = f.WriteString(want)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		done <- err
	}()
	data, st, err := readLimited(fifo, 8<<20)
	if werr := <-done; werr != nil {
		t.Fatalf("writing the FIFO: %v", werr)
	}
	if err != nil {
		t.Fatalf("FIFO: %v", err)
	}
	if string(data) != want {
		t.Errorf("FIFO: got %d bytes, want %d", len(data), len(want))
	}
	if st.ok {
		t.Errorf("FIFO: stat %+v, want no identity", st)
	}
}
