// The two ways the data directory's files are written: a line appended
// to a log (OpenLog and AppendSynced: the spool, the dead letters, the
// lines set aside unread, the audit sink's backlog), and a file replaced
// whole (WriteFile).

package outbox

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/intentius/boxbroker/internal/filelock"
	"github.com/intentius/boxbroker/internal/outbox/internal/diskfull"
)

// AppendSynced writes b, one or more whole lines, at the end of f and
// syncs f, and returns f's size then. f is open to read and write
// (OpenLog), with O_APPEND or without it: the write goes to the end all
// the same. When f ends with a line cut off (a process stopped
// mid-write), a newline ends that line first, so that b begins a line of
// its own.
//
// When the write or the sync fails, f is cut back to the size it had and
// its offset set there, so that no part of b stays in it and the next
// line begins where the kept ones end; the error is returned (joined with
// the cut-back's, when that fails too), with that size. The caller counts
// b as kept only when AppendSynced returns nil.
func AppendSynced(f *os.File, b []byte) (int64, error) {
	before, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, err
	}
	if before > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, before-1); err != nil {
			return before, err
		}
		if last[0] != '\n' {
			b = append([]byte{'\n'}, b...)
		}
	}
	_, err = diskfull.Write(f, b) // f.Write, but for a test of a full disk
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		return before + int64(len(b)), nil
	}
	if terr := f.Truncate(before); terr != nil {
		return before, errors.Join(err, fmt.Errorf("cutting back what was written: %w", terr))
	}
	if _, serr := f.Seek(before, io.SeekStart); serr != nil {
		return before, errors.Join(err, fmt.Errorf("cutting back what was written: %w", serr))
	}
	return before, err
}

// WriteFile writes data as the file at p, whole or not at all: to a new
// file beside it (p+".new"; a link or a FIFO there is refused,
// filelock.Open), synced, then renamed over p, and the directory synced,
// so that the new name outlives a power cut. The new
// file is removed when a step before the rename fails; when only the
// directory's sync fails, p holds data already and the error says the
// rename may not outlive a power cut.
func WriteFile(p string, data []byte) error {
	tmp := p + ".new"
	f, err := filelock.Open(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, FileMode)
	if err != nil {
		return err
	}
	// One a crash left beside p keeps its mode through O_TRUNC.
	err = OwnerOnly(f)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(p))
}

// OpenLog opens the log file at p — a file appended to with
// AppendSynced — to read and append to, made (FileMode) if missing, or
// narrowed to FileMode (OwnerOnly) when wider, and syncs its directory,
// so that a file made here, and the lines synced to it, outlive a power
// cut. A link, a FIFO or a device at p is refused (filelock.Open): a
// link put there is never followed to a file to append to or chmod.
func OpenLog(p string) (*os.File, error) {
	f, err := filelock.Open(p, os.O_RDWR|os.O_CREATE|os.O_APPEND, FileMode)
	if err != nil {
		return nil, err
	}
	if err := OwnerOnly(f); err != nil {
		f.Close()
		return nil, err
	}
	if err := syncDir(filepath.Dir(p)); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// syncDir syncs the directory dir: the names made, renamed or removed in
// it reach the disk. A test replaces it.
var syncDir = filelock.SyncDir

// FileMode is the mode of every file the broker writes in the data
// directory: the journals, the spool and the files beside it, the audit
// sink's backlog and state.
const FileMode fs.FileMode = 0o600

// OwnerOnly narrows f, a file the broker keeps in the data directory,
// to FileMode when its group or others may read or write it: an
// existing file keeps its mode when it is opened, and one an older
// boxbroker, a restored backup or a copy made by hand left 0644 would
// let every user of the machine read the records of calls it holds. A
// file that cannot be narrowed is an error naming it.
func OwnerOnly(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o077 == 0 {
		return nil
	}
	// Never a file another name (a hard link) leads to as well.
	if err := filelock.OneName(f); err != nil {
		return err
	}
	if err := f.Chmod(FileMode); err != nil {
		return notNarrowed(f.Name(), fi.Mode(), err)
	}
	return nil
}

// OwnerOnlyAt is OwnerOnly for the file at p, when there is one, opened
// (filelock.Open) and judged as opened: a link, a FIFO or a device at p
// is refused, and the file narrowed is the one judged, never a file a
// link put at p meanwhile leads to.
func OwnerOnlyAt(p string) error {
	f, err := filelock.Open(p, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	return OwnerOnly(f)
}

// notNarrowed is the error for the file at p, of mode m, that err kept
// from being narrowed.
func notNarrowed(p string, m fs.FileMode, err error) error {
	return fmt.Errorf("%s is mode %v, readable by others, and cannot be made %v: %w; chmod 600 it", p, m.Perm(), FileMode, err)
}
