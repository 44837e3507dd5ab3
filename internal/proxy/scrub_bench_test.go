package proxy_test

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/proxy"
)

// messagesBody is a Messages request body of about size bytes, shaped as
// an agent's: JSON with snake_case keys, escaped newlines and quotes, and
// no token.
func messagesBody(size int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"model":"claude-sonnet-4-5","max_tokens":8192,"stream":true,"messages":[`)
	turn := `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01ABCdef","content":"func main() {\n\tfmt.Println(\"hello, world\")\n}\n// 50% done, see https://example.com/a_b?c=d%20e\n"}],"cache_control":{"type":"ephemeral"}},`
	for b.Len() < size {
		b.WriteString(turn)
	}
	b.WriteString(`{"role":"user","content":"go on"}]}`)
	return b.Bytes()
}

// BenchmarkRequestBody copies a 200 KB Messages body as the forwarder
// does, through a CopyBufferSize buffer, without and with the token scan.
func BenchmarkRequestBody(b *testing.B) {
	body := messagesBody(200 << 10)
	buf := make([]byte, proxy.CopyBufferSize)
	for _, bm := range []struct {
		name string
		wrap func(io.ReadCloser) io.ReadCloser
	}{
		{"without-scan", func(r io.ReadCloser) io.ReadCloser { return r }},
		{"with-scan", func(r io.ReadCloser) io.ReadCloser { return proxy.NewTokenScrubber(r) }},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for range b.N {
				r := bm.wrap(io.NopCloser(bytes.NewReader(body)))
				if _, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{r}, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkScrubTokens is the header and query check on a value with no
// token.
func BenchmarkScrubTokens(b *testing.B) {
	v := strings.Repeat("x-stainless-package-version ", 4)
	b.ReportAllocs()
	for range b.N {
		proxy.ScrubTokens(v)
	}
}
