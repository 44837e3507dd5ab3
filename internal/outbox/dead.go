// Dead letters: the batches the store will never take.
//
// A batch the store refuses for what it holds (store.ErrRejected: a
// constraint, a number past its column's range, a value of the wrong
// type), or answers ErrNotFound or ErrExists for, would be refused at
// every replay; kept at the head of the spool it would hold every batch
// behind it for ever. It is set aside instead, with the store's reason,
// in the data directory's dead-letter file (spool.dead.jsonl, one JSON
// line a batch, synced), and the replay goes on with the batches behind
// it. An operator lists them, retries one (once the store is fixed to
// take it) or drops one: `boxbroker spool dead list|retry ID|drop ID`,
// or the admin API's /api/spool/dead.
//
// The file is locked (flock) while appended to or rewritten; a rewrite
// writes a new file and renames it over the old, so a crash keeps one or
// the other whole.

package outbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/intentius/boxbroker/internal/defaults"
	"github.com/intentius/boxbroker/internal/filelock"
	"github.com/intentius/boxbroker/internal/metrics"
	"github.com/intentius/boxbroker/internal/store"
)

// DeadFile is the dead-letter file's name in the data directory.
const DeadFile = "spool.dead.jsonl"

// DeadMax bounds the dead-letter file's size, in bytes: a batch that
// would pass it is not set aside (SetDead returns ErrFull), and the
// replay stops at it, keeping it in the spool, as it does for an outage.
const DeadMax = DefaultSpoolMax

// ErrNoDead is what DropDead and RetryDead return when no dead letter has
// the ID given.
var ErrNoDead = errors.New("no dead letter with that ID")

// Dead is one batch the store refused for good, set aside.
type Dead struct {
	// ID is the batch's key: the store applies it once under it.
	ID string `json:"id"`
	// At is when it was set aside, Reason the store's refusal (its
	// driver's message, which names tables and columns, never values).
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
	Batch  Batch     `json:"batch"`
}

// Refused reports whether err is the store's answer that it will never
// take a batch: store.ErrRejected, ErrNotFound or ErrExists, and not an
// outage (store.ErrUnavailable).
func Refused(err error) bool {
	if err == nil || errors.Is(err, store.ErrUnavailable) {
		return false
	}
	return errors.Is(err, store.ErrRejected) || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrExists)
}

// deadFile is the dead letters of one data directory: its count, read
// again whenever the file changes (another process, the CLI, may change
// it).
type deadFile struct {
	path string
	max  int64 // DeadMax, unless a test sets it
	log  *slog.Logger

	mu    sync.Mutex // guards what follows
	stamp deadStamp  // the file as last counted
	count int
}

// deadStamp is what says the file changed.
type deadStamp struct {
	size int64
	mod  time.Time
	ok   bool
}

// newDeadFile is dir's dead letters, logging to log (slog.Default() when
// nil).
func newDeadFile(dir string, log *slog.Logger) *deadFile {
	defaults.Logger(&log)
	return &deadFile{path: filepath.Join(dir, DeadFile), max: DeadMax, log: log}
}

// DeadUnreadable is what DeadCount returns when the dead-letter file is
// there but cannot be read (past DeadMax, or the disk refuses): it may
// hold any number of dead letters, and `spool dead list` names why.
const DeadUnreadable = -1

// Count is how many dead letters the file holds: 0 when there is none,
// DeadUnreadable (logged at ERROR, once a change of the file) when it is
// there but cannot be read.
func (d *deadFile) Count() int {
	fi, err := os.Stat(d.path)
	st := deadStamp{}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return DeadUnreadable
	}
	if err == nil {
		st = deadStamp{size: fi.Size(), mod: fi.ModTime(), ok: true}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if st == d.stamp {
		return d.count
	}
	n := 0
	if st.ok {
		list, err := readDead(d.path)
		n = len(list)
		if err != nil {
			n = DeadUnreadable
			d.log.Error("dead letters: the file cannot be read; its dead letters are not counted", "file", d.path, "err", err)
		}
	}
	d.stamp, d.count = st, n
	return n
}

