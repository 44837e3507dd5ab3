package broker

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
)

// OtherMethod is the method the broker's records (its log lines and the
// audit log) give a request in a method no route serves: HTTP allows a
// method to be any token, a box's own token included, so a method other
// than capability.StandardMethods' and CONNECT (the HTTPS proxy's) is
// never kept as it was sent.
const OtherMethod = "OTHER"

// recordedMethod is method as the broker's records keep it.
func recordedMethod(method string) string {
	if capability.MethodOf(method) != 0 || method == http.MethodConnect {
		return method
	}
	return OtherMethod
}

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

// scrub makes rec keep nothing a box sent that can hold a token: its
// method is OtherMethod unless a route could serve it, and every token,
// or what is left of one, in its route, box, capability, words, reason
// and message is replaced (proxy.ScrubKept). A refusal may quote what a
// box sent (a Host, a path, an id), and a box may send its token, or
// another's, anywhere.
func (rec *Record) scrub() {
	rec.Method = recordedMethod(rec.Method)
	rec.Route = proxy.ScrubKept(rec.Route)
	rec.Box = proxy.ScrubKept(rec.Box)
	rec.Capability = proxy.ScrubKept(rec.Capability)
	rec.Reason = proxy.ScrubKept(rec.Reason)
	rec.Message = proxy.ScrubKept(rec.Message)
	rec.Words = proxy.ScrubKeptAll(rec.Words)
}

// scrubDeclaration replaces every token, or what is left of one, in the
// strings of a report the broker keeps and shows (its scope words, its
// listing's title and line, its principals), as in every record: a box
// may report anything there.
func scrubDeclaration(d *protocol.Declaration) {
	for i := range d.Capabilities {
		d.Capabilities[i].Scope = proxy.ScrubKeptAll(d.Capabilities[i].Scope)
	}
	if l := d.Listing; l != nil {
		l.Title, l.Line = proxy.ScrubKept(l.Title), proxy.ScrubKept(l.Line)
	}
	if sp := d.Spend; sp != nil {
		for i := range sp.ByPrincipal {
			if p := sp.ByPrincipal[i].Principal; p != nil {
				kept := proxy.ScrubKept(*p)
				sp.ByPrincipal[i].Principal = &kept
			}
		}
	}
}
