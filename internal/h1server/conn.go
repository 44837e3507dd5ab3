package h1server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Connection states, for Shutdown.
const (
	stateActive int32 = iota // reading a request's head or serving it
	stateIdle                // waiting for the next request
	stateClosed              // closed by Shutdown or Close
)

var defaultLogf = log.Printf

// aLongTimeAgo is a deadline already passed: setting it ends a read under way.
var aLongTimeAgo = time.Unix(1, 0)

var readBuffers = sync.Pool{New: func() any { return new([HeadBufferSize]byte) }}

// readBuffersHeld counts the read buffers connections hold, for tests.
var readBuffersHeld atomic.Int64

func getReadBuffer() *[HeadBufferSize]byte {
	readBuffersHeld.Add(1)
	return readBuffers.Get().(*[HeadBufferSize]byte)
}

func putReadBuffer(b *[HeadBufferSize]byte) {
	readBuffersHeld.Add(-1)
	readBuffers.Put(b)
}

// conn is one box connection served here.
type conn struct {
	srv    *Server
	rwc    net.Conn
	raw    syscall.RawConn // for the peek while a handler runs; nil if none
	ctx    context.Context
	remote string
	state  atomic.Int32

	// The read buffer: rbuf[r:w] is read and not yet used. It is nil
	// while a handler runs with nothing left to read (see release).
	rbuf *[HeadBufferSize]byte
	r, w int

	// The peek at the socket while a handler runs, which notices the
	// box going away (see watch).
	watchState atomic.Int32 // 0 not started, 1 watching, 2 not wanted
	watchDone  chan struct{}
	watchTimer *time.Timer // starts watch watchAfter after the body is read
	cancel     context.CancelFunc
	gone       atomic.Bool // the box closed its side
	peekFn     func(fd uintptr) bool
	freshFn    func(fd uintptr) bool // c.fresh, made once
	freshN     int
	freshErr   error
	peekedGone bool // the peek saw the box's end of file or an error
	handed     bool // given to the fallback
	linger     bool // closing with a request's body unread: see closeWriteAndWait
}

// serve serves c's requests until it closes or is handed over.
func (c *conn) serve() {
	defer func() {
		if !c.handed {
			if c.linger {
				c.closeWriteAndWait()
			}
			c.rwc.Close()
		}
		c.releaseBuffer()
		c.srv.forget(c)
	}()
	c.remote = c.rwc.RemoteAddr().String()
	if sc, ok := c.rwc.(syscall.Conn); ok {
		c.raw, _ = sc.SyscallConn()
	}
	c.watchDone = make(chan struct{}, 1)
	c.peekFn = c.peek
	c.freshFn = c.fresh
	hs := c.srv.Fallback
	first := true
	for {
		end, ok := c.readHead(first, hs)
		if !ok {
			return
		}
		if !first && !c.state.CompareAndSwap(stateIdle, stateActive) {
			return // closed by Shutdown
		}
		first = false
		ctx, cancel := context.WithCancel(c.ctx)
		req, ok := parseHead(ctx, c.rbuf[c.r:end])
		if !ok {
			cancel()
			c.handOff()
			return
		}
		c.r = end
		if !c.serveRequest(req, cancel) {
			return
		}
		if c.srv.shutting.Load() {
			return
		}
		c.state.Store(stateIdle)
	}
}

// readHead reads until rbuf[c.r:] holds a whole head, and returns where it
// ends. A connection that closes or times out before one arrives ends
// quietly, as with net/http; a head that fills the buffer is handed over.
func (c *conn) readHead(first bool, hs *http.Server) (end int, ok bool) {
	if c.r == c.w {
		c.r, c.w = 0, 0
	}
	waitIdle := !first && c.r == c.w
	if waitIdle {
		d := hs.IdleTimeout
		if d == 0 {
			d = hs.ReadTimeout
		}
		c.readWithin(d)
	} else {
		c.readWithin(headerTimeout(hs))
	}
	searched := c.r
	for {
		var n int
		var err error
		if c.rbuf == nil {
			// Waiting for a request with nothing read: no buffer is held
			// until bytes arrive.
			n, err = c.readFresh()
		} else {
			if i := bytes.Index(c.rbuf[searched:c.w], crlf2); i >= 0 {
				end = searched + i + len(crlf2)
				break
			}
			searched = max(c.r, c.w-len(crlf2)+1)
			if c.w == len(c.rbuf) {
				if c.r == 0 {
					// Too long for this server: the fallback has its own bound.
					c.handOff()
					return 0, false
				}
				n := copy(c.rbuf[:], c.rbuf[c.r:c.w])
				searched -= c.r
				c.r, c.w = 0, n
			}
			n, err = c.rwc.Read(c.rbuf[c.w:])
		}
		if n > 0 && waitIdle {
			// The next request has begun: its head gets the header timeout.
			waitIdle = false
			c.readWithin(headerTimeout(hs))
		}
		c.w += n
		if err != nil {
			if n > 0 || c.w > c.r {
				// A partial head, then an error: the fallback answers a
				// head cut short as it always has; a timeout just ends.
				if !isTimeout(err) {
					c.handOff()
				}
			}
			return 0, false
		}
	}
	_ = c.rwc.SetReadDeadline(time.Time{})
	return end, true
}

