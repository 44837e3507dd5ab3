// Package broker is the box-facing HTTP handler. For every request it
// finds the capability whose prefix owns the path, asks it which scope
// words the request needs, authenticates the box's token, applies the
// protocol's rule against the box's last declaration report, and only then
// hands the request to the capability. It also answers
// POST /api/box/declaration. The rule lives here, around every capability,
// never inside one.
package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/cache"
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// Config configures a Server.
type Config struct {
	// Broker is the broker word the server answers for, such as "lobby".
	Broker string
	// Store keeps boxes and reports; Cache reads through it.
	Store store.Store
	Cache *cache.Cache
	// Payer decides who pays for model calls.
	Payer *payer.Resolver
	// Capabilities is the table of capabilities served, in match order.
	Capabilities []capability.Capability
	// Logger receives one line per request; never a token or credential.
	Logger *slog.Logger
	// Observer, when set, is told of every request, for metrics and the
	// audit log.
	Observer Observer
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Limits bound each box's request rate and requests in flight.
	Limits Limits
	// ReadTimeout bounds reading a forwarded request's body, from when
	// the broker has chosen its capability to the body's end (0: no
	// bound). The bound is lifted as the body ends, so that it never
	// cuts off the answer's stream.
	ReadTimeout time.Duration
	// TallyEvery is the window over which refusals of requests carrying
	// no box's token are kept in aggregate, by source (default
	// DefaultTallyEvery); Run writes each window out.
	TallyEvery time.Duration
	// Recording, when set, is asked before a box's call is served: while
	// it returns an error (the call's audit record could be written
	// neither to the store nor to the spool) the call is refused with a
	// 503 saying so, as Vault refuses requests no audit device can log.
	Recording func() error
}

// Server is the box-facing handler.
type Server struct {
	cfg    Config
	log    *slog.Logger
	limits *limiter
	// routes is every capability's prefixes, in match order, read once
	// so that routing a request allocates nothing.
	routes []route
	// tally keeps refusals of requests carrying no box's token, by
	// source, until Run writes them out.
	tally tally
}

// route is one prefix, the capability that owns it, and the route label
// its requests are logged and counted under.
type route struct {
	prefix string
	label  string
	c      capability.Capability
}

