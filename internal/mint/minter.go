package mint

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/intentius/boxbroker/internal/defaults"
	"github.com/intentius/boxbroker/internal/hold"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/quiet"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/deadline"
)

// Token is a minted token.
type Token struct {
	// Value is what the broker sends.
	Value string
	// Expires is when it stops working; zero when the endpoint did not say.
	Expires time.Time
	// Refresh is the refresh token the endpoint rotated to; "" when none.
	Refresh string

	// sent is what the mint sent the token endpoint that no answer to a
	// box may carry (a GitHub App's JWT, the refresh token), and
	// sentUntil when it stops working.
	sent      string
	sentUntil time.Time
}

// Of names a configuration: the SHA-256 (hex) of its sealed form, which
// changes whenever the secret is set again.
func Of(sealed []byte) string {
	h := sha256.Sum256(sealed)
	return hex.EncodeToString(h[:])
}

// Ref names one secret's configuration.
type Ref struct {
	Box, Name string
	// Of is Of(the secret's Sealed).
	Of string
}

func (r Ref) key() string { return r.Box + "/" + r.Name }

// Event is one mint, for the audit log: never a value.
type Event struct {
	Ref     Ref
	Kind    string
	Expires time.Time
	// Err is why it failed; nil when it succeeded.
	Err error
}

// MaxToken bounds a token a token endpoint answers, and the refresh
// token it rotates to: a longer one is no token (an *UnreachableError).
// The longest tokens in use (JWTs with many claims) are a few KiB.
const MaxToken = 16 << 10

// Timings and bounds of a Minter.
const (
	// margin is how long before its expiry a token is minted anew, at most.
	margin = 5 * time.Minute
	// unknownLife is how long a token whose expiry is not known is used.
	unknownLife = time.Hour
	// keptUnknown is how long a token whose expiry is not known is kept
	// (see Kept) after it was minted: it may work for longer than it is
	// used.
	keptUnknown = 24 * time.Hour
	// refusedFor is how long a refusal is given again without asking.
	refusedFor = 30 * time.Second
	// mintTimeout bounds one mint.
	mintTimeout = 30 * time.Second
	// DefaultRemintEvery is Config.RemintEvery when it is zero.
	DefaultRemintEvery = hold.DefaultFloor
	// MaxLive is how many tokens of one secret may be within their life
	// at once for a host's 401 to drop the newest: past it, Forget keeps
	// the token it is told of, so a box that has its requests answered
	// 401 cannot have more minted than Kept keeps.
	MaxLive = 64
	// maxKept bounds the tokens and sent values Kept holds for one
	// secret, each until its life ends; past it, the oldest goes. Only
	// mints at expiry, at most one each a token's life less its margin,
	// can take a secret past MaxLive towards it.
	maxKept = 4 * MaxLive
)

// Config configures a Minter.
type Config struct {
	// Store keeps rotated refresh tokens and refusals; nil keeps them in
	// memory only.
	Store store.Mints
	// Keyring seals the refresh tokens kept. Required.
	Keyring *secrets.Keyring
	// Transport carries minting requests; nil means a
	// proxy.NewTransport, as every other upstream's (bounded waits and
	// answer header, TLS verified, no proxy from the environment). Every
	// request passes a guard that sends it only to the spec's MintURL's
	// scheme and host, and redirects are not followed; it reaches the
	// Transport through proxy.ReachOnly, so that a NewTransport connects
	// only at an address egress would reach a secret's host of the token
	// endpoint's name at (proxy.Reachable), after the name is looked up:
	// a token endpoint whose DNS answers this machine or a cloud metadata
	// service is not sent the secret's credentials.
	Transport http.RoundTripper
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// resolver looks up token endpoints' names for the default
	// Transport; nil means net.DefaultResolver. Tests set it.
	resolver *net.Resolver
	// roots are the certificate authorities the default Transport
	// trusts; nil means the system's. Tests set it.
	roots *x509.CertPool
	// OnMint, when set, is told of every mint.
	OnMint func(Event)
	// RemintEvery is how often, at most, a host's 401 (Forget) drops a
	// secret's token so that the next call mints anew; zero means
	// DefaultRemintEvery. A 401 sooner than that after the last one that
	// did is ignored, and the token kept: however many requests a host
	// answers 401, and for however many boxes, a secret is minted again
	// at most once each RemintEvery.
	RemintEvery time.Duration
	// Logger receives failures; never a value.
	Logger *slog.Logger
}

