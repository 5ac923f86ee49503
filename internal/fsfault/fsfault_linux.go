package fsfault

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// SkipOrFail skips t for reason, or fails it when SPAMD_REQUIRE_E2E=1
// says nothing may be skipped.
func SkipOrFail(t testing.TB, reason string) {
	t.Helper()
	if os.Getenv("SPAMD_REQUIRE_E2E") == "1" {
		t.Fatal(reason + ", and SPAMD_REQUIRE_E2E=1 forbids skipping")
	}
	t.Skip(reason)
}

// MountTmpfs mounts a tmpfs of size (as mount takes it: "64m") and mode
// for t and returns where. It is unmounted when t ends.
func MountTmpfs(t testing.TB, size string, mode os.FileMode) string {
	t.Helper()
	if testing.Short() {
		t.Skip("mounts a filesystem and produces faults on it")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%s,mode=%04o", size, mode.Perm())); err != nil {
		SkipOrFail(t, fmt.Sprintf("cannot mount a tmpfs (%v): the fault tests need root or CAP_SYS_ADMIN", err))
	}
	// Detached, so that a store left open cannot keep it mounted.
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// FreeSpace returns the space left on dir's filesystem to a process
// without root's reserved blocks.
func FreeSpace(t testing.TB, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// Fill takes the free space of dir's filesystem down to at most leave
// bytes with a file, which it returns; removing it gives the space back.
func Fill(t testing.TB, dir string, leave int64) string {
	t.Helper()
	p := filepath.Join(dir, fmt.Sprintf("filler-%d", rand.Uint64()))
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n := FreeSpace(t, dir) - leave - 1<<20; n > 0 {
		if err := unix.Fallocate(int(f.Fd()), 0, 0, n); err != nil {
			t.Fatalf("fallocate %d bytes: %v", n, err)
		}
		if _, err := f.Seek(n, io.SeekStart); err != nil {
			t.Fatal(err)
		}
	}
	// The last megabyte a page at a time, down to leave.
	page := make([]byte, 4096)
	for FreeSpace(t, dir) > leave {
		if _, err := f.Write(page); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			t.Fatal(err)
		}
	}
	return p
}

// immutableFlag is FS_IMMUTABLE_FL of linux/fs.h: no entry of a directory
// so marked can be created, removed or renamed, even by root.
const immutableFlag = 0x10

// SetImmutable sets or clears dir's immutable attribute.
func SetImmutable(dir string, on bool) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil {
		return fmt.Errorf("get attributes of %s: %w", dir, err)
	}
	if on {
		flags |= immutableFlag
	} else {
		flags &^= immutableFlag
	}
	if err := unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags)); err != nil {
		return fmt.Errorf("set attributes of %s: %w", dir, err)
	}
	return nil
}
