package server

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/intentius/boxbroker/internal/filelock"
	"github.com/intentius/boxbroker/internal/outbox"
	"github.com/intentius/boxbroker/internal/secrets"
)

// LockFile is the file in a SQLite data directory that a serving
// process holds an exclusive lock on, and writes its process ID to.
const LockFile = "serve.lock"

// ErrDataDirInUse is returned by New when another process serves the
// SQLite store of the same data directory.
var ErrDataDirInUse = errors.New("the data directory is in use by another boxbroker serve")

// ErrNoDatabase is returned by New when the data directory holds the
// master key file, a journal or a spool but no database, and
// Config.NewStore is not set.
var ErrNoDatabase = errors.New("the data directory holds boxbroker data but no database")

// ErrDataDirOpen is returned by New, OpenStore and LoadKeyring for a data
// directory that a user other than the process's own (and root) may put
// files in: any user, where it is writable by others, or the user it
// belongs to. Such a user could give boxbroker a master key, a database or
// a journal of their own, or a link in place of a file it writes (its
// lock file, a journal) to a file elsewhere for it to overwrite.
var ErrDataDirOpen = errors.New("the data directory is open to other users' files")

// makeDataDir makes dir (mode 0700) if it is missing, and refuses it
// (ErrDataDirOpen) when others can write into it, or it belongs to a user
// other than the process's own and root. A directory others may only
// read is taken (New warns of it: warnOpenDataDir), as is one its group
// may write, as a volume shared with a group of the platform's is.
func makeDataDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("make data directory: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	if fi.Mode().Perm()&0o002 != 0 {
		return fmt.Errorf("%w: %s is mode %#o, so any user of this machine can put files in it for boxbroker to read or write through "+
			"(a master key of their own, a link in place of serve.lock); chmod 700 it, or give --data (BOXBROKER_DATA) a directory of boxbroker's user's own",
			ErrDataDirOpen, dir, fi.Mode().Perm())
	}
	if uid, ok := filelock.Owner(fi); ok && uid != 0 && uid != os.Geteuid() {
		return fmt.Errorf("%w: %s belongs to user %d, not to this process's user (%d) nor root, and its owner can put files in it for boxbroker to read or write through; "+
			"give --data (BOXBROKER_DATA) a directory of boxbroker's user's own", ErrDataDirOpen, dir, uid, os.Geteuid())
	}
	return nil
}

// dirLock is serve's hold on a SQLite data directory: an exclusive
// flock(2) on LockFile, kept until release.
type dirLock struct{ f *os.File }

// lockDataDir takes the exclusive lock on dir's LockFile and writes this
// process's ID into it. When another process holds it, the error wraps
// ErrDataDirInUse and names that process's ID as the file says it.
func lockDataDir(dir string) (*dirLock, error) {
	if err := makeDataDir(dir); err != nil {
		return nil, err
	}
	p := filepath.Join(dir, LockFile)
	// Judged as opened (filelock.Open): a link put here in place of
	// the lock file is not followed to a file to truncate and write.
	f, err := filelock.Open(p, os.O_RDWR|os.O_CREATE, outbox.FileMode)
	if err != nil {
		return nil, fmt.Errorf("open the data directory's lock file: %w", err)
	}
	ok, err := filelock.TryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock the data directory (%s): %w", p, err)
	}
	if !ok {
		// Read from the file locked, not the name again, which may be
		// a FIFO by now.
		b := make([]byte, 32)
		n, _ := f.ReadAt(b, 0)
		b = b[:n]
		f.Close()
		pid := strings.TrimSpace(string(b))
		if _, err := strconv.Atoi(pid); err != nil {
			pid = "unknown"
		}
		return nil, fmt.Errorf("%w (process %s holds %s): one SQLite data directory serves one process at a time; "+
			"stop that one, give this one another --data (BOXBROKER_DATA), or run several replicas on one PostgreSQL store "+
			"(--store postgres://…, BOXBROKER_STORE; see docs/deploy.md)", ErrDataDirInUse, pid, p)
	}
	if err := outbox.OwnerOnly(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("the data directory's lock file: %w", err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dirLock{f: f}, nil
}

// release lets the lock go. The file stays: removing it would let a
// process that opened it before the removal lock a file no one else
// can find.
func (l *dirLock) release() error {
	if l == nil {
		return nil
	}
	return l.f.Close()
}

// CheckHasDatabase refuses (ErrNoDatabase) a SQLite data directory that
// holds the master key file, a journal or a spool but no database file:
// its database was deleted or moved, and a new empty one would serve no
// box and set the records there aside. newStore says the operator wants
// a new one. New runs it before it makes anything in the directory; a
// command that would make the database runs it before OpenStore.
func CheckHasDatabase(dir string, newStore bool) error {
	if newStore {
		return nil
	}
	db := filepath.Join(dir, DBFile)
	if _, err := os.Stat(db); !errors.Is(err, fs.ErrNotExist) {
		return nil // there, or unreadable: opening it says which
	}
	var found []string
	for _, pat := range []string{secrets.KeyFile, outbox.SpoolFile, "journal-*.jsonl"} {
		m, _ := filepath.Glob(filepath.Join(dir, pat))
		found = append(found, m...)
	}
	if len(found) == 0 {
		return nil // a new data directory
	}
	return fmt.Errorf("%w: %s is missing but %s %s there; restore the database from its backup (see docs/deploy.md, Backups), "+
		"point --data (BOXBROKER_DATA) at the right directory, or start serve with --new-store to make a new, empty database",
		ErrNoDatabase, db, strings.Join(found, ", "), isAre(len(found)))
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}