// Minter mints, caches and refreshes the tokens of Minted specs.
type Minter struct {
	cfg    Config
	client *http.Client
	group  singleflight.Group

	// held is, by Ref.key, the token, refusal or rate limit of each
	// secret's configuration, until it is minted anew.
	held hold.Cache[string, cached]

	mu sync.Mutex // guards mem and kept
	// mem is the kept states when there is no Store, and, when there
	// is, those the Store failed to keep, until it keeps them.
	mem map[string]store.MintState
	// kept is, by Ref.key, what each secret's mints made that is still
	// within its life, oldest first (see Kept).
	kept map[string][]made
}

// cached is a token, or with a failure held, the configuration alone.
type cached struct {
	of  string
	tok Token
}

// made is a value a mint made, until it stops working: a token (sent to
// the secret's host) or what the mint sent the token endpoint.
type made struct {
	value string
	token bool
	until time.Time
}

// NewMinter returns a Minter, or an error when Keyring is missing.
func NewMinter(cfg Config) (*Minter, error) {
	if cfg.Keyring == nil {
		return nil, errors.New("mint: no keyring")
	}
	defaults.Clock(&cfg.Now)
	defaults.Logger(&cfg.Logger)
	defaults.Positive(&cfg.RemintEvery, DefaultRemintEvery)
	next := cfg.Transport
	if next == nil {
		t := proxy.NewTransport(proxy.TransportOptions{ResponseHeaderTimeout: mintTimeout, Resolver: cfg.resolver})
		if cfg.roots != nil {
			t.TLSClientConfig = &tls.Config{RootCAs: cfg.roots}
		}
		next = t
	}
	return &Minter{
		cfg:  cfg,
		held: hold.Cache[string, cached]{Floor: cfg.RemintEvery},
		client: &http.Client{
			Transport:     pinned{next: quiet.Errors(proxy.ReachOnly(next))},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			Timeout:       mintTimeout,
		},
		mem:  map[string]store.MintState{},
		kept: map[string][]made{},
	}, nil
}

type pinKey struct{}

// errNotPinned is a minting request for anywhere but the spec's MintURL.
var errNotPinned = errors.New("mint: request is not for the pinned token endpoint")

// pinned sends a request on only when it is for the scheme and host of
// the URL its context pins.
type pinned struct{ next http.RoundTripper }

func (p pinned) RoundTrip(req *http.Request) (*http.Response, error) {
	want, _ := req.Context().Value(pinKey{}).(string)
	if want == "" || req.URL.Scheme+"://"+req.URL.Host != want || req.URL.User != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, errNotPinned
	}
	return p.next.RoundTrip(req)
}

// Token returns spec's token for ref: the cached one until shortly
// before it expires, or a new one. Concurrent calls for one ref make one
// mint. A refusal is a *RefusedError (given again for a while without
// asking), a rate limit a *RateLimitedError (given again until its
// Until without asking), any other failure an *UnreachableError.
func (m *Minter) Token(ctx context.Context, ref Ref, spec Minted) (Token, error) {
	if t, err, ok := m.cached(ref); ok {
		return t, err
	}
	return hold.Shared(ctx, &m.group, ref.key()+"\x00"+ref.Of, func() (Token, error) {
		if t, err, ok := m.cached(ref); ok {
			return t, err
		}
		// One box's cancelled request must not fail the others waiting.
		// A mint's store writes (a rotated refresh token, which the
		// host will not give again) are bounded by the mint's own
		// timeout, not by a request's store deadline.
		mctx, cancel := context.WithTimeout(deadline.Within(context.WithoutCancel(ctx), 0), mintTimeout)
		defer cancel()
		return m.mint(mctx, ref, spec)
	})
}

// Forget drops ref's cached token when it is value, as when its host
// answered 401 (the token may have been revoked), so that the next call
// mints anew. It does so at most once each Config.RemintEvery for one
// secret, and not while MaxLive of its tokens are within their life;
// otherwise the token is kept, and used until the next 401 that may drop
// it. It reports whether it dropped the token.
func (m *Minter) Forget(ref Ref, value string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.cfg.Now()
	return m.held.Drop(ref.key(), now, func(c cached) bool {
		if c.of != ref.Of || c.tok.Value != value {
			return false
		}
		live := 0
		for _, k := range m.keptLocked(ref, now) {
			if k.token {
				live++
			}
		}
		return live < MaxLive
	})
}

