// Package upstreamtest is for tests: Recorder, a stand-in upstream's
// handler that keeps every request it receives before answering it;
// Message and StreamEvents, an Anthropic Messages answer whole and
// streamed; EchoStatus, a hostile upstream that repeats what it was
// sent; and Buffer, a log several goroutines write while a test reads
// it. It imports nothing of boxbroker, so that the stand-ins of any
// package (package brokertest's Anthropic and Fountain, package
// cloud/cloudtest's Bedrock and Vertex AI) record and answer alike
// without importing what they stand in for.
package upstreamtest

import (
	"bytes"
	"io"
	"net/http"
	"sync"
)

// Seen is one request an upstream received.
type Seen struct {
	Method, Path, RawQuery string
	Header                 http.Header
	Body                   []byte
}

// Recorder records every request before its Handler answers it. Its
// zero value records and then panics on a nil Handler; set Handler.
type Recorder struct {
	Handler http.Handler
	// HeadersOnly, when true, leaves each request's body unread (Seen's
	// Body nil), so that streaming and size bounds behave as without the
	// Recorder.
	HeadersOnly bool
	mu          sync.Mutex // guards seen
	seen        []Seen
}

// ServeHTTP records r, its body read whole unless HeadersOnly, and hands
// it to Handler with the body to read again.
func (rec *Recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body []byte
	if !rec.HeadersOnly {
		body, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	rec.mu.Lock()
	rec.seen = append(rec.seen, Seen{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
	rec.mu.Unlock()
	rec.Handler.ServeHTTP(w, r)
}

// Seen returns the requests received so far.
func (rec *Recorder) Seen() []Seen {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]Seen(nil), rec.seen...)
}
