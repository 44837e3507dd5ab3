package server_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// streamUpstreamEnv makes the test binary a stand-in upstream that holds
// every Messages call as an open event stream: TestIdleStreamMemory runs
// it in its own process, so that its goroutines are not counted.
const streamUpstreamEnv = "BOXBROKER_TEST_STREAM_UPSTREAM"

func init() {
	if os.Getenv(streamUpstreamEnv) == "" {
		return
	}
	hold := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, smallAnswer)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	plain := httptest.NewServer(hold)
	h2 := httptest.NewUnstartedServer(hold)
	h2.EnableHTTP2 = true
	h2.StartTLS()
	// The parent reads both URLs and the TLS server's certificate.
	fmt.Println(plain.URL, h2.URL, base64.StdEncoding.EncodeToString(h2.Certificate().Raw))
	_, _ = io.Copy(io.Discard, os.Stdin) // ends with its parent
	os.Exit(0)
}

// TestIdleStreamMemory holds open event streams through the broker, from
// a client that keeps no goroutine per stream to an upstream in another
// process, and reports the broker's goroutines, stack and heap per
// stream. The stack is read before any collection, as a server holding
// idle streams has it (a collection shrinks stacks, and an idle server
// seldom collects).
func TestIdleStreamMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("holds streams open")
	}
	plain, secure, cert := standInUpstream(t)
	f := []string{plain, secure}
	t.Run("HTTP/1.1 upstream", func(t *testing.T) { idleStreams(t, f[0], nil, 0) })
	t.Run("HTTP/2 upstream", func(t *testing.T) {
		// The standard transport, as server.New makes it, trusting the stand-in.
		tr := proxy.NewTransport(proxy.TransportOptions{})
		pool := x509.NewCertPool()
		pool.AddCert(cert)
		tr.TLSClientConfig = &tls.Config{RootCAs: pool}
		tr.ForceAttemptHTTP2 = true
		idleStreams(t, f[1], tr, 0)
	})
	// An agent's stream: its 200 KiB request was read whole before the
	// answer began, and nothing keeps it while the answer streams.
	t.Run("HTTP/1.1 upstream, 200 KiB requests", func(t *testing.T) { idleStreams(t, f[0], nil, 200<<10) })
}

// smallAnswer is a Messages answer of the usual size.
const smallAnswer = `{"id":"msg_bench","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hello from the stand-in."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":6}}`

// standInUpstream starts the test binary as a stand-in Anthropic API in
// its own process, and returns its plain and TLS (HTTP/2) URLs and the
// TLS server's certificate. It answers a Messages call, and holds a
// streamed one open after its first event.
func standInUpstream(tb testing.TB) (plain, secure string, cert *x509.Certificate) {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), streamUpstreamEnv+"=1")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { stdin.Close(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	f := strings.Fields(line)
	if err != nil || len(f) != 3 {
		tb.Fatalf("upstream: %q %v", line, err)
	}
	der, err := base64.StdEncoding.DecodeString(f[2])
	if err != nil {
		tb.Fatal(err)
	}
	if cert, err = x509.ParseCertificate(der); err != nil {
		tb.Fatal(err)
	}
	return f[0], f[1], cert
}

// startBroker serves a broker, on loopback, whose Anthropic upstream is
// upstream, reached over transport (nil: the broker's own), with one box
// whose report allows agent. It returns the broker's address and the
// box's token; the broker stops when tb ends.
func startBroker(tb testing.TB, upstream string, transport http.RoundTripper) (addr, token string) {
	tb.Helper()
	up, _ := url.Parse(upstream)
	ctx, cancel := context.WithCancel(context.Background())
	cfg := server.Config{Broker: "lobby", DataDir: tb.TempDir(), AnthropicURL: up, ShutdownGrace: time.Second, BoxConcurrent: 100000}
	// The logger serve uses, writing to nowhere.
	log, _ := server.NewLogger(io.Discard, "info")
	srv, err := server.New(ctx, cfg, server.Options{Logger: log, Transport: transport})
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	token = seedBox(tb, srv, "stream", `{"capabilities":[{"name":"inference","broker":"lobby","scope":["agent"]}]}`)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln, nil) }()
	tb.Cleanup(func() { cancel(); <-done; srv.Close() })
	return ln.Addr().String(), token
}

