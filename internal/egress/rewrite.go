package egress

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/quiet"
)

// signedBody reads r's body for a signing kind: whole when its length is
// declared and at most maxReadBody, refused when it holds the box's
// token (there is no value to put in its place); otherwise streamed with
// every token marked and sent unsigned where the secret allows, or
// refused.
func signedBody(r *http.Request, f *flight) error {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	if readable(r) {
		b, err := readBody(r)
		if err != nil {
			return capability.UnreadableBody(err)
		}
		if holds(string(b), f.token) {
			return capability.Refuse(capability.ReasonInvalid,
				"The request body holds the box's token; %s's requests are signed by the broker, which has no value to put in its place, so it was not sent.", f.name)
		}
		proxy.ScrubTokensInPlace(b) // the body read again is b: it is signed as sent
		f.body = b
		return nil
	}
	if !f.signer.Unsigned() {
		return capability.Refuse(capability.ReasonTooLarge,
			"%s's requests are signed over their body, which the broker reads whole: send a body of at most %d bytes with its length declared.", f.name, maxReadBody)
	}
	f.unsigned = true
	return swapBody(r, f.token, "", nil, 0)
}

// dropped are request headers that never go to a secret's host, under
// any name a host reads as one (proxy.DelHeaders): the
// box's cookies and proxy credentials, the grant, forwarding headers,
// the path overrides (proxy.PathOverrides: a host acts on the path the
// secret's rules judged), and ranges (an answer is always whole, so the
// value cannot be fetched in pieces shorter than itself). The box's Accept-Encoding is replaced
// by the broker's own, which names only what it can read.
var dropped = append([]string{"Cookie", "Proxy-Authorization", protocol.HeaderGrant, "Forwarded", "X-Forwarded-For",
	"X-Forwarded-Host", "X-Forwarded-Proto", "Via", "Range", "If-Range", "Accept-Encoding"}, proxy.PathOverrides...)

// acceptEncoding is what the broker asks a secret's host for: gzip, which
// it decodes to search the body, or the body as it is.
const acceptEncoding = "gzip"

func (c *Capability) rewrite(pr *httputil.ProxyRequest) {
	f := flightOf(pr.In.Context())
	h := pr.Out.Header
	proxy.DelHeaders(h, dropped...)
	h.Set("Accept-Encoding", acceptEncoding)
	u := *f.target
	pr.Out.URL = &u
	pr.Out.Host = u.Host
	if f.signer == nil {
		f.setForms(swapHeaders(h, f.token, f.value))
		if !othersGo(f.value) {
			proxy.ScrubHeader(h)
		}
		return
	}
	dropToken(h, f.token)
	proxy.ScrubHeader(h)
	for _, k := range f.signer.Drop() {
		h.Del(k)
	}
	now := c.cfg.Now()
	f.made, f.signErr = f.signer.Sign(pr.Out.Context(), pr.Out, f.body, f.unsigned, now)
	if f.signErr == nil {
		life := f.signer.Life()
		if life <= 0 {
			life = keptSigned
		}
		c.written.signed(f.host, f.box, f.name, f.made, now.Add(life), now)
	}
	f.setForms(nil)
}

// decoding returns how an answer with the given Content-Encoding header
// values is read: as it is (""), or gunzipped ("gzip"). It returns a
// *proxy.EncodingError for an encoding the broker cannot read, for
// stacked encodings, and for more than one Content-Encoding header: the
// header is judged as a whole, never by its first value alone.
func decoding(values []string) (string, error) {
	c, err := proxy.Decoding(values, "gzip", "x-gzip")
	if c == "x-gzip" {
		c = "gzip"
	}
	return c, err
}

// errUpgraded is a 101 answer, which egress does not carry.
var errUpgraded = errors.New("egress: the host switched protocols")

// redactHeader puts the box's own forms in place of the value's in h,
// the headers of an answer (what names it in the log line, which says
// how many held the value), and points links at the secret's host back
// at the broker.
func (c *Capability) redactHeader(f *flight, h http.Header, what string) {
	if n := f.set.RedactHeader(h); n > 0 {
		c.log.Warn("egress: the host repeated the secret's value in "+what+"; the box's token is in its place", "secret", f.name, "headers", n)
	}
	f.localLinks(h)
}

// informational puts the box's token in place of the value in a 1xx
// answer's headers (103 Early Hints, say), and rewrites its links, as in
// the final answer's.
func (c *Capability) informational(r *http.Request, h http.Header) {
	c.redactHeader(flightOf(r.Context()), h, "an informational answer's headers")
}

