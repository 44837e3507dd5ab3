package proxy

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/defaults"
)

// maxTraced bounds the upstream calls one Trace remembers.
const maxTraced = 16

// Call is one upstream call a request made: the status of its answer (0
// when none came) and the time to that answer's headers.
type Call struct {
	Status  int
	Latency time.Duration
	// Entry names the entry of the operator's credential pool the call
	// was made with (see WithEntry); "" for none.
	Entry string
	// Cut is true for a call the broker broke off because its box was
	// refused as the call was made (capability.Cut): no upstream's
	// failure, though no answer came.
	Cut bool
}

// Trace collects the upstream calls made on behalf of one box request,
// and what its model calls cost, for its log line, its metrics and its
// audit row. It is safe for
// concurrent use; the zero value is ready.
type Trace struct {
	mu     sync.Mutex // guards calls, cost and reason
	calls  []Call
	cost   int64
	reason string
}

// Refuse notes reason (one of capability.Reasons) as why the request
// was refused, for a refusal written by something other than the
// broker's own refusal path (a forwarder's ErrorHandler). The first
// noted stands. A nil Trace notes nothing.
func (t *Trace) Refuse(reason string) {
	t.note(func() {
		if t.reason == "" {
			t.reason = reason
		}
	})
}

// Reason is the reason Refuse noted; "" for none.
func (t *Trace) Reason() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.reason
}

// AddCost notes micros (micro-dollars) more of measured cost for the
// request: the spend meter's price of its model calls as they settle.
// A nil Trace notes nothing.
func (t *Trace) AddCost(micros int64) {
	t.note(func() { t.cost += micros })
}

// Cost is the measured cost noted so far, in micro-dollars.
func (t *Trace) Cost() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cost
}

// add notes one call, keeping at most maxTraced.
func (t *Trace) add(c Call) {
	t.note(func() {
		if len(t.calls) < maxTraced {
			t.calls = append(t.calls, c)
		}
	})
}

// note runs f with t.mu held; on a nil Trace it does nothing.
func (t *Trace) note(f func()) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	f()
}

// Calls returns the calls noted so far, in order.
func (t *Trace) Calls() []Call {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Call(nil), t.calls...)
}

type traceKey struct{}

type entryKey struct{}

// WithEntry returns ctx noting that the upstream calls made with it are
// paid by the credential pool's entry name, for the Trace.
func WithEntry(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, entryKey{}, name)
}

// EntryFrom returns the credential pool's entry ctx notes (see
// WithEntry), or "" for none.
func EntryFrom(ctx context.Context) string {
	e, _ := ctx.Value(entryKey{}).(string)
	return e
}

type earlierKey struct{}

// WithEarlier returns ctx noting values, the credentials an upstream call
// made with it follows (those of the pool entries it failed over from,
// and a cloud account's secrets among them): the upstream saw them, so
// a reader of its answer beneath the box's mask (the spend meter, which
// keeps the answer's model) treats each as the call's own credential.
// It replaces what ctx noted before.
func WithEarlier(ctx context.Context, values []string) context.Context {
	return context.WithValue(ctx, earlierKey{}, values)
}

// EarlierFrom returns the values ctx notes (see WithEarlier), or nil.
func EarlierFrom(ctx context.Context) []string {
	v, _ := ctx.Value(earlierKey{}).([]string)
	return v
}

// WithTrace returns ctx carrying t, for a Traced transport to note calls in.
func WithTrace(ctx context.Context, t *Trace) context.Context {
	return context.WithValue(ctx, traceKey{}, t)
}

// TraceFrom returns the Trace ctx carries, or nil.
func TraceFrom(ctx context.Context) *Trace {
	t, _ := ctx.Value(traceKey{}).(*Trace)
	return t
}

// Traced wraps rt so that each request whose context carries a Trace has
// its status and time to headers noted there. now is the clock (nil for
// time.Now).
func Traced(rt http.RoundTripper, now func() time.Time) http.RoundTripper {
	defaults.Clock(&now)
	return &traced{rt: rt, now: now}
}

type traced struct {
	rt  http.RoundTripper
	now func() time.Time
}

// RoundTrip sends req with the wrapped transport and notes the call.
func (t *traced) RoundTrip(req *http.Request) (*http.Response, error) {
	tr := TraceFrom(req.Context())
	if tr == nil {
		return t.rt.RoundTrip(req)
	}
	start := t.now()
	resp, err := t.rt.RoundTrip(req)
	c := Call{Latency: t.now().Sub(start)}
	c.Entry = EntryFrom(req.Context())
	if err == nil {
		c.Status = resp.StatusCode
	} else {
		_, c.Cut = capability.Cut(err)
	}
	tr.add(c)
	return resp, err
}

// CloseIdleConnections passes on to the wrapped transport.
func (t *traced) CloseIdleConnections() {
	if ci, ok := t.rt.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}
