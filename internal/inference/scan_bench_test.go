package inference_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"

	"github.com/intentius/boxbroker/internal/proxy"
)

// BenchmarkForward_Body200K forwards a 200 KB Messages body through the
// Forwarder, over loopback sockets, to an upstream that reads it and
// answers a few bytes: without and with the token scan of the body that
// inference runs. The difference is what the scan costs a large call.
func BenchmarkForward_Body200K(b *testing.B) {
	body := messagesBody(200 << 10)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer up.Close()
	target, _ := url.Parse(up.URL)
	for _, bm := range []struct {
		name string
		scan bool
	}{{"without-scan", false}, {"with-scan", true}} {
		b.Run(bm.name, func(b *testing.B) {
			fwd := proxy.New(func(pr *httputil.ProxyRequest) {
				proxy.Target(pr.Out, target, pr.In.URL.Path, pr.In.URL.RawQuery)
			}, proxy.NewTransport(proxy.TransportOptions{}), proxy.ErrorHandler(slog.New(slog.DiscardHandler), "upstream"))
			front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if bm.scan {
					r.Body = proxy.NewTokenScrubber(r.Body)
				}
				fwd.ServeHTTP(w, r)
			}))
			defer front.Close()
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				resp, err := client.Post(front.URL+"/v1/messages", "application/json", bytes.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	}
}

// messagesBody is a Messages request body of about size bytes, shaped as
// an agent's (snake_case keys, escaped newlines and quotes), with no
// token in it.
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
