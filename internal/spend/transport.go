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
	r := &reading{open: true, entry: proxy.EntryFrom(req.Context())}
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
