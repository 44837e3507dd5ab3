//go:build unix

package outbox

import (
	"errors"
	"os"
	"syscall"
)

// tryLock takes an exclusive lock on f, held for as long as f is open,
// and reports false when another process holds it: a replica holds its
// own journal's lock for its life, so a journal whose lock can be taken
// is one whose replica is gone.
func tryLock(f *os.File) (bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}

// lock holds an exclusive lock on f until unlock, so that replicas that
// share a data directory never append to a spool file another is
// setting aside.
func lock(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }

func unlock(f *os.File) { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
