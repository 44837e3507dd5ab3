// Package feedback serves POST /api/feedback, where a box's agents send
// their feedback (studio#257). A batch's non-empty entries need the scope
// word agent and its non-empty counts need passive; the broker applies
// that rule before Serve runs. Serve then applies the broker's own policy
// — it keeps feedback at all, and the box's owner has consented — and
// keeps the batch, as it came but with every token in it replaced by a
// marker of its length (proxy.ScrubTokensInPlace), in the store. What a
// box keeps is bounded (Config.Bound): a batch past the bound drops the
// box's oldest in the same store write, counted and said at WARN.
//
// What an entry holds is the receiver's format (hud's RFC-009), not the
// protocol's: the broker counts entries and counts to choose the words and
// never reads further into them.
package feedback

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/defaults"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/store"
)

// Scope words of the feedback capability.
const (
	// WordEntries is the word a batch with non-empty entries needs.
	WordEntries = "agent"
	// WordCounts is the word a batch with non-empty counts needs.
	WordCounts = "passive"
)

// DefaultMaxBody bounds a batch's body when Config.MaxBody is zero: 1 MiB.
const DefaultMaxBody = 1 << 20

// What one box keeps of feedback when Config.Bound leaves it zero: the
// newest 10,000 batches, holding at most 64 MiB of bodies — a week of a
// batch a minute, or 64 batches at the 1 MiB bound. A new batch past
// either drops the box's oldest.
const (
	DefaultMaxBatches = 10_000
	DefaultMaxBytes   = 64 << 20
)

// Metrics counts what the capability drops (*metrics.Metrics).
type Metrics interface {
	// FeedbackDropped counts n batches dropped to keep a box within
	// its bound.
	FeedbackDropped(n int)
}

// Config configures the capability.
type Config struct {
	// Store keeps accepted batches, and reads the box of one it refuses
	// for the box's token (capability.TokenGone).
	Store interface {
		store.Feedback
		capability.BoxReader
	}
	// Keep is whether this broker keeps feedback at all. When false every
	// batch that passes the declaration and is well formed is answered 501,
	// so the box keeps it to send later.
	Keep bool
	// MaxBody bounds a batch's body in bytes (default DefaultMaxBody); a
	// larger one is a 413.
	MaxBody int64
	// Bound is what one box keeps: a new batch past it drops the box's
	// oldest (defaults DefaultMaxBatches and DefaultMaxBytes for a zero
	// field).
	Bound store.FeedbackBound
	// Metrics counts dropped batches; nil counts none.
	Metrics Metrics
	// Logger says each drop at WARN (default slog.Default()).
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Capability is the feedback capability.
type Capability struct {
	cfg Config
}

// New returns the capability.
func New(cfg Config) *Capability {
	defaults.Positive(&cfg.MaxBody, DefaultMaxBody)
	defaults.Positive(&cfg.Bound.Batches, DefaultMaxBatches)
	defaults.Positive(&cfg.Bound.Bytes, DefaultMaxBytes)
	defaults.Clock(&cfg.Now)
	defaults.Logger(&cfg.Logger)
	return &Capability{cfg: cfg}
}

// Name is "feedback".
func (c *Capability) Name() string { return protocol.Feedback }

// Prefixes is /api/feedback; only the route itself is served.
func (c *Capability) Prefixes() []string { return []string{protocol.RouteFeedback} }

// Scopes serves POST /api/feedback only. It reads no body: the words a
// batch needs are BodyScopes', which the broker calls once the box's token
// is known.
func (c *Capability) Scopes(r *http.Request) (capability.Need, bool, error) {
	if r.URL.Path != protocol.RouteFeedback || r.Method != http.MethodPost {
		return capability.Need{}, false, nil
	}
	return capability.Need{}, true, nil
}

// BodyScopes reads the body (bounded by MaxBody, a 413 over it), leaves it
// in r.Body for Serve, and returns the words the batch needs: agent for
// non-empty entries, passive for non-empty counts, none for anything else.
func (c *Capability) BodyScopes(r *http.Request) ([]string, error) {
	body, err := c.read(r)
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	b, _ := Parse(body)
	return b.Words(), nil
}

// read reads r's body whole, at most MaxBody bytes.
func (c *Capability) read(r *http.Request) ([]byte, error) {
	tooLarge := capability.Refuse(capability.ReasonTooLarge,
		"The feedback batch is over %d bytes; send it in smaller batches.", c.cfg.MaxBody)
	if r.ContentLength > c.cfg.MaxBody {
		return nil, tooLarge
	}
	if r.Body == nil {
		return nil, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, c.cfg.MaxBody+1))
	if err != nil {
		return nil, capability.Refuse(capability.ReasonInvalid, "The feedback batch could not be read.").WithErr(fmt.Errorf("read feedback batch: %w", err))
	}
	if int64(len(body)) > c.cfg.MaxBody {
		return nil, tooLarge
	}
	return body, nil
}

