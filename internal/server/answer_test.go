package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/protocol"
)

// TestAnswer_HeadersOnce: a forwarded answer carries the payer header
// once, and each of the upstream's headers as the upstream sent it.
func TestAnswer_HeadersOnce(t *testing.T) {
	plain, _, _ := standInUpstream(t)
	addr, token := startBroker(t, plain, nil)
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+protocol.PrefixAnthropic+"/v1/messages",
		strings.NewReader(`{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"Hi"}]}`))
	req.Header.Set("X-Api-Key", token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != smallAnswer {
		t.Fatalf("answer %d %s", resp.StatusCode, body)
	}
	for k, vs := range resp.Header {
		if len(vs) != 1 {
			t.Errorf("header %s has %d values %q, want one", k, len(vs), vs)
		}
	}
	if got := resp.Header.Get(protocol.HeaderPayer); got != protocol.FormatPayerHeader(protocol.SharedPayer()) {
		t.Errorf("%s = %q", protocol.HeaderPayer, got)
	}
}
