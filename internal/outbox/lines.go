package outbox

import (
	"io"
	"log/slog"

	"github.com/intentius/boxbroker/internal/linefile"
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

// eachLine is linefile.Each of r, each line bounded by lineMax.
func eachLine(r io.Reader, fn func(off int64, line []byte) error, long func(off, n int64) error) error {
	return linefile.Each(r, lineMax, fn, long)
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
