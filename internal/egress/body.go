package egress

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/jsonfield"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// maxReadBody is the largest request body the broker reads whole: a
// signing kind's body, which it signs, and a form or JSON body it may
// write a secret's value in (see swapBody). Any other body is streamed.
const maxReadBody = 1 << 20

// Body kinds whose top-level fields a secret may name.
const (
	bodyForm = "form"
	bodyJSON = "json"
)

// bodyKind is bodyForm for an application/x-www-form-urlencoded body,
// bodyJSON for application/json or any +json type, and "" otherwise.
func bodyKind(contentType string) string {
	mt, _, _ := mime.ParseMediaType(contentType)
	switch {
	case mt == "application/x-www-form-urlencoded":
		return bodyForm
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		return bodyJSON
	}
	return ""
}

// readable reports whether r's body is one the broker reads whole: of a
// declared length no greater than maxReadBody.
func readable(r *http.Request) bool {
	return r.Body != nil && r.Body != http.NoBody && r.ContentLength > 0 && r.ContentLength <= maxReadBody
}

// readBody reads r's body whole (readable, or as FindBodyTokens put it
// back) and puts it back, readable again.
func readBody(r *http.Request) ([]byte, error) {
	b, err := readUpTo(r, maxReadBody+1)
	if err != nil {
		return nil, err
	}
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.ContentLength = int64(len(b))
	return b, nil
}

// swapBody writes value into r's body only where the secret names a
// field for it, and marks every token anywhere else:
//
//   - In a form or JSON body of at most maxReadBody bytes, a top-level
//     field named in fields whose whole value (decoded) is token has
//     value put in its place, written as the body's Content-Type writes
//     it; the body is read whole and sent with its new length.
//   - Every other token written in the body, escaped or not (the box's
//     token in a blob, in a JSON string among other words, in a field
//     not named, in a multipart part; any other box's token; a grant),
//     is replaced by a proxy.TokenMarker of its own length, never by
//     value. A body that names no field, or is of another type, or is
//     longer, is streamed so, and keeps its length, declared or not.
//
// So the value never lands where a host keeps what a box wrote (a blob,
// an issue, a file) for the box to read back. A body that would have
// value written in more than most fields is not sent: swapBody returns
// a *writesError.
func swapBody(r *http.Request, token, value string, fields []string, most int) error {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	kind := bodyKind(r.Header.Get("Content-Type"))
	if len(fields) == 0 || value == "" || kind == "" || r.ContentLength > maxReadBody {
		r.Body = proxy.NewTokenScrubber(r.Body)
		return nil
	}
	b, err := readUpTo(r, maxReadBody+1)
	if err != nil {
		return err
	}
	if len(b) > maxReadBody { // of undeclared length, and long: streamed
		r.Body = proxy.NewTokenScrubber(proxy.PutBack(b, r.Body))
		return nil
	}
	r.Body.Close()
	spans := namedSpans(b, kind, fields, token)
	if len(spans) > most {
		r.Body = http.NoBody
		return &writesError{len(spans)}
	}
	out := writeFields(b, kind, spans, value)
	r.Body = io.NopCloser(bytes.NewReader(out))
	r.ContentLength = int64(len(out))
	if len(out) == 0 {
		r.Body = http.NoBody
	}
	return nil
}

// readUpTo reads at most limit bytes of r's body, in one allocation of
// its declared length when it has one (a body that ends short of it is
// an error, io.ErrUnexpectedEOF). A body whose reading fails is closed,
// and yields that error again to whoever reads it next.
func readUpTo(r *http.Request, limit int64) (b []byte, err error) {
	if r.ContentLength <= 0 || r.ContentLength >= limit {
		b, err = io.ReadAll(io.LimitReader(r.Body, limit))
	} else {
		b = make([]byte, r.ContentLength)
		_, err = io.ReadFull(r.Body, b)
	}
	if err != nil {
		r.Body.Close()
		r.Body = io.NopCloser(failed{err})
		return nil, err
	}
	return b, nil
}

// writesError is swapBody's error for a body that would have the value
// written in n fields, more than it may.
type writesError struct{ n int }

func (e *writesError) Error() string {
	return fmt.Sprintf("egress: the body would have the value written in %d fields", e.n)
}

// writeFields returns b, a body of the given kind, with every token in
// it marked (proxy.ScrubTokensInPlace) but at spans, the whole values of
// the top-level fields named that are the box's token (namedSpans),
// which become value. b itself is changed.
func writeFields(b []byte, kind string, spans []span, value string) []byte {
	proxy.ScrubTokensInPlace(b) // length kept: the spans stand
	if len(spans) == 0 {
		return b
	}
	enc := []byte(url.QueryEscape(value))
	if kind == bodyJSON {
		enc, _ = json.Marshal(value)
	}
	out := make([]byte, 0, len(b)+len(spans)*len(enc))
	at := 0
	for _, sp := range spans {
		out = append(append(out, b[at:sp.start]...), enc...)
		at = sp.end
	}
	return append(out, b[at:]...)
}

// namedSpans returns, in order, the spans of b's top-level fields named
// in fields whose whole value is token.
func namedSpans(b []byte, kind string, fields []string, token string) []span {
	var spans []span
	for _, f := range topFields(b, kind) {
		if f.value == token && slices.Contains(fields, f.name) {
			spans = append(spans, f.span)
		}
	}
	return spans
}

