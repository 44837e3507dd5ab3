//go:build unix

package mint

import (
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/upstreamtest"
)

// An oauth2 secret's token endpoint named by a name whose DNS answers,
// as the broker connects, with this machine (loopback, 0.0.0.0): the
// mint, with the client secret and refresh token in it, would go to the
// broker's own listeners. The default transport's dialer judges the
// address as egress's does (proxy.Reachable), and connects to none of
// them. On the code before, the connection was made.
func TestMint_TokenEndpointNameIsNeverDialledAtThisMachine(t *testing.T) {
	conns, port := upstreamtest.Listening(t, true)
	kr, err := secrets.New(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []string{"127.0.0.1", "::ffff:127.0.0.1", "0.0.0.0"} {
		t.Run(at, func(t *testing.T) {
			m, err := NewMinter(Config{Keyring: kr, Logger: slog.New(slog.DiscardHandler), resolver: upstreamtest.FakeDNS(netip.MustParseAddr(at))})
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

// A token endpoint answering a header without end (here 256 KiB of it)
// with its token: the mint, made through the default transport, would
// hold all of it. The default transport is proxy.NewTransport's, whose
// bound on an answer's header (proxy.MaxResponseHeaderBytes) every other
// upstream's answer is held to: the mint fails, with no token. On the
// code before (a transport built by hand, bounded at net/http's 10 MiB),
// the token was taken.
func TestMint_TokenEndpointAnswerHeaderIsBounded(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Padding", strings.Repeat("a", 4*proxy.MaxResponseHeaderBytes))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"access_token":"minted-token-value","token_type":"bearer","expires_in":3600}`)
	}))
	defer srv.Close()
	kr, err := secrets.New(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMinter(Config{Keyring: kr, Logger: slog.New(slog.DiscardHandler), roots: roots(srv)})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := Parse(KindOAuth2, []byte(`{"token_url":"`+srv.URL+`/token","client_id":"c","client_secret":"client-secret-value","refresh_token":"refresh-token-value"}`))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := m.Token(t.Context(), Ref{Box: "b", Name: "API", Of: "x"}, spec.(Minted))
	if err == nil || tok.Value != "" {
		t.Errorf("Token(header of %d bytes) = %q, %v; want no token, an error", 4*proxy.MaxResponseHeaderBytes, tok.Value, err)
	}
}

// roots is a pool holding srv's certificate.
func roots(srv *httptest.Server) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(srv.Certificate())
	return p
}
