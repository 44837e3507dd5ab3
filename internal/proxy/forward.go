package proxy

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/textproto"
	"strings"
	"sync"

	"github.com/intentius/boxbroker/internal/httptoken"
)

// Forwarder forwards a box's request upstream and copies the answer
// back, as httputil.ReverseProxy with Rewrite does, with less work per
// request: the outbound request is built once (hop-by-hop headers, and
// any the Connection header names, never copied), no client trace is
// installed unless 1xx answers are passed on, and only a streamed answer
// (text/event-stream, or of unknown length) is flushed after every write.
//
// As with ReverseProxy and Rewrite, the hop-by-hop headers are gone
// before Rewrite runs, so a box sending "Connection: X-Api-Key" cannot
// strip a credential Rewrite sets; Forwarded and X-Forwarded-* are
// removed too. Protocol upgrades are not carried: an Upgrade header is
// hop-by-hop, and a 101 answer is an error.
type Forwarder struct {
	// Rewrite sets the outbound request's URL and headers. Required.
	Rewrite func(*httputil.ProxyRequest)
	// Transport sends the outbound request.
	Transport http.RoundTripper
	// ModifyResponse, when set, may change the answer before it is
	// copied; an error it returns goes to ErrorHandler.
	ModifyResponse func(*http.Response) error
	// ErrorHandler answers when the upstream could not be reached or
	// ModifyResponse failed.
	ErrorHandler func(http.ResponseWriter, *http.Request, error)
	// ErrorLog receives read errors during a copy (nil: the log package's).
	ErrorLog *log.Logger
	// BufferPool lends the buffers answers are copied through.
	BufferPool httputil.BufferPool
	// Pass1xx passes informational answers (such as 103 Early Hints) on
	// to the box, through the transport's client trace.
	Pass1xx bool
}

// errSwitched is a 101 answer, which the Forwarder does not carry.
var errSwitched = errors.New("proxy: the upstream switched protocols")

// hopByHop are the hop-by-hop headers, never forwarded either way.
var hopByHop = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// notForwarded are the request headers never copied upstream: the
// hop-by-hop ones, and the forwarding headers a box sent, which are not
// ours to pass on.
var notForwarded = func() map[string]bool {
	m := map[string]bool{"Forwarded": true, "X-Forwarded-For": true, "X-Forwarded-Host": true, "X-Forwarded-Proto": true}
	for _, k := range hopByHop {
		m[k] = true
	}
	return m
}()

// forwardHeader copies h without its hop-by-hop headers, those its
// Connection header names, and forwarding headers; all values share one
// backing array, as http.Header.Clone's do.
func forwardHeader(h http.Header) http.Header {
	var named []string
	for _, v := range h["Connection"] {
		for _, f := range strings.Split(v, ",") {
			if f = textproto.TrimString(f); f != "" {
				named = append(named, http.CanonicalHeaderKey(f))
			}
		}
	}
	n := 0
	for _, vs := range h {
		n += len(vs)
	}
	values := make([]string, n)
	out := make(http.Header, len(h))
	for k, vs := range h {
		if notForwarded[k] || contains(named, k) {
			continue
		}
		n := copy(values, vs)
		out[k] = values[:n:n]
		values = values[n:]
	}
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// noopCloser keeps the transport from closing the box's own body.
type noopCloser struct{ io.Reader }

func (noopCloser) Close() error { return nil }

// ServeHTTP forwards req and copies the answer to rw.
func (f *Forwarder) ServeHTTP(rw http.ResponseWriter, req *http.Request) {
	// One shallow copy of req; its URL is copied too, since a Rewrite may
	// change the outbound URL in place.
	out := req.WithContext(req.Context())
	u := *req.URL
	out.URL = &u
	out.Proto, out.ProtoMajor, out.ProtoMinor = "HTTP/1.1", 1, 1
	out.Header = forwardHeader(req.Header)
	out.Close = false
	out.RequestURI = ""
	out.Trailer = nil
	out.TransferEncoding = nil
	out.Body = nil
	if req.ContentLength != 0 && req.Body != nil && req.Body != http.NoBody {
		out.Body = noopCloser{req.Body}
	}
	// Tell the upstream that trailers are welcome only when the box said so.
	for _, v := range req.Header["Te"] {
		if httptoken.Listed(v, "trailers") {
			out.Header.Set("Te", "trailers")
			break
		}
	}
	pr := httputil.ProxyRequest{In: req, Out: out}
	f.Rewrite(&pr)
	out = pr.Out
	if _, ok := out.Header["User-Agent"]; !ok {
		// No default Go User-Agent is sent on the box's behalf.
		out.Header.Set("User-Agent", "")
	}
	if f.Pass1xx {
		var mu sync.Mutex
		done := false
		trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, header textproto.MIMEHeader) error {
			mu.Lock()
			defer mu.Unlock()
			if done {
				return nil
			}
			h := rw.Header()
			copyHeader(h, http.Header(header))
			rw.WriteHeader(code)
			clear(h)
			return nil
		}}
		out = out.WithContext(httptrace.WithClientTrace(out.Context(), trace))
		defer func() { mu.Lock(); done = true; mu.Unlock() }()
	}
	res, err := f.Transport.RoundTrip(out)
	if err != nil {
		f.ErrorHandler(rw, out, err)
		return
	}
	if res.StatusCode == http.StatusSwitchingProtocols {
		res.Body.Close()
		f.ErrorHandler(rw, out, errSwitched)
		return
	}
	for _, k := range hopByHop {
		delete(res.Header, k)
	}
	// Whether the answer is a stream is the upstream's to say: a
	// ModifyResponse that rewrites the body (egress's redactor) drops
	// its length, which does not make it one.
	stream := streamed(res)
	if f.ModifyResponse != nil {
		if err := f.ModifyResponse(res); err != nil {
			res.Body.Close()
			f.ErrorHandler(rw, out, err)
			return
		}
	}
	copyHeader(rw.Header(), res.Header)
	announced := len(res.Trailer)
	if announced > 0 {
		keys := make([]string, 0, announced)
		for k := range res.Trailer {
			keys = append(keys, k)
		}
		rw.Header().Add("Trailer", strings.Join(keys, ", "))
	}
	rw.WriteHeader(res.StatusCode)
	if err := f.copyBody(out.Context(), rw, res, stream); err != nil {
		res.Body.Close()
		// The answer has begun: all that can be done is to abort it.
		panic(http.ErrAbortHandler)
	}
	res.Body.Close() // now, so that res.Trailer is complete
	if len(res.Trailer) > 0 {
		// Force chunking, so that the trailers can follow.
		_ = http.NewResponseController(rw).Flush()
	}
	if len(res.Trailer) == announced {
		copyHeader(rw.Header(), res.Trailer)
		return
	}
	for k, vs := range res.Trailer {
		k = http.TrailerPrefix + k
		for _, v := range vs {
			rw.Header().Add(k, v)
		}
	}
}

