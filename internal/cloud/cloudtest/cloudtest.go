// Package cloudtest is for tests: it holds stand-ins for Amazon Bedrock's
// runtime and for Google Vertex AI with Google's OAuth token endpoint,
// each on loopback TLS, checking what the real services check (Bedrock
// the request's SigV4 signature, recomputed with the AWS SDK's signer;
// Vertex AI the service account's RS256 JWT and the access token it
// issued) and answering as they answer. New starts one and gives the
// credential a broker pays with there.
package cloudtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/golang-jwt/jwt/v5"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/cloud"
)

// standInEvents are the Anthropic stream events both stand-ins answer
// with, text holding what the answer says.
func standInEvents(model, text string) []string {
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	return []string{
		`{"type":"message_start","message":{"id":"msg_cloud","type":"message","role":"assistant","model":` + q(model) + `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":1}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`{"type":"ping"}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":` + q(text) + `}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":6}}`,
		`{"type":"message_stop"}`,
	}
}

func standInMessage(model, text string) string {
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	return `{"id":"msg_cloud","type":"message","role":"assistant","model":` + q(model) + `,"content":[{"type":"text","text":` + q(text) + `}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":6}}`
}

// Bedrock answers as Bedrock's runtime does, after checking what it
// checks: a SigV4 signature it recomputes with the SDK's signer from the
// same credentials and the request as received, and a body with
// bedrock's anthropic_version and no model or stream. It answers a
// stream in eventstream frames made with the SDK's encoder. The model
// ids anthropic.throttle and anthropic.busy answer ThrottlingException
// (429) and ServiceUnavailableException (503).
type Bedrock struct {
	// Creds are the credentials it checks signatures with; Region is the
	// region a signature's scope must name. Set them before any request.
	Creds  aws.Credentials
	Region string
	// Echo, when set, is the text every answer says, followed by the
	// request's Authorization (to see what reaches the box).
	Echo atomic.Pointer[string]
	// Bad counts the requests it refused, for their signature, their
	// body or a model id that refuses.
	Bad atomic.Int64
	// Hold, when set before any request, is waited on (10 s at most)
	// after each streamed event is sent.
	Hold chan struct{}
}

func (s *Bedrock) fail(w http.ResponseWriter, status int, code, msg string) {
	s.Bad.Add(1)
	w.Header().Set("X-Amzn-Errortype", code+":http://internal.amazon.com/coral/com.amazon.bedrock/")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]string{"message": msg})
	_, _ = w.Write(b)
}

