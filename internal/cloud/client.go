package cloud

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"golang.org/x/oauth2"

	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/quiet"
)

// Paths of the Anthropic API a Client is asked for (relative to the
// box's base URL).
const (
	PathMessages    = "/v1/messages"
	PathCountTokens = "/v1/messages/count_tokens"
)

// StatusOverloaded is the Anthropic API's 529.
const StatusOverloaded = 529

// maxErrorBody bounds the part of a cloud's error answer read.
const maxErrorBody = 64 << 10

// maxCached bounds the Vertex token sources, and the Bedrock roles'
// sessions, a Client keeps: past it, the map starts anew.
const maxCached = 256

// Client makes Anthropic API calls through a cloud. Its exported fields
// are set before first use; its methods are safe for concurrent use.
type Client struct {
	// Transport carries every request: to the cloud's endpoint and, for
	// Vertex AI, to the service account's token_uri. No redirect is
	// followed. Nil is http.DefaultTransport.
	Transport http.RoundTripper
	// Now is the clock requests are signed by (nil: time.Now).
	Now func() time.Time
	// Log is where a model refusing betas is told (nil: slog.Default()).
	Log *slog.Logger

	mu      sync.Mutex                            // guards tokens, roles, failed and noBetas
	tokens  map[[32]byte]*reused[*oauth2.Token]   // Vertex AI access tokens, by the credential's hash
	roles   map[[32]byte]*reused[aws.Credentials] // a Bedrock role's sessions, by the credential's hash
	failed  map[[32]byte]failure                  // a token or session not had lately, by the credential's hash
	noBetas map[noBetaKey]struct{}                // the models that refused betas
}

// FailedFor is how long a Vertex AI access token or a Bedrock role's
// session that could not be had (refused, or its endpoint failing) is
// not asked for again: a call within it is given the same answer, so
// that a box's calls on an account whose key is refused cost the
// account no more than one request to Google or STS each FailedFor.
const FailedFor = 5 * time.Second

// failure is the answer to a call whose token or session could not be
// had: a refusal (status and body) or an error.
type failure struct {
	until  time.Time
	status int
	body   []byte
	err    error
}

// failedLately returns the answer kept for c's token or session, when it
// could not be had within FailedFor.
func (cl *Client) failedLately(c *Credential) (*http.Response, error, bool) {
	key := credKey(c)
	cl.mu.Lock()
	f, ok := cl.failed[key]
	cl.mu.Unlock()
	if !ok || !cl.now().Before(f.until) {
		return nil, nil, false
	}
	if f.err != nil {
		return nil, f.err, true
	}
	return bodyAnswer(f.status, f.body), nil, true
}

// fail keeps the answer to a call whose token or session could not be
// had, resp (a refusal made here) or err, for FailedFor; it returns them
// as they are to give now.
func (cl *Client) fail(c *Credential, resp *http.Response, err error) (*http.Response, error) {
	f := failure{until: cl.now().Add(FailedFor), err: err}
	if resp != nil {
		f.status, f.body = resp.StatusCode, readError(resp)
		resp = bodyAnswer(f.status, f.body)
	}
	key := credKey(c)
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.failed == nil || len(cl.failed) >= maxCached {
		cl.failed = make(map[[32]byte]failure)
	}
	cl.failed[key] = f
	return resp, err
}

// ReusedFor is how long, at least, a Vertex AI access token or a Bedrock
// role's session is used once had, whatever expiry its endpoint gave
// (one already past by the broker's clock, or nearer than the margin a
// new one is fetched before, as a tiny expires_in, a short session or a
// clock apart makes it), so that a box's calls cost the account at most
// one request to Google or STS each ReusedFor; a cloud that no longer
// takes it refuses the call, and Bedrock's ExpiredToken drops a session
// at most once each ReusedFor.
const ReusedFor = 5 * time.Second

// reused gives what get gives, each value for ReusedFor at least by the
// clock now, and asks get again only after that: get's own cache (an
// oauth2.ReuseTokenSource, an aws.CredentialsCache) decides when it
// fetches anew. Errors are not held (fail keeps them). Its methods are
// safe for concurrent use; get is not called with mu held, so a call
// whose context ends does not wait on another's fetch here.
type reused[V any] struct {
	get  func(context.Context) (V, error)
	drop func() // makes get fetch anew; nil: nothing to drop
	now  func() time.Time

	mu      sync.Mutex // guards v, held, until and dropped
	v       V
	held    bool
	until   time.Time // v is given without asking get until then
	dropped time.Time // when forget last dropped v
}