// New returns a Server, or an error naming every problem with cfg.
func New(cfg Config) (*Server, error) {
	var problems []string
	if cfg.Broker == "" {
		problems = append(problems, "no broker word")
	}
	if cfg.Store == nil || cfg.Cache == nil {
		problems = append(problems, "no store")
	}
	if cfg.Payer == nil {
		problems = append(problems, "no payer resolver")
	}
	seen := map[string]string{}
	for _, c := range cfg.Capabilities {
		if !protocol.IsCapabilityName(c.Name()) {
			problems = append(problems, fmt.Sprintf("capability name %q is not a capability name", c.Name()))
		}
		for _, p := range c.Prefixes() {
			if !strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") {
				problems = append(problems, fmt.Sprintf("capability %s: prefix %q must begin and not end with /", c.Name(), p))
			}
			if capability.Owns(p, protocol.RouteDeclaration) {
				problems = append(problems, fmt.Sprintf("capability %s: prefix %q covers the declaration route", c.Name(), p))
			}
			if other, dup := seen[p]; dup {
				problems = append(problems, fmt.Sprintf("prefix %q is served by both %s and %s", p, other, c.Name()))
			}
			seen[p] = c.Name()
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("broker config: %s", strings.Join(problems, "; "))
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	var routes []route
	for _, c := range cfg.Capabilities {
		for _, p := range c.Prefixes() {
			routes = append(routes, route{prefix: p, label: p + "/*", c: c})
		}
	}
	return &Server{cfg: cfg, log: cfg.Logger, limits: newLimiter(cfg.Limits, cfg.Now), routes: routes}, nil
}

// route finds the capability owning path, or nil.
func (s *Server) route(path string) *route {
	for i := range s.routes {
		if capability.Owns(s.routes[i].prefix, path) {
			return &s.routes[i]
		}
	}
	return nil
}

// boundRoute keeps a capability's route template to a sane length.
func boundRoute(route string) string {
	if len(route) > 120 {
		return route[:120]
	}
	return route
}

// Classify finds the capability whose prefix owns r's path (nil for none)
// and what r needs of it, the words a BodyScoper reads from the body
// included; ok is false for a path no capability serves. It authenticates
// nothing: ServeHTTP reads a body only once the token is a box's.
func (s *Server) Classify(r *http.Request) (c capability.Capability, need capability.Need, ok bool, err error) {
	rt, need, ok, err := s.classify(r)
	if rt == nil {
		return nil, need, ok, err
	}
	if bs, isBody := rt.c.(capability.BodyScoper); isBody && ok && err == nil && !need.Public {
		need.Words, err = bs.BodyScopes(r)
	}
	return rt.c, need, ok, err
}

func (s *Server) classify(r *http.Request) (rt *route, need capability.Need, ok bool, err error) {
	rt = s.route(r.URL.Path)
	if rt == nil {
		return nil, need, false, nil
	}
	need, ok, err = rt.c.Scopes(r)
	return rt, need, ok, err
}

// ServeHTTP serves the box-facing routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := s.cfg.Now()
	// What one request keeps, in one allocation.
	st := &requestState{rec: recorder{ResponseWriter: w, status: http.StatusOK}}
	info, rec, trace := &st.info, &st.rec, &st.trace
	rec.onStream = func() {
		info.stream = true
		if s.cfg.Observer != nil {
			s.cfg.Observer.StreamOpened(info.capabilityLabel())
		}
	}
	r = r.WithContext(proxy.WithTrace(r.Context(), trace))
	// A request's trailer fields are dropped on every route: they come
	// after the body, where no scan of the head reads them, and no
	// capability takes any. (net/http fills in the map the request it
	// holds names, which this copy no longer does.)
	r.Trailer = nil
	defer s.finish(rec, r, info, trace, start)
	if err := s.serve(rec, r, info); err != nil {
		s.writeError(rec, r, err, info)
	}
	// The answer is complete. Its metrics and audit record are queued
	// (and journaled), then an answer of known length goes out in full —
	// its last byte, held back until now, with it: the box does not
	// wait for the request's log line, and does not have its whole
	// answer before the call's records are kept.
	s.conclude(rec, r, info, trace, start, false)
	if rec.holding {
		rec.holding = false
		_, _ = w.Write([]byte{rec.last})
	}
	if rec.wrote && rec.Header().Get("Content-Length") != "" {
		_ = http.NewResponseController(w).Flush()
	}
}

// requestState is what ServeHTTP keeps of one request.
type requestState struct {
	info  requestInfo
	rec   recorder
	trace proxy.Trace
}

// finish tells the Observer (metrics, the audit record) and logs the
// request's line, once its answer is over, even when the answer was
// aborted (the forwarder aborts a stream whose upstream fails by
// panicking with http.ErrAbortHandler, which is passed on once this is
// done). A request ServeHTTP concluded already is only logged.
func (s *Server) finish(rec *recorder, r *http.Request, info *requestInfo, trace *proxy.Trace, start time.Time) {
	aborted := recover()
	if !info.concluded {
		s.conclude(rec, r, info, trace, start, aborted != nil)
	}
	if ctx := r.Context(); !info.tallied && s.log.Enabled(ctx, slog.LevelInfo) {
		calls := info.calls
		// The attributes are built in place: no []any per request.
		var a [13]slog.Attr
		a[0] = slog.String("method", recordedMethod(r.Method))
		a[1] = slog.String("path", proxy.ScrubKept(r.URL.Path))
		a[2] = slog.String("route", info.route)
		a[3] = slog.Int("status", rec.status)
		a[4] = slog.Int64("bytes", rec.bytes)
		a[5] = slog.Float64("duration_ms", float64(info.duration.Microseconds())/1000)
		n := 6
		if info.box != "" {
			a[n] = slog.String("box", info.box)
			n++
		}
		if info.capability != "" {
			a[n] = slog.String("capability", info.capability)
			a[n+1] = slog.Any("words", info.words)
			n += 2
		}
		if len(calls) > 0 {
			last := calls[len(calls)-1]
			a[n] = slog.Int("upstream_status", last.Status)
			a[n+1] = slog.Float64("upstream_ms", float64(last.Latency.Microseconds())/1000)
			n += 2
		}
		if info.cost != 0 {
			a[n] = slog.Int64("cost_micros", info.cost)
			n++
		}
		if info.reason != "" {
			a[n] = slog.String("refusal", info.reason)
			n++
		}
		// The record is handed to the handler directly: slog.Logger
		// would take the caller's PC (runtime.Callers) for a source the
		// line does not show.
		line := slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)
		line.AddAttrs(a[:n]...)
		_ = s.log.Handler().Handle(ctx, line)
	}
	if aborted != nil {
		panic(aborted)
	}
}

