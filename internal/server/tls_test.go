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
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/server"
)

// TestServe_TLS serves with --tls-cert/--tls-key and refuses TLS 1.1.
func TestServe_TLS(t *testing.T) {
	dir := t.TempDir()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	kb, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)

	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, server.Config{DataDir: dir, TLSCert: certFile, TLSKey: keyFile, ShutdownGrace: time.Second},
		server.Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln, nil) }()
	defer func() { cancel(); <-done }()

	pool := x509.NewCertPool()
	pool.AddCert(must(x509.ParseCertificate(der)))
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Get("https://" + ln.Addr().String() + "/llm/anthropic/api/hello")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("hello over TLS = %d", resp.StatusCode)
	}
	h2 := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	resp, err = h2.Get("https://" + ln.Addr().String() + "/llm/anthropic/api/hello")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.ProtoMajor != 2 {
		t.Errorf("hello from an HTTP/2 client = %d over %s, want 200 over HTTP/2", resp.StatusCode, resp.Proto)
	}
	old := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MaxVersion: tls.VersionTLS11}}}
	if _, err := old.Get("https://" + ln.Addr().String() + "/llm/anthropic/api/hello"); err == nil {
		t.Error("a TLS 1.1 client was served")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestConfig_ValidateReportsEveryProblem(t *testing.T) {
	cfg := server.Config{Listen: "nonsense", Broker: "two words", TLSCert: "x", LogLevel: "loud", Store: "mysql://x"}
	cfg.Defaults()
	err := cfg.Validate()
	if err == nil {
		t.Fatal("Validate accepted a bad config")
	}
	for _, want := range []string{"listen", "broker word", "tls-cert", "log level", "store"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %q, does not mention %q", err, want)
		}
	}
}

// TestServe_FailedHandshakesDoNotFloodTheLog: a client with no token
// opening connections to the TLS listener and never completing a
// handshake (closing at once, speaking plain HTTP, offering TLS 1.1, or
// agreeing on HTTP/2 and sending no HTTP/2 preface) has each failure
// logged at DEBUG, never a WARN line (each written out
// at once) per connection: a request with no token is kept in aggregate,
// and a connection that never becomes one is not a warning either.
func TestServe_FailedHandshakesDoNotFloodTheLog(t *testing.T) {
	dir := t.TempDir()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	kb, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)

	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, server.Config{DataDir: dir, TLSCert: certFile, TLSKey: keyFile, ShutdownGrace: time.Second},
		server.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))}) // INFO and above
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln, nil) }()
	defer func() { cancel(); <-done }()

	const n = 50
	for i := range n {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		switch i % 4 {
		case 0: // closed at once
		case 1: // plain HTTP
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			io.Copy(io.Discard, c)
		case 2: // TLS 1.1
			tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS11})
			tc.Handshake()
		case 3: // HTTP/2 agreed, then no HTTP/2 preface
			tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
			if tc.Handshake() == nil {
				io.WriteString(tc, "PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n")
				io.Copy(io.Discard, tc)
			}
		}
		c.Close()
	}
	// A request served after them is logged (its line at INFO), so the
	// handshakes' are in the log by then if they are at all.
	pool := x509.NewCertPool()
	pool.AddCert(must(x509.ParseCertificate(der)))
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	for i := 0; i < 50 && !strings.Contains(logs.String(), "from 127.0.0.1") && !strings.Contains(logs.String(), `"msg":"request"`); i++ {
		resp, err := client.Get("https://" + ln.Addr().String() + "/llm/anthropic/api/hello")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		time.Sleep(150 * time.Millisecond) // the log's buffer is written out every 100 ms
	}
	if got := strings.Count(logs.String(), "from 127.0.0.1") + strings.Count(logs.String(), "from client 127.0.0.1"); got > 0 {
		t.Errorf("%d connections that failed their handshake left %d lines at INFO or above, want none:\n%.2000s", n, got, logs.String())
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
