package egress_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/mint"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
)

// keeper is a host that keeps what it is sent, as an issue tracker, an
// object store or a webhook's settings do: a POST (or PUT) keeps its body
// and, when keepHeader names one, that header's value too; a GET answers
// all it has kept. GET /deny answers 401, as a host does for reasons of
// its own (a resource the credentials may not see). take, when set,
// judges the credentials of every other request; one it refuses is a 401.
type keeper struct {
	keepHeader string
	take       func(r *http.Request) bool

	mu   sync.Mutex // guards kept
	kept []string
}

func (k *keeper) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/deny" || r.URL.Path == "/base/deny" {
		http.Error(w, "this resource is not for you", http.StatusUnauthorized)
		return
	}
	if k.take != nil && !k.take(r) {
		http.Error(w, "bad credentials", http.StatusUnauthorized)
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	switch r.Method {
	case http.MethodPost, http.MethodPut:
		body, _ := io.ReadAll(r.Body)
		k.kept = append(k.kept, string(body))
		if k.keepHeader != "" {
			k.kept = append(k.kept, r.Header.Get(k.keepHeader))
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, "kept")
	default:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"kept":%q}`, k.kept)
	}
}

// keptValues are the forms of v a host that kept it is likely to hand
// back: as it is, and (for a value sent in Basic credentials, with any
// user) base64 of the credentials.
func keptValues(v string) map[string]string {
	return map[string]string{
		"raw":          v,
		"basic":        base64.StdEncoding.EncodeToString([]byte("me:" + v)),
		"basic, other": base64.StdEncoding.EncodeToString([]byte("someone-else:" + v)),
		"in a url":     strings.ReplaceAll(v, "_", "%5F"),
	}
}

// TestEgress_EarlierMintedTokenStoredAtHostIsRedacted is the attack on a
// broker that searches an answer only for the token it sent with the
// request: the box stores its token at the host (the broker writes the
// minted token T1 there), has one request answered 401 (the broker drops
// T1 and mints T2 for the next), and reads the stored item back with T2.
// T1, still valid, must not come back.
func TestEgress_EarlierMintedTokenStoredAtHostIsRedacted(t *testing.T) {
	key, pemKey := testKey(t)
	tests := []struct {
		name, kind string
		endpoint   func(e **mintEnv) http.HandlerFunc
		config     func(e *mintEnv) map[string]any
	}{
		{"oauth2", mint.KindOAuth2,
			func(e **mintEnv) http.HandlerFunc {
				return (&oauthStandIn{e: e, refresh: "rt-first"}).ServeHTTP
			},
			oauthConfig},
		{"github-app", mint.KindGitHubApp,
			func(e **mintEnv) http.HandlerFunc {
				var refuse atomic.Bool
				return githubStandIn(t, e, &key.PublicKey, &refuse)
			},
			func(e *mintEnv) map[string]any {
				return map[string]any{"app_id": 1234, "installation_id": 42, "private_key": pemKey, "api_url": e.mintAt.URL}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e *mintEnv
			k := &keeper{}
			k.take = func(r *http.Request) bool {
				return e.issued.valid(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
			}
			// The host keeps a header: the broker writes a value in
			// header values, never in a body it did not name.
			k.keepHeader = "X-Note"
			e = newMintEnvHost(t, tt.endpoint(&e), k.ServeHTTP)
			e.set(t, "API", tt.kind, tt.config(e))

			resp := e.br.Do(http.MethodPost, "/egress/API/issues", e.token, []byte("x"), http.Header{"Content-Type": {"text/plain"}, "X-Note": {"remember " + e.token}})
			if resp.StatusCode != http.StatusCreated {
				t.Fatalf("store = %d %s, want 201", resp.StatusCode, resp.Body)
			}
			first := e.issued.all()
			if len(first) != 1 {
				t.Fatalf("tokens issued = %d, want 1", len(first))
			}
			if resp := e.br.Do(http.MethodGet, "/egress/API/deny", e.token, nil, nil); resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("GET /deny = %d, want the host's 401", resp.StatusCode)
			}
			resp = e.br.Do(http.MethodGet, "/egress/API/issues", e.token, nil, nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("read back = %d %s, want 200", resp.StatusCode, resp.Body)
			}
			if n := e.issued.n.Load(); n != 2 {
				t.Fatalf("mints = %d, want 2 (T1 dropped after the 401, T2 minted to read back)", n)
			}
			all := string(resp.Body) + fmt.Sprint(resp.Header)
			for name, form := range keptValues(first[0]) {
				if strings.Contains(all, form) {
					t.Errorf("the answer carries T1's %s form: %s", name, all)
				}
			}
			if !strings.Contains(string(resp.Body), "remember "+e.token) {
				t.Errorf("the answer = %s, want the box's own token in T1's place", resp.Body)
			}
		})
	}
}

// TestEgress_ValueStoredThroughOneSecretIsRedactedThroughAnother is the
// attack on a broker that searches an answer only for the value of the
// secret the request names: the box has two secrets pinned to one host,
// stores its token through ONE in a header the host keeps (the broker
// writes ONE's value there), and reads it back through TWO. Also when an
// earlier broker process wrote it (the host holds it before this one
// sent anything), and when the broker wrote it inside Basic credentials
// the host kept.
func TestEgress_ValueStoredThroughOneSecretIsRedactedThroughAnother(t *testing.T) {
	tests := []struct {
		name string
		// store has the host keep the value of ONE, the box's secret.
		store func(t *testing.T, e *env, k *keeper, one string)
		// want is what the box must read in the value's place.
		want func(e *env) string
	}{
		{"stored through ONE", func(t *testing.T, e *env, k *keeper, one string) {
			k.keepHeader = "X-Note"
			resp, body := e.do(t, http.MethodPost, "/egress/ONE/items", http.Header{"Authorization": {"Bearer " + e.token}, "Content-Type": {"text/plain"}, "X-Note": {"note " + e.token}},
				strings.NewReader("x"))
			if resp.StatusCode != http.StatusCreated {
				t.Fatalf("store = %d %s, want 201", resp.StatusCode, body)
			}
		}, func(e *env) string { return "note " + e.token }},
		{"stored by an earlier process", func(t *testing.T, e *env, k *keeper, one string) {
			k.mu.Lock()
			k.kept = append(k.kept, "note "+one)
			k.mu.Unlock()
		}, func(e *env) string { return "note " + e.token }},
		{"kept as Basic credentials", func(t *testing.T, e *env, k *keeper, one string) {
			k.keepHeader = "X-Auth"
			basic := base64.StdEncoding.EncodeToString([]byte("me:" + e.token))
			resp, body := e.do(t, http.MethodPost, "/egress/ONE/items", http.Header{"Authorization": {"Bearer " + e.token}, "X-Auth": {"Basic " + basic}},
				strings.NewReader("x"))
			if resp.StatusCode != http.StatusCreated {
				t.Fatalf("store = %d %s, want 201", resp.StatusCode, body)
			}
		}, func(e *env) string { return "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			k := &keeper{}
			h := newHost(t, k.ServeHTTP)
			one, two := "sk_one_"+randomHex(16), "sk_two_"+randomHex(16)
			e.br.SetSecret("shop", "ONE", h.URL+"/v1", one)
			e.br.SetSecret("shop", "TWO", h.URL+"/v2", two)
			e.br.Report(e.token, brokertest.Entry(protocol.Egress, secretName, "ONE", "TWO"))
			tt.store(t, e, k, one)

			resp, body := e.do(t, http.MethodGet, "/egress/TWO/items", http.Header{"Authorization": {"Bearer " + e.token}}, nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("read through TWO = %d %s, want 200", resp.StatusCode, body)
			}
			all := string(body) + fmt.Sprint(resp.Header)
			for name, form := range keptValues(one) {
				if strings.Contains(all, form) {
					t.Errorf("the answer through TWO carries ONE's %s form: %s", name, all)
				}
			}
			if want := tt.want(e); !strings.Contains(string(body), want) {
				t.Errorf("the answer = %s, want %q in the value's place", body, want)
			}
		})
	}
}

// TestEgress_SignatureKeptByHostIsRedactedLater is the attack on a
// broker that searches an answer only for the signature it made for the
// request: a host that keeps what it received (a request log, a
// webhook's last delivery) hands an earlier signature back in a later
// answer. With hmac's sign: body there is no time in the signature: the
// box would hold a signature of a body it chose, good for ever.
func TestEgress_SignatureKeptByHostIsRedactedLater(t *testing.T) {
	tests := []struct {
		name, kind string
		config     map[string]any
		header     string // the header the signature goes in, which the host keeps
		sign       func(t *testing.T, e *mintEnv, method, path, body string) *http.Request
	}{
		{"hmac sign: body", mint.KindHMAC, map[string]any{"key": hmacKey, "header": "X-Signature", "prefix": "sha256=", "sign": "body"}, "X-Signature",
			func(t *testing.T, e *mintEnv, method, path, body string) *http.Request {
				req, err := http.NewRequest(method, e.br.URL+path, strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Authorization", "Bearer "+e.token)
				return req
			}},
		{"aws-sigv4", mint.KindSigV4, map[string]any{"access_key_id": awsKeyID, "secret_access_key": awsSecret, "region": "eu-west-1", "service": "s3"}, "Authorization",
			func(t *testing.T, e *mintEnv, method, path, body string) *http.Request {
				return boxSigned(t, e, method, path, strings.NewReader(body), int64(len(body)), "s3")
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := &keeper{keepHeader: tt.header}
			e := newMintEnvHost(t, http.NotFound, k.ServeHTTP)
			e.set(t, "SIGNED", tt.kind, tt.config)

			status, body, _ := e.send(t, tt.sign(t, e, http.MethodPut, "/egress/SIGNED/bucket/a", `{"transfer":"all of it"}`))
			if status != http.StatusCreated {
				t.Fatalf("signed PUT = %d %s, want 201", status, body)
			}
			k.mu.Lock()
			sig := k.kept[len(k.kept)-1]
			k.mu.Unlock()
			if tt.kind == mint.KindSigV4 {
				_, sig, _ = strings.Cut(sig, "Signature=")
			} else {
				sig = strings.TrimPrefix(sig, "sha256=")
			}
			if len(sig) < 32 {
				t.Fatalf("the host kept %q, want a signature", sig)
			}
			status, body, h := e.send(t, tt.sign(t, e, http.MethodGet, "/egress/SIGNED/bucket", ""))
			if status != http.StatusOK {
				t.Fatalf("GET = %d %s, want 200", status, body)
			}
			if all := body + fmt.Sprint(h); strings.Contains(all, sig) {
				t.Errorf("a later answer carries the earlier request's signature: %s", all)
			}
			if !strings.Contains(body, "[redacted]") {
				t.Errorf("the answer = %s, want [redacted] in the signature's place", body)
			}
		})
	}
}

// TestEgress_ValueStoredThroughOneSecretIsRedactedThroughTheHostWithItsDot
// is TestEgress_ValueStoredThroughOneSecretIsRedactedThroughAnother with
// TWO pinned to the same host written as a fully qualified name, with its
// trailing dot (localhost.), which reaches the same host: ONE's value,
// kept by the host, does not come back through TWO.
func TestEgress_ValueStoredThroughOneSecretIsRedactedThroughTheHostWithItsDot(t *testing.T) {
	k := &keeper{keepHeader: "X-Note"}
	br, token, port := dotHost(t, k.ServeHTTP)
	one, two := "sk_one_"+randomHex(16), "sk_two_"+randomHex(16)
	br.SetSecret("shop", "ONE", "http://localhost:"+port+"/v1", one)
	br.SetSecret("shop", "TWO", "http://localhost.:"+port+"/v2", two)
	br.Report(token, brokertest.Entry(protocol.Egress, "ONE", "TWO"))

	if resp := br.Do(http.MethodPost, "/egress/ONE/items", token, []byte("x"), http.Header{"Content-Type": {"text/plain"}, "X-Note": {"note " + token}}); resp.StatusCode != http.StatusCreated {
		t.Fatalf("store through ONE = %d %s, want 201", resp.StatusCode, resp.Body)
	}
	resp := br.Do(http.MethodGet, "/egress/TWO/items", token, nil, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("read through TWO = %d %s, want 200", resp.StatusCode, resp.Body)
	}
	if all := string(resp.Body) + fmt.Sprint(resp.Header); strings.Contains(all, one) {
		t.Errorf("the answer through TWO carries ONE's value: %s", all)
	}
	if !strings.Contains(string(resp.Body), "note "+token) {
		t.Errorf("the answer = %s, want the box's token in the value's place", resp.Body)
	}
}

// dotHost is a broker whose egress reaches h as localhost and as
// localhost. (at its loopback address, whatever the resolver makes of
// the dot), with box shop; port is h's.
func dotHost(t *testing.T, h http.HandlerFunc) (br *brokertest.Broker, token, port string) {
	t.Helper()
	ho := newHost(t, h)
	_, port, _ = strings.Cut(ho.hostport(), ":")
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr != "localhost:"+port && addr != "localhost.:"+port {
			return nil, fmt.Errorf("test transport: no dial to %s", addr)
		}
		return (&net.Dialer{}).DialContext(ctx, network, ho.hostport())
	}}
	t.Cleanup(tr.CloseIdleConnections)
	br = brokertest.New(t, brokertest.Options{ServerOptions: func(o *server.Options) { o.Transport = tr }})
	return br, br.AddBox("shop"), port
}

// TestEgress_LinkToTheHostWithoutItsDotPointsBackAtTheBroker: a secret
// pinned to its host's name with the trailing dot (localhost.), whose
// host writes its links without it, as hosts do: a link under the base
// is still pointed at /egress/NAME, never left leading the box's client
// to the host with its token.
func TestEgress_LinkToTheHostWithoutItsDotPointsBackAtTheBroker(t *testing.T) {
	var port string
	br, token, p := dotHost(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://localhost:"+port+"/v2/next", http.StatusFound)
	})
	port = p
	br.SetSecret("shop", "TWO", "http://localhost.:"+port+"/v2", "sk_two_"+randomHex(16))
	br.Report(token, brokertest.Entry(protocol.Egress, "TWO"))
	req, err := http.NewRequest(http.MethodGet, br.URL+"/egress/TWO/go", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || loc != "/egress/TWO/next" {
		t.Errorf("status %d, Location %q; want 302 to /egress/TWO/next", resp.StatusCode, loc)
	}
}

// TestEgress_WhatAMintSentTheHostIsRedacted is the attack on a secret
// whose token endpoint is its host's own server (a github-app secret's
// default api_url is https://api.github.com, its host's; an OAuth API
// minting at /oauth/token): a host that keeps what it received (a
// request log) hands back what the mint sent it, which is no token the
// box's requests carried: a GitHub App's JWT, which mints installation
// tokens for every installation of the app, past the secret's
// repositories and permissions, and a rotated refresh token. Each is
// [redacted] in the box's answers while it works.
func TestEgress_WhatAMintSentTheHostIsRedacted(t *testing.T) {
	key, pemKey := testKey(t)
	tests := []struct {
		name     string
		kind     string
		endpoint func(e **mintEnv) http.HandlerFunc
		config   func(e *mintEnv) map[string]any
		// sent is what the token endpoint got that the box must not.
		sent func(r *http.Request, body []byte) string
	}{
		{"github-app JWT", mint.KindGitHubApp,
			func(e **mintEnv) http.HandlerFunc {
				var refuse atomic.Bool
				return githubStandIn(t, e, &key.PublicKey, &refuse)
			},
			func(e *mintEnv) map[string]any {
				return map[string]any{"app_id": 1234, "installation_id": 42, "private_key": pemKey, "api_url": e.mintAt.URL,
					"repositories": []string{"repo-a"}}
			},
			func(r *http.Request, _ []byte) string {
				return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			}},
		{"oauth2 rotated refresh token", mint.KindOAuth2,
			func(e **mintEnv) http.HandlerFunc {
				return (&oauthStandIn{e: e, refresh: "rt-first"}).ServeHTTP
			},
			oauthConfig,
			func(_ *http.Request, body []byte) string {
				form, _ := url.ParseQuery(string(body))
				return form.Get("refresh_token")
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				e      *mintEnv
				mu     sync.Mutex
				logged []string // what the token endpoint received, as its server's log keeps it
			)
			endpoint := tt.endpoint(&e)
			e = newMintEnvHost(t, func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				mu.Lock()
				logged = append(logged, tt.sent(r, body))
				mu.Unlock()
				r.Body = io.NopCloser(bytes.NewReader(body))
				endpoint(w, r)
			}, func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/deny":
					w.WriteHeader(http.StatusUnauthorized)
				case "/log":
					mu.Lock()
					defer mu.Unlock()
					w.Header().Set("X-Last", logged[len(logged)-1])
					fmt.Fprintf(w, "%q", logged)
				default:
					fmt.Fprint(w, "ok")
				}
			})
			e.set(t, "API", tt.kind, tt.config(e))

			// Minted twice (a 401 drops the first token): the second
			// mint sends the refresh token the first rotated to.
			if resp := e.br.Do(http.MethodGet, "/egress/API/deny", e.token, nil, nil); resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("GET /deny = %d %s, want the host's 401", resp.StatusCode, resp.Body)
			}
			resp := e.br.Do(http.MethodGet, "/egress/API/log", e.token, nil, nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /log = %d %s, want 200", resp.StatusCode, resp.Body)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(logged) != 2 {
				t.Fatalf("mints = %d, want 2", len(logged))
			}
			all := string(resp.Body) + fmt.Sprint(resp.Header)
			for i, v := range logged {
				if tt.kind == mint.KindOAuth2 && i == 0 {
					continue // the configuration's own, searched for with each request
				}
				if v == "" || strings.Contains(all, v) {
					t.Errorf("the answer carries what mint %d sent the token endpoint (%.12s…): %s", i+1, v, all)
				}
			}
			if !strings.Contains(all, "[redacted]") {
				t.Errorf("the answer = %s, want [redacted] where the host repeated what a mint sent", all)
			}
		})
	}
}