// conclude settles what the request's record says (its duration,
// upstream calls, refusal reason, route) and tells the Observer: metrics
// and the audit record, which are so queued before the box has its
// answer.
func (s *Server) conclude(rec *recorder, r *http.Request, info *requestInfo, trace *proxy.Trace, start time.Time, aborted bool) {
	info.concluded = true
	info.duration = s.cfg.Now().Sub(start)
	calls := trace.Calls()
	info.calls = calls
	info.cost = trace.Cost()
	if info.reason == "" && aborted {
		info.reason = "aborted"
	}
	if info.reason == "" && rec.status >= 500 && len(calls) > 0 && calls[len(calls)-1].Status == 0 {
		info.reason = "upstream failed"
	}
	if info.route == "" {
		info.route = routeUnmatched
	}
	if info.reason == "token" && info.box == "" && (rec.status == http.StatusUnauthorized || rec.status == http.StatusForbidden) {
		// No box's token: after the first from its source, the
		// refusal is kept in aggregate (see Tally), counted exactly.
		info.tallied = s.tally.add(sourceOf(r), start, recordedMethod(r.Method), info.route, info.capabilityLabel(), rec.status)
	}
	if s.cfg.Observer == nil {
		return
	}
	if info.stream {
		s.cfg.Observer.StreamClosed(info.capabilityLabel())
	}
	s.observe(&Record{
		At: start, Method: r.Method, Route: info.route, Box: info.box,
		Capability: info.capabilityLabel(), Words: info.words, Public: info.public,
		Status: rec.status, Reason: info.reason, Message: info.message,
		Duration: info.duration, Bytes: rec.bytes, Cost: info.cost, Upstream: calls, Tallied: info.tallied,
	})
}

// routeUnmatched labels a path no capability's prefix owns.
const routeUnmatched = "{unmatched}"

// requestInfo is what one request's log line says.
type requestInfo struct {
	box        string
	capability string
	route      string
	words      []string
	public     bool
	reason     string
	message    string
	stream     bool
	// Set by conclude.
	concluded bool
	tallied   bool
	duration  time.Duration
	calls     []proxy.Call
	cost      int64 // micro-dollars, noted on the trace by the spend meter
}

// capabilityLabel is the capability's name, or "none" for the
// declaration route and paths no capability serves.
func (i *requestInfo) capabilityLabel() string {
	if i.capability == "" {
		return "none"
	}
	return i.capability
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, info *requestInfo) error {
	if r.URL.Path == protocol.RouteDeclaration {
		info.route = protocol.RouteDeclaration
		err := s.declaration(w, r, info)
		if s.cfg.Observer != nil {
			s.cfg.Observer.DeclarationReport(err == nil)
		}
		return err
	}
	// What stays on the stack while an answer streams is kept small: a
	// goroutine's stack is as large as its deepest moment, and an open
	// stream holds it. So the rule is applied in admit, which has
	// returned by then.
	c, call, release, err := s.admit(w, r, info)
	if err != nil {
		if info.box == "" {
			// Refused before any box was known: not a byte of the body
			// has been read, and none will be.
			leaveBody(w, r)
		}
		return err
	}
	defer release()
	return c.Serve(w, r, call)
}

func noRelease() {}

