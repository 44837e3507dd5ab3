// Package decide serves POST /decide/v1/systemone, chant's decide wire
// format, as a second value of the inference capability: it checks the
// request {model, state, questions} against the format, asks the Anthropic
// API each question on the payer's credential with a Messages call that
// requests structured output, and answers {model, answers, usage} with one
// answer per question. Questions are asked concurrently, with a bound, so
// a request takes about as long as its slowest question.
//
// Anything that stops an answer is a refusal with a non-2xx status; the
// broker never answers 200 with an answer the model did not give.
package decide

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/cloud"
	"github.com/intentius/boxbroker/internal/defaults"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
)

// Word is the scope word POST /decide/v1/systemone needs.
const Word = "decide"

// Defaults of Config, and the bounds of one request: at most
// MaxQuestions questions (more is a 422), Concurrency of them asked at
// once, and an upstream answer of at most MaxAnswer bytes (a larger one
// is a 502).
const (
	DefaultTimeout   = 30 * time.Second
	DefaultMaxBody   = 256 << 10
	DefaultMaxTokens = 2048
	MaxQuestions     = 64
	Concurrency      = 8
	MaxAnswer        = 1 << 20
)

// Config configures the capability. Zero fields take the defaults above.
type Config struct {
	// Upstream is the Anthropic API's base URL, such as https://api.anthropic.com.
	Upstream *url.URL
	// Transport carries requests upstream (default: proxy.NewTransport).
	// Redirects are never followed.
	Transport http.RoundTripper
	// Timeout bounds answering one whole request, every question included
	// (default 30 s); past it the answer is a 504.
	Timeout time.Duration
	// MaxBody bounds a request body in bytes (default 256 KiB); a larger one is a 422.
	MaxBody int64
	// MaxTokens is the max_tokens of each Messages call (default 2048).
	MaxTokens int
	// Logger receives upstream failures; never a credential.
	Logger *slog.Logger
}

// Capability is the /decide capability. It is named "inference", as the
// protocol has decide be part of that capability.
type Capability struct {
	cfg    Config
	client *http.Client
	url    string
}

