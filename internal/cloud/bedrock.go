package cloud

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/intentius/boxbroker/internal/protocol"
)

// BedrockVersion is the anthropic_version a Bedrock body carries.
const BedrockVersion = "bedrock-2023-05-31"

// bedrockService is Bedrock runtime's SigV4 signing name.
const bedrockService = "bedrock"

// BedrockEndpoint is the public endpoint of Bedrock's runtime in region.
func BedrockEndpoint(region string) string {
	return "https://bedrock-runtime." + region + ".amazonaws.com"
}

// bedrock makes call on Bedrock: Messages as InvokeModel or
// InvokeModelWithResponseStream, count_tokens as CountTokens over the
// InvokeModel body (Do refuses the model list). The betas sent, in the
// body's anthropic_beta, are those the call asks for in its
// anthropic-beta header and its body (Asked, as the spend meter prices
// them), less those the credential does not let through (allowedBetas);
// a model that refuses them gets the call again without any, and none
// from then on.
func (cl *Client) bedrock(ctx context.Context, c *Credential, call Call, sent *sentWith) (*http.Response, error) {
	f, refusal := cloudBody(call.Body, BedrockVersion, false)
	if refusal != nil {
		return refusal, nil
	}
	id, bare, ok := c.modelID(f.model)
	if !ok {
		return unknownModel(c.Kind), nil
	}
	count := call.Path == PathCountTokens
	if count {
		// CountTokens takes bare model ids, not inference profiles.
		id = bare
	}
	creds, err := cl.awsCredentials(ctx, c, sent.add)
	if err != nil {
		return failed(err)
	}
	action := "/invoke"
	accept := "application/json"
	stream := f.stream && !count
	switch {
	case count:
		action = "/count-tokens"
	case stream:
		action = "/invoke-with-response-stream"
		accept = "application/vnd.amazon.eventstream"
	}
	u, err := c.modelURL(BedrockEndpoint, "/model/", id, action)
	if err != nil {
		return nil, err
	}
	resp, b, err := cl.send(ctx, c, u, id, c.sentBetas(call, f.bodyBeta), func(betas []string) (body, sent []byte, err error) {
		sent, err = f.body(betas) // the InvokeModel body, whose member names the box chose
		body = sent
		if err == nil && count {
			body, err = countTokensBody(sent)
		}
		return body, sent, err
	}, func(req *http.Request, body []byte, _ []string) error {
		req.Header.Set("Accept", accept)
		sum := sha256.Sum256(body)
		if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), bedrockService, c.Region, cl.now().UTC()); err != nil {
			return err
		}
		auth := req.Header.Get("Authorization")
		sent.add(auth)
		if _, sig, ok := strings.Cut(auth, "Signature="); ok {
			sent.add(sig)
		}
		return nil
	})
	switch {
	case err != nil:
		return nil, err
	case resp.StatusCode != http.StatusOK:
		if c.RoleARN != "" && resp.StatusCode == http.StatusForbidden && strings.HasPrefix(resp.Header.Get("X-Amzn-Errortype"), "ExpiredToken") {
			// The role's session expired before its time (a clock
			// apart): the next call assumes the role anew, at most
			// once each ReusedFor.
			cl.sessions.Drop(credKey(c), cl.now(), func(s aws.Credentials) bool { return s.AccessKeyID == creds.AccessKeyID })
		}
		return bedrockError(resp.StatusCode, resp.Header, b, sent), nil
	case stream:
		return answer(http.StatusOK, "text/event-stream; charset=utf-8", newEventReader(resp.Body, sent)), nil
	case count:
		return countTokensAnswer(resp), nil
	}
	return passed(http.StatusOK, "application/json", resp), nil
}

// countTokensBody is CountTokens' body for the InvokeModel body b: b in
// base64 under input.invokeModel.body. An InvokeModel body names
// max_tokens; count_tokens' need not, so one is put in (it counts for
// nothing in the input).
func countTokensBody(b []byte) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if _, ok := m["max_tokens"]; !ok {
		m["max_tokens"] = json.RawMessage("1")
		var err error
		if b, err = json.Marshal(m); err != nil {
			return nil, err
		}
	}
	return json.Marshal(map[string]any{"input": map[string]any{"invokeModel": map[string][]byte{"body": b}}})
}

