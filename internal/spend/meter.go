// Package spend measures what boxes' model calls cost and holds them to
// monthly budgets.
//
// A Meter wraps the capabilities that make model calls — any
// capability.Metered: the Messages route of /llm/anthropic, and /decide —
// and the transport they call upstream through. Each capability reads its
// own requests, and tells the meter the model, the number of calls and
// their output bound (capability.Estimate); the meter decides when to read
// a request's body, and what to reserve and charge. Before a call is
// forwarded the wrapper reserves an upper bound of its cost against the
// budgets that apply — the box's, and its payer's principal's on that
// box — in one atomic conditional update in the store;
// a call that would pass a budget is refused with a 403 saying which budget
// is spent and when it resets. As the answer passes through, the transport
// reads the usage the upstream reports (from a JSON answer, or from a
// stream's message_start and message_delta events) without holding any
// byte back. When the call ends the reservation is released and the
// measured cost, priced by the price table, is charged and recorded by box,
// payer kind, principal, model and UTC month.
package spend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/spool"
	"github.com/intentius/boxbroker/internal/store"
)

// Defaults of Config.
const (
	// DefaultMaxTokens bounds the output of a call whose max_tokens the
	// broker did not read (a Messages body over inference.MaxRead).
	DefaultMaxTokens = 64_000
	// DefaultMaxBody is the input, in bytes, assumed for a body of
	// unknown length over what its capability reads: inference's own
	// bound.
	DefaultMaxBody = protocol.DefaultMaxBody
	// DefaultStaleAfter is a reservation's lease: Run renews the
	// reservations of this process's calls in flight every sixth of it,
	// and releases those of every process that no one renewed for that
	// long (a process that ended mid-call, or one cut off from the
	// store).
	DefaultStaleAfter = 2 * time.Minute
	// DefaultBatchEvery is how often a server settles, in batches, the
	// calls that reserved nothing.
	DefaultBatchEvery = 100 * time.Millisecond
)

// BytesPerToken and OverheadTokens make the bound on a call's input
// tokens: its body's bytes divided by BytesPerToken, plus OverheadTokens
// for what the API adds (a tool-use system prompt, say). English text and
// code run near four bytes a token, so a third errs high; images and
// documents, sent as base64, err far higher.
const (
	BytesPerToken  = 3
	OverheadTokens = 1024
)

// Config configures a Meter. Zero fields take the defaults above.
type Config struct {
	// Store keeps budgets, tallies, reservations and usage. Required.
	Store store.Spend
	// Settle, when set, is where settlements are written (Store when
	// nil): the same store, with the longer bound of a write made beside
	// requests rather than in one's path. When it is also a
	// store.Spooled, each settlement is written under a key of its own,
	// so that one spooled after a write whose outcome is unknown (its
	// deadline passed) is applied once however the write ended.
	Settle store.Spend
	// Spill, when set, keeps a settlement the store did not take (the
	// spool), under its key, to be applied later.
	Spill func(key string, s store.Settlement) error
	// Budgeted, when set, tells from memory whether a box has any budget
	// (the cache's Budgeted): a call of a box with none makes no
	// reservation, so it reads nothing from the store before it is
	// forwarded, and its body — when its capability meters it unread
	// (a Messages body) — is forwarded as it comes, read as it passes.
	// Nil asks the store on every call. An error asks the store too.
	Budgeted func(ctx context.Context, box string) (bool, error)
	// BatchEvery, when above zero and while RunBatches runs, settles the
	// calls that reserved nothing (a box with no budget) in batches: every
	// BatchEvery, one store transaction per box, principal and month,
	// rather than one per call. A call that made a reservation always
	// settles as it ends, and so does every call when BatchEvery is zero
	// or RunBatches is not running.
	BatchEvery time.Duration
	// Prices is the price table (nil: DefaultPrices).
	Prices *Prices
	// Now is the clock months are told by (nil: time.Now).
	Now func() time.Time
	// Logger receives settlements that fail and stale reservations
	// released; never a credential.
	Logger *slog.Logger
	// MaxTokens bounds the output of a call whose max_tokens was not
	// read (capability.Estimate.Capped false).
	MaxTokens int64
	// MaxBody is the input bound, in bytes, of a body of unknown length
	// over what its capability reads.
	MaxBody int64
	// StaleAfter is the age past which Run releases a reservation.
	StaleAfter time.Duration
	// Journal, when set, takes each call settled in a batch as the call
	// ends, before its answer is complete, and is told of each batch
	// before it goes to the store and once the store or Spill took it
	// (package journal), so that a replica killed before a batch is
	// written loses none of its calls. Settlements are then written
	// under keys (Settle must be a store.Spooled).
	Journal Journal
}

