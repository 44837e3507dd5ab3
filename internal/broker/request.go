package broker

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/proxy"
)

// wholeDecoded is the largest decoded body the broker holds whole, to
// forward it with its length declared (which a signing kind of egress
// secret needs, and many hosts want); a longer one goes on as it is
// decoded, of unknown length.
const wholeDecoded = 1 << 20

// decodeBody decodes r's gzip body, bounded by limit encoded and decoded,
// and puts it in r.Body with no Content-Encoding: whole, with its length,
// when it decodes to at most wholeDecoded bytes; streamed otherwise. A
// body that is not gzip is a 400, and one over limit a 413.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64) error {
	zr := proxy.Gunzip(r.Body, limit)
	held, err := io.ReadAll(io.LimitReader(zr, wholeDecoded+1))
	if err != nil {
		leaveBody(w, r)
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			tl := capability.TooLarge(limit)
			tl.Message = strings.TrimSuffix(tl.Message, ".") + ", encoded or decoded."
			return tl
		}
		return capability.Refuse(capability.ReasonEncoding, "The request body could not be read as gzip, which its Content-Encoding names.").At(http.StatusBadRequest).WithErr(err)
	}
	// The length the box declared was the encoded body's.
	r.Header.Del("Content-Encoding")
	r.Header.Del("Content-Length")
	if len(held) <= wholeDecoded {
		r.Body = readCloser{Reader: bytes.NewReader(held), Closer: zr}
		r.ContentLength = int64(len(held))
		return nil
	}
	r.Body = readCloser{Reader: io.MultiReader(bytes.NewReader(held), zr), Closer: zr}
	r.ContentLength = -1
	return nil
}

// readCloser reads from one reader and closes another.
type readCloser struct {
	io.Reader
	io.Closer
}
