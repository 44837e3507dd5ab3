// Package admin is the operator's side of boxbroker, served on its own
// listener and never on the box-facing one: a JSON admin API over boxes,
// their tokens, consent, credentials, secrets, feedback and Fountain ids,
// authenticated by an admin token (an operator's does everything, a
// viewer's only reads: GET and HEAD); and /metrics, /healthz and /readyz.
// The owner's page (package ui) adds its routes under /ui/ to the same
// Server (HandleHTTP) and calls the API's checks and writes, so that the
// page and the API hold one rule each. The Server answers only a request
// whose Host names it (localhost, an IP address or one of Config.Hosts),
// so that a page whose name is rebound to its address reads nothing.
//
// Every refusal has the protocol's shape,
// {"type":"error","error":{"type":...,"message":...}}. No answer, log line
// or error ever carries a token, a credential or a secret's value: values
// are write-only, and a box token is shown once, in the answer that made
// it.
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/cache"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/pool"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
)

// MaxBody bounds an admin request's body.
const MaxBody = 64 << 10

// Config configures a Server.
type Config struct {
	// Store is where everything is kept. Required.
	Store store.Store
	// Cache, when set, is told of each write at once, so the box-facing
	// handler in the same process does not wait for the change log.
	Cache *cache.Cache
	// Keyring seals credentials and secrets. Required.
	Keyring *secrets.Keyring
	// Broker is the broker word, shown on the owner's page.
	Broker string
	// Metrics, when set, is served at /metrics without a token.
	Metrics http.Handler
	// Logger receives failures; never a token or a value. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Pool, when set, is the operator's credential pool, whose entries'
	// state on this replica GET /api/credentials/pool shows.
	Pool *pool.Pool
	// Ready, when set, answers /readyz: what it found, and whether this
	// replica should be sent requests. Nil pings the store.
	Ready func(ctx context.Context) (map[string]any, bool)
	// Hosts are the host names, besides localhost and any IP address, a
	// request may name in its Host (with any port, or none); a request
	// naming any other host is refused with 421 on every route, so that a
	// page whose name is rebound to the listener's address reads nothing.
	// Nil allows only localhost and IP addresses. Each is taken as
	// HostName returns it; one that is not a host name is an error.
	Hosts []string
	// DeadLetters, when set, are this replica's dead letters, which
	// /api/spool/dead lists, retries and drops; nil: those routes answer
	// 501.
	DeadLetters operator.DeadLetters
	// Prices, when set, is the price table the broker charges by, which
	// GET /api/prices shows; nil: the built-in table.
	Prices *spend.Prices
}

// Server is the admin handler.
type Server struct {
	cfg    Config
	log    *slog.Logger
	mux    *http.ServeMux
	routes []Route
	hosts  map[string]bool // Config.Hosts, as HostName returns them
	op     *operator.Service
}

// Route is one admin route: a net/http pattern with its method, such as
// "GET /api/boxes/{name}", and its handler. Token routes need an admin
// token; the others (metrics and health) are open.
type Route struct {
	Pattern string
	Handle  func(w http.ResponseWriter, r *http.Request) error
	// Open routes need no admin token.
	Open bool
}

