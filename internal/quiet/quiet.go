// Package quiet keeps what an outbound request carried, its credentials
// above all, out of the text of the error a transport returns for it.
//
// Go's HTTP transport quotes what a peer answered when it cannot read it
// (`malformed HTTP status code "…"`, `malformed MIME header line: …`,
// `bad Content-Length "…"`). A peer that repeats a header it was sent in
// such an answer (an API key, a bearer token, Basic credentials) would
// have it written wherever the error is logged or printed. Errors wraps a
// RoundTripper so that no error leaves it holding a value of the
// request's header or URL.
package quiet

import (
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Marker is what replaces, in an error's text, a value the request
// carried.
const Marker = "[sent value]"

// MinLen is the length of the shortest value an error's text is searched
// for: a shorter one is no credential, and would mark common words of the
// error's own text.
const MinLen = 8

// Errors returns a RoundTripper that sends each request with next
// (http.DefaultTransport when nil) and, when next fails, returns Err of
// its error. Given a RoundTripper Errors made, it returns it as it is.
func Errors(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	if _, ok := next.(transport); ok {
		return next
	}
	return transport{next: next}
}

type transport struct{ next http.RoundTripper }

// RoundTrip sends req with the next RoundTripper.
func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, Err(err, req)
	}
	return resp, nil
}

// CloseIdleConnections closes the next RoundTripper's idle connections,
// when it keeps any (http.Client.CloseIdleConnections asks for this).
func (t transport) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// Err returns err, for req, with every value req carried in its header or
// URL replaced by Marker in its text: each header value, the credential
// after an authorization scheme, Basic credentials' user and password,
// the URL's user and password, and each query value, as written, as Go
// quotes it, or percent-escaped, when it is MinLen bytes or longer. The
// error it returns wraps err (errors.Is and errors.As see through it) and
// reports a timeout as err does. An err whose text holds none of them is
// returned as it is.
func Err(err error, req *http.Request) error {
	if err == nil || req == nil {
		return err
	}
	text := err.Error()
	out := text
	for _, v := range sent(req) {
		for _, form := range forms(v) {
			out = strings.ReplaceAll(out, form, Marker)
		}
	}
	if out == text {
		return err
	}
	return &quietError{err: err, text: out}
}

// sent is every value req carried that Err searches for, the longest
// first, so that a header's whole value is replaced before its parts.
func sent(req *http.Request) []string {
	var vs []string
	add := func(v string) {
		if len(v) >= MinLen && !slices.Contains(vs, v) {
			vs = append(vs, v)
		}
	}
	for _, values := range req.Header {
		for _, v := range values {
			add(v)
			scheme, cred, ok := strings.Cut(strings.TrimSpace(v), " ")
			if !ok {
				continue
			}
			cred = strings.TrimSpace(cred)
			add(cred)
			if strings.EqualFold(scheme, "Basic") {
				if b, err := base64.StdEncoding.DecodeString(cred); err == nil {
					user, pass, _ := strings.Cut(string(b), ":")
					add(user)
					add(pass)
				}
			}
		}
	}
	if u := req.URL; u != nil {
		if u.User != nil {
			add(u.User.Username())
			pass, _ := u.User.Password()
			add(pass)
		}
		for _, values := range u.Query() {
			for _, v := range values {
				add(v)
			}
		}
	}
	slices.SortStableFunc(vs, func(a, b string) int { return len(b) - len(a) })
	return vs
}

// forms are the ways an error's text may write v: as it is, as Go's %q
// quotes it, and percent-escaped for a query or a path.
func forms(v string) []string {
	q := strconv.Quote(v)
	out := []string{v}
	for _, f := range []string{q[1 : len(q)-1], url.QueryEscape(v), url.PathEscape(v)} {
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// quietError is an error whose text is another's with what the request
// carried replaced.
type quietError struct {
	err  error
	text string
}

func (e *quietError) Error() string { return e.text }
func (e *quietError) Unwrap() error { return e.err }

// Timeout reports whether the error it wraps is a timeout: url.Error and
// others ask an error's Timeout method rather than errors.As.
func (e *quietError) Timeout() bool {
	var ne net.Error
	return errors.As(e.err, &ne) && ne.Timeout()
}
