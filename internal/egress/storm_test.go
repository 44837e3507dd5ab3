package egress_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/mint"
)

// TestMint_RequestsAnswered401DoNotStormTheTokenEndpoint is the attack
// on a broker that mints anew after every 401: a box has its requests
// answered 401 (a resource its token may not see) as fast as it can, and
// each would cost a mint, spending a quota at the token endpoint that
// other boxes share. A host's 401 drops a secret's token at most once
// each RemintEvery, whatever the number of requests, one after another or
// at once.
func TestMint_RequestsAnswered401DoNotStormTheTokenEndpoint(t *testing.T) {
	var e *mintEnv
	o := &oauthStandIn{e: &e, refresh: "rt-first"}
	k := &keeper{}
	e = newMintEnvHost(t, o.ServeHTTP, k.ServeHTTP)
	e.set(t, "API", mint.KindOAuth2, oauthConfig(e))

	for i := range 30 {
		if resp := e.br.Do(http.MethodGet, "/egress/API/deny", e.token, nil, nil); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("request %d = %d %s, want the host's 401", i, resp.StatusCode, resp.Body)
		}
	}
	// The first mint, and one more after the first 401.
	if n := e.issued.n.Load(); n != 2 {
		t.Errorf("mints for 30 requests answered 401 within RemintEvery = %d, want 2", n)
	}

	e.clock.Advance(mint.DefaultRemintEvery)
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.br.Do(http.MethodGet, "/egress/API/deny", e.token, nil, nil)
		}()
	}
	wg.Wait()
	if n := e.issued.n.Load(); n != 3 {
		t.Errorf("mints after 100 concurrent requests answered 401, RemintEvery later = %d, want 3", n)
	}
	if resp := e.br.Do(http.MethodGet, "/egress/API/items", e.token, nil, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("a request after the storm = %d %s, want 200", resp.StatusCode, resp.Body)
	}
}

