// Package egress serves /egress/NAME/<path>: it forwards a box's request
// to the one host its owner saved the secret NAME for, with the secret's
// value in place of the box's token wherever the box put it, and keeps
// the value out of every answer.
//
// The box is given NAME_KEY=<its own token> and
// NAME_BASE_URL=<broker>/egress/NAME, so an app's SDK sends the token
// wherever it would send the key. The broker applies the protocol's rule
// (the box's egress entry must list NAME) before Serve runs; Serve then
// refuses a secret it holds no value for, and otherwise:
//
//   - refuses a request the secret's rules do not allow (403), or past
//     the box's rate for the secret (429), before anything is sent (see
//     checkRules);
//   - builds the outbound URL from the secret's base URL alone, putting
//     only the path after the name (joined under the base's path prefix,
//     with no segment any common server reads as a dot segment, and no
//     NUL) and the query on it, so nothing the box sends can change the
//     scheme, host or port;
//   - replaces the token, as sent or percent- or JSON-escaped, with the
//     value in every request header (Basic credentials included), in the
//     query, and in the body only as the whole value of a top-level form
//     or JSON field the secret names (store.Secret.BodyFields); anywhere
//     else in the body the token, and any other token, becomes a
//     proxy.TokenMarker of its own length (see swapBody); in at most
//     maxWrites places of one request, past which it is refused; drops
//     hop-by-hop headers, Cookie,
//     Proxy-Authorization, chant-grant, forwarding headers, Range and
//     If-Range, asks for gzip or identity, and sets Host to the secret's
//     host;
//   - sends it through a guard that refuses any request for another host,
//     or still holding the token, and (with its own transport) a dialer
//     that connects only to the secret's host:port;
//   - passes redirects back unfollowed, with Location, Content-Location
//     and Link under the secret's base pointed at /egress/NAME (left
//     naming the host for a request in a proxy tunnel, whose client
//     asked the host's own URL: see InTunnel); refuses
//     an answer in a content encoding it cannot read whole; and puts the
//     box's own form in place of every form of the value the broker made
//     (the value, escaped or not, its base64, and the Basic credentials it
//     encoded) in every answer header, 1xx answers and trailers included,
//     and in the answer body, streamed through a proxy.Redactor.
//
// An answer is searched not only for what the broker sent with the
// request it answers, but for every value the box could have had the
// host keep and hand back later, through any secret pinned to it: the
// values of every secret of the box pinned to that host name (read from
// the store), every token minted for them still within its life, the
// values sent there for the box in the last day, and the signatures made
// for it (the last MaxSigned of each secret, each for its life), each
// value with its base64, line-wrapped or not. Nothing another box sent
// is searched for, so the search does not grow with the fleet; a box's
// set is made once and kept for its calls to the host (see written and
// hostSet).
//
// A request with no token is answered 401 with WWW-Authenticate: Basic,
// so that git sends the credentials in its URL.
package egress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/intentius/boxbroker/internal/approval"
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/defaults"
	"github.com/intentius/boxbroker/internal/mint"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/store"
)

// DefaultMaxBody bounds a request body when Config.MaxBody is zero.
const DefaultMaxBody = 256 << 20

// Secrets is where the capability reads secrets: a *cache.Cache, or a
// store.Store itself.
type Secrets interface {
	// SecretOfToken returns a box's sealed secret for a request of the
	// box admitted with the token that hashes to tokenHash, read while
	// the box holds that token, or store.ErrNotFound.
	SecretOfToken(ctx context.Context, box, tokenHash, name string) (store.Secret, error)
}

