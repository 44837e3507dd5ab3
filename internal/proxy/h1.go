package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/intentius/boxbroker/internal/httptoken"
)

// FastBodyMax is the largest request body the fast transport sends
// itself. A body it sends is read whole before the request is written, so
// the request goes out in one write and can be sent again on a fresh
// connection when a kept-alive one turns out to be closed. A larger
// body, or one of unknown length, goes through the standard transport,
// which writes it while it reads the answer.
const FastBodyMax = 64 << 10

// fastTransport sends plain-HTTP/1.1 requests on the calling goroutine:
// it writes the request and reads the answer's head itself, on a
// connection kept alive in its own pool, with none of the standard
// transport's per-connection goroutines or the hand-offs between them.
// What it does not send itself — HTTPS, a large or unknown-length body,
// Expect: 100-continue, a protocol upgrade, a trailer — it passes to the
// standard transport it wraps, whose dialer, timeouts and pool sizes it
// also uses.
type fastTransport struct {
	std *http.Transport

	mu   sync.Mutex
	idle map[string][]*fastConn // by host:port; the most recent last
}

// Fast wraps std, the standard transport: plain-HTTP/1.1 requests with a
// small body are sent on the calling goroutine over connections kept in
// Fast's own pool (using std's DialContext, ResponseHeaderTimeout,
// MaxIdleConnsPerHost and IdleConnTimeout); every other request goes to
// std.
func Fast(std *http.Transport) http.RoundTripper {
	return &fastTransport{std: std, idle: map[string][]*fastConn{}}
}

// fastConn is one kept-alive connection to an upstream.
type fastConn struct {
	addr   string
	conn   net.Conn
	raw    syscall.RawConn // nil when conn has no descriptor
	br     *bufio.Reader
	idleAt time.Time
}

// fastReaderSize is the read buffer of a fast connection. A stream holds
// it for as long as it is open, so it is small; a longer answer head is
// still read whole (in more than one read), and a larger body read
// straight into the copy buffer.
const fastReaderSize = 2 << 10

// writers lends the buffer a request is written through: a request is
// written in one go, so a connection need not keep a writer of its own.
var writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4<<10) }}

// eligible reports whether the fast transport sends req itself.
func (t *fastTransport) eligible(req *http.Request) bool {
	if req.URL == nil || req.URL.Scheme != "http" || req.URL.Host == "" || req.URL.User != nil || req.Method == http.MethodConnect {
		return false
	}
	if req.Body != nil && req.Body != http.NoBody && (req.ContentLength <= 0 || req.ContentLength > FastBodyMax) {
		return false
	}
	if len(req.TransferEncoding) > 0 || len(req.Trailer) > 0 || req.Close {
		return false
	}
	h := req.Header
	return len(h["Expect"]) == 0 && len(h["Upgrade"]) == 0 && len(h["Connection"]) == 0 && len(h["Transfer-Encoding"]) == 0 && len(h["Te"]) == 0
}

// RoundTrip sends req, itself when it is eligible and through the
// standard transport otherwise.
func (t *fastTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.eligible(req) {
		return t.std.RoundTrip(req)
	}
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		b := getBody(int(req.ContentLength))
		defer putBody(b)
		buf := (*b)[:req.ContentLength]
		_, err := io.ReadFull(req.Body, buf)
		req.Body.Close()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("read request body: %w", err)
		}
		body = buf
	}
	addr := canonicalAddr(req.URL.Host)
	for attempt := 0; ; attempt++ {
		c, reused, err := t.conn(req.Context(), addr)
		if err != nil {
			return nil, err
		}
		resp, err := t.send(c, req, body)
		if err == nil {
			return resp, nil
		}
		c.conn.Close()
		var se *sendError
		if reused && attempt == 0 && errors.As(err, &se) && se.nothingRead && req.Context().Err() == nil {
			// A kept-alive connection the upstream had closed: nothing
			// was read back, so the request is sent again on a fresh one.
			continue
		}
		if ctxErr := req.Context().Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, errors.Unwrap(err)
	}
}

// bodySizes are the sizes of the buffers request bodies are read into,
// each lent by its own pool, so that a small body holds a small buffer.
var bodySizes = [...]int{2 << 10, 8 << 10, FastBodyMax}

var bodyPools [len(bodySizes)]sync.Pool

// getBody lends a buffer of at least n bytes (n <= FastBodyMax).
func getBody(n int) *[]byte {
	for i, size := range bodySizes {
		if n <= size {
			if b, ok := bodyPools[i].Get().(*[]byte); ok {
				return b
			}
			b := make([]byte, size)
			return &b
		}
	}
	b := make([]byte, n)
	return &b
}

