//go:build unix

package server

import (
	"io/fs"
	"syscall"
)

// ownerOf is the user ID fi's file belongs to; ok is false where the
// system does not say.
func ownerOf(fi fs.FileInfo) (uid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