// put appends b, refused for reason, unless a dead letter with its key is
// there already (a replay cut short sets the same batch aside again).
func (d *deadFile) put(b Batch, reason error, at time.Time) error {
	line, err := json.Marshal(Dead{ID: b.Key, At: at.UTC(), Reason: reason.Error(), Batch: b})
	if err != nil {
		return fmt.Errorf("dead letters: encode: %w", err)
	}
	return d.locked(func(f *os.File) error {
		list, _, err := readDeadLines(f)
		if err != nil {
			return fmt.Errorf("dead letters: %w", err)
		}
		for _, x := range list {
			if x.ID == b.Key {
				return nil
			}
		}
		end, err := f.Seek(0, io.SeekEnd)
		if err != nil {
			return fmt.Errorf("dead letters: %w", err)
		}
		if end+int64(len(line))+1 > d.max {
			return fmt.Errorf("dead letters: %w: %d bytes of %d", ErrFull, end, d.max)
		}
		if _, err := AppendSynced(f, append(line, '\n')); err != nil {
			return fmt.Errorf("dead letters: %w", err)
		}
		return nil
	})
}

// take removes the dead letter id (or, when it is unique, the one whose
// ID begins with it) when keep returns nil for it, and returns it; keep's
// error is returned as it is, the letter kept.
func (d *deadFile) take(id string, keep func(Dead) error) (Dead, error) {
	var got Dead
	err := d.locked(func(f *os.File) error {
		list, unread, err := readDeadLines(f)
		if err != nil {
			return fmt.Errorf("dead letters: %w", err)
		}
		i, err := findDead(list, id)
		if err != nil {
			return err
		}
		got = list[i]
		if err := keep(got); err != nil {
			return err
		}
		// The rewrite keeps only dead letters: a line that is none is
		// set aside first, as it is.
		lines := newUnreadLines(filepath.Dir(d.path), "dead letters", d.log)
		for _, line := range unread {
			if err := lines.add(line); err != nil {
				return fmt.Errorf("dead letters: %w", err)
			}
		}
		if err := lines.flush(); err != nil {
			return fmt.Errorf("dead letters: %w", err)
		}
		rest := append(list[:i:i], list[i+1:]...)
		if err := rewriteDead(d.path, rest); err != nil {
			return fmt.Errorf("dead letters: %w", err)
		}
		return nil
	})
	return got, err
}

// findDead is the index of id in list: an exact ID, or a prefix of one
// ID only.
func findDead(list []Dead, id string) (int, error) {
	at := -1
	for i, x := range list {
		if x.ID == id {
			return i, nil
		}
		if id != "" && strings.HasPrefix(x.ID, id) {
			if at >= 0 {
				return 0, fmt.Errorf("%w: %q begins more than one ID; give more of it", ErrNoDead, id)
			}
			at = i
		}
	}
	if at < 0 {
		return 0, fmt.Errorf("%w: %q", ErrNoDead, id)
	}
	return at, nil
}

// locked runs fn with the dead-letter file open and locked: the file at
// the path, and not one a rewrite replaced meanwhile (lockAt).
func (d *deadFile) locked(fn func(*os.File) error) error {
	f, err := lockAt(nil, d.path, "the file keeps being replaced")
	if err != nil {
		return fmt.Errorf("dead letters: %w", err)
	}
	defer f.Close()
	defer filelock.Unlock(f)
	return fn(f)
}

// rewriteDead writes list as the dead-letter file at p (WriteFile).
func rewriteDead(p string, list []Dead) error {
	var buf bytes.Buffer
	for _, x := range list {
		line, err := json.Marshal(x)
		if err != nil {
			return err
		}
		buf.Write(append(line, '\n'))
	}
	return WriteFile(p, buf.Bytes())
}

// readDead reads the dead letters at p; none when there is no file.
func readDead(p string) ([]Dead, error) {
	f, err := filelock.Open(p, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dead letters: %w", err)
	}
	defer f.Close()
	list, _, err := readDeadLines(f)
	return list, err
}

// readDeadLines reads every dead letter in f from its start, and returns
// too the lines that are none (cut off by a crash, or damaged), as they
// are.
func readDeadLines(f *os.File) (list []Dead, unread [][]byte, err error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, nil, err
	}
	// Read a line at a time (eachLine), each at most MaxLine bytes, and
	// at most DeadMax bytes in all: the file is bounded by it, so a
	// larger one (damaged, or put there) is refused, never held whole.
	if fi, err := f.Stat(); err != nil {
		return nil, nil, err
	} else if fi.Size() > DeadMax {
		return nil, nil, fmt.Errorf("%s holds %d bytes, more than dead letters ever do (%d): move it aside to read it", f.Name(), fi.Size(), DeadMax)
	}
	err = eachLine(io.LimitReader(f, DeadMax), func(_ int64, line []byte) error {
		var x Dead
		switch {
		case len(bytes.TrimSpace(line)) == 0:
		case json.Unmarshal(line, &x) == nil && x.ID != "":
			list = append(list, x)
		default:
			unread = append(unread, bytes.Clone(line))
		}
		return nil
	}, func(off, n int64) error {
		// Longer than the file's bound: cannot be, but for a lineMax a
		// test lowers.
		return fmt.Errorf("%s holds a line of %d bytes at offset %d, longer than any dead letter", f.Name(), n, off)
	})
	if err != nil {
		return nil, nil, err
	}
	return list, unread, nil
}

