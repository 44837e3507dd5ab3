package filelock

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// ErrNotRegular is wrapped by the error of Open, OpenRead and ReadFile
// for a path at which there is something other than a regular file: a
// link (Open), a FIFO, a device, a socket or a directory.
var ErrNotRegular = errors.New("not a regular file")

// ErrHardLinked is wrapped by the error of Open for a file opened to
// write that has more than one name (a hard link): its other name may be
// a file of the operator's (master.key) or of root's.
var ErrHardLinked = errors.New("has more than one name (a hard link), and is not written through")

// Open is os.OpenFile for a file the broker keeps in its data directory,
// judged as opened rather than by its name before or after: a link at p
// is not followed (O_NOFOLLOW), a FIFO is not waited on for a peer
// (O_NONBLOCK), and a file opened that is not a regular one is closed
// and refused, wrapping ErrNotRegular. A link, a FIFO or a device that a
// user who may write into the directory put at p is thus never written,
// truncated, chmodded or read through, whenever it was put there. A
// file opened to write (O_WRONLY, O_RDWR) that has another name too (a
// hard link, which a user who may write into the directory can make to
// another's file where the system lets them: fs.protected_hardlinks=0)
// is refused too, wrapping ErrHardLinked; O_TRUNC truncates the file
// only once it is judged.
func Open(p string, flag int, perm fs.FileMode) (*os.File, error) {
	f, err := os.OpenFile(p, flag&^os.O_TRUNC|noFollow|noWait, perm)
	if err != nil {
		if isLink(err) {
			return nil, fmt.Errorf("%s is a link, which is not followed in the data directory: %w", p, ErrNotRegular)
		}
		return nil, err
	}
	if err := regular(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s %w", p, err)
	}
	if flag&(os.O_WRONLY|os.O_RDWR) != 0 {
		if err := OneName(f); err != nil {
			f.Close()
			return nil, err
		}
	}
	if flag&os.O_TRUNC != 0 {
		if err := f.Truncate(0); err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}

// OpenRead opens the file at p, a file an operator names (a key, a
// certificate, a secret), to read. A link is followed, and the file it
// leads to judged as opened: one that is not a regular file (a FIFO,
// opened without waiting on a writer, or a device) is closed and
// refused, wrapping ErrNotRegular. Its errors name p only as the open's
// own do (an *fs.PathError): p may be the secret itself, given where its
// path was asked.
func OpenRead(p string) (*os.File, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|noWait, 0)
	if err != nil {
		return nil, err
	}
	if err := regular(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("the file %w", err)
	}
	return f, nil
}

// ReadFile reads the file at p, opened with OpenRead, of at most max
// bytes: a larger one is refused, not read whole. Its errors name p as
// OpenRead's do.
func ReadFile(p string, max int64) ([]byte, error) {
	f, err := OpenRead(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("the file is larger than %d bytes", max)
	}
	return b, nil
}

// OneName refuses f, a file opened in the data directory, when it has
// more than one name (a hard link), wrapping ErrHardLinked and naming
// it: a file the broker writes or chmods there is one no other name
// leads to.
func OneName(f *os.File) error {
	n, err := names(f)
	if err != nil {
		return err
	}
	if n > 1 {
		return fmt.Errorf("%s %w", f.Name(), ErrHardLinked)
	}
	return nil
}

// regular refuses f unless it is a regular file.
func regular(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("is %s: %w", kind(fi.Mode()), ErrNotRegular)
	}
	return nil
}

// kind names what a file of mode m is, when it is not a regular file.
func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	}
	return "not a regular file (" + m.String() + ")"
}
