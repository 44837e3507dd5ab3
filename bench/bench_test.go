package main

import (
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
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
