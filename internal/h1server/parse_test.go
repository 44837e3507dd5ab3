package h1server

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/httptoken"
)

var heads = []string{
	"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
	"POST /llm/anthropic/v1/messages?beta=true HTTP/1.1\r\nhost: 127.0.0.1:8787\r\nx-api-key: bbx_t\r\nanthropic-version: 2023-06-01\r\ncontent-type: application/json\r\ncontent-length: 146\r\nx-stainless-lang: js\r\n\r\n",
	"GET /egress/GITHUB/repos/a/b HTTP/1.1\r\nHost: b\r\nAuthorization: Bearer x\r\nAccept: a\r\nAccept: b\r\nX-Odd-Name: \t v \t\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, close\r\n\r\n",
	"GET /%2e%2e/x HTTP/1.1\r\nHost: [::1]:80\r\nX-Empty:\r\n\r\n",
	"PATCH /a HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n",
	"GET / HTTP/1.0\r\nHost: a\r\n\r\n",
	"GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: +1\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\nX: y\r\n\r\n",
	"G@T / HTTP/1.1\r\nHost: a\r\n\r\n",
	"BREW /pot HTTP/1.1\r\nHost: a\r\n\r\n",
}

// TestParseHead_AgreesWithNetHTTP: a head parseHead takes, net/http reads
// the same way; the ones it does not take are left to net/http.
func TestParseHead_AgreesWithNetHTTP(t *testing.T) {
	taken := 0
	for _, h := range heads {
		if agree(t, []byte(h)) {
			taken++
		}
	}
	if taken < 7 {
		t.Errorf("took only %d of the heads", taken)
	}
	for _, h := range heads[6:15] {
		if _, ok := parseHead(context.Background(), []byte(h)); ok {
			t.Errorf("took %q, which net/http must serve", h)
		}
	}
}

func FuzzParseHead(f *testing.F) {
	for _, h := range heads {
		f.Add([]byte(h))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		i := bytes.Index(raw, crlf2)
		if i < 0 {
			return
		}
		agree(t, raw[:i+4])
	})
}

// agree checks that, when parseHead takes raw, http.ReadRequest reads it
// to the same request, and reports whether it was taken.
func agree(t *testing.T, raw []byte) bool {
	t.Helper()
	got, ok := parseHead(context.Background(), raw)
	if !ok {
		return false
	}
	want, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
	if err != nil {
		t.Fatalf("parseHead took %q, which net/http refuses: %v", raw, err)
	}
	// net/http's server refuses field values ReadRequest lets through.
	for k, vs := range want.Header {
		for _, v := range vs {
			if strings.ContainsAny(v, "\x00\r\n") || !httptoken.Valid(k) {
				t.Fatalf("parseHead took %q with field %q: %q", raw, k, v)
			}
		}
	}
	if got.Method != want.Method || got.RequestURI != want.RequestURI || got.URL.String() != want.URL.String() ||
		got.Host != want.Host || got.ContentLength != want.ContentLength || got.Close != want.Close ||
		got.Proto != want.Proto || !reflect.DeepEqual(got.Header, want.Header) {
		t.Fatalf("%q:\nparseHead %s %s %s %q cl=%d close=%v %v\nnet/http  %s %s %s %q cl=%d close=%v %v", raw,
			got.Method, got.RequestURI, got.Proto, got.Host, got.ContentLength, got.Close, got.Header,
			want.Method, want.RequestURI, want.Proto, want.Host, want.ContentLength, want.Close, want.Header)
	}
	return true
}