// TestMint_RateLimitedEndpointIsNotARefusedGrant: a token endpoint that
// limits the rate of mints (429 with Retry-After, 503 with Retry-After,
// GitHub's 403 with its rate limit spent) is not asked again until the
// wait it named, and the box, the audit log and `secret list` are told of
// a rate limit, not of a grant or key that needs renewing.
func TestMint_RateLimitedEndpointIsNotARefusedGrant(t *testing.T) {
	key, pemKey := testKey(t)
	tests := []struct {
		name, kind string
		status     int
		header     http.Header
		wait       string // the Retry-After the box is given
	}{
		{"oauth2 429 with Retry-After", mint.KindOAuth2, http.StatusTooManyRequests, http.Header{"Retry-After": {"7"}}, "7"},
		{"oauth2 429 without Retry-After", mint.KindOAuth2, http.StatusTooManyRequests, nil, "60"},
		{"oauth2 503 with Retry-After", mint.KindOAuth2, http.StatusServiceUnavailable, http.Header{"Retry-After": {"12"}}, "12"},
		{"github-app 429", mint.KindGitHubApp, http.StatusTooManyRequests, http.Header{"Retry-After": {"30"}}, "30"},
		{"github-app 403, rate limit spent", mint.KindGitHubApp, http.StatusForbidden, http.Header{"X-Ratelimit-Remaining": {"0"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e *mintEnv
			var limit atomic.Bool
			limit.Store(true)
			var refuse atomic.Bool
			gh := githubStandIn(t, &e, &key.PublicKey, &refuse)
			o := &oauthStandIn{e: &e, refresh: "rt-first"}
			var asked atomic.Int64
			e = newMintEnv(t, func(w http.ResponseWriter, r *http.Request) {
				asked.Add(1)
				if limit.Load() {
					for k, vs := range tt.header {
						w.Header()[k] = vs
					}
					if tt.kind == mint.KindGitHubApp && tt.header.Get("X-Ratelimit-Remaining") == "0" {
						w.Header().Set("X-Ratelimit-Reset", "mint.MaxToken99")
					}
					http.Error(w, `{"error":"slow_down","message":"API rate limit exceeded"}`, tt.status)
					return
				}
				if tt.kind == mint.KindGitHubApp {
					gh(w, r)
				} else {
					o.ServeHTTP(w, r)
				}
			})
			config := oauthConfig(e)
			if tt.kind == mint.KindGitHubApp {
				config = map[string]any{"app_id": 1234, "installation_id": 42, "private_key": pemKey, "api_url": e.mintAt.URL}
			}
			e.set(t, "API", tt.kind, config)

			resp := e.br.Do(http.MethodGet, "/egress/API/x", e.token, nil, nil)
			typ, msg := brokertest.Refusal(resp.Body)
			if resp.StatusCode != http.StatusTooManyRequests || typ != "rate_limit_error" {
				t.Fatalf("call = %d %s %q, want 429 rate_limit_error", resp.StatusCode, typ, msg)
			}
			if got := resp.Header.Get("Retry-After"); tt.wait != "" && got != tt.wait || got == "" {
				t.Errorf("Retry-After = %q, want %q", got, tt.wait)
			}
			if !strings.Contains(msg, "API") || !strings.Contains(msg, "rate") || strings.Contains(msg, "secret set") ||
				strings.Contains(msg, "grant needs renewing") || strings.Contains(msg, "installation needs renewing") {
				t.Errorf("message = %q, want a rate limit of API, not a grant or key to renew", msg)
			}
			// Asked again only after the wait.
			e.br.Do(http.MethodGet, "/egress/API/x", e.token, nil, nil)
			if n := asked.Load(); n != 1 {
				t.Errorf("the endpoint was asked %d times within its wait, want 1", n)
			}

			sec, err := e.br.Server.Store.Secret(t.Context(), "shop", "API")
			if err != nil {
				t.Fatal(err)
			}
			states, err := e.br.Server.Store.ListMintStates(t.Context(), "shop")
			if err != nil {
				t.Fatal(err)
			}
			if st := mint.State(sec, states, e.clock.Now()); strings.Contains(st, "REFUSED") || strings.Contains(st, "renew") || !strings.Contains(st, "rate-limited") {
				t.Errorf("State = %q, want rate-limited, not refused", st)
			}
			entries := e.audited(t)
			var reasons []string
			for _, en := range entries {
				if en.Method == "MINT" {
					reasons = append(reasons, en.Reason)
				}
			}
			if len(reasons) != 1 || reasons[0] != "mint-rate-limited" {
				t.Errorf("audited mints = %q, want one mint-rate-limited", reasons)
			}

			limit.Store(false)
			e.clock.Advance(time.Hour + time.Second)
			if resp := e.br.Do(http.MethodGet, "/egress/API/x", e.token, nil, nil); resp.StatusCode != http.StatusOK {
				t.Errorf("call after the wait = %d %s, want 200", resp.StatusCode, resp.Body)
			}
		})
	}
}

// TestMint_FailingOrExpiredMintsDoNotStormTheTokenEndpoint is the attack
// on a broker that asks the token endpoint again on every request while
// it has no token to use: a box sends requests as fast as it can while
// the endpoint fails (a 5xx, an answer with no token) or mints tokens
// already expired by the broker's clock (a negative expires_in, an
// expires_at in the past: a clock apart), and each request would cost a
// mint, spending a quota at the endpoint that other boxes share. A
// secret is asked for at most once each RemintEvery, whatever the
// endpoint answered.
func TestMint_FailingOrExpiredMintsDoNotStormTheTokenEndpoint(t *testing.T) {
	key, pemKey := testKey(t)
	tests := []struct {
		name, kind string
		answer     func(e *mintEnv, w http.ResponseWriter)
		status     int // the box's answer
	}{
		{"oauth2 500", mint.KindOAuth2, func(_ *mintEnv, w http.ResponseWriter) {
			http.Error(w, `{"error":"server_error"}`, http.StatusInternalServerError)
		}, http.StatusBadGateway},
		{"oauth2 200 with no access_token", mint.KindOAuth2, func(_ *mintEnv, w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"token_type":"Bearer"}`)
		}, http.StatusBadGateway},
		{"oauth2 negative expires_in", mint.KindOAuth2, func(e *mintEnv, w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":-60}`, e.issued.issue("at_"))
		}, http.StatusOK},
		{"github-app 502", mint.KindGitHubApp, func(_ *mintEnv, w http.ResponseWriter) {
			http.Error(w, "bad gateway", http.StatusBadGateway)
		}, http.StatusBadGateway},
		{"github-app expires_at in the past", mint.KindGitHubApp, func(e *mintEnv, w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"token":%q,"expires_at":%q}`, e.issued.issue("ghs_"), e.clock.Now().Add(-time.Hour).Format(time.RFC3339))
		}, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e *mintEnv
			var asked atomic.Int64
			e = newMintEnv(t, func(w http.ResponseWriter, r *http.Request) {
				asked.Add(1)
				tt.answer(e, w)
			})
			config := map[string]any{"token_url": e.mintAt.URL + "/oauth/token", "client_id": "client-1", "client_secret": "client-secret-1"}
			if tt.kind == mint.KindGitHubApp {
				config = map[string]any{"app_id": 1234, "installation_id": 42, "private_key": pemKey, "api_url": e.mintAt.URL}
			}
			_ = key
			e.set(t, "API", tt.kind, config)

			for i := range 30 {
				if status, body := e.call(t, "API"); status != tt.status {
					t.Fatalf("request %d = %d %s, want %d", i, status, body, tt.status)
				}
			}
			if n := asked.Load(); n != 1 {
				t.Errorf("the token endpoint was asked %d times for 30 requests within RemintEvery, want 1", n)
			}
			e.clock.Advance(mint.DefaultRemintEvery)
			e.call(t, "API")
			if n := asked.Load(); n != 2 {
				t.Errorf("the token endpoint was asked %d times, RemintEvery later, want 2", n)
			}
		})
	}
}

// TestMint_OversizedTokenIsRefused: a token endpoint answers an access
// token (or a refresh token to keep) of most of a megabyte, the most
// golang.org/x/oauth2 reads. The broker would send it in a header, keep
// it (and up to a few hundred more of the secret's) in memory for the
// answer search, which searches every answer for each in several
// forms, and seal the refresh token into the store at every mint. A
// token, and a refresh token, longer than mint.MaxToken is no token.
func TestMint_OversizedTokenIsRefused(t *testing.T) {
	big := strings.Repeat("A", 512<<10)
	for _, tt := range []struct{ name, answer string }{
		{"access token", `{"access_token":"` + big + `","expires_in":3600}`},
		{"refresh token", `{"access_token":"at_small","expires_in":3600,"refresh_token":"` + big + `"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newMintEnvHost(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprint(w, tt.answer)
			}, func(w http.ResponseWriter, r *http.Request) {
				if len(r.Header.Get("Authorization")) > mint.MaxToken {
					t.Errorf("the host was sent a token of %d bytes", len(r.Header.Get("Authorization")))
				}
			})
			e.set(t, "API", mint.KindOAuth2, map[string]any{"token_url": e.mintAt.URL + "/oauth/token", "client_id": "client-1",
				"client_secret": "client-secret-1", "refresh_token": "rt-first"})
			if resp := e.br.Do(http.MethodGet, "/egress/API/x", e.token, nil, nil); resp.StatusCode != http.StatusBadGateway {
				t.Errorf("call = %d %.200s, want 502", resp.StatusCode, resp.Body)
			}
			st, err := e.br.Server.Store.MintState(t.Context(), "shop", "API")
			if err == nil && len(st.Sealed) > mint.MaxToken+1024 {
				t.Errorf("the store keeps a sealed refresh token of %d bytes", len(st.Sealed))
			}
		})
	}
}
