package auditsink

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/intentius/boxbroker/internal/filelock"
	"github.com/intentius/boxbroker/internal/linefile"
	"github.com/intentius/boxbroker/internal/outbox"
)

// The backlog's files: the rows waiting, a generation's file each, and
// the state that says how far the sink got.

func (s *Sink) backlogPath(gen uint64) string {
	return filepath.Join(s.dir, "backlog-"+strconv.FormatUint(gen, 10)+".jsonl")
}

// maxState bounds the state file read: a few numbers and an id.
const maxState = 4096

// readState reads the state file at p, judged as opened
// (filelock.Open: a link, a FIFO or a device refused), narrowed to
// outbox.FileMode where others may read it (outbox.OwnerOnly), and of at
// most maxState bytes. An error opening it is the open's.
func readState(p string) ([]byte, error) {
	f, err := filelock.Open(p, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := outbox.OwnerOnly(f); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxState+1))
	if err == nil && len(b) > maxState {
		err = fmt.Errorf("%s is larger than %d bytes: not the sink's state", p, maxState)
	}
	return b, err
}

// load reads the state and the rows of the backlog not yet acknowledged.
// The state and the backlog are narrowed to outbox.FileMode where others
// may read them (outbox.OwnerOnly).
func (s *Sink) load() (err error) {
	b, err := readState(filepath.Join(s.dir, "state.json"))
	switch {
	case errors.Is(err, os.ErrNotExist):
		var id [8]byte
		if _, err := rand.Read(id[:]); err != nil {
			return fmt.Errorf("auditsink: replica id: %w", err)
		}
		s.st = state{Replica: hex.EncodeToString(id[:]), Gen: 1}
		if err := s.writeStateLocked(); err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("auditsink: %w", err)
	default:
		if err := json.Unmarshal(b, &s.st); err != nil || s.st.Replica == "" {
			return fmt.Errorf("auditsink: %s is not the sink's state: %v", filepath.Join(s.dir, "state.json"), err)
		}
	}
	// Files of other generations are what a compaction left behind.
	old, _ := filepath.Glob(filepath.Join(s.dir, "backlog-*.jsonl"))
	for _, p := range old {
		if p != s.backlogPath(s.st.Gen) {
			_ = os.Remove(p)
		}
	}
	f, err := outbox.OpenLog(s.backlogPath(s.st.Gen))
	if err != nil {
		return fmt.Errorf("auditsink: %w", err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
		}
	}()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Errorf("auditsink: %w", err)
	}
	if s.st.Offset > size {
		// The backlog is shorter than the rows acknowledged from it:
		// made afresh, or cut by hand. Rows go on at its end.
		s.log.Warn("audit sink: the backlog file is shorter than its acknowledged rows; rows it held unsent may be lost",
			"file", s.backlogPath(s.st.Gen), "bytes", size, "acknowledged", s.st.Offset)
		s.st.Offset = size
	}
	if _, err := f.Seek(s.st.Offset, io.SeekStart); err != nil {
		return fmt.Errorf("auditsink: %w", err)
	}
	// A line the file ends in with no newline was cut short (the process
	// stopped mid-write): never synced, so never counted as kept, it is
	// cut off below, however long.
	off := s.st.Offset
	cutShort := func(line []byte) bool { return line[len(line)-1] != '\n' }
	err = linefile.Each(f, maxLine, func(rel int64, line []byte) error {
		if cutShort(line) {
			return nil
		}
		off = s.st.Offset + rel + int64(len(line))
		var h struct {
			Seq uint64 `json:"seq"`
		}
		if json.Unmarshal(line, &h) != nil || h.Seq == 0 {
			// Damaged on the disk: its row is dropped from the stream
			// and counted (the store keeps it), and the rows after it
			// are read, rather than keeping serve from starting.
			s.log.Warn("audit sink: a line of the backlog that is no row is dropped unsent",
				"file", s.backlogPath(s.st.Gen), "offset", off-int64(len(line)), "bytes", len(line))
			s.dropped.Inc()
			return nil
		}
		s.queue = append(s.queue, item{line: bytes.Clone(line), seq: h.Seq, end: off})
		s.st.Seq = max(s.st.Seq, h.Seq)
		if len(s.queue) >= 2*s.cfg.MaxBacklog {
			// Held at once: at most twice the bound, however long the
			// file; the oldest rows are dropped as a full backlog's are.
			s.dropLocked(len(s.queue) - s.cfg.MaxBacklog)
		}
		return nil
	}, func(rel, n int64) error {
		// Longer than any row Append keeps: damaged on the disk, or put
		// there. Passed over, never held, and dropped from the stream as
		// a damaged line is, unless the file ends in it with no newline.
		if end := s.st.Offset + rel + n; end == size {
			last := []byte{0}
			if _, err := f.ReadAt(last, end-1); err != nil {
				return err
			}
			if cutShort(last) {
				return nil
			}
		}
		s.log.Warn("audit sink: a line of the backlog longer than any row is dropped unsent",
			"file", s.backlogPath(s.st.Gen), "offset", s.st.Offset+rel, "bytes", n)
		s.dropped.Inc()
		off = s.st.Offset + rel + n
		return nil
	})
	if err != nil {
		return fmt.Errorf("auditsink: %w", err)
	}
	if off < size {
		if err := f.Truncate(off); err != nil {
			return fmt.Errorf("auditsink: %w", err)
		}
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return fmt.Errorf("auditsink: %w", err)
	}
	s.f, s.size = f, off
	if n := len(s.queue) - s.cfg.MaxBacklog; n > 0 {
		s.dropLocked(n)
	}
	return nil
}

// writeStateLocked writes s.st to state.json, whole or not at all.
func (s *Sink) writeStateLocked() error {
	b, err := json.Marshal(s.st)
	if err == nil {
		err = outbox.WriteFile(filepath.Join(s.dir, "state.json"), b)
	}
	if err != nil {
		return fmt.Errorf("auditsink: %w", err)
	}
	return nil
}

// compactDueLocked reports whether the backlog file is to be rewritten:
// more than 1 MiB of it, and more than half, is rows no longer waiting
// (acknowledged, or dropped from a full backlog).
func (s *Sink) compactDueLocked() bool {
	return s.st.Offset > 1<<20 && s.st.Offset > s.size/2
}

// compactLocked writes the rows still waiting to a new generation's
// file, then points the state at it.
func (s *Sink) compactLocked() error {
	gen := s.st.Gen + 1
	var buf bytes.Buffer
	ends := make([]int64, len(s.queue))
	for i := range s.queue {
		buf.Write(s.queue[i].line)
		ends[i] = int64(buf.Len())
	}
	p := s.backlogPath(gen)
	if err := outbox.WriteFile(p, buf.Bytes()); err != nil {
		return err
	}
	f, err := outbox.OpenLog(p)
	if err != nil {
		_ = os.Remove(p)
		return err
	}
	old := s.st
	s.st.Gen, s.st.Offset = gen, 0
	if err := s.writeStateLocked(); err != nil {
		// The state on disk may name the new generation all the same
		// (only its directory's sync failed): the old one is written
		// again, and the new file is left for the next load to remove
		// unless the state names it, so that neither state can name a
		// file that is gone.
		s.st = old
		_ = f.Close()
		_ = s.writeStateLocked()
		return err
	}
	_ = s.f.Close()
	_ = os.Remove(s.backlogPath(old.Gen))
	for i := range s.queue {
		s.queue[i].end = ends[i]
	}
	s.f, s.size = f, int64(buf.Len())
	return nil
}
