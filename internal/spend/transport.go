package spend

import (
	"mime"
	"net/http"
	"strings"
	"sync"

	"github.com/intentius/boxbroker/internal/proxy"
)

// ticket gathers what was read of every upstream answer of one request.
type ticket struct {
	mu       sync.Mutex // guards readings and each *reading's fields
	readings []*reading
	// The first answer's reading and observer, and readings' first
	// backing, are kept in the ticket (allocated with its call): most
	// requests make one upstream call.
	firstTaken bool
	first      reading
	firstObs   observer
	one        [1]*reading
}

// next returns a reading and an observer for an answer, noting the
// reading in tk.readings; tk.mu is held.
func (tk *ticket) next() (*reading, *observer) {
	if !tk.firstTaken && len(tk.readings) == 0 {
		tk.firstTaken = true
		tk.readings = append(tk.one[:0], &tk.first)
		return &tk.first, &tk.firstObs
	}
	r := &reading{}
	tk.readings = append(tk.readings, r)
	return r, &observer{}
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
	entry := proxy.EntryFrom(req.Context())
	tk.mu.Lock()
	r, obs := tk.next()
	*r = reading{open: true, entry: entry, sent: sentCredential(req.Header), earlier: proxy.EarlierFrom(req.Context())}
	tk.mu.Unlock()
	if ce := resp.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		tk.mu.Lock()
		r.open = false
		tk.mu.Unlock()
		return resp, nil
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	*obs = observer{body: resp.Body, sse: mt == "text/event-stream", mu: &tk.mu, r: r, bufs: t.bufs}
	resp.Body = obs
	return resp, nil
}

// sentCredential is the Anthropic credential a call's header carries:
// its x-api-key, or its bearer; "" for none.
func sentCredential(h http.Header) string {
	if k := h.Get("X-Api-Key"); k != "" {
		return k
	}
	b, _ := strings.CutPrefix(h.Get("Authorization"), "Bearer ")
	return b
}
