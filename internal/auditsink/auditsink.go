// Package auditsink streams the audit rows a replica writes to a sink the
// operator configures: JSON lines in HTTP POSTs, at least once and in
// order per replica.
//
// Each row is first appended to a backlog in the data directory
// (DIR/auditsink/), synced to disk, and then sent, in batches, until the
// sink acknowledges it with a 2xx answer; a failed POST is retried with
// exponential backoff (with jitter), the same rows in the same order. A
// row leaves the backlog only when acknowledged, so what a stopped or
// crashed process had not sent is sent by the next one.
//
// The backlog is bounded (Config.MaxBacklog rows). When a row is added to
// a full backlog, the oldest row is dropped to make room — the newest
// rows are the ones an operator looks for after an outage — and each drop
// is counted in boxbroker_audit_sink_dropped_total and logged. The
// backlog file is rewritten once most of it is rows acknowledged or
// dropped, so it too stays near the bound while the sink takes nothing.
//
// Each row carries the replica's id (made once, kept in the backlog's
// directory), its sequence number on that replica, and the batch key and
// index the store wrote it under: a row written again (a spooled batch
// replayed) carries the same batch key and index, so a sink can drop the
// repeat. Rows hold only what the audit log holds — no token, credential
// or secret value is ever in an audit row.
package auditsink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/intentius/boxbroker/internal/defaults"
	"github.com/intentius/boxbroker/internal/outbox"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/webhook"
)

// Defaults of Config's zero fields.
const (
	DefaultMaxBacklog = 100_000
	DefaultBatch      = 500
	DefaultMinBackoff = 500 * time.Millisecond
	DefaultMaxBackoff = time.Minute
	// DefaultTimeout bounds one POST to the sink.
	DefaultTimeout = 30 * time.Second
)

// maxLine bounds one row's line (its newline in it): Append refuses a
// longer one, and load reads one whole, and passes a longer one over
// unheld, dropped from the stream as a damaged line is.
const maxLine = 1 << 20

// Config configures a Sink.
type Config struct {
	// URL is where rows are POSTed, as JSON lines
	// (application/x-ndjson). Required.
	URL *url.URL
	// Dir is the data directory; the backlog is kept in Dir/auditsink
	// (made, mode 0700, if missing). Required.
	Dir string
	// MaxBacklog is the most rows kept unacknowledged (default
	// DefaultMaxBacklog); past it the oldest is dropped.
	MaxBacklog int
	// Batch is the most rows in one POST (default DefaultBatch).
	Batch int
	// MinBackoff and MaxBackoff bound the wait before a failed POST is
	// retried (defaults DefaultMinBackoff, DefaultMaxBackoff).
	MinBackoff, MaxBackoff time.Duration
	// Token, when set, is sent as the POSTs' bearer token
	// (Authorization: Bearer); it is never logged.
	Token string
	// Client sends the POSTs (default: webhook.Channel's, with
	// DefaultTimeout); its redirects are never followed, so a 3xx is a
	// failed POST.
	Client *http.Client
	// Logger receives warnings (default slog.Default()).
	Logger *slog.Logger
	// Registerer, when set, has the sink's metrics registered with it.
	Registerer prometheus.Registerer
}

// Row is one audit row as the sink receives it: a JSON object on a line
// of its own.
type Row struct {
	// Replica is the id of the replica that wrote the row, and Seq its
	// number there, one more than the row before it.
	Replica string `json:"replica"`
	Seq     uint64 `json:"seq"`
	// Batch and Index are the store batch's key the row was written
	// under and its place in it: the same when a batch is written again.
	Batch string `json:"batch"`
	Index int    `json:"index"`

	At             time.Time `json:"at"`
	Box            string    `json:"box,omitempty"`
	Method         string    `json:"method"`
	Route          string    `json:"route"`
	Capability     string    `json:"capability,omitempty"`
	Words          []string  `json:"words,omitempty"`
	Status         int       `json:"status"`
	Reason         string    `json:"reason,omitempty"`
	Message        string    `json:"message,omitempty"`
	DurationMS     float64   `json:"duration_ms"`
	UpstreamStatus int       `json:"upstream_status,omitempty"`
	PaidBy         string    `json:"paid_by,omitempty"`
	Bytes          int64     `json:"bytes"`
	CostMicros     int64     `json:"cost_micros"`
}

// item is one row waiting in the backlog: its line (with its newline),
// its number and where its line ends in the backlog file.
type item struct {
	line []byte
	seq  uint64
	end  int64
}

// state is what Dir/auditsink/state.json keeps: the backlog file's
// generation, how far into it the rows are acknowledged (or dropped),
// and the last row's number.
type state struct {
	Replica string `json:"replica"`
	Gen     uint64 `json:"gen"`
	Offset  int64  `json:"offset"`
	Seq     uint64 `json:"seq"`
}

