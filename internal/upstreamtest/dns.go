package upstreamtest

import (
	"context"
	"encoding/binary"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// FakeDNS is a resolver whose every query is answered, in this process,
// with the addresses of addrs of the family asked for: a name whose DNS
// someone else keeps, answering what they like.
func FakeDNS(addrs ...netip.Addr) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		c, s := net.Pipe()
		go serveDNS(s, addrs)
		return c, nil
	}}
}

// serveDNS answers the queries read from c, framed as over TCP, until c
// is closed.
func serveDNS(c net.Conn, addrs []netip.Addr) {
	defer c.Close()
	for {
		var n [2]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			return
		}
		q := make([]byte, binary.BigEndian.Uint16(n[:]))
		if _, err := io.ReadFull(c, q); err != nil {
			return
		}
		var m dnsmessage.Message
		if err := m.Unpack(q); err != nil || len(m.Questions) != 1 {
			return
		}
		qn := m.Questions[0]
		m.Header.Response, m.Header.Authoritative = true, true
		for _, a := range addrs {
			h := dnsmessage.ResourceHeader{Name: qn.Name, Type: qn.Type, Class: dnsmessage.ClassINET, TTL: 1}
			switch {
			case qn.Type == dnsmessage.TypeA && a.Is4():
				m.Answers = append(m.Answers, dnsmessage.Resource{Header: h, Body: &dnsmessage.AResource{A: a.As4()}})
			case qn.Type == dnsmessage.TypeAAAA && a.Is6():
				m.Answers = append(m.Answers, dnsmessage.Resource{Header: h, Body: &dnsmessage.AAAAResource{AAAA: a.As16()}})
			}
		}
		b, err := m.Pack()
		if err != nil {
			return
		}
		if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(b))), b...)); err != nil {
			return
		}
	}
}

// Listening starts a server on loopback, over TLS when tls is true (its
// handshakes' failures not logged), that counts the connections made to
// it and answers "inside"; it is closed when t ends. It returns the count
// and the server's port: a name FakeDNS answers with loopback, at that
// port, reaches it, and the count says whether anything connected.
func Listening(t testing.TB, tls bool) (*atomic.Int32, string) {
	t.Helper()
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "inside") }))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	return &conns, port
}