func (s *Bedrock) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if err := s.verify(r, body); err != nil {
		s.fail(w, http.StatusForbidden, "InvalidSignatureException", err.Error())
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/model/")
	if !ok || r.Method != http.MethodPost {
		s.fail(w, http.StatusNotFound, "UnknownOperationException", "no such operation")
		return
	}
	var id string
	var stream bool
	if id, ok := strings.CutSuffix(rest, "/count-tokens"); ok {
		var in struct {
			Input struct {
				InvokeModel struct {
					Body []byte `json:"body"`
				} `json:"invokeModel"`
			} `json:"input"`
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(body, &in) != nil || json.Unmarshal(in.Input.InvokeModel.Body, &m) != nil ||
			string(m["anthropic_version"]) != `"bedrock-2023-05-31"` || m["model"] != nil || m["max_tokens"] == nil || !strings.HasPrefix(id, "anthropic.") {
			s.fail(w, http.StatusBadRequest, "ValidationException", "malformed input request")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"inputTokens":12}`)
		return
	}
	switch {
	case strings.HasSuffix(rest, "/invoke-with-response-stream"):
		id, stream = strings.TrimSuffix(rest, "/invoke-with-response-stream"), true
	case strings.HasSuffix(rest, "/invoke"):
		id = strings.TrimSuffix(rest, "/invoke")
	default:
		s.fail(w, http.StatusNotFound, "UnknownOperationException", "no such operation")
		return
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil || string(m["anthropic_version"]) != `"bedrock-2023-05-31"` || m["model"] != nil || m["stream"] != nil {
		s.fail(w, http.StatusBadRequest, "ValidationException", "malformed input request")
		return
	}
	switch id {
	case "anthropic.throttle":
		s.fail(w, http.StatusTooManyRequests, "ThrottlingException", "Too many requests, please wait before trying again.")
		return
	case "anthropic.busy":
		s.fail(w, http.StatusServiceUnavailable, "ServiceUnavailableException", "Bedrock is unable to process your request.")
		return
	}
	text := "Hello from Bedrock."
	if e := s.Echo.Load(); e != nil {
		text = *e + " " + r.Header.Get("Authorization")
	}
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, standInMessage(id, text))
		return
	}
	w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
	enc := eventstream.NewEncoder()
	for _, ev := range standInEvents(id, text) {
		payload, _ := json.Marshal(map[string][]byte{"bytes": []byte(ev)})
		var hs eventstream.Headers
		hs.Set(":message-type", eventstream.StringValue("event"))
		hs.Set(":event-type", eventstream.StringValue("chunk"))
		hs.Set(":content-type", eventstream.StringValue("application/json"))
		if err := enc.Encode(w, eventstream.Message{Headers: hs, Payload: payload}); err != nil {
			return
		}
		w.(http.Flusher).Flush()
		wait(s.Hold)
	}
}

// verify recomputes r's SigV4 signature, over the headers it names as
// signed and the body received, and compares it with the one sent.
func (s *Bedrock) verify(r *http.Request, body []byte) error {
	auth := r.Header.Get("Authorization")
	rest, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 ")
	if !ok {
		return fmt.Errorf("no SigV4 Authorization")
	}
	var cred, signed string
	for _, part := range strings.Split(rest, ", ") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "Credential":
			cred = v
		case "SignedHeaders":
			signed = v
		}
	}
	scope := strings.Split(cred, "/")
	if len(scope) != 5 || scope[0] != s.Creds.AccessKeyID || scope[2] != s.Region || scope[3] != "bedrock" || scope[4] != "aws4_request" {
		return fmt.Errorf("credential scope is not this key's, region's and bedrock's")
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil || time.Since(at).Abs() > 15*time.Minute {
		return fmt.Errorf("X-Amz-Date is missing or too far from now")
	}
	req, err := http.NewRequest(r.Method, "https://"+r.Host+r.URL.EscapedPath(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = http.Header{}
	for _, h := range strings.Split(signed, ";") {
		switch h {
		case "host":
			req.Host = r.Host
		case "content-length":
			req.ContentLength = r.ContentLength
		default:
			req.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(context.Background(), s.Creds, req, hex.EncodeToString(sum[:]), "bedrock", s.Region, at); err != nil {
		return err
	}
	if req.Header.Get("Authorization") != auth {
		return fmt.Errorf("the signature does not match")
	}
	return nil
}

// Vertex answers as Google's OAuth token endpoint (at /token) and Vertex
// AI's rawPredict and streamRawPredict do, after checking what they
// check: the service account's JWT, signed RS256 with its key (whose
// public half the stand-in holds), and the access token it issued. The
// model id claude-exhausted@1 answers RESOURCE_EXHAUSTED (429).
type Vertex struct {
	// URL is its own base URL, the token_uri's; Email, Project and
	// Region are the service account's and the location's it expects.
	URL, Email, Project, Region string
	pub                         *rsa.PublicKey

	mu     sync.Mutex // guards tokens
	tokens map[string]bool

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
		_, _ = io.WriteString(w, standInMessage(model, text))
	case "streamRawPredict":
		if string(m["stream"]) != "true" {
			s.refuse(w, http.StatusBadRequest, "INVALID_ARGUMENT", "streamRawPredict takes stream: true")
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range standInEvents(model, text) {
			var t struct{ Type string }
			_ = json.Unmarshal([]byte(ev), &t)
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", t.Type, ev)
			w.(http.Flusher).Flush()
			wait(s.Hold)
		}
	default:
		s.refuse(w, http.StatusNotFound, "NOT_FOUND", "no such method")
	}
}

// token checks a JWT-bearer grant as Google's token endpoint does and
// issues an access token.
func (s *Vertex) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.PostForm.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		s.Bad.Add(1)
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":"unsupported_grant_type"}`)
		return
	}
	claims := jwt.MapClaims{}
	_, err := jwt.ParseWithClaims(r.PostForm.Get("assertion"), claims, func(*jwt.Token) (any, error) { return s.pub, nil },
		jwt.WithValidMethods([]string{"RS256"}), jwt.WithIssuer(s.Email), jwt.WithAudience(s.URL+"/token"), jwt.WithExpirationRequired(), jwt.WithIssuedAt())
	if err != nil || claims["scope"] != "https://www.googleapis.com/auth/cloud-platform" {
		s.Bad.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":"invalid_grant","error_description":"Invalid JWT Signature."}`)
		return
	}
	n := s.Minted.Add(1)
	tok := fmt.Sprintf("ya29.standin-%d-%s", n, strings.Repeat("x", 40))
	s.mu.Lock()
	s.tokens[tok] = true
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"access_token":%q,"expires_in":3600,"token_type":"Bearer"}`, tok)
}

// refuse answers a Google API error and counts it.
func (s *Vertex) refuse(w http.ResponseWriter, code int, status, msg string) {
	s.Bad.Add(1)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": code, "message": msg, "status": status}})
	_, _ = w.Write(b)
}

// Cloud is a running stand-in of one kind, on loopback TLS, recording
// what it received.
type Cloud struct {
	// Kind is "bedrock" or "vertex".
	Kind string
	// Server is the TLS server; Server.Client().Transport trusts its
	// certificate.
	Server *httptest.Server
	// Recorder records every request the stand-in received, the token
	// endpoint's included.
	Recorder *brokertest.Recorder
	// Bedrock is the Bedrock stand-in (nil unless Kind is "bedrock");
	// Vertex the Vertex AI one (nil unless Kind is "vertex").
	Bedrock *Bedrock
	Vertex  *Vertex
	// Credential is the cloud account's JSON as an operator gives it,
	// its endpoint the stand-in's; Sealed is its form for the broker's
	// shared credential (cloud.Check's).
	Credential, Sealed string
	// Secrets are strings of the account that must reach no box: for
	// Bedrock the access key id and the secret access key, for Vertex AI
	// the private key's id and a line of the private key.
	Secrets []string
}

// New starts a stand-in of kind ("bedrock" or "vertex") and makes a
// cloud account there; it fails t on any other kind. Models, when not
// nil, is added to the credential's "models" (Anthropic model name to
// the cloud's id), beside the names of the model ids that refuse
// (claude-throttle and claude-busy on Bedrock, claude-exhausted on
// Vertex AI). The server is closed when t's test ends.
func New(t testing.TB, kind string, models map[string]string) *Cloud {
	t.Helper()
	c := &Cloud{Kind: kind, Recorder: &brokertest.Recorder{}}
	ts := httptest.NewUnstartedServer(c.Recorder)
	ts.StartTLS()
	t.Cleanup(ts.Close)
	c.Server = ts
	switch kind {
	case "bedrock":
		secret := "bedrock/Secret+" + strings.Repeat("k", 24)
		c.Bedrock = &Bedrock{Creds: aws.Credentials{AccessKeyID: "AKIASTANDIN000000001", SecretAccessKey: secret}, Region: "us-east-1"}
		c.Recorder.Handler = c.Bedrock
		b, _ := json.Marshal(map[string]any{"region": "us-east-1", "access_key_id": "AKIASTANDIN000000001", "secret_access_key": secret,
			"endpoint": ts.URL, "models": with(models, map[string]string{"claude-throttle": "anthropic.throttle", "claude-busy": "anthropic.busy"})})
		c.Credential = string(b)
		c.Secrets = []string{"AKIASTANDIN000000001", secret}
	case "vertex":
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		der, _ := x509.MarshalPKCS8PrivateKey(key)
		pemKey := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
		c.Vertex = &Vertex{URL: ts.URL, Email: "broker@standin-project.iam.gserviceaccount.com", Project: "standin-project",
			Region: "us-east5", pub: &key.PublicKey, tokens: map[string]bool{}}
		c.Recorder.Handler = c.Vertex
		sa := map[string]string{"type": "service_account", "project_id": "standin-project", "private_key_id": "0123456789abcdef0123456789abcdef01234567",
			"private_key": pemKey, "client_email": c.Vertex.Email, "client_id": "1234567890", "token_uri": ts.URL + "/token"}
		b, _ := json.Marshal(map[string]any{"region": "us-east5", "service_account": sa, "endpoint": ts.URL,
			"models": with(models, map[string]string{"claude-exhausted": "claude-exhausted@1"})})
		c.Credential = string(b)
		c.Secrets = []string{"0123456789abcdef0123456789abcdef01234567", strings.Split(pemKey, "\n")[3]}
	default:
		t.Fatalf("cloudtest.New: no stand-in for kind %q", kind)
	}
	sealed, err := cloud.Check(kind, []byte(c.Credential))
	if err != nil {
		t.Fatalf("cloud.Check(%s): %v", kind, err)
	}
	c.Sealed = string(sealed)
	return c
}

// with returns m with extra's entries added.
func with(extra, m map[string]string) map[string]string {
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// Transport returns a new transport that trusts the stand-in's
// certificate, with verification on, for a broker's outbound calls.
func (c *Cloud) Transport() *http.Transport {
	return c.Server.Client().Transport.(*http.Transport).Clone()
}

// Refused is how many requests the stand-in refused (Bedrock.Bad or
// Vertex.Bad).
func (c *Cloud) Refused() int64 {
	if c.Bedrock != nil {
		return c.Bedrock.Bad.Load()
	}
	return c.Vertex.Bad.Load()
}

// Authorization is the prefix of the Authorization the stand-in takes
// on a model call: a SigV4 signature's or an issued access token's.
func (c *Cloud) Authorization() string {
	if c.Bedrock != nil {
		return "AWS4-HMAC-SHA256 "
	}
	return "Bearer ya29.standin-"
}
