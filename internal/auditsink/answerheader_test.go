package auditsink_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/quiet"
)

// TestSink_AnswerHeaderOverBoundIsAFailedPost: the sink (or whoever
// answers at its URL, or a proxy on the way) acknowledging a POST with a
// header of more than 64 KiB, which Go's client would read to 10 MiB
// and hold at each POST. Past quiet.MaxAnswerHeader the answer is an
// error, not read: the POST failed, and its rows stay in the backlog.
func TestSink_AnswerHeaderOverBoundIsAFailedPost(t *testing.T) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Padding", strings.Repeat("a", quiet.MaxAnswerHeader+1024))
		w.WriteHeader(http.StatusOK)
	}))
	defer sink.Close()
	u, _ := url.Parse(sink.URL + "/audit")
	s, text := postUntilFailed(t, u, "")
	if !strings.Contains(text, "exceeded") {
		t.Errorf("log %q, want a POST failed on the header over its bound", text)
	}
	if s.Backlog() != 3 {
		t.Errorf("Backlog() = %d after answers with an overlong header, want 3 (none acknowledged)", s.Backlog())
	}
}
