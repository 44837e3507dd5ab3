// A Spool keeps, in the data directory, the spend and audit
// batches the store could not take, until it takes them.
//
// The spool is an append-only file of JSON lines, one batch a line, each
// synced to the disk before Append returns, and bounded in size: a batch
// that would pass the bound is refused (ErrFull), and so is one the disk
// will not take. Each batch names the store it belongs to (its
// identity), and carries a random key; the store records the
// keys of the batches it has applied in the same transaction as the
// batch (store.Spooled), so replaying a batch twice — after a crash
// mid-replay, say — applies it once.
//
// Replay moves the spool aside (spool.replay) and applies what it holds
// in order; new batches go to a fresh spool meanwhile. The file set
// aside is removed once every batch in it is applied, and replayed
// again, first, at the next Replay otherwise.

package outbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/intentius/boxbroker/internal/defaults"
	"github.com/intentius/boxbroker/internal/filelock"
	"github.com/intentius/boxbroker/internal/metrics"
	"github.com/intentius/boxbroker/internal/store"
)

// File names in the data directory.
const (
	SpoolFile       = "spool.jsonl"
	SpoolReplayFile = "spool.replay.jsonl"
	// UnreadFile keeps, as they were, the lines the spool's replay and
	// the journal's recovery could not read as a batch or a record: a
	// line a crash cut off (its append never returned), or one damaged
	// on the disk. Nothing reads it but an operator.
	UnreadFile = "spool.unread"
	// SpoolReplayLock is locked (flock) by the replica replaying the
	// spool, so that replicas sharing the directory replay one at a time.
	SpoolReplayLock = "spool.replay.lock"
)

// DefaultSpoolMax bounds the spool's size, in bytes: at a few hundred bytes
// an audit entry, some hundred thousand calls' records.
const DefaultSpoolMax = 64 << 20

// ErrFull is what Append returns when the batch would pass the bound.
var ErrFull = errors.New("spool full")

// Batch is what the store could not take at once: settlements and audit
// entries, to be applied together under Key.
type Batch struct {
	Key string `json:"key"`
	// Store is the identity of the store the batch belongs to ("":
	// unnamed, as a spool written before stores had one).
	Store  string             `json:"store,omitempty"`
	Settle []store.Settlement `json:"settle,omitempty"`
	Audit  []store.AuditEntry `json:"audit,omitempty"`
}

// apply applies b to st under its key, unless b names another store
// than ours ("": any): then it returns a *ForeignError naming the file
// name in the data directory dir, applying nothing. The audit entries it
// applies (none when st had applied b's key already) are counted
// written in m.
func (b *Batch) apply(ctx context.Context, st store.Spooled, m *metrics.Metrics, dir, name, ours string) error {
	if b.Store != "" && ours != "" && b.Store != ours {
		return &ForeignError{Dir: dir, Theirs: b.Store, Ours: ours, Files: []string{filepath.Join(dir, name)}}
	}
	return b.applyTo(ctx, st, m)
}

// applyTo applies b to st under its key, and counts the audit entries
// it applied (none when st had applied the key already) written in m.
func (b *Batch) applyTo(ctx context.Context, st store.Spooled, m *metrics.Metrics) error {
	applied, err := st.ApplySpooled(ctx, b.Key, b.Settle, b.Audit)
	if err == nil && applied && len(b.Audit) > 0 {
		m.AuditWritten(len(b.Audit))
	}
	return err
}

// Spool is one replica's spool. Its methods are safe for concurrent use.
type Spool struct {
	dir   string
	max   int64
	store string // the identity of the store batches are appended for
	log   *slog.Logger

	mu   sync.Mutex // guards f and size; held while appending
	f    *os.File
	size int64 // bytes in SpoolFile and SpoolReplayFile

	replay sync.Mutex // one Replay at a time

	dead *deadFile // the batches the store refused for good (dead.go)

	// metrics counts the audit entries the store took from a batch
	// refused as a whole and applied record by record (refusedBatch).
	metrics *metrics.Metrics
}

