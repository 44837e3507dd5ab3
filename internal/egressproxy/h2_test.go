package egressproxy_test

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/intentius/boxbroker/internal/egressproxy"
)

// TestProxy_UnfinishedH2HeaderBlockIsCutOff: a box that speaks HTTP/2 in
// an intercepted tunnel and begins a request's header block without ever
// ending it (a HEADERS frame without END_HEADERS, no CONTINUATION) has
// the tunnel closed within a bound set by ReadHeaderTimeout, as a slow
// head is on HTTP/1, not held for the tunnel's idle timeout.
func TestProxy_UnfinishedH2HeaderBlockIsCutOff(t *testing.T) {
	f := newFixtureProxy(t, nil, nil, func(c *egressproxy.Config) {
		c.ReadHeaderTimeout = 200 * time.Millisecond
		c.IdleTimeout = time.Minute
	})
	resp, _, c := connect(t, f, f.host, basic(f.token))
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT = %d, want 200", resp.StatusCode)
	}
	tc := tls.Client(c, &tls.Config{ServerName: "example.com", RootCAs: f.caPool, NextProtos: []string{"h2"}})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("ALPN agreed on %q, want h2", p)
	}
	if _, err := io.WriteString(tc, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(tc, tc)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var head bytes.Buffer
	enc := hpack.NewEncoder(&head)
	for _, hf := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "example.com"}, {":path", "/v1/x"}} {
		enc.WriteField(hpack.HeaderField{Name: hf[0], Value: hf[1]})
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: head.Bytes()[:head.Len()/2], EndStream: true}); err != nil {
		t.Fatal(err)
	}
	tc.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := io.Copy(io.Discard, tc)
	if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		t.Error("a tunnel whose HTTP/2 header block never ended was still open after 5 s (ReadHeaderTimeout 200 ms)")
	}
}
