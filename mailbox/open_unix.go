//go:build unix

package mailbox

import (
	"errors"
	"fmt"
	"io"
	"io/fs"

	"golang.org/x/sys/unix"
)

// regularFile is a regular file open for reading, read with plain system
// calls. os.Open offers every file to the runtime's poller, which refuses
// a regular one only after four fcntl calls and an epoll_ctl: with the
// stat, the open, a read and the close, a run over a corpus of small
// files made eleven system calls a message where six do, and those five
// took 60% of the time spent opening and reading SpamAssassin's 4,837
// training messages.
type regularFile struct{ fd int }

// maxRead bounds one read(2).
const maxRead = 1 << 30

// openRegular opens path for reading and returns it with its size, or
// ErrNotRegular if it is not a regular file. It opens without blocking, so
// that a named pipe put where a file was is refused, not waited on.
func openRegular(path string) (*regularFile, int64, error) {
	var fd int
	var err error
	for {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return nil, 0, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, 0, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, 0, fmt.Errorf("%w: %s", ErrNotRegular, path)
	}
	return &regularFile{fd: fd}, st.Size, nil
}

// Read reads as read(2) does, io.EOF at the end. O_NONBLOCK means nothing
// to a regular file.
func (f *regularFile) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	// Darwin and the BSDs refuse a read of more than INT_MAX bytes with
	// EINVAL; a short read is what the caller expects anyway.
	if len(p) > maxRead {
		p = p[:maxRead]
	}
	for {
		n, err := unix.Read(f.fd, p)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return 0, err
		case n == 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// Close closes the file.
func (f *regularFile) Close() error { return unix.Close(f.fd) }
