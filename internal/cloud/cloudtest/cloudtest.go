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
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/intentius/boxbroker/internal/cloud"
	"github.com/intentius/boxbroker/internal/upstreamtest"
)

// refused counts a refusal in bad and answers it: status, body, and a
// Content-Type of contentType ("" for none).
func refused(w http.ResponseWriter, bad *atomic.Int64, status int, contentType string, body []byte) {
	bad.Add(1)
	if contentType != "" {
		w.Header().Set("Content-Type", contentType)
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// Bedrock answers as Bedrock's runtime does, after checking what it
// checks: a SigV4 signature it recomputes with the SDK's signer from the
// same credentials and the request as received, and a body with
// bedrock's anthropic_version and no model or stream. It answers a
// stream in eventstream frames made with the SDK's encoder. The model
// ids anthropic.throttle and anthropic.busy answer ThrottlingException
// (429) and ServiceUnavailableException (503), anthropic.invalid a
// ValidationException (400) that is not about betas. Each model takes only
// the betas Betas gives it, and answers any other as Bedrock does (400
// "invalid beta flag"); the model id anthropic.nobeta takes none. It
// takes the sessions its STS stand-in issued, as Bedrock takes a role's.
type Bedrock struct {
	// Creds are the credentials it checks signatures with; Region is the
	// region a signature's scope must name. Set them before any request.
	Creds  aws.Credentials
	Region string
	// Betas, set before any request, maps a model id (an inference
	// profile's prefix aside) to the anthropic_beta values it takes; a
	// model id it does not name takes StandInBedrockBetas.
	Betas map[string][]string
	// Members, when set before any request, are the top-level members an
	// InvokeModel body may have: any other is refused as Bedrock's schema
	// check refuses it (400 ValidationException, "extraneous key [NAME]
	// is not permitted"), repeating the member's name, before its betas
	// are looked at. Nil takes every member.
	Members []string
	// RoleOnly, when set, refuses calls signed with Creds
	// (AccessDeniedException): only a role session's are taken.
	RoleOnly atomic.Bool
	// STS is the STS stand-in, at the same address (POST /).
	STS *STS

	mu       sync.Mutex         // guards sessions
	sessions map[string]session // by access key id
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
	w.Header().Set("X-Amzn-Errortype", code+":http://internal.amazon.com/coral/com.amazon.bedrock/")
	b, _ := json.Marshal(map[string]string{"message": msg})
	refused(w, &s.Bad, status, "application/json", b)
}

func (s *Bedrock) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.URL.Path == "/" && s.STS != nil {
		s.STS.serve(w, r, body)
		return
	}
	creds, code, msg := s.credsOf(r)
	if code != "" {
		s.fail(w, http.StatusForbidden, code, msg)
		return
	}
	if err := verify(r, body, creds, "bedrock", s.Region); err != nil {
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
		if !s.betasTaken(w, id, m) {
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
	if s.Members != nil {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if !slices.Contains(s.Members, k) {
				s.fail(w, http.StatusBadRequest, "ValidationException",
					"Malformed input request: #: extraneous key ["+k+"] is not permitted, please reformat your input and try again.")
				return
			}
		}
	}
	if !s.betasTaken(w, id, m) {
		return
	}
	switch id {
	case "anthropic.throttle":
		s.fail(w, http.StatusTooManyRequests, "ThrottlingException", "Too many requests, please wait before trying again.")
		return
	case "anthropic.busy":
		s.fail(w, http.StatusServiceUnavailable, "ServiceUnavailableException", "Bedrock is unable to process your request.")
		return
	case "anthropic.invalid":
		s.fail(w, http.StatusBadRequest, "ValidationException", "messages.0.content.0.text: text content blocks must be non-empty")
		return
	}
	text := "Hello from Bedrock."
	if e := s.Echo.Load(); e != nil {
		text = *e + " " + r.Header.Get("Authorization")
	}
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, upstreamtest.Message(id, text))
		return
	}
	w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
	enc := eventstream.NewEncoder()
	for _, ev := range upstreamtest.StreamEvents(id, text) {
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

// StandInBedrockBetas are the betas the Bedrock stand-in's models take
// unless Bedrock.Betas says otherwise: those Bedrock documents for its
// Claude models (the broker's own default list is cloud.BedrockBetas).
var StandInBedrockBetas = []string{
	"computer-use-2024-10-22", "computer-use-2025-01-24", "computer-use-2025-11-24",
	"token-efficient-tools-2025-02-19", "interleaved-thinking-2025-05-14", "output-128k-2025-02-19",
	"dev-full-thinking-2025-05-14", "context-1m-2025-08-07", "context-management-2025-06-27",
	"effort-2025-11-24", "tool-search-tool-2025-10-19", "tool-examples-2025-10-29",
}

// betasTaken checks the body's anthropic_beta against what model id
// takes, and answers Bedrock's refusal when it takes not all of them.
func (s *Bedrock) betasTaken(w http.ResponseWriter, id string, m map[string]json.RawMessage) bool {
	raw, ok := m["anthropic_beta"]
	if !ok {
		return true
	}
	var list []string
	if json.Unmarshal(raw, &list) != nil {
		s.fail(w, http.StatusBadRequest, "ValidationException", "malformed input request: anthropic_beta")
		return false
	}
	bare := id
	if i := strings.Index(id, "anthropic."); i > 0 {
		bare = id[i:]
	}
	allow, named := s.Betas[bare]
	if !named {
		allow = StandInBedrockBetas
	}
	if bare == "anthropic.nobeta" {
		allow = nil
	}
	for _, b := range list {
		if !slices.Contains(allow, b) {
			s.fail(w, http.StatusBadRequest, "ValidationException", "The model returned the following errors: invalid beta flag")
			return false
		}
	}
	return true
}

// session is a role session the STS stand-in issued.
type session struct {
	creds   aws.Credentials
	expires time.Time
}

// credsOf returns the credentials r's signature names (its scope's key
// id): Creds, or a session its STS stand-in issued, whose token r must
// carry; or the code and message Bedrock refuses it with.
func (s *Bedrock) credsOf(r *http.Request) (creds aws.Credentials, code, msg string) {
	_, cred, _ := strings.Cut(r.Header.Get("Authorization"), "Credential=")
	keyID, _, _ := strings.Cut(cred, "/")
	token := r.Header.Get("X-Amz-Security-Token")
	if keyID == s.Creds.AccessKeyID {
		if s.RoleOnly.Load() {
			return creds, "AccessDeniedException", "User: arn:aws:iam::123456789012:user/standin is not authorized to perform: bedrock:InvokeModel"
		}
		if token != s.Creds.SessionToken {
			return creds, "UnrecognizedClientException", "The security token included in the request is invalid."
		}
		return s.Creds, "", ""
	}
	s.mu.Lock()
	ses, ok := s.sessions[keyID]
	s.mu.Unlock()
	switch {
	case !ok || token != ses.creds.SessionToken:
		return creds, "UnrecognizedClientException", "The security token included in the request is invalid."
	case !time.Now().Before(ses.expires):
		return creds, "ExpiredTokenException", "The security token included in the request is expired"
	}
	return ses.creds, "", ""
}

// verify recomputes r's SigV4 signature, over the headers it names as
// signed and the body received, with creds for service in region, and
// compares it with the one sent.
func verify(r *http.Request, body []byte, creds aws.Credentials, service, region string) error {
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
	if len(scope) != 5 || scope[0] != creds.AccessKeyID || scope[2] != region || scope[3] != service || scope[4] != "aws4_request" {
		return fmt.Errorf("credential scope is not this key's, region's and %s's", service)
	}
	if creds.SessionToken != "" && !slices.Contains(strings.Split(signed, ";"), "x-amz-security-token") {
		return fmt.Errorf("the session token is not signed")
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
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), service, region, at); err != nil {
		return err
	}
	if req.Header.Get("Authorization") != auth {
		return fmt.Errorf("the signature does not match")
	}
	return nil
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
	Recorder *upstreamtest.Recorder
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
// Vertex AI; claude-nobeta, which takes no beta, and claude-invalid,
// which answers a 400 that is not about betas, on both). The server is
// closed when t's test ends.
func New(t testing.TB, kind string, models map[string]string) *Cloud {
	t.Helper()
	c := &Cloud{Kind: kind, Recorder: &upstreamtest.Recorder{}}
	ts := httptest.NewUnstartedServer(c.Recorder)
	ts.StartTLS()
	t.Cleanup(ts.Close)
	c.Server = ts
	switch kind {
	case "bedrock":
		secret := "bedrock/Secret+" + strings.Repeat("k", 24)
		c.Bedrock = &Bedrock{Creds: aws.Credentials{AccessKeyID: "AKIASTANDIN000000001", SecretAccessKey: secret}, Region: "us-east-1"}
		c.Bedrock.STS = &STS{RoleARN: StandInRoleARN, bedrock: c.Bedrock}
		c.Recorder.Handler = c.Bedrock
		b, _ := json.Marshal(map[string]any{"region": "us-east-1", "access_key_id": "AKIASTANDIN000000001", "secret_access_key": secret,
			"endpoint": ts.URL, "models": with(models, map[string]string{"claude-throttle": "anthropic.throttle", "claude-busy": "anthropic.busy",
				"claude-nobeta": "anthropic.nobeta", "claude-invalid": "anthropic.invalid"})})
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
			"models": with(models, map[string]string{"claude-exhausted": "claude-exhausted@1", "claude-nobeta": "claude-nobeta@1", "claude-invalid": "claude-invalid@1"})})
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
	maps.Copy(m, extra)
	return m
}

// Transport returns a new transport that trusts the stand-in's
// certificate, with verification on, for a broker's outbound calls.
func (c *Cloud) Transport() *http.Transport {
	return c.Server.Client().Transport.(*http.Transport).Clone()
}

// StandInRoleARN is the role the STS stand-in lets the Bedrock
// stand-in's key assume.
const StandInRoleARN = "arn:aws:iam::123456789012:role/standin-bedrock"

// RoleCredential returns a Bedrock stand-in's cloud account that signs
// with sessions of StandInRoleARN, assumed at the STS stand-in (its
// sts_endpoint) with the account's key and externalID (none when
// empty), with extra members added; and its form sealed (cloud.Check's).
// From then on the Bedrock stand-in refuses calls signed with the key
// itself (Bedrock.RoleOnly).
func (c *Cloud) RoleCredential(t testing.TB, externalID string, extra map[string]any) (raw, sealed string) {
	t.Helper()
	if c.Bedrock == nil {
		t.Fatalf("RoleCredential: the %s stand-in has no STS", c.Kind)
	}
	var m map[string]any
	_ = json.Unmarshal([]byte(c.Credential), &m)
	m["role_arn"] = StandInRoleARN
	m["sts_endpoint"] = c.Server.URL
	if externalID != "" {
		m["external_id"] = externalID
	}
	maps.Copy(m, extra)
	b, _ := json.Marshal(m)
	c.Bedrock.STS.ExternalID = externalID
	c.Bedrock.RoleOnly.Store(true)
	s, err := cloud.Check("bedrock", b)
	if err != nil {
		t.Fatalf("cloud.Check(bedrock with role_arn): %v", err)
	}
	return string(b), string(s)
}

// Refused is how many requests the stand-in refused (Bedrock.Bad and
// its STS's, or Vertex.Bad).
func (c *Cloud) Refused() int64 {
	if c.Bedrock != nil {
		return c.Bedrock.Bad.Load() + c.Bedrock.STS.Bad.Load()
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

// Calls is how many model calls (not token requests) the stand-in got.
func (c *Cloud) Calls() int {
	n := 0
	for _, s := range c.Recorder.Seen() {
		if s.Path != "/token" {
			n++
		}
	}
	return n
}

// NoSecret fails the test if text holds any of the account's secrets;
// what names the text.
func (c *Cloud) NoSecret(t testing.TB, what, text string) {
	t.Helper()
	for _, s := range c.Secrets {
		if s != "" && strings.Contains(text, s) {
			t.Errorf("%s holds a secret of the %s account", what, c.Kind)
		}
	}
}
