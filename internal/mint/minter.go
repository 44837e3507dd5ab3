package mint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/store"
)

// Token is a minted token.
type Token struct {
	// Value is what the broker sends.
	Value string
	// Expires is when it stops working; zero when the endpoint did not say.
	Expires time.Time
	// Refresh is the refresh token the endpoint rotated to; "" when none.
	Refresh string
}

// RefusedError is a token endpoint's refusal (a 4xx answer): the owner's
// grant, key or installation needs renewing. It holds no value.
type RefusedError struct {
	Kind   string
	Status int
	// Code is the OAuth error code (invalid_grant, ...), when one was given.
	Code string
}

// plainCode reports whether an OAuth error code is the short word RFC 6749
// §5.2 makes it (invalid_grant, ...): anything else the endpoint sent is
// left out of the message, which is stored and shown to the owner, in
// case the endpoint echoed a value into it.
func plainCode(code string) bool {
	if code == "" || len(code) > 40 {
		return false
	}
	for _, c := range code {
		if !(c >= 'a' && c <= 'z' || c == '_') {
			return false
		}
	}
	return true
}

func (e *RefusedError) Error() string {
	s := fmt.Sprintf("%s: the token endpoint refused (%d", e.Kind, e.Status)
	if plainCode(e.Code) {
		s += " " + e.Code
	}
	return s + ")"
}

// UnreachableError is a mint that failed for any other reason: the
// endpoint could not be reached, failed (5xx), or answered no token.
type UnreachableError struct {
	Kind string
	Err  error
}

func (e *UnreachableError) Error() string { return e.Kind + ": mint failed: " + e.Err.Error() }
func (e *UnreachableError) Unwrap() error { return e.Err }

type statusError int

func (s statusError) Error() string { return fmt.Sprintf("the token endpoint answered %d", int(s)) }

