package spend

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/inference"
)

// TestBodyScan_EstimateAsBefore: a body read as it is forwarded is
// estimated as it is when read whole before.
func TestBodyScan_EstimateAsBefore(t *testing.T) {
	m, err := New(Config{Store: noStore{}, MaxTokens: 5000, MaxBody: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	c := inference.New(inference.Config{})
	before := func(body []byte, n int64) Estimate {
		r := httptest.NewRequest("POST", "/llm/anthropic/v1/messages", nil)
		return EstimateOf(c.Estimate(r, body), n, 5000)
	}
	small := []byte(`{"model":"claude-haiku-4-5","max_tokens":77,"messages":[{"role":"user","content":"Say \"max_tokens\":1."}]}`)
	big := []byte(`{"model":"claude-haiku-4-5","max_tokens":77,"pad":"` + strings.Repeat("x", inference.MaxRead) + `"}`)
	tests := []struct {
		name   string
		body   []byte
		length int64 // the Content-Length: -1 unknown
		read   int   // bytes the proxy reads: -1 all
		close  bool  // the proxy closes the body
		want   Estimate
	}{
		{"read whole", small, int64(len(small)), -1, false, before(small, int64(len(small)))},
		{"read whole and closed", small, int64(len(small)), -1, true, before(small, int64(len(small)))},
		{"read whole, length unknown", small, -1, -1, true, before(small, int64(len(small)))},
		{"read up to its length, EOF not seen", small, int64(len(small)), len(small), true, before(small, int64(len(small)))},
		{"not read whole", small, int64(len(small)), 20, true, before(nil, int64(len(small)))},
		{"not read whole, length unknown", small, -1, len(small) - 1, true, before(nil, 64<<20)},
		{"not read at all", small, int64(len(small)), 0, false, before(nil, int64(len(small)))},
		{"over MaxRead, length unknown", big, -1, -1, true, before(nil, 64<<20)},
		// Not checked for validity: read as far as it goes, since the API
		// refuses it unbilled.
		{"not JSON", []byte(`{"model":"claude-haiku-4-5","max_tokens":77`), -1, -1, true, before([]byte(`{"model":"claude-haiku-4-5","max_tokens":77`), 43)},
		{"empty", []byte{}, 0, -1, false, before(nil, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, n := range []int{1, 7, 4096} {
				src := &chunked{data: append([]byte(nil), tt.body...), n: n}
				r := httptest.NewRequest("POST", "/llm/anthropic/v1/messages", nil)
				r.Body, r.ContentLength = src, tt.length
				if len(tt.body) == 0 {
					r.Body = http.NoBody
				}
				b := &bodyScan{}
				b.wrap(r, c, inference.MaxRead, &m.bufs)
				var out bytes.Buffer
				if tt.read < 0 {
					_, _ = io.CopyBuffer(&out, r.Body, make([]byte, 512))
				} else {
					_, _ = io.CopyBuffer(&out, io.LimitReader(r.Body, int64(tt.read)), make([]byte, 512))
				}
				if want := tt.body[:min(len(tt.body), out.Len())]; !bytes.Equal(out.Bytes(), want) {
					t.Fatalf("%d bytes a read: the body read through bodyScan differs", n)
				}
				if (tt.read < 0 || tt.read >= len(tt.body)) && b.buf != nil {
					t.Errorf("%d bytes a read: the body is kept after it was read whole", n)
				}
				if tt.close {
					if err := r.Body.Close(); err != nil {
						t.Fatal(err)
					}
					if b.buf != nil {
						t.Errorf("%d bytes a read: the body is kept after it was closed", n)
					}
				}
				if got := b.estimate(5000, 64<<20); got != tt.want {
					t.Errorf("%d bytes a read: estimate = %+v, want %+v", n, got, tt.want)
				}
				// Read after settlement: handed on, not looked at.
				if _, err := io.Copy(io.Discard, r.Body); err != nil {
					t.Errorf("read after settlement: %v", err)
				}
				b.release()
			}
		})
	}
}
