package egressproxy_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-github/v74/github"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stripe/stripe-go/v82"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/intentius/boxbroker/internal/proxy"
)

// The tests here drive real Go SDKs (go-github, the OpenAI and Stripe
// SDKs, x/oauth2's client credentials) unchanged, each through
// /egress/API and through the HTTPS proxy, against apiHost, a stand-in
// for each API that takes only the secret's value as credential. The box
// gives each SDK its token as the key; the SDK's own requests must work,
// the host must receive the value only where a credential goes, and a
// token the box writes into what the host keeps must reach it marked.

// apiHost stands in, under /owner/, for GitHub's REST API (gh/), the
// OpenAI API (openai/v1/), Stripe's API (stripe/v1/) and an OAuth token
// endpoint (oauth/token) that takes client_secret in the form body.
type apiHost struct {
	mu    sync.Mutex // guards blobs and kept
	blobs []string
	kept  []string // what Stripe's customers were created with
}

func (h *apiHost) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	p := strings.TrimPrefix(r.URL.Path, "/owner")
	if p == "/oauth/token" {
		if err := r.ParseForm(); err != nil || r.PostForm.Get("client_id") != "app" || r.PostForm.Get("client_secret") != secretValue {
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":"invalid_client"}`)
			return
		}
		io.WriteString(w, `{"access_token":"at_minted_by_the_host","token_type":"bearer","expires_in":3600}`)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+secretValue {
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"message":"Bad credentials"}`)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case p == "/gh/user":
		io.WriteString(w, `{"login":"octocat","id":1}`)
	case p == "/gh/repos/o/r/git/blobs" && r.Method == http.MethodPost:
		var b struct{ Content, Encoding string }
		_ = json.NewDecoder(r.Body).Decode(&b)
		h.blobs = append(h.blobs, b.Content)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"sha":"%d"}`, len(h.blobs)-1)
	case strings.HasPrefix(p, "/gh/repos/o/r/git/blobs/"):
		var n int
		if _, err := fmt.Sscanf(p, "/gh/repos/o/r/git/blobs/%d", &n); err != nil || n < 0 || n >= len(h.blobs) {
			http.NotFound(w, r)
			return
		}
		// As GitHub answers a blob: base64, a newline every 60 characters.
		enc := base64.StdEncoding.EncodeToString([]byte(h.blobs[n]))
		var wrapped strings.Builder
		for len(enc) > 60 {
			wrapped.WriteString(enc[:60] + "\n")
			enc = enc[60:]
		}
		wrapped.WriteString(enc)
		_ = json.NewEncoder(w).Encode(map[string]any{"sha": fmt.Sprint(n), "encoding": "base64", "content": wrapped.String(), "size": len(h.blobs[n])})
	case p == "/openai/v1/chat/completions":
		io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`)
	case p == "/stripe/v1/customers" && r.Method == http.MethodPost:
		if err := r.ParseForm(); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		h.kept = append(h.kept, r.PostForm.Get("description"))
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "cus_1", "object": "customer", "email": r.PostForm.Get("email"), "description": r.PostForm.Get("description")})
	default:
		http.NotFound(w, r)
	}
}

// sdkRoute is a way a box's SDK reaches the secret's host: its base URL
// (to which the API's own path is added), root and prefix, and its HTTP
// client.
type sdkRoute struct {
	name         string
	base         string
	root, prefix string
	client       *http.Client
}

// sdkRoutes sets up f's secret API (naming client_secret as a body
// field, for the OAuth call) with h serving /owner/, and returns the two
// routes: /egress/API, and the HTTPS proxy.
func sdkRoutes(t *testing.T) (*fixture, *apiHost, []sdkRoute) {
	h := &apiHost{}
	f := newFixtureWith(t, h)
	f.b.SetSecret("shop", "API", "https://"+f.host, secretValue, "client_secret")
	return f, h, []sdkRoute{
		{"egress", f.b.URL + "/egress/API/owner", f.b.URL, "/egress/API/owner", &http.Client{}},
		{"proxy", "https://" + f.host + "/owner", "https://" + f.host, "/owner", f.client(t, f.token, f.caPool, false)},
	}
}

// TestProxy_GoGitHub: go-github, with the box's token as its Bearer
// token, reads the user, and writes the token into a blob (the attack of
// issue 40): the blob GitHub would keep holds a marker, and the box,
// decoding the line-wrapped base64 it reads back, never the value.
func TestProxy_GoGitHub(t *testing.T) {
	f, _, routes := sdkRoutes(t)
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			c := github.NewClient(rt.client).WithAuthToken(f.token)
			var err error
			if c.BaseURL, err = c.BaseURL.Parse(rt.base + "/gh/"); err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			user, _, err := c.Users.Get(ctx, "")
			if err != nil || user.GetLogin() != "octocat" {
				t.Fatalf("Users.Get = %v, %v, want octocat", user, err)
			}
			blob, _, err := c.Git.CreateBlob(ctx, "o", "r", &github.Blob{Content: github.Ptr("GITHUB_KEY=" + f.token + "\n"), Encoding: github.Ptr("utf-8")})
			if err != nil {
				t.Fatalf("Git.CreateBlob = %v", err)
			}
			got, _, err := c.Git.GetBlob(ctx, "o", "r", blob.GetSHA())
			if err != nil {
				t.Fatalf("Git.GetBlob = %v", err)
			}
			dec, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(got.GetContent(), "\n", ""))
			if err != nil {
				t.Fatalf("the blob's content does not decode: %v", err)
			}
			if want := "GITHUB_KEY=" + proxy.TokenMarker(len(f.token)) + "\n"; string(dec) != want {
				t.Errorf("the blob read back decodes to %q, want %q", dec, want)
			}
		})
	}
}

// TestProxy_OpenAIGo: the OpenAI Go SDK, with the box's token as its API
// key (Authorization: Bearer), makes a chat completion.
func TestProxy_OpenAIGo(t *testing.T) {
	f, _, routes := sdkRoutes(t)
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			c := openai.NewClient(option.WithAPIKey(f.token), option.WithBaseURL(rt.base+"/openai/v1/"), option.WithHTTPClient(rt.client), option.WithMaxRetries(0))
			resp, err := c.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
				Model:    "gpt-5",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
			})
			if err != nil {
				t.Fatalf("Chat.Completions.New = %v", err)
			}
			if len(resp.Choices) != 1 || resp.Choices[0].Message.Content != "hi" {
				t.Errorf("Chat.Completions.New = %+v, want the host's answer", resp.Choices)
			}
		})
	}
}

// prefixPath puts prefix before each request's path: stripe-go refuses
// a base URL with a path (each request's own path must begin with /v1),
// so an app reaches the stand-in's /owner/stripe/v1/ (or, through
// /egress/API, the broker's path) only through a transport that adds it.
type prefixPath struct {
	prefix string
	next   http.RoundTripper
}

func (p prefixPath) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Path = p.prefix + r.URL.Path
	r.URL.RawPath = ""
	next := p.next
	if next == nil {
		next = http.DefaultTransport
	}
	return next.RoundTrip(r)
}

// TestProxy_StripeGo: the Stripe Go SDK, with the box's token as its key
// (Authorization: Bearer) and a form body, creates a customer; the token
// the box also writes into the customer's description, a field Stripe
// keeps, reaches the host as a marker. stripe-go takes no base URL with
// a path: through the proxy it is used unchanged against api.stripe.com,
// and here (the stand-in serving Stripe under /owner/stripe) and through
// /egress/NAME it needs prefixPath.
func TestProxy_StripeGo(t *testing.T) {
	f, h, routes := sdkRoutes(t)
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			hc := &http.Client{Transport: prefixPath{rt.prefix + "/stripe", rt.client.Transport}}
			backends := stripe.NewBackendsWithConfig(&stripe.BackendConfig{URL: stripe.String(rt.root), HTTPClient: hc,
				MaxNetworkRetries: stripe.Int64(0), LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull}})
			sc := stripe.NewClient(f.token, stripe.WithBackends(backends))
			cus, err := sc.V1Customers.Create(t.Context(), &stripe.CustomerCreateParams{Email: stripe.String("ann@example.com"), Description: stripe.String("key " + f.token)})
			if err != nil {
				t.Fatalf("V1Customers.Create = %v", err)
			}
			if cus.ID != "cus_1" || cus.Email != "ann@example.com" {
				t.Errorf("V1Customers.Create = %+v, want cus_1 for ann@example.com", cus)
			}
			h.mu.Lock()
			kept := h.kept[len(h.kept)-1]
			h.mu.Unlock()
			if want := "key " + proxy.TokenMarker(len(f.token)); kept != want {
				t.Errorf("the host kept the description %q, want %q", kept, want)
			}
		})
	}
}

// TestProxy_OAuthClientCredentialsInParams: x/oauth2's client
// credentials flow with AuthStyleInParams sends client_secret (the box's
// token) in the form body alone; with the secret naming client_secret as
// a body field, the token endpoint receives the value there, through
// /egress/API (where the head holds no token) and through the proxy.
func TestProxy_OAuthClientCredentialsInParams(t *testing.T) {
	f, _, routes := sdkRoutes(t)
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			cfg := clientcredentials.Config{ClientID: "app", ClientSecret: f.token, TokenURL: rt.base + "/oauth/token", AuthStyle: oauth2.AuthStyleInParams}
			ctx := context.WithValue(t.Context(), oauth2.HTTPClient, rt.client)
			tok, err := cfg.Token(ctx)
			if err != nil {
				t.Fatalf("clientcredentials Token = %v", err)
			}
			if tok.AccessToken != "at_minted_by_the_host" {
				t.Errorf("clientcredentials Token = %q, want the host's", tok.AccessToken)
			}
		})
	}
}