// Sink streams audit rows to the configured URL. Its methods are safe for
// concurrent use.
type Sink struct {
	cfg  Config
	dir  string
	log  *slog.Logger
	wake chan struct{}

	mu    sync.Mutex // guards the fields below
	f     *os.File   // the backlog file of generation st.Gen, open to read and append
	size  int64      // f's size
	st    state      // as last written, but Offset and Seq as now
	queue []item     // the rows not yet acknowledged, oldest first
	// closed is set by Close.
	closed bool
	// seen are the batch keys appended lately (ring, the oldest at
	// seenNext), so a spooled batch the store is offered again and again
	// while it is down is appended once.
	seen     map[string]struct{}
	seenRing []string
	seenNext int

	sent, dropped, failed prometheus.Counter
	backlog               prometheus.GaugeFunc
}

// Open opens (or makes) the backlog in cfg.Dir and returns the Sink; rows
// an earlier process left unacknowledged are sent first. Call Run to
// send, and Close when done.
func Open(cfg Config) (*Sink, error) {
	if cfg.URL == nil || cfg.Dir == "" {
		return nil, errors.New("auditsink: URL and Dir are required")
	}
	defaults.Positive(&cfg.MaxBacklog, DefaultMaxBacklog)
	defaults.Positive(&cfg.Batch, DefaultBatch)
	defaults.Positive(&cfg.MinBackoff, DefaultMinBackoff)
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(DefaultMaxBackoff, cfg.MinBackoff)
	}
	// A redirect is not followed: net/http sends the bearer token on to
	// another port or scheme of the same host. It is a failed POST.
	cfg.Client = webhook.Channel(cfg.Client, DefaultTimeout)
	defaults.Logger(&cfg.Logger)
	s := &Sink{cfg: cfg, dir: filepath.Join(cfg.Dir, "auditsink"), log: cfg.Logger, wake: make(chan struct{}, 1)}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("auditsink: %w", err)
	}
	// The metrics are made first: load counts the rows it drops.
	s.sent = prometheus.NewCounter(prometheus.CounterOpts{Name: "boxbroker_audit_sink_sent_total", Help: "Audit rows the audit sink acknowledged."})
	s.dropped = prometheus.NewCounter(prometheus.CounterOpts{Name: "boxbroker_audit_sink_dropped_total", Help: "Audit rows dropped, unsent, from a full audit sink backlog (the oldest go first)."})
	s.failed = prometheus.NewCounter(prometheus.CounterOpts{Name: "boxbroker_audit_sink_failed_posts_total", Help: "POSTs to the audit sink that failed and are retried."})
	s.backlog = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "boxbroker_audit_sink_backlog_rows", Help: "Audit rows waiting in the backlog for the audit sink."},
		func() float64 { return float64(s.Backlog()) })
	if err := s.load(); err != nil {
		return nil, err
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{s.sent, s.dropped, s.failed, s.backlog} {
			if err := cfg.Registerer.Register(c); err != nil {
				_ = s.f.Close()
				return nil, fmt.Errorf("auditsink: metrics: %w", err)
			}
		}
	}
	if len(s.queue) > 0 {
		s.poke()
	}
	return s, nil
}

// Append adds entries, written to the store under batch key key, to the
// backlog, synced to disk before it returns, and wakes the sender. A full
// backlog drops its oldest rows to make room. It returns an error when
// the backlog cannot be written, or a row is longer than a backlog line
// may be (1 MiB); the rows are then not streamed.
func (s *Sink) Append(key string, entries []store.AuditEntry) error {
	if len(entries) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("auditsink: closed")
	}
	if _, ok := s.seen[key]; ok {
		return nil
	}
	var buf bytes.Buffer
	items := make([]item, 0, len(entries))
	seq := s.st.Seq
	for i, e := range entries {
		seq++
		start := buf.Len()
		if err := json.NewEncoder(&buf).Encode(rowOf(s.st.Replica, seq, key, i, e)); err != nil {
			return fmt.Errorf("auditsink: %w", err)
		}
		if n := buf.Len() - start; n > maxLine {
			// A restart would refuse a backlog holding it.
			return fmt.Errorf("auditsink: a row of %d bytes is longer than the %d a backlog line may hold", n, maxLine)
		}
		items = append(items, item{seq: seq, end: int64(buf.Len())}) // in buf, until appended
	}
	// A failed append leaves no part of the rows in the backlog
	// (AppendSynced): the rows appended next begin where the kept ones
	// end, every offset the queue and the state hold stays true, and a
	// restart reads no line that is not a row. Append then fails: its
	// rows are not in the stream (Wrap logs them and writes the store all
	// the same), and a batch replayed from the spool under its key is
	// appended again.
	size, err := outbox.AppendSynced(s.f, buf.Bytes())
	if err != nil {
		return fmt.Errorf("auditsink: backlog: %w", err)
	}
	// The rows end where the file does now (AppendSynced may have ended a
	// line cut off before them).
	b, base, start := buf.Bytes(), size-int64(buf.Len()), int64(0)
	for i := range items {
		end := items[i].end
		items[i].line, items[i].end = b[start:end:end], base+end
		start = end
	}
	s.size, s.st.Seq = size, seq
	s.queue = append(s.queue, items...)
	s.noteSeenLocked(key)
	if n := len(s.queue) - s.cfg.MaxBacklog; n > 0 {
		s.dropLocked(n)
		// The rows dropped leave the file as acknowledged ones do, so
		// that a sink that never takes a POST does not fill the disk.
		if s.compactDueLocked() {
			if err := s.compactLocked(); err != nil {
				s.log.Warn("audit sink: backlog not compacted", "err", err)
			}
		}
	}
	s.poke()
	return nil
}

