package cloudtest

import (
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/intentius/boxbroker/internal/upstreamtest"
)

// Vertex answers as Google's OAuth token endpoint (at /token) and Vertex
// AI's rawPredict and streamRawPredict do, after checking what they
// check: the service account's JWT, signed RS256 with its key (whose
// public half the stand-in holds), and the access token it issued. The
// model id claude-exhausted@1 answers RESOURCE_EXHAUSTED (429),
// claude-invalid@1 an INVALID_ARGUMENT (400) that is not about betas. Each
// model takes the betas (anthropic-beta header, or the body's
// anthropic_beta) Betas gives it, and answers any other as the Anthropic
// API does (400 invalid_request_error); the model id claude-nobeta@1
// takes none.
type Vertex struct {
	// Betas, set before any request, maps a model id to the betas it
	// takes; a model id it does not name takes every one.
	Betas map[string][]string
	// URL is its own base URL, the token_uri's; Email, Project and
	// Region are the service account's and the location's it expects.
	URL, Email, Project, Region string
	// ExpiresIn, when set, is the expires_in its access tokens are given
	// (nil: 3600). Set it before any request.
	ExpiresIn *int
	pub       *rsa.PublicKey

	mu     sync.Mutex      // guards tokens
	tokens map[string]bool // the access tokens it takes

	// Minted counts the access tokens it issued.
	Minted atomic.Int64
	// Bad counts the requests it refused: a bad grant or token, a
	// malformed body, an unknown route or a model id that refuses.
	Bad atomic.Int64
	// Echo and Hold are as Bedrock's.
	Echo atomic.Pointer[string]
	Hold chan struct{}
}

// wait waits for hold to close, 10 s at most; a nil hold is no wait.
func wait(hold chan struct{}) {
	if hold == nil {
		return
	}
	select {
	case <-hold:
	case <-time.After(10 * time.Second):
	}
}

func (s *Vertex) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/token" {
		s.token(w, r)
		return
	}
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.mu.Lock()
	good := s.tokens[tok]
	s.mu.Unlock()
	if !good {
		s.refuse(w, http.StatusUnauthorized, "UNAUTHENTICATED", "Request had invalid authentication credentials.")
		return
	}
	prefix := "/v1/projects/" + s.Project + "/locations/" + s.Region + "/publishers/anthropic/models/"
	rest, ok := strings.CutPrefix(r.URL.Path, prefix)
	if !ok || r.Method != http.MethodPost {
		s.refuse(w, http.StatusNotFound, "NOT_FOUND", "no such route")
		return
	}
	body, _ := io.ReadAll(r.Body)
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil || string(m["anthropic_version"]) != `"vertex-2023-10-16"` {
		s.refuse(w, http.StatusBadRequest, "INVALID_ARGUMENT", "anthropic_version is required")
		return
	}
	model, method, _ := strings.Cut(rest, ":")
	betaModel := model
	if model == "count-tokens" {
		_ = json.Unmarshal(m["model"], &betaModel)
	}
	if !s.betasTaken(w, r, betaModel, m) {
		return
	}
	if model == "count-tokens" {
		if method != "rawPredict" || m["model"] == nil {
			s.refuse(w, http.StatusBadRequest, "INVALID_ARGUMENT", "count-tokens takes a model")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"input_tokens":12}`)
		return
	}
	if m["model"] != nil {
		s.refuse(w, http.StatusBadRequest, "INVALID_ARGUMENT", "model is not a field of the body")
		return
	}
	if model == "claude-invalid@1" {
		s.refuse(w, http.StatusBadRequest, "INVALID_ARGUMENT", "messages.0.content.0.text: text content blocks must be non-empty")
		return
	}
	if model == "claude-exhausted@1" {
		s.refuse(w, http.StatusTooManyRequests, "RESOURCE_EXHAUSTED", "Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model.")
		return
	}
	text := "Hello from Vertex."
	if e := s.Echo.Load(); e != nil {
		text = *e + " " + r.Header.Get("Authorization")
	}
	switch method {
	case "rawPredict":
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, upstreamtest.Message(model, text))
	case "streamRawPredict":
		if string(m["stream"]) != "true" {
			s.refuse(w, http.StatusBadRequest, "INVALID_ARGUMENT", "streamRawPredict takes stream: true")
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range upstreamtest.SSEEvents(model, text) {
			_, _ = io.WriteString(w, ev)
			w.(http.Flusher).Flush()
			wait(s.Hold)
		}
	default:
		s.refuse(w, http.StatusNotFound, "NOT_FOUND", "no such method")
	}
}

// betasTaken checks the request's betas against what model takes, and
// answers the Anthropic API's refusal when it takes not all of them.
func (s *Vertex) betasTaken(w http.ResponseWriter, r *http.Request, model string, m map[string]json.RawMessage) bool {
	var list []string
	for _, v := range r.Header.Values("Anthropic-Beta") {
		for _, b := range strings.Split(v, ",") {
			if b = strings.TrimSpace(b); b != "" {
				list = append(list, b)
			}
		}
	}
	if raw, ok := m["anthropic_beta"]; ok {
		var body []string
		if json.Unmarshal(raw, &body) != nil {
			s.refuse(w, http.StatusBadRequest, "INVALID_ARGUMENT", "anthropic_beta is a list of strings")
			return false
		}
		list = append(list, body...)
	}
	allow, named := s.Betas[model]
	if model == "claude-nobeta@1" {
		allow, named = nil, true
	}
	for _, b := range list {
		if named && !slices.Contains(allow, b) {
			msg := "Unexpected value(s) `" + b + "` for the `anthropic-beta` header. Please consult our documentation at docs.claude.com or try again without the header."
			e, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": "invalid_request_error", "message": msg}})
			refused(w, &s.Bad, http.StatusBadRequest, "application/json", e)
			return false
		}
	}
	return true
}

// Revoke makes every access token issued so far refused (401
// UNAUTHENTICATED), as Google refuses a revoked or expired one.
func (s *Vertex) Revoke() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.tokens)
}

// token checks a JWT-bearer grant as Google's token endpoint does and
// issues an access token.
func (s *Vertex) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.PostForm.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		refused(w, &s.Bad, http.StatusBadRequest, "", []byte(`{"error":"unsupported_grant_type"}`))
		return
	}
	claims := jwt.MapClaims{}
	_, err := jwt.ParseWithClaims(r.PostForm.Get("assertion"), claims, func(*jwt.Token) (any, error) { return s.pub, nil },
		jwt.WithValidMethods([]string{"RS256"}), jwt.WithIssuer(s.Email), jwt.WithAudience(s.URL+"/token"), jwt.WithExpirationRequired(), jwt.WithIssuedAt())
	if err != nil || claims["scope"] != "https://www.googleapis.com/auth/cloud-platform" {
		refused(w, &s.Bad, http.StatusBadRequest, "application/json", []byte(`{"error":"invalid_grant","error_description":"Invalid JWT Signature."}`))
		return
	}
	n := s.Minted.Add(1)
	tok := fmt.Sprintf("ya29.standin-%d-%s", n, strings.Repeat("x", 40))
	s.mu.Lock()
	s.tokens[tok] = true
	s.mu.Unlock()
	life := 3600
	if s.ExpiresIn != nil {
		life = *s.ExpiresIn
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"access_token":%q,"expires_in":%d,"token_type":"Bearer"}`, tok, life)
}

// refuse answers a Google API error and counts it.
func (s *Vertex) refuse(w http.ResponseWriter, code int, status, msg string) {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": code, "message": msg, "status": status}})
	refused(w, &s.Bad, code, "application/json", b)
}
