//go:build !unix

package mailbox

import (
	"fmt"
	"os"
)

// regularFile is a regular file open for reading.
type regularFile = os.File

// openRegular opens path for reading and returns it with its size, or
// ErrNotRegular if it is not a regular file.
func openRegular(path string) (*regularFile, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, fmt.Errorf("%w: %s", ErrNotRegular, path)
	}
	return f, fi.Size(), nil
}