// Journal keeps the settlements of calls batched until they are written:
// see journal.Journal.
type Journal interface {
	Settle(st store.Settlement) (uint64, error)
	Begin(key string, of []uint64) error
	Done(key string)
}

// Meter measures model calls and holds them to budgets. It is safe for
// concurrent use.
type Meter struct {
	cfg Config
	log *slog.Logger

	batching atomic.Bool // RunBatches is running; changed with mu held
	mu       sync.Mutex  // guards pending and seqs
	pending  map[batchKey]*store.Settlement
	// seqs are the journal's numbers of the calls in each pending
	// settlement.
	seqs map[batchKey][]uint64

	// bufs holds buffers for reuse: a request body read as it is
	// forwarded, or a JSON answer, is kept in one while it passes.
	bufs bufPool
	// lastMonth is the month of the last call prepared (see month).
	lastMonth atomic.Pointer[monthName]
	// live is the reservations of calls in flight, which Run renews.
	liveMu sync.Mutex
	live   map[int64]struct{}
}

// batchKey is what one batched settlement charges.
type batchKey struct{ box, principal, month string }

// New returns a Meter, or an error when cfg has no store.
func New(cfg Config) (*Meter, error) {
	if cfg.Store == nil {
		return nil, errors.New("spend: no store")
	}
	if cfg.Prices == nil {
		cfg.Prices = DefaultPrices()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = DefaultMaxTokens
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = DefaultStaleAfter
	}
	if cfg.Settle == nil {
		cfg.Settle = cfg.Store
	}
	return &Meter{cfg: cfg, log: cfg.Logger, pending: map[batchKey]*store.Settlement{}, seqs: map[batchKey][]uint64{}, live: map[int64]struct{}{}}, nil
}

// Prices is the Meter's price table.
func (m *Meter) Prices() *Prices { return m.cfg.Prices }

// Month is t's calendar month in UTC, written YYYY-MM.
func Month(t time.Time) string { return t.UTC().Format("2006-01") }

// Resets is when month's budgets reset: the first instant of the next
// month, UTC. It returns the zero time for a month not written YYYY-MM.
func Resets(month string) time.Time {
	t, err := time.Parse("2006-01", month)
	if err != nil {
		return time.Time{}
	}
	return t.AddDate(0, 1, 0)
}

// Estimate is what the broker knows of a request before it is forwarded:
// its model ("" when unknown) and, for each of Calls upstream calls, a
// bound on its input and output tokens.
type Estimate struct {
	Model  string
	Calls  int64
	Input  int64
	Output int64
	// Unbounded is true when the API fetches, makes or counts input of
	// its own (see capability.Estimate), so that Input does not bound it: each
	// call's input is bounded by the model's context window (Context1M:
	// the 1M window), in each of Rounds samplings (0: one).
	Unbounded bool
	Context1M bool
	Rounds    int64
	// Searches is the most web searches a call makes.
	Searches int64
	// Unboundable, when not "", is why nothing bounds the calls' cost:
	// a payer held to a budget is refused them (see Unboundable).
	Unboundable string
}

// Bound is the most est could cost, in micro-dollars: every input token at
// the dearest input rate of its model (uncached or written to a cache),
// every output token at its output rate, at the long-context rates when
// the input bound is over their threshold, and every web search at its
// price. A model not in the table is bounded at the dearest rates of any
// model in it. An Unbounded call's input is bounded by its model's context
// window (Price.Context; Context1M when the call asks for the 1M window,
// or its model is not in the table), and it is bounded for each of its
// Rounds.
func (m *Meter) Bound(est Estimate) int64 {
	if est.Calls <= 0 {
		return 0
	}
	p, ok := m.cfg.Prices.Lookup(est.Model)
	if !ok {
		p = m.cfg.Prices.dearest
	}
	in, rounds := est.Input, int64(1)
	if est.Unbounded {
		window := p.Context
		if window <= 0 || est.Context1M {
			window = max(window, Context1M)
		}
		in, rounds = max(in, window), max(est.Rounds, 1)
	}
	r := p.rates(Tokens{Input: in})
	per := float64(rounds)*(float64(in)*max(r.Input, r.CacheWrite, r.CacheWrite1h)+float64(est.Output)*r.Output) +
		float64(max(est.Searches, 0))*p.WebSearch*1000
	return max(micros(per*float64(est.Calls)), 1)
}

// inputBound bounds the input tokens of a body of n bytes.
func inputBound(n int64) int64 { return (n+BytesPerToken-1)/BytesPerToken + OverheadTokens }