// OpenSpool opens the spool in dir (made, mode 0700, if missing), bounded to
// max bytes (DefaultSpoolMax when zero or less), for the batches of the
// store whose identity is id ("": unnamed). The spool's files in dir
// that others may read are narrowed to FileMode (OwnerOnly).
func OpenSpool(dir string, max int64, id string, log *slog.Logger) (*Spool, error) {
	defaults.Positive(&max, DefaultSpoolMax)
	defaults.Logger(&log)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	// The files a replay or a dead letter would open later are narrowed
	// now (OwnerOnly): until then others could read them.
	for _, name := range []string{SpoolFile, SpoolReplayFile, DeadFile, UnreadFile, SpoolReplayLock} {
		if err := OwnerOnlyAt(filepath.Join(dir, name)); err != nil {
			return nil, fmt.Errorf("spool: %w", err)
		}
	}
	s := &Spool{dir: dir, max: max, store: id, log: log, dead: newDeadFile(dir, log)}
	for _, name := range []string{SpoolFile, SpoolReplayFile} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err == nil {
			s.size += fi.Size()
		}
	}
	return s, nil
}

// NewKey is a fresh batch key: 16 random bytes, hex.
func NewKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Append writes b (given a key when it has none, and the spool's store
// when it names none) as one line and syncs it to the disk. It returns ErrFull when the spool would pass its bound,
// or the disk's error; either way nothing of b is kept.
func (s *Spool) Append(b Batch) error {
	s.name(&b)
	line, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("spool: encode: %w", err)
	}
	line = append(line, '\n')
	if len(line) > MaxLine {
		// A replay reads no longer line (eachLine).
		return fmt.Errorf("spool: %w: a batch of %d bytes is longer than a line may be (%d)", ErrFull, len(line), MaxLine)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.size+int64(len(line)) > s.max {
		return fmt.Errorf("spool: %w: %d bytes of %d", ErrFull, s.size, s.max)
	}
	if s.f, err = lockAt(s.f, filepath.Join(s.dir, SpoolFile), "the spool file keeps being set aside"); err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	defer filelock.Unlock(s.f)
	if _, err := AppendSynced(s.f, line); err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	s.size += int64(len(line))
	return nil
}

// name gives b a key when it has none, and the spool's store when it
// names none.
func (s *Spool) name(b *Batch) {
	if b.Key == "" {
		b.Key = NewKey()
	}
	if b.Store == "" {
		b.Store = s.store
	}
}

// lockAt locks f (the log file at p, opened with OpenLog, when nil) and
// returns it once it is the file at p: a file renamed away (set aside by
// a replay) or replaced (by a rewrite) meanwhile, here or in another
// process sharing the data directory, is closed and p opened again, up
// to ten times; then it returns the error moved. f is closed when it
// cannot be locked.
func lockAt(f *os.File, p, moved string) (*os.File, error) {
	for range 10 {
		if f == nil {
			var err error
			if f, err = OpenLog(p); err != nil {
				return nil, err
			}
		}
		if err := filelock.Lock(f); err != nil {
			f.Close()
			return nil, err
		}
		at, err1 := f.Stat()
		named, err2 := os.Stat(p)
		if err1 == nil && err2 == nil && os.SameFile(at, named) {
			return f, nil
		}
		filelock.Unlock(f)
		f.Close()
		f = nil
	}
	return nil, errors.New(moved)
}

// Size is how many bytes the spool holds.
func (s *Spool) Size() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.size
}

// Replay applies every spooled batch, oldest first, with apply, and
// returns how many it applied: what an earlier Replay left set aside,
// then what the spool held when Replay began. A batch apply
// refuses for good (Refused) is set aside as a dead letter (SetDead), and
// the replay goes on; it stops at the first batch apply fails otherwise,
// keeping that batch and every later one for the next Replay. One Replay runs at a time; a second waits for the first.
func (s *Spool) Replay(ctx context.Context, apply func(context.Context, Batch) error) (int, error) {
	s.replay.Lock()
	defer s.replay.Unlock()
	total := 0
	for range 2 {
		n, more, err := s.replayOnce(ctx, apply)
		total += n
		if err != nil || !more {
			return total, err
		}
	}
	return total, nil
}

