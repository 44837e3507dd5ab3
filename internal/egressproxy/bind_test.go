package egressproxy_test

import (
	"bufio"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// connectFrom sends CONNECT f.host through the proxy from ip with tok,
// and returns the answer's status and body.
func connectFrom(t *testing.T, f *fixture, ip, tok string) (int, string) {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", f.proxy.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	auth := base64.StdEncoding.EncodeToString([]byte("box:" + tok))
	if _, err := io.WriteString(c, "CONNECT "+f.host+" HTTP/1.1\r\nHost: "+f.host+"\r\nProxy-Authorization: Basic "+auth+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: "CONNECT"})
	if err != nil {
		t.Fatalf("CONNECT from %s: %v", ip, err)
	}
	body := ""
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
	}
	return resp.StatusCode, body
}

// TestProxy_TokenFromOutsideItsAddressesIsRefused: the proxy judges a
// box's binding at CONNECT by where the CONNECT came from: a box bound
// to 127.0.0.1 opens a tunnel from there, and its token from 127.0.0.2
// is refused with a 403 saying why.
func TestProxy_TokenFromOutsideItsAddressesIsRefused(t *testing.T) {
	f := newFixture(t)
	if err := f.b.Server.Store.BindBox(t.Context(), "shop", []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}); err != nil {
		t.Fatal(err)
	}
	f.b.Sync()
	if status, body := connectFrom(t, f, "127.0.0.2", f.token); status != http.StatusForbidden || !strings.Contains(body, "outside its box's addresses") {
		t.Errorf("CONNECT from 127.0.0.2 = %d %s, want 403 saying the token was used from outside its box's addresses", status, body)
	}
	if status, body := connectFrom(t, f, "127.0.0.1", f.token); status != http.StatusOK {
		t.Errorf("CONNECT from 127.0.0.1 = %d %s, want 200", status, body)
	}
	resp, err := f.client(t, f.token, f.caPool, false).Get("https://" + f.host + "/v1/bound")
	if err != nil {
		t.Fatalf("a request through a tunnel from 127.0.0.1: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a request through a tunnel from 127.0.0.1 = %d, want 200", resp.StatusCode)
	}
}