// New returns the capability.
func New(cfg Config) *Capability {
	defaults.Positive(&cfg.Timeout, DefaultTimeout)
	defaults.Positive(&cfg.MaxBody, DefaultMaxBody)
	defaults.Positive(&cfg.MaxTokens, DefaultMaxTokens)
	defaults.Logger(&cfg.Logger)
	cfg.Transport = proxy.Outbound(cfg.Transport)
	return &Capability{
		cfg: cfg,
		url: messagesURL(cfg.Upstream),
		client: &http.Client{
			Transport: cfg.Transport,
			// Outbound requests go only where the configuration says.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
}

// Name is "inference".
func (c *Capability) Name() string { return protocol.Inference }

// Prefixes is /decide.
func (c *Capability) Prefixes() []string { return []string{protocol.PrefixDecide} }

// Scopes: POST /decide/v1/systemone needs decide; nothing else under
// /decide is served.
func (c *Capability) Scopes(r *http.Request) (capability.Need, bool, error) {
	if e := capability.BodyOnBodiless(r); e != nil {
		return capability.Need{}, false, e
	}
	if r.Method == http.MethodPost && r.URL.Path == protocol.RouteDecide {
		return capability.Need{Words: []string{Word}}, true, nil
	}
	return capability.Need{}, false, nil
}

// Response is the 200 answer (decideResponse).
type Response struct {
	// Model is the model the request asked.
	Model string `json:"model"`
	// Answers holds one answer per question, by question id.
	Answers map[string]Answer `json:"answers"`
	// Usage sums the Messages calls' tokens; nil when no model was asked.
	Usage *Usage `json:"usage,omitempty"`
}

// Answer is one answer (decideAnswer). Type says which fields it holds.
type Answer struct {
	Type string `json:"type"`
	// Choice is a choice answer's option.
	Choice string `json:"choice,omitempty"`
	// Noul is a noul answer's probability of true, in [0, 1].
	Noul *float64 `json:"noul,omitempty"`
	// Score is a score answer's score.
	Score *float64 `json:"score,omitempty"`
	// Probabilities are a choice answer's, by option, summing to 1.
	Probabilities map[string]float64 `json:"probabilities,omitempty"`
	// Confidence is in [0, 1], for choice and score answers.
	Confidence *float64 `json:"confidence,omitempty"`
	// Reason is the model's own explanation, when it gave one.
	Reason string `json:"reason,omitempty"`
}

// Usage is the tokens the Messages calls spent.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

// Serve checks the request, asks the model each question on the payer's
// credential, and answers.
func (c *Capability) Serve(w http.ResponseWriter, r *http.Request, call *capability.Call) error {
	if call.Payer == nil {
		return errors.New("decide: no payer for a model call")
	}
	paid, err := call.Payer(r.Context(), r)
	w.Header().Set(protocol.HeaderPayer, protocol.FormatPayerHeader(paid.Payer))
	if err != nil && !errors.Is(err, capability.ErrNoCredential) {
		return capability.PayerUnreadable(err)
	}
	noCredential := err != nil
	req, err := c.read(w, r)
	if err != nil {
		return err
	}
	asked := req.asked()
	if asked > 0 && noCredential {
		return capability.NoCredential(paid.Payer, payer.SetHint(paid.Payer, call.Box.Name))
	}
	if paid.Failover != nil {
		// The pool cools an overload for the model asked, and may ask on
		// another entry for it.
		if next, ok := paid.Failover.Model(req.Model); ok {
			paid = next
		}
	}
	if asked > 0 && cloud.Is(paid.Credential) && paid.Failover != nil {
		// The pool's entry for the box is a cloud account: its next
		// entry that is not pays.
		if next, ok := nextAsked(paid.Failover); ok {
			paid = next
		}
	}
	if asked > 0 && cloud.Is(paid.Credential) {
		return notOnCloud(paid.Credential)
	}
	answers, usage, err := c.answer(r.Context(), req, &paying{c: c, paid: paid})
	if err != nil {
		return err
	}
	resp := Response{Model: req.Model, Answers: make(map[string]Answer, len(answers))}
	for i, q := range req.Questions {
		resp.Answers[q.ID] = answers[i]
	}
	if asked > 0 {
		resp.Usage = &usage
	}
	b, err := json.Marshal(resp)
	if err != nil {
		return fmt.Errorf("encode decide answer: %w", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(b, '\n'))
	return nil
}

// read reads and checks the body; every failure is a 422 but one that
// could not be read at all.
func (c *Capability) read(w http.ResponseWriter, r *http.Request) (*Request, error) {
	tooLarge := capability.Refuse(capability.ReasonTooLarge,
		"The decide request is over %d bytes.", c.cfg.MaxBody).At(http.StatusUnprocessableEntity)
	if r.ContentLength > c.cfg.MaxBody {
		return nil, tooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, c.cfg.MaxBody))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, tooLarge
	}
	if err != nil {
		return nil, capability.Refuse(capability.ReasonInvalid, "The decide request could not be read.").WithErr(err)
	}
	req, n, err := parseScrubbed(body)
	if n > 0 {
		c.cfg.Logger.Warn("decide: replaced tokens the box sent in the body", "tokens", n)
	}
	var ie *InvalidError
	if errors.As(err, &ie) {
		return nil, capability.Refuse(capability.ReasonInvalid, "%s", ie.Message).At(http.StatusUnprocessableEntity)
	}
	return req, err
}

// parseScrubbed reads body, in place, as the request decide asks: no
// upstream receives a token, even one a box puts in its state, so every
// token written in it, plainly or escaped (and every grant), is first
// replaced by a marker of its own length, then the body is parsed. It
// returns how many tokens it replaced. The meter's estimate reads the
// request through it too: a token written once plainly and once
// escaped decodes to one string, and to two markers of different
// lengths, so what the body reads as before its tokens are replaced
// (two keys the same) is not what decide asks (two questions).
func parseScrubbed(body []byte) (*Request, int, error) {
	n := proxy.ScrubTokensInPlace(body)
	req, err := ParseRequest(body, MaxQuestions)
	return req, n, err
}

// answer asks every question the broker answers, at most Concurrency at
// once, within Timeout. The first failure stops the others and is the
// request's answer.
func (c *Capability) answer(ctx context.Context, req *Request, pay *paying) ([]Answer, Usage, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(Concurrency)
	answers := make([]Answer, len(req.Questions))
	usages := make([]Usage, len(req.Questions))
	for i := range req.Questions {
		q := &req.Questions[i]
		if !q.Asked() {
			answers[i] = Answer{Type: TypeUnsupported}
			continue
		}
		g.Go(func() error {
			a, u, err := c.ask(gctx, req, q, pay)
			answers[i], usages[i] = a, u
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, Usage{}, err
	}
	var sum Usage
	for _, u := range usages {
		sum.InputTokens += u.InputTokens
		sum.OutputTokens += u.OutputTokens
	}
	return answers, sum, nil
}

// notOnCloud refuses a decide request whose payer's credential is a cloud
// account: decide asks the Anthropic API's Messages route itself, and a
// cloud account is never sent there.
func notOnCloud(cred []byte) error {
	name := "a cloud account"
	if c, err := cloud.Parse(cred); err == nil {
		name = cloud.Name(c.Kind)
	}
	return capability.Refuse(capability.ReasonNotSupported,
		"decide is not available while this box's model calls are paid through %s; the operator pays for it with an Anthropic API key or setup token.", name).At(http.StatusBadRequest)
}