// Kept returns what ref's secret's mints made that is still within its
// life, whatever its configuration: tokens (sent to the secret's host)
// until they expire (for a token with no expiry given, for a day after it
// was minted), and what a mint sent the token endpoint (a GitHub App's
// JWT until it expires, a refresh token for a day after it was sent).
// The owner's box and secret name alone are read of ref. Answers from
// the host are searched for every one, so that a token the host keeps is
// not handed back to a box after a newer one replaced it. At most a few
// hundred are kept for one secret.
func (m *Minter) Kept(ref Ref) (tokens, sent []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range m.keptLocked(ref, m.cfg.Now()) {
		if k.token {
			tokens = append(tokens, k.value)
		} else {
			sent = append(sent, k.value)
		}
	}
	return tokens, sent
}

// keptLocked is ref's kept values, those past their life dropped.
func (m *Minter) keptLocked(ref Ref, now time.Time) []made {
	live := slices.DeleteFunc(m.kept[ref.key()], func(k made) bool { return !now.Before(k.until) })
	if len(live) == 0 {
		delete(m.kept, ref.key())
		return nil
	}
	m.kept[ref.key()] = live
	return live
}

// keep adds what a mint made to ref's kept values: its token until it
// expires, and at least until used, the broker's last use of it.
func (m *Minter) keep(ref Ref, now time.Time, tok Token, used time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ks := m.keptLocked(ref, now)
	until := later(tok.Expires, used)
	if tok.Expires.IsZero() {
		until = now.Add(keptUnknown)
	}
	ks = append(ks, made{value: tok.Value, token: true, until: until})
	if tok.sent != "" {
		ks = append(ks, made{value: tok.sent, until: tok.sentUntil})
	}
	if len(ks) > maxKept {
		ks = append(ks[:0], ks[len(ks)-maxKept:]...)
	}
	m.kept[ref.key()] = ks
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (m *Minter) cached(ref Ref) (Token, error, bool) {
	c, err, ok := m.held.Get(ref.key(), m.cfg.Now())
	if !ok || c.of != ref.Of {
		return Token{}, nil, false
	}
	return c.tok, err, true
}

// usableUntil is when a token is minted anew: a little before it expires.
func usableUntil(now time.Time, t Token) time.Time {
	if t.Expires.IsZero() {
		return now.Add(unknownLife)
	}
	life := t.Expires.Sub(now)
	if life <= 0 {
		return now // already expired: not used again
	}
	return t.Expires.Add(-min(margin, life/4))
}

func (m *Minter) mint(ctx context.Context, ref Ref, spec Minted) (Token, error) {
	ctx = context.WithValue(ctx, pinKey{}, spec.MintURL().Scheme+"://"+spec.MintURL().Host)
	prev, unread := m.state(ctx, ref)
	if unread && spec.rotates() {
		// The kept refresh token may be the only one that works: the
		// configuration's own may have been used already, and an
		// endpoint that detects reuse revokes the whole grant for it.
		// No mint, and no state written over the kept one.
		err := &UnreachableError{Kind: spec.Kind(), Err: errors.New("the kept refresh token could not be read from the store")}
		m.held.Put(ref.key(), cached{of: ref.Of}, err, m.cfg.Now().Add(m.cfg.RemintEvery))
		if m.cfg.OnMint != nil {
			m.cfg.OnMint(Event{Ref: ref, Kind: spec.Kind(), Err: err})
		}
		return Token{}, err
	}
	refresh := ""
	if prev.Sealed != nil {
		plain, err := m.cfg.Keyring.Open(prev.Sealed, RefreshAD(ref.Box, ref.Name))
		if err != nil {
			m.cfg.Logger.Warn("mint: the kept refresh token does not open; using the configuration's", "box", ref.Box, "secret", ref.Name)
		} else {
			refresh = string(plain)
			secrets.Zero(plain)
		}
	}
	now := m.cfg.Now()
	tok, err := spec.mint(ctx, m.client, now, refresh)
	if err == nil && (len(tok.Value) > MaxToken || len(tok.Refresh) > MaxToken) {
		tok, err = Token{}, &UnreachableError{Kind: spec.Kind(), Err: fmt.Errorf("the token endpoint answered a token over %d bytes", MaxToken)}
	}
	ev := Event{Ref: ref, Kind: spec.Kind(), Err: err}
	var (
		refused *RefusedError
		limited *RateLimitedError
	)
	switch {
	case errors.As(err, &limited):
		m.held.Put(ref.key(), cached{of: ref.Of}, err, limited.Until)
		prev.Failure = RateLimitedMark + limited.Error()
		m.save(ctx, ref, prev)
	case errors.As(err, &refused):
		m.held.Put(ref.key(), cached{of: ref.Of}, err, now.Add(refusedFor))
		prev.Failure = refused.Error()
		m.save(ctx, ref, prev)
	case err != nil:
		m.cfg.Logger.Warn("mint: failed", "box", ref.Box, "secret", ref.Name, "kind", spec.Kind(), "err", err)
		// Given again without asking until RemintEvery has passed: a
		// box's requests while the endpoint fails cost it no mints.
		m.held.Put(ref.key(), cached{of: ref.Of}, err, now.Add(m.cfg.RemintEvery))
	default:
		ev.Expires = tok.Expires
		// A token is used for RemintEvery at least, whatever expiry the
		// endpoint gave (one already past by the broker's clock, as a
		// negative expires_in or a clock apart makes it), so that a
		// box's requests cost at most one mint each RemintEvery; a host
		// that no longer takes it answers 401, and Forget drops it.
		until := m.held.Until(now, usableUntil(now, tok))
		m.keep(ref, now, tok, until)
		tok.sent, tok.sentUntil = "", time.Time{}
		m.held.Put(ref.key(), cached{of: ref.Of, tok: tok}, nil, until)
		prev.Failure, prev.ExpiresAt = "", tok.Expires
		if tok.Refresh != "" && tok.Refresh != refresh {
			if sealed, serr := m.cfg.Keyring.Seal([]byte(tok.Refresh), RefreshAD(ref.Box, ref.Name)); serr == nil {
				prev.Sealed = sealed
			} else {
				m.cfg.Logger.Error("mint: cannot seal the rotated refresh token; the grant may need renewing once this token expires", "box", ref.Box, "secret", ref.Name, "err", serr)
			}
		}
		m.save(ctx, ref, prev)
		tok.Refresh = ""
	}
	if m.cfg.OnMint != nil {
		m.cfg.OnMint(ev)
	}
	return tok, err
}

// RefreshAD is the additional data a kept refresh token is sealed with,
// so that it opens for no other row.
func RefreshAD(box, name string) string { return "secret-refresh:" + box + "/" + name }

// state is ref's kept state, or a new one when none is kept for this
// configuration; unread is true when the store could not be read (the
// new one is then no sign that none is kept).
func (m *Minter) state(ctx context.Context, ref Ref) (st store.MintState, unread bool) {
	fresh := store.MintState{Box: ref.Box, Name: ref.Name, Of: ref.Of}
	if m.cfg.Store == nil {
		m.mu.Lock()
		defer m.mu.Unlock()
		if st, ok := m.mem[ref.key()]; ok && st.Of == ref.Of {
			return st, false
		}
		return fresh, false
	}
	m.mu.Lock()
	kept, ok := m.mem[ref.key()]
	m.mu.Unlock()
	if ok && kept.Of == ref.Of {
		return kept, false // newer than the store's, which failed to keep it
	}
	st, err := m.cfg.Store.MintState(ctx, ref.Box, ref.Name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		m.cfg.Logger.Warn("mint: cannot read the kept state", "box", ref.Box, "secret", ref.Name, "err", err)
		return fresh, true
	}
	if err != nil || st.Of != ref.Of {
		return fresh, false
	}
	return st, false
}

func (m *Minter) save(ctx context.Context, ref Ref, st store.MintState) {
	st.UpdatedAt = m.cfg.Now().UTC()
	if m.cfg.Store == nil {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.mem[ref.key()] = st
		return
	}
	err := m.cfg.Store.SetMintState(ctx, st)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		// Kept in memory instead, so that the next mint uses the
		// rotated refresh token, and saved with its state then.
		m.cfg.Logger.Warn("mint: cannot keep the state; kept in memory until the store takes it", "box", ref.Box, "secret", ref.Name, "err", err)
		m.mem[ref.key()] = st
		return
	}
	delete(m.mem, ref.key())
}
