// Package webhook posts JSON messages to a URL the operator configures,
// signed so the receiver can check them, from a queue of its own: a
// message is queued without blocking, tried again with doubling waits
// when it is not answered 2xx (a redirect is not followed), and dropped
// (and logged) when the queue is full or its tries run out. Proposals
// (package approval) and budget alerts (package spend) are sent through
// it, signed alike. Post and Backoff, its POST and its waits between
// tries, serve the audit sink (package auditsink) too.
//
// The signature: HeaderTimestamp holds the Unix seconds the message was
// sent at, and HeaderSignature "v1=" and the hex HMAC-SHA256, under the
// operator's key, of the timestamp, a ".", and the body. A receiver
// computes it again, compares in constant time, and refuses a timestamp
// far from its clock (a replayed message).
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/intentius/boxbroker/internal/defaults"
	"github.com/intentius/boxbroker/internal/quiet"
)

// The headers of a signed message.
const (
	HeaderTimestamp = "X-Boxbroker-Timestamp"
	HeaderSignature = "X-Boxbroker-Signature"
)

// Config configures a Sender.
type Config struct {
	// URL receives each message as a POST. Required.
	URL string
	// Key signs each message. Required.
	Key []byte
	// Name names the sender in its log lines ("approval webhook").
	Name string
	// Client sends (nil: a client with a 10 s timeout).
	Client *http.Client
	// Attempts bounds the tries of one message (default 5), the waits
	// between them doubling from Backoff (default 1 s).
	Attempts int
	Backoff  time.Duration
	// Now is the clock (time.Now when nil).
	Now    func() time.Time
	Logger *slog.Logger
}

// maxQueue bounds the messages waiting to be sent.
const maxQueue = 256

// Sender sends messages one after another from its queue; Close stops it.
type Sender struct {
	cfg   Config
	queue chan message
	// ctx ends, by stop, when the Sender is closed.
	ctx  context.Context
	stop context.CancelFunc
	done sync.WaitGroup
	// pending counts the messages queued or being sent.
	pending sync.WaitGroup
}

type message struct {
	body []byte
	log  []any
}

// New starts a Sender.
func New(cfg Config) (*Sender, error) {
	if cfg.URL == "" || len(cfg.Key) == 0 {
		return nil, fmt.Errorf("%s: no URL or no key", cfg.Name)
	}
	// A redirect is not followed: the message, signed, would go again to
	// wherever the receiver names (plain http, an address inside the
	// operator's network). It is an answer that is not 2xx.
	cfg.Client = Channel(cfg.Client, 10*time.Second)
	defaults.Positive(&cfg.Attempts, 5)
	defaults.Positive(&cfg.Backoff, time.Second)
	defaults.Clock(&cfg.Now)
	defaults.Logger(&cfg.Logger)
	s := &Sender{cfg: cfg, queue: make(chan message, maxQueue)}
	s.ctx, s.stop = context.WithCancel(context.Background())
	s.done.Add(1)
	go s.run()
	return s, nil
}

// Send queues body; it never blocks. attrs name the message in the log
// lines of a message dropped or not delivered (never a secret).
func (s *Sender) Send(body []byte, attrs ...any) {
	if s.ctx.Err() != nil {
		s.cfg.Logger.Warn(s.cfg.Name+": closed; message not sent", attrs...)
		return
	}
	s.pending.Add(1)
	select {
	case s.queue <- message{body: body, log: attrs}:
	default:
		s.pending.Done()
		s.cfg.Logger.Warn(s.cfg.Name+": queue full; message not sent", attrs...)
	}
}

// Wait returns once every message queued so far is delivered or given
// up on.
func (s *Sender) Wait() { s.pending.Wait() }

// Close stops sending, dropping what waits, and returns once the sender
// has stopped.
func (s *Sender) Close() error {
	s.stop()
	s.done.Wait()
	for {
		select {
		case <-s.queue:
			s.pending.Done()
		default:
			return nil
		}
	}
}

func (s *Sender) run() {
	defer s.done.Done()
	for {
		select {
		case <-s.ctx.Done():
			return
		case m := <-s.queue:
			s.send(s.ctx, m)
			s.pending.Done()
		}
	}
}

// send posts m, trying again after a failure (no answer, or not 2xx).
func (s *Sender) send(ctx context.Context, m message) {
	b := Backoff{Min: s.cfg.Backoff}
	for attempt := 1; ; attempt++ {
		err := s.post(ctx, m.body)
		if err == nil {
			return
		}
		if attempt >= s.cfg.Attempts || ctx.Err() != nil {
			s.cfg.Logger.Warn(s.cfg.Name+": not delivered", append(m.log, "attempts", attempt, "err", err)...)
			return
		}
		if !Sleep(ctx, b.Next()) {
			return
		}
	}
}

// post sends one signed body.
func (s *Sender) post(ctx context.Context, body []byte) error {
	ts := strconv.FormatInt(s.cfg.Now().Unix(), 10)
	resp, err := Post(ctx, s.cfg.Client, s.cfg.URL, http.Header{"Content-Type": {"application/json"},
		HeaderTimestamp: {ts}, HeaderSignature: {Sign(s.cfg.Key, ts, body)}}, body)
	if err == nil && resp.StatusCode/100 != 2 {
		err = errors.New("answered " + resp.Status)
	}
	return err
}

// Channel is the client an operator's channel (a webhook, the audit
// sink) posts with: c (nil: a client of its own with timeout, its answer
// header bounded at quiet.MaxAnswerHeader, through the proxy the environment
// names, if any), following no redirect, with what its requests carry
// kept out of its errors (quiet.Errors). The environment's proxy
// (HTTPS_PROXY, NO_PROXY) is the operator's: a channel reaches Slack or a
// log service as the operator's other programs do, through a corporate
// egress proxy. A box's calls (package proxy's transports, minting, the
// clouds) never take one.
func Channel(c *http.Client, timeout time.Duration) *http.Client {
	if c == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.Proxy = http.ProxyFromEnvironment
		t.MaxResponseHeaderBytes = quiet.MaxAnswerHeader
		c = &http.Client{Transport: t, Timeout: timeout}
	}
	hc := *c
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	hc.Transport = quiet.Errors(hc.Transport)
	return &hc
}

// Post POSTs body to rawURL through c with header's values, and returns
// the answer once its body is read (at most 64 KiB) and closed; the
// caller judges its status. The error names what went wrong, never the
// URL: a URL may be its receiver's credential (a Slack incoming
// webhook's path is). header's keys are in canonical form.
func Post(ctx context.Context, c *http.Client, rawURL string, header http.Header, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, bytes.NewReader(body))
	if err != nil {
		return nil, errors.New("the request could not be made")
	}
	maps.Copy(req.Header, header)
	resp, err := c.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	return resp, nil
}

// Backoff spaces the tries of a failed send: the first wait is Min, and
// each after it twice the one before, up to Max when Max is set; with
// Jitter, each is drawn from its upper half.
type Backoff struct {
	Min, Max time.Duration
	Jitter   bool
	next     time.Duration // the next wait before jitter; 0 for Min
}

// Next is the wait before the next try.
func (b *Backoff) Next() time.Duration {
	d := max(b.next, b.Min)
	b.next = 2 * d
	if b.Max > 0 {
		b.next = min(b.next, b.Max)
	}
	if b.Jitter {
		return d/2 + rand.N(d/2+1)
	}
	return d
}

// Reset makes the next wait Min again, after a success.
func (b *Backoff) Reset() { b.next = 0 }

// Sleep waits d, or until ctx ends, and reports whether it waited all of d.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
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