// span is b[start:end] of a body: a field's whole value as written.
type span struct{ start, end int }

// field is a top-level field of a form or JSON body: its name and value,
// decoded, and where its value is written.
type field struct {
	name, value string
	span
}

// topFields returns b's top-level fields whose value is a string short
// enough to be a token (maxFieldSpan, as written), in order, decoded as
// a form or JSON parser decodes them: for bodyForm every key=value pair
// (joined by &) that decodes, for bodyJSON every member of the object b
// is whose value is a string (none when b is not a JSON object, or not
// valid JSON), and none for any other kind.
func topFields(b []byte, kind string) []field {
	switch kind {
	case bodyForm:
		return formFields(b)
	case bodyJSON:
		return jsonFields(b)
	}
	return nil
}

func formFields(b []byte) []field {
	var out []field
	at := 0 // where pair begins in b
	for pair := range bytes.SplitSeq(b, []byte("&")) {
		end := at + len(pair)
		if eq := bytes.IndexByte(pair, '='); eq >= 0 && len(pair)-eq-1 <= maxFieldSpan {
			k, kerr := url.QueryUnescape(string(pair[:eq]))
			v, verr := url.QueryUnescape(string(pair[eq+1:]))
			if kerr == nil && verr == nil {
				out = append(out, field{k, v, span{at + eq + 1, end}})
			}
		}
		at = end + 1
	}
	return out
}

func jsonFields(b []byte) []field {
	// jsonfield reads members where they lie, as encoding/json reads
	// them, and only string values short enough to be a token are
	// decoded: a 1 MiB body costs a check and a walk, not a decoder's
	// copies.
	doc, ok := jsonfield.Parse(b)
	if !ok || !doc.IsObject() {
		return nil
	}
	var out []field
	doc.ForEach(func(k, v gjson.Result) bool {
		var val string
		if v.Type == gjson.String && len(v.Raw) <= maxFieldSpan && v.Index > 0 && v.Index+len(v.Raw) <= len(b) && jsonfield.String(v, &val) {
			out = append(out, field{jsonfield.Name(k), val, span{v.Index, v.Index + len(v.Raw)}})
		}
		return true
	})
	return out
}

// maxFieldSpan is the longest a field's value can be written and still
// be a token: a token with each byte escaped, in quotes.
const maxFieldSpan = proxy.MaxTokenSpan + 2

// heldBody is a request body egress read whole before the box was known
// (FindBodyTokens), put back; tokens are the box tokens it found.
type heldBody struct {
	*bytes.Reader
	tokens []string
}

func (heldBody) Close() error { return nil }

// FindBodyTokens finds a box's token in a request body whose head holds
// none (see capability.Route.BodyTokens), for an API that takes its key
// in the body alone: an OAuth token call with client_secret_post. It
// reads only an unencoded form or JSON body of a declared length of at
// most capability.MaxBodyTokenBytes, for a path that names a secret,
// and returns each top-level field's value that is a box token, whole;
// it puts the body back, and FindTokens returns what it found. A token
// found so is the box's only where the secret names its field
// (checkBodyToken); anywhere else it is refused.
func (c *Capability) FindBodyTokens(r *http.Request) []string {
	kind := bodyKind(r.Header.Get("Content-Type"))
	if _, _, ok := split(r.URL); !ok || kind == "" || r.Header.Get("Content-Encoding") != "" ||
		r.Body == nil || r.Body == http.NoBody || r.ContentLength <= 0 || r.ContentLength > capability.MaxBodyTokenBytes {
		return nil
	}
	b, err := readUpTo(r, capability.MaxBodyTokenBytes+1)
	if err != nil {
		return nil
	}
	var found []string
	for _, f := range topFields(b, kind) {
		if t := token.AppendFound(nil, f.value, token.BoxPrefix); len(t) == 1 && t[0] == f.value {
			found = append(found, f.value)
		}
	}
	r.Body = heldBody{bytes.NewReader(b), found}
	return found
}

// bodyTokens are the tokens FindBodyTokens found in r's body.
func bodyTokens(r *http.Request) []string {
	if hb, ok := r.Body.(heldBody); ok {
		return hb.tokens
	}
	return nil
}

// checkBodyToken admits a request that carried the box's token in its
// body alone only when a field sec names holds it whole: anywhere else
// the token would be marked, so the host would receive no credential.
func checkBodyToken(r *http.Request, sec store.Secret, tok string) error {
	b, err := readBody(r)
	if err != nil {
		return capability.UnreadableBody(err)
	}
	if len(namedSpans(b, bodyKind(r.Header.Get("Content-Type")), sec.BodyFields, tok)) > 0 {
		return nil
	}
	return capability.Refuse(capability.ReasonToken,
		"The request carries the box's token only in its body, in a field the secret %s does not name, so the broker has no credential to send. Send the token where the API takes its key in a header or the query, or have the owner name the field: `boxbroker secret set %s %s --host %s --body-field FIELD`.",
		sec.Name, sec.Box, sec.Name, sec.Host).At(http.StatusUnauthorized)
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
