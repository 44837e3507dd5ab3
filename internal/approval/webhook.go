package approval

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// Webhook headers. The signature is "v1=" and the hex HMAC-SHA256, under
// the operator's key, of the timestamp (Unix seconds, as in
// HeaderTimestamp), a ".", and the body: a receiver computes it again,
// compares in constant time, and refuses a timestamp far from its clock.
const (
	HeaderTimestamp = "X-Boxbroker-Timestamp"
	HeaderSignature = "X-Boxbroker-Signature"
)

// Webhook shapes.
const (
	ShapeJSON  = "json"
	ShapeSlack = "slack"
)

// WebhookConfig configures a Webhook.
type WebhookConfig struct {
	// URL receives each new proposal as a POST. Required.
	URL string
	// Shape is ShapeJSON (default) or ShapeSlack.
	Shape string
	// Key signs each body. Required.
	Key []byte
	// PageURL, when set, is named in each message.
	PageURL string
	// Client sends; nil means a client with a 10 s timeout.
	Client *http.Client
	// Attempts bounds the tries of one message (default 5), the waits
	// between them doubling from Backoff (default 1 s).
	Attempts int
	Backoff  time.Duration
	// Now is the clock; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Webhook POSTs each new proposal to the operator's URL, signed, from a
// queue of its own: Notify never blocks a request, and a full queue
// drops (and logs) the message. A message carries what the proposal
// says (box, what it tried, why, its ID) and never a secret's value or a
// token: a proposal holds neither.
type Webhook struct {
	cfg   WebhookConfig
	queue chan store.Proposal
	stop  chan struct{}
	done  sync.WaitGroup
	once  sync.Once
}

// maxQueue bounds the messages waiting to be sent.
const maxQueue = 256

// NewWebhook starts a Webhook; Close stops it.
func NewWebhook(cfg WebhookConfig) (*Webhook, error) {
	if cfg.URL == "" || len(cfg.Key) == 0 {
		return nil, errors.New("approval webhook: no URL or no key")
	}
	if cfg.Shape == "" {
		cfg.Shape = ShapeJSON
	}
	if cfg.Shape != ShapeJSON && cfg.Shape != ShapeSlack {
		return nil, fmt.Errorf("approval webhook: shape %q is not json or slack", cfg.Shape)
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = 5
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	w := &Webhook{cfg: cfg, queue: make(chan store.Proposal, maxQueue), stop: make(chan struct{})}
	w.done.Add(1)
	go w.run()
	return w, nil
}

// Notify queues p to be sent; it never blocks.
func (w *Webhook) Notify(p store.Proposal) {
	select {
	case w.queue <- p:
	default:
		w.cfg.Logger.Warn("approval webhook: queue full; proposal not sent", "proposal", p.ID, "box", p.Box)
	}
}

// Close stops sending, dropping what waits, and returns once the sender
// has stopped.
func (w *Webhook) Close() error {
	w.once.Do(func() { close(w.stop) })
	w.done.Wait()
	return nil
}

func (w *Webhook) run() {
	defer w.done.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-w.stop; cancel() }()
	for {
		select {
		case <-w.stop:
			return
		case p := <-w.queue:
			w.send(ctx, p)
		}
	}
}

// send posts p, retrying a failure (no answer, or not 2xx) with backoff.
func (w *Webhook) send(ctx context.Context, p store.Proposal) {
	body, err := Message(p, w.cfg.Shape, w.cfg.PageURL)
	if err != nil {
		w.cfg.Logger.Error("approval webhook: message", "proposal", p.ID, "err", err)
		return
	}
	wait := w.cfg.Backoff
	for attempt := 1; ; attempt++ {
		err := w.post(ctx, body)
		if err == nil {
			return
		}
		if attempt >= w.cfg.Attempts || ctx.Err() != nil {
			w.cfg.Logger.Warn("approval webhook: not delivered", "proposal", p.ID, "box", p.Box, "attempts", attempt, "err", err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// post sends one signed body.
func (w *Webhook) post(ctx context.Context, body []byte) error {
	ts := strconv.FormatInt(w.cfg.Now().Unix(), 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderTimestamp, ts)
	req.Header.Set(HeaderSignature, Sign(w.cfg.Key, ts, body))
	resp, err := w.cfg.Client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("answered %d", resp.StatusCode)
	}
	return nil
}

// Sign is the signature of body sent at timestamp ts under key:
// "v1=" and hex(HMAC-SHA256(key, ts + "." + body)).
func Sign(key []byte, ts string, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return "v1=" + hex.EncodeToString(m.Sum(nil))
}

// Event is the generic JSON shape of a new proposal.
type Event struct {
	Type      string `json:"type"` // "proposal"
	ID        string `json:"id"`
	Box       string `json:"box"`
	Kind      string `json:"kind"`
	Secret    string `json:"secret,omitempty"`
	Method    string `json:"method,omitempty"`
	Host      string `json:"host,omitempty"`
	Path      string `json:"path,omitempty"`
	Model     string `json:"model,omitempty"`
	Amount    int64  `json:"amount_micros,omitempty"`
	Reason    string `json:"reason"`
	ExpiresAt string `json:"expires_at"`
	Approve   string `json:"approve"`
	Deny      string `json:"deny"`
	Page      string `json:"page,omitempty"`
}

// Message is the body sent for p in shape: an Event, or Slack's
// {"text": ...}.
func Message(p store.Proposal, shape, pageURL string) ([]byte, error) {
	ev := Event{Type: "proposal", ID: p.ID, Box: p.Box, Kind: p.Kind, Secret: p.Secret, Method: p.Method, Host: p.Host, Path: p.Path,
		Model: p.Model, Amount: p.Amount, Reason: p.Reason, ExpiresAt: p.ExpiresAt.UTC().Format(time.RFC3339),
		Approve: "boxbroker approve " + p.ID + " --for 1h", Deny: "boxbroker deny " + p.ID, Page: pageURL}
	if shape != ShapeSlack {
		return json.Marshal(ev)
	}
	what := ""
	switch p.Kind {
	case store.ProposalRule:
		what = fmt.Sprintf("%s %s with the secret %s (%s)", p.Method, p.Path, p.Secret, p.Host)
	case store.ProposalHost:
		what = "a tunnel to " + p.Host + " (passthrough, no secret)"
	default:
		what = fmt.Sprintf("a call of %s for up to $%.6f past its budget", p.Model, float64(p.Amount)/1e6)
	}
	text := fmt.Sprintf("Box *%s* was refused %s and asks for it (proposal `%s`).\n> %s\nApprove: `%s` · Deny: `%s`", p.Box, what, p.ID, p.Reason, ev.Approve, ev.Deny)
	if pageURL != "" {
		text += " · " + pageURL
	}
	return json.Marshal(map[string]string{"text": text})
}