// Config configures the capability.
type Config struct {
	// Secrets holds the boxes' sealed secrets. Required.
	Secrets Secrets
	// Keyring opens them. Required.
	Keyring *secrets.Keyring
	// Transport carries requests to the secrets' hosts. Nil means egress's
	// own: a pool for each box and secret (never a connection shared by
	// two boxes), each a proxy.NewTransport(TransportOptions) with a
	// dialer that connects only to the host:port of the secret a request
	// is for, and by a name only at an address it may reach (see
	// reachable). Either way every request passes the guard first.
	Transport http.RoundTripper
	// TransportOptions tune the transport egress makes when Transport is nil.
	TransportOptions proxy.TransportOptions
	// Traced, when set, wraps the transport (either) to trace each
	// request to a secret's host (package telemetry's Transport).
	Traced func(http.RoundTripper) http.RoundTripper
	// MaxBody bounds a request body in bytes (default DefaultMaxBody).
	MaxBody int64
	// Mints keeps minted secrets' state: rotated refresh tokens and
	// refusals. Nil keeps it in this process's memory only.
	Mints store.Mints
	// MintTransport carries minting requests to token endpoints; nil
	// means package mint's own. Either way a minting request goes only
	// to its secret's pinned token endpoint.
	MintTransport http.RoundTripper
	// List lists a box's secrets (Sealed left nil): an answer from a
	// host is searched for the values of every secret of the box pinned
	// to that host, read from the store, beside what this process sent
	// there for the box. Nil searches only for what this process sent.
	List Lister
	// RemintEvery is how often, at most, a host's 401 has a minted
	// secret's token minted anew (mint.Config.RemintEvery); zero means
	// mint.DefaultRemintEvery.
	RemintEvery time.Duration
	// Approvals, when set, allows a request outside a secret's rules that
	// an approval in force covers, and opens a proposal for one the
	// owner asks about (package approval). Nil allows only the rules.
	Approvals *approval.Service
	// Now is the clock for minting and signing; nil means time.Now.
	Now func() time.Time
	// Audit, when set, is given an entry for every mint: box, secret,
	// kind and expiry, never a value.
	Audit Auditor
	// Logger receives failures and redactions; never a token or a value.
	Logger *slog.Logger
}

// Lister lists a box's secrets: a store.Store.
type Lister interface {
	// ListSecrets returns a box's secrets by name, Sealed left nil.
	ListSecrets(ctx context.Context, box string) ([]store.Secret, error)
}

// Auditor keeps audit entries: an *outbox.Writer.
type Auditor interface {
	Add(e store.AuditEntry) bool
}

// Capability is the egress capability.
type Capability struct {
	cfg    Config
	log    *slog.Logger
	proxy  *proxy.Forwarder
	minter *mint.Minter
	// written is what the broker wrote to each host, searched for in
	// every answer from it.
	written written
	// rates are each box's token buckets for the secrets with a rate.
	rates rates

	mu        sync.Mutex          // guards lists, sets and setsSwept
	lists     map[string]listing  // by box: its secrets, as List last read them
	sets      map[setKey]*hostSet // by box and host name: its search set there
	setsSwept time.Time           // when sets unused for setIdle were last dropped
}

// listing is a box's secrets as List read them, at at.
type listing struct {
	at   time.Time
	secs []store.Secret
}

// Bounds of the box listings a Capability keeps.
const (
	// listFor is how long a box's listing is used before it is read
	// again (sooner when it lacks the secret a request is for).
	listFor = 10 * time.Second
	// maxLists is how many boxes' listings are kept; past it, all are
	// dropped and read again as needed.
	maxLists = 4096
)

// New returns the capability, or an error when Secrets or Keyring is missing.
func New(cfg Config) (*Capability, error) {
	if cfg.Secrets == nil || cfg.Keyring == nil {
		return nil, errors.New("egress: no secrets or no keyring")
	}
	defaults.Positive(&cfg.MaxBody, DefaultMaxBody)
	defaults.Logger(&cfg.Logger)
	defaults.Clock(&cfg.Now)
	next := cfg.Transport
	if next == nil {
		next = newPools(cfg.TransportOptions)
	}
	if cfg.Traced != nil {
		next = cfg.Traced(next)
	}
	c := &Capability{cfg: cfg, log: cfg.Logger}
	minter, err := mint.NewMinter(mint.Config{Store: cfg.Mints, Keyring: cfg.Keyring, Transport: cfg.MintTransport,
		Now: cfg.Now, OnMint: c.onMint, Logger: cfg.Logger, RemintEvery: cfg.RemintEvery})
	if err != nil {
		return nil, err
	}
	c.minter = minter
	c.proxy = proxy.New(c.rewrite, guard{next: next}, c.errorHandler)
	c.proxy.ErrorLog = slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn)
	c.proxy.ModifyResponse = c.modifyResponse
	c.proxy.Informational = c.informational
	return c, nil
}

