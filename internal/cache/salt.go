package cache

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"io"
	"os"
	"sync"

	"netspec.dev/netspec/schema"
)

// binarySalt identifies the running binary, so that a pack written by
// another build of netspec is never trusted: the Go build ID of the
// executable, or a hash of the executable file when the build ID cannot be
// read. It also covers the schema version and the layout of the encoded
// types.
var binarySalt = sync.OnceValue(func() [32]byte {
	h := sha256.New()
	io.WriteString(h, "netspec-cache-salt\x00")
	io.WriteString(h, schema.Version+"\x00")
	if _, err := unitCodec(); err == nil {
		io.WriteString(h, typeFingerprint)
	}
	h.Write([]byte{0})
	exe, err := os.Executable()
	if err == nil {
		if id := buildID(exe); id != "" {
			io.WriteString(h, "buildid\x00"+id)
		} else if sum, ok := hashFile(exe); ok {
			io.WriteString(h, "exe-sha256\x00")
			h.Write(sum[:])
		} else {
			// No way to tell binaries apart: a salt no pack can carry.
			return unusableSalt
		}
	} else {
		return unusableSalt
	}
	var s [32]byte
	copy(s[:], h.Sum(nil))
	return s
})

// unusableSalt marks a binary that cannot identify itself: its packs are
// neither read nor written.
var unusableSalt [32]byte

// buildID returns the Go build ID of an executable, as `go tool buildid`
// prints it, or "".
func buildID(exe string) string {
	if f, err := elf.Open(exe); err == nil {
		defer f.Close()
		return elfBuildID(f)
	}
	return rawBuildID(exe)
}

// elfBuildID reads the Go build ID from the ELF note section
// .note.go.buildid: namesz, descsz, type (4 bytes each), "Go\x00\x00", ID.
func elfBuildID(f *elf.File) string {
	s := f.Section(".note.go.buildid")
	if s == nil {
		return ""
	}
	data, err := s.Data()
	if err != nil || len(data) < 16 {
		return ""
	}
	bo := f.ByteOrder
	namesz, descsz, typ := bo.Uint32(data), bo.Uint32(data[4:]), bo.Uint32(data[8:])
	const goBuildIDNote = 4
	if namesz != 4 || typ != goBuildIDNote || string(data[12:16]) != "Go\x00\x00" || uint64(descsz) > uint64(len(data)-16) {
		return ""
	}
	return string(data[16 : 16+descsz])
}

// rawBuildID finds the build ID that the Go linker writes near the start of
// non-ELF executables (Mach-O, PE): `\xff Go build ID: "ID"\n \xff`.
func rawBuildID(exe string) string {
	f, err := os.Open(exe)
	if err != nil {
		return ""
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	n, _ := io.ReadFull(f, buf)
	buf = buf[:n]
	const prefix = "\xff Go build ID: \""
	i := bytes.Index(buf, []byte(prefix))
	if i < 0 {
		return ""
	}
	rest := buf[i+len(prefix):]
	j := bytes.IndexByte(rest, '"')
	if j <= 0 {
		return ""
	}
	return string(rest[:j])
}

func hashFile(name string) ([32]byte, bool) {
	var sum [32]byte
	f, err := os.Open(name)
	if err != nil {
		return sum, false
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return sum, false
	}
	copy(sum[:], h.Sum(nil))
	return sum, true
}
