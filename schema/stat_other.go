//go:build !linux

package schema

import "io/fs"

// haveStat is false outside Linux: the StatCache memoizes nothing there,
// every file is read, and Options.Changed is not taken (the tree is walked).
const haveStat = false

// statOf gives no identity outside Linux: the StatCache memoizes nothing
// there, and every file is read.
func statOf(fs.FileInfo) fileStat { return fileStat{} }
