package inference_test

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
	"github.com/intentius/boxbroker/internal/server"
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

// bedrockStandIn answers as Bedrock's runtime does, after checking what
// it checks: a SigV4 signature it recomputes with the SDK's signer from
// the same credentials and the request as received, and a body with
// bedrock's anthropic_version and no model or stream. It answers a
// stream in eventstream frames made with the SDK's encoder. Echo, when
// set, is the text every answer says (to see what reaches the box).
type bedrockStandIn struct {
	creds  aws.Credentials
	region string
	echo   atomic.Pointer[string]
	bad    atomic.Int64 // requests refused for their signature or body
	// hold, when set, is waited on (10 s at most) after a stream's first
	// event is sent.
	hold chan struct{}
}

func (s *bedrockStandIn) fail(w http.ResponseWriter, status int, code, msg string) {
	s.bad.Add(1)
	w.Header().Set("X-Amzn-Errortype", code+":http://internal.amazon.com/coral/com.amazon.bedrock/")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]string{"message": msg})
	_, _ = w.Write(b)
}

func (s *bedrockStandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
	if e := s.echo.Load(); e != nil {
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
		wait(s.hold)
	}
}

// verify recomputes r's SigV4 signature, over the headers it names as
// signed and the body received, and compares it with the one sent.
func (s *bedrockStandIn) verify(r *http.Request, body []byte) error {
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
	if len(scope) != 5 || scope[0] != s.creds.AccessKeyID || scope[2] != s.region || scope[3] != "bedrock" || scope[4] != "aws4_request" {
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
	if err := v4.NewSigner().SignHTTP(context.Background(), s.creds, req, hex.EncodeToString(sum[:]), "bedrock", s.region, at); err != nil {
		return err
	}
	if req.Header.Get("Authorization") != auth {
		return fmt.Errorf("the signature does not match")
	}
	return nil
}

// vertexStandIn answers as Google's OAuth token endpoint and Vertex AI's
// rawPredict and streamRawPredict do, after checking what they check: the
// service account's JWT, signed RS256 with its key (whose public half the
// stand-in holds), and the access token it issued.
type vertexStandIn struct {
	url     string // its own base URL, the token_uri's
	email   string
	project string
	region  string
	pub     *rsa.PublicKey

	mu     sync.Mutex // guards tokens
	tokens map[string]bool

	minted atomic.Int64
	echo   atomic.Pointer[string]
	hold   chan struct{} // as bedrockStandIn's
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

func (s *vertexStandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/token" {
		s.token(w, r)
		return
	}
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.mu.Lock()
	good := s.tokens[tok]
	s.mu.Unlock()
	if !good {
		googleError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "Request had invalid authentication credentials.")
		return
	}
	prefix := "/v1/projects/" + s.project + "/locations/" + s.region + "/publishers/anthropic/models/"
	rest, ok := strings.CutPrefix(r.URL.Path, prefix)
	if !ok || r.Method != http.MethodPost {
		googleError(w, http.StatusNotFound, "NOT_FOUND", "no such route")
		return
	}
	body, _ := io.ReadAll(r.Body)
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil || string(m["anthropic_version"]) != `"vertex-2023-10-16"` {
		googleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "anthropic_version is required")
		return
	}
	model, method, _ := strings.Cut(rest, ":")
	if model == "count-tokens" {
		if method != "rawPredict" || m["model"] == nil {
			googleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "count-tokens takes a model")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"input_tokens":12}`)
		return
	}
	if m["model"] != nil {
		googleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "model is not a field of the body")
		return
	}
	if model == "claude-exhausted@1" {
		googleError(w, http.StatusTooManyRequests, "RESOURCE_EXHAUSTED", "Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model.")
		return
	}
	text := "Hello from Vertex."
	if e := s.echo.Load(); e != nil {
		text = *e + " " + r.Header.Get("Authorization")
	}
	switch method {
	case "rawPredict":
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, standInMessage(model, text))
	case "streamRawPredict":
		if string(m["stream"]) != "true" {
			googleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "streamRawPredict takes stream: true")
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range standInEvents(model, text) {
			var t struct{ Type string }
			_ = json.Unmarshal([]byte(ev), &t)
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", t.Type, ev)
			w.(http.Flusher).Flush()
			wait(s.hold)
		}
	default:
		googleError(w, http.StatusNotFound, "NOT_FOUND", "no such method")
	}
}

// token checks a JWT-bearer grant as Google's token endpoint does and
// issues an access token.
func (s *vertexStandIn) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.PostForm.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":"unsupported_grant_type"}`)
		return
	}
	claims := jwt.MapClaims{}
	_, err := jwt.ParseWithClaims(r.PostForm.Get("assertion"), claims, func(*jwt.Token) (any, error) { return s.pub, nil },
		jwt.WithValidMethods([]string{"RS256"}), jwt.WithIssuer(s.email), jwt.WithAudience(s.url+"/token"), jwt.WithExpirationRequired(), jwt.WithIssuedAt())
	if err != nil || claims["scope"] != "https://www.googleapis.com/auth/cloud-platform" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":"invalid_grant","error_description":"Invalid JWT Signature."}`)
		return
	}
	n := s.minted.Add(1)
	tok := fmt.Sprintf("ya29.standin-%d-%s", n, strings.Repeat("x", 40))
	s.mu.Lock()
	s.tokens[tok] = true
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"access_token":%q,"expires_in":3600,"token_type":"Bearer"}`, tok)
}

func googleError(w http.ResponseWriter, code int, status, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": code, "message": msg, "status": status}})
	_, _ = w.Write(b)
}

// cloudEnv is a broker whose shared credential is a cloud account, with
// the cloud's stand-in on loopback TLS.
type cloudEnv struct {
	b        *brokertest.Broker
	token    string
	rec      *brokertest.Recorder
	bedrock  *bedrockStandIn
	vertex   *vertexStandIn
	cred     string // the credential's JSON as sealed
	secrets  []string
	upstream *httptest.Server
}

// newCloudBroker starts a cloud stand-in of kind ("bedrock" or "vertex")
// and a broker whose shared Anthropic credential is an account there;
// the broker's transport trusts the stand-in's certificate, as it would
// a real endpoint's, with verification on.
func newCloudBroker(t *testing.T, kind string) *cloudEnv {
	t.Helper()
	env := &cloudEnv{rec: &brokertest.Recorder{}}
	ts := httptest.NewUnstartedServer(env.rec)
	ts.StartTLS()
	t.Cleanup(ts.Close)
	env.upstream = ts
	switch kind {
	case "bedrock":
		secret := "bedrock/Secret+" + strings.Repeat("k", 24)
		env.bedrock = &bedrockStandIn{creds: aws.Credentials{AccessKeyID: "AKIASTANDIN000000001", SecretAccessKey: secret}, region: "us-east-1"}
		env.rec.Handler = env.bedrock
		b, _ := json.Marshal(map[string]any{"region": "us-east-1", "access_key_id": "AKIASTANDIN000000001", "secret_access_key": secret,
			"endpoint": ts.URL, "models": map[string]string{"claude-throttle": "anthropic.throttle", "claude-busy": "anthropic.busy"}})
		env.cred = string(b)
		env.secrets = []string{"AKIASTANDIN000000001", secret}
	case "vertex":
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		der, _ := x509.MarshalPKCS8PrivateKey(key)
		pemKey := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
		env.vertex = &vertexStandIn{url: ts.URL, email: "broker@standin-project.iam.gserviceaccount.com", project: "standin-project",
			region: "us-east5", pub: &key.PublicKey, tokens: map[string]bool{}}
		env.rec.Handler = env.vertex
		sa := map[string]string{"type": "service_account", "project_id": "standin-project", "private_key_id": "0123456789abcdef0123456789abcdef01234567",
			"private_key": pemKey, "client_email": env.vertex.email, "client_id": "1234567890", "token_uri": ts.URL + "/token"}
		b, _ := json.Marshal(map[string]any{"region": "us-east5", "service_account": sa, "endpoint": ts.URL,
			"models": map[string]string{"claude-exhausted": "claude-exhausted@1"}})
		env.cred = string(b)
		env.secrets = []string{"0123456789abcdef0123456789abcdef01234567", strings.Split(pemKey, "\n")[3]}
	}
	sealed := checkCloud(t, kind, env.cred)
	tr := ts.Client().Transport.(*http.Transport).Clone()
	env.b = brokertest.New(t, brokertest.Options{ServerOptions: func(o *server.Options) { o.Transport = tr }})
	env.b.SetCredential("anthropic", sealed)
	env.token = env.b.AddBox("a")
	env.b.Report(env.token, brokertest.Entry("inference", "agent"))
	return env
}
