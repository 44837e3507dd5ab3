//go:build !unix

package filelock

import (
	"io/fs"
	"os"
)

// TryLock always reports true where flock(2) is missing.
func TryLock(*os.File) (bool, error) { return true, nil }

// Lock does nothing where flock(2) is missing.
func Lock(*os.File) error { return nil }

// Unlock does nothing where flock(2) is missing.
func Unlock(*os.File) {}

// noFollow and noWait: none here.
const (
	noFollow = 0
	noWait   = 0
)

// isLink reports false: no open refuses a link here.
func isLink(error) bool { return false }

// names is 1: the system here does not say how many names a file has.
func names(*os.File) (uint64, error) { return 1, nil }

// Owner is the user ID fi's file belongs to; ok is false where the
// system does not say, as here.
func Owner(fs.FileInfo) (uid int, ok bool) { return 0, false }
