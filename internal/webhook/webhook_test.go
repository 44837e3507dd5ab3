package webhook_test

import (
	"bytes"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/quiet"
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
		got := sendOnce(t, base+secretPath+"?token=XsecretQuery987")
		if !strings.Contains(got, "not delivered") {
			t.Errorf("log for %s = %q, want a line saying it was not delivered", base, got)
		}
		if strings.Contains(got, "Xsecret") {
			t.Errorf("log for %s = %q, quotes the webhook's URL", base, got)
		}
	}
}

// TestWebhook_RedirectIsNotFollowed: the receiver (or whoever answers
// at its URL) answering 307 to an address of its own choosing, plain http
// on another machine or inside the operator's network (the broker's own
// admin listener, a metadata service), would have the sender POST the
// message there again, signed. The redirect is not followed: the other
// address receives nothing, and the message counts as not delivered.
func TestWebhook_RedirectIsNotFollowed(t *testing.T) {
	var mu sync.Mutex
	var elsewhere []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		elsewhere = append(elsewhere, r.Method+" "+r.URL.Path+" "+r.Header.Get(webhook.HeaderSignature))
		mu.Unlock()
	}))
	defer other.Close()
	for _, code := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect, http.StatusFound} {
		receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+"/internal", code)
		}))
		got := sendOnce(t, receiver.URL+"/hook")
		receiver.Close()
		if !strings.Contains(got, "not delivered") {
			t.Errorf("a %d answer: log %q, want the message not delivered", code, got)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(elsewhere) > 0 {
		t.Errorf("the message went on to the address the receiver named: %q", elsewhere)
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

// TestBackoff_DoublesUpToMaxAndJittersWithinTheUpperHalf holds the waits
// the webhook's sender (doubling, no bound) and the audit sink (bounded,
// with jitter) both take from Backoff.
func TestBackoff_DoublesUpToMaxAndJittersWithinTheUpperHalf(t *testing.T) {
	tests := []struct {
		name string
		b    webhook.Backoff
		want []time.Duration
	}{
		{"doubling", webhook.Backoff{Min: time.Second}, []time.Duration{1, 2, 4, 8, 16}},
		{"bounded", webhook.Backoff{Min: time.Second, Max: 3 * time.Second}, []time.Duration{1, 2, 3, 3, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i, w := range tt.want {
				if got := tt.b.Next(); got != w*time.Second {
					t.Errorf("Next() #%d = %v, want %v", i+1, got, w*time.Second)
				}
			}
			tt.b.Reset()
			if got := tt.b.Next(); got != time.Second {
				t.Errorf("Next() after Reset = %v, want 1s", got)
			}
		})
	}
	b := webhook.Backoff{Min: time.Second, Max: 4 * time.Second, Jitter: true}
	for i, full := range []time.Duration{1, 2, 4, 4} {
		if got := b.Next(); got < full*time.Second/2 || got > full*time.Second {
			t.Errorf("jittered Next() #%d = %v, want within [%v, %v]", i+1, got, full*time.Second/2, full*time.Second)
		}
	}
}

// TestWebhook_AnswerHeaderOverBoundIsAnError: the receiver (or whoever
// answers at its URL, or a proxy on the way) answering 200 with a header
// of more than 64 KiB, which Go's client would read to 10 MiB and hold.
// The answer is an error past quiet.MaxAnswerHeader, not read: the
// message counts as not delivered.
func TestWebhook_AnswerHeaderOverBoundIsAnError(t *testing.T) {
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Padding", strings.Repeat("a", quiet.MaxAnswerHeader+1024))
		w.WriteHeader(http.StatusOK)
	}))
	defer receiver.Close()
	if got := sendOnce(t, receiver.URL+"/hook"); !strings.Contains(got, "not delivered") || !strings.Contains(got, "exceeded") {
		t.Errorf("a 200 with a header of %d KiB: log %q, want the message not delivered, the header over its bound", (quiet.MaxAnswerHeader+1024)>>10, got)
	}
}

// sendOnce sends one message to url, tried once, and returns what the
// sender logged.
func sendOnce(t *testing.T, url string) string {
	t.Helper()
	var logs bytes.Buffer
	s, err := webhook.New(webhook.Config{URL: url, Key: []byte("k"), Name: "test webhook",
		Attempts: 1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s.Send([]byte(`{"type":"proposal"}`), "message", "m1")
	s.Wait()
	s.Close()
	return logs.String()
}
