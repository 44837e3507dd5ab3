// Package proxy holds what every forwarding capability shares: the
// Forwarder (httputil.ReverseProxy with Rewrite), the tuned outbound
// http.Transport, the headers a box may never send upstream, the
// Anthropic credential's placement, the redaction of values from
// answers, and the error handler that turns an upstream failure into a
// refusal with no internal text in it.
//
// The Forwarder keeps httputil.ReverseProxy's Rewrite contract: the
// hop-by-hop headers are removed before Rewrite runs, so a box sending
// "Connection: X-Api-Key" cannot strip the credential Rewrite injects.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/intentius/boxbroker/internal/cloud"
	"github.com/intentius/boxbroker/internal/defaults"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/quiet"
)

// TransportOptions tune NewTransport. Zero values take the defaults.
type TransportOptions struct {
	// ResponseHeaderTimeout bounds the wait for an upstream's headers
	// (default 10 minutes: a long Messages call answers its headers only
	// when it starts streaming, or when it is done).
	ResponseHeaderTimeout time.Duration
	// DialTimeout bounds a connection attempt (default 10 s).
	DialTimeout time.Duration
	// MaxIdleConnsPerHost is the keep-alive pool per upstream host
	// (default 256: a busy broker's concurrent calls to one upstream).
	MaxIdleConnsPerHost int
	// MaxResponseHeaderBytes bounds an upstream answer's header
	// (default MaxResponseHeaderBytes); past it the box gets a 502.
	MaxResponseHeaderBytes int64
	// Control, when set, is the dialer's ControlContext: it is given
	// each address a connection is about to be made to, after any name
	// is looked up, and an error from it means no connection there.
	Control func(ctx context.Context, network, address string, c syscall.RawConn) error
	// Resolver looks up the names dialled (default net.DefaultResolver).
	Resolver *net.Resolver
}

// MaxResponseHeaderBytes is the default bound on an upstream answer's
// header: an upstream that sends more (an endless header line, say) is
// cut off, and the broker holds no more of it than this: every outbound
// client's bound (quiet.MaxAnswerHeader).
const MaxResponseHeaderBytes = quiet.MaxAnswerHeader

// NewTransport returns an outbound transport: a clone of
// http.DefaultTransport with bounded dial, TLS handshake and answer-header
// waits, a bounded answer header, a larger idle pool, HTTP/2 wherever the
// upstream offers it over TLS, TLS verification on, and no proxy from the
// environment (outbound requests go only where the configuration says).
// Each kind of upstream (the Anthropic API, Fountain, the egress hosts)
// gets a transport of its own, so that one's pool never crowds out
// another's. A request passed on by ReachOnly is dialled only where its
// host may be reached (Reachable), before o.Control is asked.
//
// It never retries a request whose body it has begun to send, nor one
// with a body it cannot replay (net/http's rule, RFC 9112 §9.3.1): a
// connection that closes before the answer is an error for the box,
// never a second call upstream. It never asks for compression of its
// own, so it never decompresses an answer: whatever Accept-Encoding the
// capability's Rewrite leaves goes upstream (inference and Fountain leave
// none, so that answers can be scanned), and the answer comes back as the
// upstream sent it.
func NewTransport(o TransportOptions) *http.Transport {
	defaults.Positive(&o.ResponseHeaderTimeout, 10*time.Minute)
	defaults.Positive(&o.DialTimeout, 10*time.Second)
	defaults.Positive(&o.MaxIdleConnsPerHost, 256)
	defaults.Positive(&o.MaxResponseHeaderBytes, MaxResponseHeaderBytes)
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = (&net.Dialer{Timeout: o.DialTimeout, KeepAlive: 30 * time.Second, Resolver: o.Resolver, ControlContext: judged(o.Control)}).DialContext
	t.ResponseHeaderTimeout = o.ResponseHeaderTimeout
	t.MaxIdleConns = 4 * o.MaxIdleConnsPerHost
	t.MaxIdleConnsPerHost = o.MaxIdleConnsPerHost
	t.IdleConnTimeout = 90 * time.Second
	t.TLSHandshakeTimeout = 10 * time.Second
	t.ExpectContinueTimeout = time.Second
	t.DisableCompression = true
	t.MaxResponseHeaderBytes = o.MaxResponseHeaderBytes
	t.ForceAttemptHTTP2 = true // with a DialContext of our own, HTTP/2 needs asking for
	return t
}

// reachKey is the context key of the host ReachOnly names.
type reachKey struct{}

// ErrUnreachable is a NewTransport's dial refused for a request
// ReachOnly passed on: its host's name answered, as the broker
// connected, an address it is not reached at by a name (Reachable).
var ErrUnreachable = errors.New("the host's name answers an address the broker does not reach by a name: this machine's own (loopback or 0.0.0.0), link-local or a cloud's metadata service")

// ReachOnly returns rt, each request it is given passed on with its
// URL's host noted in its context: a NewTransport beneath dials, for it,
// only an address Reachable allows that host (none of this machine's,
// link-local or a cloud's metadata service, for a name, whatever its DNS
// answers as the broker connects), and fails with ErrUnreachable at any
// other. It is for upstreams named by what a credential holds (a cloud
// account's endpoints), as egress judges a secret's host.
func ReachOnly(rt http.RoundTripper) http.RoundTripper { return reachOnly{rt} }

