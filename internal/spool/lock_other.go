//go:build !unix

package spool

import "os"

// lock is a no-op where flock(2) is missing: give each replica a data
// directory of its own there.
func lock(*os.File) error { return nil }

func unlock(*os.File) {}
