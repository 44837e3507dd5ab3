//go:build !unix

package outbox

import "os"

// tryLock always succeeds, and lock and unlock do nothing, where flock(2)
// is missing: give each replica a data directory of its own there.
func tryLock(*os.File) (bool, error) { return true, nil }

func lock(*os.File) error { return nil }

func unlock(*os.File) {}