// Serve keeps a batch the declaration allows: 400 for a batch that is not
// one or carries nothing, 501 when this broker keeps no feedback, 403 when
// the box's owner has not consented, and otherwise 202 with the batch's id.
func (c *Capability) Serve(w http.ResponseWriter, r *http.Request, call *capability.Call) error {
	body, err := c.read(r)
	if err != nil {
		return err
	}
	if _, err := Parse(body); err != nil {
		return capability.Refuse(capability.ReasonInvalid, "%s", message(err))
	}
	if !c.cfg.Keep {
		return capability.Refuse(capability.ReasonNotSupported,
			"This broker keeps no feedback; keep the batch and send it later.")
	}
	if !call.Box.Consent {
		return capability.Refuse(capability.ReasonConsent,
			"The broker withholds this feedback: consent from the owner of box %s is missing, so it keeps none of the box's feedback. "+
				"Once the owner consents, the operator records it with `boxbroker box consent %s on`; until then keep the batch.",
			call.Box.Name, call.Box.Name)
	}
	// A batch is kept as it came but for tokens: each, plainly or
	// escaped, is replaced by a marker of its length, so the batch stays
	// the same JSON and keeps no box's token or grant.
	proxy.ScrubTokensInPlace(body)
	added, err := c.cfg.Store.AddFeedback(r.Context(), store.FeedbackBatch{
		Box: call.Box.Name, At: c.cfg.Now().UTC(), Words: call.Words, Body: body,
	}, call.TokenHash, c.cfg.Bound)
	if errors.Is(err, store.ErrGraceEnded) || errors.Is(err, store.ErrTokenExpired) {
		// Admitted within its token's grace or lifetime, kept past it.
		return capability.Refuse(capability.ReasonExpired,
			"The token this batch was sent with is no longer taken: its lifetime, or the grace after its rotation, ended as the batch was kept. Keep the batch and send it with the box's token.")
	}
	if errors.Is(err, store.ErrNotFound) { // removed meanwhile, or its token replaced
		return capability.TokenGone(r.Context(), c.cfg.Store, call.Box)
	}
	if err != nil {
		return capability.Refuse(capability.ReasonStore, "The broker could not keep the batch just now; keep it and send it later.").WithErr(err)
	}
	if added.Dropped > 0 {
		if c.cfg.Metrics != nil {
			c.cfg.Metrics.FeedbackDropped(added.Dropped)
		}
		c.cfg.Logger.Warn("feedback: a box's kept feedback passed its bound; its oldest batches are dropped",
			"box", call.Box.Name, "dropped", added.Dropped, "dropped_bytes", added.DroppedBytes, "id", added.ID,
			"max_batches", c.cfg.Bound.Batches, "max_bytes", c.cfg.Bound.Bytes)
	}
	answer := []byte(`{"taken":true,"id":` + strconv.FormatInt(added.ID, 10) + "}\n")
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
	w.WriteHeader(http.StatusAccepted)
	_, _ = w.Write(answer)
	return nil
}