func (c *Capability) modifyResponse(resp *http.Response) error {
	f := flightOf(resp.Request.Context())
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return errUpgraded
	}
	// The body's last read may fail on a malformed trailer line, which
	// the transport's error quotes, and ReverseProxy logs.
	resp.Body = quiet.Body(resp.Body, f.logErr)
	if f.ref != nil && resp.StatusCode == http.StatusUnauthorized {
		// The minted token may have been revoked: the next call mints anew.
		c.minter.Forget(*f.ref, f.value)
	}
	seen := c.watchToken(resp, f) // before the swap-back puts the token in the value's place
	c.redactHeader(f, resp.Header, "answer headers")
	// Judged after redaction: the refusal repeats the header.
	dec, err := decoding(resp.Header.Values("Content-Encoding"))
	if err != nil {
		return err
	}
	f.set.RedactHeader(resp.Trailer)
	resp.Header.Del("Content-Encoding") // identity, or decoded below
	if dec == "gzip" {
		// Decoded as it streams, so an empty or HEAD answer is not read,
		// and unbounded: the answer is never held whole.
		resp.Body = proxy.Gunzip(resp.Body, math.MaxInt64)
		resp.Header.Del("Content-Length")
		resp.ContentLength = -1
	}
	if resp.Request.Method == http.MethodHead || resp.StatusCode < 200 ||
		resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified {
		return nil
	}
	f.set.RedactAnswer(resp, seen.Body(resp.Body), func(replaced int) {
		c.log.Warn("egress: the host repeated the secret's value in an answer body; the box's token is in its place",
			"secret", f.name, "times", replaced)
	})
	return nil
}

// logText is text, an error's, as the log may hold it. An error's text
// can hold the URL, and so the value in its query, and a transport's
// error quotes what the host answered, which may repeat anything the
// broker sent it (the Basic credentials it encoded, say). So every form
// of a value an answer is searched for (f.set) is put in its box-side
// place, the value and the kind's own secrets become [value], and the
// box's token, as it is or escaped, and its base64 in any alignment,
// become [token].
func (f *flight) logText(text string) string {
	for _, v := range append([]string{f.value, url.QueryEscape(f.value)}, append(f.hidden, f.made...)...) {
		if v != "" {
			text = strings.ReplaceAll(text, v, "[value]")
		}
	}
	if f.set != nil {
		text, _ = f.set.RedactString(text)
	}
	token := []proxy.Form{{Old: []byte(f.token), New: []byte("[token]"), Escaped: true}}
	for _, c := range base64Cores(f.token) {
		token = append(token, proxy.Form{Old: []byte(c), New: []byte("[token]"), Escaped: true})
	}
	text, _ = proxy.RedactString(text, token)
	return text
}

// logErr is err with its text as the log may hold it (logText).
func (f *flight) logErr(err error) error { return quiet.Reword(err, f.logText(err.Error())) }

func (c *Capability) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	f := flightOf(r.Context())
	what := "host of the secret " + f.name
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		c.log.Debug("egress: box gone", "secret", f.name)
		return
	}
	if proxy.LogCut(c.log, err, "egress", "secret", f.name, "host", f.target.Host) {
		return
	}
	var (
		mbe *http.MaxBytesError
		ee  *proxy.EncodingError
	)
	var ce *capability.Error
	switch {
	case errors.As(err, &mbe):
		ce = capability.TooLarge(mbe.Limit)
	case errors.Is(err, errTokenLeft):
		ce = capability.Refuse(capability.ReasonInvalid, "The request carries the box's token in a form the broker does not swap (it swaps header values, Basic credentials and the query); it was not sent.")
	case errors.As(err, &ee):
		ce = capability.Refuse(capability.ReasonUpstream, "The %s answered %s, which the broker cannot read to keep the value out, so the answer was withheld.", what, ee.Why)
	case errors.Is(err, errUpgraded):
		ce = capability.Refuse(capability.ReasonUpstream, "The %s switched protocols, which egress does not carry.", what)
	case f.signErr != nil && errors.Is(err, f.signErr):
		ce = capability.Refuse(capability.ReasonInternal, "The broker could not sign %s's request.", f.name).At(http.StatusBadGateway)
	case errors.Is(err, errAddress):
		// The address is logged, not shown: the box would learn how the
		// broker's network resolves the name.
		ce = capability.Refuse(capability.ReasonHost, "The %s is at an address the broker does not reach by a name: this machine's own (loopback or 0.0.0.0), link-local or a cloud's metadata service; nothing was sent. Its owner names a host on this machine as localhost or by its address, with `boxbroker secret set`.", what)
	case errors.Is(err, errElsewhere):
		ce = capability.Refuse(capability.ReasonHost, "The broker sends %s's requests only to its host, and this one was not.", f.name).At(http.StatusBadGateway)
	default:
		ce = proxy.Classify(err, what)
	}
	c.log.Warn("egress: request failed", "secret", f.name, "host", f.target.Host, "status", ce.Status, "err", f.logErr(err))
	proxy.TraceFrom(r.Context()).Refuse(ce.Reason)
	ce.Write(w)
}