// putBody returns a buffer getBody lent.
func putBody(b *[]byte) {
	for i, size := range bodySizes {
		if cap(*b) == size {
			*b = (*b)[:size]
			bodyPools[i].Put(b)
			return
		}
	}
}

// sendError is a failure to send a request or to read its answer's head;
// nothingRead is true when the upstream closed the connection before a
// byte of an answer came back.
type sendError struct {
	err         error
	nothingRead bool
}

func (e *sendError) Error() string { return e.err.Error() }
func (e *sendError) Unwrap() error { return e.err }

// send writes req (with body) on c and reads its answer's head.
func (t *fastTransport) send(c *fastConn, req *http.Request, body []byte) (resp *http.Response, err error) {
	ctx := req.Context()
	// The box going away ends the call: its connection's deadline passes.
	// Once the answer's head is read, its body holds stop.
	stop := context.AfterFunc(ctx, func() { _ = c.conn.SetDeadline(aLongTimeAgo) })
	defer func() {
		if err != nil {
			stop()
		}
	}()
	w := writers.Get().(*bufio.Writer)
	w.Reset(c.conn)
	err = writeRequest(w, req, body)
	if err == nil {
		err = w.Flush()
	}
	w.Reset(nil)
	writers.Put(w)
	if err != nil {
		return nil, &sendError{err: err, nothingRead: closedByPeer(err)}
	}
	if d := t.std.ResponseHeaderTimeout; d > 0 {
		_ = c.conn.SetReadDeadline(time.Now().Add(d))
	}
	if _, err = c.br.Peek(1); err != nil {
		// Not one byte of an answer: the upstream may have closed a
		// kept connection before it read the request.
		return nil, &sendError{err: err, nothingRead: closedByPeer(err)}
	}
	trace := httptrace.ContextClientTrace(ctx)
	for {
		if resp = readSimpleResponse(c.br, req); resp != nil {
			break
		}
		if resp, err = http.ReadResponse(c.br, req); err != nil {
			return nil, &sendError{err: err}
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break // a 101, which nobody asked for, the Forwarder refuses
		}
		// An informational answer: passed to the trace, if any, and the
		// final answer read after it.
		if trace != nil && trace.Got1xxResponse != nil {
			if err = trace.Got1xxResponse(resp.StatusCode, textproto.MIMEHeader(resp.Header)); err != nil {
				return nil, &sendError{err: err}
			}
		}
	}
	if t.std.ResponseHeaderTimeout > 0 {
		_ = c.conn.SetReadDeadline(time.Time{})
	}
	resp.Body = &fastBody{rc: resp.Body, t: t, c: c, ctx: ctx, stop: stop, keep: !resp.Close && resp.StatusCode != http.StatusSwitchingProtocols}
	return resp, nil
}

// closedByPeer reports whether err is the upstream having closed the
// connection, rather than a timeout or the box going away.
func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// aLongTimeAgo is a deadline already passed: setting it ends any read or
// write under way.
var aLongTimeAgo = time.Unix(1, 0)

// writeRequest writes req's head and body to w. Header names and values
// are checked as the standard transport checks them.
func writeRequest(w *bufio.Writer, req *http.Request, body []byte) error {
	if !validMethod(req.Method) {
		return fmt.Errorf("proxy: invalid method %q", req.Method)
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	if !validHeaderValue(host) {
		return errors.New("proxy: invalid Host")
	}
	uri := req.URL.RequestURI()
	for i := 0; i < len(uri); i++ {
		if uri[i] <= ' ' || uri[i] == 0x7f {
			return errors.New("proxy: invalid request URI")
		}
	}
	w.WriteString(req.Method)
	w.WriteByte(' ')
	w.WriteString(uri)
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.WriteString(host)
	w.WriteString("\r\n")
	for k, vs := range req.Header {
		switch k {
		case "Host", "Content-Length", "Transfer-Encoding", "Connection", "Trailer":
			continue
		case "User-Agent":
			if len(vs) == 0 || vs[0] == "" {
				continue // asked for no User-Agent
			}
		}
		if !httptoken.Valid(k) {
			return fmt.Errorf("proxy: invalid header name %q", k)
		}
		for _, v := range vs {
			if !validHeaderValue(v) {
				return fmt.Errorf("proxy: invalid value for header %q", k)
			}
			w.WriteString(k)
			w.WriteString(": ")
			w.WriteString(trimOWS(v))
			w.WriteString("\r\n")
		}
	}
	if body != nil || methodHasBody(req.Method) {
		var n [20]byte
		w.WriteString("Content-Length: ")
		w.Write(strconv.AppendInt(n[:0], int64(len(body)), 10))
		w.WriteString("\r\n")
	}
	w.WriteString("\r\n")
	_, err := w.Write(body)
	return err
}

// methodHasBody reports whether a request with method is expected to
// carry a body, so that an empty one is sent as Content-Length: 0.
func methodHasBody(m string) bool {
	return m == http.MethodPost || m == http.MethodPut || m == http.MethodPatch
}

func validMethod(m string) bool { return m != "" && httptoken.Valid(m) }

// validHeaderValue reports whether v holds no control byte but tab.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

func trimOWS(v string) string {
	for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
		v = v[1:]
	}
	for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	return v
}