// New returns a Server, or an error naming what cfg lacks.
func New(cfg Config) (*Server, error) {
	var problems []string
	if cfg.Store == nil {
		problems = append(problems, "no store")
	}
	if cfg.Keyring == nil {
		problems = append(problems, "no keyring")
	}
	hosts := make(map[string]bool, len(cfg.Hosts))
	for _, h := range cfg.Hosts {
		name, ok := HostName(h)
		if !ok {
			problems = append(problems, fmt.Sprintf("host %q is not a host name", h))
		}
		hosts[name] = true
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("admin config: %s", strings.Join(problems, "; "))
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Server{cfg: cfg, log: cfg.Logger, mux: http.NewServeMux(), hosts: hosts}
	var c operator.Cache // a nil *cache.Cache would be a non-nil Cache
	var p *pool.Pool
	if cfg.Cache != nil {
		c, p = cfg.Cache, s.Pool()
	}
	var err error
	if s.op, err = operator.New(operator.Config{Store: cfg.Store, Keyring: cfg.Keyring, Cache: c, Pool: p, Logger: cfg.Logger, Now: cfg.Now,
		DeadLetters: cfg.DeadLetters, Prices: cfg.Prices}); err != nil {
		return nil, err
	}
	for _, rt := range s.apiRoutes() {
		s.Handle(rt)
	}
	return s, nil
}

// Handle adds a route, listed by Routes. It is how a later part of
// boxbroker adds its admin routes beside these; it must be called before
// the Server serves. A route that is not Open takes an admin token, and
// a viewer's token only for GET and HEAD (authenticated).
func (s *Server) Handle(rt Route) {
	s.routes = append(s.routes, rt)
	h := rt.Handle
	if !rt.Open {
		h = s.authenticated(h)
	}
	s.mux.Handle(rt.Pattern, s.adapt(h))
}

// HandleHTTP adds a route h answers as it is: no admin token is asked
// for and its errors are its own to render. The owner's page (package ui)
// adds its routes so, and authenticates each request by its session. It
// must be called before the Server serves.
func (s *Server) HandleHTTP(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// Config returns the configuration the Server runs with, defaults
// applied: the owner's page serves beside the API with the same store,
// keyring, clock and logger.
func (s *Server) Config() Config { return s.cfg }

// Routes returns the routes New and Handle registered, in order.
func (s *Server) Routes() []Route { return append([]Route(nil), s.routes...) }

// ServeHTTP serves the admin listener. A request whose Host names
// another host than the listener's is refused (421) before any route.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	if !s.hostAllowed(r.Host) {
		refuseHost(w)
		return
	}
	if _, pattern := s.mux.Handler(r); pattern == "" {
		// The mux's own 404 and 405 answer in plain text; say them as refusals.
		s.mux.ServeHTTP(&refuseMux{ResponseWriter: w, r: r}, r)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// refuseMux turns the mux's plain-text 404 and 405 into refusals, keeping
// the Allow header it sets.
type refuseMux struct {
	http.ResponseWriter
	r    *http.Request
	done bool
}

func (m *refuseMux) WriteHeader(code int) {
	if m.done {
		return
	}
	m.done = true
	path := proxy.ScrubKept(m.r.URL.Path)
	switch code {
	case http.StatusMethodNotAllowed:
		protocol.WriteRefusal(m.ResponseWriter, code, protocol.TypeInvalid,
			fmt.Sprintf("%s does not take %s (it takes %s).", path, m.r.Method, m.Header().Get("Allow")))
	default:
		protocol.WriteRefusal(m.ResponseWriter, http.StatusNotFound, protocol.TypeNotFound,
			fmt.Sprintf("The admin API serves no %s %s.", m.r.Method, path))
	}
}

func (m *refuseMux) Write(b []byte) (int, error) {
	if !m.done {
		m.WriteHeader(http.StatusOK)
	}
	return len(b), nil // the mux's text is dropped
}

// adapt renders a handler's error as a refusal (Refusal).
func (s *Server) adapt(h func(http.ResponseWriter, *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			status, typ, msg := Refusal(err)
			var oe *operator.Error
			if !errors.As(err, &oe) || oe.Err != nil {
				s.log.Error("admin request failed", "method", r.Method, "path", proxy.ScrubKept(r.URL.Path), "status", status, "err", proxy.ScrubKept(err.Error()))
			}
			protocol.WriteRefusal(w, status, typ, proxy.ScrubKept(msg))
		}
	})
}

// readJSON decodes r's body, at most MaxBody bytes of one JSON value with
// no field v does not know, into v.
func readJSON(w http.ResponseWriter, r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(strings.ToLower(ct), "application/json") {
		return operator.Errorf(operator.Unsupported,
			"The body must be application/json: send it with Content-Type: application/json (curl's -d and --data-binary send application/x-www-form-urlencoded unless given -H 'Content-Type: application/json').")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return operator.Errorf(operator.TooLarge, "The body is over %d bytes.", MaxBody)
	}
	if err != nil {
		return operator.Errorf(operator.Invalid, "The body could not be read.")
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return operator.Errorf(operator.Invalid, "The body is not the JSON object this route takes: %s.", jsonProblem(err))
	}
	if dec.More() {
		return operator.Errorf(operator.Invalid, "The body holds more than one JSON value.")
	}
	return nil
}

// jsonProblem says what is wrong with a body without repeating any of it:
// a field's name, never a value.
func jsonProblem(err error) string {
	var ute *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &ute):
		return fmt.Sprintf("field %q has the wrong type", ute.Field)
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at byte %d", se.Offset)
	case errors.Is(err, io.EOF):
		return "it is empty"
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ")
	}
	return "it does not decode"
}