// admit finds the capability that serves r and applies the rule and the
// box's limits: it returns the capability, what it may know of the call
// and the release of the box's limit, or the refusal.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, info *requestInfo) (capability.Capability, *capability.Call, func(), error) {
	// Nothing of the body is read until the token, read from the head,
	// is a box's: Scopes reads only the head.
	rt := s.route(r.URL.Path)
	if rt == nil {
		info.reason = "no route"
		return nil, nil, nil, capability.NotFound(r)
	}
	c := rt.c
	info.capability = c.Name()
	info.route = rt.label
	if proxiedToken(r) != "" {
		info.route = ProxiedRoutePrefix + rt.label
	}
	// The method is judged first: one no route serves goes no further,
	// upstream or into a record.
	if err := allowMethod(r, c); err != nil {
		info.reason = "method"
		if errors.Is(err, errNoRoute) {
			info.reason = "no route"
			return nil, nil, nil, capability.NotFound(r)
		}
		return nil, nil, nil, err
	}
	need, ok, err := c.Scopes(r)
	if err != nil {
		return nil, nil, nil, err
	}
	if !ok {
		info.reason = "no route"
		return nil, nil, nil, capability.NotFound(r)
	}
	if rt, isRouter := c.(capability.Router); isRouter {
		if route := rt.Route(r); route != "" {
			info.route = boundRoute(route)
		}
	}
	// A body in a content coding is judged from the head, before the
	// box is known; it is decoded only once the rule allows the request.
	coding, limit, err := bodyCoding(r, c)
	if err != nil {
		info.reason = "encoding"
		return nil, nil, nil, err
	}
	info.words = need.Words
	info.public = need.Public
	rc := http.NewResponseController(w)
	if need.Public {
		if coding != "" {
			// No public route takes an encoded body: none reads a body.
			info.reason = "encoding"
			return nil, nil, nil, unreadableBody(nil)
		}
		s.boundBody(rc, r)
		return c, &capability.Call{}, noRelease, nil
	}
	tok, box, err := s.authenticate(r, c)
	if err != nil {
		info.reason = "token"
		return nil, nil, nil, err
	}
	info.box = box.Name
	if box.Paused {
		info.reason = "paused"
		return nil, nil, nil, capability.Errorf(http.StatusForbidden, protocol.TypePermission,
			"This box is paused by its owner, so the broker serves it nothing until the owner resumes it (`boxbroker box resume %s`).", box.Name)
	}
	if bs, isBody := c.(capability.BodyScoper); isBody {
		// A body read to choose the words (feedback's) is small: one
		// still arriving after BodyTimeout is a client holding a
		// connection.
		_ = rc.SetReadDeadline(s.cfg.Now().Add(BodyTimeout))
		words, err := bs.BodyScopes(r)
		if err != nil {
			leaveBody(w, r) // over its bound, or stalled: read no more
			return nil, nil, nil, err
		}
		need.Words = words
		info.words = words
	}
	// Forwarded bodies stream afterwards, bounded by ReadTimeout.
	s.boundBody(rc, r)
	d, err := s.cfg.Cache.Declaration(r.Context(), box.Name)
	if err != nil {
		return nil, nil, nil, unavailable(err)
	}
	for _, word := range need.Words {
		if msg := protocol.DeclaredRefusal(d, s.cfg.Broker, c.Name(), word); msg != "" {
			info.reason = "declaration"
			return nil, nil, nil, &capability.Error{Status: http.StatusForbidden, Type: protocol.TypePermission, Message: msg}
		}
	}
	if s.cfg.Recording != nil {
		if err := s.cfg.Recording(); err != nil {
			info.reason = "cannot record"
			return nil, nil, nil, &capability.Error{Status: http.StatusServiceUnavailable, Type: protocol.TypeAPI,
				Message: "The broker cannot record calls just now (neither its store nor its spool takes a write), so it serves none; try again shortly.", Err: err}
		}
	}
	release, err := s.limits.acquire(box.Name)
	if err != nil {
		info.reason = "limit"
		return nil, nil, nil, err
	}
	if coding != "" {
		if err := decodeBody(w, r, limit); err != nil {
			release()
			info.reason = "encoding"
			return nil, nil, nil, err
		}
	}
	return c, &capability.Call{Box: box, Token: tok, Words: need.Words, Payer: s.cfg.Payer.Func(box)}, release, nil
}

