//go:build !unix

package filelock

import "os"

// TryLock always reports true where flock(2) is missing.
func TryLock(*os.File) (bool, error) { return true, nil }

// Lock does nothing where flock(2) is missing.
func Lock(*os.File) error { return nil }

// Unlock does nothing where flock(2) is missing.
func Unlock(*os.File) {}
