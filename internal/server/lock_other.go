//go:build !unix

package server

import "os"

// tryLock always succeeds where flock(2) is missing: there nothing stops
// a second serve on one data directory.
func tryLock(*os.File) (bool, error) { return true, nil }
