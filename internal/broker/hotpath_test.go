package broker_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/broker"
	"github.com/intentius/boxbroker/internal/cache"
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/inference"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/sqlite"
	"github.com/intentius/boxbroker/internal/token"
)

// The hot path: a forwarded Messages call and a refusal, through the
// whole handler, with the cache warm. These tests and benchmarks assemble
// the handler the way internal/server does, but with a clock that never
// moves, so the cache is always fresh and what they see does not depend
// on how fast the machine is.

// countingStore counts the reads the hot path could make.
type countingStore struct {
	store.Store
	reads atomic.Int64
}

func (s *countingStore) BoxByTokenHash(ctx context.Context, hash string) (store.Box, error) {
	s.reads.Add(1)
	return s.Store.BoxByTokenHash(ctx, hash)
}

func (s *countingStore) DeclarationOfToken(ctx context.Context, box, tokenHash string) ([]byte, time.Time, error) {
	s.reads.Add(1)
	return s.Store.DeclarationOfToken(ctx, box, tokenHash)
}

func (s *countingStore) Credential(ctx context.Context, id string) (store.Credential, error) {
	s.reads.Add(1)
	return s.Store.Credential(ctx, id)
}

// rawUpstream answers every request with a fixed Messages answer, reading
// with no per-request allocation, so a benchmark's allocations are the
// broker's own.
func rawUpstream(tb testing.TB) *url.URL {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	body := `{"id":"msg_bench","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hello."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":2}}`
	answer := []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nRequest-Id: req_bench\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveRaw(c, answer)
		}
	}()
	return &url.URL{Scheme: "http", Host: ln.Addr().String()}
}

// serveRaw reads requests (headers, then Content-Length bytes) and answers each.
func serveRaw(c net.Conn, answer []byte) {
	defer c.Close()
	br := bufio.NewReaderSize(c, 64<<10)
	for {
		n := int64(0)
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				return
			}
			if len(line) <= 2 {
				break
			}
			const cl = "content-length:"
			if len(line) > len(cl) && strings.EqualFold(string(line[:len(cl)]), cl) {
				n, _ = strconv.ParseInt(string(bytes.TrimSpace(line[len(cl):])), 10, 64)
			}
		}
		if _, err := br.Discard(int(n)); err != nil {
			return
		}
		if _, err := c.Write(answer); err != nil {
			return
		}
	}
}

// hot is an assembled handler, its store and two boxes' tokens: allowed
// has agent, refused declares inference without it.
type hot struct {
	h                *broker.Server
	st               *countingStore
	c                *cache.Cache
	allowed, refused string
}

func newHot(tb testing.TB, upstream *url.URL) *hot { return newHotT(tb, upstream, nil) }

func newHotT(tb testing.TB, upstream *url.URL, tlsConfig *tls.Config) *hot {
	tb.Helper()
	ctx := context.Background()
	base, err := sqlite.Open(filepath.Join(tb.TempDir(), "boxbroker.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { base.Close() })
	st := &countingStore{Store: base}
	keyring, err := secrets.New(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		tb.Fatal(err)
	}
	now := time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC)
	c := cache.New(st, cache.Options{Now: func() time.Time { return now }})
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	std := proxy.NewTransport(proxy.TransportOptions{})
	if tlsConfig != nil {
		std.TLSClientConfig = tlsConfig
	}
	var transport http.RoundTripper = std // as server.New makes it
	h, err := broker.New(broker.Config{
		Broker: "lobby", Store: st, Cache: c, Payer: &payer.Resolver{Cache: c, Keyring: keyring}, Logger: log,
		Capabilities: []capability.Capability{inference.New(inference.Config{Upstream: upstream, Transport: transport, Logger: log})},
		Now:          func() time.Time { return now },
	})
	if err != nil {
		tb.Fatal(err)
	}
	sealed, err := keyring.Seal([]byte("sk-ant-api03-BENCH-0123456789"), payer.AD(payer.SharedAnthropic))
	if err != nil {
		tb.Fatal(err)
	}
	if err := st.SetCredential(ctx, store.Credential{ID: payer.SharedAnthropic, Sealed: sealed, UpdatedAt: now}); err != nil {
		tb.Fatal(err)
	}
	if err := c.Poll(ctx); err != nil {
		tb.Fatal(err)
	}
	x := &hot{h: h, st: st, c: c}
	for _, b := range []struct {
		name  string
		token *string
		words string
	}{{"allowed", &x.allowed, `"agent","decide"`}, {"refused", &x.refused, `"decide"`}} {
		tok, err := token.NewBox()
		if err != nil {
			tb.Fatal(err)
		}
		*b.token = tok
		if err := st.CreateBox(ctx, store.Box{Name: b.name, TokenHash: token.Hash(tok), CreatedAt: now, PayerKind: protocol.PayerShared}); err != nil {
			tb.Fatal(err)
		}
		// A realistic report: four capabilities here, one for another broker.
		report := `{"capabilities":[{"name":"inference","broker":"lobby","scope":[` + b.words + `]},` +
			`{"name":"egress","broker":"lobby","scope":["GITHUB","OPENAI","STRIPE_TEST"]},` +
			`{"name":"feedback","broker":"lobby","scope":["agent","passive"]},` +
			`{"name":"fountain","broker":"lobby","scope":["conversations","sandboxes"]},` +
			`{"name":"inference","broker":"door","scope":["agent"]}]}`
		req := httptest.NewRequest("POST", protocol.RouteDeclaration, strings.NewReader(report))
		req.Header.Set("Authorization", "Bearer "+tok)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			tb.Fatalf("report %s: %d %s", b.name, rec.Code, rec.Body)
		}
	}
	return x
}