type reachOnly struct{ next http.RoundTripper }

func (r reachOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	return r.next.RoundTrip(req.WithContext(context.WithValue(req.Context(), reachKey{}, req.URL.Hostname())))
}

// CloseIdleConnections passes on to the wrapped transport.
func (r reachOnly) CloseIdleConnections() {
	if ci, ok := r.next.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// judged is a NewTransport's dialer's check of address: for a request
// ReachOnly passed on, that its host may be reached there; then control,
// when set.
func judged(control func(ctx context.Context, network, address string, c syscall.RawConn) error) func(ctx context.Context, network, address string, c syscall.RawConn) error {
	return func(ctx context.Context, network, address string, c syscall.RawConn) error {
		if host, ok := ctx.Value(reachKey{}).(string); ok {
			if a, ok := ReachableAt(host, address); !ok {
				return fmt.Errorf("%w (%s at %s)", ErrUnreachable, host, a)
			}
		}
		if control != nil {
			return control(ctx, network, address, c)
		}
		return nil
	}
}

// Outbound is the transport a capability forwards through: rt, or a
// NewTransport with the defaults when rt is nil, its errors kept free of
// what the request carried (quiet.Errors).
func Outbound(rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		rt = NewTransport(TransportOptions{})
	}
	return quiet.Errors(rt)
}

// boxOnly are request headers that carry the box's own identity and never
// go upstream.
var boxOnly = []string{"Authorization", "X-Api-Key", "Cookie", "Proxy-Authorization", protocol.HeaderGrant}

// MethodOverrides are the request headers with which some hosts (Rails'
// Rack::MethodOverride, Laravel, Symfony, Google's APIs, ASP.NET) take a
// request as the method one names rather than its request line's.
var MethodOverrides = []string{"X-Http-Method-Override", "X-Http-Method", "X-Method-Override"}

// PathOverrides are the request headers with which some hosts take a
// request as the path one names rather than its request line's
// (X-Original-URL and X-Rewrite-URL, which IIS's URL Rewrite sets and
// Zend Framework and older Symfony route by). A box's never go upstream,
// so that a host acts on the path the broker judged.
var PathOverrides = []string{"X-Original-Url", "X-Rewrite-Url"}

// StripBoxHeaders removes the box's token and cookies, the grant and the
// path overrides (under any name a host reads as one: DelHeaders) from
// h. (The forwarding headers a box sent never reach an outbound request:
// the Forwarder does not copy them.)
func StripBoxHeaders(h http.Header) {
	for _, k := range boxOnly {
		h.Del(k)
	}
	DelHeaders(h, PathOverrides...)
}

// cgiName is the name under which a host that hands a request's headers
// to its application as CGI variables reads the header named k: upper
// case, each "-" an "_". Puma (Rack's env) and Caddy's FastCGI
// (FrankenPHP, PHP-FPM behind Caddy) do so for a name written with "_"
// too, so "X_HTTP_METHOD_OVERRIDE" reaches Rails and Symfony as
// X-HTTP-Method-Override does, and "X_Original_URL" as X-Original-URL.
func cgiName(k string) string {
	return strings.ToUpper(strings.ReplaceAll(k, "-", "_"))
}

// HeaderValues returns the values of every header of h a host may read
// as name (cgiName): name's own first, then those of the names written
// otherwise ("X_HTTP_METHOD_OVERRIDE"), in the order of their names.
func HeaderValues(h http.Header, name string) []string {
	own := http.CanonicalHeaderKey(name)
	out := slices.Clone(h[own])
	var others []string
	for k := range h {
		if k != own && cgiName(k) == cgiName(name) {
			others = append(others, k)
		}
	}
	slices.Sort(others)
	for _, k := range others {
		out = append(out, h[k]...)
	}
	return out
}

// DelHeaders removes from h every header a host may read as one of
// names (cgiName), however its name is written.
func DelHeaders(h http.Header, names ...string) {
	for k := range h {
		for _, n := range names {
			if cgiName(k) == cgiName(n) {
				delete(h, k)
				break
			}
		}
	}
}

// OAuthBeta is the anthropic-beta a setup token needs.
const OAuthBeta = "oauth-2025-04-20"

// IsSetupToken reports whether an Anthropic credential is a setup token
// (an OAuth token from `claude setup-token`) rather than an API key.
func IsSetupToken(cred []byte) bool {
	return strings.HasPrefix(string(cred), "sk-ant-oat")
}

