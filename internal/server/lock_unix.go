//go:build unix

package server

import (
	"errors"
	"os"
	"syscall"
)

// tryLock takes an exclusive lock on f, held for as long as f is open
// (by this process or another), and reports false when another open
// file holds it.
func tryLock(f *os.File) (bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}