// seenKeys is how many batch keys Append remembers.
const seenKeys = 4096

func (s *Sink) noteSeenLocked(key string) {
	if s.seen == nil {
		s.seen, s.seenRing = make(map[string]struct{}, seenKeys), make([]string, seenKeys)
	}
	delete(s.seen, s.seenRing[s.seenNext])
	s.seenRing[s.seenNext] = key
	s.seen[key] = struct{}{}
	s.seenNext = (s.seenNext + 1) % seenKeys
}

// dropLocked drops the n oldest rows of the backlog, unsent.
func (s *Sink) dropLocked(n int) {
	s.st.Offset = s.queue[n-1].end
	s.queue = append(s.queue[:0:0], s.queue[n:]...)
	s.dropped.Add(float64(n))
	s.log.Warn("audit sink: backlog full; the oldest rows are dropped unsent", "dropped", n, "max_backlog", s.cfg.MaxBacklog)
}

func rowOf(replica string, seq uint64, key string, i int, e store.AuditEntry) Row {
	return Row{Replica: replica, Seq: seq, Batch: key, Index: i,
		At: e.At.UTC(), Box: e.Box, Method: e.Method, Route: e.Route, Capability: e.Capability, Words: e.Words,
		Status: e.Status, Reason: e.Reason, Message: e.Message, DurationMS: float64(e.Duration) / float64(time.Millisecond),
		UpstreamStatus: e.UpstreamStatus, PaidBy: e.PaidBy, Bytes: e.Bytes, CostMicros: e.Cost}
}

func (s *Sink) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Backlog is the number of rows waiting to be acknowledged.
func (s *Sink) Backlog() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// Run sends the backlog's rows, oldest first, until ctx is done. On a
// nil Sink it returns at once.
func (s *Sink) Run(ctx context.Context) {
	if s == nil {
		return
	}
	backoff := webhook.Backoff{Min: s.cfg.MinBackoff, Max: s.cfg.MaxBackoff, Jitter: true}
	for {
		s.mu.Lock()
		n := min(len(s.queue), s.cfg.Batch)
		var body []byte
		var last uint64
		for _, it := range s.queue[:n] {
			body = append(body, it.line...)
		}
		if n > 0 {
			last = s.queue[n-1].seq
		}
		s.mu.Unlock()
		if n == 0 {
			select {
			case <-ctx.Done():
				return
			case <-s.wake:
				continue
			}
		}
		if err := s.post(ctx, body); err != nil {
			if ctx.Err() != nil {
				return
			}
			s.failed.Inc()
			wait := backoff.Next()
			s.log.Warn("audit sink: POST failed; retrying", "rows", n, "retry_in", wait, "err", err)
			if !webhook.Sleep(ctx, wait) {
				return
			}
			continue
		}
		backoff.Reset()
		s.ack(last)
	}
}

// post sends body to the sink and reports whether it was acknowledged.
// The error names the status, never the sink's answer or URL.
func (s *Sink) post(ctx context.Context, body []byte) error {
	h := http.Header{"Content-Type": {"application/x-ndjson"}}
	if s.cfg.Token != "" {
		h.Set("Authorization", "Bearer "+s.cfg.Token)
	}
	resp, err := webhook.Post(ctx, s.cfg.Client, s.cfg.URL.String(), h, body)
	if err == nil && (resp.StatusCode < 200 || resp.StatusCode > 299) {
		err = fmt.Errorf("the sink answered %d", resp.StatusCode)
	}
	return err
}

// ack removes the rows numbered up to last from the backlog and notes it
// on disk; a backlog file mostly acknowledged (or dropped) is rewritten.
func (s *Sink) ack(last uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for n < len(s.queue) && s.queue[n].seq <= last {
		n++
	}
	if n == 0 {
		return // dropped meanwhile
	}
	s.st.Offset = s.queue[n-1].end
	s.queue = s.queue[n:]
	s.sent.Add(float64(n))
	if s.closed {
		return
	}
	if s.compactDueLocked() {
		err := s.compactLocked()
		if err == nil {
			return
		}
		s.log.Warn("audit sink: backlog not compacted", "err", err)
	}
	if err := s.writeStateLocked(); err != nil {
		s.log.Warn("audit sink: acknowledgement not kept; rows may be sent again", "err", err)
	}
}

// Close keeps the acknowledgements made and closes the backlog; rows not
// yet acknowledged are sent by the next process. Stop Run first. Close
// on a nil Sink does nothing.
func (s *Sink) Close() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return errors.Join(s.writeStateLocked(), s.f.Close())
}
