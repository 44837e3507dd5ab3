// Package quiet keeps what an outbound request carried, its credentials
// above all, out of the text of the error a transport returns for it.
//
// Go's HTTP transport quotes what a peer answered when it cannot read it
// (`malformed HTTP status code "…"`, `malformed MIME header line: …`,
// `bad Content-Length "…"`). A peer that repeats a header it was sent in
// such an answer (an API key, a bearer token, Basic credentials) would
// have it written wherever the error is logged or printed. Errors wraps a
// RoundTripper so that no error leaves it, or the body of an answer it
// returns, holding a value of the request's header, URL or form body.
//
// It also holds the bounds an outbound client puts on what it reads of
// an answer: MaxAnswerHeader on its header, Bodies on its body.
package quiet

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Marker is what replaces, in an error's text, a value the request
// carried.
const Marker = "[sent value]"

// MinLen is the length of the shortest value an error's text is searched
// for: a shorter one is no credential, and would mark common words of the
// error's own text.
const MinLen = 8

// Errors returns a RoundTripper that sends each request with next
// (http.DefaultTransport when nil) and, when next fails or the body of
// its answer fails to read, returns Err of the error. Given a
// RoundTripper Errors made, it returns it as it is.
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

// RoundTrip sends req with the next RoundTripper. The answer's body
// fails, if it does, with Err of its error too: the transport reads a
// chunked body's trailer as the body ends, and quotes a malformed line of
// it (`malformed MIME header: missing colon: "…"`).
func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, Err(err, req)
	}
	// A 101's body is the connection itself, which a ReverseProxy takes
	// as an io.ReadWriteCloser: it is left as it is.
	if b := resp.Body; b != nil && b != http.NoBody && resp.StatusCode != http.StatusSwitchingProtocols {
		resp.Body = &body{ReadCloser: b, req: req}
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

// Body returns rc with every error a read of it returns but io.EOF
// passed through reword first; a nil rc or http.NoBody as it is.
func Body(rc io.ReadCloser, reword func(error) error) io.ReadCloser {
	if rc == nil || rc == http.NoBody {
		return rc
	}
	return &body{ReadCloser: rc, reword: reword}
}

// body is a body whose read errors are reworded: by reword, or, when it
// is nil, by Err for req.
type body struct {
	io.ReadCloser
	reword func(error) error
	req    *http.Request
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		if b.reword != nil {
			err = b.reword(err)
		} else {
			err = Err(err, b.req)
		}
	}
	return n, err
}

// Err returns err, for req, with every value req carried in its header,
// URL or form body replaced by Marker in its text: each header value, the
// credential after an authorization scheme, Basic credentials' user and
// password, the URL's user and password, each query value, and each
// value of a form body req can give again (formValues), as written, as Go
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
	return Reword(err, out)
}

// Reword returns an error whose text is text and which wraps err:
// errors.Is and errors.As see through it, and it reports a timeout as err
// does. When text is err's own, it returns err.
func Reword(err error, text string) error {
	if err == nil || text == err.Error() {
		return err
	}
	return &quietError{err: err, text: text}
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
	for _, values := range formValues(req) {
		for _, v := range values {
			add(v)
		}
	}
	slices.SortStableFunc(vs, func(a, b string) int { return len(b) - len(a) })
	return vs
}

// maxForm bounds the form body Err reads for the values it carried.
const maxForm = 64 << 10

