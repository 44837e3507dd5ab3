//go:build unix

package filelock

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// TryLock takes an exclusive lock on f, held for as long as f is open
// (by this process or another) or until Unlock, and reports false, with
// a nil error, when another open file holds it.
func TryLock(f *os.File) (bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}

// Lock waits for an exclusive lock on f and holds it until Unlock or
// until f is closed.
func Lock(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }

// Unlock lets go of f's lock.
func Unlock(f *os.File) { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }

// noFollow and noWait are the flags with which an open refuses a link at
// the path's end (ELOOP), and returns at once where it would wait: on a
// FIFO with no peer.
const (
	noFollow = syscall.O_NOFOLLOW
	noWait   = syscall.O_NONBLOCK
)

// isLink reports whether err is an open's refusal of a link (noFollow):
// ELOOP, or EMLINK where FreeBSD's open says so.
func isLink(err error) bool { return errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.EMLINK) }

// names is how many names (hard links) f's file has.
func names(f *os.File) (uint64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 1, nil
	}
	return uint64(st.Nlink), nil
}

// Owner is the user ID fi's file belongs to; ok is false where the
// system does not say.
func Owner(fi fs.FileInfo) (uid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
