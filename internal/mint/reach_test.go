//go:build unix

package mint

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/intentius/boxbroker/internal/secrets"
)

// An oauth2 secret's token endpoint named by a name whose DNS answers,
// as the broker connects, with this machine (loopback, 0.0.0.0): the
// mint, with the client secret and refresh token in it, would go to the
// broker's own listeners. The default transport's dialer judges the
// address as egress's does (proxy.Reachable), and connects to none of
// them. On the code before, the connection was made.
func TestMint_TokenEndpointNameIsNeverDialledAtThisMachine(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	kr, err := secrets.New(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []string{"127.0.0.1", "::ffff:127.0.0.1", "0.0.0.0"} {
		t.Run(at, func(t *testing.T) {
			m, err := NewMinter(Config{Keyring: kr, Logger: slog.New(slog.DiscardHandler), resolver: fakeDNS(netip.MustParseAddr(at))})
			if err != nil {
				t.Fatal(err)
			}
			spec, err := Parse(KindOAuth2, []byte(`{"token_url":"https://auth.rebind.example:`+port+`/token","client_id":"c","client_secret":"client-secret-value","refresh_token":"refresh-token-value"}`))
			if err != nil {
				t.Fatal(err)
			}
			before := conns.Load()
			_, err = m.Token(t.Context(), Ref{Box: "b", Name: "API", Of: "x"}, spec.(Minted))
			if err == nil || !strings.Contains(err.Error(), "does not reach by a name") {
				t.Errorf("mint = %v, want the token endpoint's address refused", err)
			}
			if n := conns.Load() - before; n != 0 {
				t.Errorf("the mint made %d connections to this machine through a name answering %s", n, at)
			}
		})
	}
}

// fakeDNS is a resolver whose every query is answered, in this process,
// with the addresses of addrs of the family asked for.
func fakeDNS(addrs ...netip.Addr) *net.Resolver {
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
