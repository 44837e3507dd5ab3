package auditsink_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/auditsink"
	"github.com/intentius/boxbroker/internal/upstreamtest"
	"github.com/intentius/boxbroker/internal/webhook"
)

// TestSink_AnswerHeaderOverBoundIsAFailedPost: the sink (or whoever
// answers at its URL, or a proxy on the way) acknowledging a POST with a
// header of more than 64 KiB, which Go's client would read to 10 MiB
// and hold at each POST. Past webhook.MaxAnswerHeader the answer is an
// error, not read: the POST failed, and its rows stay in the backlog.
func TestSink_AnswerHeaderOverBoundIsAFailedPost(t *testing.T) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Padding", strings.Repeat("a", webhook.MaxAnswerHeader+1024))
		w.WriteHeader(http.StatusOK)
	}))
	defer sink.Close()
	var logs upstreamtest.Buffer
	u, _ := url.Parse(sink.URL + "/audit")
	s, err := auditsink.Open(auditsink.Config{URL: u, Dir: t.TempDir(), MaxBacklog: 100, Batch: 10,
		MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	if err := s.Append("k1", entries(0, 3)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3000 && !strings.Contains(logs.String(), "POST failed") && s.Backlog() > 0; i++ {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	_ = s.Close()
	if text := logs.String(); !strings.Contains(text, "exceeded") {
		t.Errorf("log %q, want a POST failed on the header over its bound", text)
	}
	if s.Backlog() != 3 {
		t.Errorf("Backlog() = %d after answers with an overlong header, want 3 (none acknowledged)", s.Backlog())
	}
}