// onMint logs and audits a mint: box, secret, kind and expiry, or why it
// failed; never a value.
func (c *Capability) onMint(ev mint.Event) {
	if ev.Err != nil {
		c.log.Warn("egress: mint failed", "box", ev.Ref.Box, "secret", ev.Ref.Name, "kind", ev.Kind, "err", ev.Err.Error())
	} else {
		c.log.Info("egress: minted", "box", ev.Ref.Box, "secret", ev.Ref.Name, "kind", ev.Kind, "expires", ev.Expires)
	}
	if c.cfg.Audit == nil {
		return
	}
	e := store.AuditEntry{Box: ev.Ref.Box, At: c.cfg.Now().UTC(), Method: "MINT", Route: protocol.PrefixEgress + "/" + ev.Ref.Name,
		Capability: protocol.Egress, Words: []string{ev.Ref.Name}, Status: http.StatusOK}
	exp := "no expiry given"
	if !ev.Expires.IsZero() {
		exp = "expires " + ev.Expires.UTC().Format(time.RFC3339)
	}
	article := "a"
	if strings.ContainsAny(ev.Kind[:min(1, len(ev.Kind))], "aeiou") {
		article = "an"
	}
	e.Message = fmt.Sprintf("minted %s %s token for %s (%s)", article, ev.Kind, ev.Ref.Name, exp)
	var (
		refused *mint.RefusedError
		limited *mint.RateLimitedError
	)
	switch {
	case errors.As(ev.Err, &limited):
		e.Status, e.Reason, e.Message = http.StatusTooManyRequests, capability.ReasonMintRateLimited, fmt.Sprintf("%s: %s", ev.Ref.Name, limited.Error())
	case errors.As(ev.Err, &refused):
		e.Status, e.Reason, e.Message = http.StatusBadGateway, capability.ReasonMintRefused, fmt.Sprintf("%s: %s", ev.Ref.Name, refused.Error())
	case ev.Err != nil:
		e.Status, e.Reason, e.Message = http.StatusBadGateway, capability.ReasonMintFailed, fmt.Sprintf("%s: %s mint failed", ev.Ref.Name, ev.Kind)
	}
	c.cfg.Audit.Add(e)
}

// Name is "egress".
func (c *Capability) Name() string { return protocol.Egress }

// Prefixes is /egress.
func (c *Capability) Prefixes() []string { return []string{protocol.PrefixEgress} }

// Scopes: /egress/NAME and /egress/NAME/<path>, any method, need NAME. A
// path whose name is not a secret's name (empty, lower case, too long,
// percent-encoded) is not served.
func (c *Capability) Scopes(r *http.Request) (capability.Need, bool, error) {
	name, _, ok := split(r.URL)
	if !ok {
		return capability.Need{}, false, nil
	}
	return capability.Need{Words: []string{name}}, true, nil
}

// split returns the secret's name and the escaped rest of u's path after
// it ("" or beginning with "/").
func split(u *url.URL) (name, tail string, ok bool) {
	p := u.EscapedPath()
	if u.RawPath != "" {
		if dec, err := url.PathUnescape(u.RawPath); err == nil && dec == u.Path {
			p = u.RawPath
		}
	}
	rest, ok := strings.CutPrefix(p, protocol.PrefixEgress+"/")
	if !ok {
		return "", "", false
	}
	name, tail = rest, ""
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		name, tail = rest[:i], rest[i:]
	}
	if !protocol.IsSecretName(name) {
		return "", "", false
	}
	return name, tail, true
}

type ctxKey struct{}