// SetAnthropicCredential puts cred in h where the Anthropic API expects it:
// x-api-key for an API key, or a bearer with the oauth beta added to any
// anthropic-beta the box sent, for a setup token. A cloud account's
// credential (cloud.Is: Amazon Bedrock, Google Vertex AI) is put in no
// header: it is never sent to an Anthropic API, only signed for by
// inference.CloudTransport, and a call that reaches an Anthropic API with
// it goes unauthenticated.
func SetAnthropicCredential(h http.Header, cred []byte) {
	if cloud.Is(cred) {
		return
	}
	if !IsSetupToken(cred) {
		h.Set("X-Api-Key", string(cred))
		return
	}
	h.Set("Authorization", "Bearer "+string(cred))
	betas := h.Values("Anthropic-Beta")
	for _, v := range betas {
		for _, b := range strings.Split(v, ",") {
			if strings.TrimSpace(b) == OAuthBeta {
				return
			}
		}
	}
	if len(betas) == 0 {
		h.Set("Anthropic-Beta", OAuthBeta)
		return
	}
	h.Set("Anthropic-Beta", strings.Join(betas, ",")+","+OAuthBeta)
}

// Target sets out's URL to base joined with path (which begins with "/")
// and the raw query, and its Host to base's host. The path is appended
// to base's path as given; callers pass a cleaned path.
func Target(out *http.Request, base *url.URL, path, rawQuery string) {
	u := *base
	u.Path = strings.TrimSuffix(base.Path, "/") + path
	u.RawPath = ""
	u.RawQuery = rawQuery
	u.Fragment = ""
	u.User = nil
	out.URL = &u
	out.Host = u.Host
}

// ErrorHandler returns a Forwarder's ErrorHandler that logs err and
// answers a refusal: 504 when the upstream timed out, 502 otherwise, or
// the refusal the broker made beneath the transport, logged as the
// broker's ("proxy: refused by the broker"), not as the upstream's. The
// box never sees err's text. what names the upstream in the message; the
// log line names the credential pool's entry too, when the request's
// context notes one (WithEntry), so that an operator can tell which
// entry's URL failed. A request the broker cut (LogCut) is answered by
// the broker, not here.
func ErrorHandler(log *slog.Logger, what string) func(http.ResponseWriter, *http.Request, error) {
	return func(w http.ResponseWriter, r *http.Request, err error) {
		if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
			// The box went away; there is no one to answer.
			log.Debug("proxy: client gone", "upstream", what)
			return
		}
		if LogCut(log, err, "proxy", "upstream", what) {
			return
		}
		ce := Classify(err, what)
		args := []any{"upstream", what}
		if e := EntryFrom(r.Context()); e != "" {
			args = append(args, "entry", e)
		}
		msg := "proxy: upstream failed"
		if made := (*capability.Error)(nil); errors.As(err, &made) {
			// A refusal the broker made beneath the transport (Classify
			// keeps it): no upstream failed.
			msg = "proxy: refused by the broker"
		}
		log.Log(r.Context(), ce.LogLevel(), msg, append(args, "status", ce.Status, "err", err)...)
		TraceFrom(r.Context()).Refuse(ce.Reason)
		ce.Write(w)
	}
}

// LogCut reports whether err is the broker's cut of its request
// (capability.Cut: its box was refused as its body was read or its answer
// written) and, when it is, logs it at Info as the box's refusal, naming
// the reason, with prefix (the capability's) and args (naming the
// upstream). Such an error is no upstream's failure: the ErrorHandler
// that meets it writes nothing (the broker answers the box with its
// refusal, and its records keep the refusal's reason) and logs nothing
// more.
func LogCut(log *slog.Logger, err error, prefix string, args ...any) bool {
	reason, ok := capability.Cut(err)
	if ok {
		log.Info(prefix+": request cut by its box's refusal", append(args, "refusal", reason)...)
	}
	return ok
}

// Classify is the refusal for an upstream transport error, with a
// message that is safe to show (what names the upstream). A refusal the
// broker made already (a *capability.Error in err's chain, such as
// decide's for a payer's credential the upstream is never sent) is kept
// as made, its status, type, reason and message (a copy, which the
// caller may add to). Otherwise: a 504 kept
// under capability.ReasonUpstreamFailed when the upstream did not answer
// in time, a 502 under capability.ReasonUpstream for an answer the
// broker cannot read, and a 502 under capability.ReasonUpstreamFailed
// for every other (the upstream refused the connection, could not be
// reached, broke off). err is the refusal's Err, logged, never shown.
func Classify(err error, what string) *capability.Error {
	var (
		ne net.Error
		ee *EncodingError
		ce *capability.Error
	)
	switch {
	case errors.As(err, &ce):
		kept := *ce
		return &kept
	case errors.As(err, &ee):
		ce = capability.Refuse(capability.ReasonUpstream, "The %s answered %s, which the broker cannot read to keep its credentials out, so the answer was withheld.", what, ee.Why)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		ce = capability.Refuse(capability.ReasonUpstreamFailed, "The %s did not answer in time.", what).At(http.StatusGatewayTimeout)
	case errors.Is(err, syscall.ECONNREFUSED):
		ce = capability.Refuse(capability.ReasonUpstreamFailed, "The %s refused the connection.", what)
	case errors.Is(err, ErrAnswerCut):
		ce = capability.Refuse(capability.ReasonUpstreamFailed, "The %s broke off its answer before any of it was sent; try again.", what)
	default:
		ce = capability.Refuse(capability.ReasonUpstreamFailed, "The %s could not be reached.", what)
	}
	return ce.WithErr(err)
}
