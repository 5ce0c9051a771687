//go:build !linux

package schema

// readFile is readLimited's read, through package os.
func readFile(name string, max int64) ([]byte, fileStat, error) {
	return readFileOS(name, max)
}
