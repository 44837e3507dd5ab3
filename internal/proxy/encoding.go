package proxy

import (
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
)

// EncodingError is an answer whose Content-Encoding the broker does not
// pass on, since it cannot read the body through it to keep a value out.
// Why says what the header held, for the box's refusal.
type EncodingError struct{ Why string }

func (e *EncodingError) Error() string { return "proxy: answer " + e.Why }

// contentCoding judges an answer's Content-Encoding header values as a
// whole, never by the first alone. It returns "" for an answer as it is
// (no header, or one naming only identity) and otherwise the one coding
// the header names, in lower case, and as the header wrote it. More than
// one Content-Encoding header, or stacked codings, are an
// *EncodingError. An EncodingError's Why quotes the codings as the
// header wrote them, never changed: the header may repeat what the
// upstream was sent, and a form the broker made of it (in lower case,
// say) could be one no search looks for.
func contentCoding(values []string) (coding, sent string, err error) {
	if len(values) > 1 {
		return "", "", &EncodingError{Why: fmt.Sprintf("with %d Content-Encoding headers (%q)", len(values), values)}
	}
	if len(values) == 0 {
		return "", "", nil
	}
	var codings []string
	for _, c := range strings.Split(values[0], ",") {
		c = strings.TrimSpace(c)
		if c != "" && !strings.EqualFold(c, "identity") {
			codings = append(codings, c)
		}
	}
	switch len(codings) {
	case 0:
		return "", "", nil
	case 1:
		return strings.ToLower(codings[0]), codings[0], nil
	}
	return "", "", &EncodingError{Why: fmt.Sprintf("in stacked content encodings (%s)", strings.Join(codings, ", "))}
}

// Decoding judges an answer's Content-Encoding header values as
// contentCoding does, and returns the one coding they name, in lower
// case, when it is among readable ("" for none); any other is an
// *EncodingError.
func Decoding(values []string, readable ...string) (string, error) {
	c, sent, err := contentCoding(values)
	if err != nil || c == "" || slices.Contains(readable, c) {
		return c, err
	}
	return "", &EncodingError{Why: fmt.Sprintf("in a content encoding (%s)", sent)}
}

// Unencoded returns nil when the answer whose header is h comes as it
// is, and an *EncodingError saying why otherwise: for an upstream the
// broker asked for no encoding, whose answer it reads as it passes.
func Unencoded(h http.Header) error {
	_, err := Decoding(h.Values("Content-Encoding"))
	return err
}

// Gunzip returns body decoded from gzip (one member or several, as
// gzip.Reader reads them). It reads at most limit bytes of body and
// decodes at most limit bytes: past either, Read fails with an
// *http.MaxBytesError, so that neither a body that decodes to far more
// than it holds nor one that holds far more than it decodes to (empty
// blocks) is read without end. A body that is not gzip fails its first
// Read with gzip's error. Closing it closes body.
func Gunzip(body io.ReadCloser, limit int64) io.ReadCloser {
	return &gunzipBody{src: body, in: &boundedReader{r: body, left: limit, limit: limit}, limit: limit}
}

// gunzipBody decodes lazily, so that the gzip header is read only when
// the body is.
type gunzipBody struct {
	src   io.ReadCloser
	in    *boundedReader // body, bounded
	out   *boundedReader // what it decodes to, bounded; nil before the first Read
	limit int64
	err   error
}

func (g *gunzipBody) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	if g.out == nil {
		zr, err := gzip.NewReader(g.in)
		if err != nil {
			g.err = err
			return 0, err
		}
		g.out = &boundedReader{r: zr, left: g.limit, limit: g.limit}
	}
	n, err := g.out.Read(p)
	if err != nil {
		g.err = err
	}
	return n, err
}

func (g *gunzipBody) Close() error { return g.src.Close() }

// boundedReader reads at most limit bytes of r, and fails with an
// *http.MaxBytesError rather than read one more.
type boundedReader struct {
	r     io.Reader
	left  int64
	limit int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, overLimit(b.r, b.limit)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// overLimit reads one byte more of r, which has given limit bytes: it
// returns an *http.MaxBytesError when there is one, and r's error (io.EOF
// at its end) when there is none.
func overLimit(r io.Reader, limit int64) error {
	var one [1]byte
	if _, err := io.ReadFull(r, one[:]); err != nil {
		return err
	}
	return &http.MaxBytesError{Limit: limit}
}
