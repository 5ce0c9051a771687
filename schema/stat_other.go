//go:build !linux

package schema

import "io/fs"

// statOf gives no identity outside Linux: the StatCache memoizes nothing
// there, and every file is read.
func statOf(fs.FileInfo) fileStat { return fileStat{} }
