package proxy_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"testing"

	"github.com/intentius/boxbroker/internal/proxy"
)

// apiAnswer is an answer of about size bytes shaped as an API's listing
// (GitHub's issues, say): JSON with URLs, hex ids, escaped newlines and
// quotes, and prose, holding none of the values.
func apiAnswer(size int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	var b bytes.Buffer
	b.WriteString("[")
	for i := 0; b.Len() < size; i++ {
		sha := make([]byte, 20)
		for j := range sha {
			sha[j] = byte(rng.Uint32())
		}
		fmt.Fprintf(&b, `{"url":"https://api.example.com/repos/o/r/issues/%d","id":%d,"node_id":"I_kwDOA%xQ","sha":"%x",`+
			`"title":"Fix the 50%% case in parse\/read","body":"Steps:\n1. run \"make\"\n2. see the \u00e9rror\n","labels":[{"name":"bug","color":"d73a4a"}],`+
			`"user":{"login":"octocat","avatar_url":"https://avatars.example.com/u/583231?v=4"},"created_at":"2026-01-02T03:04:05Z"},`,
			i, 1000000+i, rng.Uint64(), sha)
	}
	b.WriteString("{}]")
	return b.Bytes()
}

// benchForms is n values, each an escaped form replaced by the box's
// token as egress makes them: tokens of a few makers' shapes (GitHub's
// ghs_, OAuth access tokens, Stripe's keys) and hex signatures.
func benchForms(n int) []proxy.Form {
	rng := rand.New(rand.NewPCG(5, 6))
	const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	const hexDigits = "0123456789abcdef"
	prefixes := []string{"ghs_", "at_", "sk_live_", "ya29.", ""}
	token := []byte("bbx_" + string(bytes.Repeat([]byte("A"), 43)))
	forms := make([]proxy.Form, 0, n)
	for i := range n {
		var v []byte
		if p := prefixes[i%len(prefixes)]; p != "" {
			v = []byte(p)
			for range 36 {
				v = append(v, alnum[rng.IntN(len(alnum))])
			}
		} else {
			for range 64 {
				v = append(v, hexDigits[rng.IntN(len(hexDigits))])
			}
		}
		forms = append(forms, proxy.Form{Old: v, New: token, Escaped: true})
	}
	return forms
}

// withBase64 is forms with, after each, the base64 of its Old in every
// alignment and both alphabets ([redacted] in their place), all of them
// line-wrapped or not, as egress searches an answer for them.
func withBase64(forms []proxy.Form) []proxy.Form {
	var out []proxy.Form
	for _, f := range forms {
		f.Wrapped = true
		out = append(out, f)
		for skip := range 3 {
			whole := f.Old[skip : skip+(len(f.Old)-skip)/3*3]
			for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
				out = append(out, proxy.Form{Old: []byte(enc.EncodeToString(whole)), New: []byte("[redacted]"), Escaped: true, Wrapped: true})
			}
		}
	}
	return out
}

// BenchmarkRedactAnswer streams a 200 KiB answer through a Redactor of
// one value and of 8, 64 and 256 (a box's values, tokens and signatures
// at a host), reading it as the reverse proxy does, 32 KiB at a time;
// then of 1 and 8 values each with its base64 in every alignment, as
// egress searches for them. The set is made for each answer. Besides
// the wall clock it reports cpu-ns/op, the process's CPU time for one
// answer (garbage collection included), which a busy machine disturbs
// less.
//
//	go test -run '^$' -bench RedactAnswer ./internal/proxy/
func BenchmarkRedactAnswer(b *testing.B) {
	body := apiAnswer(200 << 10)
	buf := make([]byte, 32<<10)
	type set struct {
		name  string
		forms []proxy.Form
	}
	var sets []set
	for _, n := range []int{1, 8, 64, 256} {
		sets = append(sets, set{fmt.Sprintf("values=%d", n), benchForms(n)})
	}
	for _, n := range []int{1, 8} {
		sets = append(sets, set{fmt.Sprintf("values=%d+base64", n), withBase64(benchForms(n))})
	}
	for _, s := range sets {
		forms := s.forms
		b.Run(s.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			start := cpuTime()
			for range b.N {
				r := proxy.NewFormSet(forms).Redactor(io.NopCloser(bytes.NewReader(body)))
				if _, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{r}, buf); err != nil {
					b.Fatal(err)
				}
				if r.Replaced() != 0 {
					b.Fatalf("replaced %d, want 0", r.Replaced())
				}
			}
			if used := cpuTime() - start; used > 0 {
				b.ReportMetric(float64(used.Nanoseconds())/float64(b.N), "cpu-ns/op")
			}
		})
	}
}

// BenchmarkRedactCredential is the answer's credential scan as
// inference makes it for every call: a Redactor of one plain form (the
// credential, masked with as many asterisks) made per answer, reading a
// small Messages answer (one read, then the end) and a 200 KiB one (32
// KiB reads, as the reverse proxy copies).
func BenchmarkRedactCredential(b *testing.B) {
	cred := []byte("sk-ant-api03-" + string(bytes.Repeat([]byte("x"), 95)))
	mask := bytes.Repeat([]byte("*"), len(cred))
	small := []byte(`{"id":"msg_bench","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hello from the stand-in, as small answers say things."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":6}}`)
	for _, tt := range []struct {
		name string
		body []byte
	}{{"small", small}, {"200KiB", apiAnswer(200 << 10)}} {
		b.Run(tt.name, func(b *testing.B) {
			buf := make([]byte, 32<<10)
			b.SetBytes(int64(len(tt.body)))
			b.ReportAllocs()
			for range b.N {
				r := proxy.NewRedactor(io.NopCloser(bytes.NewReader(tt.body)), cred, mask)
				for {
					_, err := r.Read(buf)
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkRedactHeader is one answer's header (a GitHub API answer's
// names and values, holding none of the forms) searched for a host set's
// forms: 64 values of 40 bytes, as RedactHeader searches every answer.
func BenchmarkRedactHeader(b *testing.B) {
	var forms []proxy.Form
	for i := range 64 {
		forms = append(forms, proxy.Form{Old: fmt.Appendf(nil, "sv_%037d", i), New: []byte("[redacted]"), Escaped: true})
	}
	set := proxy.NewFormSet(forms).WithOwn([]byte("bbx_token"))
	names := []string{"Content-Type", "Cache-Control", "Vary", "Etag", "Last-Modified", "X-Oauth-Scopes", "X-Accepted-Oauth-Scopes",
		"X-Github-Media-Type", "X-Github-Api-Version-Selected", "X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset",
		"X-Ratelimit-Used", "X-Ratelimit-Resource", "Access-Control-Expose-Headers", "Access-Control-Allow-Origin",
		"Strict-Transport-Security", "X-Frame-Options", "X-Content-Type-Options", "X-Xss-Protection", "Referrer-Policy",
		"Content-Security-Policy", "X-Github-Request-Id", "Server", "Date"}
	for b.Loop() {
		h := make(http.Header, len(names))
		for _, k := range names {
			h[k] = []string{"value of " + k}
		}
		set.RedactHeader(h)
	}
}
