// Package inference serves /llm/anthropic, an Anthropic API base URL for
// the box: it forwards Messages, count_tokens and models calls with the
// payer's credential in place of the box's token, and streams the answer
// back unchanged. Every refusal on its routes is a 403, never a 401,
// because Claude Code retries a 401 and shows a 403's message at once.
package inference

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/defaults"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/pool"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
)

// Word is the scope word every forwarded call needs.
const Word = "agent"

// agentOnly is the Need of every forwarded call. Its Words are shared by
// every request and never modified.
var agentOnly = capability.Need{Words: []string{Word}}

// Config configures the capability.
type Config struct {
	// Upstream is the Anthropic API's base URL, such as https://api.anthropic.com.
	Upstream *url.URL
	// Transport carries requests upstream.
	Transport http.RoundTripper
	// MaxBody bounds a request body in bytes (default protocol.DefaultMaxBody, 64 MiB).
	MaxBody int64
	// Logger receives upstream failures; never a credential.
	Logger *slog.Logger
	// MaxRetried bounds a request body kept in memory so that the call
	// can be made again on another entry of the operator's pool (default
	// 4 MiB); a larger body is forwarded as it streams and never retried.
	// Below zero, no call is retried.
	MaxRetried int64
	// CloudBeneath says Transport is CloudTransport's (under the spend
	// meter, so that the meter reads the answers it translates). When
	// false, New puts a CloudTransport over Transport itself.
	CloudBeneath bool
}

// Capability is the /llm/anthropic capability.
type Capability struct {
	cfg   Config
	proxy *proxy.Forwarder
}

type ctxKey struct{}

// paidFor carries the credential from Serve to the proxy's Rewrite, its
// transport and ModifyResponse within one request. When the call may fail
// over to another entry of the pool, it also holds what the call is made
// again with.
type paidFor struct {
	paid capability.Paid
	// retry is set when paid.Failover is and the body fits MaxRetried.
	retry *retry
	// path is the call's path relative to /llm/anthropic, its tokens
	// scrubbed: what a cloud credential's call is made on.
	path string
	// made holds the values made for a cloud credential's call (a
	// signature, an access token), masked in the answer like the
	// credential.
	made []string
	// earlier are the credentials of the entries the call failed over
	// from: the upstream saw them, so they are masked in the answer too.
	earlier [][]byte
}

// New returns the capability.
func New(cfg Config) *Capability {
	defaults.Positive(&cfg.MaxBody, protocol.DefaultMaxBody)
	defaults.Logger(&cfg.Logger)
	cfg.Transport = proxy.Outbound(cfg.Transport)
	if cfg.MaxRetried == 0 {
		cfg.MaxRetried = DefaultMaxRetried
	}
	c := &Capability{cfg: cfg}
	// A call paid with a cloud credential is made in the cloud's form
	// beneath the failover, so that a pool may mix Anthropic keys and
	// cloud accounts and fail over between them.
	base := cfg.Transport
	if !cfg.CloudBeneath {
		base = CloudTransport(cfg.Transport, cfg.Logger)
	}
	c.proxy = proxy.New(c.rewrite, &failover{base: base, log: cfg.Logger, upstream: cfg.Upstream}, failedOn(proxy.ErrorHandler(cfg.Logger, "Anthropic API")))
	c.proxy.ErrorLog = slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn)
	c.proxy.ModifyResponse = c.modifyResponse
	return c
}

// Name is "inference".
func (c *Capability) Name() string { return protocol.Inference }

// Prefixes is /llm/anthropic.
func (c *Capability) Prefixes() []string { return []string{protocol.PrefixAnthropic} }

// Scopes: hello needs nothing and no token; the forwarded calls need
// agent. A GET or HEAD with a body is a 400.
func (c *Capability) Scopes(r *http.Request) (capability.Need, bool, error) {
	if e := capability.BodyOnBodiless(r); e != nil {
		return capability.Need{}, false, e
	}
	p := strings.TrimPrefix(r.URL.Path, protocol.PrefixAnthropic)
	switch {
	case p == "/api/hello":
		return capability.Need{Public: true}, r.Method == http.MethodGet || r.Method == http.MethodHead, nil
	case Forwarded(r.Method, p):
		return agentOnly, true, nil
	}
	return capability.Need{}, false, nil
}

// Forwarded reports whether method and path (relative to /llm/anthropic)
// are a call the proxy forwards.
func Forwarded(method, p string) bool {
	switch method {
	case http.MethodPost:
		return p == "/v1/messages" || p == "/v1/messages/count_tokens"
	case http.MethodGet:
		if p == "/v1/models" {
			return true
		}
		id, ok := strings.CutPrefix(p, "/v1/models/")
		return ok && isModelID(id)
	}
	return false
}

// isModelID reports whether id may be the model id of GET
// /v1/models/<id>: letters, digits and "-._:@" (as the Anthropic API's,
// Bedrock's and Vertex AI's ids are written), and not a dot segment. What
// an upstream could read as another path (a "/" or "\", a dot segment,
// a "%" it would decode once more) is no model id.
func isModelID(id string) bool {
	if id == "" || id == "." || id == ".." {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._:@", c) >= 0) {
			return false
		}
	}
	return true
}

// Serve answers hello, or forwards the call on the payer's credential.
func (c *Capability) Serve(w http.ResponseWriter, r *http.Request, call *capability.Call) error {
	out, err := c.prepare(w, r, call)
	if out == nil || err != nil {
		return err
	}
	c.proxy.ServeHTTP(w, out)
	return nil
}

