// Package atomicfile writes files so that a reader, and the file after a
// crash, holds the old content or the new one, never a part: the content
// goes to a temporary file in the same directory, which is given its
// mode, synced, closed and renamed over the name, and the directory is
// synced to make the rename durable.
//
// WriteFile does it in one call. A File splits it in two steps, Finish
// (the new content is durable beside the name) and Place (the rename), for
// a writer that prepares several files before it changes any, as the
// applier's state dir does while the kernel takes its batch.
package atomicfile

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFile writes data to name atomically with mode perm. Its temporary
// file is named "."+base(name)+".tmp-" and a random suffix, the name a
// sweeper of an interrupted write looks for. The directory's sync is best
// effort: once the rename is done the new content is in place, and not
// every file system can sync a directory.
func WriteFile(name string, data []byte, perm fs.FileMode) error {
	f, err := Create(name, "."+filepath.Base(name)+".tmp-", perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Abort()
		return err
	}
	if err := f.Finish(); err != nil {
		return err
	}
	if err := f.rename(); err != nil {
		return err
	}
	SyncDir(filepath.Dir(name))
	return nil
}

// File is an atomic write of a name in progress: a temporary file beside
// it. Write fills it, Finish makes it durable, Place renames it over the
// name; Abort, at any step before Place, removes it.
type File struct {
	name   string
	perm   fs.FileMode
	f      *os.File
	closed bool // by Finish
}

// Create starts an atomic write of name with mode perm: a temporary file
// in name's directory whose name is prefix and a random suffix.
func Create(name, prefix string, perm fs.FileMode) (*File, error) {
	f, err := os.CreateTemp(filepath.Dir(name), prefix+"*")
	if err != nil {
		return nil, err
	}
	return &File{name: name, perm: perm, f: f}, nil
}

// Write writes p to the temporary file.
func (f *File) Write(p []byte) (int, error) { return f.f.Write(p) }

// TempName is the temporary file's path.
func (f *File) TempName() string { return f.f.Name() }

// Finish gives the temporary file its mode, syncs and closes it: the new
// content is durable, and the name still holds what it held. On an error
// the temporary file is removed.
func (f *File) Finish() error {
	if err := f.f.Chmod(f.perm); err != nil {
		f.Abort()
		return err
	}
	if err := f.f.Sync(); err != nil {
		f.Abort()
		return err
	}
	f.closed = true
	if err := f.f.Close(); err != nil {
		os.Remove(f.f.Name())
		return err
	}
	return nil
}

// Place renames the finished temporary file over the name and syncs the
// directory. An error of the rename removes the temporary file; an error
// of the directory's sync comes after the rename, as "sync DIR: …".
func (f *File) Place() error {
	if err := f.rename(); err != nil {
		return err
	}
	dir := filepath.Dir(f.name)
	if err := SyncDir(dir); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// Commit is Finish and Place.
func (f *File) Commit() error {
	if err := f.Finish(); err != nil {
		return err
	}
	return f.Place()
}

// Abort removes the temporary file; the name keeps what it held.
func (f *File) Abort() {
	if !f.closed {
		f.closed = true
		f.f.Close()
	}
	os.Remove(f.f.Name())
}

// rename renames the temporary file over the name, removing it on error.
func (f *File) rename() error {
	if err := os.Rename(f.f.Name(), f.name); err != nil {
		os.Remove(f.f.Name())
		return err
	}
	return nil
}

// SyncDir syncs the directory dir, which makes the creations, renames and
// removals of its entries durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