// formValues is the values of req's body when it is a form the request can
// give again (GetBody, as http.NewRequest sets for a body it holds): a
// token endpoint's client secret and refresh token go in one, and a
// peer repeating it has the transport quote it as the form wrote it.
func formValues(req *http.Request) url.Values {
	if req.GetBody == nil {
		return nil
	}
	if mt, _, err := mime.ParseMediaType(req.Header.Get("Content-Type")); err != nil || mt != "application/x-www-form-urlencoded" {
		return nil
	}
	rc, err := req.GetBody()
	if err != nil {
		return nil
	}
	defer rc.Close()
	b, _ := io.ReadAll(io.LimitReader(rc, maxForm))
	q, _ := url.ParseQuery(string(b)) // the pairs read before any error
	return q
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

// InClear reports whether a request to u would carry what it carries
// (a key, a bearer token) across a network in the clear: plain http to a
// host other than this machine's loopback (localhost or a loopback
// address). Every outbound client that sends a credential refuses, or
// warns of, a URL it reports true for.
func InClear(u *url.URL) bool {
	if u.Scheme != "http" {
		return false
	}
	h := u.Hostname()
	if h == "localhost" {
		return false
	}
	ip := net.ParseIP(h)
	return ip == nil || !ip.IsLoopback()
}

// Cut returns s whole when it is at most n bytes, and otherwise its first
// n bytes or fewer, ending at a character's boundary, followed by a note
// of its length: what a peer wrote (a refusal's message) may be
// megabytes, and is shown in part.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return fmt.Sprintf("%s… [cut: the message is %d bytes]", s[:i], len(s))
}

// keyPrefixes begin the API keys and tokens of well-known services,
// boxbroker's own tokens (package token's prefixes), and the armour of a
// PEM block.
var keyPrefixes = []string{
	"bbx_", "bba_", "bbg_",
	"-----BEGIN", "PRIVATE KEY", "sk-ant-", "sk-proj-", "sk_live_", "sk_test_", "rk_live_", "rk_test_",
	"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "xoxa-", "xoxb-", "xoxp-", "xoxs-", "xapp-",
	"AKIA", "ASIA", "AIza", "ya29.", "eyJ", "npm_", "hf_", "pypi-",
}

// Credential reports whether s holds what is written as a credential or
// a key is, rather than a name or a path an operator types: a PEM
// block's armour, a prefix that begins a well-known service's API key or
// token (sk-ant-, ghp_, xoxb-, AKIA, a JSON Web Token's eyJ …) where a
// word begins, a run of 32 or more hexadecimal digits, or a random-looking
// run of base64: 20 or more letters, digits, + and /, mixing upper-case
// and lower-case letters and digits, that changes between the three at
// least once in three characters (as random ones do, twice in three,
// and words written together, Go's test names and a path's directories
// do not).
func Credential(s string) bool {
	for _, p := range keyPrefixes {
		for i := 0; ; {
			j := strings.Index(s[i:], p)
			if j < 0 {
				break
			}
			if i += j; i == 0 || !alnum(s[i-1]) {
				return true
			}
			i++
		}
	}
	hex := 0
	for i := 0; i < len(s); i++ {
		if c := s[i]; '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' {
			if hex++; hex >= 32 {
				return true
			}
		} else {
			hex = 0
		}
	}
	// The run of base64 characters at s[start:i]: its letters and
	// digits, of which classes, and how often the class changes.
	var (
		start, n, changes int
		seen, last        byte // classes: 1 upper, 2 lower, 4 digit
	)
	for i := 0; i <= len(s); i++ {
		var class byte
		if i < len(s) {
			switch c := s[i]; {
			case 'A' <= c && c <= 'Z':
				class = 1
			case 'a' <= c && c <= 'z':
				class = 2
			case '0' <= c && c <= '9':
				class = 4
			case c == '+' || c == '/':
				continue
			}
		}
		if class == 0 {
			if i-start >= 20 && seen == 7 && 3*changes >= n-1 {
				return true
			}
			start, n, changes, seen, last = i+1, 0, 0, 0, 0
			continue
		}
		if last != 0 && class != last {
			changes++
		}
		n++
		seen |= class
		last = class
	}
	return false
}

// Plain reports whether s reads as a name or a path an operator typed,
// which an error or a help text may repeat: at most max bytes of valid
// UTF-8 on one line, with no control character and nothing Credential
// finds.
func Plain(s string, max int) bool {
	if len(s) > max || !utf8.ValidString(s) || Credential(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || 0x80 <= r && r < 0xa0 {
			return false
		}
	}
	return true
}

// Shown is s as an error may quote it where a name or a path goes: in
// Go's quotes when it is Plain, and otherwise only its length. A value
// given in the wrong place (a key pasted where a path or a name goes) is
// never repeated.
func Shown(s string, max int) string {
	if Plain(s, max) {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("(%d bytes, not shown: it could be a credential)", len(s))
}

func alnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
