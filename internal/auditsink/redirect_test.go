package auditsink_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
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
