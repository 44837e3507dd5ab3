// Package h1server serves the box-facing listener's plain HTTP/1.1 with
// less per-request and per-connection work than net/http's server, and
// hands every connection it does not take, whole, to a net/http server.
//
// It takes only the common case: a request line "METHOD /path HTTP/1.1",
// plain header fields, one Host, at most one Content-Length and no
// Transfer-Encoding, Expect, Upgrade or Pragma, the whole head within
// HeadBufferSize. Anything else — another protocol version, a chunked or
// ambiguous body, a head that does not parse, a long head — goes, with
// the bytes already read, to the Fallback http.Server, which serves that
// connection from then on exactly as it would have from its start, with
// its own limits and error answers. Every head this server accepts,
// net/http would accept the same way (held by a differential fuzz test).
//
// What it saves: a connection holds no read buffer while its handler
// runs once the request's body is read, nor while it waits for its next
// request, and no write buffer between flushes, so an open event stream
// holds a goroutine, its request and little else; and a call's answer
// goes out in one write with its head.
//
// Semantics kept from net/http's server: keep-alive with Connection:
// close either way; the request's context canceled when the handler
// returns or the box goes away (a peek at the socket while the handler
// runs, from watchAfter after the body is read: most calls are answered
// before and never pay for it); Content-Length set for an answer the
// handler finished within the buffer, chunked encoding otherwise, with
// trailers (declared, or by http.TrailerPrefix); a Date header; the
// Content-Type sniffed when the handler sets none; no body for HEAD,
// 1xx, 204 and 304; informational answers by WriteHeader(1xx); an
// unread body of up to 256 KiB drained so the connection can be kept;
// http.ErrAbortHandler and other panics end the connection; a body left
// unread ends it with its write side closed first and what still comes
// read and dropped for a moment, so the box is not reset before it has
// read the answer; Flush,
// SetReadDeadline and SetWriteDeadline through http.ResponseController;
// the header-read and idle timeouts; graceful Shutdown.
package h1server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// HeadBufferSize is a connection's read buffer: a request's head must fit
// in it to be served here (longer ones go to the fallback).
const HeadBufferSize = 4 << 10

// maxDrain is how much of a body the handler left unread is read and
// dropped so that the connection can be kept (net/http's figure).
const maxDrain = 256 << 10

// Server serves HTTP/1.1 connections for Fallback.Handler.
type Server struct {
	// Fallback is the net/http server whose Handler, ReadHeaderTimeout,
	// IdleTimeout, ErrorLog and BaseContext this server uses, and which
	// serves every connection handed over.
	Fallback *http.Server

	handoff *chanListener

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	started   bool // the fallback serves handoff
	shutting  atomic.Bool
}

// New returns a Server for hs.
func New(hs *http.Server) *Server {
	return &Server{
		Fallback:  hs,
		handoff:   newChanListener(),
		listeners: map[net.Listener]struct{}{},
		conns:     map[*conn]struct{}{},
	}
}

// Serve accepts connections on ln and serves each until ln fails or the
// server shuts down (http.ErrServerClosed).
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.shutting.Load() {
		s.mu.Unlock()
		return http.ErrServerClosed
	}
	s.listeners[ln] = struct{}{}
	if !s.started {
		s.started = true
		s.handoff.addr = ln.Addr()
		// It returns only when the handoff listener closes, at shutdown.
		go func() { _ = s.Fallback.Serve(s.handoff) }()
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
	}()
	base := context.Background()
	if s.Fallback.BaseContext != nil {
		if base = s.Fallback.BaseContext(ln); base == nil {
			panic("h1server: BaseContext returned a nil context")
		}
	}
	base = context.WithValue(base, http.ServerContextKey, s.Fallback)
	var backoff time.Duration
	for {
		rw, err := ln.Accept()
		if err != nil {
			if s.shutting.Load() {
				return http.ErrServerClosed
			}
			var te interface{ Temporary() bool }
			if errors.As(err, &te) && te.Temporary() { // out of descriptors, and the like
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.logf("h1server: accept error: %v; retrying in %v", err, backoff)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		c := s.newConn(rw, base)
		if c == nil {
			continue
		}
		go c.serve()
	}
}

// newConn tracks a new connection, or closes it when shutting down.
func (s *Server) newConn(rw net.Conn, base context.Context) *conn {
	c := &conn{srv: s, rwc: rw}
	c.ctx = context.WithValue(base, http.LocalAddrContextKey, rw.LocalAddr())
	c.state.Store(stateActive)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shutting.Load() {
		rw.Close()
		return nil
	}
	s.conns[c] = struct{}{}
	return c
}

func (s *Server) forget(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// Shutdown stops accepting, closes idle connections, lets each active one
// finish its request and then closes it, and shuts the fallback down,
// until all are done or ctx ends (its error returned).
func (s *Server) Shutdown(ctx context.Context) error {
	s.beginShutdown()
	errc := make(chan error, 1)
	go func() { errc <- s.Fallback.Shutdown(ctx) }()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if s.closeIdle() {
			break
		}
		select {
		case <-ctx.Done():
			<-errc
			return ctx.Err()
		case <-tick.C:
		}
	}
	return <-errc
}

// Close closes the listeners and every connection at once, the fallback's
// too.
func (s *Server) Close() error {
	s.beginShutdown()
	s.mu.Lock()
	for c := range s.conns {
		c.state.Store(stateClosed)
		c.rwc.Close()
	}
	s.mu.Unlock()
	return s.Fallback.Close()
}

func (s *Server) beginShutdown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shutting.Swap(true) {
		return
	}
	for ln := range s.listeners {
		ln.Close()
	}
	if !s.started {
		// Serve was never called: the fallback's Shutdown must not wait
		// for a Serve that will not come.
		s.handoff.Close()
	}
}

// closeIdle closes the connections waiting for a request and reports
// whether none is left.
func (s *Server) closeIdle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.state.CompareAndSwap(stateIdle, stateClosed) {
			c.rwc.Close()
		}
	}
	return len(s.conns) == 0
}

func (s *Server) logf(format string, args ...any) {
	if l := s.Fallback.ErrorLog; l != nil {
		l.Printf(format, args...)
		return
	}
	defaultLogf(format, args...)
}

// chanListener is the fallback's listener: the connections handed over.
type chanListener struct {
	addr   net.Addr
	ch     chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newChanListener() *chanListener {
	return &chanListener{ch: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *chanListener) Addr() net.Addr {
	if l.addr == nil {
		return &net.TCPAddr{}
	}
	return l.addr
}

// give hands c to the fallback, or closes it if the fallback has stopped.
func (l *chanListener) give(c net.Conn) {
	select {
	case l.ch <- c:
	case <-l.closed:
		c.Close()
	}
}

// prefixConn is a connection handed over with the bytes already read from
// it, which its first reads return.
type prefixConn struct {
	net.Conn
	pending []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// CloseWrite half-closes a TCP connection, as net/http does after an
// error answer.
func (c *prefixConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
