package auditsink_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/auditsink"
	"github.com/intentius/boxbroker/internal/upstreamtest"
)

// TestSink_RedirectDoesNotCarryTheToken: a sink that answers a redirect
// (to another port of its host, or to plain http) does not get the bearer
// token sent on: the POST is not followed, and is retried as a failure.
// Go's client sends Authorization on to any port of the same host.
func TestSink_RedirectDoesNotCarryTheToken(t *testing.T) {
	var mu sync.Mutex
	var leaked []string
	posts := make(chan struct{}, 16)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		leaked = append(leaked, r.Header.Get("Authorization"))
		mu.Unlock()
		select {
		case posts <- struct{}{}: // followed: the sender stops waiting
		default:
		}
	}))
	defer other.Close()
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case posts <- struct{}{}:
		default:
		}
		http.Redirect(w, r, other.URL+"/elsewhere", http.StatusTemporaryRedirect)
	}))
	defer redirector.Close()
	u, _ := url.Parse(redirector.URL + "/audit")
	s := open(t, t.TempDir(), u, nil, 100, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	if err := s.Append("k1", entries(0, 3)); err != nil {
		t.Fatal(err)
	}
	for range 3 { // the first POST and two retries, or the redirect followed
		<-posts
		mu.Lock()
		n := len(leaked)
		mu.Unlock()
		if n > 0 {
			break
		}
	}
	cancel()
	<-done
	_ = s.Close()
	mu.Lock()
	defer mu.Unlock()
	for _, a := range leaked {
		if a != "" {
			t.Errorf("the redirect's target got Authorization %q, want none", a)
		}
	}
	if s.Backlog() != 3 {
		t.Errorf("Backlog() = %d after only redirects, want 3 (none acknowledged)", s.Backlog())
	}
}

// TestSink_MalformedAnswerRepeatingTheTokenIsNotLogged: a sink that
// answers with the Authorization it was sent as its status line makes
// Go's transport fail with an error that quotes the bearer token; the
// warning of the failed POST holds no trace of it.
func TestSink_MalformedAnswerRepeatingTheTokenIsNotLogged(t *testing.T) {
	const token = "sink-bearer-ECHOED-0123456789"
	u, _ := url.Parse("http://" + upstreamtest.EchoStatus(t) + "/audit")
	_, text := postUntilFailed(t, u, token)
	if !strings.Contains(text, "malformed HTTP") {
		t.Fatalf("no POST failed on the malformed answer, so this test shows nothing:\n%s", text)
	}
	if strings.Contains(text, token) {
		t.Errorf("the log holds the sink's token:\n%s", text)
	}
}

// postUntilFailed opens a sink posting to u with token, has it send three
// rows until a POST fails (a bounded wait), stops and closes it, and
// returns it and what it logged.
func postUntilFailed(t *testing.T, u *url.URL, token string) (*auditsink.Sink, string) {
	t.Helper()
	var logs upstreamtest.Buffer
	s, err := auditsink.Open(auditsink.Config{URL: u, Dir: t.TempDir(), MaxBacklog: 100, Batch: 10,
		MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, Token: token,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
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
	return s, logs.String()
}