// replayOnce replays the file set aside, setting the spool aside first
// when none is; more is false when there was nothing to replay, or when
// another replica sharing the directory is replaying.
//
// It runs holding the lock of SpoolReplayLock, so that replicas sharing
// the directory replay one at a time: two replaying at once, the one
// finishing later once removed the next file the other had set aside,
// and the batches it held were lost.
func (s *Spool) replayOnce(ctx context.Context, apply func(context.Context, Batch) error) (n int, more bool, err error) {
	lk, err := OpenLog(filepath.Join(s.dir, SpoolReplayLock))
	if err != nil {
		return 0, false, fmt.Errorf("spool: %w", err)
	}
	defer lk.Close()
	ok, err := filelock.TryLock(lk)
	if err != nil {
		// Not a replay left to another replica: one that could never
		// take the lock would never replay, without a word.
		return 0, false, fmt.Errorf("spool: lock %s: %w", SpoolReplayLock, err)
	}
	if !ok {
		return 0, false, nil // another replica is replaying
	}
	defer filelock.Unlock(lk)
	rp := filepath.Join(s.dir, SpoolReplayFile)
	if _, err := os.Stat(rp); errors.Is(err, os.ErrNotExist) {
		// Set the spool aside, holding its lock, so that no append (of
		// this process or another sharing the directory) is under way;
		// appends then go to a fresh one.
		s.mu.Lock()
		if s.f != nil {
			_ = s.f.Close()
			s.f = nil
		}
		err := setAside(filepath.Join(s.dir, SpoolFile), rp)
		s.mu.Unlock()
		if errors.Is(err, os.ErrNotExist) {
			return 0, false, nil // nothing spooled
		}
		if err != nil {
			return 0, false, fmt.Errorf("spool: %w", err)
		}
	}
	f, err := filelock.Open(rp, os.O_RDONLY, 0)
	if err != nil {
		return 0, false, fmt.Errorf("spool: %w", err)
	}
	defer f.Close()
	// Read a line at a time (eachLine), each at most MaxLine bytes: a
	// spool file of gigabytes, damaged or put there, is never held whole.
	unread := newUnreadLines(s.dir, "spool", s.log)
	err = eachLine(f, func(_ int64, line []byte) error {
		var b Batch
		if jerr := json.Unmarshal(line, &b); jerr != nil || b.Key == "" {
			// A line cut off by a crash mid-append (its Append never
			// returned, so no one counted on it), or damaged: set
			// aside, as it is, for an operator to read (together with
			// the others, before the file is removed).
			if uerr := unread.add(line); uerr != nil {
				return uerr
			}
		} else if aerr := apply(ctx, b); errors.Is(aerr, errSetAside) {
			// apply set it aside itself: not applied, and not kept.
		} else if aerr != nil {
			if !Refused(aerr) {
				return aerr
			}
			// Refused for what it holds, it would be at every replay:
			// set aside, and the batches behind it go on.
			if derr := s.SetDead(b, aerr); derr != nil {
				return errors.Join(aerr, derr)
			}
		} else {
			n++
		}
		return nil
	}, func(off, size int64) error {
		longLine(s.log, "spool", rp, off, size)
		return nil
	})
	err = errors.Join(err, unread.flush())
	if err != nil {
		return n, false, fmt.Errorf("spool: replay: %w", err)
	}
	if err := os.Remove(rp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return n, false, fmt.Errorf("spool: %w", err)
	}
	s.mu.Lock()
	s.size = fileSize(filepath.Join(s.dir, SpoolFile)) + fileSize(rp)
	s.mu.Unlock()
	return n, true, nil
}

// fileSize is the size of the file at p; 0 when there is none.
func fileSize(p string) int64 {
	if fi, err := os.Stat(p); err == nil {
		return fi.Size()
	}
	return 0
}

// unreadFlushAt is how many bytes of lines an unreadLines holds before it
// sets them aside: the bound of the file they go to.
var unreadFlushAt int64 = DeadMax

// appendUnread appends to the UnreadFile (AppendSynced), unless a test
// counts its calls.
var appendUnread = AppendSynced