// EstimateOf is the Estimate of a request whose capability estimated it
// as e, from a body of n bytes; maxTokens bounds the output of a call
// whose max_tokens e does not cap.
func EstimateOf(e capability.Estimate, n, maxTokens int64) Estimate {
	out := e.MaxTokens
	if !e.Capped {
		out = max(out, maxTokens)
	}
	return Estimate{Model: e.Model, Calls: e.Calls, Input: inputBound(n), Output: out,
		Unbounded: e.Unbounded, Context1M: e.Context1M, Rounds: e.Rounds, Searches: e.Searches, Unboundable: e.Unboundable}
}

// ticket gathers what was read of every upstream answer of one request.
type ticket struct {
	mu       sync.Mutex // guards readings and each *reading's fields
	readings []*reading
}

type ctxKey struct{}

// Transport wraps base, the transport the metered capabilities call
// upstream through: a Messages call (POST .../v1/messages) made for a
// metered request has its answer's usage read as the answer passes. Such a
// call is sent without the box's Accept-Encoding, so that the upstream
// answers unencoded (the broker's transport asks for no compression of
// its own); an answer that still comes encoded is recorded as unmeasured.
// Every other request goes to base untouched.
func (m *Meter) Transport(base http.RoundTripper) http.RoundTripper {
	return &transport{base: base, bufs: &m.bufs}
}

type transport struct {
	base http.RoundTripper
	bufs *bufPool
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	tk, _ := req.Context().Value(ctxKey{}).(*ticket)
	if tk == nil || req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/v1/messages") {
		return t.base.RoundTrip(req)
	}
	if req.Header.Get("Accept-Encoding") != "" {
		req = req.Clone(req.Context())
		req.Header.Del("Accept-Encoding")
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.StatusCode < 200 || resp.StatusCode > 299 {
		// An error answer costs nothing and carries no usage.
		return resp, err
	}
	r := &reading{open: true}
	tk.mu.Lock()
	tk.readings = append(tk.readings, r)
	tk.mu.Unlock()
	if ce := resp.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		tk.mu.Lock()
		r.open = false
		tk.mu.Unlock()
		return resp, nil
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	resp.Body = &observer{body: resp.Body, sse: mt == "text/event-stream", mu: &tk.mu, r: r, bufs: t.bufs}
	return resp, nil
}

// Wrap returns c with its model calls metered and held to budgets. Name,
// Prefixes, Scopes and Route are c's.
func (m *Meter) Wrap(c capability.Metered) capability.Capability {
	return &metered{Capability: c, cap: c, m: m}
}

// metered is a capability whose model calls are metered.
type metered struct {
	capability.Capability
	cap capability.Metered
	m   *Meter
}

// estimated is what is known of a request before it is forwarded.
type estimated struct {
	Estimate
	// ok is false for a request that makes no model call.
	ok bool
	// later is true for a call estimated only as it settles, from its body
	// as it was forwarded (see bodyScan).
	later bool
	// limit is the most of the body its capability reads.
	limit int64
	// body, when not nil, is forwarded in place of the request's: the
	// estimate read the request's.
	body io.ReadCloser
}

// estimate estimates a request of box before it is forwarded. A body over
// what the capability reads is not read, and bounded by its length. A
// request the capability meters unread (a Messages call) from a box with
// no budget is not read either: nothing is reserved for it, and its body
// is read as it is forwarded. From a box that may have a budget, its body
// is read whole up to MaxBody, past the capability's own limit: an unread
// body's server tools and sources would go unseen, and the API could
// sample the model within it more often than any bound reserved for it.
// Any other body is read whole before it is forwarded, then forwarded
// unchanged.
func (c *metered) estimate(r *http.Request, box string) (estimated, error) {
	limit, ok := c.cap.MeterBody(r)
	if !ok {
		return estimated{}, nil
	}
	unread := c.cap.Estimate(r, nil)
	if unread.Calls > 0 {
		if !c.m.budgeted(r.Context(), box) {
			if r.ContentLength > limit {
				return c.m.estimated(unread, r.ContentLength, nil), nil
			}
			return estimated{ok: true, later: true, limit: limit}, nil
		}
		limit = max(limit, c.m.cfg.MaxBody)
	}
	if n := r.ContentLength; n > limit {
		return c.m.estimated(unread, n, nil), nil
	}
	body, whole, rest, err := peek(r, limit)
	if err != nil {
		return estimated{}, err
	}
	if !whole { // no Content-Length, and over the limit
		return c.m.estimated(unread, c.m.cfg.MaxBody, rest), nil
	}
	return c.m.estimated(c.cap.Estimate(r, body), int64(len(body)), rest), nil
}

// estimated is the request estimated as e, from a body of n bytes, and
// forwarded with body in place of its own (nil: its own).
func (m *Meter) estimated(e capability.Estimate, n int64, body io.ReadCloser) estimated {
	if e.Calls <= 0 {
		return estimated{body: body}
	}
	return estimated{Estimate: EstimateOf(e, n, m.cfg.MaxTokens), ok: true, body: body}
}