// flight is one forwarded request's state, from Serve to the proxy's
// Rewrite, guard, dialer, ModifyResponse and error handler.
type flight struct {
	box    string // the box the request is of, whose pool carries it
	name   string
	token  string   // the box's token, which never leaves
	value  string   // the secret's value, which never comes back
	base   *url.URL // the secret's base URL
	target *url.URL // where the request goes
	addr   string   // the host:port it may dial
	host   string   // the host's name, as written tells hosts apart
	// tunnel says the request came through an HTTPS proxy tunnel (see
	// InTunnel): the answer's links are left naming the host.
	tunnel bool
	// kept is the box's search set at the host (see
	// Capability.hostForms), which holds the value. set is what an
	// answer is searched for: kept with the box's token as its own,
	// and the forms of this request alone (Basic credentials the broker
	// encoded, a configuration's own secrets, signatures). Set by
	// Rewrite, before the request is sent.
	kept *hostSet
	set  *proxy.FormSet
	// signed are the signatures made for the box's earlier requests to
	// the host, still held (see written).
	signed []string
	// hidden are a minted or signing kind's own secrets (a client
	// secret, a refresh token, a key), and made the values the broker
	// made for this request (a signature): each is replaced by
	// [redacted] in this request's answer.
	hidden, made []string
	// ref names a minted token's configuration; nil for any other kind.
	ref *mint.Ref
	// signer signs the request (aws-sigv4, hmac); nil for any other kind.
	// body is the body it signs, unsigned says it goes unsigned, and
	// signErr is why signing failed, for the guard to refuse.
	signer   mint.Signer
	body     []byte
	unsigned bool
	signErr  error
}

// redacted replaces a value of the broker's own in an answer.
const redacted = "[redacted]"

// setForms sets f's answer set, with the Basic credentials basics:
// the box's set at the host, with the box's token as its own, and the
// forms of this request that it lacks (the Basic credentials encoded,
// the configuration's own secrets, the signatures made) first. A
// request with none of them (a plain value in a header or the query)
// costs no set made.
func (f *flight) setForms(basics []basicSwap) {
	var extra []proxy.Form
	add := func(fm proxy.Form) {
		if _, ok := f.kept.seen[string(fm.Old)]; !ok {
			extra = append(extra, fm)
		}
	}
	if f.value != "" {
		// The request's own, however short.
		for _, fm := range answerForms(f.token, f.value, basics) {
			add(fm)
		}
	}
	for _, v := range append(append(append([]string(nil), f.hidden...), f.made...), f.signed...) {
		if len(v) >= minKept {
			add(proxy.Form{Old: []byte(v), New: []byte(redacted), Escaped: true})
		}
	}
	f.set = f.kept.set.WithOwn([]byte(f.token)).With(extra)
}

// answerForms are the forms of the value the broker produced for this
// request, each with the box's own form in its place: the value as it
// is, or with any bytes percent- or JSON-escaped (its query-escaped form
// among them) for the box's token, and each Basic credential the broker
// encoded, padded or not, for the one the box sent.
func answerForms(token, value string, basics []basicSwap) []proxy.Form {
	forms := []proxy.Form{{Old: []byte(value), New: []byte(token), Escaped: true}}
	for _, b := range basics {
		forms = append(forms,
			proxy.Form{Old: []byte(b.sent), New: []byte(b.box), Escaped: true},
			proxy.Form{Old: []byte(strings.TrimRight(b.sent, "=")), New: []byte(strings.TrimRight(b.box, "=")), Escaped: true})
	}
	return forms
}

func flightOf(ctx context.Context) *flight {
	f, _ := ctx.Value(ctxKey{}).(*flight)
	return f
}