// idleStreams measures streams through a broker whose Anthropic upstream is
// upstream, reached over transport (nil: the broker's own), each request
// padded with pad bytes. With a pad, it fails if a stream's live heap is
// not well under the pad: the request's body is not kept while the
// answer streams.
func idleStreams(t *testing.T, upstream string, transport http.RoundTripper, pad int) {
	streams := 300
	if pad > 0 {
		streams = 100
	}
	addr, b := startBroker(t, upstream, transport)
	body := `{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"Hello` + strings.Repeat("x", pad) + `"}]}`
	req := "POST " + protocol.PrefixAnthropic + "/v1/messages HTTP/1.1\r\nHost: broker\r\nX-Api-Key: " + b +
		"\r\nAnthropic-Version: 2023-06-01\r\nContent-Type: application/json\r\nContent-Length: " +
		fmt.Sprint(len(body)) + "\r\n\r\n" + body
	open := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("stream: %v", err)
			}
			if strings.HasPrefix(l, "HTTP/1.1 ") && !strings.HasPrefix(l, "HTTP/1.1 200") {
				t.Fatalf("stream answered %q", l)
			}
			if strings.HasPrefix(l, "event: message_start") {
				return c
			}
		}
	}
	// A few streams first, so that pools and caches are warm.
	for i := 0; i < 5; i++ {
		open().Close()
	}
	time.Sleep(100 * time.Millisecond)
	runtime.GC()
	runtime.GC()
	var before, holding runtime.MemStats
	runtime.ReadMemStats(&before)
	g0 := runtime.NumGoroutine()
	conns := make([]net.Conn, 0, streams)
	for i := 0; i < streams; i++ {
		conns = append(conns, open())
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	time.Sleep(100 * time.Millisecond)
	runtime.ReadMemStats(&holding)
	g1 := runtime.NumGoroutine()
	stack := float64(holding.StackInuse-before.StackInuse) / float64(streams)
	runtime.GC()
	if path := os.Getenv("BOXBROKER_TEST_HEAPPROFILE"); path != "" {
		// What holds the streams' heap, for go tool pprof.
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		_ = pprof.WriteHeapProfile(f)
		f.Close()
	}
	var live runtime.MemStats
	runtime.ReadMemStats(&live)
	heap := float64(int64(live.HeapAlloc)-int64(before.HeapAlloc)) / float64(streams)
	t.Logf("per idle stream: %.2f goroutines, stack %.1f KiB (before any collection), live heap %.1f KiB (the client's connection included)",
		float64(g1-g0)/float64(streams), stack/1024, heap/1024)
	if pad > 0 && heap > float64(pad)/2 {
		t.Errorf("a stream whose request was %d KiB holds %.1f KiB of live heap: its body is kept while it streams", pad>>10, heap/1024)
	}
}

// seedBox adds a box whose last report is report, and the shared
// Anthropic credential, and returns the box's token.
func seedBox(t testing.TB, srv *server.Server, name, report string) string {
	t.Helper()
	ctx := context.Background()
	tok, err := token.NewBox()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Store.CreateBox(ctx, store.Box{Name: name, TokenHash: token.Hash(tok), CreatedAt: time.Now(), PayerKind: protocol.PayerShared}); err != nil {
		t.Fatal(err)
	}
	sealed, err := srv.Keyring.Seal([]byte("sk-ant-api03-stream-test"), payer.AD(payer.SharedAnthropic))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Store.SetCredential(ctx, store.Credential{ID: payer.SharedAnthropic, Sealed: sealed, UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, protocol.RouteDeclaration, strings.NewReader(report))
	req.Header.Set("Authorization", "Bearer "+tok)
	rec := httptest.NewRecorder()
	srv.Handler.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("report: %d %s", rec.Code, rec.Body)
	}
	return tok
}