// value returns the value held, until ReusedFor after it was had, or
// get's.
func (r *reused[V]) value(ctx context.Context) (V, error) {
	r.mu.Lock()
	if now := r.now(); r.held && now.Before(r.until) {
		defer r.mu.Unlock()
		return r.v, nil
	}
	r.mu.Unlock()
	v, err := r.get(ctx)
	if err != nil {
		return v, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.v, r.held, r.until = v, true, r.now().Add(ReusedFor)
	return v, nil
}

// forget drops the value held and get's own, so that the next call
// fetches anew, at most once each ReusedFor; otherwise the value is
// kept, and used until the next forget that may drop it.
func (r *reused[V]) forget() {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if !r.dropped.IsZero() && now.Sub(r.dropped) < ReusedFor && !now.Before(r.dropped) {
		return
	}
	var zero V
	r.v, r.held, r.dropped = zero, false, now
	if r.drop != nil {
		r.drop()
	}
}

// Call is one Anthropic API call the box made.
type Call struct {
	// Method and Path (relative to /llm/anthropic, as PathMessages) are
	// the box's.
	Method, Path string
	// Beta is the box's anthropic-beta header values.
	Beta []string
	// Body is the box's body, its tokens scrubbed.
	Body []byte
}

// Do makes call on credential c and returns the answer in the Anthropic
// API's form. made receives every value made for the call that must not
// reach the box (a signature, an access token). A call the cloud has no
// equivalent of, or a model it has no id for, is answered with a 4xx in
// the Anthropic error shape, made here. The error is the transport's.
func (cl *Client) Do(ctx context.Context, c *Credential, call Call, made func(string)) (*http.Response, error) {
	if c.Kind != KindBedrock && c.Kind != KindVertex {
		return errorAnswer(http.StatusBadRequest, "The payer's credential names no cloud the broker knows."), nil
	}
	if call.Path != PathMessages && call.Path != PathCountTokens {
		return errorAnswer(http.StatusBadRequest,
			fmt.Sprintf("The model list (GET /v1/models) is not available when this box's calls are paid through %s.", Name(c.Kind))), nil
	}
	sent := &sentWith{values: c.Secrets(), made: made}
	if c.Kind == KindBedrock {
		return cl.bedrock(ctx, c, call, sent)
	}
	return cl.vertex(ctx, c, call, sent)
}

// sentWith is what a call was made with that no answer may carry: the
// credential's secrets, and the values made for the call (a signature,
// an access token), each also told to made.
type sentWith struct {
	values []string
	made   func(string)
}

// add notes v, made for the call, and tells made of it.
func (s *sentWith) add(v string) {
	s.values = append(s.values, v)
	s.made(v)
}

// clip is a cloud's message as passed on to the box: every value the
// call was made with masked, then bounded. Masked first, so that a cut
// never leaves a value's first part, which no later mask would find
// (an STS session token is longer than the bound). A nil s masks
// nothing.
func (s *sentWith) clip(msg string) string {
	if s != nil {
		for _, v := range s.values {
			if v != "" {
				msg = strings.ReplaceAll(msg, v, strings.Repeat("*", len(v)))
			}
		}
	}
	return clip(msg)
}

// transport is the Client's Transport, whose errors never quote what a
// call was signed with (quiet.Errors).
func (cl *Client) transport() http.RoundTripper { return quiet.Errors(cl.Transport) }

func (cl *Client) now() time.Time {
	if cl.Now == nil {
		return time.Now()
	}
	return cl.Now()
}

func (cl *Client) logger() *slog.Logger { return cmp.Or(cl.Log, slog.Default()) }

// credKey is what a credential's cached values are kept by: the hash of
// its JSON.
func credKey(c *Credential) [32]byte {
	b, _ := json.Marshal(c)
	return sha256.Sum256(b)
}

// cached returns the value *m keeps for credential c, or makes one with
// mk and keeps it (past maxCached values, *m starts anew). mu guards *m.
func cached[V any](mu *sync.Mutex, m *map[[32]byte]V, c *Credential, mk func() (V, error)) (V, error) {
	key := credKey(c)
	mu.Lock()
	defer mu.Unlock()
	if v, ok := (*m)[key]; ok {
		return v, nil
	}
	v, err := mk()
	if err != nil {
		return v, err
	}
	if *m == nil || len(*m) >= maxCached {
		*m = make(map[[32]byte]V)
	}
	(*m)[key] = v
	return v, nil
}

// errorAnswer is an answer in the Anthropic error shape, with the error
// type the protocol pairs with status (protocol.TypeOf).
func errorAnswer(status int, msg string) *http.Response {
	return typedErrorAnswer(status, protocol.TypeOf(status), msg)
}

// typedErrorAnswer is errorAnswer with an error type of its own: the one a
// cloud's Anthropic-shaped answer gave.
func typedErrorAnswer(status int, typ, msg string) *http.Response {
	return bodyAnswer(status, protocol.RefusalBody(typ, msg))
}

// bodyAnswer is an answer of status with the JSON body b.
func bodyAnswer(status int, b []byte) *http.Response {
	resp := answer(status, "application/json", io.NopCloser(bytes.NewReader(b)))
	resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
	resp.ContentLength = int64(len(b))
	return resp
}

// errorEvent is an Anthropic "error" server-sent event.
func errorEvent(typ, msg string) []byte {
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
	return append(append([]byte("event: error\ndata: "), b...), "\n\n"...)
}

// unknownModel refuses a model the cloud has no id for here.
func unknownModel(kind string) *http.Response {
	return errorAnswer(http.StatusBadRequest,
		fmt.Sprintf("The broker knows no %s model id for this model; the operator maps it in the credential's \"models\" (docs/cloud.md).", Name(kind)))
}

// answer returns an answer of status with body, whose header is made
// anew: nothing of the cloud's header reaches the box (but the
// Content-Encoding of a body passed on as it came: see passed). It names no
// length: the broker masks secrets the answer may repeat, in any
// escaped form, and a masked answer may be shorter than the cloud's.
func answer(status int, contentType string, body io.ReadCloser) *http.Response {
	h := http.Header{}
	h.Set("Content-Type", contentType)
	return &http.Response{
		StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: body, ContentLength: -1,
	}
}

// passed is an answer of status whose body is the cloud's own (src's),
// passed on as it came: it keeps src's Content-Encoding, so that an
// answer the broker did not ask to be encoded is refused above (the
// broker cannot read it for what the call was made with), never passed
// on as though it were plain.
func passed(status int, contentType string, src *http.Response) *http.Response {
	resp := answer(status, contentType, src.Body)
	if ce := src.Header.Values("Content-Encoding"); len(ce) > 0 {
		resp.Header["Content-Encoding"] = ce
	}
	return resp
}

// clip bounds a cloud's error message passed on to the box.
func clip(s string) string {
	const max = 500
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}

// readError reads up to maxErrorBody bytes of an error answer and closes it.
func readError(resp *http.Response) []byte {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	return b
}

// httpClient is the http.Client the token source and STS use: the
// Client's transport, no redirect, a bound on time.
func (cl *Client) httpClient() *http.Client {
	return &http.Client{
		Transport:     cl.transport(),
		Timeout:       30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// send makes the call to model at u for betas, without them when the
// model refused them before. build returns the body to send for betas
// and the body that names them (for betaRefused); sign puts the call's
// credential, and the betas when they go in a header, in its request. A
// model that refuses the betas gets the call once more without any, and
// none from then on. An answer other than 200 comes back with its body
// read into errBody.
func (cl *Client) send(ctx context.Context, c *Credential, u *url.URL, model string, betas []string,
	build func(betas []string) (body, sent []byte, err error),
	sign func(req *http.Request, body []byte, betas []string) error) (resp *http.Response, errBody []byte, err error) {
	key := betaKey(c, model, betas)
	if len(betas) > 0 && cl.takesNoBetas(key) {
		betas = nil
	}
	refused := false // the call is being made again without the betas the cloud refused
	for {
		body, sent, err := build(betas)
		if err != nil {
			return nil, nil, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
		if err != nil {
			return nil, nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		if err := sign(req, body, betas); err != nil {
			return nil, nil, err
		}
		resp, err := cl.transport().RoundTrip(req)
		if err != nil {
			return nil, nil, err
		}
		if resp.StatusCode == http.StatusOK {
			if refused {
				// Answered without the betas: the model refuses them.
				cl.rememberNoBetas(key, c.Kind)
			}
			return resp, nil, nil
		}
		b := readError(resp)
		if !refused && betaRefused(resp.StatusCode, b, betas, sent) {
			// Once only: the call made again sends no betas.
			betas, refused = nil, true
			continue
		}
		return resp, b, nil
	}
}

// modelURL is the URL of model's action on c's cloud: c's Endpoint, or
// public(c.Region) when it names none, at the path prefix, then model
// (escaped in the raw path), then action.
func (c *Credential) modelURL(public func(region string) string, prefix, model, action string) (*url.URL, error) {
	base := c.Endpoint
	if base == "" {
		base = public(c.Region)
	}
	u, err := url.Parse(base)
	if err != nil {
		return nil, errors.New(c.Kind + ": the credential's endpoint does not parse")
	}
	u.Path = prefix + model + action
	u.RawPath = prefix + url.PathEscape(model) + action
	return u, nil
}