var crlf2 = []byte("\r\n\r\n")

// readWithin bounds the connection's reads to d from now; 0 is no bound.
func (c *conn) readWithin(d time.Duration) {
	if d > 0 {
		_ = c.rwc.SetReadDeadline(time.Now().Add(d))
	} else {
		_ = c.rwc.SetReadDeadline(time.Time{})
	}
}

func headerTimeout(hs *http.Server) time.Duration {
	if hs.ReadHeaderTimeout > 0 {
		return hs.ReadHeaderTimeout
	}
	return hs.ReadTimeout
}

// handOff gives the connection, with what was read from it, to the
// fallback server. c is no longer this server's.
func (c *conn) handOff() {
	var pending []byte
	if c.rbuf != nil && c.w > c.r {
		pending = bytes.Clone(c.rbuf[c.r:c.w])
	}
	c.handed = true
	c.releaseBuffer()
	_ = c.rwc.SetReadDeadline(time.Time{})
	c.srv.forget(c)
	c.srv.handoff.give(&prefixConn{Conn: c.rwc, pending: pending})
}

func (c *conn) releaseBuffer() {
	if c.rbuf != nil {
		putReadBuffer(c.rbuf)
		c.rbuf, c.r, c.w = nil, 0, 0
	}
}

// readFresh reads the first bytes of a request into a read buffer taken
// from the pool only once the connection has bytes to read (a keep-alive
// connection waiting for its next request holds none): the same read and
// wait as the connection's own Read, on its raw descriptor. It sets
// c.rbuf, c.r and c.w.
func (c *conn) readFresh() (int, error) {
	if c.raw == nil {
		c.rbuf, c.r, c.w = getReadBuffer(), 0, 0
		return c.rwc.Read(c.rbuf[:])
	}
	c.freshN, c.freshErr = 0, nil
	if err := c.raw.Read(c.freshFn); err != nil {
		return 0, err // the deadline, or the connection closed
	}
	return c.freshN, c.freshErr
}

// fresh is readFresh's read on the descriptor: false (wait) while there
// is nothing to read, with the buffer back in the pool meanwhile.
func (c *conn) fresh(fd uintptr) bool {
	b := getReadBuffer()
	n, err := syscall.Read(int(fd), b[:])
	if err == syscall.EAGAIN || err == syscall.EWOULDBLOCK || err == syscall.EINTR {
		putReadBuffer(b)
		return false
	}
	c.rbuf, c.r, c.w = b, 0, 0
	c.freshN = max(n, 0)
	switch {
	case err != nil:
		c.freshErr = err
	case n == 0:
		c.freshErr = io.EOF
	}
	return true
}

// serveRequest runs the handler for req and finishes its answer; cancel
// ends req's context. It reports whether the connection may serve
// another request.
func (c *conn) serveRequest(req *http.Request, cancel context.CancelFunc) (keep bool) {
	c.cancel = cancel
	req.RemoteAddr = c.remote
	var b *body
	if req.ContentLength > 0 {
		b = &body{c: c, n: req.ContentLength}
		req.Body = b
	} else {
		req.Body = http.NoBody
		c.bodyRead()
	}
	w := newResponse(c, req)
	keep = c.runHandler(w, req)
	if keep {
		w.finish()
	}
	cancel()
	if b != nil && !b.close(keep) {
		keep = false
		c.linger = true
	}
	c.stopWatch()
	if (w.err != nil && w.err != errEnded) || c.gone.Load() {
		keep = false
	}
	if req.Close || w.closeAfter {
		keep = false
	}
	w.release()
	return keep
}

// runHandler calls the handler, and reports false when it panicked
// (http.ErrAbortHandler quietly; anything else logged with its stack).
func (c *conn) runHandler(w *response, req *http.Request) (ok bool) {
	defer func() {
		if err := recover(); err != nil {
			ok = false
			if err != http.ErrAbortHandler {
				const size = 64 << 10
				buf := make([]byte, size)
				buf = buf[:runtime.Stack(buf, false)]
				c.srv.logf("http: panic serving %v: %v\n%s", c.remote, err, buf)
			}
		}
	}()
	c.srv.Fallback.Handler.ServeHTTP(w, req)
	return true
}

