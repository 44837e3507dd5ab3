package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/broker"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// serveReal runs the real server (server.Serve, with its timeouts) on a
// loopback port and returns its address and a box token that reported
// inference agent.
func serveReal(t *testing.T, cfg server.Config) (addr, tok string) {
	t.Helper()
	cfg.DataDir = t.TempDir()
	return startReal(t, cfg, io.Discard, "http", http.DefaultClient)
}

// startReal runs a server.Server of cfg (its ShutdownGrace 1 s unless
// set) on a loopback port, its log written to logs, with one box "a"
// enrolled and its report declaring the inference agent sent over
// client at scheme; it returns the server's address and the box's token.
func startReal(t *testing.T, cfg server.Config, logs io.Writer, scheme string, client *http.Client) (addr, tok string) {
	t.Helper()
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
	req, _ := http.NewRequest("POST", scheme+"://"+addr+protocol.RouteDeclaration, strings.NewReader(`{"capabilities":[{"name":"inference","broker":"lobby","scope":["agent"]}]}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := client.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("report: %v %v", resp, err)
	}
	resp.Body.Close()
	return addr, tok
}

// TestBadInput sends what a careless or hostile client sends; each gets
// its documented status and a refusal body, and the server keeps serving.
func TestBadInput(t *testing.T) {
	addr, token := serveReal(t, server.Config{ReadHeaderTimeout: 300 * time.Millisecond, MaxHeaderBytes: 16 << 10})
	base := "http://" + addr
	huge := strings.Repeat("h", 64<<10)
	tests := []struct {
		name, method, path, body string
		header                   http.Header
		status                   int
	}{
		{"GET declaration", "GET", protocol.RouteDeclaration, "", hdr("Authorization", "Bearer "+token), 405},
		{"PUT messages", "PUT", "/llm/anthropic/v1/messages", "{}", hdr("X-Api-Key", token), 405},
		{"DELETE models", "DELETE", "/llm/anthropic/v1/models", "", hdr("X-Api-Key", token), 405},
		{"bearer and x-api-key differ", "POST", "/llm/anthropic/v1/messages", "{}", http.Header{"Authorization": {"Bearer " + token}, "X-Api-Key": {"bbx_other"}}, 403},
		{"two bearers differ", "POST", protocol.RouteDeclaration, `{"capabilities":[]}`, http.Header{"Authorization": {"Bearer " + token, "Bearer bbx_other"}}, 401},
		{"basic auth is no token", "POST", protocol.RouteDeclaration, `{"capabilities":[]}`, hdr("Authorization", "Basic "+token), 401},
		{"empty bearer", "GET", "/llm/anthropic/v1/models", "", hdr("Authorization", "Bearer "), 403},
		{"invalid JSON", "POST", protocol.RouteDeclaration, `{"capabilities":[`, hdr("Authorization", "Bearer "+token), 400},
		{"invalid UTF-8", "POST", protocol.RouteDeclaration, "{\"capabilities\":[],\"x\":\"\xff\xfe\"}", hdr("Authorization", "Bearer "+token), 200},
		{"report over 32 KB", "POST", protocol.RouteDeclaration, `{"capabilities":[],"pad":"` + strings.Repeat("x", 40<<10) + `"}`, hdr("Authorization", "Bearer "+token), 413},
		{"huge header", "GET", "/llm/anthropic/v1/models", "", hdr("X-Huge", huge), 431},
		{"path traversal", "GET", "/llm/anthropic/v1/models/../../../etc/passwd", "", hdr("X-Api-Key", token), 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, base+tt.path, strings.NewReader(tt.body))
			for k, v := range tt.header {
				req.Header[k] = v
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %.200s", resp.StatusCode, tt.status, body)
			}
			if tt.status >= 400 && tt.status != 431 {
				var r protocol.Refusal
				if json.Unmarshal(body, &r) != nil || r.Type != "error" || r.Error.Message == "" {
					t.Errorf("not a refusal body: %.200s", body)
				}
			}
			stillServes(t, base)
		})
	}
}

func hdr(k, v string) http.Header { return http.Header{k: {v}} }

func stillServes(t *testing.T, base string) {
	t.Helper()
	resp, err := http.Get(base + "/llm/anthropic/api/hello")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the server stopped serving: %v %v", resp, err)
	}
	resp.Body.Close()
}

// TestSlowLoris: a client that never finishes its headers is cut off by
// the read-header timeout, and others are served meanwhile.
func TestSlowLoris(t *testing.T) {
	addr, _ := serveReal(t, server.Config{ReadHeaderTimeout: 200 * time.Millisecond})
	var conns []net.Conn
	for i := 0; i < 20; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET /llm/anthropic/api/hello HTTP/1.1\r\nHost: x\r\nX-Slow: ")
		conns = append(conns, c)
	}
	stillServes(t, "http://"+addr)
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := io.ReadAll(c) // the server closes it (possibly after a 408)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Error("a slow-loris connection was still open after 5 s")
		}
		c.Close()
	}
}

// TestNeverEndingBody: a report whose chunked body never ends is cut off
// rather than holding its handler forever.
func TestNeverEndingBody(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the body timeout")
	}
	addr, token := serveReal(t, server.Config{})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\n", protocol.RouteDeclaration, token)
	c.SetReadDeadline(time.Now().Add(broker.BodyTimeout + 5*time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a never-ending body: %v", err)
	}
	if resp.StatusCode != 400 {
		t.Errorf("status %d, want 400", resp.StatusCode)
	}
	stillServes(t, "http://"+addr)
}