const messagesBody = `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"Hello, Claude. What is the capital of France?"}]}`

// call sends one Messages call with token as x-api-key and returns the status.
func (x *hot) call(token string, rec *httptest.ResponseRecorder) int {
	req := httptest.NewRequest("POST", "/llm/anthropic/v1/messages", strings.NewReader(messagesBody))
	req.Header.Set("X-Api-Key", token)
	req.Header.Set("Anthropic-Version", "2023-06-01")
	req.Header.Set("Content-Type", "application/json")
	x.h.ServeHTTP(rec, req)
	return rec.Code
}

func TestHotPath_NoStoreReadsOnceWarm(t *testing.T) {
	x := newHot(t, rawUpstream(t))
	// The first calls fill the cache.
	if got := x.call(x.allowed, httptest.NewRecorder()); got != 200 {
		t.Fatalf("forwarded call = %d, want 200", got)
	}
	if got := x.call(x.refused, httptest.NewRecorder()); got != 403 {
		t.Fatalf("refused call = %d, want 403", got)
	}
	x.st.reads.Store(0)
	for i := 0; i < 50; i++ {
		if got := x.call(x.allowed, httptest.NewRecorder()); got != 200 {
			t.Fatalf("forwarded call %d = %d, want 200", i, got)
		}
		if got := x.call(x.refused, httptest.NewRecorder()); got != 403 {
			t.Fatalf("refused call %d = %d, want 403", i, got)
		}
	}
	if n := x.st.reads.Load(); n != 0 {
		t.Errorf("store reads over 100 warm calls = %d, want 0", n)
	}
}

func BenchmarkHandler_Forward(b *testing.B) {
	x := newHot(b, rawUpstream(b))
	x.call(x.allowed, httptest.NewRecorder())
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if got := x.call(x.allowed, httptest.NewRecorder()); got != 200 {
			b.Fatalf("status %d", got)
		}
	}
}

func BenchmarkHandler_Refusal(b *testing.B) {
	x := newHot(b, rawUpstream(b))
	x.call(x.refused, httptest.NewRecorder())
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if got := x.call(x.refused, httptest.NewRecorder()); got != 403 {
			b.Fatalf("status %d", got)
		}
	}
}

// BenchmarkRequest_Only is the cost of building a request and a recorder
// in these benchmarks, to subtract from the two above.
func BenchmarkRequest_Only(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest("POST", "/llm/anthropic/v1/messages", strings.NewReader(messagesBody))
		req.Header.Set("X-Api-Key", "bbx_x")
		req.Header.Set("Anthropic-Version", "2023-06-01")
		req.Header.Set("Content-Type", "application/json")
		_ = httptest.NewRecorder()
	}
}

func BenchmarkTokenLookup(b *testing.B) {
	x := newHot(b, rawUpstream(b))
	x.call(x.allowed, httptest.NewRecorder())
	c := x.c
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.BoxByTokenHash(ctx, token.Hash(x.allowed)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkServer_Forward is a forwarded call through a real server on
// loopback, from a raw keep-alive client that allocates nothing to the
// raw upstream: a CPU profile of it is the broker's own, server and
// transport included.
func BenchmarkServer_Forward(b *testing.B) {
	x := newHot(b, rawUpstream(b))
	srv := httptest.NewServer(x.h)
	b.Cleanup(srv.Close)
	req := []byte("POST /llm/anthropic/v1/messages HTTP/1.1\r\nHost: broker\r\nX-Api-Key: " + x.allowed +
		"\r\nAnthropic-Version: 2023-06-01\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(messagesBody)) + "\r\n\r\n" + messagesBody)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			b.Error(err)
			return
		}
		defer c.Close()
		br := bufio.NewReaderSize(c, 16<<10)
		for pb.Next() {
			if _, err := c.Write(req); err != nil {
				b.Error(err)
				return
			}
			status, err := readRaw(br)
			if err != nil || status != "200" {
				b.Errorf("answer %q: %v", status, err)
				return
			}
		}
	})
}

// readRaw reads one answer with a Content-Length and returns its status.
func readRaw(br *bufio.Reader) (string, error) {
	line, err := br.ReadSlice('\n')
	if err != nil || len(line) < 12 {
		return "", err
	}
	status := string(line[9:12])
	n := 0
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return status, err
		}
		if len(line) <= 2 {
			break
		}
		const cl = "content-length:"
		if len(line) > len(cl) && strings.EqualFold(string(line[:len(cl)]), cl) {
			n, _ = strconv.Atoi(string(bytes.TrimSpace(line[len(cl):])))
		}
	}
	_, err = br.Discard(n)
	return status, err
}
