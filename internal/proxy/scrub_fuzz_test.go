package proxy_test

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/proxy"
)

// FuzzTokenScrubber: for any body and read size, the streaming scrubber
// gives what ScrubTokens gives over the whole body, at the same length,
// and what it gives holds no token ScrubTokens would still find.
func FuzzTokenScrubber(f *testing.F) {
	f.Add([]byte(`{"a":"`+tok+`"}`), uint8(1))
	f.Add([]byte(escapeAll(tok, false)), uint8(7))
	f.Add([]byte("x=%62%62x%5F"+tok[4:]+"&"+strings.Replace(tok, "_", `\u005f`, 1)), uint8(3))
	f.Add([]byte("tool_use max_tokens \\u005 %5"), uint8(2))
	f.Add([]byte("&#98;bx&#95;"+tok[4:]+" &amp;#x62;bx_"+tok[4:]+` \\u0062bx%255f`+tok[4:]), uint8(5))
	f.Fuzz(func(t *testing.T, body []byte, step uint8) {
		want, _ := proxy.ScrubTokens(string(body))
		var src io.Reader = bytes.NewReader(body)
		if step > 0 {
			src = &stepReader{r: src, n: int(step)}
		}
		got, err := io.ReadAll(proxy.NewTokenScrubber(io.NopCloser(src)))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Fatalf("streamed (reads of %d) %q, want %q", step, got, want)
		}
		if len(got) != len(body) {
			t.Fatalf("length %d, want %d", len(got), len(body))
		}
		if _, n := proxy.ScrubTokens(string(got)); n != 0 {
			t.Fatalf("%q still holds %d tokens", got, n)
		}
	})
}

// stepReader returns at most n bytes a read.
type stepReader struct {
	r io.Reader
	n int
}

func (s *stepReader) Read(p []byte) (int, error) {
	if len(p) > s.n {
		p = p[:s.n]
	}
	return s.r.Read(p)
}