// leaveBody makes the refusal of r, whose body the broker has not read to
// its end, leave that body unread: the answer closes the connection, and
// the server stops reading it soon after (leaveGrace). Otherwise net/http
// reads up to 256 KiB of what is left before it sends the answer, waiting
// as long as the connection's read deadline for a client that sends
// nothing more.
// It applies to HTTP/1 only: an HTTP/2 stream's unread body holds up
// nothing, and Connection: close there would end every stream of the
// connection.
func leaveBody(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor != 1 || r.Body == nil || r.Body == http.NoBody {
		return
	}
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(leaveGrace))
}

// leaveGrace is how long, after the refusal has gone out, net/http may go
// on reading a body left unread before it closes the connection. With no
// grace at all it closes at once, with the client's bytes unread, and the
// kernel's reset can destroy the refusal before the client reads it (a
// client still sending a large body saw "connection reset by peer"
// instead of its 413); within the grace net/http reads up to 256 KiB, and
// a client still sending is given its FIN and half a second before the
// close, while one that sends nothing holds the connection no longer.
const leaveGrace = 100 * time.Millisecond

// authenticate finds the box whose token the request carries.
func (s *Server) authenticate(r *http.Request, c capability.Capability) (string, store.Box, error) {
	var tok string
	var err error
	if tf, ok := c.(capability.TokenFinder); ok && proxiedToken(r) == "" {
		tok, err = token.One(tf.FindTokens(r))
	} else if proxiedToken(r) != "" { // the HTTPS proxy's box: a token the request holds must be its own
		tok, err = token.One(findTokens(r, c))
	} else {
		tok, err = token.FromRequest(r)
	}
	if err == nil {
		var box store.Box
		box, err = s.boxByToken(r.Context(), tok)
		if err == nil {
			return tok, box, nil
		}
	}
	if !token.Refused(err) {
		return "", store.Box{}, unavailable(err)
	}
	if nr, ok := c.(capability.NoTokenRefuser); ok && errors.Is(err, token.ErrMissing) {
		return "", store.Box{}, nr.NoTokenRefusal(r)
	}
	// Every other refusal on a capability route is a 403: Claude Code retries a 401.
	return "", store.Box{}, &capability.Error{Status: http.StatusForbidden, Type: protocol.TypePermission, Message: authMessage(err)}
}

func authMessage(err error) string {
	switch {
	case errors.Is(err, token.ErrMissing):
		return "The request carries no box token: send it as Authorization: Bearer <token>, or as x-api-key on the Anthropic routes."
	case errors.Is(err, token.ErrConflict):
		return "The request carries two different tokens; send the box's token once."
	}
	return "The token is no box's token at this broker."
}

// boxByToken returns the box whose token is tok, through the cache,
// comparing the hashes in constant time.
func (s *Server) boxByToken(ctx context.Context, tok string) (store.Box, error) {
	return token.Lookup(ctx, tok, s.cfg.Cache.BoxByTokenHash, boxTokenHash)
}

func boxTokenHash(b store.Box) string { return b.TokenHash }

// unavailableRetryAfter is the Retry-After of every 503, in seconds.
const unavailableRetryAfter = "1"

func unavailable(err error) error {
	return &capability.Error{Status: http.StatusServiceUnavailable, Type: protocol.TypeAPI,
		Message: "The broker cannot read its store just now; try again shortly.", Err: err}
}