// streamed reports whether an answer is flushed as it comes: an event
// stream, or an answer of unknown length.
func streamed(res *http.Response) bool {
	if res.ContentLength == -1 {
		return true
	}
	ct := res.Header["Content-Type"]
	return len(ct) > 0 && strings.HasPrefix(ct[0], "text/event-stream")
}

// copyBody copies res's body to rw, flushing after every write when the
// answer is streamed; ctx is the call's, done when the box has gone. It reads through a small buffer, so that a stream
// waiting for its next event holds little; a read that fills it moves the
// copy to a large one (an answer arriving faster than the small buffer
// takes it), and a stream goes back to the small one at its next short
// read.
func (f *Forwarder) copyBody(ctx context.Context, rw http.ResponseWriter, res *http.Response, stream bool) error {
	var small []byte
	if f.BufferPool != nil {
		small = f.BufferPool.Get()
		defer f.BufferPool.Put(small)
	} else {
		small = make([]byte, CopyBufferSize)
	}
	buf := small
	var large *[largeCopySize]byte
	defer func() {
		if large != nil {
			largeBuffers.Put(large)
		}
	}()
	var flush func() error
	if stream {
		flush = http.NewResponseController(rw).Flush
	}
	for {
		n, rerr := res.Body.Read(buf)
		if n > 0 {
			if _, werr := rw.Write(buf[:n]); werr != nil {
				return werr
			}
			if flush != nil {
				if werr := flush(); werr != nil {
					return werr
				}
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			if ctx.Err() == nil { // not the box going away
				f.logf("proxy: read error during body copy: %v", rerr)
			}
			return rerr
		}
		switch {
		case n == len(buf) && large == nil:
			large = largeBuffers.Get().(*[largeCopySize]byte)
			buf = large[:]
		case stream && n < len(buf) && large != nil:
			largeBuffers.Put(large)
			large, buf = nil, small
		}
	}
}

// largeCopySize is the buffer an answer is copied through once it comes
// faster than the small one takes it.
const largeCopySize = 32 << 10

var largeBuffers = sync.Pool{New: func() any { return new([largeCopySize]byte) }}

func (f *Forwarder) logf(format string, args ...any) {
	if f.ErrorLog != nil {
		f.ErrorLog.Printf(format, args...)
		return
	}
	log.Printf(format, args...)
}

// copyHeader adds src's values to dst's. A key dst does not hold takes
// src's values as they are, with no copy.
func copyHeader(dst, src http.Header) {
	for k, vv := range src {
		if _, ok := dst[k]; !ok {
			dst[k] = vv
			continue
		}
		for _, v := range vv {
			dst.Add(k, v)
		}
	}
}
