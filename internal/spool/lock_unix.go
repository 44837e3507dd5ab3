//go:build unix

package spool

import (
	"os"
	"syscall"
)

// lock holds an exclusive lock on f until unlock, so that replicas that
// share a data directory never append to a spool file another is
// setting aside.
func lock(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }

func unlock(f *os.File) { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
