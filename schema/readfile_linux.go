package schema

import (
	"io"
	"syscall"
)

// readFile opens, stats, reads and closes a file by plain system calls:
// os.Open would also make the descriptor non-blocking and offer it to the
// poller, which refuses regular files, and put it back (six more calls per
// file), and os.File costs allocations. Reading a tree of tens of thousands
// of small files, that was most of the time spent reading. It returns the
// content, up to max+1 bytes (readLimited tells more than max an error),
// and the identity of a regular file as it was when opened. Errors are the
// bare errno, as unwrapPath leaves those of package os.
func readFile(name string, max int64) ([]byte, fileStat, error) {
	var fd int
	err := ignoringEINTR(func() (err error) {
		fd, err = syscall.Open(name, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return nil, fileStat{}, err
	}
	defer syscall.Close(fd)
	var st fileStat
	var size int64 // as stat tells, 0 when it cannot
	var s syscall.Stat_t
	if ignoringEINTR(func() error { return syscall.Fstat(fd, &s) }) == nil && s.Mode&syscall.S_IFMT == syscall.S_IFREG {
		st, size = statFrom(&s), s.Size
	}
	data, err := readUpTo(fdReader(fd), size, max)
	if err != nil {
		return nil, fileStat{}, err
	}
	return data, st, nil
}

// fdReader reads a file descriptor, as os.File does one it does not poll.
type fdReader int

func (fd fdReader) Read(p []byte) (int, error) {
	for {
		n, err := syscall.Read(int(fd), p)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// ignoringEINTR calls fn until it fails with another error than EINTR (a
// signal interrupted it), as package os does.
func ignoringEINTR(fn func() error) error {
	for {
		if err := fn(); err != syscall.EINTR {
			return err
		}
	}
}
