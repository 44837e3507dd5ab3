package outbox

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
)

// MaxLine bounds one line of the spool, the dead letters and a journal
// as they are read: no line the broker writes is longer. The spool and
// the dead letters are bounded whole by it (DefaultSpoolMax, DeadMax, and
// Spool.Append refuses a longer line whatever its bound), and a
// journal's lines (one call's records, a batch's key and numbers) are
// far shorter. A longer line is none of theirs (damaged on the disk, or
// put there): it is not held, but passed over, logged at ERROR as lost
// (longLine), and the lines after it are read.
const MaxLine = DefaultSpoolMax

// lineMax is MaxLine, unless a test lowers it.
var lineMax = MaxLine

// readBuf is the size of eachLine's read buffer: a line longer than it
// is gathered piece by piece, up to lineMax.
const readBuf = 64 << 10

// eachLine calls fn with each line of r, from where r is, with its
// newline (the last line may have none) and its offset from there; the
// line is valid until fn returns. At most lineMax bytes of a line are
// held: a longer line is passed to long, with its offset and length, and
// never to fn. It stops at fn's or long's first error, and returns it, or
// r's ("read: …").
func eachLine(r io.Reader, fn func(off int64, line []byte) error, long func(off, n int64) error) error {
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
			case n > int64(lineMax):
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

// longLine logs, at ERROR, the line of n bytes at offset off of file,
// which what ("spool", "journal", "dead letters") read, as lost: longer
// than any line the broker writes, it is none of its, and too long to
// be set aside in UnreadFile (which holds at most DeadMax bytes, no more
// than MaxLine).
func longLine(log *slog.Logger, what, file string, off, n int64) {
	log.Error(what+": a line that is no record is lost: longer than any line written, it is passed over unread",
		"file", file, "offset", off, "bytes", n, "max_line", lineMax)
}
