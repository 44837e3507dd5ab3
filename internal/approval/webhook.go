package approval

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/webhook"
)

// Webhook shapes.
const (
	ShapeJSON  = "json"
	ShapeSlack = "slack"
)

// WebhookConfig configures a Webhook: package webhook's Config, whose
// URL receives each new proposal as a POST and whose Key signs each body
// (both required; Name is set by NewWebhook), and the message's shape.
type WebhookConfig struct {
	webhook.Config
	// Shape is ShapeJSON (default) or ShapeSlack.
	Shape string
	// PageURL, when set, is named in each message.
	PageURL string
}

// Webhook POSTs each new proposal to the operator's URL, signed, through
// a webhook.Sender: Notify never blocks a request. A message carries
// what the proposal says (box, what it tried, why, its ID) and never a
// secret's value or a token: a proposal holds neither.
type Webhook struct {
	s              *webhook.Sender
	shape, pageURL string
}

// NewWebhook starts a Webhook; Close stops it.
func NewWebhook(cfg WebhookConfig) (*Webhook, error) {
	if cfg.Shape == "" {
		cfg.Shape = ShapeJSON
	}
	if cfg.Shape != ShapeJSON && cfg.Shape != ShapeSlack {
		return nil, fmt.Errorf("approval webhook: shape %q is not json or slack", cfg.Shape)
	}
	cfg.Name = "approval webhook"
	s, err := webhook.New(cfg.Config)
	if err != nil {
		return nil, err
	}
	return &Webhook{s: s, shape: cfg.Shape, pageURL: cfg.PageURL}, nil
}

// Notify queues p to be sent; it never blocks.
func (w *Webhook) Notify(p store.Proposal) {
	w.s.Send(Message(p, w.shape, w.pageURL), "proposal", p.ID, "box", p.Box)
}

// Close stops sending, dropping what waits.
func (w *Webhook) Close() error { return w.s.Close() }

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
	Payer     string `json:"payer,omitempty"`
	Reason    string `json:"reason"`
	ExpiresAt string `json:"expires_at"`
	Approve   string `json:"approve"`
	Deny      string `json:"deny"`
	Page      string `json:"page,omitempty"`
}

// Message is the body sent for p in shape: an Event, or Slack's
// {"text": ...}. Both are strings and numbers, which JSON always encodes.
func Message(p store.Proposal, shape, pageURL string) []byte {
	ev := Event{Type: "proposal", ID: p.ID, Box: p.Box, Kind: p.Kind, Secret: p.Secret, Method: p.Method, Host: p.Host, Path: p.Path,
		Model: p.Model, Amount: p.Amount, Payer: p.Payer, Reason: p.Reason, ExpiresAt: p.ExpiresAt.UTC().Format(time.RFC3339),
		Approve: "boxbroker approve " + p.ID + " --for 1h", Deny: "boxbroker deny " + p.ID, Page: pageURL}
	if shape != ShapeSlack {
		b, _ := json.Marshal(ev)
		return b
	}
	// What the box wrote (its path, host, model, reason) is escaped as
	// Slack asks, so that it can neither mention anyone (<!channel>) nor
	// show a link under words of its own (<https://…|approve>); each line
	// of the reason stays quoted.
	esc := slackEscaper.Replace
	what := Attempted(p.Attempt, esc, "for up to")
	text := fmt.Sprintf("Box *%s* was refused %s and asks for it (proposal `%s`).\n> %s\nApprove: `%s` · Deny: `%s`", esc(p.Box), what, p.ID, strings.ReplaceAll(esc(p.Reason), "\n", "\n> "), ev.Approve, ev.Deny)
	if pageURL != "" {
		text += " · " + pageURL
	}
	b, _ := json.Marshal(map[string]string{"text": text})
	return b
}

// Attempted says what a proposal's box tried, for a person: each thing
// the box chose passed through esc, and a budget's amount after forWords
// ("for", or "for up to").
func Attempted(a store.Attempt, esc func(string) string, forWords string) string {
	switch a.Kind {
	case store.ProposalRule:
		return fmt.Sprintf("%s %s with the secret %s (%s)", esc(a.Method), esc(a.Path), esc(a.Secret), esc(a.Host))
	case store.ProposalHost:
		return "a tunnel to " + esc(a.Host) + " (passthrough, no secret)"
	}
	what := fmt.Sprintf("a call of %s %s $%.6f past its budget", esc(a.Model), forWords, float64(a.Amount)/1e6)
	if a.Payer != "" {
		what += ", paid by " + esc(a.Payer)
	}
	return what
}

// slackEscaper escapes the three characters Slack's message text gives a
// meaning to: & < >.
var slackEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")
