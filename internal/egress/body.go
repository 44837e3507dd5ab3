package egress

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/intentius/boxbroker/internal/proxy"
)

// maxReadBody is the largest request body with a declared length that
// the broker reads whole, to find the box's token in it and to put the
// value in its place with the length set again. A longer body, or one of
// unknown length, is streamed with the value put in place as it goes.
const maxReadBody = 1 << 20

// bodyValue is value as it must be written in a body of the given
// Content-Type: query-escaped in a form, JSON-escaped in JSON, and as it
// is otherwise.
func bodyValue(contentType, value string) string {
	mt, _, _ := mime.ParseMediaType(contentType)
	switch {
	case mt == "application/x-www-form-urlencoded":
		return url.QueryEscape(value)
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		b, _ := json.Marshal(value)
		return string(b[1 : len(b)-1])
	}
	return value
}

// readable reports whether r's body is one the broker reads whole: of a
// declared length no greater than maxReadBody.
func readable(r *http.Request) bool {
	return r.Body != nil && r.Body != http.NoBody && r.ContentLength > 0 && r.ContentLength <= maxReadBody
}

// readBody reads r's body whole and puts it back, readable again.
func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		r.Body = io.NopCloser(failed{err})
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.ContentLength = int64(len(b))
	return b, nil
}

// swapBody puts value wherever r's body holds token, escaped or not
// (%62bx_…, bbx\u005f…), written as the body's Content-Type writes it,
// and replaces any other token (see scrubOthers) with a marker of its
// length.
// A body of a declared length up to maxReadBody is read whole and sent
// with its new length. A body of unknown length is streamed and swapped
// as it goes. A longer body of a declared length keeps it, and so cannot
// take the value: it is streamed, and cut off with errBodyToken before
// the token if it holds one, so the host never receives the token.
func swapBody(r *http.Request, token, value string) error {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	forms := tokenForm(token, bodyValue(r.Header.Get("Content-Type"), value))
	scrub := !othersGo(value)
	if readable(r) {
		b, err := readBody(r)
		if err != nil {
			return err
		}
		out, n := proxy.RedactString(string(b), forms)
		if scrub {
			var m int
			out, m = proxy.ScrubTokens(out)
			n += m
		}
		if n > 0 {
			r.Body = io.NopCloser(strings.NewReader(out))
			r.ContentLength = int64(len(out))
		}
		return nil
	}
	red := proxy.NewFormRedactor(r.Body, forms)
	var body io.ReadCloser = red
	if r.ContentLength > 0 {
		body = &kept{red}
	}
	if scrub {
		// Outside the swap: the box's own token is the value by now.
		body = proxy.NewTokenScrubber(body)
	}
	r.Body = body
	return nil
}

// errBodyToken: the box's token is in a body too long to be read whole,
// of a declared length the value would change.
var errBodyToken = errors.New("egress: the box's token is in a long request body of a declared length")

// kept is a body of a declared length, streamed: it fails with
// errBodyToken rather than pass on anything read with the token in it.
type kept struct{ *proxy.Redactor }

func (k *kept) Read(p []byte) (int, error) {
	n, err := k.Redactor.Read(p)
	if k.Replaced() > 0 {
		return 0, errBodyToken
	}
	return n, err
}

// unescapeLoose decodes every %hh, \u00hh and \/ in s, as a form or a
// JSON string would, so that a token written with escapes is found.
func unescapeLoose(s string) string {
	if !strings.ContainsAny(s, "%\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '%' && i+2 < len(s) && proxy.HexByte(s[i+1], s[i+2]) >= 0:
			b.WriteByte(byte(proxy.HexByte(s[i+1], s[i+2])))
			i += 2
		case s[i] == '\\' && i+5 < len(s) && s[i+1] == 'u' && s[i+2] == '0' && s[i+3] == '0' && proxy.HexByte(s[i+4], s[i+5]) >= 0:
			b.WriteByte(byte(proxy.HexByte(s[i+4], s[i+5])))
			i += 5
		case s[i] == '\\' && i+1 < len(s) && s[i+1] == '/':
			b.WriteByte('/')
			i++
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// failed is a body whose reading failed: it yields that error again.
type failed struct{ err error }

func (f failed) Read([]byte) (int, error) { return 0, f.err }