// writeJSON answers v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode answer: %w", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
	return nil
}

// answer is the handler of a route that only calls f: f's result answered
// as JSON with status, or f's error as a refusal.
func answer[T any](status int, f func(*http.Request) (T, error)) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		out, err := f(r)
		if err != nil {
			return err
		}
		return writeJSON(w, status, out)
	}
}

// decode is the handler of a route that takes a JSON body B: once check
// passes (nil: no check), the body is read (readJSON) and f's result
// answered as JSON with status.
func decode[B, T any](status int, check func(*http.Request) error, f func(*http.Request, B) (T, error)) func(http.ResponseWriter, *http.Request) error {
	return decodeBody(status, check, false, f)
}

// decodeOptional is decode for a route whose body may be absent (a
// Content-Length of 0): f is then given B's zero value. A body of
// unknown length (chunked) is read as any other.
func decodeOptional[B, T any](status int, check func(*http.Request) error, f func(*http.Request, B) (T, error)) func(http.ResponseWriter, *http.Request) error {
	return decodeBody(status, check, true, f)
}

func decodeBody[B, T any](status int, check func(*http.Request) error, optional bool, f func(*http.Request, B) (T, error)) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		if check != nil {
			if err := check(r); err != nil {
				return err
			}
		}
		var in B
		if !optional || r.ContentLength != 0 {
			if err := readJSON(w, r, &in); err != nil {
				return err
			}
		}
		return answer(status, func(r *http.Request) (T, error) { return f(r, in) })(w, r)
	}
}

// noContent is the handler of a route that only calls f: 204 with no
// body once f succeeds.
func noContent(f func(*http.Request) error) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := f(r); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
}

// byOp is the work of a route that only calls f by the operator
// service acting for r (Op).
func byOp[T any](s *Server, f func(*operator.Service, context.Context) (T, error)) func(*http.Request) (T, error) {
	return func(r *http.Request) (T, error) { return f(s.Op(r), r.Context()) }
}

// byPath is byOp of an f that takes r's path value key.
func byPath[T any](s *Server, key string, f func(*operator.Service, context.Context, string) (T, error)) func(*http.Request) (T, error) {
	return func(r *http.Request) (T, error) { return f(s.Op(r), r.Context(), r.PathValue(key)) }
}

// byPathBody is byPath of an f that takes the body B too, as decode's work.
func byPathBody[B, T any](s *Server, key string, f func(*operator.Service, context.Context, string, B) (T, error)) func(*http.Request, B) (T, error) {
	return func(r *http.Request, in B) (T, error) { return f(s.Op(r), r.Context(), r.PathValue(key), in) }
}

// listed is the work of a route answering f's list as the one member key
// of a JSON object, such as {"grants": [...]}.
func listed[T any](key string, f func(*http.Request) ([]T, error)) func(*http.Request) (map[string][]T, error) {
	return func(r *http.Request) (map[string][]T, error) {
		list, err := f(r)
		return map[string][]T{key: list}, err
	}
}

// removeBy is the handler of a route that only removes what r's path
// value key names, with f by the operator service acting for r: 204
// once f succeeds.
func (s *Server) removeBy(key string, f func(*operator.Service, context.Context, string) error) func(http.ResponseWriter, *http.Request) error {
	return noContent(func(r *http.Request) error { return f(s.Op(r), r.Context(), r.PathValue(key)) })
}

// ready answers /readyz: 200 while the store answers a ping, else 503.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Ready != nil {
		out, ok := s.cfg.Ready(r.Context())
		if !ok {
			return writeJSON(w, http.StatusServiceUnavailable, out)
		}
		return writeJSON(w, http.StatusOK, out)
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.cfg.Store.Ping(ctx); err != nil {
		s.log.Warn("readyz: store does not answer", "err", err)
		return writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "store": "unavailable"})
	}
	return writeJSON(w, http.StatusOK, map[string]any{"ready": true, "store": "ok"})
}

// healthz answers /healthz: 200 while the process serves.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, map[string]any{"ok": true})
}

// metrics answers /metrics from cfg.Metrics.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Metrics == nil {
		return operator.Errorf(operator.NotFound, "This broker exports no metrics.")
	}
	s.cfg.Metrics.ServeHTTP(w, r)
	return nil
}
