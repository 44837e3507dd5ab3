package server

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// LogFlushEvery is how long a log line may wait in the buffer before it is
// written out. A line at WARN or above is written out at once, with
// whatever waits before it.
const LogFlushEvery = 100 * time.Millisecond

// logBuffer gathers log lines and writes them out in one write at most
// LogFlushEvery after the first, rather than one write per line: a busy
// broker logs a line per request.
type logBuffer struct {
	mu      sync.Mutex // guards bw and pending
	bw      *bufio.Writer
	pending bool // a flush is scheduled
}

func newLogBuffer(w io.Writer) *logBuffer {
	return &logBuffer{bw: bufio.NewWriterSize(w, 32<<10)}
}

// Write buffers p, one whole line from the handler.
func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.bw.Write(p)
	if !b.pending && b.bw.Buffered() > 0 {
		b.pending = true
		time.AfterFunc(LogFlushEvery, func() { _ = b.Flush() })
	}
	return n, err
}

// Flush writes out what is buffered.
func (b *logBuffer) Flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pending = false
	return b.bw.Flush()
}

// flushingHandler writes out the buffer after every record at or above
// WARN, so that a warning or an error is never held back.
type flushingHandler struct {
	slog.Handler
	buf *logBuffer
}

func (h flushingHandler) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Level >= slog.LevelWarn {
		_ = h.buf.Flush()
	}
	return err
}

func (h flushingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return flushingHandler{Handler: h.Handler.WithAttrs(attrs), buf: h.buf}
}

func (h flushingHandler) WithGroup(name string) slog.Handler {
	return flushingHandler{Handler: h.Handler.WithGroup(name), buf: h.buf}
}
