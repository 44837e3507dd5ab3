package server_test

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/intentius/boxbroker/internal/broker"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
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
	pool := x509.NewCertPool()
	pool.AddCert(must(x509.ParseCertificate(der)))
	client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	t.Cleanup(client.CloseIdleConnections)
	addr, tok = startReal(t, cfg, logs, "https", client)
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

// TestH2_FloodsAreCutOff: floods of HTTP/2 frames, performed against
// the real server: a header block grown without end by CONTINUATION
// frames (CVE-2023-45288) is refused once past MaxHeaderBytes and its
// connection closed (net/http); SETTINGS frames sent by the million by
// a client that reads none of their acknowledgements stall the
// connection (net/http queues at most 10,000 unwritten and stops
// reading), which, silent, is closed within twice ReadHeaderTimeout
// (httpServer's PING); requests opened and reset at once, by the
// thousand (CVE-2023-44487), run at most MaxConcurrentStreams (250)
// handlers at a time (net/http). Others are served throughout.
func TestH2_FloodsAreCutOff(t *testing.T) {
	addr, _, client := serveH2(t, server.Config{MaxHeaderBytes: 16 << 10, ReadHeaderTimeout: time.Second})
	t.Run("continuation", func(t *testing.T) {
		c, fr := h2Dial(t, addr)
		var b bytes.Buffer
		hpack.NewEncoder(&b).WriteField(hpack.HeaderField{Name: "x-flood", Value: strings.Repeat("f", 8<<10)})
		go func() {
			if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h2Head("GET", "/llm/anthropic/api/hello"), EndStream: true}) != nil {
				return
			}
			for range 100_000 { // 800 MiB, were they all read
				if fr.WriteContinuation(1, false, b.Bytes()) != nil {
					return
				}
			}
		}()
		if !closedWithin(c, 30*time.Second) {
			t.Error("a header block grown by CONTINUATION frames was still being read after 30 s")
		}
	})
	t.Run("settings", func(t *testing.T) {
		// A small receive buffer, so that the acknowledgements wait in
		// the server rather than in the kernel.
		raw, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		raw.(*net.TCPConn).SetReadBuffer(4 << 10)
		c := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
		defer c.Close()
		if err := c.Handshake(); err != nil {
			t.Fatal(err)
		}
		w := bufio.NewWriterSize(c, 64<<10)
		io.WriteString(w, http2.ClientPreface)
		fr := http2.NewFramer(w, c)
		wrote := make(chan int, 1)
		go func() {
			n := 0
			for ; n < 2_000_000 && fr.WriteSettings() == nil; n++ {
			}
			w.Flush()
			wrote <- n
		}()
		select { // the frames written before any acknowledgement is read
		case <-wrote:
		case <-time.After(5 * time.Second):
		}
		// Closed within about 2 s of the stall; 30 s tells that apart
		// from the 2-minute idle hold on a machine under load.
		if !closedWithin(c, 30*time.Second) {
			t.Error("a connection sending SETTINGS frames by the million and reading none of their acknowledgements was still open after 35 s (ReadHeaderTimeout 1 s)")
		}
	})
	t.Run("rapid reset", func(t *testing.T) {
		c, fr := h2Dial(t, addr)
		head := h2Head("GET", "/llm/anthropic/api/hello")
		base := runtime.NumGoroutine()
		peak := base
		stop := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			for {
				select {
				case <-stop:
					return
				default:
				}
				peak = max(peak, runtime.NumGoroutine())
				time.Sleep(100 * time.Microsecond)
			}
		}()
		go io.Copy(io.Discard, c) // the server's answers, read so that its writes never wait
		var sent int
		for id := uint32(1); id < 2*20_000; id += 2 {
			if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: head, EndStream: true, EndHeaders: true}) != nil ||
				fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
				break
			}
			sent++
		}
		close(stop)
		<-sampled
		t.Logf("%d requests opened and reset on one connection; goroutines at most %d above the %d before", sent, peak-base, base)
		// Each handler is a goroutine or two; four times
		// MaxConcurrentStreams (250) is far above what the bound lets run.
		if peak-base > 1000 {
			t.Errorf("%d requests opened and reset ran %d goroutines at once, want at most a few per stream the server allows at a time (250)", sent, peak-base)
		}
	})
	resp, err := client.Get("https://" + addr + "/llm/anthropic/api/hello")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("hello after the floods = %d", resp.StatusCode)
	}
}

// TestH2_NeverEndingBody: a report sent over HTTP/2 whose body never
// comes (a HEADERS frame without END_STREAM, no DATA) is answered 400
// once BodyTimeout has passed, as over HTTP/1 (TestNeverEndingBody),
// rather than holding its handler for the connection's life.
func TestH2_NeverEndingBody(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the body timeout")
	}
	addr, tok, _ := serveH2(t, server.Config{})
	c, fr := h2Dial(t, addr)
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true,
		BlockFragment: h2Head("POST", protocol.RouteDeclaration, "authorization", "Bearer "+tok, "content-type", "application/json")}); err != nil {
		t.Fatal(err)
	}
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.SetReadDeadline(time.Now().Add(broker.BodyTimeout + 5*time.Second))
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no answer to a report whose body never came: %v", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				fr.WritePing(true, f.Data)
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID == 1 {
				if s := f.PseudoValue("status"); s != "400" {
					t.Errorf("status %s, want 400", s)
				}
				return
			}
		case *http2.RSTStreamFrame:
			t.Fatalf("stream reset (%v), want a 400", f.ErrCode)
		}
	}
}

// TestH2_PlainListenerSpeaksNoH2c: a plain-HTTP listener answers the
// HTTP/2 preface as HTTP/1.1; HTTP/2 is served only over TLS, where the
// bounds above hold.
func TestH2_PlainListenerSpeaksNoH2c(t *testing.T) {
	addr, _ := serveReal(t, server.Config{})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, http2.ClientPreface)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if !strings.HasPrefix(line, "HTTP/1.1 ") {
		t.Errorf("the HTTP/2 preface on a plain listener was answered %q (%v), want an HTTP/1.1 refusal", line, err)
	}
}