// peek reads up to limit bytes of r's body, and returns what to read in
// its place: those bytes in front of the rest. whole is true when that
// was the whole body, which it returns.
func peek(r *http.Request, limit int64) (body []byte, whole bool, rest io.ReadCloser, err error) {
	orig := r.Body
	buf, err := io.ReadAll(io.LimitReader(orig, limit+1))
	if err != nil {
		return nil, false, nil, &capability.Error{Status: http.StatusBadRequest, Type: protocol.TypeInvalid,
			Message: "The request body could not be read.", Err: err}
	}
	if int64(len(buf)) <= limit {
		return buf, true, readCloser{bytes.NewReader(buf), orig}, nil
	}
	return nil, false, readCloser{io.MultiReader(bytes.NewReader(buf), orig), orig}, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// bodyScan is the body of a request its capability meters unread (a
// Messages call), of a box without a budget. Nothing is reserved for such
// a call, so its body is not read before it is forwarded: it is forwarded
// as it comes, and bodyScan keeps the bytes as the proxy reads them (up to
// the capability's limit, as many as would have been read before), for
// the call's settlement to be estimated as it would have been from the
// body read whole before. It holds no byte back: the capability reads the
// kept bytes once the proxy has taken the whole body and closed it (or
// when the call settles, if that is first), and they are let go then.
type bodyScan struct {
	body   io.ReadCloser
	r      *http.Request // the request, for Estimate
	cap    capability.Metered
	length int64 // the Content-Length, or -1
	limit  int64 // the most of the body cap reads
	bufs   *bufPool

	// mu guards what follows: the proxy may read the body on a goroutine
	// of its own, and may still be at it when the call settles.
	mu   sync.Mutex
	buf  *[]byte // the bytes read; nil once over limit, or read by cap
	n    int64   // bytes read
	eof  bool
	read bool                // est is cap's estimate of the whole body
	est  capability.Estimate // see read
	done bool                // settled: later reads are not looked at
}

// wrap puts b in front of r's body, which c reads up to limit bytes.
func (b *bodyScan) wrap(r *http.Request, c capability.Metered, limit int64, bufs *bufPool) {
	b.r, b.cap, b.length, b.limit, b.bufs = r, c, r.ContentLength, limit, bufs
	if r.Body == nil || r.Body == http.NoBody {
		b.eof = true // an empty body, read whole
		return
	}
	b.body = r.Body
	size := 0
	if b.length > 0 && b.length <= limit {
		size = int(b.length)
	}
	b.buf = bufs.get(size)
	r.Body = b
}

// Read reads from the body, and keeps what it read before handing it on.
func (b *bodyScan) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	b.mu.Lock()
	if !b.done {
		b.n += int64(n)
		if b.buf != nil && b.n > b.limit {
			b.bufs.put(b.buf) // not read, as before
			b.buf = nil
		}
		if b.buf != nil {
			*b.buf = append(*b.buf, p[:n]...)
		}
		if err == io.EOF {
			b.eof = true
		}
	}
	b.mu.Unlock()
	return n, err
}

// Close closes the body, has the capability read it when it was read
// whole, and lets the kept bytes go: no more can come.
func (b *bodyScan) Close() error {
	err := b.body.Close()
	b.mu.Lock()
	b.readLocked()
	b.bufs.put(b.buf)
	b.buf = nil
	b.mu.Unlock()
	return err
}

// wholeLocked reports whether the body was read to its end.
func (b *bodyScan) wholeLocked() bool { return b.eof || b.length >= 0 && b.n >= b.length }

// readLocked has the capability read the kept body, when it is whole and
// not over the limit, and lets it go.
func (b *bodyScan) readLocked() {
	if b.done || b.read || b.buf == nil || !b.wholeLocked() {
		return
	}
	b.est, b.read = b.cap.Estimate(b.r, *b.buf), true
	b.bufs.put(b.buf)
	b.buf = nil
}

// estimate estimates the call from what was read of its body, as it
// would have been estimated from the body read whole before forwarding
// it: from the capability's reading and the body's length when it was
// read to its end and is not over the limit; from its Content-Length and
// maxTokens when it was not read whole; from maxBody and maxTokens when
// its length is unknown too, or over the limit. It ends the scan.
func (b *bodyScan) estimate(maxTokens, maxBody int64) Estimate {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.readLocked()
	var est Estimate
	switch {
	case b.read:
		est = EstimateOf(b.est, b.n, maxTokens)
	case b.wholeLocked() && b.n <= b.limit:
		est = EstimateOf(b.cap.Estimate(b.r, nil), b.n, maxTokens) // an empty body
	case b.length >= 0:
		est = EstimateOf(b.cap.Estimate(b.r, nil), b.length, maxTokens)
	default:
		est = EstimateOf(b.cap.Estimate(b.r, nil), maxBody, maxTokens)
	}
	b.releaseLocked()
	return est
}

