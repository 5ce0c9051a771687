package schema

import (
	"io/fs"
	"syscall"
)

// haveStat tells that statOf gives identities, so that a StatCache
// memoizes files and keeps walks (Options.Changed).
const haveStat = true

// statOf returns the identity of the file fi describes.
func statOf(fi fs.FileInfo) fileStat {
	s, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileStat{}
	}
	return statFrom(s)
}

// statFrom returns the identity of the file stat described.
func statFrom(s *syscall.Stat_t) fileStat {
	return fileStat{
		dev: uint64(s.Dev), ino: uint64(s.Ino), size: s.Size,
		mtime: s.Mtim.Nano(), ctime: s.Ctim.Nano(), ok: true,
	}
}