// ListDead returns the dead letters kept in the data directory dir,
// oldest first.
func ListDead(dir string) ([]Dead, error) { return readDead(filepath.Join(dir, DeadFile)) }

// DropDead removes the dead letter id (an ID, or a prefix of one ID only)
// from the data directory dir, and returns it: its records are given up.
// It returns an error wrapping ErrNoDead when there is none.
func DropDead(dir, id string) (Dead, error) {
	return newDeadFile(dir, nil).take(id, func(Dead) error { return nil })
}

// RetryDead applies the dead letter id (an ID, or a prefix of one ID
// only) of the data directory dir to st, under its key, and removes it
// once st took it (or had applied it already). It returns the store's
// error, keeping the letter, when st refuses it again; a *ForeignError
// for a batch of another store than identity ("": any); and an error
// wrapping ErrNoDead when there is none.
func RetryDead(ctx context.Context, dir string, st store.Spooled, identity, id string) (Dead, error) {
	return retryDead(ctx, dir, st, nil, identity, id)
}

// retryDead is RetryDead, counting the audit entries st applied written
// in m.
func retryDead(ctx context.Context, dir string, st store.Spooled, m *metrics.Metrics, identity, id string) (Dead, error) {
	return newDeadFile(dir, nil).take(id, func(x Dead) error {
		return x.Batch.apply(ctx, st, m, dir, DeadFile, identity)
	})
}

// keep keeps b, which st did not take (err): a batch st refused for good
// (Refused) goes to the dead letters (refusedBatch), any other to the
// spool, and so does one the dead letters cannot take (full, or the disk
// refuses): a replay then stops at it until they have room. It reports
// whether either took b, and returns err, joined with what the dead
// letters and the spool answered; nil when the dead letters took it.
func (s *Spool) keep(ctx context.Context, st store.Spooled, b Batch, err error) (bool, error) {
	if Refused(err) {
		derr := refusedBatch(ctx, st, s, b, err)
		if derr == nil {
			return true, nil
		}
		err = errors.Join(err, derr)
	}
	if serr := s.Append(b); serr != nil {
		return false, errors.Join(err, serr)
	}
	return true, err
}

// refusedBatch handles b, which st refused for good as a whole (reason): a
// batch of one record is set aside in sp as it is; a batch of several is
// applied record by record, each alone under a key made from b's key and
// its place (partKey), and only the records st refuses for good are set
// aside, each alone, so that one bad record does not set aside the rest.
// A replay of b, refused again as a whole, makes the same keys, so no
// record is applied twice. It returns the store's error when st does not
// answer meanwhile (what is not applied stays the caller's, in b), and
// SetDead's when sp takes no more.
func refusedBatch(ctx context.Context, st store.Spooled, sp *Spool, b Batch, reason error) error {
	if b.Key == "" {
		b.Key = NewKey()
	}
	if len(b.Settle)+len(b.Audit) <= 1 {
		return sp.SetDead(b, reason)
	}
	ctx = context.WithValue(ctx, partsKey{}, b.Key)
	one := func(part string, i int, rec Batch) error {
		rec.Key, rec.Store = partKey(b.Key, part, i), b.Store
		err := rec.applyTo(ctx, st, sp.metrics)
		if Refused(err) {
			return sp.SetDead(rec, err)
		}
		return err
	}
	for i, s := range b.Settle {
		if err := one("t", i, Batch{Settle: []store.Settlement{s}}); err != nil {
			return err
		}
	}
	for i, e := range b.Audit {
		if err := one("a", i, Batch{Audit: []store.AuditEntry{e}}); err != nil {
			return err
		}
	}
	return nil
}

// partsKey is the key under which refusedBatch's context names the batch
// whose records it applies one by one.
type partsKey struct{}

// PartOf reports whether ctx is that of a record applied alone because
// the store refused its batch as a whole, and names that batch's key:
// the record went through the store's wrappers once already, as part of
// that batch, under its key (an audit sink has its row), and is the same
// record again, not a new one.
func PartOf(ctx context.Context) (batch string, ok bool) {
	batch, ok = ctx.Value(partsKey{}).(string)
	return batch, ok
}

// partKey is the key of the record of the batch key at place i of its
// settlements (part "t") or audit entries ("a"): the same each time.
func partKey(key, part string, i int) string {
	return derivedKey("part", key, part, strconv.Itoa(i))
}
