package server_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// serveH2 runs the real server (server.Serve, with its timeouts) over
// TLS on a loopback port, with a box that reported inference agent, and
// returns its address, the box's token and a client that trusts the
// server's certificate.
func serveH2(t *testing.T, cfg server.Config) (addr, tok string, client *http.Client) {
	t.Helper()
	return serveH2Log(t, cfg, io.Discard)
}

// serveH2Log is serveH2 with the server's log (INFO and above) written
// to logs.
func serveH2Log(t *testing.T, cfg server.Config, logs io.Writer) (addr, tok string, client *http.Client) {
	t.Helper()
	dir := t.TempDir()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	kb, _ := x509.MarshalECPrivateKey(key)
	cfg.TLSCert, cfg.TLSKey = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(cfg.TLSCert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(cfg.TLSKey, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	cfg.DataDir = filepath.Join(dir, "data")
	if cfg.ShutdownGrace == 0 {
		cfg.ShutdownGrace = time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, cfg, server.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	tok, _ = token.NewBox()
	if err := srv.Store.CreateBox(ctx, store.Box{Name: "a", TokenHash: token.Hash(tok), CreatedAt: time.Now(), PayerKind: "shared"}); err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln, nil) }()
	t.Cleanup(func() { cancel(); <-done; srv.Close() })
	addr = ln.Addr().String()
	pool := x509.NewCertPool()
	pool.AddCert(must(x509.ParseCertificate(der)))
	client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	t.Cleanup(client.CloseIdleConnections)
	req, _ := http.NewRequest("POST", "https://"+addr+protocol.RouteDeclaration, strings.NewReader(`{"capabilities":[{"name":"inference","broker":"lobby","scope":["agent"]}]}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := client.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("report: %v %v", resp, err)
	}
	resp.Body.Close()
	return addr, tok, client
}

// h2Dial opens an HTTP/2 connection to addr as a client that writes its
// own frames: TLS with ALPN h2, the preface and an empty SETTINGS frame.
func h2Dial(t *testing.T, addr string) (*tls.Conn, *http2.Framer) {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("ALPN agreed on %q, want h2", p)
	}
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return c, fr
}

// h2Head is the HPACK encoding of a request head.
func h2Head(method, path string, fields ...string) []byte {
	var b bytes.Buffer
	enc := hpack.NewEncoder(&b)
	for _, f := range [][2]string{{":method", method}, {":scheme", "https"}, {":authority", "x"}, {":path", path}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	for i := 0; i+1 < len(fields); i += 2 {
		enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return b.Bytes()
}

// closedWithin reports whether the server closes c within d, reading
// (and dropping) whatever it sends meanwhile.
func closedWithin(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// TestH2_UnfinishedHeaderBlockIsCutOff: an HTTP/2 client that begins a
// request's header block and never ends it (a HEADERS frame without
// END_HEADERS and no CONTINUATION, or empty CONTINUATION frames dripped
// for ever) has its connection closed within a bound set by
// ReadHeaderTimeout, as a slow head is on HTTP/1 (TestSlowLoris), not
// held for the connection's idle timeout; others are served meanwhile.
func TestH2_UnfinishedHeaderBlockIsCutOff(t *testing.T) {
	addr, _, client := serveH2(t, server.Config{ReadHeaderTimeout: 200 * time.Millisecond})
	head := h2Head("GET", "/llm/anthropic/api/hello", "x-slow", strings.Repeat("s", 64))
	t.Run("no continuation", func(t *testing.T) {
		c, fr := h2Dial(t, addr)
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: head[:len(head)/2], EndStream: true}); err != nil {
			t.Fatal(err)
		}
		if !closedWithin(c, 5*time.Second) {
			t.Error("a connection whose header block never ended was still open after 5 s (ReadHeaderTimeout 200 ms)")
		}
	})
	t.Run("continuation dripped", func(t *testing.T) {
		c, fr := h2Dial(t, addr)
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: head[:len(head)/2], EndStream: true}); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
				if fr.WriteContinuation(1, false, nil) != nil {
					return
				}
			}
		}()
		if !closedWithin(c, 5*time.Second) {
			t.Error("a connection dripping empty CONTINUATION frames was still open after 5 s (ReadHeaderTimeout 200 ms)")
		}
	})
	resp, err := client.Get("https://" + addr + "/llm/anthropic/api/hello")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.ProtoMajor != 2 {
		t.Errorf("hello = %d over %s, want 200 over HTTP/2", resp.StatusCode, resp.Proto)
	}
}

// TestH2_ClientsConnectionsDoNotFloodTheLog: what a client does to its
// own HTTP/2 connection (no SETTINGS frame after the preface, no answer
// to a PING, a GOAWAY with an error code and words of its own) is logged
// at DEBUG, never a WARN line (written out at once) per connection, as a
// failed handshake is (TestServe_FailedHandshakesDoNotFloodTheLog).
func TestH2_ClientsConnectionsDoNotFloodTheLog(t *testing.T) {
	var logs syncBuffer
	// Long enough for net/http's 2 s wait for a SETTINGS frame to end
	// before the PING's.
	addr, _, _ := serveH2Log(t, server.Config{ReadHeaderTimeout: 3 * time.Second}, &logs)
	cases := map[string]func(c *tls.Conn, fr *http2.Framer) error{
		"no settings": nil,
		"no ping answer": func(c *tls.Conn, fr *http2.Framer) error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h2Head("GET", "/")[:3], EndStream: true})
		},
		"goaway": func(c *tls.Conn, fr *http2.Framer) error {
			return fr.WriteGoAway(0, http2.ErrCodeProtocol, []byte(strings.Repeat("w", 1000)))
		},
	}
	done := make(chan string, len(cases))
	for name, f := range cases {
		go func() {
			c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
			if err != nil {
				done <- name + ": " + err.Error()
				return
			}
			defer c.Close()
			io.WriteString(c, http2.ClientPreface)
			if f != nil {
				fr := http2.NewFramer(c, c)
				fr.WriteSettings()
				if err := f(c, fr); err != nil {
					done <- name + ": " + err.Error()
					return
				}
			}
			if !closedWithin(c, 15*time.Second) {
				done <- name + ": still open after 15 s"
				return
			}
			done <- ""
		}()
	}
	for range cases {
		if msg := <-done; msg != "" {
			t.Error(msg)
		}
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, `"level":"ERROR"`) {
			t.Errorf("a client's HTTP/2 connection left a line above INFO: %.300s", line)
		}
	}
}
