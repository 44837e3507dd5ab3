package main

import (
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestCerts_TrustedOverHTTP2 checks that a client trusting only the run's
// CA reaches a server holding the certificate it signed, over HTTP/2, as
// boxbroker does through SSL_CERT_FILE.
func TestCerts_TrustedOverHTTP2(t *testing.T) {
	f, err := writeCerts(t.TempDir(), net.ParseIP("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(f.cert, f.key)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()

	roots, err := rootsFrom(f.ca)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		roots bool
		ok    bool
	}{
		{"run's CA", true, true},
		{"system roots only", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &tls.Config{}
			if tt.roots {
				cfg.RootCAs = roots
			}
			tr := &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}
			defer tr.CloseIdleConnections()
			resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
			if !tt.ok {
				if err == nil {
					resp.Body.Close()
					t.Fatalf("GET %s trusting %s succeeded, want a verification error", srv.URL, tt.name)
				}
				return
			}
			if err != nil {
				t.Fatalf("GET %s: %v", srv.URL, err)
			}
			resp.Body.Close()
			if resp.ProtoMajor != 2 {
				t.Errorf("GET %s: protocol %s, want HTTP/2", srv.URL, resp.Proto)
			}
		})
	}
}

// TestAgentBody checks that the agent-sized bodies are JSON of exactly
// the size asked for.
func TestAgentBody(t *testing.T) {
	tests := []int{200 << 10, 1 << 20}
	for _, n := range tests {
		b := agentBody(n)
		if len(b) != n {
			t.Errorf("len(agentBody(%d)) = %d, want %d", n, len(b), n)
		}
		var v struct {
			Messages []json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			t.Errorf("agentBody(%d) is not JSON: %v", n, err)
		} else if len(v.Messages) < 3 {
			t.Errorf("agentBody(%d) has %d messages, want a conversation", n, len(v.Messages))
		}
	}
}

// TestFloor_InjectsCredentialAndChecksKey checks the floor does the job
// the proxies do: an allowed key's call reaches the upstream with the
// credential in place of the key, and a stranger's is refused there.
func TestFloor_InjectsCredentialAndChecksKey(t *testing.T) {
	var got http.Header
	var gotPath string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, gotPath = r.Header.Clone(), r.URL.Path
	}))
	defer up.Close()
	h, err := floorHandler(floorConfig{upstream: up.URL, credential: "sk-cred", egressSecret: "ghp-secret", keys: map[string]bool{"box-key": true}})
	if err != nil {
		t.Fatal(err)
	}
	floor := httptest.NewServer(h)
	defer floor.Close()
	tests := []struct {
		name, path, header, key string
		status                  int
		wantPath, wantHeader    string
		want                    string
	}{
		{"messages", "/llm/anthropic/v1/messages", "X-Api-Key", "box-key", 200, "/v1/messages", "X-Api-Key", "sk-cred"},
		{"egress", "/egress/GITHUB/repos/x", "Authorization", "Bearer box-key", 200, "/egress-api/repos/x", "Authorization", "Bearer ghp-secret"},
		{"stranger", "/llm/anthropic/v1/messages", "X-Api-Key", "other", 403, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, gotPath = nil, ""
			req, _ := http.NewRequest("POST", floor.URL+tt.path, nil)
			req.Header.Set(tt.header, tt.key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("status = %d, want %d", resp.StatusCode, tt.status)
			}
			if tt.status != 200 {
				if got != nil {
					t.Errorf("a refused call reached the upstream")
				}
				return
			}
			if gotPath != tt.wantPath || got.Get(tt.wantHeader) != tt.want {
				t.Errorf("upstream saw %s %s=%q, want %s %q", gotPath, tt.wantHeader, got.Get(tt.wantHeader), tt.wantPath, tt.want)
			}
		})
	}
}

// TestThroughput_KeepsFirstOfMixedErrors drives a path whose calls fail
// in two ways, an error status and a connection cut off, so the errors
// the workers meet are of different types: throughput keeps the first
// and counts them all, where keeping it in an atomic.Value panicked on
// the second type.
func TestThroughput_KeepsFirstOfMixedErrors(t *testing.T) {
	var n atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%2 == 0 {
			http.Error(w, "no", http.StatusInternalServerError)
			return
		}
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	defer up.Close()
	var r result
	throughput(t.Context(), &path{name: "mixed", base: up.URL}, &benchCase{name: "small", body: smallBody(), conc: 4}, 300*time.Millisecond, 0, 20, &r)
	if r.errors < 2 || r.firstErr == "" || r.requests != 0 {
		t.Errorf("throughput = %d ok, %d errors, first %q; want only errors, the first kept", r.requests, r.errors, r.firstErr)
	}
}

func TestTargets_NotRunNamesTheMissingPath(t *testing.T) {
	results := []result{
		{path: "direct", cas: "small", rps: 100, p50: time.Millisecond, cpu10k: -1},
		{path: "boxbroker", cas: "small", rps: 50, p50: 2 * time.Millisecond, cpu10k: 1},
		{path: "floor", cas: "small", skipped: "-no-floor", cpu10k: -1},
	}
	var b strings.Builder
	printResults(&b, results, nil, nil, &options{})
	out := b.String()
	if !strings.Contains(out, "NOT RUN small calls: p50 within 100µs of the floor's (no floor figures)") {
		t.Errorf("targets with the floor skipped:\n%s\nwant the small p50 target to name the floor's figures as missing", out)
	}
	if !strings.Contains(out, "NOT RUN SSE: first event within 200µs of the floor's (no sse figures)") {
		t.Errorf("targets without the sse case:\n%s\nwant the SSE target to name the sse figures as missing", out)
	}
}