// Serve forwards the request to the secret's host, or refuses it.
func (c *Capability) Serve(w http.ResponseWriter, r *http.Request, call *capability.Call) error {
	name, tail, ok := split(r.URL)
	if !ok {
		return capability.NotFound(r)
	}
	if r.Header.Get("Upgrade") != "" {
		return capability.Refuse(capability.ReasonNotSupported,
			"Egress does not carry protocol upgrades such as WebSocket: the broker could not keep %s's value out of them.", name)
	}
	// Read while the box holds the token its request was admitted
	// with: a request of a box removed, or whose token was replaced,
	// since (or admitted from memory not yet told of it) is given no
	// value of the box added under its name.
	sec, err := c.cfg.Secrets.SecretOfToken(r.Context(), call.Box.Name, call.TokenHash, name)
	if errors.Is(err, store.ErrNotFound) {
		return capability.Refuse(capability.ReasonNoSecret,
			"The broker holds no value for the secret %s for this box; its owner sets one with `boxbroker secret set %s %s --host <base URL>`.",
			name, call.Box.Name, name)
	}
	if err != nil {
		return capability.Unavailable(err)
	}
	if call.TokenInBody {
		if err := checkBodyToken(r, sec, call.Token); err != nil {
			return err
		}
	}
	// The broker always authenticates egress; Forward refuses an empty
	// token all the same, never to swap an empty string.
	return c.Forward(w, r, call.Box.Name, call.Token, call.TokenHash, sec, tail)
}

// Forward sends r, a request of the box named box that carries its
// token (whose hash is tokenHash), to sec's host, at tail (the escaped path after the secret's
// name, "" or beginning with "/") under sec's base URL, with r's query.
// It is the one step that puts a secret into an outbound request: sec's
// value in place of token (a plain secret's own, or the token minted for
// a github-app or oauth2 secret), or, for a signing kind (aws-sigv4,
// hmac), the token removed and the request signed; and it keeps every
// value the broker sent or made out of the answer. It writes the answer,
// or returns the refusal.
func (c *Capability) Forward(w http.ResponseWriter, r *http.Request, box, token, tokenHash string, sec store.Secret, tail string) error {
	name := sec.Name
	base, err := protocol.ParseSecretHost(sec.Host)
	if err != nil {
		return capability.Refuse(capability.ReasonConfig, "The broker's record of %s's host is not a usable base URL; its owner sets it again with `boxbroker secret set`.", name).WithErr(fmt.Errorf("secret %s/%s: %w", box, name, err))
	}
	if token == "" {
		return capability.Refuse(capability.ReasonToken, "The request carries no box token.")
	}
	if len(sec.Rules) > 0 || sec.Rate != "" {
		// The path checks first, so that a rule is matched only against
		// a path the broker would send.
		if _, _, err := joinPath(base, tail); err != nil {
			return capability.Refuse(capability.ReasonInvalid, "%s", err) // a *pathError, for the box
		}
		if err := c.checkRules(r, box, token, tokenHash, sec, tail); err != nil {
			return err
		}
	}
	f := &flight{box: box, name: name, tunnel: inTunnel(r.Context()), token: token, base: base, host: hostKey(base.Hostname())}
	if err := c.inject(r, box, sec, f); err != nil {
		return err
	}
	writes := 0
	if f.signer == nil {
		if writes = headWrites(r, token); writes > maxWrites {
			return tooManyWrites(name, writes)
		}
	}
	switch {
	case f.ref != nil:
		c.written.sentMinted(f.host, *f.ref, c.cfg.Now())
	case f.signer == nil:
		c.written.sentValue(f.host, box, name, f.value, c.cfg.Now())
	default:
		_, f.signed, _, _ = c.written.mine(f.host, box, c.cfg.Now())
	}
	if f.kept, err = c.hostForms(r.Context(), box, tokenHash, sec, f.value, f.host); err != nil {
		return capability.Unavailable(err)
	}
	target, err := outbound(base, tail, r.URL.RawQuery, token, f.value)
	if err != nil {
		return capability.Refuse(capability.ReasonInvalid, "%s", err) // a *pathError, for the box
	}
	f.target, f.addr = target, dialAddr(target)
	if r.ContentLength > c.cfg.MaxBody {
		return capability.TooLarge(c.cfg.MaxBody)
	}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = http.MaxBytesReader(w, r.Body, c.cfg.MaxBody)
	}
	if f.signer != nil {
		if err := signedBody(r, f); err != nil {
			return err
		}
	} else if err := swapBody(r, token, f.value, sec.BodyFields, maxWrites-writes); err != nil {
		var we *writesError
		if errors.As(err, &we) {
			return tooManyWrites(name, writes+we.n)
		}
		return capability.UnreadableBody(err)
	}
	c.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, f)))
	return nil
}

