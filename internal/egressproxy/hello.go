package egressproxy

import (
	"bytes"
	"crypto/tls"
	"errors"
	"net"
)

// helloGate is a passthrough tunnel's client connection, read by the
// splice: its first Read reads the client's TLS ClientHello through
// crypto/tls's own parser, and ends the tunnel when the server name the
// hello asks for is not the CONNECT's host. A passthrough tunnel is
// judged by its CONNECT's host; a client that asks the server at that
// host's address for another name (as a CDN or a shared front end
// serves many, or a name the box controls answers with another host's
// address) would reach that other host unread, a host a secret of the
// box may be pinned to. What it read is then given to the splice first,
// untouched. A hello with no server name (an IP literal), and a client
// that does not open with TLS, go through as they are.
type helloGate struct {
	net.Conn
	// host is the CONNECT's host, as hostName writes it.
	host string
	// peeked is set once the first Read has read the hello; held is what
	// it read and Read has not yet returned; refused is set when the
	// hello named another host. All are used by the one goroutine that
	// reads, and read by the caller once the splice has ended.
	peeked  bool
	held    []byte
	refused bool
}

// errServerName ends a tunnel whose TLS server name is not its host.
var errServerName = errors.New("the TLS server name is not the CONNECT's host")

func (g *helloGate) Read(b []byte) (int, error) {
	if !g.peeked {
		g.peeked = true
		if err := g.peek(); err != nil {
			return 0, err
		}
	}
	if len(g.held) > 0 {
		n := copy(b, g.held)
		g.held = g.held[n:]
		return n, nil
	}
	return g.Conn.Read(b)
}

// peek reads the client's hello (within the read deadline the splice
// set) and keeps every byte it read in held.
func (g *helloGate) peek() error {
	rec := &recording{Conn: g.Conn}
	var name string
	hello := false
	stop := errors.New("hello read")
	err := tls.Server(rec, &tls.Config{GetConfigForClient: func(chi *tls.ClientHelloInfo) (*tls.Config, error) {
		name, hello = chi.ServerName, true
		return nil, stop
	}}).Handshake()
	g.held = rec.read.Bytes()
	var notTLS tls.RecordHeaderError
	switch {
	case hello && name != "" && hostName(name) != g.host:
		g.refused = true
		return errServerName
	case hello || errors.As(err, &notTLS):
		return nil
	}
	// The client ended, or went idle, before its hello was whole.
	return err
}

// recording is a connection read through crypto/tls to find a hello:
// it keeps what it reads, and writes nothing (the alert a handshake
// stopped early sends never reaches the client).
type recording struct {
	net.Conn
	read bytes.Buffer
}

func (r *recording) Read(b []byte) (int, error) {
	n, err := r.Conn.Read(b)
	r.read.Write(b[:n])
	return n, err
}

func (r *recording) Write(b []byte) (int, error) { return len(b), nil }

func (r *recording) Close() error { return nil }
