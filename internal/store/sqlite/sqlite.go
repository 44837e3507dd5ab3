// Package sqlite is boxbroker's embedded store: a store.Store kept in one
// SQLite file through modernc.org/sqlite (no cgo).
//
// The file is opened in WAL mode with a busy timeout, foreign keys on and
// write transactions begun IMMEDIATE, so that the CLI and a running
// `boxbroker serve` can use the same file at once: readers never block, and
// a writer waits for the other's write to end instead of failing. Within one
// process all writes go through a single connection, so they queue in Go
// rather than in SQLite's busy handler.
//
// The schema is the ordered list of SQL files in migrations/, applied at
// Open inside one transaction and recorded in schema_migrations.
package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/intentius/boxbroker/internal/filelock"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/deadline"
	"github.com/intentius/boxbroker/internal/store/sqlstore"
)

// busyTimeout is how long a statement waits for another process's write
// before the store reports store.ErrUnavailable.
const busyTimeout = 5 * time.Second

// readConns is how many connections the reads share: twice the CPUs Go
// runs on, and 4 at least. Each connection opened costs thousands of
// calls to modernc.org/libc's allocator, which one mutex serializes for
// the whole process (the writer's too): hundreds of reads at once, each
// opening a connection of its own, queued on that mutex for seconds, a
// store silent to every caller. A read waits for a connection in
// database/sql, as long as its context lets it, and only then for the
// store (package deadline's bound).
func readConns() int { return max(4, 2*runtime.GOMAXPROCS(0)) }

