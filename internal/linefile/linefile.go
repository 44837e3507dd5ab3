// Package linefile reads a file of lines — the outbox's spool, dead
// letters and journals, the audit sink's backlog — a line at a time,
// holding at most a bound's bytes of any line, so that a file of
// gigabytes, or one holding a line that long with no newline (a file a
// crash extended with NUL bytes, or one damaged or put there), is never
// held whole.
package linefile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// readBuf is the size of Each's read buffer: a line longer than it is
// gathered piece by piece, up to Each's bound.
const readBuf = 64 << 10

// Each calls fn with each line of r, from where r is, with its newline
// (the last line may have none: a caller that wants only whole lines
// looks for it) and its offset from there; the line is valid until fn
// returns. At most max bytes of a line, its newline counted, are held: a
// longer line is passed to long, with its offset and length, and never
// to fn. It stops at fn's or long's first error, and returns it, or r's
// ("read: …").
func Each(r io.Reader, max int, fn func(off int64, line []byte) error, long func(off, n int64) error) error {
	br := bufio.NewReaderSize(r, readBuf)
	var off int64
	var gathered []byte
	for {
		var line []byte
		var n int64
		over := false
		gathered = gathered[:0]
		for {
			piece, err := br.ReadSlice('\n')
			n += int64(len(piece))
			switch {
			case over:
			case n > int64(max):
				over, gathered = true, gathered[:0]
			case errors.Is(err, bufio.ErrBufferFull) || len(gathered) > 0:
				gathered = append(gathered, piece...)
			default:
				line = piece // whole in the buffer: no copy
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return fmt.Errorf("read: %w", err)
			}
			if len(gathered) > 0 {
				line = gathered
			}
			var ferr error
			switch {
			case over:
				ferr = long(off, n)
			case len(line) > 0:
				ferr = fn(off, line)
			}
			if ferr != nil {
				return ferr
			}
			off += n
			if cap(gathered) > 16*readBuf {
				gathered = nil // a long line's buffer is let go
			}
			if err != nil { // io.EOF
				return nil
			}
			break
		}
	}
}
