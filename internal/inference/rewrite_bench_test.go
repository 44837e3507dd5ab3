package inference

import (
	"context"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
)

// BenchmarkRewrite is the header work on a forwarded call: the box's
// token and cookies out, the credential in, the target set.
func BenchmarkRewrite(b *testing.B) {
	up, _ := url.Parse("https://api.anthropic.com")
	c := New(Config{Upstream: up})
	in := httptest.NewRequest("POST", "/llm/anthropic/v1/messages?beta=true", nil)
	for k, v := range map[string]string{
		"X-Api-Key": "bbx_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG", "Anthropic-Version": "2023-06-01",
		"Anthropic-Beta": "fine-grained-tool-streaming-2025-05-14", "Content-Type": "application/json",
		"User-Agent": "claude-cli/2.0.0 (external, cli)", "X-Stainless-Lang": "js", "X-Stainless-Os": "Linux",
		"X-Stainless-Runtime": "node", "X-App": "cli", "Accept": "application/json",
	} {
		in.Header.Set(k, v)
	}
	ctx := context.WithValue(in.Context(), ctxKey{}, &paidFor{paid: capability.Paid{
		Payer: protocol.SharedPayer(), Credential: []byte("sk-ant-api03-BENCH-0123456789"),
	}})
	in = in.WithContext(ctx)
	b.ReportAllocs()
	for b.Loop() {
		out := in.Clone(ctx)
		c.rewrite(&httputil.ProxyRequest{In: in, Out: out})
		if out.Header.Get("X-Api-Key") == "" || out.URL.Host != "api.anthropic.com" {
			b.Fatal("not rewritten")
		}
	}
}

// BenchmarkClone is the request clone BenchmarkRewrite includes, which
// ReverseProxy makes in any case.
func BenchmarkClone(b *testing.B) {
	in := httptest.NewRequest("POST", "/llm/anthropic/v1/messages?beta=true", nil)
	for _, k := range []string{"X-Api-Key", "Anthropic-Version", "Anthropic-Beta", "Content-Type", "User-Agent", "X-Stainless-Lang", "X-Stainless-Os", "X-Stainless-Runtime", "X-App", "Accept"} {
		in.Header.Set(k, "v")
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = in.Clone(context.Background())
	}
}
