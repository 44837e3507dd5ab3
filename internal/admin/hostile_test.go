package admin_test

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
)

// TestAdmin_HostileQueriesAreRefusals sends the admin API query values an
// attacker would try (negative, overflowing, huge, control characters,
// unicode) and wants each answered with a refusal or an answer, never a
// 5xx or a body other than JSON.
func TestAdmin_HostileQueriesAreRefusals(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.AddBox("alpha")
	vals := []string{"-1", "0", "99999999999999999999999", "1e9", "0x10", " 5", "\x00", "\u202e", "9223372036854775807", "-9223372036854775808", strings.Repeat("9", 4000), "%"}
	paths := []string{
		"/api/audit?limit=", "/api/audit?since=", "/api/audit?box=", "/api/audit?refusals=",
		"/api/audit.csv?limit=", "/api/boxes?limit=", "/api/boxes?after=", "/api/boxes?q=", "/api/boxes?sort=", "/api/boxes?desc=",
		"/api/spend?month=", "/api/spend.csv?by=", "/api/spend.csv?month=", "/api/boxes/alpha/spend?month=",
		"/api/boxes/alpha/budgets?month=", "/api/boxes/alpha/feedback?limit=",
	}
	for _, p := range paths {
		for _, v := range vals {
			resp := b.Admin("GET", p+url.QueryEscape(v), b.AdminToken, nil)
			if resp.StatusCode >= 500 {
				t.Errorf("GET %s%q = %d %s, want no 5xx", p, v, resp.StatusCode, resp.Body)
			}
			if resp.StatusCode >= 400 {
				if typ, msg := brokertest.Refusal(resp.Body); typ == "" || msg == "" {
					t.Errorf("GET %s%q = %d %s, want a refusal", p, v, resp.StatusCode, resp.Body)
				}
			}
		}
	}
}