// Store is a store.Store kept in one SQLite file. Its methods are safe for
// concurrent use, and several Stores, in one process or several, may use
// the same file.
type Store struct {
	// Store is the store's SQL, shared with PostgreSQL, over w and r.
	*sqlstore.Store
	// w runs every write transaction, on one connection.
	w *sql.DB
	// r runs reads, on readConns connections at most.
	r *sql.DB
	// now is the clock that stamps the changes log.
	now func() time.Time
	// audit holds w's prepared statements that write the audit log.
	audit auditStmts
	// group gathers concurrent reservations and settlements into one
	// transaction (see grouped).
	group group
	// progress, when set, is told of each write a group makes (see
	// SetProgress).
	progress atomic.Pointer[func()]
	// listeners are the channels Listen waits on, each of capacity one,
	// sent to (without blocking) when a write that logged a change
	// commits.
	listeners listeners
	// path is the database file's absolute path, and file what
	// os.Stat said of it once Open had made it: CheckFile compares the
	// two.
	path string
	file os.FileInfo
	// gone is the error CheckFile found once the file at path was no
	// longer the one opened; nil until then. Once set it stays, and
	// every write and Ping fails with it.
	gone atomic.Pointer[error]
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if need be) the SQLite database at path and brings
// its schema up to date. The database file and its WAL and shared-memory
// files are mode 0600, whatever the directory's mode and the umask: Open
// creates the file so, and narrows any of the three it finds wider. It
// fails if a file cannot be opened or narrowed, is not a boxbroker
// database, or was written by a newer boxbroker.
func Open(path string, opts ...Option) (*Store, error) {
	var o options
	for _, f := range opts {
		f(&o)
	}
	// Open's own work (migrations, the first statements) is not bounded.
	var on func()
	o.later, on = deadline.Later(deadline.Chain(o.around, deadline.Unavailable(translate)))
	if path == "" {
		return nil, errors.New("open sqlite store: empty path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}
	if err := ownerOnly(abs); err != nil {
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}
	ms := fmt.Sprint(busyTimeout.Milliseconds())
	w, err := o.open(dsn(abs, url.Values{
		"_busy_timeout": {ms},
		"_journal_mode": {"WAL"},
		"_foreign_keys": {"1"},
		"_txlock":       {"immediate"},
	}))
	if err != nil {
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}
	w.SetMaxOpenConns(1)
	w.SetConnMaxIdleTime(0)

	s := &Store{w: w, now: time.Now, path: abs}
	// One IMMEDIATE transaction applies every migration the database
	// has not recorded.
	if err := sqlstore.Migrate(context.Background(), w, dialect{s}, migrationFiles, s.now()); err != nil {
		w.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	if s.file, err = os.Stat(abs); err != nil {
		w.Close()
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}

	r, err := o.open(dsn(abs, url.Values{
		"_busy_timeout": {ms},
		"_foreign_keys": {"1"},
		"_query_only":   {"1"},
		// Readers map up to 256 MiB of the file rather than read(2) it
		// page by page: the owner's page's queries over a month of audit
		// at 1,000 boxes take a quarter of the time (BenchmarkUI_List),
		// and the mapped pages are the OS's cache, shared by every
		// reader connection, not a copy per connection.
		"_pragma": {"mmap_size(268435456)"},
	}))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}
	r.SetMaxOpenConns(readConns())
	r.SetMaxIdleConns(readConns())
	s.r = r
	if s.Store, err = sqlstore.New(w, r, dialect{s}); err != nil {
		s.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	s.Store.Audit = auditor{s}
	// The budget algorithm's statements and a group's savepoints run
	// prepared.
	if err := s.Store.Prepare(append(sqlstore.SpendStatements(dialect{}.Now(0)), groupStatements...)...); err != nil {
		s.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	on()
	return s, nil
}

// Option is an option of Open.
type Option func(*options)

type options struct {
	around deadline.Around
	// later is around once Open is done.
	later deadline.Around
}

// WithAround runs every operation of the store's database driver through
// a (package deadline's Bound.Around): the store's one place where its
// calls are bounded. The driver's errors that mean the database cannot
// be used now (busy, locked, read-only, full) reach a as
// store.ErrUnavailable.
func WithAround(a deadline.Around) Option {
	return func(o *options) { o.around = a }
}

// open is a database/sql handle on the database the driver's name dsn
// names, its operations run through o.around.
func (o *options) open(dsn string) (*sql.DB, error) {
	c, err := sqlite.NewConnector(dsn)
	if err != nil {
		return nil, err
	}
	if o.around == nil {
		return sql.OpenDB(c), nil
	}
	return sql.OpenDB(deadline.Connector(c, o.later)), nil
}

// FileMode is the mode of the database file and its WAL and
// shared-memory files.
const FileMode fs.FileMode = 0o600

// ownerOnly creates the database file at abs with FileMode if it is
// missing, and narrows it and its WAL and shared-memory files to FileMode
// where they are wider. SQLite gives the WAL and shared-memory files it
// creates the database file's mode. Each is judged as opened
// (filelock.Open): a link, a FIFO or a device at its path is refused,
// and what is narrowed is the file judged, never one a link leads to.
func ownerOnly(abs string) error {
	for i, p := range []string{abs, abs + "-wal", abs + "-shm"} {
		flag := os.O_RDONLY
		if i == 0 {
			flag = os.O_RDWR | os.O_CREATE
		}
		f, err := filelock.Open(p, flag, FileMode)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		// SQLite writes all three: none may be a hard link (to the
		// master key, say) that SQLite would write through.
		err = filelock.OneName(f)
		if err == nil {
			err = narrow(f)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("make %s mode %v: %w", p, FileMode, err)
		}
	}
	return nil
}

// narrow makes f FileMode when it is not.
func narrow(f *os.File) error {
	fi, err := f.Stat()
	if err != nil || fi.Mode().Perm() == FileMode {
		return err
	}
	return f.Chmod(FileMode)
}

// dsn makes the driver's name for the file at the absolute path abs: a
// file: URI, so that any character in the path is escaped.
func dsn(abs string, q url.Values) string {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: q.Encode()}
	return u.String()
}

// ErrFileGone is wrapped by CheckFile's error (beside
// store.ErrUnavailable) once the database file at the path the Store was
// opened at is no longer the file it opened: removed, renamed, or
// replaced by another.
var ErrFileGone = errors.New("the database file is no longer the one this store opened")

// CheckFile reports whether the file at the path the Store was opened
// at is still the file it opened (the same device and inode, as
// os.SameFile tells). A Store whose file was removed or replaced writes
// into a file no one can open again, so once CheckFile has found that,
// it says so for good, wrapping ErrFileGone and store.ErrUnavailable and
// naming the path, and every write and Ping after it fails with that
// error.
func (s *Store) CheckFile() error {
	if p := s.gone.Load(); p != nil {
		return *p
	}
	fi, err := os.Stat(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		err = fmt.Errorf("%w: %w: %s was removed", store.ErrUnavailable, ErrFileGone, s.path)
	case err != nil:
		return nil // unreadable just now (a full or slow disk): writes say so
	case !os.SameFile(fi, s.file):
		err = fmt.Errorf("%w: %w: %s was replaced by another file", store.ErrUnavailable, ErrFileGone, s.path)
	default:
		return nil
	}
	s.gone.CompareAndSwap(nil, &err)
	return *s.gone.Load()
}

// goneErr is CheckFile's error once it has found the file gone, nil
// until then; it looks at nothing on disk.
func (s *Store) goneErr() error {
	if p := s.gone.Load(); p != nil {
		return *p
	}
	return nil
}

// Ping reports whether the database answers; store.ErrUnavailable if not
// (and CheckFile's error once it has found the file gone).
func (s *Store) Ping(ctx context.Context) error {
	if err := s.goneErr(); err != nil {
		return translate("ping", err)
	}
	if err := s.r.PingContext(ctx); err != nil {
		return translate("ping", err)
	}
	var one int
	if err := s.r.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return translate("ping", err)
	}
	return nil
}

// Close closes the database. The Store must not be used afterwards.
func (s *Store) Close() error {
	var err error
	if s.Store != nil {
		err = s.Store.Close()
	}
	return errors.Join(err, s.r.Close(), s.w.Close())
}

// writeUnsynced is write for what may be lost in a power cut, the audit
// log: its commit does not wait for the disk (synchronous=NORMAL, which
// in WAL mode still never corrupts the file, and loses nothing when only
// the process dies). Every other write commits at synchronous=FULL, the
// default, and its fsync covers everything written before it. The one
// write connection is held from the first pragma to the last, so no
// other write commits relaxed.
func (s *Store) writeUnsynced(ctx context.Context, op string, fn func(tx *sql.Tx) ([]store.Change, error)) error {
	c, err := s.w.Conn(ctx)
	if err != nil {
		return translate(op, err)
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, "PRAGMA synchronous = NORMAL"); err != nil {
		return translate(op, err)
	}
	werr := s.WriteOn(ctx, op, c, fn)
	if _, err := c.ExecContext(context.WithoutCancel(ctx), "PRAGMA synchronous = FULL"); err != nil {
		// A connection left relaxed is never used again.
		_ = c.Raw(func(any) error { return driver.ErrBadConn })
		return errors.Join(werr, translate(op, err))
	}
	return werr
}

// translate turns a driver error into the store's sentinels (see
// sqlstore.Translate): a foreign key violation (the box named does not
// exist) into store.ErrNotFound, a unique violation into
// store.ErrExists, a locked, unreadable or full database into
// store.ErrUnavailable, and what the database refuses for what was
// written (another constraint, a value of the wrong type, such as a sum
// past an INTEGER column's range, which SQLite makes a REAL; a row too
// big) into store.ErrRejected.
func translate(op string, err error) error {
	return sqlstore.Translate(op, err, func(err error) error {
		var se *sqlite.Error
		if !errors.As(err, &se) {
			return nil
		}
		switch code := se.Code(); {
		case code == sqlite3.SQLITE_CONSTRAINT_UNIQUE || code == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return store.ErrExists
		case code == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
			return store.ErrNotFound
		case code&0xff == sqlite3.SQLITE_BUSY, code&0xff == sqlite3.SQLITE_LOCKED,
			code&0xff == sqlite3.SQLITE_IOERR, code&0xff == sqlite3.SQLITE_CANTOPEN,
			code&0xff == sqlite3.SQLITE_FULL, code&0xff == sqlite3.SQLITE_READONLY:
			return store.ErrUnavailable
		case code&0xff == sqlite3.SQLITE_CONSTRAINT, // NOT NULL, CHECK, a STRICT column's type
			code&0xff == sqlite3.SQLITE_MISMATCH, code&0xff == sqlite3.SQLITE_TOOBIG:
			return store.ErrRejected
		}
		return nil
	})
}