// lingerFor is how long a connection closed with a body unread waits for
// the box to read its answer and close (net/http's rstAvoidanceDelay).
const lingerFor = 500 * time.Millisecond

// closeWriteAndWait ends a connection whose box is still sending a body
// nobody will read: closing at once would make the kernel answer the
// unread bytes with a reset, which can reach the box before it has read
// the answer (a 413, say). So the write side is closed first, and what
// the box still sends is read and dropped until it closes or lingerFor
// passes, as net/http's server does.
func (c *conn) closeWriteAndWait() {
	cw, ok := c.rwc.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	_ = c.rwc.SetReadDeadline(time.Now().Add(lingerFor))
	var buf [512]byte
	for {
		if _, err := c.rwc.Read(buf[:]); err != nil {
			return
		}
	}
}

// bodyRead is told that the request's body has been read to its end: with
// nothing more buffered, the read buffer goes back to the pool and the
// peek at the socket begins, so that the box going away cancels the
// request's context.
func (c *conn) bodyRead() {
	if c.rbuf != nil && c.r < c.w {
		return // the next request is already here (pipelined)
	}
	c.releaseBuffer()
	if c.raw == nil {
		return
	}
	c.watchState.Store(0)
	if c.watchTimer == nil {
		c.watchTimer = time.AfterFunc(watchAfter, c.watch)
	} else {
		c.watchTimer.Reset(watchAfter)
	}
}

// watchAfter is how long after its body is read a request's handler runs
// before the peek at the socket begins. Most calls have their answer by
// then and never pay for it; a box gone from a longer one (a model call,
// a stream) is noticed at most this much later than it could be.
const watchAfter = 20 * time.Millisecond

// watch waits until the box's side of the connection becomes readable:
// end of file or an error means the box has gone, and the request's
// context is canceled; bytes (a pipelined request) are left unread.
func (c *conn) watch() {
	if !c.watchState.CompareAndSwap(0, 1) {
		return // the handler finished first
	}
	c.peekedGone = false
	err := c.raw.Read(c.peekFn)
	if c.peekedGone || (err != nil && !isTimeout(err)) {
		c.gone.Store(true)
		c.cancel()
	}
	c.watchDone <- struct{}{}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// peek is watch's read: a one-byte MSG_PEEK that does not wait.
func (c *conn) peek(fd uintptr) bool {
	var b [1]byte
	n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	if err == syscall.EAGAIN || err == syscall.EWOULDBLOCK || err == syscall.EINTR {
		return false
	}
	c.peekedGone = n <= 0 // bytes (a pipelined request) are not the box leaving
	return true
}

// stopWatch ends the peek, if it runs, and waits for it.
func (c *conn) stopWatch() {
	if c.watchTimer != nil {
		c.watchTimer.Stop()
	}
	if c.watchState.CompareAndSwap(0, 2) {
		return // never began (or was never started: state 0 is also the idle state)
	}
	if c.watchState.Load() != 1 {
		return
	}
	_ = c.rwc.SetReadDeadline(aLongTimeAgo)
	<-c.watchDone
	c.watchState.Store(2)
	_ = c.rwc.SetReadDeadline(time.Time{})
}

// body is a request's body of known length, read from the connection's
// buffer and then from the connection.
type body struct {
	c      *conn
	mu     sync.Mutex
	n      int64 // left to read
	closed bool
	err    error
}

func (b *body) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	return b.readLocked(p)
}

func (b *body) readLocked(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.n == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	c := b.c
	var n int
	var err error
	if c.rbuf != nil && c.r < c.w {
		n = copy(p, c.rbuf[c.r:c.w])
		c.r += n
	} else {
		n, err = c.rwc.Read(p)
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
	}
	b.n -= int64(n)
	if err != nil {
		b.err = err
		return n, err
	}
	if b.n == 0 {
		b.err = io.EOF
		c.bodyRead()
		return n, io.EOF
	}
	return n, nil
}

func (b *body) Close() error {
	return nil // the server reads or drops what is left once the handler returns
}

// close ends the body once the handler has returned: what is left unread,
// up to maxDrain, is read and dropped so the connection can be kept. It
// reports whether the connection may be kept.
func (b *body) close(drain bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	if b.err == io.EOF {
		return true
	}
	if !drain || b.err != nil || b.n > maxDrain {
		return false
	}
	b.c.readWithin(headerTimeout(b.c.srv.Fallback))
	buf := make([]byte, min(b.n, 32<<10))
	for b.err == nil {
		_, _ = b.readLocked(buf)
	}
	_ = b.c.rwc.SetReadDeadline(time.Time{})
	return b.err == io.EOF
}