// inject opens sec and sets what f sends: a plain value, a token minted
// for it, or the signer that signs each request.
func (c *Capability) inject(r *http.Request, box string, sec store.Secret, f *flight) error {
	name := sec.Name
	plain, err := c.cfg.Keyring.Open(sec.Sealed, secrets.SecretAD(box, name))
	if err != nil {
		return capability.Refuse(capability.ReasonConfig, "The broker could not open %s's value.", name).WithErr(fmt.Errorf("secret %s/%s: %w", box, name, err))
	}
	defer secrets.Zero(plain)
	if sec.Kind == "" {
		f.value = string(plain)
		if f.value == "" {
			return capability.Refuse(capability.ReasonNoSecret, "The broker holds no value for the secret %s for this box.", name)
		}
		return nil
	}
	spec, err := mint.Parse(sec.Kind, plain)
	if err != nil {
		return capability.Refuse(capability.ReasonConfig, "The broker's configuration of %s (%s) is not usable; its owner sets it again with `boxbroker secret set %s %s --host %s --kind %s`.", name, sec.Kind, box, name, sec.Host, sec.Kind).WithErr(fmt.Errorf("secret %s/%s: %w", box, name, err))
	}
	f.hidden = spec.Secrets()
	switch spec := spec.(type) {
	case mint.Signer:
		f.signer = spec
		if strings.HasPrefix(r.Header.Get("X-Amz-Content-Sha256"), "STREAMING-") {
			return capability.Refuse(capability.ReasonInvalid,
				"The request's body is signed in chunks (x-amz-content-sha256: %s), with the box's token as the key; the broker signs %s's requests itself and cannot sign chunks again. Turn off chunked signing in the SDK (for S3, a checksum or unsigned payload setting) so the body goes whole.", r.Header.Get("X-Amz-Content-Sha256"), name)
		}
	case mint.Minted:
		ref := mint.Ref{Box: box, Name: name, Of: mint.Of(sec.Sealed)}
		tok, err := c.minter.Token(r.Context(), ref, spec)
		if err != nil {
			return mintRefusal(box, sec, err, c.cfg.Now())
		}
		f.value, f.ref = tok.Value, &ref
	}
	return nil
}

// mintRefusal is the box's refusal of a mint that failed: a 429 with
// Retry-After when the token endpoint limits the rate of mints, a 502
// that says what the owner must renew when it refused, and a 502 to try
// again otherwise.
func mintRefusal(box string, sec store.Secret, err error, now time.Time) error {
	var (
		refused *mint.RefusedError
		limited *mint.RateLimitedError
	)
	if errors.As(err, &limited) {
		wait := max(int64(math.Ceil(limited.Until.Sub(now).Seconds())), 1)
		e := capability.Refuse(capability.ReasonMintRateLimited,
			"The token endpoint of the secret %s limits the rate of mints just now (%d), so the broker has no token for it; it asks again in %d s. Nothing needs renewing.",
			sec.Name, limited.Status, wait)
		e.Err, e.Header = err, http.Header{"Retry-After": {strconv.FormatInt(wait, 10)}}
		return e
	}
	if errors.As(err, &refused) {
		what := "the owner's OAuth grant needs renewing"
		if sec.Kind == mint.KindGitHubApp {
			what = "the owner's GitHub App key or installation needs renewing"
		}
		return capability.Refuse(capability.ReasonMintRefused, "The token endpoint refused to mint %s's token (%d): %s, with `boxbroker secret set %s %s --host %s --kind %s`.",
			sec.Name, refused.Status, what, box, sec.Name, sec.Host, sec.Kind).WithErr(err)
	}
	return capability.Refuse(capability.ReasonMintFailed, "The broker could not mint %s's token just now; try again shortly.", sec.Name).WithErr(err)
}
