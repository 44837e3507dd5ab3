package payer_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/clocktest"
	"github.com/intentius/boxbroker/internal/grant"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

const (
	sharedKey  = "sk-ant-api03-SHARED-0123456789"
	ownerKey   = "sk-ant-api03-OWNER-0123456789"
	visitorKey = "sk-ant-api03-VISITOR-0123456789"
	visitor    = "github:vee"
	messages   = "/llm/anthropic/v1/messages"
	body       = `{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
	decideBody = `{"model":"claude-sonnet-4-5","state":{"n":1},"questions":{"q":{"type":"choice","instructions":"Pick one.","criteria":["x","y"]}}}`
)

// route is a model-call route a grant applies to, with a body that makes
// exactly one upstream call.
type route struct {
	name, path, body string
}

// routes are /llm/anthropic and /decide.
var routes = []route{
	{"messages", messages, body},
	{"decide", protocol.RouteDecide, decideBody},
}

// fixture is a broker with boxes a and b reporting inference/agent, the
// shared credential set, a visitor holding a credential, and a clock.
type fixture struct {
	*brokertest.Broker
	clock  *clocktest.Clock
	logs   *brokertest.Buffer
	tokenA string
	tokenB string

	mu       sync.Mutex     // guards outcomes
	outcomes map[string]int // what OnGrant was told
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{logs: &brokertest.Buffer{}, clock: clocktest.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))}
	f.outcomes = map[string]int{}
	b := brokertest.New(t, brokertest.Options{Logs: f.logs, ServerOptions: func(o *server.Options) {
		o.Now = f.clock.Now
		o.OnGrant = func(outcome string) {
			f.mu.Lock()
			f.outcomes[outcome]++
			f.mu.Unlock()
		}
	}})
	f.Broker = b
	f.tokenA = b.AddBox("a")
	f.tokenB = b.AddBox("b")
	b.SetCredential(payer.SharedAnthropic, sharedKey)
	b.SetCredential(payer.VisitorAnthropic(visitor), visitorKey)
	b.Report(f.tokenA, brokertest.Entry("inference", "agent", "decide"))
	b.Report(f.tokenB, brokertest.Entry("inference", "agent", "decide"))
	return f
}

// issue issues a grant through the store, as `boxbroker grant issue` does.
func (f *fixture) issue(t testing.TB, box, principal string, ttl time.Duration) (string, store.Grant) {
	t.Helper()
	v, g, err := grant.Issue(context.Background(), f.Server.Store, box, principal, ttl, f.clock.Now())
	if err != nil {
		t.Fatalf("grant.Issue(%s, %s) = %v", box, principal, err)
	}
	return v, g
}

// setPayer writes a box's payer to the store and lets the cache see it
// through the change log, as another process's write would be seen.
func (f *fixture) setPayer(t *testing.T, box, kind, principal string) {
	t.Helper()
	ctx := context.Background()
	b, err := f.Server.Store.Box(ctx, box)
	if err != nil {
		t.Fatal(err)
	}
	b.PayerKind, b.PayerPrincipal = kind, principal
	if err := f.Server.Store.UpdateBox(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := f.Server.Cache.Poll(ctx); err != nil {
		t.Fatal(err)
	}
}

// call sends a Messages call with token and, when non-nil, the grant
// header values, and returns the answer and what the upstream received.
func (f *fixture) call(t *testing.T, token string, grants []string) (brokertest.Response, brokertest.Seen) {
	t.Helper()
	return f.callRoute(t, routes[0], token, grants)
}

// callRoute is call on route rt.
func (f *fixture) callRoute(t *testing.T, rt route, token string, grants []string) (brokertest.Response, brokertest.Seen) {
	t.Helper()
	h := http.Header{"X-Api-Key": {token}, "Anthropic-Version": {"2023-06-01"}}
	if grants != nil {
		h[protocol.HeaderGrant] = grants
	}
	before := len(f.Upstream.Seen())
	resp := f.Do("POST", rt.path, "", []byte(rt.body), h)
	if resp.StatusCode != 200 {
		t.Fatalf("POST %s = %d %s, want 200", rt.path, resp.StatusCode, resp.Body)
	}
	seen := f.Upstream.Seen()[before:]
	if len(seen) != 1 {
		t.Fatalf("upstream received %d requests, want 1", len(seen))
	}
	return resp, seen[0]
}

// assertOnly checks that of the secrets that might leak, the upstream
// received only want (as x-api-key), and none of the others anywhere.
func assertOnly(t *testing.T, s brokertest.Seen, want string, never ...string) {
	t.Helper()
	if got := s.Header.Get("X-Api-Key"); got != want {
		t.Errorf("upstream x-api-key = %q, want %q", got, want)
	}
	if got := s.Header.Get("Authorization"); got != "" {
		t.Errorf("upstream authorization = %q, want none", got)
	}
	if got := s.Header.Get(protocol.HeaderGrant); got != "" {
		t.Errorf("upstream received chant-grant %q", got)
	}
	var all bytes.Buffer
	s.Header.Write(&all)
	all.WriteString(s.Path + "?" + s.RawQuery + "\n")
	all.Write(s.Body)
	for _, n := range never {
		if n != "" && strings.Contains(all.String(), n) {
			t.Errorf("upstream received %q", n)
		}
	}
}

func TestGrant_VisitorPaysAndOnlyTheirCredentialGoesUpstream(t *testing.T) {
	f := newFixture(t)
	f.SetCredential(payer.OwnerAnthropic("a"), ownerKey)
	tests := []struct {
		name, kind, principal string
	}{
		{"over a shared payer", protocol.PayerShared, ""},
		{"over an owner payer", protocol.PayerOwner, "github:own"},
	}
	for _, tt := range tests {
		for _, rt := range routes {
			t.Run(rt.name+"/"+tt.name, func(t *testing.T) {
				f.setPayer(t, "a", tt.kind, tt.principal)
				value, _ := f.issue(t, "a", visitor, 0)
				resp, seen := f.callRoute(t, rt, f.tokenA, []string{value})
				if got, want := resp.Header.Get(protocol.HeaderPayer), "visitor "+visitor; got != want {
					t.Errorf("chant-payer = %q, want %q", got, want)
				}
				if rt.path == messages && (!bytes.Equal(seen.Body, []byte(body)) || seen.Path != "/v1/messages") {
					t.Errorf("upstream got %s %s, want the body unchanged", seen.Path, seen.Body)
				}
				assertOnly(t, seen, visitorKey, f.tokenA, value, sharedKey, ownerKey, token.Hash(value))
				var answer bytes.Buffer
				resp.Header.Write(&answer)
				answer.Write(resp.Body)
				if strings.Contains(answer.String(), visitorKey) || strings.Contains(answer.String(), value) {
					t.Errorf("answer carries the visitor's credential or the grant")
				}
			})
		}
	}
	if strings.Contains(f.logs.String(), visitorKey) {
		t.Errorf("logs carry the visitor's credential")
	}
}

func TestGrant_FailuresArePaidAsWithout(t *testing.T) {
	f := newFixture(t)
	f.SetCredential(payer.OwnerAnthropic("a"), ownerKey)
	ctx := context.Background()
	const noCred = "github:nocred"
	tests := []struct {
		name   string
		reason string
		// grant returns the header values to send, set up against the store.
		grant func(t *testing.T) []string
	}{
		{"malformed: a space", grant.Malformed, func(t *testing.T) []string { return []string{"bbg_has a space"} }},
		{"malformed: not ASCII", grant.Malformed, func(t *testing.T) []string { return []string{"bbg_caf\u00e9"} }},
		{"malformed: too long", grant.Malformed, func(t *testing.T) []string { return []string{strings.Repeat("g", protocol.MaxGrantLen+1)} }},
		{"malformed: empty", grant.Malformed, func(t *testing.T) []string { return []string{""} }},
		{"malformed: two values", grant.Malformed, func(t *testing.T) []string {
			v, _ := f.issue(t, "a", visitor, 0)
			return []string{v, v}
		}},
		{"unknown", grant.Unknown, func(t *testing.T) []string { return []string{"bbg_NOTISSUEDBYTHISBROKER"} }},
		{"another box's", grant.OtherBox, func(t *testing.T) []string {
			v, _ := f.issue(t, "b", visitor, 0)
			return []string{v}
		}},
		{"expired", grant.Expired, func(t *testing.T) []string {
			v, _ := f.issue(t, "a", visitor, time.Minute)
			f.clock.Advance(time.Minute)
			return []string{v}
		}},
		{"revoked", grant.Revoked, func(t *testing.T) []string {
			v, g := f.issue(t, "a", visitor, 0)
			if err := f.Server.Store.RevokeGrant(ctx, g.ID, f.clock.Now()); err != nil {
				t.Fatal(err)
			}
			return []string{v}
		}},
		{"visitor's credential removed", grant.NoCredential, func(t *testing.T) []string {
			f.SetCredential(payer.VisitorAnthropic(noCred), "sk-ant-api03-GONE")
			v, _ := f.issue(t, "a", noCred, 0)
			if err := f.Server.Store.DeleteCredential(ctx, payer.VisitorAnthropic(noCred)); err != nil {
				t.Fatal(err)
			}
			return []string{v}
		}},
	}
	payers := []struct {
		kind, principal, header, key string
	}{
		{protocol.PayerShared, "", "shared", sharedKey},
		{protocol.PayerOwner, "github:own", "owner github:own", ownerKey},
	}
	for _, p := range payers {
		f.setPayer(t, "a", p.kind, p.principal)
		for _, rt := range routes {
			for _, tt := range tests {
				t.Run(rt.name+"/"+p.kind+"/"+tt.name, func(t *testing.T) {
					values := tt.grant(t)
					before := f.Server.Payer.GrantCounts()
					resp, seen := f.callRoute(t, rt, f.tokenA, values)
					if got := resp.Header.Get(protocol.HeaderPayer); got != p.header {
						t.Errorf("chant-payer = %q, want %q", got, p.header)
					}
					never := append([]string{f.tokenA, visitorKey}, values...)
					assertOnly(t, seen, p.key, never...)
					after := f.Server.Payer.GrantCounts()
					if got := after[tt.reason] - before[tt.reason]; got != 1 {
						t.Errorf("GrantCounts()[%q] rose by %d, want 1", tt.reason, got)
					}
					if got := after[grant.Accepted] - before[grant.Accepted]; got != 0 {
						t.Errorf("GrantCounts()[accepted] rose by %d, want 0", got)
					}
				})
			}
		}
	}
	logs := f.logs.String()
	for _, tt := range tests {
		if !strings.Contains(logs, `"reason":"`+tt.reason+`"`) {
			t.Errorf("no log line gives reason %q", tt.reason)
		}
	}
	if strings.Contains(logs, "bbg_") {
		t.Errorf("a grant value reached the logs")
	}
}

// TestGrant_RevocationExpiryAndRemovalTakeEffectAtTheNextRequest changes
// the store behind the broker's back (no cache drop, no poll) between two
// requests carrying the same grant.
func TestGrant_RevocationExpiryAndRemovalTakeEffectAtTheNextRequest(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		reason string
		change func(t *testing.T, f *fixture, g store.Grant)
	}{
		{"revoked", grant.Revoked, func(t *testing.T, f *fixture, g store.Grant) {
			if err := f.Server.Store.RevokeGrant(ctx, g.ID, f.clock.Now()); err != nil {
				t.Fatal(err)
			}
		}},
		{"expired", grant.Expired, func(t *testing.T, f *fixture, g store.Grant) {
			f.clock.Advance(g.ExpiresAt.Sub(f.clock.Now()))
		}},
		{"credential removed", grant.NoCredential, func(t *testing.T, f *fixture, g store.Grant) {
			if err := f.Server.Store.DeleteCredential(ctx, payer.VisitorAnthropic(g.Principal)); err != nil {
				t.Fatal(err)
			}
		}},
		{"box removed", "", func(t *testing.T, f *fixture, g store.Grant) {
			// The grant goes with its box; a box of the same name made
			// again does not inherit it.
			if err := f.Server.Store.DeleteBox(ctx, "a"); err != nil {
				t.Fatal(err)
			}
			f.tokenA = f.AddBox("a")
			f.Report(f.tokenA, brokertest.Entry("inference", "agent"))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			value, g := f.issue(t, "a", visitor, 10*time.Minute)
			f.clock.Advance(9 * time.Minute)
			resp, seen := f.call(t, f.tokenA, []string{value})
			if got := resp.Header.Get(protocol.HeaderPayer); got != "visitor "+visitor {
				t.Fatalf("before: chant-payer = %q, want visitor %s", got, visitor)
			}
			assertOnly(t, seen, visitorKey)
			tt.change(t, f, g)
			resp, seen = f.call(t, f.tokenA, []string{value})
			if got := resp.Header.Get(protocol.HeaderPayer); got != "shared" {
				t.Errorf("after: chant-payer = %q, want shared", got)
			}
			assertOnly(t, seen, sharedKey, visitorKey, value)
			if tt.reason != "" {
				if got := f.Server.Payer.GrantCounts()[tt.reason]; got != 1 {
					t.Errorf("GrantCounts()[%q] = %d, want 1", tt.reason, got)
				}
			}
		})
	}
}

// TestPayerConsistent holds the declaration answer's payer and a Messages
// answer's chant-payer header to the same payer, for each kind, and shows
// a change is seen at the next call through the change log alone.
func TestPayerConsistent(t *testing.T) {
	f := newFixture(t)
	f.SetCredential(payer.OwnerAnthropic("a"), ownerKey)
	tests := []struct {
		name, kind, principal, header, key string
	}{
		{"shared", protocol.PayerShared, "", "shared", sharedKey},
		{"owner with a principal", protocol.PayerOwner, "github:own", "owner github:own", ownerKey},
		{"owner unknown", protocol.PayerOwner, "", "owner", ownerKey},
		{"shared again", protocol.PayerShared, "", "shared", sharedKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.setPayer(t, "a", tt.kind, tt.principal)
			kept := f.Report(f.tokenA, brokertest.Entry("inference", "agent", "decide"))
			if kept.Payer == nil {
				t.Fatalf("declaration answer has no payer")
			}
			resp, seen := f.call(t, f.tokenA, nil)
			got := resp.Header.Get(protocol.HeaderPayer)
			parsed, err := protocol.ParsePayerHeader(got)
			if err != nil {
				t.Fatalf("ParsePayerHeader(%q) = %v", got, err)
			}
			if got != tt.header || protocol.FormatPayerHeader(*kept.Payer) != got || parsed.Kind != kept.Payer.Kind {
				t.Errorf("chant-payer %q, declaration payer %q, want both %q", got, protocol.FormatPayerHeader(*kept.Payer), tt.header)
			}
			assertOnly(t, seen, tt.key, f.tokenA)
			resp, seen = f.callRoute(t, routes[1], f.tokenA, nil)
			if got := resp.Header.Get(protocol.HeaderPayer); got != tt.header {
				t.Errorf("decide chant-payer = %q, want %q", got, tt.header)
			}
			assertOnly(t, seen, tt.key, f.tokenA)
		})
	}
	// The visitor's payer is said on the answers their grant pays for.
	value, _ := f.issue(t, "a", visitor, 0)
	for _, path := range []string{messages, "/llm/anthropic/v1/messages/count_tokens"} {
		resp := f.Do("POST", path, f.tokenA, []byte(body), http.Header{protocol.HeaderGrant: {value}})
		if got := resp.Header.Get(protocol.HeaderPayer); resp.StatusCode != 200 || got != "visitor "+visitor {
			t.Errorf("POST %s with a grant = %d, chant-payer %q, want 200 visitor %s", path, resp.StatusCode, got, visitor)
		}
	}
	resp := f.Do("GET", "/llm/anthropic/v1/models", f.tokenA, nil, http.Header{protocol.HeaderGrant: {value}})
	if got := resp.Header.Get(protocol.HeaderPayer); resp.StatusCode != 200 || got != "visitor "+visitor {
		t.Errorf("GET models with a grant = %d, chant-payer %q, want 200 visitor %s", resp.StatusCode, got, visitor)
	}
}

// TestOwnerCredential_ChangeSeenThroughTheChangeLog replaces the owner's
// credential in the store and shows the next call uses the new one once
// the cache has read the change log, with no drop by the writer.
func TestOwnerCredential_ChangeSeenThroughTheChangeLog(t *testing.T) {
	f := newFixture(t)
	f.SetCredential(payer.OwnerAnthropic("a"), ownerKey)
	f.setPayer(t, "a", protocol.PayerOwner, "github:own")
	_, seen := f.call(t, f.tokenA, nil)
	assertOnly(t, seen, ownerKey)
	const rotated = "sk-ant-api03-OWNER-ROTATED"
	sealed, err := f.Server.Keyring.Seal([]byte(rotated), payer.AD(payer.OwnerAnthropic("a")))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := f.Server.Store.SetCredential(ctx, store.Credential{ID: payer.OwnerAnthropic("a"), Sealed: sealed, UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := f.Server.Cache.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	_, seen = f.call(t, f.tokenA, nil)
	assertOnly(t, seen, rotated, ownerKey)
}

// failingStore fails every grant lookup as a store that cannot be reached.
type failingStore struct {
	store.Store
}

func (failingStore) GrantByHash(context.Context, string) (store.Grant, error) {
	return store.Grant{}, fmt.Errorf("grant by hash: %w", store.ErrUnavailable)
}

func TestGrant_StoreUnavailableIsAnErrorNotAnotherPayer(t *testing.T) {
	var outcomes []string
	p := &payer.Resolver{Store: failingStore{}, OnGrant: func(o string) { outcomes = append(outcomes, o) }}
	r := httptest.NewRequest("POST", messages, nil)
	r.Header.Set(protocol.HeaderGrant, "bbg_anything")
	paid, err := p.Func(store.Box{Name: "a", PayerKind: protocol.PayerShared}, "")(context.Background(), r)
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Func(...) error = %v, want ErrUnavailable", err)
	}
	if paid.Credential != nil {
		t.Errorf("Func(...) returned a credential with an error")
	}
	if len(outcomes) != 1 || outcomes[0] != payer.Unavailable {
		t.Errorf("OnGrant outcomes = %v, want [%s]", outcomes, payer.Unavailable)
	}
	if got := p.GrantCounts()[payer.Unavailable]; got != 1 {
		t.Errorf("GrantCounts()[unavailable] = %d, want 1", got)
	}
}

func TestGrant_OnGrantSeesEveryOutcome(t *testing.T) {
	f := newFixture(t)
	value, _ := f.issue(t, "a", visitor, 0)
	f.call(t, f.tokenA, []string{value})
	f.call(t, f.tokenA, []string{"bbg_unknown"})
	f.call(t, f.tokenA, nil)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.outcomes[grant.Accepted] != 1 || f.outcomes[grant.Unknown] != 1 || len(f.outcomes) != 2 {
		t.Errorf("OnGrant saw %v, want one accepted and one unknown", f.outcomes)
	}
}

func TestNoCredential_HintNamesThePayersCommand(t *testing.T) {
	f := newFixture(t)
	f.setPayer(t, "a", protocol.PayerOwner, "github:own")
	for _, rt := range routes {
		resp := f.Do("POST", rt.path, f.tokenA, []byte(rt.body), nil)
		_, msg := brokertest.Refusal(resp.Body)
		if resp.StatusCode != 403 || !strings.Contains(msg, "`boxbroker box payer a owner`") || resp.Header.Get(protocol.HeaderPayer) != "owner github:own" {
			t.Errorf("POST %s with no owner credential = %d %q, chant-payer %q, want 403 naming box payer", rt.path, resp.StatusCode, msg, resp.Header.Get(protocol.HeaderPayer))
		}
	}
	if n := len(f.Upstream.Seen()); n != 0 {
		t.Errorf("upstream received %d requests, want 0", n)
	}
	pr := "github:vee"
	tests := []struct {
		pay  protocol.Payer
		want string
	}{
		{protocol.SharedPayer(), "`boxbroker credential set anthropic`"},
		{protocol.Payer{Kind: protocol.PayerOwner}, "`boxbroker box payer a owner`"},
		{protocol.Payer{Kind: protocol.PayerVisitor, Principal: &pr}, "`boxbroker visitor set github:vee`"},
		{protocol.Payer{Kind: protocol.PayerVisitor}, "`boxbroker visitor set PRINCIPAL`"},
	}
	for _, tt := range tests {
		if got := payer.SetHint(tt.pay, "a"); got != tt.want {
			t.Errorf("SetHint(%q, a) = %q, want %q", protocol.FormatPayerHeader(tt.pay), got, tt.want)
		}
	}
}