// TestAdmin_HostileBodiesAreRefusals: a body nested deep, one over the
// bound, one not JSON, one with a control character in a name: each
// a 4xx refusal.
func TestAdmin_HostileBodiesAreRefusals(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.AddBox("alpha")
	tests := []struct {
		name, method, path string
		body               []byte
	}{
		{"deep", "POST", "/api/boxes", []byte(strings.Repeat("[", 60000))},
		{"deep object", "POST", "/api/boxes", []byte(`{"name":` + strings.Repeat(`{"a":`, 20000))},
		{"over the bound", "POST", "/api/boxes", append([]byte(`{"name":"`), bytes.Repeat([]byte("a"), 1<<20)...)},
		{"control character in a name", "POST", "/api/boxes", []byte("{\"name\":\"a\\nb\"}")},
		{"HTML in a name", "POST", "/api/boxes", []byte(`{"name":"<script>"}`)},
		{"unicode name", "POST", "/api/boxes", []byte(`{"name":"ａｌｐｈａ"}`)},
		{"two values", "POST", "/api/boxes", []byte(`{"name":"beta"}{"name":"gamma"}`)},
		{"negative budget", "PUT", "/api/boxes/alpha/budgets", []byte(`{"usd":-1}`)},
		{"overflowing budget", "PUT", "/api/boxes/alpha/budgets", []byte(`{"usd":1e300}`)},
		{"NaN-ish budget", "PUT", "/api/boxes/alpha/budgets", []byte(`{"usd":"NaN"}`)},
		{"overflowing rate", "PUT", "/api/boxes/alpha/rate-limits", []byte(`{"rpm":99999999999999999999}`)},
		{"negative rate", "PUT", "/api/boxes/alpha/rate-limits", []byte(`{"rpm":-5}`)},
		{"overflowing grant ttl", "POST", "/api/boxes/alpha/grants", []byte(`{"principal":"github:ann","ttl":"9999999999h"}`)},
		{"negative token ttl", "POST", "/api/boxes/alpha/token", []byte(`{"ttl":"-1h"}`)},
		{"huge grace", "POST", "/api/boxes/alpha/token", []byte(`{"grace":"2562047h47m16.854775808s"}`)},
		{"window budget overflow", "PUT", "/api/boxes/alpha/window-budgets", []byte(`{"window":"1h","usd":1e30}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, b.AdminURL+tt.path, bytes.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+b.AdminToken)
			req.Header.Set("Content-Type", "application/json")
			resp, err := b.Client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var buf bytes.Buffer
			_, _ = buf.ReadFrom(resp.Body)
			if resp.StatusCode < 400 || resp.StatusCode >= 500 {
				t.Errorf("%s %s (%s) = %d %s, want a 4xx refusal", tt.method, tt.path, tt.name, resp.StatusCode, buf.Bytes())
			}
			if typ, msg := brokertest.Refusal(buf.Bytes()); typ == "" || msg == "" {
				t.Errorf("%s %s (%s) body = %s, want a refusal", tt.method, tt.path, tt.name, buf.Bytes())
			}
		})
	}
}

// TestAdmin_RefusalNeverEchoesAValuePastedInAURL: an operator who pastes
// a secret's or a pool entry's value, or another key, into its URL (as a
// query, a fragment, a path or a user) is refused without the refusal
// repeating it, as the owner's page already refuses it.
func TestAdmin_RefusalNeverEchoesAValuePastedInAURL(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.AddBox("alpha")
	const value = "sk-live-0123456789abcdefEchoMe"
	tests := []struct {
		name, method, path string
		body               map[string]any
	}{
		{"secret host query", "PUT", "/api/boxes/alpha/secrets/STRIPE", map[string]any{"host": "https://api.stripe.com/?key=" + value, "value": value}},
		{"secret host not a URL", "PUT", "/api/boxes/alpha/secrets/STRIPE", map[string]any{"host": value, "value": value}},
		{"secret host path punycode", "PUT", "/api/boxes/alpha/secrets/STRIPE", map[string]any{"host": "https://ä.example/" + value, "value": value}},
		{"pool entry url query", "PUT", "/api/credentials/pool/second", map[string]any{"url": "https://llm.example/?key=" + value, "value": value}},
		{"pool entry url not http", "PUT", "/api/credentials/pool/second", map[string]any{"url": "ftp://" + value, "value": value}},
		{"secret host query holding another key", "PUT", "/api/boxes/alpha/secrets/STRIPE", map[string]any{"host": "https://api.stripe.com/?api_key=" + value, "value": "sk-live-the-value-itself"}},
		{"secret host fragment holding another key", "PUT", "/api/boxes/alpha/secrets/STRIPE", map[string]any{"host": "https://api.stripe.com/#" + value, "value": "sk-live-the-value-itself"}},
		{"secret host opaque", "PUT", "/api/boxes/alpha/secrets/STRIPE", map[string]any{"host": "https:" + value, "value": "sk-live-the-value-itself"}},
		{"pool entry url query holding another key", "PUT", "/api/credentials/pool/second", map[string]any{"url": "https://llm.example/?key=" + value, "value": "sk-ant-api03-the-value-itself"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := b.Admin(tt.method, tt.path, b.AdminToken, tt.body)
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("%s %s = %d %s, want 400", tt.method, tt.path, resp.StatusCode, resp.Body)
			}
			if bytes.Contains(resp.Body, []byte("EchoMe")) {
				t.Errorf("%s %s refusal = %s, repeats the value", tt.method, tt.path, resp.Body)
			}
		})
	}
}

// TestAdmin_TokenPastedInAPathIsNeverEchoed: a token given where a box's
// name, a grant's ID or a principal goes, or in a path no route serves,
// is refused without the refusal repeating it.
func TestAdmin_TokenPastedInAPathIsNeverEchoed(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	box := b.AddBox("alpha")
	for _, tok := range []string{box, b.AdminToken} {
		for _, rt := range []struct{ method, path string }{
			{"GET", "/api/boxes/" + tok},
			{"DELETE", "/api/grants/" + tok},
			{"DELETE", "/api/visitors/" + tok},
			{"GET", "/api/boxes/alpha/secrets/" + tok},
			{"DELETE", "/api/boxes/alpha/secrets/" + tok},
			{"DELETE", "/api/credentials/" + tok},
			{"GET", "/api/nothing/" + tok},
			{"PATCH", "/api/audit/" + tok},
			{"GET", "/api/audit?box=" + tok},
		} {
			resp := b.Admin(rt.method, rt.path, b.AdminToken, nil)
			if resp.StatusCode < 400 {
				t.Errorf("%s %s = %d, want a refusal", rt.method, rt.path, resp.StatusCode)
			}
			if bytes.Contains(resp.Body, []byte(tok)) {
				t.Errorf("%s %s refusal = %s, repeats the token", rt.method, strings.ReplaceAll(rt.path, tok, "TOKEN"), resp.Body)
			}
		}
	}
}
