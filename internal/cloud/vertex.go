package cloud

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/intentius/boxbroker/internal/protocol"
)

// VertexVersion is the anthropic_version a Vertex AI body carries.
const VertexVersion = "vertex-2023-10-16"

// Scope is the OAuth scope of the access token a Vertex AI call carries.
const Scope = "https://www.googleapis.com/auth/cloud-platform"

// VertexEndpoint is the public endpoint of Vertex AI in region.
func VertexEndpoint(region string) string {
	if region == "global" {
		return "https://aiplatform.googleapis.com"
	}
	return "https://" + region + "-aiplatform.googleapis.com"
}

// checkPrivateKey reports whether the service account's private_key is an
// RSA key in PEM (PKCS #8 or #1), as Google issues them.
func checkPrivateKey(pemKey []byte) error {
	if _, err := jwt.ParseRSAPrivateKeyFromPEM(pemKey); err != nil {
		return errors.New("service_account's private_key is not an RSA private key in PEM (-----BEGIN PRIVATE KEY-----)")
	}
	return nil
}

// vertex makes call on Vertex AI: Messages as rawPredict or
// streamRawPredict, count_tokens as count-tokens:rawPredict (Do refuses
// the model list). The betas sent, in the anthropic-beta header, are
// those the call asks for in its header and its body (Asked, as the
// spend meter prices them), less those the credential's "betas" does
// not let through; a model that refuses them gets the call again
// without any, and none from then on.
func (cl *Client) vertex(ctx context.Context, c *Credential, call Call, sent *sentWith) (*http.Response, error) {
	f, refusal := cloudBody(call.Body, VertexVersion, true)
	if refusal != nil {
		return refusal, nil
	}
	id, ok := c.ModelID(f.model)
	if !ok {
		return unknownModel(c.Kind), nil
	}
	model, method := id, ":rawPredict"
	count := call.Path == PathCountTokens
	if count {
		// count-tokens takes the model in its body.
		f.m["model"], _ = json.Marshal(id)
		model = "count-tokens"
	} else if f.stream {
		method = ":streamRawPredict"
	}
	stream := f.stream && !count
	u, err := c.modelURL(VertexEndpoint, "/v1/projects/"+c.ProjectID+"/locations/"+c.Region+"/publishers/anthropic/models/", model, method)
	if err != nil {
		return nil, err
	}

	tok, err := cl.accessToken(ctx, c)
	if err != nil {
		return failed(err)
	}
	sent.add(tok.AccessToken)

	resp, b, err := cl.send(ctx, c, u, id, c.sentBetas(call, f.bodyBeta), func([]string) (body, sent []byte, err error) {
		body, err = f.body(nil)
		return body, body, err
	}, func(req *http.Request, _ []byte, betas []string) error {
		req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
		if len(betas) > 0 {
			req.Header.Set("Anthropic-Beta", strings.Join(betas, ","))
		}
		return nil
	})
	switch {
	case err != nil:
		return nil, err
	case resp.StatusCode != http.StatusOK:
		if resp.StatusCode == http.StatusUnauthorized {
			// The token no longer works (revoked, or expired before its
			// time): the next call fetches a new one, at most once each
			// ReusedFor.
			cl.tokens.Drop(credKey(c), cl.now(), func(t *oauth2.Token) bool { return t == tok })
		}
		return vertexError(resp.StatusCode, b, sent), nil
	case stream:
		out := passed(http.StatusOK, "text/event-stream; charset=utf-8", resp)
		if out.Header.Get("Content-Encoding") == "" {
			// An encoded answer is refused above, unread.
			out.Body = newBoxEvents(out.Body)
		}
		return out, nil
	}
	return passed(http.StatusOK, "application/json", resp), nil
}

// tokenMargin is how long before its expiry an access token is fetched
// anew, as golang.org/x/oauth2 does.
const tokenMargin = 10 * time.Second