// declaration answers POST /api/box/declaration.
func (s *Server) declaration(w http.ResponseWriter, r *http.Request, info *requestInfo) error {
	if r.Method != http.MethodPost {
		leaveBody(w, r)
		w.Header().Set("Allow", http.MethodPost)
		return capability.Errorf(http.StatusMethodNotAllowed, protocol.TypeInvalid, "The declaration route takes POST.")
	}
	tok, err := token.FromRequest(r)
	var box store.Box
	if err == nil {
		box, err = s.boxByToken(r.Context(), tok)
	}
	if err != nil {
		info.reason = "token"
		leaveBody(w, r) // not a byte of it is read for no box
		if token.Refused(err) {
			return &capability.Error{Status: http.StatusUnauthorized, Type: protocol.TypeAuthn, Message: authMessage(err)}
		}
		return unavailable(err)
	}
	info.box = box.Name
	// A report is small: a body still arriving after BodyTimeout is a
	// client holding a connection, not a report.
	_ = http.NewResponseController(w).SetReadDeadline(s.cfg.Now().Add(BodyTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(unwrap(w), r.Body, protocol.DeclarationMaxBytes))
	if err != nil {
		// The rest of a body over the bound, or of one that stalled,
		// is left unread: the refusal goes out at once.
		leaveBody(w, r)
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return capability.Errorf(http.StatusRequestEntityTooLarge, protocol.TypeTooLarge, "The declaration report is over %d bytes.", protocol.DeclarationMaxBytes)
	}
	if err != nil {
		return capability.Errorf(http.StatusBadRequest, protocol.TypeInvalid, "The declaration report could not be read.")
	}
	d, err := protocol.ParseDeclarationReport(body, s.cfg.Broker)
	var re *protocol.ReportError
	if errors.As(err, &re) {
		info.reason = "malformed report"
		typ := protocol.TypeInvalid
		if re.Status == http.StatusRequestEntityTooLarge {
			typ = protocol.TypeTooLarge
		}
		return &capability.Error{Status: re.Status, Type: typ, Message: re.Message}
	}
	if err != nil {
		return err
	}
	scrubDeclaration(d)
	d.At = s.cfg.Now().UTC().Truncate(time.Millisecond)
	doc, err := json.Marshal(d)
	if err != nil {
		return err
	}
	if err := s.cfg.Store.SaveDeclaration(r.Context(), box.Name, doc, d.At); err != nil {
		if errors.Is(err, store.ErrNotFound) { // removed meanwhile
			return &capability.Error{Status: http.StatusUnauthorized, Type: protocol.TypeAuthn, Message: authMessage(token.ErrUnknown)}
		}
		return unavailable(err)
	}
	s.cfg.Cache.Drop(store.ChangeDeclaration, box.Name)
	// The 200 says the report is in force: wait until every replica judges
	// by it, so that the box's next request is judged by it wherever it goes.
	if err := s.cfg.Cache.Settle(r.Context()); err != nil {
		return err
	}
	pay := s.cfg.Payer.ForBox(box)
	writeJSON(w, http.StatusOK, protocol.KeptOf(d, &pay))
	return nil
}

// writeError renders err as a refusal; an internal error's text is logged,
// never shown.
func (s *Server) writeError(w *recorder, r *http.Request, err error, info *requestInfo) {
	var ce *capability.Error
	if !errors.As(err, &ce) {
		ce = &capability.Error{Status: http.StatusBadGateway, Type: protocol.TypeAPI, Message: "The broker could not complete the request.", Err: err}
	}
	if ce.Err != nil {
		s.log.Error("request failed", "method", recordedMethod(r.Method), "path", proxy.ScrubKept(r.URL.Path), "route", info.route, "box", info.box, "err", ce.Err)
	}
	if w.wrote {
		return // the answer has begun; nothing more can be said
	}
	if info.reason == "" {
		info.reason = http.StatusText(ce.Status)
	}
	for k, vs := range ce.Header {
		w.Header()[k] = vs
	}
	var ra *retryAfterError
	if errors.As(err, &ra) {
		w.Header().Set("Retry-After", ra.retryAfter())
	}
	if ce.Status == http.StatusServiceUnavailable && w.Header().Get("Retry-After") == "" {
		// The store or the spool did not answer in time: an outage is
		// seconds long or longer, and a retry a second later finds it
		// over or is answered as fast.
		w.Header().Set("Retry-After", unavailableRetryAfter)
	}
	info.message = ce.Message
	if ce.Status == http.StatusNotFound {
		// A not-found message repeats the path, which may hold anything;
		// what is kept names the route instead.
		info.message = fmt.Sprintf("The broker serves no %s %s.", recordedMethod(r.Method), info.route)
	}
	protocol.WriteRefusal(w, ce.Status, ce.Type, ce.Message)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		protocol.WriteRefusal(w, http.StatusInternalServerError, protocol.TypeAPI, "The broker could not encode its answer.")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// recorder notes the status and size of an answer and passes flushes on.
// onStream is called once when the answer begins as text/event-stream.
type recorder struct {
	http.ResponseWriter
	status   int
	bytes    int64
	wrote    bool
	onStream func()
	// length is the answer's Content-Length, -1 when it has none; the
	// last byte of an answer of known length is held back (last,
	// holding) until ServeHTTP has concluded the request.
	length  int64
	last    byte
	holding bool
}

func (r *recorder) WriteHeader(code int) {
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		r.ResponseWriter.WriteHeader(code) // informational: the answer is still to come
		return
	}
	stream := false
	if !r.wrote {
		r.status = code
		stream = r.begin()
	}
	r.ResponseWriter.WriteHeader(code)
	if stream {
		// A stream's headers go to the box at once, from this shallow
		// frame, not at its first event's flush deep in the forwarder's
		// copy loop: the deepest moment of a goroutine sets the stack it
		// holds for as long as the stream is open.
		r.Flush()
	}
}

// begin notes that the answer has begun, and reports whether it is a stream.
func (r *recorder) begin() bool {
	r.wrote = true
	r.length = -1
	if cl := r.Header().Get("Content-Length"); cl != "" {
		if n, err := strconv.ParseInt(cl, 10, 64); err == nil {
			r.length = n
		}
	}
	stream := r.status < 300 && strings.HasPrefix(r.Header().Get("Content-Type"), "text/event-stream")
	if stream && r.onStream != nil {
		r.onStream()
	}
	return stream
}

func (r *recorder) Write(b []byte) (int, error) {
	if !r.wrote {
		r.begin()
	}
	if r.length > 0 && !r.holding && len(b) > 0 && r.bytes+int64(len(b)) == r.length {
		// The answer's last byte: held back until its records are kept.
		n, err := r.ResponseWriter.Write(b[:len(b)-1])
		r.bytes += int64(n)
		if err != nil {
			return n, err
		}
		r.last, r.holding = b[len(b)-1], true
		r.bytes++
		return len(b), nil
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// unwrap is the writer net/http gave the handler beneath w's recorder:
// http.MaxBytesReader tells it when a body is over its bound, so that
// the server closes the connection rather than read on.
func unwrap(w http.ResponseWriter) http.ResponseWriter {
	if rec, ok := w.(*recorder); ok {
		return rec.ResponseWriter
	}
	return w
}

// Unwrap lets http.ResponseController reach Flush and deadlines.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Flush passes a flush on, for streamed answers.
func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// boundBody bounds reading the rest of r's body by ReadTimeout from now,
// and lifts the bound as the body ends. A request with no body is left
// with no bound: while its answer streams, the server reads the
// connection only to see whether the box has gone.
func (s *Server) boundBody(rc *http.ResponseController, r *http.Request) {
	if s.cfg.ReadTimeout <= 0 || r.Body == nil || r.Body == http.NoBody {
		_ = rc.SetReadDeadline(time.Time{})
		return
	}
	_ = rc.SetReadDeadline(s.cfg.Now().Add(s.cfg.ReadTimeout))
	r.Body = &liftAtEnd{ReadCloser: r.Body, rc: rc}
}

// liftAtEnd is a request body that lifts the connection's read deadline
// once it has been read to its end.
type liftAtEnd struct {
	io.ReadCloser
	rc     *http.ResponseController
	lifted bool
}

func (b *liftAtEnd) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.lifted {
		b.lifted = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// BodyTimeout bounds reading a small request body the broker reads whole
// (a declaration report, or a body a capability's Scopes reads).
const BodyTimeout = 10 * time.Second