// release ends the scan, if estimate has not.
func (b *bodyScan) release() {
	b.mu.Lock()
	b.releaseLocked()
	b.mu.Unlock()
}

func (b *bodyScan) releaseLocked() {
	b.done = true
	b.bufs.put(b.buf)
	b.buf = nil
}

// Serve reserves the request's bound against its budgets, serves it with
// its upstream answers metered, and settles. It stays small, the work
// being in prepare: its frame is on the stack for as long as the answer
// streams, and a goroutine's stack is as large as its deepest moment.
func (c *metered) Serve(w http.ResponseWriter, r *http.Request, call *capability.Call) error {
	mc, err := c.prepare(w, r, call)
	if err != nil {
		return err
	}
	if mc.tk != nil {
		// Deferred, so that a call the proxy aborts (the box went away
		// mid-stream) is settled too.
		defer c.m.settleCall(r, mc)
	}
	return c.Capability.Serve(w, mc.r, mc.call)
}

// meteredCall is a request ready to serve: the request and call to serve
// it with, and, when it is metered, what it settles. A metered call's
// parts are allocated with it, at once.
type meteredCall struct {
	r    *http.Request
	call *capability.Call
	s    settlement
	tk   *ticket // nil: not metered

	once   capability.Call // call, its payer decided once
	paid   capability.Paid
	perr   error
	ticket ticket
	body   bodyScan
}

// payer is the payer decided for the call, for the capability, which
// asks again.
func (mc *meteredCall) payer(context.Context, *http.Request) (capability.Paid, error) {
	return mc.paid, mc.perr
}

// prepare estimates the request, decides its payer and reserves its bound,
// or returns the refusal.
func (c *metered) prepare(w http.ResponseWriter, r *http.Request, call *capability.Call) (*meteredCall, error) {
	if call.Payer == nil {
		return &meteredCall{r: r, call: call}, nil
	}
	// The estimate may read the body; what is forwarded in its place
	// goes on a copy of r, so the server's own request keeps its own
	// body, read to its end, with nothing for the server to drain before
	// it answers (draining it deepens the stack every open stream then
	// holds).
	e, err := c.estimate(r, call.Box.Name)
	if err != nil {
		return nil, err
	}
	if e.body != nil {
		r = r.WithContext(r.Context())
		r.Body = e.body
	}
	if !e.ok {
		return &meteredCall{r: r, call: call}, nil
	}
	// The payer is decided once: here, for the budget, and for the
	// capability, which asks again.
	mc := &meteredCall{r: r}
	mc.paid, mc.perr = call.Payer(r.Context(), r)
	mc.once = *call
	mc.once.Payer = mc.payer
	mc.call = &mc.once
	if mc.perr != nil {
		return mc, nil // refused as the capability refuses it
	}
	paid := mc.paid
	principal := ""
	if paid.Payer.Principal != nil {
		principal = *paid.Payer.Principal
	}
	now := c.m.cfg.Now().UTC()
	s := settlement{box: call.Box.Name, payer: paid.Payer.Kind, principal: principal, month: c.m.month(now), est: e.Estimate}
	if !e.later {
		s.bound = c.m.Bound(s.est)
	}
	if !e.later && s.bound > 0 && c.m.budgeted(r.Context(), s.box) {
		if e.Unboundable != "" {
			if err := c.m.refuseUnboundable(r.Context(), s, e.Unboundable); err != nil {
				w.Header().Set(protocol.HeaderPayer, protocol.FormatPayerHeader(paid.Payer))
				return nil, err
			}
		}
		s.id, err = c.m.cfg.Store.Reserve(r.Context(), store.Reservation{Box: s.box, Principal: principal, Month: s.month, Amount: s.bound, At: now})
		var obe *store.OverBudgetError
		if errors.As(err, &obe) {
			w.Header().Set(protocol.HeaderPayer, protocol.FormatPayerHeader(paid.Payer))
			return nil, OverBudget(obe, s.bound)
		}
		if err != nil {
			return nil, &capability.Error{Status: http.StatusServiceUnavailable, Type: protocol.TypeAPI,
				Message: "The broker cannot read this box's budget just now; try again shortly.", Err: err}
		}
		if s.id != 0 {
			c.m.liveMu.Lock()
			c.m.live[s.id] = struct{}{}
			c.m.liveMu.Unlock()
		}
	}
	mc.tk = &mc.ticket
	mc.r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, mc.tk))
	if e.later {
		mc.body.wrap(mc.r, c.cap, e.limit, &c.m.bufs)
		s.body = &mc.body
	}
	mc.s = s
	return mc, nil
}