// accessToken returns the access token a Vertex AI call of c carries:
// one had from the service account's token_uri with a JWT it signs,
// held until tokenMargin before its expiry, and for ReusedFor at least.
// A token answered with an expires_in of 0 or less, which
// golang.org/x/oauth2 gives no expiry (as though it never expired), is
// taken as expired already: held for ReusedFor only. A refusal is a
// *refusal, a 403 permission_error.
func (cl *Client) accessToken(ctx context.Context, c *Credential) (*oauth2.Token, error) {
	return held(ctx, cl, &cl.tokens, c, func(ctx context.Context) (*oauth2.Token, time.Time, error) {
		cfg, err := google.JWTConfigFromJSON(c.ServiceAccount, Scope)
		if err != nil {
			return nil, time.Time{}, errors.New("vertex: the service account's key does not read")
		}
		tok, err := cfg.TokenSource(context.WithValue(ctx, oauth2.HTTPClient, cl.httpClient())).Token()
		var re *oauth2.RetrieveError
		switch {
		case errors.As(err, &re) && re.Response != nil && re.Response.StatusCode >= 400 && re.Response.StatusCode < 500:
			return nil, time.Time{}, &refusal{http.StatusForbidden,
				fmt.Sprintf("Google refused the Vertex AI service account's key (its token endpoint answered %d).", re.Response.StatusCode)}
		case err != nil:
			return nil, time.Time{}, fmt.Errorf("vertex: get an access token: %w", errors.New("the token endpoint did not answer"))
		}
		return tok, tok.Expiry.Add(-tokenMargin), nil
	})
}

// vertexError turns Vertex AI's error answer into the Anthropic shape. An
// answer in that shape already (the model's own, as an overloaded_error)
// keeps its type and status. Its message is clipped by sent.
func vertexError(status int, b []byte, sent *sentWith) *http.Response {
	var anth struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &anth) == nil && anth.Type == "error" && eventTypeRE.MatchString(anth.Error.Type) {
		if status == http.StatusServiceUnavailable && anth.Error.Type == protocol.TypeOverloaded {
			status = StatusOverloaded
		}
		return typedErrorAnswer(status, anth.Error.Type, sent.clip(anth.Error.Message))
	}
	type gerr struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Status  string `json:"status"`
		} `json:"error"`
	}
	var g gerr
	if json.Unmarshal(b, &g) != nil {
		var list []gerr
		if json.Unmarshal(b, &list) == nil && len(list) > 0 {
			g = list[0]
		}
	}
	st := googleStatus(g.Error.Status, status)
	msg := "Google Vertex AI answered " + http.StatusText(status)
	if awsCodeRE.MatchString(strings.ReplaceAll(g.Error.Status, "_", "")) {
		msg += " (" + g.Error.Status + ")"
	}
	if g.Error.Message != "" {
		msg += ": " + sent.clip(g.Error.Message)
	}
	return errorAnswer(st, msg)
}

// googleStatus maps a Google API error status (RESOURCE_EXHAUSTED) and
// HTTP status to the Anthropic API's status and error type.
func googleStatus(s string, status int) int {
	switch s {
	case "RESOURCE_EXHAUSTED":
		return http.StatusTooManyRequests
	case "UNAVAILABLE":
		return StatusOverloaded
	case "PERMISSION_DENIED", "UNAUTHENTICATED":
		return http.StatusForbidden
	case "NOT_FOUND":
		return http.StatusNotFound
	case "INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE":
		return http.StatusBadRequest
	}
	return awsStatus("", status)
}

// maxEventLine is the longest line of Vertex AI's stream boxEvents
// judges; a longer one (no error event is) passes as it comes.
const maxEventLine = 64 << 10

// boxEvents passes Vertex AI's server-sent event stream on line by line
// as it comes, each data line's event as boxEvent gives it.
type boxEvents struct {
	src     io.ReadCloser
	br      *bufio.Reader
	pending []byte // what is left of the last line read
	cut     bool   // the last line read is longer than maxEventLine: what is read next is its rest
	err     error  // returned once pending is empty
}

func newBoxEvents(src io.ReadCloser) *boxEvents {
	return &boxEvents{src: src, br: bufio.NewReaderSize(src, maxEventLine)}
}

func (r *boxEvents) Read(p []byte) (int, error) {
	for len(r.pending) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		line, err := r.br.ReadSlice('\n')
		full := errors.Is(err, bufio.ErrBufferFull)
		if !full {
			r.err = err
		}
		if !r.cut && !full {
			line = boxEventLine(line)
		}
		r.pending, r.cut = line, full
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	return n, nil
}

func (r *boxEvents) Close() error { return r.src.Close() }

// boxEventLine is line, a whole line of a server-sent event stream, with
// the event of a data line as boxEvent gives it.
func boxEventLine(line []byte) []byte {
	rest, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok {
		return line
	}
	data := bytes.TrimRight(rest, "\r\n")
	end := rest[len(data):]
	data = bytes.TrimPrefix(data, []byte(" "))
	js := boxEvent(data)
	if bytes.Equal(js, data) {
		return line
	}
	return slices.Concat([]byte("data: "), js, end)
}
