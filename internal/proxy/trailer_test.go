package proxy

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
)

// TestForwarder_RequestTrailerIsDropped: a request whose body (and so its
// trailer, which net/http fills in at the body's end) was read before it
// is forwarded, as a capability that checks a body does, reaches the
// upstream with no trailer, whatever Rewrite leaves.
func TestForwarder_RequestTrailerIsDropped(t *testing.T) {
	const leak = "bbx_trailerTrailerTrailerTrailerTrailerTrail0"
	var got http.Header
	var gotBody []byte
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotBody, _ = io.ReadAll(r.Body)
		got = r.Trailer.Clone()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(up.Close)
	target, _ := url.Parse(up.URL)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	f := New(func(pr *httputil.ProxyRequest) { pr.SetURL(target) }, tr, nil)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body) // the trailer is filled in now
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = -1
		f.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	req, _ := http.NewRequest("POST", front.URL, io.NopCloser(bytes.NewReader([]byte("body"))))
	req.ContentLength = -1
	req.Trailer = http.Header{"X-Leak": {leak}}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || string(gotBody) != "body" {
		t.Fatalf("forwarded = %d %q, want 204 with the body", resp.StatusCode, gotBody)
	}
	if len(got) != 0 {
		t.Errorf("the upstream received the trailer %v, want none", got)
	}
}