// unreadLines gathers the lines that one reading of a file (a replay, a
// recovery, a rewrite of the dead letters) could not read, and sets them
// aside in dir's UnreadFile together: as they are (each ended with a
// newline), once (a line the same as one there already, or as one
// gathered before, is not set aside again: the same file replayed or
// recovered again), synced, each logged. The file is read and appended
// to once a flush, and a flush comes at most every unreadFlushAt bytes
// gathered (and at the reading's end), so a file of millions of damaged
// lines is read in a time linear in its size; at most unreadFlushAt
// bytes of lines are held, and the file's lines while one is flushed
// (at most DeadMax bytes). Past DeadMax bytes the file takes no more: a
// line is logged as lost, at ERROR.
type unreadLines struct {
	dir, what string
	log       *slog.Logger
	lines     [][]byte
	seen      map[string]struct{} // the lines gathered, since the last flush
	size      int
}

// newUnreadLines is an unreadLines of dir, for what, logging to log.
func newUnreadLines(dir, what string, log *slog.Logger) *unreadLines {
	return &unreadLines{dir: dir, what: what, log: log, seen: map[string]struct{}{}}
}

// add gathers line (copied: it may be a reader's buffer, eachLine). It
// returns flush's error when the lines gathered reach unreadFlushAt.
func (u *unreadLines) add(line []byte) error {
	line = append(slices.Clip(bytes.TrimSuffix(line, []byte{'\n'})), '\n')
	if _, dup := u.seen[string(line)]; dup {
		return nil
	}
	u.seen[string(line)] = struct{}{}
	u.lines = append(u.lines, line)
	u.size += len(line)
	if int64(u.size) >= unreadFlushAt {
		return u.flush()
	}
	return nil
}

// flush sets the lines gathered aside: one read of the file, one synced
// append. It returns an error when the file cannot be written (the lines
// are kept, for the next flush).
func (u *unreadLines) flush() error {
	if len(u.lines) == 0 {
		return nil
	}
	p := filepath.Join(u.dir, UnreadFile)
	f, err := lockAt(nil, p, "the file keeps being replaced")
	if err != nil {
		return err
	}
	defer f.Close()
	defer filelock.Unlock(f)
	kept, err := io.ReadAll(io.NewSectionReader(f, 0, DeadMax))
	if err != nil {
		return err
	}
	there := map[string]struct{}{}
	for l := range bytes.Lines(kept) {
		if l[len(l)-1] == '\n' {
			there[string(l)] = struct{}{}
		}
	}
	size := int64(len(kept))
	var buf []byte
	var added []int
	for _, line := range u.lines {
		_, dup := there[string(line)]
		switch {
		case dup:
		case size+int64(len(buf)+len(line)) > DeadMax:
			u.log.Error(u.what+": a line that is no record is lost: the file of lines set aside is full", "bytes", len(line), "file", p)
		default:
			buf = append(buf, line...)
			added = append(added, len(line))
		}
	}
	if len(buf) > 0 {
		if _, err := appendUnread(f, buf); err != nil {
			return fmt.Errorf("a line that is no record cannot be set aside: %w", err)
		}
	}
	for _, n := range added {
		u.log.Warn(u.what+": a line that is no record is set aside", "bytes", n, "file", p)
	}
	u.lines, u.size, u.seen = nil, 0, map[string]struct{}{}
	return nil
}

// setAside renames the spool file p to rp while holding its lock.
func setAside(p, rp string) error {
	f, err := filelock.Open(p, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := filelock.Lock(f); err != nil {
		return err
	}
	defer filelock.Unlock(f)
	return os.Rename(p, rp)
}

// errSetAside is what a Replay's apply returns for a batch it set aside
// itself (refused for good): the replay goes on, counting it not applied.
var errSetAside = errors.New("set aside as a dead letter")

// SetDead sets b, which the store refused for good (Refused(reason)),
// aside in the dead-letter file with its reason, synced, and logs it. A
// batch set aside already is not set aside twice.
func (s *Spool) SetDead(b Batch, reason error) error {
	s.name(&b)
	if err := s.dead.put(b, reason, time.Now()); err != nil {
		return err
	}
	s.log.Error("spool: a batch the store refuses is set aside as a dead letter; see `boxbroker spool dead list`",
		"id", b.Key, "settlements", len(b.Settle), "audit_entries", len(b.Audit), "err", reason)
	return nil
}

// DeadCount is how many batches the dead-letter file holds, or
// DeadUnreadable when it is there but cannot be read.
func (s *Spool) DeadCount() int { return s.dead.Count() }

// Close closes the spool's file.
func (s *Spool) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}
