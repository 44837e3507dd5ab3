package webhook_test

import (
	"bytes"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/webhook"
)

// TestWebhook_LogNeverQuotesTheURL: a webhook's URL can be its
// credential (a Slack incoming webhook's path is), so the line logged
// for a message not delivered names what went wrong, never the URL.
func TestWebhook_LogNeverQuotesTheURL(t *testing.T) {
	const secretPath = "/services/T000/B000/XsecretPathPart1234567"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing answers there: the POST fails to connect
	refused := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusBadGateway)
	}))
	defer refused.Close()
	for _, base := range []string{"http://" + addr, refused.URL} {
		var logs bytes.Buffer
		s, err := webhook.New(webhook.Config{URL: base + secretPath + "?token=XsecretQuery987", Key: []byte("k"), Name: "test webhook",
			Attempts: 1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		s.Send([]byte(`{}`), "message", "m1")
		s.Wait()
		s.Close()
		got := logs.String()
		if !strings.Contains(got, "not delivered") {
			t.Errorf("log for %s = %q, want a line saying it was not delivered", base, got)
		}
		if strings.Contains(got, "Xsecret") {
			t.Errorf("log for %s = %q, quotes the webhook's URL", base, got)
		}
	}
}

// TestWebhook_SignatureIsOverTimestampAndBody holds Sign to its
// documented form.
func TestWebhook_SignatureIsOverTimestampAndBody(t *testing.T) {
	a := webhook.Sign([]byte("k"), "1", []byte("b"))
	if !strings.HasPrefix(a, "v1=") || len(a) != 3+64 {
		t.Errorf("Sign = %q, want v1= and 64 hex digits", a)
	}
	if b := webhook.Sign([]byte("k"), "2", []byte("b")); a == b {
		t.Errorf("Sign ignores the timestamp: %q", a)
	}
}