// month is Month(t), for t in UTC, remembered from one call to the next.
func (m *Meter) month(t time.Time) string {
	y, mo, _ := t.Date()
	if c := m.lastMonth.Load(); c != nil && c.year == y && c.month == mo {
		return c.name
	}
	name := Month(t)
	m.lastMonth.Store(&monthName{y, mo, name})
	return name
}

// monthName is a month's name, as Month writes it.
type monthName struct {
	year  int
	month time.Month
	name  string
}

// budgeted reports whether box may have a budget: false only when
// Config.Budgeted says for certain that it has none.
func (m *Meter) budgeted(ctx context.Context, box string) bool {
	if m.cfg.Budgeted == nil {
		return true
	}
	b, err := m.cfg.Budgeted(ctx, box)
	return b || err != nil
}

// settleCall settles mc once r is served.
func (m *Meter) settleCall(r *http.Request, mc *meteredCall) {
	m.settle(context.WithoutCancel(r.Context()), mc.s, mc.tk)
}

// settlement is what a metered request settles.
type settlement struct {
	box, payer, principal, month string
	id                           int64
	est                          Estimate
	bound                        int64
	// body, when not nil, makes est and bound as the call settles: it
	// reserved nothing, and its body was read only as it was forwarded.
	body *bodyScan
}

// estimateLate makes s's estimate and bound from its body, when the body
// is to make them (s.body is set), and they are needed.
func (m *Meter) estimateLate(s *settlement) {
	if s.body != nil {
		s.est = s.body.estimate(m.cfg.MaxTokens, m.cfg.MaxBody)
		s.bound = m.Bound(s.est)
		s.body = nil
	}
}

// maxModel bounds the model ID kept, as the upstream names it.
const maxModel = 200