// countTokensAnswer turns CountTokens' {"inputTokens": n} into the
// Anthropic API's {"input_tokens": n}.
func countTokensAnswer(resp *http.Response) *http.Response {
	b := readError(resp)
	var out struct {
		InputTokens *int64 `json:"inputTokens"`
	}
	if json.Unmarshal(b, &out) != nil || out.InputTokens == nil {
		return errorAnswer(http.StatusInternalServerError, "Amazon Bedrock's CountTokens answer holds no inputTokens.")
	}
	j, _ := json.Marshal(map[string]int64{"input_tokens": *out.InputTokens})
	return answer(http.StatusOK, "application/json", io.NopCloser(bytes.NewReader(j)))
}

// cloudForm is a box's Messages body made ready for a cloud.
type cloudForm struct {
	model  string
	stream bool
	// m is the body to send, without its anthropic_beta (bodyBeta):
	// the betas a call sends are put in by body.
	m        map[string]json.RawMessage
	bodyBeta []string
}

// cloudBody reads the box's Messages body as encoding/json does (a
// member named twice counts as its last, as the meter reads it) and
// returns it with model removed and anthropic_version set; "stream" is
// kept when keepStream. Its anthropic_beta, a list of strings, is taken
// out into bodyBeta; so is a member naming it in another case
// (IsBodyBeta), which the spend meter prices as one, so that no name
// the cloud might read as anthropic_beta reaches it unread.
func cloudBody(body []byte, version string, keepStream bool) (cloudForm, *http.Response) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		return cloudForm{}, errorAnswer(http.StatusBadRequest, "The request body is not a JSON object.")
	}
	f := cloudForm{m: m}
	if err := json.Unmarshal(m["model"], &f.model); err != nil || f.model == "" {
		return cloudForm{}, errorAnswer(http.StatusBadRequest, "model: Field required (a string).")
	}
	if s, ok := m["stream"]; ok {
		if err := json.Unmarshal(s, &f.stream); err != nil {
			return cloudForm{}, errorAnswer(http.StatusBadRequest, "stream: Input should be a valid boolean.")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !IsBodyBeta(k) {
			continue
		}
		list, err := BodyBetas(m[k])
		if err != nil {
			return cloudForm{}, errorAnswer(http.StatusBadRequest, "anthropic_beta: Input should be a valid list of strings.")
		}
		f.bodyBeta = append(f.bodyBeta, list...)
		delete(m, k)
	}
	delete(m, "model")
	if !keepStream {
		delete(m, "stream")
	}
	m["anthropic_version"], _ = json.Marshal(version)
	return f, nil
}

// body is the body to send with betas in its anthropic_beta (none when
// betas is empty).
func (f cloudForm) body(betas []string) ([]byte, error) {
	if len(betas) > 0 {
		f.m["anthropic_beta"], _ = json.Marshal(betas)
	} else {
		delete(f.m, "anthropic_beta")
	}
	return json.Marshal(f.m)
}

// awsStatus maps an AWS error code (ThrottlingException) and status to
// the Anthropic API's status and error type: the ones its SDKs retry on
// for throttling (429) and overload (529), a 403 for a refused
// credential (the pool fails over on it; Claude Code shows it at once).
func awsStatus(code string, status int) int {
	c := strings.ToLower(strings.TrimSuffix(strings.TrimSuffix(code, "Exception"), "exception"))
	switch c {
	case "throttling", "servicequotaexceeded", "toomanyrequests":
		return http.StatusTooManyRequests
	case "serviceunavailable", "modelnotready":
		return StatusOverloaded
	case "accessdenied", "unrecognizedclient", "invalidsignature", "expiredtoken", "incompletesignature",
		"missingauthenticationtoken", "signaturedoesnotmatch", "invalidclienttokenid", "unauthorized":
		return http.StatusForbidden
	case "validation":
		return http.StatusBadRequest
	case "resourcenotfound":
		return http.StatusNotFound
	case "internalserver", "modelstreamerror", "modelerror", "modeltimeout":
		return http.StatusInternalServerError
	}
	switch {
	case status == http.StatusTooManyRequests:
		return http.StatusTooManyRequests
	case status == http.StatusServiceUnavailable:
		return StatusOverloaded
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return http.StatusForbidden
	case status == http.StatusNotFound:
		return http.StatusNotFound
	case status >= 500 || status == 0:
		return http.StatusInternalServerError
	}
	return http.StatusBadRequest
}

var awsCodeRE = regexp.MustCompile(`^[A-Za-z]{1,64}$`)

