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
	"golang.org/x/sync/singleflight"

	"github.com/intentius/boxbroker/internal/hold"
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

// Client makes Anthropic API calls through a cloud. Its exported fields
// are set before first use; its methods are safe for concurrent use.
type Client struct {
	// Transport carries every request: to the cloud's endpoint and, for
	// Vertex AI, to the service account's token_uri. No redirect is
	// followed. Nil is http.DefaultTransport. The server's is judged
	// for each host's address as egress's is (inference.CloudTransport
	// gives it through proxy.ReachOnly).
	Transport http.RoundTripper
	// Now is the clock requests are signed by (nil: time.Now).
	Now func() time.Time
	// Log is where a model refusing betas is told (nil: slog.Default()).
	Log *slog.Logger

	tokens   hold.Cache[[32]byte, *oauth2.Token]   // Vertex AI access tokens, by the credential's hash
	sessions hold.Cache[[32]byte, aws.Credentials] // a Bedrock role's sessions, by the credential's hash
	fetches  singleflight.Group                    // one fetch of a token or session at a time, by the credential's hash

	mu      sync.Mutex             // guards noBetas
	noBetas map[noBetaKey]struct{} // the models that refused betas
}

// FailedFor is how long a Vertex AI access token or a Bedrock role's
// session that could not be had (refused, or its endpoint failing) is
// not asked for again: a call within it is given the same answer, so
// that a box's calls on an account whose key is refused cost the
// account no more than one request to Google or STS each FailedFor.
const FailedFor = 5 * time.Second

// ReusedFor is how long, at least, a Vertex AI access token or a Bedrock
// role's session is used once had, whatever expiry its endpoint gave
// (one already past by the broker's clock, or nearer than the margin a
// new one is fetched before, as a tiny expires_in, a short session or a
// clock apart makes it), so that a box's calls cost the account at most
// one request to Google or STS each ReusedFor; a cloud that no longer
// takes it refuses the call, which drops it at most once each
// ReusedFor (Vertex AI's 401, Bedrock's ExpiredToken).
const ReusedFor = hold.DefaultFloor

// refusal is the answer to a call whose token or session its endpoint
// refused, or failed to give: a status and message in the Anthropic
// error shape, made here.
type refusal struct {
	status int
	msg    string
}

func (r *refusal) Error() string { return r.msg }

// failed is the answer to a call whose token or session was not had:
// the refusal's, or the error err is.
func failed(err error) (*http.Response, error) {
	if r, ok := err.(*refusal); ok {
		return errorAnswer(r.status, r.msg), nil
	}
	return nil, err
}

// held returns what h holds for credential c, or fetch's value (held
// until the expiry fetch gives with it, and for ReusedFor at least) or
// failure (held for FailedFor): one fetch for every call that waits on
// it, on a context without the first call's cancellation.
func held[V any](ctx context.Context, cl *Client, h *hold.Cache[[32]byte, V], c *Credential,
	fetch func(context.Context) (V, time.Time, error)) (V, error) {
	key := credKey(c)
	if v, err, ok := h.Get(key, cl.now()); ok {
		return v, err
	}
	return hold.Shared(ctx, &cl.fetches, string(key[:]), func() (V, error) {
		if v, err, ok := h.Get(key, cl.now()); ok {
			return v, err
		}
		v, expiry, err := fetch(context.WithoutCancel(ctx))
		now := cl.now()
		if err != nil {
			h.Put(key, v, err, now.Add(FailedFor))
			return v, err
		}
		h.Put(key, v, nil, h.Until(now, expiry))
		return v, nil
	})
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

// errorAnswer is an answer in the Anthropic error shape, with the error
// type the protocol pairs with status (protocol.TypeOf).
func errorAnswer(status int, msg string) *http.Response {
	return typedErrorAnswer(status, protocol.TypeOf(status), msg)
}

// typedErrorAnswer is errorAnswer with an error type of its own: the one a
// cloud's Anthropic-shaped answer gave. Every cloud error answer is made
// here, and none is a 401 or a 407 (nor says authentication_error): a
// box takes those as its own token refused, and the pool as a key to
// probe, whereas the cloud refused the broker's credential, a 403.
func typedErrorAnswer(status int, typ, msg string) *http.Response {
	if status == http.StatusUnauthorized || status == http.StatusProxyAuthRequired {
		status = http.StatusForbidden
	}
	b := protocol.RefusalBody(boxErrorType(typ, status), msg)
	resp := answer(status, "application/json", io.NopCloser(bytes.NewReader(b)))
	resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
	resp.ContentLength = int64(len(b))
	return resp
}

// boxErrorType is typ, the error type of a cloud's Anthropic-shaped
// error, as the box is given it: never authentication_error, which a box
// takes as its own token refused, where the cloud refused the broker's
// credential, but the type the protocol pairs with status, or a 403's
// (permission_error) for an error inside a stream, which has none.
func boxErrorType(typ string, status int) string {
	if typ != protocol.TypeAuthn {
		return typ
	}
	if status == http.StatusOK {
		status = http.StatusForbidden
	}
	return protocol.TypeOf(status)
}

// boxEvent is data, the JSON of an Anthropic server-sent event in a
// cloud's 200 stream, as the box is given it: an error event's type
// through boxErrorType, the rest of it as it came; any other event is
// data itself.
func boxEvent(data []byte) []byte {
	var ev struct {
		Type  string `json:"type"`
		Error struct {
			Type string `json:"type"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &ev) != nil || ev.Type != "error" || ev.Error.Type != protocol.TypeAuthn {
		return data
	}
	var m, e map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil || json.Unmarshal(m["error"], &e) != nil {
		return data
	}
	e["type"], _ = json.Marshal(boxErrorType(ev.Error.Type, http.StatusOK))
	m["error"], _ = json.Marshal(e)
	out, err := json.Marshal(m)
	if err != nil {
		return data
	}
	return out
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

// maxTokenAnswer bounds an answer of a token endpoint (STS, a service
// account's token_uri), which the libraries asking them read whole.
const maxTokenAnswer = 64 << 10

// httpClient is the http.Client the token source and STS use: the
// Client's transport, no redirect, a bound on time, and each answer's
// body read to maxTokenAnswer at most (quiet.Bodies): the AWS SDK reads
// STS's answer whole before it decodes it, so an endpoint answering
// without end would have the broker hold all it sent within the fetch's
// time.
func (cl *Client) httpClient() *http.Client {
	return &http.Client{
		Transport:     quiet.Bodies(cl.transport(), maxTokenAnswer),
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
