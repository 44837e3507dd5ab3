//go:build unix

package egress

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/upstreamtest"
)

// TestTransport_NameIsNeverDialledAtThisMachineOrTheMetadataService: a
// secret's host is a name whose DNS answers, when the broker connects,
// with this machine's loopback, 0.0.0.0 (which Linux connects to as this
// machine), link-local (the cloud metadata service) or a metadata
// address elsewhere, or one of them written in IPv6 (IPv4-mapped,
// NAT64): the request, with the secret's value in it, would go to the
// broker's own listeners, or fetch the broker's cloud credentials for
// the box. Egress's dialer judges the address it is about to connect to,
// and connects to none of them; localhost and an address the secret
// names itself are still reached.
func TestTransport_NameIsNeverDialledAtThisMachineOrTheMetadataService(t *testing.T) {
	conns, port := upstreamtest.Listening(t, false)
	refused := []string{"127.0.0.1", "127.0.0.2", "0.0.0.0", "::1", "::ffff:127.0.0.1", "64:ff9b::7f00:1", "2002:7f00:1::1",
		"169.254.169.254", "::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe", "fe80::1", "fd00:ec2::254", "100.100.100.200"}
	for _, at := range refused {
		t.Run(at, func(t *testing.T) {
			tr := newTransport(proxy.TransportOptions{Resolver: upstreamtest.FakeDNS(netip.MustParseAddr(at)), DialTimeout: 5 * time.Second})
			defer tr.CloseIdleConnections()
			u, _ := url.Parse("http://api.rebind.example:" + port)
			ctx := context.WithValue(t.Context(), ctxKey{}, &flight{target: u, addr: dialAddr(u)})
			before := conns.Load()
			c, err := tr.DialContext(ctx, "tcp", u.Host)
			if err == nil {
				c.Close()
			}
			if !errors.Is(err, errAddress) {
				t.Errorf("dial %s at %s = %v, want errAddress", u.Host, at, err)
			}
			if n := conns.Load() - before; n != 0 {
				t.Errorf("%d connections reached this machine", n)
			}
		})
	}
	for _, host := range []string{"localhost", "LocalHost.", "127.0.0.1"} {
		tr := newTransport(proxy.TransportOptions{Resolver: upstreamtest.FakeDNS(netip.MustParseAddr("127.0.0.1"))})
		u := &url.URL{Scheme: "http", Host: net.JoinHostPort(host, port)}
		ctx := context.WithValue(t.Context(), ctxKey{}, &flight{target: u, addr: dialAddr(u)})
		c, err := tr.DialContext(ctx, "tcp", u.Host)
		if err != nil {
			t.Errorf("dial %s = %v, want it reached", u.Host, err)
			continue
		}
		c.Close()
		tr.CloseIdleConnections()
	}
}

// TestEgress_SecretsHostAnsweringWithThisMachineIsRefused: the same through
// egress, with a secret whose host's name answers with loopback: a 403
// naming the capability's word for it, host, which tells the box
// nothing of the address, and nothing reaches the machine.
func TestEgress_SecretsHostAnsweringWithThisMachineIsRefused(t *testing.T) {
	conns, port := upstreamtest.Listening(t, false)
	kr, err := secretsKeyring()
	if err != nil {
		t.Fatal(err)
	}
	st := &benchStore{secs: map[string]map[string]store.Secret{"shop": {}}}
	c, err := New(Config{Secrets: st, List: st, Keyring: kr, Logger: slog.New(slog.DiscardHandler),
		TransportOptions: proxy.TransportOptions{Resolver: upstreamtest.FakeDNS(netip.MustParseAddr("127.0.0.1"))}})
	if err != nil {
		t.Fatal(err)
	}
	value := "sk_live_" + strings.Repeat("v", 24)
	sealed, err := kr.Seal([]byte(value), secretAD("shop", "API"))
	if err != nil {
		t.Fatal(err)
	}
	sec := store.Secret{Box: "shop", Name: "API", Host: "http://api.rebind.example:" + port, Sealed: sealed}
	st.secs["shop"]["API"] = sec
	token := "bbx_" + strings.Repeat("t", 43)
	r := httptest.NewRequest(http.MethodGet, "/egress/API/latest/meta-data/iam/security-credentials/", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	w := httptest.NewRecorder()
	if err := c.Forward(w, r, "shop", token, "", sec, "/latest/meta-data/iam/security-credentials/"); err != nil {
		t.Fatal(err)
	}
	var refusal struct {
		Type  string
		Error struct{ Type, Message string }
	}
	if err := json.Unmarshal(w.Body.Bytes(), &refusal); err != nil || w.Code != http.StatusForbidden || refusal.Type != "error" || refusal.Error.Type != "permission_error" {
		t.Errorf("answer = %d %s, want a 403 refusal", w.Code, w.Body)
	}
	if strings.Contains(w.Body.String(), "127.0.0.1") || strings.Contains(w.Body.String(), "inside") {
		t.Errorf("answer = %s; it tells the box the address or what is there", w.Body)
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("%d connections reached this machine", n)
	}
}