// scrubbed is err with the given values cut out of its text.
func scrubbed(err error, values ...string) error {
	text := err.Error()
	for _, v := range values {
		if v != "" {
			text = strings.ReplaceAll(text, v, "[value]")
		}
	}
	return errors.New(text)
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

// Timings of a Minter.
const (
	// margin is how long before its expiry a token is minted anew, at most.
	margin = 5 * time.Minute
	// unknownLife is how long a token whose expiry is not known is used.
	unknownLife = time.Hour
	// refusedFor is how long a refusal is given again without asking.
	refusedFor = 30 * time.Second
	// mintTimeout bounds one mint.
	mintTimeout = 30 * time.Second
)

// Config configures a Minter.
type Config struct {
	// Store keeps rotated refresh tokens and refusals; nil keeps them in
	// memory only.
	Store store.Mints
	// Keyring seals the refresh tokens kept. Required.
	Keyring *secrets.Keyring
	// Transport carries minting requests; nil means a clone of
	// http.DefaultTransport without a proxy from the environment. Every
	// request passes a guard that sends it only to the spec's MintURL's
	// scheme and host, and redirects are not followed.
	Transport http.RoundTripper
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// OnMint, when set, is told of every mint.
	OnMint func(Event)
	// Logger receives failures; never a value.
	Logger *slog.Logger
}

// Minter mints, caches and refreshes the tokens of Minted specs.
type Minter struct {
	cfg    Config
	client *http.Client
	group  singleflight.Group

	mu    sync.Mutex // guards cache and mem
	cache map[string]cached
	mem   map[string]store.MintState // the kept states, when there is no Store
}

// cached is a token or a refusal, for one configuration, until until.
type cached struct {
	of      string
	tok     Token
	refused error
	until   time.Time
}

// NewMinter returns a Minter, or an error when Keyring is missing.
func NewMinter(cfg Config) (*Minter, error) {
	if cfg.Keyring == nil {
		return nil, errors.New("mint: no keyring")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	next := cfg.Transport
	if next == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.Proxy = nil
		t.ResponseHeaderTimeout = mintTimeout
		next = t
	}
	return &Minter{
		cfg: cfg,
		client: &http.Client{
			Transport:     pinned{next: next},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			Timeout:       mintTimeout,
		},
		cache: map[string]cached{},
		mem:   map[string]store.MintState{},
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
// asking), any other failure an *UnreachableError.
func (m *Minter) Token(ctx context.Context, ref Ref, spec Minted) (Token, error) {
	if t, err, ok := m.cached(ref); ok {
		return t, err
	}
	ch := m.group.DoChan(ref.key()+"\x00"+ref.Of, func() (any, error) {
		if t, err, ok := m.cached(ref); ok {
			return t, err
		}
		// One box's cancelled request must not fail the others waiting.
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), mintTimeout)
		defer cancel()
		return m.mint(mctx, ref, spec)
	})
	select {
	case res := <-ch:
		t, _ := res.Val.(Token)
		return t, res.Err
	case <-ctx.Done():
		return Token{}, ctx.Err()
	}
}

// Forget drops ref's cached token, as when its host refused it: the next
// call mints anew.
func (m *Minter) Forget(ref Ref, value string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.cache[ref.key()]; ok && c.of == ref.Of && c.tok.Value == value {
		delete(m.cache, ref.key())
	}
}

func (m *Minter) cached(ref Ref) (Token, error, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.cache[ref.key()]
	if !ok || c.of != ref.Of || !m.cfg.Now().Before(c.until) {
		return Token{}, nil, false
	}
	return c.tok, c.refused, true
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
	prev := m.state(ctx, ref)
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
	ev := Event{Ref: ref, Kind: spec.Kind(), Err: err}
	var refused *RefusedError
	switch {
	case errors.As(err, &refused):
		m.put(ref, cached{of: ref.Of, refused: err, until: now.Add(refusedFor)})
		prev.Failure = refused.Error()
		m.save(ctx, ref, prev)
	case err != nil:
		m.cfg.Logger.Warn("mint: failed", "box", ref.Box, "secret", ref.Name, "kind", spec.Kind(), "err", err)
	default:
		ev.Expires = tok.Expires
		m.put(ref, cached{of: ref.Of, tok: tok, until: usableUntil(now, tok)})
		prev.Failure, prev.ExpiresAt = "", tok.Expires
		if tok.Refresh != "" && tok.Refresh != refresh {
			if sealed, serr := m.sealRefresh(ref, tok.Refresh); serr == nil {
				prev.Sealed = sealed
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

func (m *Minter) put(ref Ref, c cached) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cache[ref.key()] = c
}

// RefreshAD is the additional data a kept refresh token is sealed with,
// so that it opens for no other row.
func RefreshAD(box, name string) string { return "secret-refresh:" + box + "/" + name }

func (m *Minter) sealRefresh(ref Ref, refresh string) ([]byte, error) {
	return m.cfg.Keyring.Seal([]byte(refresh), RefreshAD(ref.Box, ref.Name))
}

// state is ref's kept state, or a new one when none is kept for this
// configuration.
func (m *Minter) state(ctx context.Context, ref Ref) store.MintState {
	fresh := store.MintState{Box: ref.Box, Name: ref.Name, Of: ref.Of}
	if m.cfg.Store == nil {
		m.mu.Lock()
		defer m.mu.Unlock()
		if st, ok := m.mem[ref.key()]; ok && st.Of == ref.Of {
			return st
		}
		return fresh
	}
	st, err := m.cfg.Store.MintState(ctx, ref.Box, ref.Name)
	if err != nil || st.Of != ref.Of {
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			m.cfg.Logger.Warn("mint: cannot read the kept state", "box", ref.Box, "secret", ref.Name, "err", err)
		}
		return fresh
	}
	return st
}

func (m *Minter) save(ctx context.Context, ref Ref, st store.MintState) {
	st.UpdatedAt = m.cfg.Now().UTC()
	if m.cfg.Store == nil {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.mem[ref.key()] = st
		return
	}
	if err := m.cfg.Store.SetMintState(ctx, st); err != nil {
		m.cfg.Logger.Warn("mint: cannot keep the state", "box", ref.Box, "secret", ref.Name, "err", err)
	}
}