// prepare answers hello (returning a nil request), or finds who pays and
// returns the request the proxy forwards.
func (c *Capability) prepare(w http.ResponseWriter, r *http.Request, call *capability.Call) (*http.Request, error) {
	if strings.TrimPrefix(r.URL.Path, protocol.PrefixAnthropic) == "/api/hello" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		if r.Method != http.MethodHead {
			_, _ = w.Write([]byte(`{"ok":true}` + "\n"))
		}
		return nil, nil
	}
	// The pool cools an entry per upstream limit: a flood of
	// count_tokens takes no entry away from Messages calls.
	paid, err := call.Payer(pool.ForRoute(r.Context(), poolRoute(strings.TrimPrefix(r.URL.Path, protocol.PrefixAnthropic))), r)
	w.Header().Set(protocol.HeaderPayer, protocol.FormatPayerHeader(paid.Payer))
	if errors.Is(err, capability.ErrNoCredential) {
		return nil, capability.NoCredential(paid.Payer, payer.SetHint(paid.Payer, call.Box.Name))
	}
	if err != nil {
		return nil, capability.PayerUnreadable(err)
	}
	if r.ContentLength > c.cfg.MaxBody {
		return nil, capability.TooLarge(c.cfg.MaxBody)
	}
	// The bound goes on the copy the proxy reads, not on r: the server
	// keeps its own body, and has nothing of ours to drain before it
	// answers.
	pf := &paidFor{paid: paid}
	ctx := context.WithValue(r.Context(), ctxKey{}, pf)
	if paid.Entry != "" {
		ctx = proxy.WithEntry(ctx, paid.Entry)
	}
	out := r.WithContext(ctx)
	out.Body = http.MaxBytesReader(w, r.Body, c.cfg.MaxBody)
	if r.ContentLength != 0 {
		// No token goes upstream, however the body writes it; the
		// scrubber keeps the body's length, so Content-Length holds.
		out.Body = proxy.NewTokenScrubber(out.Body)
	}
	if paid.Failover != nil {
		if err := c.keepForRetry(out, pf); err != nil {
			return nil, err
		}
		if pf.paid.Entry != paid.Entry {
			// The pool chose another entry for the call's model.
			out = out.WithContext(proxy.WithEntry(out.Context(), pf.paid.Entry))
		}
	}
	return out, nil
}

func (c *Capability) rewrite(pr *httputil.ProxyRequest) {
	pf := pr.In.Context().Value(ctxKey{}).(*paidFor)
	proxy.StripBoxHeaders(pr.Out.Header)
	// The answer is scanned for the credential, so it must come readable:
	// with no Accept-Encoding the API answers unencoded.
	pr.Out.Header.Del("Accept-Encoding")
	n := proxy.ScrubHeader(pr.Out.Header)
	p, np := proxy.ScrubTokens(strings.TrimPrefix(pr.In.URL.Path, protocol.PrefixAnthropic))
	q, nq := proxy.ScrubTokens(pr.In.URL.RawQuery)
	if n+np+nq > 0 {
		c.cfg.Logger.Warn("inference: replaced tokens the box sent in headers, path or query", "headers", n, "path", np, "query", nq)
	}
	if rt := pf.retry; rt != nil {
		// The call may be made again on another entry: with these
		// headers, before any credential is put in, and this path.
		rt.header, rt.path, rt.query = pr.Out.Header.Clone(), p, q
	}
	pf.path = p
	target(pr.Out, pf.paid, c.cfg.Upstream, p, q)
}

// modifyResponse keeps the credential out of the answer: in the headers,
// the body and the trailers it is masked, as written or JSON- or
// percent-escaped, with as many asterisks as it spans, so that the
// answer's length, and its Content-Length, stay as the upstream sent
// them; a header whose name holds it is dropped. An event stream's events
// pass on as each ends (proxy.Redactor.PassEvents).
func (c *Capability) modifyResponse(resp *http.Response) error {
	pf := resp.Request.Context().Value(ctxKey{}).(*paidFor)
	cred := pf.paid.Credential
	forms := proxy.NewFormSet(maskForms(cred, cloudSecrets(cred, pf.made), pf.earlier))
	if n := forms.RedactHeader(resp.Header); n > 0 {
		c.cfg.Logger.Warn("inference: masked the credential in upstream response headers that repeated it", "headers", n)
	}
	// The payer header was set on the answer before the call was
	// forwarded; one the upstream sent is not the broker's to pass on.
	delete(resp.Header, protocol.HeaderPayer)
	if pf.paid.Payer.Kind == protocol.PayerShared {
		// The operator's organisation and its entries' quota are not
		// the box's to read: they would tell it which entry pays, and
		// how near a limit it is.
		dropPayerHeaders(resp.Header)
	}
	// Asked for none: an encoded answer, or one whose header is not one
	// identity, cannot be scanned for the credential.
	if err := proxy.Unencoded(resp.Header); err != nil {
		return err
	}
	if resp.Body == nil || resp.Body == http.NoBody {
		return nil
	}
	r := forms.Redactor(resp.Body)
	if proxy.IsEventStream(resp.Header) {
		r.PassEvents()
	}
	log := c.cfg.Logger
	r.OnEnd(func(replaced int) {
		if k := forms.RedactHeader(resp.Trailer); k > 0 || replaced > 0 {
			log.Warn("inference: masked the credential the upstream repeated in an answer", "body", replaced, "trailers", k)
		}
	})
	resp.Body = r
	return nil
}

// dropPayerHeaders removes from an answer the headers that say whose
// organisation paid and what is left of its rate limits:
// anthropic-organization-id and every anthropic-ratelimit-*. A box's
// SDK backs off by retry-after, which stays.
func dropPayerHeaders(h http.Header) {
	for k := range h {
		ck := http.CanonicalHeaderKey(k)
		if ck == "Anthropic-Organization-Id" || strings.HasPrefix(ck, "Anthropic-Ratelimit-") {
			delete(h, k)
		}
	}
}