// settle releases s's reservation and charges what tk read: the measured
// cost when every answer was read whole and priced, or else the larger of
// that and the request's bound, since an answer cut off or unpriced may
// have cost up to it.
func (m *Meter) settle(ctx context.Context, s settlement, tk *ticket) {
	if s.body != nil {
		defer s.body.release()
	}
	if s.id != 0 {
		defer func() {
			m.liveMu.Lock()
			delete(m.live, s.id)
			m.liveMu.Unlock()
		}()
	}
	tk.mu.Lock()
	readings := make([]reading, len(tk.readings))
	for i, r := range tk.readings {
		readings[i] = *r
	}
	tk.mu.Unlock()
	var rows []store.Usage
	var cost int64
	exact := true
	for _, rd := range readings {
		model := rd.model
		if model == "" {
			m.estimateLate(&s)
			model = s.est.Model
		}
		if len(model) > maxModel {
			model = model[:maxModel]
		}
		var u *store.Usage
		for i := range rows {
			if rows[i].Model == model {
				u = &rows[i]
			}
		}
		if u == nil {
			rows = append(rows, store.Usage{Box: s.box, Month: s.month, PayerKind: s.payer, Principal: s.principal, Model: model})
			u = &rows[len(rows)-1]
		}
		u.Calls++
		u.InputTokens += rd.tokens.Input
		u.OutputTokens += rd.tokens.Output
		u.CacheWriteTokens += rd.tokens.CacheWrite
		u.CacheReadTokens += rd.tokens.CacheRead
		price, priced := m.cfg.Prices.Lookup(model)
		measured := rd.measured && !rd.open
		if !priced {
			u.Unpriced++
		}
		if !measured {
			u.Unmeasured++
		}
		if priced && measured {
			c := price.Cost(rd.tokens)
			u.Cost += c
			cost += c
		} else {
			exact = false
		}
	}
	// The request's log line and audit row show the measured cost,
	// priced here once.
	proxy.TraceFrom(ctx).AddCost(cost)
	charge := cost
	if !exact {
		m.estimateLate(&s)
		charge = max(cost, s.bound)
	}
	if s.id == 0 && len(rows) == 0 {
		return // nothing held, nothing spent
	}
	if s.id == 0 && m.queue(s, charge, rows) {
		return // settled with others, by RunBatches
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := m.record(ctx, store.Settlement{Reservation: s.id, Box: s.box, Principal: s.principal, Month: s.month, Charge: charge, Usage: rows}, nil)
	if err != nil {
		m.log.Error("spend: settlement not recorded", "box", s.box, "month", s.month, "charge_micros", charge, "err", err)
		return
	}
	if !m.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	m.estimateLate(&s)
	m.log.Debug("spend: settled", "box", s.box, "payer", s.payer, "principal", s.principal, "month", s.month,
		"calls", len(readings), "charge_micros", charge, "bound_micros", s.bound, "exact", exact)
}

// queue adds a call that reserved nothing to the next batch, merging its
// charge and usage with those of the same box, principal and month. It
// returns false, queueing nothing, when RunBatches is not running.
func (m *Meter) queue(s settlement, charge int64, rows []store.Usage) bool {
	if !m.batching.Load() {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.batching.Load() { // RunBatches stopped meanwhile
		return false
	}
	var seq uint64
	if m.cfg.Journal != nil {
		// Journaled before it is queued, so that a batch names only
		// records the journal holds. A journal that cannot write says
		// so in its Err (the broker then cannot record).
		var err error
		seq, err = m.cfg.Journal.Settle(store.Settlement{Box: s.box, Principal: s.principal, Month: s.month, Charge: charge, Usage: rows})
		if err != nil {
			m.log.Error("spend: settlement not journaled", "box", s.box, "err", err)
		}
	}
	k := batchKey{s.box, s.principal, s.month}
	if seq != 0 {
		m.seqs[k] = append(m.seqs[k], seq)
	}
	p := m.pending[k]
	if p == nil {
		p = &store.Settlement{Box: s.box, Principal: s.principal, Month: s.month}
		m.pending[k] = p
	}
	p.Charge += charge
	for _, u := range rows {
		i := 0
		for i < len(p.Usage) && (p.Usage[i].PayerKind != u.PayerKind || p.Usage[i].Model != u.Model) {
			i++
		}
		if i == len(p.Usage) {
			p.Usage = append(p.Usage, u)
			continue
		}
		q := &p.Usage[i]
		q.Calls += u.Calls
		q.Unpriced += u.Unpriced
		q.Unmeasured += u.Unmeasured
		q.InputTokens += u.InputTokens
		q.OutputTokens += u.OutputTokens
		q.CacheWriteTokens += u.CacheWriteTokens
		q.CacheReadTokens += u.CacheReadTokens
		q.Cost += u.Cost
	}
	return true
}

// RunBatches settles the queued calls every Config.BatchEvery until ctx
// ends, then settles what is left and returns; calls that end after that
// settle one by one. With BatchEvery zero it returns at once.
func (m *Meter) RunBatches(ctx context.Context) {
	if m.cfg.BatchEvery <= 0 {
		return
	}
	m.mu.Lock()
	m.batching.Store(true)
	m.mu.Unlock()
	t := time.NewTicker(m.cfg.BatchEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			m.mu.Lock()
			m.batching.Store(false)
			m.mu.Unlock()
			m.Flush(context.WithoutCancel(ctx))
			return
		case <-t.C:
			m.Flush(ctx)
		}
	}
}

// Flush settles every queued call now: one store transaction per box,
// principal and month. A settlement the store refuses is logged, as one
// call's is.
func (m *Meter) Flush(ctx context.Context) {
	m.mu.Lock()
	var batch map[batchKey]*store.Settlement
	var seqs map[batchKey][]uint64
	if len(m.pending) > 0 {
		// Taken whole: an empty map stays queue's, and is not read here
		// while queue writes it.
		batch, m.pending = m.pending, map[batchKey]*store.Settlement{}
		seqs, m.seqs = m.seqs, map[batchKey][]uint64{}
	}
	m.mu.Unlock()
	for k, st := range batch {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := m.record(sctx, *st, seqs[k])
		cancel()
		if err != nil {
			m.log.Error("spend: settlement not recorded", "box", st.Box, "month", st.Month, "charge_micros", st.Charge, "err", err)
		}
	}
}

// record writes st: under a key of its own when the store takes keyed
// batches, and to the spool under that key when the store does not take
// it (nor refuses it for a box removed meanwhile). When seqs (the
// journal's numbers of the calls st settles) are given, the batch is
// begun in the journal first, and done once the store or the spool took
// it.
func (m *Meter) record(ctx context.Context, st store.Settlement, seqs []uint64) error {
	keyed, ok := m.cfg.Settle.(store.Spooled)
	if !ok {
		return m.cfg.Settle.Settle(ctx, st)
	}
	key := spool.NewKey()
	if len(seqs) > 0 && m.cfg.Journal != nil {
		if err := m.cfg.Journal.Begin(key, seqs); err != nil {
			m.log.Error("spend: batch not journaled", "box", st.Box, "err", err)
		}
	}
	err := m.applyKeyed(ctx, keyed, key, st)
	if err == nil && len(seqs) > 0 && m.cfg.Journal != nil {
		m.cfg.Journal.Done(key)
	}
	return err
}

// applyKeyed writes st under key, or spools it under key when the store
// does not take it.
func (m *Meter) applyKeyed(ctx context.Context, keyed store.Spooled, key string, st store.Settlement) error {
	_, err := keyed.ApplySpooled(ctx, key, []store.Settlement{st}, nil)
	if err == nil || m.cfg.Spill == nil || errors.Is(err, store.ErrNotFound) {
		return err
	}
	if serr := m.cfg.Spill(key, st); serr != nil {
		return errors.Join(err, serr)
	}
	m.log.Warn("spend: settlement spooled; the store did not take it", "box", st.Box, "month", st.Month, "charge_micros", st.Charge, "err", err)
	return nil
}

// refuseUnboundable returns the refusal of s's call, whose cost nothing
// bounds (why), when a budget applies to it: the box's, or its
// principal's. It returns a 503 when the budgets cannot be read, and nil
// when no budget applies.
func (m *Meter) refuseUnboundable(ctx context.Context, s settlement, why string) *capability.Error {
	bs, err := m.cfg.Store.ListBudgets(ctx, s.box)
	if err != nil {
		return &capability.Error{Status: http.StatusServiceUnavailable, Type: protocol.TypeAPI,
			Message: "The broker cannot read this box's budget just now; try again shortly.", Err: err}
	}
	for _, b := range bs {
		if b.Principal == "" || b.Principal == s.principal {
			return Unboundable(b, why)
		}
	}
	return nil
}

// Unboundable is the refusal of a call whose cost nothing in the request
// bounds (why says what) by a payer held to budget b.
func Unboundable(b store.Budget, why string) *capability.Error {
	who, remove := "this box's monthly budget", fmt.Sprintf("`boxbroker budget remove %s`", b.Box)
	if b.Principal != "" {
		who = "the monthly budget for " + b.Principal + " on this box"
		remove = fmt.Sprintf("`boxbroker budget remove %s --principal %s`", b.Box, b.Principal)
	}
	return &capability.Error{Status: http.StatusForbidden, Type: protocol.TypePermission,
		Message: fmt.Sprintf("This call is refused because it could cost more than any bound the broker can set, and it would be paid within %s of %s: %s. "+
			"The owner can allow such calls only by removing that budget, with %s.", who, FormatUSD(b.Limit), why, remove)}
}

// OverBudget is the refusal of a call whose bound would pass e's budget.
func OverBudget(e *store.OverBudgetError, bound int64) *capability.Error {
	who, raise := "This box's monthly budget", fmt.Sprintf("`boxbroker budget set %s AMOUNT`", e.Budget.Box)
	if e.Budget.Principal != "" {
		who = "The monthly budget for " + e.Budget.Principal + " on this box"
		raise = fmt.Sprintf("`boxbroker budget set %s AMOUNT --principal %s`", e.Budget.Box, e.Budget.Principal)
	}
	resets := "the first of next month"
	if t := Resets(e.Month); !t.IsZero() {
		resets = t.Format("2006-01-02") + " at 00:00 UTC"
	}
	return &capability.Error{Status: http.StatusForbidden, Type: protocol.TypePermission,
		Message: fmt.Sprintf("%s of %s for %s is spent: %s charged and %s held for calls in flight, and this call could cost up to %s. "+
			"It resets on %s; the owner can raise it with %s.",
			who, FormatUSD(e.Budget.Limit), e.Month, FormatUSD(e.Spent), FormatUSD(e.Reserved), FormatUSD(bound), resets, raise)}
}

// renew renews the leases of this process's calls in flight, when the
// store keeps reservations as leases.
func (m *Meter) renew(ctx context.Context) {
	ls, ok := m.cfg.Settle.(store.Leases)
	if !ok {
		return
	}
	m.liveMu.Lock()
	ids := make([]int64, 0, len(m.live))
	for id := range m.live {
		ids = append(ids, id)
	}
	m.liveMu.Unlock()
	if len(ids) == 0 {
		return
	}
	if err := ls.RenewReservations(ctx, ids, m.cfg.Now()); err != nil && ctx.Err() == nil {
		m.log.Warn("spend: reservations of calls in flight not renewed; they are released if no renewal succeeds within their lease",
			"count", len(ids), "lease", m.cfg.StaleAfter.String(), "err", err)
	}
}

// Run renews the reservations of this process's calls in flight, and
// releases stale reservations — those no process renewed within their
// lease, as a process that ended mid-call leaves them — now and every
// sixth of the lease, until ctx ends.
func (m *Meter) Run(ctx context.Context) {
	every := min(m.cfg.StaleAfter/6, 10*time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		m.renew(ctx)
		n, err := m.cfg.Settle.ReleaseStale(ctx, m.cfg.Now().Add(-m.cfg.StaleAfter))
		switch {
		case err != nil && ctx.Err() == nil:
			m.log.Warn("spend: stale reservations not released", "err", err)
		case n > 0:
			m.log.Warn("spend: released stale reservations", "count", n, "older_than", m.cfg.StaleAfter.String())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
