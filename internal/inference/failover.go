package inference

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/jsonfield"
	"github.com/intentius/boxbroker/internal/pool"
	"github.com/intentius/boxbroker/internal/proxy"
)

// DefaultMaxRetried is Config.MaxRetried's default: 4 MiB.
const DefaultMaxRetried = 4 << 20

// refusalReadFor bounds the time spent reading the start of a 5xx answer
// to tell whether it is an overloaded_error.
const refusalReadFor = 5 * time.Second

// retry is what a call that may fail over is made again with: its body,
// kept in memory, and its outgoing headers before the credential was put
// in, its path and query.
type retry struct {
	body          []byte
	header        http.Header
	path, query   string
	contentLength int64
}

// keepForRetry reads out's body into memory when it fits MaxRetried, so
// that the call can be made again on another entry of the pool. A body
// that does not fit is forwarded as it streams, with what was read of it
// first, and the call is never made again.
func (c *Capability) keepForRetry(out *http.Request, pf *paidFor) error {
	if c.cfg.MaxRetried < 0 || out.ContentLength > c.cfg.MaxRetried || !pf.paid.Failover.Others() {
		return nil
	}
	rt := &retry{}
	if out.ContentLength != 0 && out.Body != nil && out.Body != http.NoBody {
		b, err := io.ReadAll(io.LimitReader(out.Body, c.cfg.MaxRetried+1))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return capability.TooLarge(c.cfg.MaxBody)
			}
			return capability.UnreadableBody(err)
		}
		if int64(len(b)) > c.cfg.MaxRetried {
			out.Body = proxy.PutBack(b, out.Body)
			return nil
		}
		rt.body = b
	}
	// The pool cools an overload for the call's model, and may make the
	// first try on another entry for it.
	if next, ok := pf.paid.Failover.Model(modelOf(rt.body)); ok {
		pf.paid = next
	}
	rt.contentLength = int64(len(rt.body))
	if out.ContentLength > 0 || rt.contentLength > 0 {
		out.ContentLength = rt.contentLength
	}
	out.Body = newReplay(rt.body)
	pf.retry = rt
	return nil
}

// modelOf is the top-level "model" of a Messages body, read as
// encoding/json reads it (the last of duplicates, matched exactly); ""
// when it names none.
func modelOf(body []byte) string {
	var model string
	top := jsonfield.View(body)
	if !top.IsObject() {
		return ""
	}
	top.ForEach(func(k, v gjson.Result) bool {
		if jsonfield.Name(k) == "model" {
			var s string
			if jsonfield.String(v, &s) {
				model = s
			}
		}
		return true
	})
	return model
}

// replay is a body read from memory. It lets go of the memory once read
// to its end or closed, so that an answer that streams for long does not
// hold its request's body.
type replay struct {
	mu sync.Mutex // guards b: the transport may Close while it reads
	b  []byte
}

func newReplay(b []byte) io.ReadCloser {
	if len(b) == 0 {
		return http.NoBody
	}
	return &replay{b: b}
}

func (r *replay) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.b) == 0 {
		r.b = nil
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	if len(r.b) == 0 {
		r.b = nil
	}
	return n, nil
}

func (r *replay) Close() error {
	r.mu.Lock()
	r.b = nil
	r.mu.Unlock()
	return nil
}

// failover is the capability's transport. For a call paid from the
// operator's pool it tells the pool each answer, and makes the call again
// on the box's next healthy entry after a refusal (429, 529, a 5xx
// overloaded_error, 401, 403), while the body is in memory and entries
// and time are left. It returns only the answer the box gets: nothing of
// a refused answer reaches the box, and once RoundTrip has returned
// nothing is retried.
type failover struct {
	base     http.RoundTripper
	log      *slog.Logger
	upstream *url.URL // the capability's own, for an entry that names none
}

func (f *failover) RoundTrip(req *http.Request) (*http.Response, error) {
	pf, _ := req.Context().Value(ctxKey{}).(*paidFor)
	if pf == nil || pf.paid.Failover == nil {
		return f.base.RoundTrip(req)
	}
	out := req
	for {
		resp, err := f.base.RoundTrip(out)
		if err != nil {
			pf.retry = nil
			return nil, err
		}
		var start []byte
		if pool.NeedsBody(resp.StatusCode) {
			start = readStart(resp)
		}
		fo := pf.paid.Failover
		refused := fo.Answered(resp.StatusCode, resp.Header, start)
		if !refused || pf.retry == nil {
			pf.retry = nil
			return resp, nil
		}
		next, ok := fo.Next()
		if !ok {
			// Every entry is cooling: the box gets this answer as
			// the upstream gave it.
			pf.retry = nil
			return resp, nil
		}
		f.log.Info("inference: the pool entry refused the call; made again on the next",
			"entry", pf.paid.Entry, "status", resp.StatusCode, "next", next.Entry)
		resp.Body.Close()
		pf.earlier = append(pf.earlier, pf.paid.Credential)
		pf.paid = next
		rt := pf.retry
		// The meter beneath keeps the answer's model: it is told of
		// every key the call was made on, not only the one it carries,
		// and of what was made for its cloud attempts.
		out = req.Clone(proxy.WithEarlier(proxy.WithEntry(req.Context(), next.Entry), slices.Concat(earlierValues(pf.earlier), pf.made)))
		out.Header = rt.header.Clone()
		target(out, next, f.upstream, rt.path, rt.query)
		out.Body = newReplay(rt.body)
		out.ContentLength = req.ContentLength
	}
}

// failedOn wraps the proxy's ErrorHandler so that its log line names the
// pool entry the call failed on: after a failover, the last one tried,
// not the first.
func failedOn(h func(http.ResponseWriter, *http.Request, error)) func(http.ResponseWriter, *http.Request, error) {
	return func(w http.ResponseWriter, r *http.Request, err error) {
		if pf, _ := r.Context().Value(ctxKey{}).(*paidFor); pf != nil && pf.paid.Entry != "" {
			r = r.WithContext(proxy.WithEntry(r.Context(), pf.paid.Entry))
		}
		h(w, r, err)
	}
}

// readStart reads up to capability.MaxRefusalBody bytes of resp's body,
// within refusalReadFor, and puts them back in front of the rest.
func readStart(resp *http.Response) []byte {
	t := time.AfterFunc(refusalReadFor, func() { resp.Body.Close() })
	b, _ := io.ReadAll(io.LimitReader(resp.Body, capability.MaxRefusalBody))
	t.Stop()
	resp.Body = proxy.PutBack(b, resp.Body)
	return b
}

// CloseIdleConnections passes on to the wrapped transport.
func (f *failover) CloseIdleConnections() { closeIdle(f.base) }

// poolRoute is the upstream limit a forwarded call on p (relative to
// /llm/anthropic) counts against, for the pool's cooling.
func poolRoute(p string) string {
	switch {
	case p == "/v1/messages/count_tokens":
		return pool.RouteCountTokens
	case p == "/v1/models", strings.HasPrefix(p, "/v1/models/"):
		return pool.RouteModels
	}
	return pool.RouteMessages
}