// bedrockError turns Bedrock's error answer (its status, header and
// body) into the Anthropic shape, its message clipped by sent.
func bedrockError(status int, h http.Header, b []byte, sent *sentWith) *http.Response {
	code, _, _ := strings.Cut(h.Get("X-Amzn-Errortype"), ":")
	var body struct {
		Type     string `json:"__type"`
		Message  string `json:"message"`
		MessageU string `json:"Message"`
	}
	_ = json.Unmarshal(b, &body)
	if code == "" && body.Type != "" {
		code = body.Type[strings.LastIndexByte(body.Type, '#')+1:]
	}
	if !awsCodeRE.MatchString(code) {
		code = ""
	}
	msg := body.Message
	if msg == "" {
		msg = body.MessageU
	}
	return errorAnswer(awsStatus(code, status), bedrockMessage(code, status, sent.clip(msg)))
}

// bedrockMessage is the box's message for Bedrock's code, status and
// message (already clipped).
func bedrockMessage(code string, status int, msg string) string {
	s := "Amazon Bedrock answered " + http.StatusText(status)
	if status == 0 {
		s = "Amazon Bedrock's stream ended with an error"
	}
	if code != "" {
		s += " (" + code + ")"
	}
	if msg != "" {
		s += ": " + msg
	}
	return s
}

// eventReader reads Bedrock's application/vnd.amazon.eventstream answer
// and returns the Anthropic server-sent events it carries, one whole
// event per Read when p holds it, so that each is passed on as it comes.
type eventReader struct {
	src     io.ReadCloser
	dec     *eventstream.Decoder
	buf     []byte // the decoder's payload buffer, reused
	pending []byte // what is left of the last event made
	err     error  // returned once pending is empty
	sent    *sentWith
}

// newEventReader reads src; an exception's message is clipped by sent.
func newEventReader(src io.ReadCloser, sent *sentWith) *eventReader {
	return &eventReader{src: src, dec: eventstream.NewDecoder(), sent: sent}
}

func (r *eventReader) Read(p []byte) (int, error) {
	for len(r.pending) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		r.next()
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	return n, nil
}

func (r *eventReader) Close() error { return r.src.Close() }

var eventTypeRE = regexp.MustCompile(`^[a-z_]{1,64}$`)

// next decodes the next message into pending, or sets err.
func (r *eventReader) next() {
	m, err := r.dec.Decode(r.src, r.buf[:0])
	if err != nil {
		if errors.Is(err, io.EOF) {
			r.err = io.EOF
		} else {
			r.err = errors.New("bedrock: the event stream did not decode")
		}
		return
	}
	r.buf = m.Payload[:0]
	switch header(m, ":message-type") {
	case "event":
		if header(m, ":event-type") != "chunk" {
			return
		}
		var chunk struct {
			Bytes []byte `json:"bytes"` // base64 in the JSON
		}
		if err := json.Unmarshal(m.Payload, &chunk); err != nil {
			r.err = errors.New("bedrock: a chunk of the event stream is not JSON")
			return
		}
		var ev struct {
			Type string `json:"type"`
		}
		var data bytes.Buffer
		if json.Unmarshal(chunk.Bytes, &ev) != nil || !eventTypeRE.MatchString(ev.Type) || json.Compact(&data, chunk.Bytes) != nil {
			r.err = errors.New("bedrock: a chunk of the event stream holds no Anthropic event")
			return
		}
		js := boxEvent(data.Bytes())
		out := make([]byte, 0, len("event: \ndata: \n\n")+len(ev.Type)+len(js))
		out = append(append(append(out, "event: "...), ev.Type...), "\ndata: "...)
		out = append(append(out, js...), "\n\n"...)
		r.pending = out
	case "exception", "error":
		code := header(m, ":exception-type")
		if code == "" {
			code = header(m, ":error-code")
		}
		if !awsCodeRE.MatchString(code) {
			code = ""
		}
		var body struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(m.Payload, &body)
		if body.Message == "" {
			body.Message = header(m, ":error-message")
		}
		r.pending = errorEvent(protocol.TypeOf(awsStatus(code, 0)), bedrockMessage(code, 0, r.sent.clip(body.Message)))
		r.err = io.EOF
	}
}

// header is m's string header name, or "".
func header(m eventstream.Message, name string) string {
	v := m.Headers.Get(name)
	if v == nil {
		return ""
	}
	if s, ok := v.(eventstream.StringValue); ok {
		return string(s)
	}
	return v.String()
}
