package proxy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestTraced_NotesCalls(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	}))
	defer up.Close()
	tick := time.Unix(0, 0)
	now := func() time.Time { tick = tick.Add(250 * time.Millisecond); return tick }
	c := &http.Client{Transport: Traced(http.DefaultTransport, now)}

	var tr Trace
	ctx := WithTrace(context.Background(), &tr)
	req, _ := http.NewRequestWithContext(ctx, "GET", up.URL, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	req, _ = http.NewRequestWithContext(ctx, "GET", dead.URL, nil)
	if _, err := c.Do(req); err == nil {
		t.Fatal("request to a closed server succeeded")
	}
	// A request with no trace is sent and noted nowhere.
	req, _ = http.NewRequest("GET", up.URL, nil)
	if resp, err := c.Do(req); err == nil {
		resp.Body.Close()
	}

	got := tr.Calls()
	want := []Call{{Status: http.StatusTeapot, Latency: 250 * time.Millisecond}, {Status: 0, Latency: 250 * time.Millisecond}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("Trace.Calls() = %+v, want %+v", got, want)
	}
}