// canonicalAddr is host with the default port added when it has none.
func canonicalAddr(host string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	return net.JoinHostPort(trimBrackets(host), "80")
}

func trimBrackets(h string) string {
	if len(h) > 1 && h[0] == '[' && h[len(h)-1] == ']' {
		return h[1 : len(h)-1]
	}
	return h
}

// conn returns a kept-alive connection to addr that is still open, or a
// new one; reused says which.
func (t *fastTransport) conn(ctx context.Context, addr string) (*fastConn, bool, error) {
	now := time.Now()
	for {
		t.mu.Lock()
		list := t.idle[addr]
		if len(list) == 0 {
			t.mu.Unlock()
			break
		}
		c := list[len(list)-1]
		list[len(list)-1] = nil
		t.idle[addr] = list[:len(list)-1]
		t.mu.Unlock()
		if d := t.std.IdleConnTimeout; d > 0 && now.Sub(c.idleAt) > d {
			c.conn.Close()
			continue
		}
		// Every kept connection is checked before it is used again: one
		// the upstream closed is dropped, and so is one on which the
		// upstream sent anything unasked (an answer to no request must
		// never be read as the answer to this one). Should the upstream
		// close it between the check and the request, nothing will have
		// been read, and the request is sent again on a fresh one.
		if !c.alive() {
			c.conn.Close()
			continue
		}
		return c, true, nil
	}
	dial := t.std.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	nc, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, false, err
	}
	c := &fastConn{addr: addr, conn: nc, br: bufio.NewReaderSize(nc, fastReaderSize)}
	if sc, ok := nc.(syscall.Conn); ok {
		c.raw, _ = sc.SyscallConn()
	}
	return c, false, nil
}

// alive reports whether an idle connection is still open and has sent
// nothing unasked: one peek that does not wait, through the connection's
// raw descriptor (kept from when it was made).
func (c *fastConn) alive() bool {
	if c.raw == nil {
		return true
	}
	ok := false
	err := c.raw.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		ok = n < 0 && (err == syscall.EAGAIN || err == syscall.EWOULDBLOCK)
		return true
	})
	return err == nil && ok
}

// put keeps c for the next request to its upstream, unless the pool for
// that upstream is full.
func (t *fastTransport) put(c *fastConn) {
	max := t.std.MaxIdleConnsPerHost
	if max <= 0 {
		max = http.DefaultMaxIdleConnsPerHost
	}
	c.idleAt = time.Now()
	t.mu.Lock()
	list := t.idle[c.addr]
	if len(list) < max {
		t.idle[c.addr] = append(list, c)
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	c.conn.Close()
}

// CloseIdleConnections closes every kept-alive connection, the standard
// transport's too.
func (t *fastTransport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = map[string][]*fastConn{}
	t.mu.Unlock()
	for _, list := range idle {
		for _, c := range list {
			c.conn.Close()
		}
	}
	t.std.CloseIdleConnections()
}

// fastBody is an answer's body read from a fast connection: read to its
// end, the connection goes back to the pool; closed before that, it is
// closed.
type fastBody struct {
	rc   io.ReadCloser
	ctx  context.Context
	t    *fastTransport
	c    *fastConn
	stop func() bool
	keep bool
	done bool
}

func (b *fastBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.finish(true)
	} else if err != nil {
		b.finish(false)
		if cerr := b.ctx.Err(); cerr != nil {
			err = cerr // the box went away, which ended the read
		}
	}
	return n, err
}

// finish ends the body's hold on its connection: kept when the body was
// read whole and the connection may serve another request.
func (b *fastBody) finish(whole bool) {
	if b.done {
		return
	}
	b.done = true
	stopped := b.stop()
	if whole && b.keep && stopped && b.c.br.Buffered() == 0 {
		b.t.put(b.c)
		return
	}
	b.c.conn.Close()
}

func (b *fastBody) Close() error {
	if !b.done {
		b.finish(false)
	}
	return nil
}
